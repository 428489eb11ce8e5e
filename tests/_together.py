"""Independent script runs of a test file, started together.

Each `python run_*.py` process spends seconds importing TensorFlow and tracing, mostly on one
core, so a file's independent processes (runs whose outputs no other of them reads) overlap
well even on two cores. A module fixture starts them all with `started` and each test waits
for its own run only; the fixture's teardown waits for the rest. With `with_the_module`, they
start with the module's first test and overlap its in-process tests too.

Two tools, one for each way a test needs its runs: this module's thread pool when a run is a
Python function whose result a test waits for (module fixtures, futures); tests/_launch.py's
`Launched`/`run_all` when a test holds the processes themselves (to signal or kill one at a
checkpoint). Both run scripts with `_launch.script_env()`.
"""

import concurrent.futures
import contextlib
import subprocess

import pytest
from _launch import env_without_tensorflow, script_env

# Processes at a time: a few TensorFlow processes fit in memory; more only wait for a core.
WORKERS = 3


@contextlib.contextmanager
def started(jobs, workers=WORKERS):
    """Starts `jobs` ({key: function of no argument}) in threads, in the dict's order (put
    the longest first so that the short ones fill the gaps).

    Yields: {key: concurrent.futures.Future}; `.result()` is the function's return value (or
        raises its exception).
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        yield {key: pool.submit(fn) for key, fn in jobs.items()}


def started_in(directory, jobs, workers=WORKERS):
    """`started` for jobs that each write under their own directory, `directory / key`.

    Args:
        directory: pathlib.Path under which each job gets its directory (not created).
        jobs: {key: function of that directory}, e.g. a script run with it as --output_dir.

    Returns: the context manager of `started`; the futures' results are (the function's
        return value, its directory).
    """
    def job(key, fn):
        return lambda: (fn(directory / key), directory / key)

    return started({key: job(key, fn) for key, fn in jobs.items()}, workers)


def with_the_module(*fixtures):
    """An autouse module fixture (assign it to a name in the test module) that sets up the
    module fixtures `fixtures` (ones that start runs and yield their futures) at the module's
    first test, each if a test of this module selected in this session uses it: their runs
    then go on while the module's in-process tests run."""
    @pytest.fixture(scope="module", autouse=True)
    def _started_with_the_module(request):
        for fixture in fixtures:
            if any(fixture in item.fixturenames for item in request.session.items
                   if getattr(item, "module", None) is request.module):
                try:
                    request.getfixturevalue(fixture)
                except (Exception, pytest.skip.Exception):
                    pass  # pytest keeps the outcome: the tests using the fixture fail or skip

    return _started_with_the_module


def changed_flags(cmd, changes, output_dir):
    """`cmd` (a script's command) with the flags of `changes` ({"--flag": value}) given
    instead, and --output_dir=`output_dir`: a run of its own beside `cmd`'s."""
    return ([a for a in cmd if not a.startswith(tuple(changes) + ("--output_dir",))]
            + [f"--output_dir={output_dir}"] + [f"{k}={v}" for k, v in changes.items()])


def run_command(cmd, timeout=300, env=None):
    """Runs `cmd` (a script's command) with TensorFlow's C++ log quiet; its CompletedProcess
    (stdout and stderr as text)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=env or script_env())


def bad_input_jobs(cmd, bad_input, root):
    """{"bad<i>": job} for a module's BAD_INPUT list ([({"--flag": value}, message), ...]):
    `cmd` with case i's flags changed, its own --output_dir under `root`. The cases are flag
    and file checks, made before TensorFlow loads: they run where importing it fails."""
    env = env_without_tensorflow(root)
    return {f"bad{i}": lambda bad=changed_flags(cmd, change, root / f"bad{i}"):
            run_command(bad, env=env) for i, (change, _) in enumerate(bad_input)}
