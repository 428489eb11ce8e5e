"""Multi-task training input (run_classifier_mgpu.py with several --task_name): one task per
global batch.

- Which task: global batch `s` (counted from 0 over the whole run) belongs to the task drawn by
  a stateless uniform number keyed by (--random_seed, a stream constant, s) against the tasks'
  cumulative sampling probabilities (`--task_sampling`). A pure function of (seed, step): the
  same after a resume, for any --n_gpus, accumulation or number of workers.
- Which examples: each task reads its own training records as a single-task run does
  (`input_pipeline.epoch_permutations`: the whole set in a fresh seeded permutation every
  epoch, seed `random_seed + task index`), in global batches, consumed only when the task is
  drawn. A task is thus seen epoch after epoch, each in a new order, at its own pace.
- What a batch holds: the union of the tasks' record features, so that every batch has one
  structure: `input_ids`, `input_mask`, `segment_ids`, `is_real_example`; `label_ids` [B, 1]
  when some task is a classification (0 for the others) and `label_values` [B, W] when some
  task is a regression or multi-label one (zero-padded to the widest, W); `task_id` int32 [B].
  `tasks/multitask.py`'s `MultiTaskClassifier` routes the batch to its task, which reads its own
  label columns.

The tf.data iterator (the choice stream and every task's position) is saved with each
checkpoint, so a resumed run continues exactly.
"""

from typing import Mapping, Sequence

import numpy as np

from bert_mgpu.data import features, input_pipeline

# Folded into the seed so the task draws are not numbers another user of (seed, step) draws
# (dropout keyed by step, the epoch permutations keyed by (seed, epoch)).
_TASK_STREAM = 0x7461736B  # "task"
_INPUT_FEATURES = ("input_ids", "input_mask", "segment_ids", "is_real_example")


def sampling_probabilities(num_examples: Sequence[int], sampling: str) -> np.ndarray:
    """The probability of each task per batch: `proportional` to its training examples,
    `sqrt` proportional to their square root (small tasks drawn more often than their share),
    `uniform` the same for every task.

    Returns:
      float64 array [num_tasks], summing to 1.
    """
    n = np.asarray(num_examples, np.float64)
    weights = {"proportional": n, "sqrt": np.sqrt(n), "uniform": np.ones_like(n)}[sampling]
    return weights / weights.sum()


def task_choices(seed: int, probabilities: Sequence[float]):
    """tf.data.Dataset of int64 scalars: the task of global batch 0, 1, 2, ... (forever)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    cumulative = tf.constant(np.cumsum(probabilities)[:-1], tf.float32)
    key = tf.constant([seed, _TASK_STREAM], tf.int64)

    def choose(step):
        u = tf.random.stateless_uniform(
            [1], seed=tf.random.experimental.stateless_fold_in(key, step))
        return tf.searchsorted(cumulative, u, side="right", out_type=tf.int64)[0]

    return tf.data.Dataset.range(2 ** 62).map(choose)


def training_dataset(task_inputs: Sequence[tuple], batch_size: int, seed: int,
                     probabilities: Sequence[float], num_shards: int = 1, shard_index: int = 0):
    """This worker's part of the multi-task global batches (see the module docstring).

    Args:
      task_inputs: one `(record file, shapes)` per task (shapes: `features.classifier_shapes` or
        `features.label_values_shapes`).
      batch_size: this worker's part of a global batch (train_batch_size x n_gpus x
        num_accumulation_steps).
      seed: --random_seed.
      probabilities: each task's probability per batch (`sampling_probabilities`).
      num_shards, shard_index: workers: every worker draws the same tasks and reads the same
        global batches (batch_size x num_shards rows) and keeps rows
        [shard_index x batch_size, (shard_index + 1) x batch_size).

    Returns:
      tf.data.Dataset of dicts name -> Tensor [batch_size, ...] (the union features).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    shapes = [s for _, s in task_inputs]
    has_ids = any("label_ids" in s for s in shapes)
    width = max(s.get("label_values", 0) for s in shapes)
    rows = batch_size * num_shards

    def union(index, task_shapes):
        def convert(parsed: Mapping[str, tf.Tensor]):
            b = tf.shape(parsed["input_ids"])[0]
            out = {k: parsed[k] for k in _INPUT_FEATURES}
            if has_ids:
                out["label_ids"] = parsed.get("label_ids", tf.zeros([b, 1], tf.int32))
            if width:
                values = parsed.get("label_values", tf.zeros([b, 0], tf.float32))
                out["label_values"] = tf.pad(
                    values, [[0, 0], [0, width - task_shapes.get("label_values", 0)]])
            out[features.TASK_ID] = tf.fill([b], tf.constant(index, tf.int32))
            return out
        return convert

    datasets = []
    for index, (path, task_shapes) in enumerate(task_inputs):
        d = input_pipeline.epoch_permutations([path], seed + index)
        d = d.batch(rows, drop_remainder=True)
        d = d.map(lambda s, sh=task_shapes: features.parse_example(s, sh))
        datasets.append(d.map(union(index, task_shapes)))
    d = tf.data.Dataset.choose_from_datasets(datasets, task_choices(seed, probabilities))
    if num_shards > 1:
        first = shard_index * batch_size
        d = d.map(lambda f: {k: v[first:first + batch_size] for k, v in f.items()})
    return input_pipeline.prefetched(d)
