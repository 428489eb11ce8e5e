"""bert_mgpu/scripts.py: what every top-level script shares. Here: TensorFlow's start-up notices
of a machine without a GPU are not shown, and nothing else printed meanwhile is lost."""

import logging
import os
import re
import subprocess
import sys

import pytest
from _oracle import DATA, REPO

from bert_mgpu import scripts

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795878354.376043   20488 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results",
    "I0000 00:00:1795878354.376373   20488 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "E0000 00:00:1795878355.808843   20488 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
]
REAL = "E0000 00:00:1795878355.808843   20488 some_kernel.cc:52] Out of memory: a real error"


def _write_lines(lines):
    for line in lines:
        os.write(2, (line + "\n").encode())


def test_noise_lines_are_dropped_and_every_other_line_kept(capfd):
    assert scripts.call_without_noise(lambda: _write_lines(NOISE[:2] + [REAL] + NOISE[2:]) or 7)\
        == 7
    err = capfd.readouterr().err
    assert err == REAL + "\n"


def test_lines_are_shown_when_the_call_raises(capfd):
    def fails():
        _write_lines([NOISE[3], REAL])
        raise ImportError("broken install")
    with pytest.raises(ImportError):
        scripts.call_without_noise(fails)
    assert capfd.readouterr().err == REAL + "\n"


@pytest.mark.skipif(scripts.machine_has_gpu(), reason="a machine with a GPU shows every notice")
def test_tensorflow_starts_without_notices_on_a_machine_without_a_gpu():
    """A fresh interpreter as a script starts one (scripts.run installs the hook), with no
    TF_CPP_MIN_LOG_LEVEL of the user's: importing TensorFlow and probing its devices prints
    nothing; without the hook it prints the notices (so this test sees the real thing)."""
    code = ("import os, sys; from bert_mgpu import scripts; {hook}import tensorflow as tf; "
            "print(len(tf.config.list_physical_devices('GPU')), "
            "os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    runs = {hook: subprocess.run(
        [sys.executable, "-c", code.format(hook=hook)], capture_output=True, text=True,
        cwd=REPO, timeout=300, env={k: v for k, v in dict(
            os.environ, BERT_MGPU_TEST_ZYGOTE="0").items() if k != "TF_CPP_MIN_LOG_LEVEL"})
        for hook in ("scripts.quiet_tensorflow_start(); ", "")}
    quiet, loud = runs["scripts.quiet_tensorflow_start(); "], runs[""]
    # C++ INFO lines off, warnings and errors on (unless the user set the level).
    assert quiet.returncode == 0 and quiet.stdout == "0 1\n", quiet.stderr
    assert quiet.stderr == "", quiet.stderr
    assert "cuInit" in loud.stderr and "oneDNN" in loud.stderr, loud.stderr


_ONEDNN_SCRIPT = """import os, sys
sys.path.insert(0, {repo!r})
from bert_mgpu import scripts


def main(argv):
    from tensorflow.python.util import _pywrap_util_port
    print(os.environ.get("TF_ENABLE_ONEDNN_OPTS"), _pywrap_util_port.IsMklEnabled())


scripts.run(main)
"""


@pytest.mark.skipif(scripts.machine_has_gpu(), reason="a machine with a GPU keeps TensorFlow's "
                    "own oneDNN default")
def test_a_script_runs_tensorflow_with_onednn_operations_on_unless_the_user_says(tmp_path):
    """Through scripts.run, as every script starts: TF_ENABLE_ONEDNN_OPTS unset gives "1" (and
    TensorFlow reports its oneDNN operations on, whatever this CPU's own default); a user's
    "0" is kept and turns them off."""
    script = tmp_path / "job.py"
    script.write_text(_ONEDNN_SCRIPT.format(repo=REPO))
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    outputs = {}
    for setting in (None, "0"):
        run_env = dict(env, BERT_MGPU_TEST_ZYGOTE="0")
        if setting is not None:
            run_env["TF_ENABLE_ONEDNN_OPTS"] = setting
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300, env=run_env)
        assert proc.returncode == 0, proc.stderr
        outputs[setting] = proc.stdout
    assert outputs == {None: "1 True\n", "0": "0 False\n"}


def _create_pretraining_data(tmp_path, *extra):
    out = tmp_path / f"out{len(extra)}.tfrecord"
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         f"--input_file={os.path.join(DATA, 'pretraining', 'kjv_bible_one_verse_per_line.txt.gz')}",
         f"--output_file={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
         f"--vocab_file={os.path.join(DATA, 'vocab', 'bert_uncased_vocab.txt')}",
         "--dupe_factor=1", *extra], capture_output=True, text=True, timeout=600)


def test_google_example_dumps_only_with_verbose(tmp_path):
    """create_pretraining_data.py: quiet by default; --verbose shows Google's 20 `*** Example
    ***` dumps (tokens, then each feature), as Google's script logged them."""
    quiet, verbose = _create_pretraining_data(tmp_path), \
        _create_pretraining_data(tmp_path, "--verbose")
    assert quiet.returncode == 0 and verbose.returncode == 0, verbose.stderr[-2000:]
    assert "*** Example ***" not in quiet.stderr and "tokens: " not in quiet.stderr
    # The closing summary, the last lines on stderr: what was made and the next step.
    lines = quiet.stderr[quiet.stderr.index("== create_pretraining_data.py finished in "):]\
        .splitlines()
    assert re.fullmatch(r"  result: +[\d,]+ instances from [\d,]+ documents", lines[1]), lines
    assert lines[-1].startswith("  next:       python run_pretraining.py --input_file="), lines
    assert verbose.stderr.count("] *** Example ***\n") == 20, verbose.stderr[-2000:]
    dump = verbose.stderr[verbose.stderr.index("*** Example ***"):].splitlines()[1:8]
    assert [line.split("] ", 1)[1].split(":")[0] for line in dump] == [
        "tokens", "input_ids", "input_mask", "segment_ids", "masked_lm_positions",
        "masked_lm_ids", "masked_lm_weights"], dump


def test_tensorflow_info_records_are_dropped_and_its_warnings_kept():
    """scripts.TensorFlowInfoFilter on absl's handler: an INFO record of a module in
    TensorFlow's folder is dropped; its WARNING, and any record of other code, pass."""
    import tensorflow as tf
    tf_module = os.path.join(os.path.dirname(tf.__file__), "python", "saved_model", "x.py")

    def record(level, path):
        return logging.LogRecord("absl", level, path, 1, "message", None, None)
    keep = scripts.TensorFlowInfoFilter().filter
    assert not keep(record(logging.INFO, tf_module))
    assert keep(record(logging.WARNING, tf_module)) and keep(record(logging.ERROR, tf_module))
    assert keep(record(logging.INFO, os.path.join(REPO, "bert_mgpu", "engine", "training.py")))
