"""What every top-level script shares: one-line errors for bad input, a clean exit code."""

import functools
import os
import sys
import traceback

# Errors that mean "bad input" (a flag, a file, a config, a checkpoint): the user gets one line
# naming the cause, not a traceback. Set BERT_MGPU_TRACEBACK=1 to see the traceback anyway.
# ArithmeticError covers training.NonFiniteLossError (a diverged run, named by its step) and
# ConnectionError cluster.WorkerLostError (a dead worker, named with the step to resume from).
_USER_ERRORS = (ValueError, KeyError, FileNotFoundError, NotADirectoryError, PermissionError,
                ArithmeticError, ConnectionError)


def run_main(main):
    """Wraps an absl `main(argv)` so user errors print `ERROR: <message>` and exit with 1."""
    @functools.wraps(main)
    def wrapped(argv):
        try:
            return main(argv)
        except _USER_ERRORS as e:
            if os.environ.get("BERT_MGPU_TRACEBACK"):
                traceback.print_exc()
            message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            script = os.path.basename(sys.argv[0]) if sys.argv else "bert_mgpu"
            print(f"{script}: ERROR: {message.splitlines()[0] if message else type(e).__name__}",
                  file=sys.stderr)
            sys.exit(1)
    return wrapped
