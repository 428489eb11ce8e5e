"""Running the scripts from tests: several at once, and a signal once a checkpoint exists.

Each `python run_*.py` costs seconds of TensorFlow import and tracing, mostly on one core, so
tests start the runs that do not depend on each other together and wait for them afterwards.
"""

import os
import signal
import subprocess
import tempfile
import time

import tensorflow as tf


def script_env(**changes):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **changes)


def env_without_tensorflow(directory, base=None):
    """`base` (default script_env()) where importing TensorFlow raises, through a `tensorflow`
    package made under `directory` and put first on PYTHONPATH. The exception is a
    BaseException, so no `except` of the scripts takes it for a user error: a run whose checks
    all come before TensorFlow loads (README: flags, config, vocabulary, input patterns, output
    paths) ends with its own error, any other with a traceback."""
    package = os.path.join(str(directory), "no_tensorflow", "tensorflow")
    if not os.path.exists(package):
        os.makedirs(package, exist_ok=True)
        with open(os.path.join(package, "__init__.py"), "w") as f:
            f.write("class TensorFlowImported(BaseException):\n    pass\n\n\n"
                    "raise TensorFlowImported('TensorFlow imported before the input checks')\n")
    env = dict(base or script_env())
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(package)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class Launched:
    """A script started in the background. Its output goes to files, not pipes: a pipe that
    nobody reads while another run is waited for fills up and stalls the process."""

    def __init__(self, cmd, env=None):
        self._out, self._err = (tempfile.TemporaryFile(mode="w+") for _ in range(2))
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, text=True,
                                     env=env or script_env())

    def finish(self, timeout=300) -> subprocess.CompletedProcess:
        """Waits for the process (killing it after `timeout` s) and reads its output."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        texts = []
        for f in (self._out, self._err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, *texts)


def run_all(cmds, timeout=300, env=None):
    """Runs independent commands at the same time; their CompletedProcess in order."""
    launched = [Launched(cmd, env) for cmd in cmds]
    try:
        return [run.finish(timeout) for run in launched]
    finally:  # one timed out: the others are not left running
        for run in launched:
            if run.proc.poll() is None:
                run.proc.kill()


def signal_at_checkpoint(targets, timeout=300, published=False):
    """Sends each process its signal once `output_dir/model.ckpt-STEP` exists.

    A checkpoint's files appear before the `checkpoint` state file names it (checkpoint.py
    publishes it last), so a signal sent when they appear may land before that: a rerun then
    resumes from the previous checkpoint, as it must. Tests that need the rerun to resume from
    STEP itself pass `published=True`.

    Args:
      targets: list of (Launched, output_dir, step, signal or None (only watched), delay in s
        between seeing the checkpoint and sending the signal).
      timeout: s to wait for all the checkpoints; a process still without its checkpoint then
        is killed.
      published: wait until the state file names the checkpoint, not only for its files.

    Returns:
      list: per target, the time.time() its checkpoint was seen while it still ran (and it got
      its signal), or None (it ended before, or was killed at the timeout).
    """
    pending = dict(enumerate(targets))
    seen = [None] * len(targets)
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        for i, (run, output_dir, step, sig, delay) in list(pending.items()):
            if run.proc.poll() is not None:
                del pending[i]
            elif _has_checkpoint(output_dir, step, published):
                seen[i] = time.time()
                time.sleep(delay)
                if sig is not None:
                    run.proc.send_signal(sig)
                del pending[i]
        time.sleep(0.02)
    for run, *_ in pending.values():
        run.proc.send_signal(signal.SIGKILL)
    return seen


def finish_killed(run, output_dir, last_step, timeout=300):
    """Waits for a run that was sent SIGKILL (`signal_at_checkpoint`) and checks the kill
    landed: a run that ended on its own first would make a "resumed" rerun trivially right.
    Call it before a rerun writes to `output_dir`.

    Returns:
      (CompletedProcess, None) if the run died of SIGKILL (return code -9) before writing the
      checkpoint of `last_step` (its last), else (CompletedProcess, what went wrong).
    """
    proc = run.finish(timeout)
    if proc.returncode != -signal.SIGKILL:
        return proc, (f"return code {proc.returncode}, not -9 (SIGKILL): "
                      f"{proc.stderr[-2000:]}")
    if os.path.exists(os.path.join(output_dir, f"model.ckpt-{last_step}.index")):
        return proc, f"model.ckpt-{last_step} exists: the run finished before the kill"
    return proc, None


def _has_checkpoint(output_dir, step, published):
    if not published:
        return os.path.exists(os.path.join(output_dir, f"model.ckpt-{step}.index"))
    try:  # the state file is replaced atomically (a rename): never read half-written
        with open(os.path.join(output_dir, "checkpoint")) as f:
            newest = f.readline()
    except FileNotFoundError:
        return False
    return newest.strip() == f'model_checkpoint_path: "model.ckpt-{step}"'


def final_tensors(output_dir):
    """Every tensor of the newest checkpoint in `output_dir`, by name."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def error_line(proc, script, code=1):
    """The last stderr line of a run that must have failed with `code`, checked to be
    `script`'s one-line `SCRIPT: ERROR: ...`."""
    assert proc.returncode == code, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: ERROR: "), last
    return last
