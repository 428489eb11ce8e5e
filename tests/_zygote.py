"""Script launches from tests, forked from a process that has imported TensorFlow already.

Every `python run_*.py` a test starts spends ~3.5 CPU-s importing TensorFlow before its first
line; the suite starts about a hundred. Here one zygote process per pytest process imports
TensorFlow (and nothing of bert_mgpu) once and forks a child per launch, which runs the script
as `python script.py args` would: its argv, environment, working directory, stdin, stdout and
stderr, `__name__ == "__main__"`, the script's folder first on sys.path, and the interpreter's
normal shutdown (threads joined, atexit, streams flushed). The test still holds a process of
its own, a small client (`python -I -S _zygote.py client ...`, stdlib only) that forwards the
signals it gets to the child (those it started with ignored stay ignored in the child, as a
fresh interpreter would inherit them) and ends as the child ended (its exit code, or killed by
the same signal), so Popen's wait, kill, send_signal and returncode work as before. A client killed
with SIGKILL takes its child with it: the zygote kills, and reaps, the child of a connection
that closes before the child ended, before it serves the next launch.

Only launches of the repository's top-level scripts with the tests' interpreter go through the
zygote, and only when nothing that acts at interpreter start or at TensorFlow's import differs
from the zygote's: a PYTHON* variable (PYTHONPATH: the tests that hide TensorFlow), a TF_*,
XLA_*, CUDA_*, OMP_*, KMP_*, ONEDNN_* or MKL_* variable (TF_CONFIG apart: read at run time), a
`preexec_fn`, interpreter options before the script. Every other command starts a fresh
interpreter, as does everything when BERT_MGPU_TEST_ZYGOTE=0.
"""

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HEADER = struct.Struct("!Q")
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2)
_IMPORT_TIME_PREFIXES = ("PYTHON", "TF_", "XLA_", "CUDA_", "OMP_", "KMP_", "ONEDNN_", "MKL_")
_RUN_TIME_VARIABLES = {"TF_CONFIG"}


# -- the zygote -------------------------------------------------------------------------------

def _recv_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed the connection mid-request")
        data += chunk
    return data


def _run_child(request, fds):
    """In the forked child: become `python script.py args` and run the script. Returns only
    by raising (SystemExit or the script's exception), which ends this process through the
    interpreter's normal shutdown."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    # The dispositions a fresh interpreter would start with: what its launcher ignored stays
    # ignored (a background job's SIGINT), else Python's KeyboardInterrupt and the defaults.
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN if sig in request["ignored"] else
                      signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    import runpy
    runpy.run_path(script, run_name="__main__")
    raise SystemExit(0)


class _Zygote:
    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.children = {}  # connection -> pid of its child
        self.parent = os.getppid()

    def serve(self):
        while True:
            if os.getppid() != self.parent:  # the tests are gone
                for pid in self.children.values():
                    os.kill(pid, signal.SIGKILL)
                return
            ready, _, _ = select.select([self.listener] + list(self.children), [], [], 0.2)
            # Closed connections first: a killed run is dead before the next one starts.
            for conn in [c for c in ready if c is not self.listener]:
                if not conn.recv(1):
                    self._kill(conn)
            self._reap()
            if self.listener in ready:
                self._launch()

    def _kill(self, conn):
        pid = self.children.pop(conn)
        conn.close()
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def _reap(self):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            for conn, child in list(self.children.items()):
                if child == pid:
                    del self.children[conn]
                    try:
                        conn.sendall(f"EXIT {status}\n".encode())
                    except OSError:
                        pass
                    conn.close()

    def _launch(self):
        conn, _ = self.listener.accept()
        header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        request = json.loads(_recv_exactly(conn, _HEADER.unpack(header)[0]))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.listener.close()
            for other in self.children:
                other.close()
            conn.close()
            _run_child(request, fds)
        for fd in fds:
            os.close(fd)
        self.children[conn] = pid
        conn.sendall(f"PID {pid}\n".encode())


def serve(path):
    import tensorflow  # noqa: F401  (what the children do not import again)
    zygote = _Zygote(path)
    zygote.serve()


# -- the client (stdlib only; runs with -I -S) -----------------------------------------------

def client(path, argv):
    pending, pid = [], []

    def forward(sig, _frame):
        if pid:
            os.kill(pid[0], sig)
        else:
            pending.append(sig)

    # Every signal is passed on, also those this process started with ignored: the child
    # starts with them ignored, as a fresh interpreter would, until the script sets a handler.
    ignored = [sig for sig in _FORWARDED if signal.getsignal(sig) == signal.SIG_IGN]
    for sig in _FORWARDED:
        signal.signal(sig, forward)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
                       "ignored": [int(sig) for sig in ignored]}).encode()
    socket.send_fds(sock, [_HEADER.pack(len(body))], [0, 1, 2])
    sock.sendall(body)
    replies = sock.makefile("rb")
    pid.append(int(replies.readline().split()[1]))
    for sig in pending:
        os.kill(pid[0], sig)
    line = replies.readline()
    if not line:
        print("tests/_zygote.py: the zygote ended before the run", file=sys.stderr)
        sys.exit(70)
    status = int(line.split()[1])
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status))


# -- the tests' side: which launches go through it -------------------------------------------

class _Launcher:
    """Starts the zygote on first use and decides which launches it serves: scripts directly
    in one of `roots` (the repository's top level)."""

    def __init__(self, roots=(REPO,)):
        self.roots = tuple(roots)
        self.lock = threading.Lock()
        self.path = None
        self.process = None
        self.env = None
        self.failed = False

    def socket_path(self):
        """The zygote's socket, started on first use (None: it could not start)."""
        with self.lock:
            if self.path or self.failed:
                return self.path
            directory = tempfile.mkdtemp(prefix="bert_mgpu_zygote_")
            path = os.path.join(directory, "socket")
            self.env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "serve", path], env=self.env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(directory, "zygote.log"), "w"))
            deadline = time.monotonic() + 120
            while not os.path.exists(path) and self.process.poll() is None:
                if time.monotonic() > deadline:
                    self.process.kill()
                    break
                time.sleep(0.05)
            if os.path.exists(path):
                self.path = path
            else:
                self.failed = True
            return self.path

    def compatible(self, env):
        """Whether a run with `env` may be forked from the zygote (see the docstring)."""
        keys = {k for k in set(env) | set(self.env)
                if k.startswith(_IMPORT_TIME_PREFIXES) and k not in _RUN_TIME_VARIABLES}
        return all(env.get(k) == self.env.get(k) for k in keys)

    def rewrite(self, args, preexec_fn, cwd, env, shell):
        """`args` itself, or the client's command for a launch the zygote can serve."""
        if shell or preexec_fn is not None or not isinstance(args, (list, tuple)):
            return args
        if len(args) < 2 or args[0] != sys.executable or not str(args[1]).endswith(".py"):
            return args
        script = os.path.abspath(os.path.join(cwd or os.getcwd(), str(args[1])))
        if os.path.dirname(script) not in self.roots:
            return args
        path = self.socket_path()
        if path is None or not self.compatible(os.environ if env is None else env):
            return args
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), "client", path,
                *[str(a) for a in args[1:]]]

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.path:  # its socket and log: nothing of the session left in the temp folder
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


def install():
    """Routes the tests' script launches through a zygote (unless BERT_MGPU_TEST_ZYGOTE=0)."""
    if os.environ.get("BERT_MGPU_TEST_ZYGOTE", "1") == "0" or sys.platform != "linux":
        return
    launcher = _Launcher()
    original = subprocess.Popen._execute_child

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       *rest):
        shell = rest[2]  # startupinfo, creationflags, shell, ...
        args = launcher.rewrite(args, preexec_fn, cwd, env, shell)
        return original(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                        *rest)

    subprocess.Popen._execute_child = _execute_child
    import atexit
    atexit.register(launcher.stop)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3:])
