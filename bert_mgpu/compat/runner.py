"""The TF1 runner: `python -m bert_mgpu.compat USER_SCRIPT.py [ARGS...]`.

Runs a BERT-era user file unchanged on TensorFlow 2.21:

* TF1 behaviour (`tf.compat.v1.disable_v2_behavior()`: graphs, placeholders, `Session`);
* `import tensorflow as tf` in the user's own files (any file outside the Python installation
  and this package) gives `tf1.module()` (flags, app, logging, gfile, layers.dense, contrib);
  TensorFlow's and the project's own modules keep the real `tensorflow`;
* `modeling`, `tokenization`, `optimization`, `run_classifier` (Google's repository on the path)
  and `bert.<those>` (the bert-tensorflow package) import the project's `bert_mgpu.compat`
  modules, ahead of files of those names next to the script. This happens only inside the
  runner (an import hook it installs); the installed package adds no top-level `modeling` or
  `bert` module.

A Jupyter notebook (`NOTEBOOK.ipynb`) runs as "Run All" would (`notebook.py`): its code cells
in order; IPython's shell and magic lines are refused with one line before any cell runs, unless
`--skip_ipython_lines` (given before the notebook) skips them, each listed on stderr.

A module the runner does not provide, or something TF 2.21 lacks, ends the run with one line
`bert_mgpu.compat: ERROR: FILE:LINE: ...` (exit code 1), never a traceback.
"""

import builtins
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import sysconfig
import traceback
import types

from bert_mgpu.compat import notebook

PROVIDED = ("modeling", "tokenization", "optimization", "run_classifier")
# Google's other modules -> the project's script that does their job.
INSTEAD = {"run_squad": "run_squad.py", "run_pretraining": "run_pretraining.py",
           "extract_features": "extract_features.py",
           "create_pretraining_data": "create_pretraining_data.py",
           "run_classifier_with_tfhub": "run_classifier.py"}
_PREFIX = "bert_mgpu.compat: ERROR: "
# sha256 of Google's released files of those names (google-research/bert eedf571, PyPI
# bert-tensorflow 1.0.4): a copy next to a user's file that equals one of them loses nothing.
_GOOGLE_RELEASES = {
    "modeling": ("6f5e7c2d157ef46c092f8bc0538e60775f9fa0d40f957c8a3529ead18ff4dded",
                 "c00c4ea3c8108154179f87855e2eb22529e7a2296e378fea791cf5bd9d793832"),
    "tokenization": ("576f8e709eaa59c999a8aed3f32c581487d59ab47079fe64b3d3fa457bc7fb34",
                     "8e76b522bc378162c357552136ca648fb02689b28a96d0054bc6cb4cce6b1416"),
    "optimization": ("5b0943f0f068320f2902e3ba103289737389e6103de4bc24afe3baa6e486268f",
                     "b95d13ee2f44b2f2e1f4ec830ce468f0be38a2a8c73e53151f4f26f86ca2f924"),
    "run_classifier": ("53e9aaa27864cb89cc15328d4a337d83b2451bc6f9c904ddf8a59d4df8ccecdb",
                       "8a210bc1d0e0dd318259762e88210b93fe61cff363c2ee60e88e10962ed974e9"),
}
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SYSTEM_DIRS = tuple(sorted({os.path.realpath(p) for p in (
    sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["stdlib"],
    sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], _PACKAGE_DIR)}))


class _ExistingModuleLoader(importlib.abc.Loader):
    """Loads an import name as an already imported module object (the same object under both
    names, so classes and isinstance checks agree)."""

    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        if self._target is None:
            package = types.ModuleType(spec.name, "Google's bert-tensorflow package layout, "
                                                  "provided by bert_mgpu.compat")
            package.__path__ = []
            return package
        return importlib.import_module(self._target)

    def exec_module(self, module):
        """Nothing to run: the module is complete."""


class GoogleModulesFinder(importlib.abc.MetaPathFinder):
    """Resolves Google's module names (`modeling`, ..., `bert`, `bert.modeling`, ...)."""

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if fullname == "bert":
            return importlib.machinery.ModuleSpec("bert", _ExistingModuleLoader(None),
                                                  is_package=True)
        if len(parts) == 2 and parts[0] == "bert" or len(parts) == 1 and parts[0] in PROVIDED:
            name = parts[-1]
            if name not in PROVIDED:
                instead = INSTEAD.get(name, "scripts (docs/your_own_code.md)")
                # No `name=`: `from bert import x` would take a ModuleNotFoundError naming
                # bert.x for "not a submodule" and report the less clear "cannot import name".
                raise ModuleNotFoundError(
                    f"{fullname} is not provided by bert_mgpu.compat (it provides "
                    f"{', '.join(PROVIDED)}, also as bert.*); use the project's {instead}")
            return importlib.machinery.ModuleSpec(
                fullname, _ExistingModuleLoader(f"bert_mgpu.compat.{name}"))
        return None


def _is_user_code(module_globals):
    """Whether an import comes from the user's code (not Python's, TensorFlow's or ours)."""
    if not module_globals:
        return False
    path = module_globals.get("__file__")
    if not path:
        return module_globals.get("__name__") == "__main__"
    return not os.path.realpath(path).startswith(_SYSTEM_DIRS)


def _tensorflow_import(real_import, facade):
    """An `__import__` that gives the user's code the TF1 `tensorflow` (`tf1.module()`)."""

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")) \
                and _is_user_code(globals):
            if name.startswith("tensorflow.contrib") or name == "tensorflow.estimator":
                # Gone from TF 2.21: resolved through the TF1 module's placeholders.
                found = facade
                for part in name.split(".")[1:] if fromlist else ():
                    found = getattr(found, part)
                return found
            module = real_import(name, globals, locals, fromlist, level)
            if name == "tensorflow" or not fromlist:
                return facade
            return module
        return real_import(name, globals, locals, fromlist, level)

    return import_


def _user_frame(tb):
    """'file:line: ' of the innermost traceback frame in the user's code, or ''."""
    found = ""
    for frame, line in traceback.walk_tb(tb):
        if _is_user_code(frame.f_globals) and not frame.f_code.co_filename.startswith("<"):
            found = f"{os.path.basename(frame.f_code.co_filename)}:{line}: "
    return found


def install():
    """TF1 behaviour, Google's module names and the TF1 `tensorflow` for the user's code."""
    import tensorflow as tf

    from bert_mgpu.compat import tf1

    tf.compat.v1.disable_v2_behavior()
    facade = tf1.module()
    sys.meta_path.insert(0, GoogleModulesFinder())
    builtins.__import__ = _tensorflow_import(builtins.__import__, facade)


USAGE = ("usage: python -m bert_mgpu.compat [--skip_ipython_lines] USER_SCRIPT.py|NOTEBOOK.ipynb "
         "[ARGS...]\n")


def main(argv=None):
    """Runs the user's script or notebook (the first argument after the runner's own options)
    with the rest as its arguments; returns the exit code."""
    argv = list(sys.argv if argv is None else argv)
    skip_ipython_lines = len(argv) > 1 and argv[1] == "--skip_ipython_lines"
    if skip_ipython_lines:
        del argv[1]
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(USAGE)
        return 2 if len(argv) < 2 else 0
    script = argv[1]
    if not os.path.isfile(script):
        sys.stderr.write(f"{_PREFIX}{script}: no such file (the user script to run)\n")
        return 1
    cells = None
    if script.endswith(".ipynb"):
        try:
            cells = notebook.load(script, skip_ipython_lines)
        except notebook.NotebookError as error:
            sys.stderr.write(f"{_PREFIX}{error}\n")
            return 1
    for line in shadowed_copies(os.path.dirname(os.path.abspath(script))):
        sys.stderr.write(line + "\n")
    install()
    sys.argv = [script] + argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        if cells is None:
            runpy.run_path(script, run_name="__main__")
        else:
            notebook.run(cells)
    except ImportError as error:
        sys.stderr.write(f"{_PREFIX}{_user_frame(error.__traceback__)}{_import_problem(error)}\n")
        return 1
    return 0


def shadowed_copies(folder):
    """One note per file of a provided name in `folder` (the user's file's folder, where
    Google's repository often sits): the import gives the runner's module, not that file, so a
    change made in the copy does not apply; said more strongly when the copy is not one of
    Google's released files."""
    notes = []
    for name in PROVIDED:
        path = os.path.join(folder, f"{name}.py")
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            released = hashlib.sha256(f.read()).hexdigest() in _GOOGLE_RELEASES[name]
        why = ("it is Google's released file" if released else
               "it differs from Google's released files, and what was changed in it does not "
               "apply")
        notes.append(f"bert_mgpu.compat: note: {path} is not imported: `import {name}` gives "
                     f"bert_mgpu.compat.{name} (Google's API on the project's model); {why} "
                     f"(docs/your_own_code.md)")
    return notes


def _import_problem(error):
    """One line for an ImportError of the user's imports."""
    module = error.name or ""
    if module.startswith("bert_mgpu.compat."):
        # `from modeling import X` where Google's module had X and this one does not.
        google = module[len("bert_mgpu.compat."):]
        return (f"{error.msg.split(' from ')[0]} from {google}: not provided by "
                f"bert_mgpu.compat (docs/your_own_code.md)")
    if isinstance(error, ModuleNotFoundError) and "bert_mgpu.compat" not in error.msg:
        return f"{error.msg} (neither installed nor next to the script)"
    return error.msg
