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

import _zygote  # noqa: E402
import tensorflow as tf  # noqa: E402

# The scripts the tests start are forked from a process that has imported TensorFlow already
# (tests/_zygote.py: the same run as a fresh interpreter's, without ~3.5 CPU-s of import each).
_zygote.install()

NUM_LOGICAL_CPUS = 4

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
