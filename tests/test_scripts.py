"""bert_mgpu/scripts.py: what every top-level script shares. Here: TensorFlow's start-up notices
of a machine without a GPU are not shown, and nothing else printed meanwhile is lost."""

import os
import subprocess
import sys

import pytest
from _oracle import REPO

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
    """A fresh interpreter as a script starts one (scripts.run installs the hook): importing
    TensorFlow and probing its devices prints nothing; without the hook it prints the notices
    (so this test sees the real thing)."""
    code = ("import sys; from bert_mgpu import scripts; {hook}import tensorflow as tf; "
            "print(len(tf.config.list_physical_devices('GPU')))")
    runs = {hook: subprocess.run(
        [sys.executable, "-c", code.format(hook=hook)], capture_output=True, text=True,
        cwd=REPO, timeout=300, env=dict(os.environ, BERT_MGPU_TEST_ZYGOTE="0"))
        for hook in ("scripts.quiet_tensorflow_start(); ", "")}
    quiet, loud = runs["scripts.quiet_tensorflow_start(); "], runs[""]
    assert quiet.returncode == 0 and quiet.stdout == "0\n", quiet.stderr
    assert quiet.stderr == "", quiet.stderr
    assert "cuInit" in loud.stderr and "oneDNN" in loud.stderr, loud.stderr
