"""Jupyter notebooks in the TF1 runner (`python -m bert_mgpu.compat NOTEBOOK.ipynb`,
bert_mgpu/compat/notebook.py): code cells in order in one namespace; IPython's shell and magic
lines refused with one line before anything runs, or skipped and listed with
`--skip_ipython_lines`. A real user's notebook runs in tests/test_compat_users.py; the notebooks
here are written for these tests."""

import json
import os
import subprocess
import sys

import pytest
from _launch import env_without_tensorflow, script_env
from _oracle import REPO

from bert_mgpu.compat import notebook


def _write(path, cells):
    """An nbformat-4 notebook of `cells` ([(cell_type, source)]); sources as Jupyter stores
    them (a list of lines)."""
    path.write_text(json.dumps({
        "nbformat": 4, "nbformat_minor": 2, "metadata": {},
        "cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True),
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                  for kind, text in cells]}))
    return path


IPYTHON = [
    ("markdown", "# a title\n!not code"),
    ("code", "# !wget commented out\nimport os\n!wget https://example.org/x.zip\n"),
    ("code", "x = 3\nprint('x is %d'\n      % x)\nfiles = !ls\n"),
    ("code", "%%bash\necho hi\n"),
    ("code", "if x:\n    %time y = 1\nprint('after', x)\n"),
]


def test_ipython_lines_are_refused_naming_the_first(tmp_path):
    path = _write(tmp_path / "nb.ipynb", IPYTHON)
    with pytest.raises(notebook.NotebookError) as error:
        notebook.load(str(path), skip_ipython_lines=False)
    assert str(error.value).startswith(
        "nb.ipynb code cell 1:3: `!wget https://example.org/x.zip` is an IPython shell command "
        "or magic, not Python; run it yourself first, or pass --skip_ipython_lines")


def test_skipping_lists_exactly_the_ipython_lines(tmp_path):
    """A `%` continuing a statement (string formatting) and `!` in a comment are Python; a cell
    magic skips its whole cell; a magic inside a block keeps the block valid."""
    cells = notebook.load(str(_write(tmp_path / "nb.ipynb", IPYTHON)), skip_ipython_lines=True)
    assert [c.skipped for c in cells] == [
        [(3, "!wget https://example.org/x.zip")], [(4, "files = !ls")],
        [(1, "%%bash (a cell magic: the whole cell)")], [(2, "%time y = 1")]]
    assert [c.code is None for c in cells] == [False, False, True, False]
    assert os.path.basename(cells[1].name) == "nb.ipynb code cell 2"


def test_a_cell_that_is_not_python_is_one_line(tmp_path):
    path = _write(tmp_path / "nb.ipynb", [("code", "x = 1\n"), ("code", "def f(:\n    pass\n")])
    with pytest.raises(notebook.NotebookError, match=r"^nb\.ipynb code cell 2:1: SyntaxError: "):
        notebook.load(str(path), skip_ipython_lines=True)
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(notebook.NotebookError, match=r"^bad\.ipynb: not a readable Jupyter "):
        notebook.load(str(tmp_path / "bad.ipynb"), skip_ipython_lines=False)


def _runner(args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "bert_mgpu.compat", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env=env or script_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))


def test_the_runner_refuses_before_tensorflow_loads(tmp_path):
    _write(tmp_path / "nb.ipynb", IPYTHON)
    proc = _runner(["nb.ipynb"], tmp_path, env_without_tensorflow(
        tmp_path, script_env(PYTHONPATH=REPO)))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "bert_mgpu.compat: ERROR: nb.ipynb code cell 1:3: `!wget https://example.org/x.zip` is "
        "an IPython shell command or magic, not Python; run it yourself first, or pass "
        "--skip_ipython_lines (before the notebook) to skip such lines"]


def test_the_runner_runs_cells_in_order_with_googles_modules(tmp_path):
    """Through `python -m bert_mgpu.compat --skip_ipython_lines NB.ipynb ARGS`: the cells share
    one namespace, `import tensorflow as tf` is TF1 (a placeholder and a Session), `from bert
    import modeling` is the runner's, `sys.argv` carries the arguments, and the skipped lines
    are listed on stderr; a missing module is one line naming the cell and line."""
    (tmp_path / "bert_config.json").write_text(json.dumps({
        "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 8}))
    _write(tmp_path / "nb.ipynb", [
        ("code", "!pip install bert-tensorflow\nimport sys\nimport tensorflow as tf\n"
                 "from bert import modeling\n"),
        ("code", "config = modeling.BertConfig.from_json_file('bert_config.json')\n"
                 "ids = tf.placeholder(tf.int32, [None, 4])\n"
                 "model = modeling.BertModel(config=config, is_training=False, input_ids=ids)\n"),
        ("code", "sess = tf.InteractiveSession()\nsess.run(tf.global_variables_initializer())\n"
                 "out = sess.run(model.get_pooled_output(), {ids: [[1, 2, 3, 0]]})\n"
                 "print('pooled', out.shape, sys.argv[1:])\n")])
    proc = _runner(["--skip_ipython_lines", "nb.ipynb", "--flag=1"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["pooled (1, 8) ['--flag=1']"]
    assert ("bert_mgpu.compat: skipped nb.ipynb code cell 1:1: !pip install bert-tensorflow"
            in proc.stderr.splitlines())
    _write(tmp_path / "missing.ipynb", [("code", "x = 1\n"), ("code", "import no_such_module\n")])
    proc = _runner(["missing.ipynb"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "bert_mgpu.compat: ERROR: missing.ipynb code cell 2:1: No module named "
        "'no_such_module' (neither installed nor next to the script)")
