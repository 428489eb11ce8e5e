"""Multi-machine training on TensorFlow's own collective all-reduce.

Each worker process runs the same script with its local towers (`--n_gpus`); after the towers'
gradients are summed locally, one all-reduce (TensorFlow's `CollectiveReduceV2`: a gRPC ring
between CPUs, NCCL between GPUs — the ops `tf.distribute.MultiWorkerMirroredStrategy` uses)
sums the workers' shares, so every worker applies the same update. No parameter server and no
protocol of our own: `MultiWorkerMirroredStrategy` is created only to start TensorFlow's
collective runtime for the cluster.

The cluster comes from `TF_CONFIG` (TensorFlow's convention:
`{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}`) or from
`--worker_hosts=h:p,h:p --task_index=i`, which build it. Worker 0 is the chief: it alone writes
checkpoints, summaries and results. Every worker restores from the same checkpoint, so
`--output_dir` must be on storage all workers see (a shared file system or gs://).

Exactness: the trainer normalises every loss by statistics of the whole global batch
(all workers), summed by `sum` before the towers run, so W workers x N towers equal one device
on the same global batch. A worker that dies makes the others' next all-reduce fail within
`--collective_timeout_seconds`; they stop with a message naming the step, and relaunching every
worker resumes from the last checkpoint.
"""

import os
from typing import List, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.configs.base import ClusterConfig, resolve_cluster

# resolve_cluster lives with ClusterConfig (no TensorFlow: scripts check the flags at start).
resolve_cluster = resolve_cluster

# Keys of the collective instances: one per traced call site, allocated in trace order (the
# same on every worker, since every worker traces the same code in the same order).
_GROUP_KEY = 1


class WorkerLostError(ConnectionError):
    """An all-reduce did not complete: a worker died or the network failed."""


class Cluster:
    """The collective runtime of a multi-worker job, and the reductions the trainer needs."""

    def __init__(self, config: ClusterConfig):
        """Starts TensorFlow's collective runtime (after the local devices are configured)."""
        self.config = config
        os.environ["TF_CONFIG"] = config.tf_config()
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=config.timeout_seconds)
        # Created for its side effect: the gRPC server and the collective executor of this
        # worker. All reductions below are plain collective ops in our own traced step.
        self._strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options)
        self._next_instance_key = 1
        logging.info("Worker %d of %d (%s)%s", config.task_index, config.num_workers,
                     config.worker_hosts[config.task_index], " - chief" if self.is_chief else "")

    @property
    def num_workers(self) -> int:
        return self.config.num_workers

    @property
    def task_index(self) -> int:
        return self.config.task_index

    @property
    def is_chief(self) -> bool:
        return self.config.is_chief

    def _instance_key(self) -> int:
        key = self._next_instance_key
        self._next_instance_key += 1
        return key

    def sum(self, tensors: Sequence) -> List[tf.Tensor]:
        """Sums float tensors over the workers in one all-reduce (call inside a tf.function).

        `IndexedSlices` are densified (the ring all-reduces dense buffers); None stays None.

        Args:
          tensors: list of float Tensors / IndexedSlices / None.

        Returns:
          list of float32 Tensors (None where the input was None), the sums over workers.
        """
        present = [(i, tf.cast(tf.convert_to_tensor(t), tf.float32))
                   for i, t in enumerate(tensors) if t is not None]
        if not present:
            return list(tensors)
        flat = tf.concat([tf.reshape(t, [-1]) for _, t in present], axis=0)
        reduced = tf.raw_ops.CollectiveReduceV2(
            input=flat, group_size=self.num_workers, group_key=_GROUP_KEY,
            instance_key=self._instance_key(), ordering_token=[], merge_op="Add",
            final_op="Id", communication_hint="auto",
            timeout_seconds=self.config.timeout_seconds)
        sizes = [int(t.shape.num_elements()) for _, t in present]
        parts = tf.split(reduced, sizes)
        out = list(tensors)
        for (i, t), part in zip(present, parts):
            out[i] = tf.reshape(part, tf.shape(t))
        return out

    def broadcast_from_chief(self, variables: Sequence[tf.Variable]) -> None:
        """Makes every worker's `variables` equal to the chief's (eager, once at start)."""
        variables = list(variables)

        @tf.function(autograph=False)
        def broadcast():
            values = [v if self.is_chief else tf.zeros_like(v) for v in variables]
            for var, value in zip(variables, self.sum(values)):
                var.assign(tf.cast(value, var.dtype))

        broadcast()

