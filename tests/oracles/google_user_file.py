"""Runs a user's TF1-era file with Google's own BERT modules, as its author ran it: the test
oracle for `python -m bert_mgpu.compat USER_FILE.py` (tests/test_compat_users.py).

Executed only in the oracle virtualenv (BERT_MGPU_ORACLE_PYTHON), never imported by the project.
What the file imports resolves to Google's code: `modeling`, `tokenization`, `optimization`,
`run_classifier` to google-research/bert at eedf571 (../shared/material/oracles, Google's
repository on the path), `bert.*` to the bert-tensorflow 1.0.4 package. TensorFlow 2.21 runs
them as TF 1.x did with the same stand-ins the other oracles use: `tf.compat.v1` for
`tensorflow` (v2 behaviour off), tf-keras behind `tf.layers.dense` (TF_USE_LEGACY_KERAS=1),
`tensorflow.contrib.layers.layer_norm` (tests/oracles/_google_compat.py), and TF1's lazy
`tf.flags.FLAGS` (parsed from sys.argv at the first read, known flags only).

A notebook (`USER_FILE.ipynb`) runs its code cells in order in one namespace.

Usage:
  python google_user_file.py GOOGLE_DIR USER_FILE.py|USER_FILE.ipynb [ARGS...]
"""

import json
import os
import runpy
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from _google_compat import install_contrib_shim  # noqa: E402
from absl import flags as absl_flags  # noqa: E402

tf1 = tf.compat.v1


def _lazy_flags():
    """TF1's FLAGS parsed sys.argv at the first attribute read; absl raises instead."""
    cls = absl_flags.FlagValues
    original = cls.__getattr__

    def getattr_(self, name):
        if not self.__dict__["__flags_parsed"] and name in self.__dict__["__flags"]:
            self(sys.argv, known_only=True)
        return original(self, name)

    cls.__getattr__ = getattr_


def prepare(google_dir, script, args):
    """Google's modules and TF1 for `script`, run with `args` (nothing of the file runs yet)."""
    install_contrib_shim()
    tf1.contrib = sys.modules["tensorflow.contrib"]  # Google's code reads `tf.contrib.layers`
    tf1.disable_v2_behavior()
    _lazy_flags()
    sys.modules["tensorflow"] = tf1
    sys.argv = [script] + args
    sys.path[:0] = [os.path.dirname(os.path.abspath(script)), google_dir]


def run(script):
    """Runs a .py file as `__main__`, or a notebook's code cells in order in one namespace (as
    Jupyter's Run All; a cell that is not Python, e.g. an IPython `!` line, fails here)."""
    if not script.endswith(".ipynb"):
        runpy.run_path(script, run_name="__main__")
        return
    with open(script, encoding="utf-8") as f:
        cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    namespace = {"__name__": "__main__"}
    for index, cell in enumerate(cells, 1):
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        exec(compile(source, f"{script} code cell {index}", "exec"), namespace)


def main(google_dir, script, args):
    prepare(google_dir, script, args)
    run(script)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
