"""What `import tensorflow as tf` is inside the TF1 runner (`python -m bert_mgpu.compat`).

`module()` returns one module object that behaves as TensorFlow 1.x did for BERT-era code:
every name of `tf.compat.v1` (v2 behaviour is switched off by the runner), with

* `tf.flags`: absl's flags whose `FLAGS` parses `sys.argv` at the first attribute read, as
  TF1's `tf.flags.FLAGS` did (absl alone raises `UnparsedFlagAccessError`);
* `tf.app.run`, `tf.logging`, `tf.gfile`: `tf.compat.v1`'s (absl's run, parsing the flags);
* `tf.layers.dense`: a dense layer with `<name or dense>/kernel`, `/bias` in TF1's variable store
  (Keras 3 behind `tf.compat.v1.layers` raises);
* `tf.contrib`: the few names BERT-era code used: `layers.layer_norm`, `layers.xavier_initializer`,
  `compiler.jit.experimental_jit_scope`;
* what TF 2.21 no longer has (`tf.estimator`, `tf.contrib.tpu`'s TPUEstimator, the rest of
  `tf.contrib`): a placeholder whose first use stops the run with one line naming it, where
  the user's file used it, and the project's script that does that job (`Unavailable`).

Names of the real `tensorflow` that `tf.compat.v1` lacks are looked up there last.
"""

import contextlib
import os
import sys
import types

import tensorflow as tf

from bert_mgpu.compat.google_layers import dense, dropout, layer_norm

tf1 = tf.compat.v1

# The project's scripts that do what an Estimator / TPUEstimator job did.
INSTEAD_OF_ESTIMATOR = ("the project's run_classifier.py (classification), run_ner.py (tagging), "
                        "run_squad.py (SQuAD), run_pretraining.py, extract_features.py "
                        "(features)")
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unavailable(SystemExit):
    """Raised at the first use of something TF 2.21 does not have: ends the run with its one-line
    message (a SystemExit: no traceback, and `except Exception` in user code does not catch it)."""


# Google's scripts (and users' copies of them, which keep the name) -> the project's script that
# takes the same flags.
_SAME_JOB = ("run_classifier", "run_squad", "run_pretraining", "extract_features",
             "create_pretraining_data")


def _user_file_and_line():
    """(file name, line) of the innermost frame outside TensorFlow and this package, or None."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIR) and "site-packages" not in path:
            return os.path.basename(path), frame.f_lineno
        frame = frame.f_back
    return None


def unavailable(what, instead):
    """Raises `Unavailable`: `what` is not in TF 2.21; `instead` names what to use (a user's file
    named after one of Google's scripts is pointed at the project's script of that name)."""
    found = _user_file_and_line()
    where = f"{found[0]}:{found[1]}: " if found else ""
    stem = found[0][:-3] if found and found[0].endswith(".py") else ""
    same = [name for name in _SAME_JOB if stem.startswith(name)]
    if same:
        instead = f"the project's {same[0]}.py (Google's flags, the same job)"
    raise Unavailable(f"bert_mgpu.compat: ERROR: {where}{what} is not available in TensorFlow "
                      f"2.21; use {instead} (docs/your_own_code.md)")


class Missing:
    """A name TF 2.21 lacks: any attribute read, call or `with` ends the run (`unavailable`)."""

    def __init__(self, what, instead=INSTEAD_OF_ESTIMATOR):
        self._what = what
        self._instead = instead

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        unavailable(f"{self._what}.{name}", self._instead)

    def __call__(self, *args, **kwargs):
        unavailable(self._what, self._instead)

    def __enter__(self):
        unavailable(self._what, self._instead)

    def __exit__(self, *exc):
        return False


class _Namespace(types.SimpleNamespace):
    """A fixed set of names; any other name is `Missing` (used from the first read)."""

    def __init__(self, prefix, instead=INSTEAD_OF_ESTIMATOR, **names):
        super().__init__(**names)
        self._prefix = prefix
        self._instead = instead

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        unavailable(f"{self._prefix}.{name}", self._instead)


class _LazyFlagValues:
    """TF1's `tf.flags.FLAGS`: absl's `FLAGS`, parsing `sys.argv` (known flags only) at the
    first read of a flag if nothing parsed it yet."""

    def __init__(self, flag_values):
        object.__setattr__(self, "_flags", flag_values)

    def __getattr__(self, name):
        flags = object.__getattribute__(self, "_flags")
        if not flags.is_parsed():
            flags(sys.argv, known_only=True)
        return getattr(flags, name)

    def __setattr__(self, name, value):
        setattr(object.__getattribute__(self, "_flags"), name, value)

    def __contains__(self, name):
        return name in object.__getattribute__(self, "_flags")


_FLAGS_MODULE = None


def flags_module():
    """TF1's `tf.flags` (absl's flags, `FLAGS` parsing lazily); one module object."""
    global _FLAGS_MODULE
    if _FLAGS_MODULE is None:
        _FLAGS_MODULE = _new_flags_module()
    return _FLAGS_MODULE


def _new_flags_module():
    from absl import flags as absl_flags

    names = {name: getattr(absl_flags, name) for name in dir(absl_flags)
             if not name.startswith("_")}
    names["FLAGS"] = _LazyFlagValues(absl_flags.FLAGS)
    module = types.ModuleType("tensorflow.flags")
    module.__dict__.update(names)
    return module


def contrib_layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None, **unused):
    """`tf.contrib.layers.layer_norm` as Google's modeling.py calls it (last axis, variables
    `<scope or LayerNorm>/{beta,gamma}`, epsilon 1e-12)."""
    if begin_norm_axis != -1 or begin_params_axis != -1:
        unavailable("tf.contrib.layers.layer_norm over axes other than the last",
                    "bert_mgpu.compat.modeling.layer_norm (the last axis)")
    return layer_norm(inputs, scope)


@contextlib.contextmanager
def experimental_jit_scope(compile_ops=True, separate_compiled_gradients=False):
    """`tf.contrib.compiler.jit.experimental_jit_scope`: TF 2.21's `tf.xla` jit scope."""
    with tf1.xla.experimental.jit_scope(compile_ops, separate_compiled_gradients):
        yield


def _contrib():
    return _Namespace(
        "tf.contrib",
        layers=_Namespace("tf.contrib.layers", layer_norm=contrib_layer_norm,
                          xavier_initializer=tf1.glorot_uniform_initializer),
        compiler=_Namespace("tf.contrib.compiler", jit=_Namespace(
            "tf.contrib.compiler.jit", experimental_jit_scope=experimental_jit_scope)),
        tpu=Missing("tf.contrib.tpu"),
        cluster_resolver=Missing("tf.contrib.cluster_resolver"),
        crf=Missing("tf.contrib.crf",
                    "the project's run_ner.py (token tagging; a softmax head, no CRF)"),
        data=Missing("tf.contrib.data", "tf.data (Dataset.map, then batch)"),
    )


class _TF1Module(types.ModuleType):
    """`tensorflow` as TF1-era code saw it (the module docstring)."""

    def __getattr__(self, name):
        try:
            return getattr(tf1, name)
        except AttributeError:
            return getattr(tf, name)


_MODULE = None


def module():
    """The one TF1 `tensorflow` module object (built at the first call)."""
    global _MODULE
    if _MODULE is None:
        facade = _TF1Module("tensorflow", tf1.__doc__)
        facade.__dict__.update(
            flags=flags_module(), app=tf1.app, logging=tf1.logging, gfile=tf1.gfile,
            layers=_Namespace("tf.layers", "tf.compat.v1.get_variable with tf.nn ops (Keras 3 "
                              "behind tf.compat.v1.layers raises)", dense=dense,
                              dropout=lambda inputs, rate=0.5, training=False, **unused:
                              dropout(inputs, rate) if training else inputs),
            contrib=_contrib(), estimator=Missing("tf.estimator"),
            __version__=tf.__version__, __path__=tf.__path__, __file__=tf.__file__)
        _MODULE = facade
    return _MODULE
