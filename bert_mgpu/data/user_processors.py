"""Users' own processors (`--processors_file=FILE.py`): classes written against the
`DataProcessor` API of Google's `run_classifier.py`, pasted unchanged.

The file is run as Google's `run_classifier.py` would have run it, with what it imports there:
  - `import tokenization`: this package's `tokenization` (`convert_to_unicode`,
    `printable_text`, `FullTokenizer`, Google's behaviour);
  - `from run_classifier import DataProcessor, InputExample`: Google's base class (with
    `_read_tsv(input_file, quotechar=None)`) and example class;
  - `import tensorflow as tf` (or `tensorflow.compat.v1`): the TF1 names processors use and
    only those: `tf.gfile.Open/GFile/Exists/ListDirectory/Glob/IsDirectory/MakeDirs`,
    `tf.io.gfile.*`, `tf.logging.*` and `tf.compat.as_text/as_str/as_bytes`. Local paths are
    read with Python's `open` (UTF-8; a byte-order mark is dropped), so the file is loaded and
    its classes checked before TensorFlow loads; a remote path (gs://...) loads TensorFlow to
    read through tf.io.gfile. Any other `tf.` name is a one-line error naming the user's line
    and the name (`p.py:12 in get_labels: AttributeError: tensorflow.constant is not
    available (...)`).
  - `import modeling` / `import optimization` (the top of a pasted run_classifier.py) import
    empty modules; using them is the same one-line error. `from bert import ...` (the
    bert-tensorflow layout) gives the same modules.
  - `tf.flags` (`tf.app.flags`, `absl.flags`): `flags.DEFINE_*` record the file's own flags,
    which the script defines and parses with its own (`declared_flags`, called by the script
    through cli.flags_from_file: absl stays in cli.py); `FLAGS.x` reads the run's value of any
    flag, handed over as the config's `flags` (`set_run_flags`), never from absl here.

The file is loaded once per process, at start (when the flags are parsed, for its own flags; then
`check_classifier_inputs` checks the class and calls its get_labels()), so a syntax error, a
missing class, a method of the wrong shape or an error of get_labels() is one line before any
work and before TensorFlow loads.
`--task_name` picks a class by a key of Google's `processors = {"cola": ColaProcessor, ...}`
mapping when the file has one (module level or in `main()`, read with `ast`, not run), else by
Google's convention (the class name lower-cased without `Processor`, also with underscores between
its words: `HighLevelProcessor` -> `highlevel`, `high_level`) or by its name
(`--task_name=HighLevelProcessor`); a class of the file wins over a built-in task of the same
name. With `--task_type=multilabel` a class's labels are joined by commas (as the tsv task's).
An exception raised in the user's code is one line naming their file, line and function
(`my_processors.py:42 in get_train_examples: FileNotFoundError: ...`).

The feature cache key covers the file's content, the class and the files the processor read
(every file it opened; none seen: every file of --data_dir).
"""

import ast
import builtins
import contextlib
import csv
import glob as _glob
import hashlib
import inspect
import os
import re
import sys
import traceback
import types
from typing import Dict, List, Optional, Sequence

from absl import logging

from bert_mgpu import tokenization
from bert_mgpu.configs.base import Flag, split_tasks
from bert_mgpu.configs.classifier import TASK_TYPE_OF
from bert_mgpu.data import checks, processors
from bert_mgpu.data.processors import DataError, DataProcessor, InputExample, split_labels

# Files the user's code opened for reading while a split was read (None: not recording).
_reads: Optional[List[str]] = None


def _is_remote(path: str) -> bool:
    return "://" in str(path)


def _record(path) -> None:
    if _reads is not None:
        _reads.append(str(path) if _is_remote(path) else os.path.abspath(path))


def _open_for_user(path, mode: str = "r", *args, **kwargs):
    """`open` as the user's file sees it (and tf.gfile.Open/GFile): local text read as UTF-8
    with a byte-order mark dropped; remote paths through tf.io.gfile."""
    if not any(c in mode for c in "wax+"):
        _record(path)
    if _is_remote(path):
        import tensorflow as tf
        return tf.io.gfile.GFile(path, mode)
    if "b" not in mode and not args and "encoding" not in kwargs:
        kwargs["encoding"] = "utf-8-sig" if "r" in mode else "utf-8"
    return builtins.open(path, mode, *args, **kwargs)


# tf.io.gfile's file functions (TF 2 names) -> tf.gfile's (TF 1 names).
_GFILE_NAMES = {"exists": "Exists", "listdir": "ListDirectory", "isdir": "IsDirectory",
                "glob": "Glob", "makedirs": "MakeDirs"}


def _gfile(name):
    def call(path, *args):
        if _is_remote(path):
            import tensorflow as tf
            return getattr(tf.io.gfile, name)(path, *args)
        return {"exists": os.path.exists, "listdir": os.listdir, "isdir": os.path.isdir,
                "glob": lambda p: sorted(_glob.glob(p)),
                "makedirs": lambda p: os.makedirs(p, exist_ok=True)}[name](path, *args)
    return call


def _shim(name: str, offers: str, **attributes) -> types.ModuleType:
    """A module a user's file imports in place of one of Google's (or TensorFlow): only the
    named `attributes`; any other name is an AttributeError that `user_error` words with
    `offers` (what the module does have)."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__shim_offers__ = offers
    return module


def _tensorflow_shim() -> types.ModuleType:
    """`tf` of a TF1 processor: the file and logging names processors use, without loading
    TensorFlow (a remote path loads it to read through tf.io.gfile)."""
    offers = ("a --processors_file's tensorflow has gfile, io.gfile, logging and compat "
              "(v1, as_text, as_str, as_bytes)")
    gfile = _shim("tensorflow.gfile", offers, Open=_open_for_user, GFile=_open_for_user,
                  **{tf1: _gfile(name) for name, tf1 in _GFILE_NAMES.items()})
    io_gfile = _shim("tensorflow.io.gfile", offers, GFile=_open_for_user,
                     **{name: _gfile(name) for name in _GFILE_NAMES})
    logging_ = _shim("tensorflow.logging", offers, info=logging.info, warning=logging.warning,
                     warn=logging.warning, error=logging.error, debug=logging.debug,
                     set_verbosity=lambda level: None, DEBUG=logging.DEBUG, INFO=logging.INFO,
                     WARN=logging.WARNING, ERROR=logging.ERROR)
    tf = _shim("tensorflow", offers, gfile=gfile, logging=logging_,
               io=_shim("tensorflow.io", offers, gfile=io_gfile))
    tf.compat = _shim("tensorflow.compat", offers, v1=tf, as_text=_as_text, as_str=_as_text,
                      as_bytes=_as_bytes)
    return tf


def _as_text(value, encoding: str = "utf-8") -> str:
    """tf.compat.as_text: text unchanged, bytes decoded (strictly, as TensorFlow's)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


def _as_bytes(value, encoding: str = "utf-8") -> bytes:
    """tf.compat.as_bytes: bytes unchanged, text encoded."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


class DuplicateFlagError(ValueError):
    """A flag a processors file defines twice (absl's error of the same name)."""


# The run's flag values (`cfg.flags`: the script's and the processors files' own), which
# `FLAGS.<name>` of a processors file reads; None: no run (the file loaded in code).
_run_flags: Optional[dict] = None
# The processors files being run (load) right now.
_loading: set = set()


def set_run_flags(values: Optional[dict]) -> None:
    """Gives the processors files' `FLAGS` the run's values (`cfg.flags`, which the CLI filled
    from absl: this module never reads absl's FLAGS); None: no run."""
    global _run_flags
    _run_flags = None if values is None else dict(values)


class _FlagValues:
    """`FLAGS` of a processors file: the run's value of any flag of the script (`FLAGS.data_dir`)
    or of the file's own (`flags.DEFINE_*` in the file); loaded outside a run, the file's own
    flags read their defaults."""

    def __init__(self, path: str, defined: Dict[str, tuple]):
        self._path, self._defined = path, defined

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._path in _loading:
            # The file runs while the flags are parsed: no value is known yet (absl's
            # UnparsedFlagAccessError in Google's script), and a default would be silently wrong.
            raise AttributeError(f"FLAGS.{name} is read while the file loads, before the flags "
                                 f"are parsed: read it in the processor's methods")
        if _run_flags is not None and name in _run_flags:
            return _run_flags[name]
        if name in self._defined:
            return self._defined[name][0].default
        known = "the script's flags and the file's own flags.DEFINE_*"
        if _run_flags is None:
            known = "the file's own flags.DEFINE_* (loaded outside a run: no script's flags)"
        raise AttributeError(f"FLAGS.{name} is not a flag ({known})")

    def __contains__(self, name: str) -> bool:
        return (_run_flags is not None and name in _run_flags) or name in self._defined


def _flags_shim(path: str, defined: Dict[str, tuple]) -> types.ModuleType:
    """`tf.flags` (`tf.app.flags`, `absl.flags`) of the processors file `path`: DEFINE_* record
    the file's own flags in `defined` (name -> (Flag, line)), which the script defines and
    parses with its own (data/user_processors.declared_flags)."""
    def record(kind, name, default, help_text, enum=()):
        line = next((f.lineno for f in reversed(traceback.extract_stack())
                     if f.filename == path), 0)
        if name in defined:
            raise DuplicateFlagError(f"flag --{name} is defined twice (first at "
                                     f"{path}:{defined[name][1]})")
        defined[name] = (Flag(kind, default, help_text or "", tuple(enum)), line)

    def definer(kind):
        return lambda name, default, help=None, *args, **kwargs: record(  # noqa: A002
            kind, name, default, help)

    def define_enum(name, default, enum_values, help=None, *args, **kwargs):  # noqa: A002
        record("enum", name, default, help, enum_values)

    offers = ("a --processors_file's flags module has DEFINE_string, DEFINE_bool, "
              "DEFINE_integer, DEFINE_float, DEFINE_list, DEFINE_enum and FLAGS")
    definers = {f"DEFINE_{name}": definer(kind) for name, kind in (
        ("string", "string"), ("bool", "bool"), ("boolean", "bool"), ("integer", "integer"),
        ("float", "float"), ("list", "list"))}
    definers["DEFINE_enum"] = define_enum
    return _shim("flags", offers, FLAGS=_FlagValues(path, defined),
                 mark_flag_as_required=lambda name, flag_values=None: None, **definers)


class GoogleInputExample:
    """Google's `run_classifier.InputExample`: guid, text_a, text_b=None, label=None."""

    def __init__(self, guid, text_a, text_b=None, label=None):
        self.guid = guid
        self.text_a = text_a
        self.text_b = text_b
        self.label = label

    def __repr__(self):
        return (f"InputExample(guid={self.guid!r}, text_a={self.text_a!r}, "
                f"text_b={self.text_b!r}, label={self.label!r})")


class GoogleDataProcessor:
    """Google's `run_classifier.DataProcessor` (the base class users' processors extend)."""

    def get_train_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the train set."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the dev set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """Gets a collection of `InputExample`s for prediction."""
        raise NotImplementedError()

    def get_labels(self):
        """Gets the list of labels for this data set."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Reads a tab separated value file."""
        with _open_for_user(input_file, "r") as f:
            reader = csv.reader(f, delimiter="\t", quotechar=quotechar)
            return [line for line in reader]


_NOT_NEEDED = ("a --processors_file runs processors only: Google's models and optimizer are "
               "not in it")


def _shim_modules(path: str, defined: Dict[str, tuple]) -> Dict[str, types.ModuleType]:
    """The modules the processors file `path` imports in place of Google's, TensorFlow's and
    absl's flags (`defined`: where its flags.DEFINE_* record its own flags)."""
    run_classifier = types.ModuleType("run_classifier")
    run_classifier.DataProcessor = GoogleDataProcessor
    run_classifier.InputExample = GoogleInputExample
    run_classifier.tokenization = tokenization
    tf = _tensorflow_shim()
    flags = _flags_shim(path, defined)
    tf.flags = flags
    tf.app = _shim("tensorflow.app", flags.__shim_offers__, flags=flags)
    run_classifier.tf = tf
    google = {"tokenization": tokenization, "run_classifier": run_classifier,
              "modeling": _shim("modeling", _NOT_NEEDED),
              "optimization": _shim("optimization", _NOT_NEEDED)}
    # `from bert import tokenization, run_classifier` (the bert-tensorflow package's layout).
    bert = _shim("bert", "a --processors_file's bert package has tokenization, run_classifier, "
                         "modeling and optimization", **google)
    absl = _shim("absl", "a --processors_file's absl has flags and logging", flags=flags,
                 logging=logging)
    return {"tensorflow": tf, "bert": bert, "absl": absl, **google}


def _user_builtins(shims: Dict[str, types.ModuleType]) -> dict:
    """The builtins of the user's file: imports of Google's modules get the shims, `open`
    records what it reads."""
    def user_import(name, globals=None, locals=None, fromlist=(), level=0):
        top = name.split(".")[0]
        if level == 0 and top in shims:
            return shims[top]
        return builtins.__import__(name, globals, locals, fromlist, level)

    namespace = dict(vars(builtins))
    namespace["__import__"] = user_import
    namespace["open"] = _open_for_user
    return namespace


def _where(e: BaseException, path: str) -> str:
    """`FILE:LINE in FUNCTION` of the deepest frame of `e` in the user's file."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    if isinstance(e, SyntaxError) and e.filename == path:
        return f"{path}:{e.lineno}"
    if not frames:
        return path
    frame = frames[-1]
    return f"{path}:{frame.lineno} in {frame.name}"


def user_error(e: BaseException, path: str) -> DataError:
    """One line for an exception raised in the user's code."""
    message = e.msg if isinstance(e, SyntaxError) else str(e)
    offers = getattr(getattr(e, "obj", None), "__shim_offers__", None)
    if isinstance(e, AttributeError) and offers:
        message = f"{e.obj.__name__}.{e.name} is not available ({offers})"
    return DataError(f"{_where(e, path)}: {type(e).__name__}: {message}".rstrip(": "))


_LOADED: Dict[str, dict] = {}


def load(path: str) -> dict:
    """The namespace of the processors file `path` (run once per process).

    Raises:
      DataError: the file is missing, or raises or does not parse (one line naming the line).
    """
    key = os.path.abspath(path)
    if key in _LOADED:
        return _LOADED[key]
    if not os.path.isfile(path):
        raise DataError(f"--processors_file: {path} not found")
    with open(path, "rb") as f:
        source = f.read()
    module = types.ModuleType(f"bert_mgpu_processors_{len(_LOADED)}")
    module.__file__ = path
    defined: Dict[str, tuple] = {}
    module.__builtins__ = _user_builtins(_shim_modules(path, defined))
    # Registered so that what looks a class's module up (dataclasses, pickle) finds it.
    sys.modules[module.__name__] = module
    _loading.add(path)
    try:
        code = compile(source, path, "exec")
        exec(code, module.__dict__)  # noqa: S102 - the user's own processors, as Google's
    except Exception as e:  # pylint: disable=broad-except
        raise user_error(e, path) from None
    finally:
        _loading.discard(path)
    _LOADED[key] = module.__dict__
    _LOADED[key]["__sha256__"] = hashlib.sha256(source).hexdigest()
    _LOADED[key]["__flags__"] = defined
    _LOADED[key]["__task_mapping__"] = task_mapping(ast.parse(source, path))
    return _LOADED[key]


def task_mapping(tree: ast.Module) -> Dict[str, str]:
    """--task_name key -> class name of Google's `processors = {"cola": ColaProcessor, ...}`
    in the file (`tree`), a dict literal at module level or inside `main()`; read, not run
    (Google's main() runs only in Google's script). Keys lower-cased, as Google's main looks
    them up (`FLAGS.task_name.lower()`); the first of several such dicts wins."""
    mains = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name == "main"]
    for scope in [tree.body] + [list(ast.walk(m)) for m in mains]:
        for node in scope:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and
                    any(isinstance(t, ast.Name) and t.id == "processors"
                        for t in node.targets)):
                continue
            mapping = {}
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and \
                        isinstance(v, ast.Name):
                    mapping.setdefault(k.value.lower(), v.id)
            if mapping:
                return mapping
    return {}


def task_names(class_name: str) -> List[str]:
    """The --task_name values that pick a class: Google's convention (lower-cased, without
    `Processor`; also with underscores between its words) and the class name itself."""
    stem = class_name[:-len("Processor")] if class_name.endswith("Processor") else class_name
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", stem).lower()
    return list(dict.fromkeys([stem.lower(), words, class_name.lower()]))


def processor_classes(namespace: dict) -> Dict[str, type]:
    """Class name -> class of every processor class in the file (a class with a
    `get_train_examples`, not a `DataProcessor` base)."""
    return {name: value for name, value in namespace.items()
            if isinstance(value, type) and name != "DataProcessor" and
            value is not GoogleDataProcessor and
            callable(getattr(value, "get_train_examples", None))}


def find_class(path: str, task_name: str) -> Optional[type]:
    """The class of `path` that `task_name` picks, or None: a key of the file's `processors`
    mapping (task_mapping) first, then the class names (task_names).

    Raises:
      DataError: the file cannot be loaded, two classes answer to the name, or the mapping's
        class for it is not in the file (and no built-in task has the name).
    """
    namespace = load(path)
    classes = processor_classes(namespace)
    mapped = namespace["__task_mapping__"].get(task_name.lower())
    if mapped in classes:
        return classes[mapped]
    if mapped is not None and task_name.lower() not in processors.PROCESSORS:
        raise DataError(f"--task_name={task_name}: the processors mapping of "
                        f"--processors_file={path} gives it {mapped}, which the file does not "
                        f"define (its classes: {describe_classes(path)})")
    matches = [cls for name, cls in classes.items() if task_name.lower() in task_names(name)]
    if len(matches) > 1:
        raise DataError(f"--task_name={task_name}: several classes of --processors_file={path} "
                        f"answer to it ({', '.join(c.__name__ for c in matches)}); give the "
                        f"class name, e.g. --task_name={matches[0].__name__}")
    return matches[0] if matches else None


def describe_classes(path: str) -> str:
    """`HighLevelProcessor (high_level), ...`: the file's classes and their task names (the
    keys of its processors mapping, else Google's convention)."""
    namespace = load(path)
    keys: Dict[str, List[str]] = {}
    for key, name in namespace["__task_mapping__"].items():
        keys.setdefault(name, []).append(key)
    return ", ".join(f"{name} ({', '.join(keys.get(name, task_names(name)[:1]))})"
                     for name in processor_classes(namespace)) or "none"


def declared_flags(path: str, taken) -> Dict[str, Flag]:
    """The processors file's own flags (its `flags.DEFINE_*`), for the script to define and
    parse with its own; `taken`: the names of the script's flags.

    Raises:
      DataError: the file cannot be loaded, defines a flag twice, or defines one of the
        script's flags (one line naming the file's line).
    """
    defined = load(path)["__flags__"]
    for name, (flag, line) in defined.items():
        if name in taken:
            raise DataError(f"{path}:{line}: flags.DEFINE_{flag.kind}('{name}', ...) defines "
                            f"--{name}, which the script already has: delete that line "
                            f"(FLAGS.{name} reads the run's --{name})")
    return {name: flag for name, (flag, _) in defined.items()}


_SPLIT_METHODS = {"train": "get_train_examples", "dev": "get_dev_examples",
                  "test": "get_test_examples"}


def _method_problem(cls: type, method: str, args: Sequence) -> Optional[str]:
    """Why `cls.method` cannot be called as Google's code calls it, or None."""
    owner = next((c for c in cls.__mro__ if method in vars(c)), None)
    if owner is None:
        return f"{cls.__name__} has no method {method}()"
    if owner.__name__ == "DataProcessor" or owner is GoogleDataProcessor:
        return (f"{cls.__name__}.{method}() is not implemented (only the base class "
                f"DataProcessor's, which raises NotImplementedError)")
    attribute = inspect.getattr_static(cls, method)
    function = getattr(attribute, "__func__", attribute)  # staticmethod/classmethod: unwrapped
    if not callable(function):
        return f"{cls.__name__}.{method} is not a method"
    first = [] if isinstance(attribute, staticmethod) else [None]  # self or cls
    try:
        inspect.signature(function).bind(*first, *args)
    except TypeError:
        wanted = ", ".join(["self"] + ["data_dir"] * len(args))
        return (f"{cls.__name__}.{method}{inspect.signature(function)} does not take Google's "
                f"arguments ({method}({wanted}))")
    except ValueError:
        return None  # no signature (a builtin): called and checked then
    return None


class UserProcessor(DataProcessor):
    """A user's Google-API processor as this package's `DataProcessor`: labels as strings,
    examples as `InputExample`s checked against the labels, the files read for the cache key,
    errors in the user's code as one line."""

    def __init__(self, path: str, cls: type, task_type: str = "classification"):
        self.path, self.cls = path, cls
        self.task_type = task_type
        # (data_dir, split) -> the files read, the examples.
        self._files: Dict[tuple, List[str]] = {}
        self._examples: Dict[tuple, List[InputExample]] = {}
        self._labels: Optional[List[str]] = None
        for method, args in (("get_train_examples", ["d"]), ("get_dev_examples", ["d"]),
                             ("get_labels", [])):
            self._check(method, args)
        with self._user_code():
            self.user = cls()

    def _check(self, method: str, args, needed_by: str = "") -> None:
        problem = _method_problem(self.cls, method, args)
        if problem:
            raise DataError(f"{self.path}: {problem}{needed_by} (Google's DataProcessor API: "
                            f"get_train_examples(data_dir), get_dev_examples(data_dir), "
                            f"get_test_examples(data_dir), get_labels())")

    def check_splits(self, splits: Sequence[str]) -> None:
        """Raises DataError unless the class reads every split in `splits` (at start)."""
        for split in splits:
            flag = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}[split]
            self._check(_SPLIT_METHODS[split], ["d"], f", which {flag} needs")

    def check_files(self, data_dir: str, splits: Sequence[str]) -> None:
        """--data_dir only: which files the class reads is known once its code has run."""
        del splits
        processors.check_data_dir(data_dir)

    @contextlib.contextmanager
    def _user_code(self, files: Optional[List[str]] = None):
        global _reads
        previous, _reads = _reads, files
        try:
            yield
        except DataError:
            raise
        except Exception as e:  # pylint: disable=broad-except
            raise user_error(e, self.path) from None
        finally:
            _reads = previous

    def cache_parts(self) -> dict:
        return {"processors_file": load(self.path)["__sha256__"], "class": self.cls.__name__}

    def get_labels(self, data_dir=None):
        if self._labels is None:
            with self._user_code():
                labels = self.user.get_labels()
            if not isinstance(labels, (list, tuple)) or not labels:
                raise DataError(f"{self.path}: {self.cls.__name__}.get_labels() returned "
                                f"{labels!r}, not a non-empty list of labels")
            names = [str(label) for label in labels]
            if len(set(names)) != len(names):
                raise DataError(f"{self.path}: {self.cls.__name__}.get_labels() has a label "
                                f"twice: {names}")
            self._labels = names
        return list(self._labels)

    def _read(self, data_dir: str, split: str) -> List[InputExample]:
        if (data_dir, split) in self._examples:
            return self._examples[data_dir, split]
        method = _SPLIT_METHODS[split]
        self._check(method, ["d"])
        files: List[str] = []
        with self._user_code(files):
            got = getattr(self.user, method)(data_dir)
        labels = self.get_labels()
        known = set(labels)
        examples = []
        where = f"{self.path}: {self.cls.__name__}.{method}()"
        try:
            items = list(got)
        except TypeError:
            raise DataError(f"{where} returned {type(got).__name__}, not a list of "
                            f"InputExample") from None
        for i, e in enumerate(items):
            try:
                guid, text_a, text_b, label = e.guid, e.text_a, e.text_b, e.label
            except AttributeError:
                raise DataError(f"{where}: item {i} is a {type(e).__name__}, not an "
                                f"InputExample(guid, text_a, text_b=None, label=None)") from None
            if not isinstance(text_a, str) or not (text_b is None or isinstance(text_b, str)):
                raise DataError(f"{where}: example {guid}: text_a/text_b must be strings, got "
                                f"{type(text_a).__name__}/{type(text_b).__name__}")
            label = None if label is None else str(label)
            if label is not None and not self._known(label, known):
                if split == "test":
                    label = None  # a test file's placeholder label: predictions need none
                else:
                    raise DataError(f"{where}: example {guid} has the label {label!r}, not one "
                                    f"of get_labels() {labels}")
            examples.append(InputExample(str(guid), text_a, text_b, label))
        self._files[data_dir, split] = list(dict.fromkeys(files))
        self._examples[data_dir, split] = examples
        return examples

    def _known(self, label: str, known) -> bool:
        """Whether every label of `label` is one of get_labels() (multilabel: the names joined
        by commas, as the tsv task reads them; none is allowed)."""
        if self.task_type == "multilabel":
            return all(name in known for name in split_labels(label))
        return label in known

    def get_train_examples(self, data_dir):
        return self._read(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._read(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._read(data_dir, "test")

    def input_files(self, data_dir, split):
        """The files the processor read for `split` (read now if not yet); none seen (it read
        through something else than open/tf.gfile): every file of `data_dir`."""
        self._read(data_dir, split)
        files = self._files[data_dir, split]
        if not files and os.path.isdir(data_dir):
            files = sorted(p for p in (os.path.join(data_dir, n) for n in os.listdir(data_dir))
                           if os.path.isfile(p))
        return files


def get_processor(path: str, task_name: str,
                  task_type: str = "classification") -> Optional[UserProcessor]:
    """The processor of `task_name` from the file `path`, or None when no class of it answers
    to the name (a built-in task then).

    Raises:
      DataError: the file cannot be loaded, the class does not follow Google's API, or its
        constructor raises.
    """
    cls = find_class(path, task_name)
    if cls is None:
        return None
    if task_type not in ("classification", "multilabel"):
        raise DataError(f"--task_type={task_type}: a --processors_file class ({cls.__name__}) "
                        f"is a classification task, or with --task_type=multilabel one whose "
                        f"labels are joined by commas")
    return UserProcessor(path, cls, task_type)


def processor_for(task_name: str, label_list: Optional[Sequence[str]] = None,
                  task_type: str = "classification", processors_file: Optional[str] = None,
                  tsv_options: Optional[dict] = None):
    """The processor of `--task_name`: with `processors_file`, a class of that file answering
    to the name comes first, else the built-in task (processors.get_processor).

    Raises:
      ValueError: an unknown task (naming the file's classes too), or --label_list given for a
        user's class (its labels are its get_labels()).
      DataError: the file cannot be loaded or its class does not follow Google's API.
    """
    elsewhere = None
    if processors_file:
        processor = get_processor(processors_file, task_name, task_type)
        if processor is not None:
            if label_list:
                raise ValueError(f"--label_list only applies to --task_name=tsv; the labels of "
                                 f"{processor.cls.__name__} are its get_labels()")
            return processor
        elsewhere = (f"; in --processors_file={processors_file}: "
                     f"{describe_classes(processors_file)}")
        fixed = TASK_TYPE_OF.get(task_name.lower(), "classification")
        if task_name.lower() != "tsv" and task_type != fixed:
            # ClassifierConfig leaves this to the file's classes, which it cannot see.
            raise ValueError(f"--task_type={task_type}: --task_name={task_name} is a {fixed} "
                             f"task (other task types need --task_name=tsv, or a "
                             f"--processors_file class with --task_type=multilabel)")
    return processors.get_processor(task_name, label_list, task_type, tsv_options, elsewhere)


def for_config(cfg):
    """The processor of a single-task ClassifierConfig (the processors files' `FLAGS` read its
    run's flags)."""
    set_run_flags(cfg.flags)
    return processor_for(cfg.task_name, cfg.label_list, cfg.task_type, cfg.processors_file,
                         dict(text_columns=cfg.text_columns, column_names=cfg.column_names,
                              data_format=cfg.data_format))


def check_classifier_inputs(cfg) -> None:
    """run_classifier_mgpu.py's inputs at start (`cfg`: a ClassifierConfig): an unknown
    --task_name, a processors file that does not load or a class that does not follow Google's
    API (the file is run here), its get_labels(), a split the run needs missing, --data_dir
    and the split files (a tsv/csv file's columns), each task's --label_list, the model
    files and the weights its evaluation or prediction would use."""
    set_run_flags(cfg.flags)
    names = split_tasks(cfg.flags["task_name"])  # as given: a class name keeps its case
    splits = [s for s, wanted in (("train", cfg.do_train), ("dev", cfg.do_eval),
                                  ("test", cfg.do_predict)) if wanted]
    tsv_options = dict(text_columns=cfg.text_columns, column_names=cfg.column_names,
                       data_format=cfg.data_format)
    for name, task in zip(names, cfg.task_configs()):
        processor = processor_for(name, task.label_list, task.task_type,
                                  processors_file=cfg.processors_file, tsv_options=tsv_options)
        processor.check_splits(splits)
        processor.check_files(task.data_dir, splits)
        if isinstance(processor, UserProcessor):
            processor.get_labels()  # the user's code: its errors before TensorFlow loads
    checks.check_model_files(cfg.model)
    checks.check_weights_to_evaluate(cfg, cfg.do_predict)
