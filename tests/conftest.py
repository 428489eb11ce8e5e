"""Test session set-up: the CPU is split into logical devices before TensorFlow starts, and the
scripts the tests launch are forked from a zygote (tests/_zygote.py).

Tower tests run `--n_gpus` towers on logical CPU devices, exactly the code path GPUs take. The
split must happen before the first TensorFlow op, hence here, at collection time.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _cpu_report  # noqa: E402
import _zygote  # noqa: E402
import tensorflow as tf  # noqa: E402

# The scripts the tests start are forked from a process that has imported TensorFlow already
# (tests/_zygote.py: the same run as a fresh interpreter's, without ~3.5 CPU-s of import each).
_zygote.install()

NUM_LOGICAL_CPUS = 4

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)


# The files that take longest go first: pytest-xdist (--dist loadfile) hands out whole files in
# collection order, and a long file handed out last keeps one worker busy after the other has
# run out of files. Heaviest first by CPU per file, script runs included (tests/_cpu_report.py
# measures it; a file that is one long test, test_quickstart.py, by that test); the rest keep
# their order.
_HEAVY_FIRST = ("test_modernbert_jobs.py", "test_training.py", "test_distill.py",
                "test_distill_squad.py", "test_quickstart.py",
                "test_serving_bpe.py", "test_compat_users.py", "test_run_pretraining.py",
                "test_export_int8.py", "test_serving_tokenizer.py", "test_run_squad.py",
                "test_length_batching.py", "test_classifier.py", "test_bad_input.py",
                "test_cluster.py", "test_modernbert_pretraining.py", "test_export.py",
                "test_export_multitask.py", "test_multitask.py", "test_input_order.py",
                "test_run_ner.py")


def pytest_configure(config):
    # Opt-in: BERT_MGPU_TEST_CPU_REPORT=PATH writes each test's CPU seconds (tests/_cpu_report.py).
    _cpu_report.register(config)
    # pytest-xdist (3.6 and later) hands out --dist loadfile's files by their number of tests,
    # most first, unless --no-loadscope-reorder is given: that would undo the order below.
    # (Without xdist, or before 3.6, nothing reads the option.)
    config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(_HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
