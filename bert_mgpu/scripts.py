"""What every top-level script shares: one-line errors for bad input, a clean exit code."""

import functools
import os
import sys
import traceback

# Errors that mean "bad input" (a flag, a file, a config, a checkpoint): the user gets one line
# naming the cause, not a traceback. Set BERT_MGPU_TRACEBACK=1 to see the traceback anyway.
# ArithmeticError covers engine/training.py's NonFiniteLossError (a diverged run, named by its
# step) and ConnectionError engine/cluster.py's WorkerLostError (a dead worker, named with the
# step to resume from).
# OSError (ConnectionError is one) also covers what the file system refuses (a read-only or
# full disk, a directory where a file is expected): its message names the path.
_USER_ERRORS = (ValueError, KeyError, OSError, ArithmeticError)

# The shell's exit status of a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def _script_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "bert_mgpu"


def error_text(e: BaseException) -> str:
    """The message of a user error, whole (a multi-line message keeps its list of details)."""
    message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return message.strip() or type(e).__name__


def run_main(main):
    """Wraps an absl `main(argv)` so user errors print `SCRIPT: ERROR: <message>` and exit with
    1, and Ctrl-C prints `SCRIPT: interrupted` and exits with 130; never a traceback.

    Cleaning up is the job's own: writers remove their temporaries when the exception passes
    through them (`finally`/`except BaseException`).
    """
    @functools.wraps(main)
    def wrapped(argv):
        try:
            use_pretrained_model()
            return main(argv)
        except KeyboardInterrupt:
            if os.environ.get("BERT_MGPU_TRACEBACK"):
                traceback.print_exc()
            print(f"{_script_name()}: interrupted (SIGINT)", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        except _USER_ERRORS as e:
            if os.environ.get("BERT_MGPU_TRACEBACK"):
                traceback.print_exc()
            print(f"{_script_name()}: ERROR: {error_text(e)}", file=sys.stderr)
            sys.exit(1)
    return wrapped


def use_pretrained_model() -> None:
    """When --init_checkpoint names a Hugging Face model (a folder or `hf:ORG/NAME`), runs the
    script on its Google-layout conversion (interop/pretrained.py: fetched, checked before
    TensorFlow loads, converted once and cached), with --vocab_file, --bert_config_file and
    --do_lower_case the model's unless given. Scripts without the flag are left alone."""
    from absl import logging

    from bert_mgpu import cli
    from bert_mgpu.interop import pretrained

    values = cli.flag_values_dict()
    derived = pretrained.derived_flags(values, cli.given_flags())
    if derived:
        logging.info("--init_checkpoint=%s: using its conversion to Google's layout %s",
                     values["init_checkpoint"], derived["init_checkpoint"])
        cli.set_derived_flags(derived)


def run(main) -> None:
    """`app.run(main)` for a script: flag errors, user errors and Ctrl-C are one line each."""
    from absl import app

    from bert_mgpu import cli

    app.run(run_main(main), flags_parser=cli.parse_flags)
