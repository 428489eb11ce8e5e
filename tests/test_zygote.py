"""tests/_zygote.py: a launch forked from the zygote behaves as a fresh `python script.py`."""

import os
import signal
import subprocess
import sys
import time

import _zygote
import pytest

SCRIPT = '''import os, sys, time
print("argv", sys.argv[1:], "cwd", os.getcwd(), "env", os.environ.get("ZYGOTE_TEST"),
      "main", __name__, "path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)),
      flush=True)
print("pid", os.getpid(), file=sys.stderr, flush=True)
if sys.argv[1] == "sleep":
    time.sleep(60)
sys.exit(int(sys.argv[2]))
'''


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    root = tmp_path_factory.mktemp("zygote_scripts")
    (root / "script.py").write_text(SCRIPT)
    launcher = _zygote._Launcher(roots=(str(root),))
    yield launcher, str(root / "script.py")
    launcher.stop()


def test_a_forked_run_equals_a_fresh_one(launcher, tmp_path):
    launcher, script = launcher
    cmd = [sys.executable, script, "exit", "3"]
    env = dict(os.environ, ZYGOTE_TEST="yes", TF_CPP_MIN_LOG_LEVEL="2")
    routed = launcher.rewrite(cmd, None, str(tmp_path), env, False)
    assert routed[:4] == [sys.executable, "-I", "-S", _zygote.__file__]
    fresh, forked = (subprocess.run(c, capture_output=True, text=True, cwd=tmp_path, env=env)
                     for c in (cmd, routed))
    assert forked.returncode == fresh.returncode == 3
    assert forked.stdout == fresh.stdout
    assert f"cwd {tmp_path} env yes main __main__ path0 True" in forked.stdout
    assert int(forked.stderr.split()[-1]) != int(fresh.stderr.split()[-1])  # another process


def test_what_acts_at_start_up_gets_a_fresh_interpreter(launcher, tmp_path):
    launcher, script = launcher
    cmd = [sys.executable, script, "exit", "0"]
    launcher.socket_path()
    same = dict(launcher.env)
    assert launcher.rewrite(cmd, None, None, same, False) != cmd
    assert launcher.rewrite(cmd, None, None, dict(same, TF_CONFIG="{}"), False) != cmd
    for changed in ({"PYTHONPATH": str(tmp_path)}, {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"},
                    {"CUDA_VISIBLE_DEVICES": "0"}):
        assert launcher.rewrite(cmd, None, None, dict(same, **changed), False) == cmd
    assert launcher.rewrite(cmd, lambda: None, None, same, False) == cmd
    assert launcher.rewrite([sys.executable, "-u", script], None, None, same, False) \
        == [sys.executable, "-u", script]
    other = tmp_path / "elsewhere.py"
    other.write_text("")
    assert launcher.rewrite([sys.executable, str(other)], None, None, same, False) \
        == [sys.executable, str(other)]


def signalled(cmd, env, tmp_path, sig, sigint):
    """Return code and stderr of `cmd`, started with SIGINT's disposition `sigint`, sent `sig`
    once it has printed its first line (an ignored SIGINT: checked to be ignored for a second,
    then SIGTERM)."""
    out, err = tmp_path / f"out{sig}", tmp_path / f"err{sig}"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
        while "argv" not in out.read_text():
            time.sleep(0.02)
        proc.send_signal(sig)
        if sig == signal.SIGINT and sigint == signal.SIG_IGN:
            time.sleep(1)
            assert proc.poll() is None  # still running
            proc.terminate()
        proc.wait(30)
    return proc.returncode, err.read_text()


@pytest.mark.parametrize("sig,sigint", [
    (signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.SIG_DFL),
    (signal.SIGUSR1, signal.SIG_DFL), (signal.SIGINT, signal.SIG_IGN)])
def test_signals_reach_the_run_and_its_end_is_the_clients(launcher, tmp_path, sig, sigint):
    """The client passes the signal on; the run ends as a fresh one would (SIGTERM and SIGUSR1
    kill it, SIGINT raises KeyboardInterrupt unless the launcher ignored SIGINT, as a
    background job's is: then it goes on, and the SIGTERM after it ends it), and the client's
    return code says so."""
    launcher, script = launcher
    env = dict(launcher.env)
    cmd = [sys.executable, script, "sleep", "0"]
    for name in ("fresh", "forked"):
        (tmp_path / name).mkdir()
    fresh = signalled(cmd, env, tmp_path / "fresh", sig, sigint)
    forked = signalled(launcher.rewrite(cmd, None, None, env, False), env, tmp_path / "forked",
                       sig, sigint)
    assert forked[0] == fresh[0] and forked[0] != 0
    interrupted = sig == signal.SIGINT and sigint == signal.SIG_DFL
    assert ("KeyboardInterrupt" in forked[1]) == ("KeyboardInterrupt" in fresh[1]) \
        == interrupted
    if sigint == signal.SIG_IGN:
        assert fresh[0] == -signal.SIGTERM


def test_sigkill_of_the_client_kills_the_run(launcher, tmp_path):
    launcher, script = launcher
    env = dict(launcher.env)
    cmd = launcher.rewrite([sys.executable, script, "sleep", "0"], None, None, env, False)
    err = tmp_path / "err"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        while "pid" not in err.read_text():
            time.sleep(0.02)
        child = int(err.read_text().split()[-1])
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{child}")
