"""What every top-level script shares: one-line errors for bad input, a clean exit code, and
TensorFlow's start-up notices of a machine without a GPU kept off the user's screen."""

import functools
import glob
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import tempfile
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


# What TensorFlow prints while it loads on a machine without a GPU, none of it actionable there:
# absl's notice that logs come before its initialisation (TF_CPP_MIN_LOG_LEVEL cannot silence
# those lines), the oneDNN and CPU-instruction notices, and the CUDA probe's failure. Matched per
# line; any other line printed meanwhile is shown.
_CPU_ONLY_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|port\.cc:\d+\] oneDNN custom operations are on\."
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine"
    r"|cuda_(platform|executor|diagnostics)\.cc:\d+\] "
    r"|cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized"
    r"|^To enable the following instructions: .* rebuild TensorFlow")


def machine_has_gpu() -> bool:
    """Whether the machine has an NVIDIA or AMD GPU driver (read without TensorFlow)."""
    return (os.path.exists("/proc/driver/nvidia/version") or bool(glob.glob("/dev/nvidia[0-9]*"))
            or os.path.exists("/dev/kfd"))


def call_without_noise(fn, noise=_CPU_ONLY_NOISE):
    """`fn()` with everything written to file descriptor 2 meanwhile (C++ logs included) held
    back, then written to stderr without the lines `noise` matches; the other lines are shown
    even when `fn` raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            return fn()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            lines = held.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not noise.search(line)))
            sys.stderr.flush()


class _QuietTensorFlowLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run (with the first device probe, which tries CUDA) under
    `call_without_noise`."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        def load():
            self._loader.exec_module(module)
            module.config.list_physical_devices("GPU")
        call_without_noise(load)


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` the first time it is imported, with `_QuietTensorFlowLoader`."""

    def find_spec(self, fullname, path=None, target=None):
        del path, target
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the real finders locate it
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietTensorFlowLoader(spec.loader)
        return spec


def quiet_tensorflow_start() -> None:
    """On a machine without a GPU, TensorFlow loads (whenever the job first imports it) without
    its start-up notices, and its C++ INFO lines (XLA service, dataset buffer notices) are off
    unless TF_CPP_MIN_LOG_LEVEL says otherwise (warnings and errors always show); a machine
    with a GPU shows all of them."""
    if "tensorflow" not in sys.modules and not machine_has_gpu() and \
            not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        sys.meta_path.insert(0, _QuietTensorFlowFinder())


def tensorflow_cpu_defaults() -> None:
    """On a machine without a GPU, TensorFlow's oneDNN operations (matmuls fused with their
    bias and activation, oneDNN's matmul, transpose and element-wise kernels) are on unless
    TF_ENABLE_ONEDNN_OPTS says otherwise. TensorFlow turns them on by itself only on CPUs
    with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX; on AVX2 CPUs (and AVX-512 ones without
    VNNI) they would stay off, and a fine-tuning update costs more CPU time without them
    (docs/benchmarks.md, "oneDNN's operations on AVX2 hosts"). The two differ by float
    rounding only. TensorFlow reads the variable once, so it must be set before it loads."""
    if "tensorflow" not in sys.modules and not machine_has_gpu():
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


class TensorFlowInfoFilter(logging.Filter):
    """Drops the INFO (and DEBUG) records of TensorFlow's own Python modules (saver callbacks,
    SavedModel signature and fingerprint notices: nothing a user acts on); their warnings and
    errors, and every record of other code, pass. TensorFlow logs through absl's logger, so the
    filter goes on absl's handler; it knows TensorFlow's folder once TensorFlow is imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or "tensorflow" not in sys.modules:
            return True
        tensorflow_dir = os.path.dirname(sys.modules["tensorflow"].__file__ or "")
        return not record.pathname.startswith(tensorflow_dir + os.sep)


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
    """`app.run(main)` for a script: flag errors, user errors and Ctrl-C are one line each; on a
    machine without a GPU TensorFlow starts without its notices and with its oneDNN operations
    on; TensorFlow's Python log from warnings up."""
    from absl import app
    from absl import logging as absl_logging

    from bert_mgpu import cli

    tensorflow_cpu_defaults()
    quiet_tensorflow_start()
    # TensorFlow's own Python INFO lines say nothing a user acts on; its warnings and errors
    # show. It logs through absl (most modules) or its "tensorflow" logger.
    absl_logging.get_absl_handler().addFilter(TensorFlowInfoFilter())
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    app.run(run_main(main), flags_parser=cli.parse_flags)
