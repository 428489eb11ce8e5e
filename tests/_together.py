"""Independent script runs of a test file, started together.

Each `python run_*.py` process spends seconds importing TensorFlow and tracing, mostly on one
core, so a file's independent processes (runs whose outputs no other of them reads) overlap
well even on two cores. A module fixture starts them all with `started` and each test waits
for its own run only; the fixture's teardown waits for the rest.
"""

import concurrent.futures
import contextlib

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
