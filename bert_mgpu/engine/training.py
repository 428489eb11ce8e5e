"""The trainer: input -> towers -> sum -> clip -> apply, with crash-safe checkpoints.

One `tf.function` traces a whole update: the global batch is split over the towers
(`--n_gpus`), each tower computes its share of the loss and its gradients on its device, the
gradients are summed, unscaled (fp16), clipped by global norm and applied once, and
`global_step` is incremented. With `--num_accumulation_steps=K` the global batch is first split
into K micro-batches whose gradients are summed into accumulators, then applied once.

A task (`contract.Task`: every member the trainer calls) supplies the normalisers of the whole
global batch (`context`) and each slice's share of the global loss (`tower_loss`); the trainer
sums the towers' gradients. Because every normaliser is global, N towers, K micro-steps and
one device give the same update up to float rounding (tests hold it to 1e-5).

The concerns are separate classes: `UpdateStep` (the traced update and accumulation),
`MicroBatches` (how many micro-batches an update takes), `ResumeState` (checkpoints and input
positions) and `Trainer` (the loop: logging, summaries, signals; evaluation and prediction).

Resume: every checkpoint holds the weights, the optimizer slots, `global_step` and (fp16) the
loss scale under Google's names, and the input pipeline's position is saved next to it
(`input_state/ckpt-STEP`). Re-running the same command resumes from the newest readable
checkpoint; the learning-rate schedule is a function of `global_step`, so it resumes too.
SIGHUP/SIGTERM/SIGINT finish the current step, write a checkpoint and return normally.
"""

import json
import os
import re
import signal
import time
from typing import Dict, Mapping, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import input_pipeline
from bert_mgpu.engine import checkpoint, contract, optimization, towers
from bert_mgpu.engine import cluster as cluster_lib
from bert_mgpu.model import execution
from bert_mgpu.progress import format_duration

INPUT_STATE_DIR = "input_state"
# model.ckpt-STEP in the `checkpoint` file; input_state/ckpt-STEP.index / .data-* files.
_CKPT_STEP = re.compile(r"-(\d+)$")
_INPUT_STATE_FILE = re.compile(r"ckpt-(\d+)\.(?:index|data-\d+-of-\d+|json)")
# Dynamic loss scaling for fp16 (NVIDIA's BERT values): start at 2^15, halve on a non-finite
# step (which is skipped), double after 2000 finite steps in a row.
INITIAL_LOSS_SCALE = 2.0 ** 15
LOSS_SCALE_GROWTH_INTERVAL = 2000
_COMPUTE_DTYPES = {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}


def prune_input_states(directory: str, kept_steps) -> None:
    """Deletes the input positions in `directory` of checkpoints that are gone.

    Kept: the states of the steps in `kept_steps` (the checkpoints the `checkpoint` file lists)
    and any newer one (a worker may write its state for a step before the chief publishes that
    checkpoint). A `ckpt-N_temp/` directory is what a write killed midway leaves; it is never
    read and is deleted.
    """
    kept = set(kept_steps)
    newest = max(kept, default=-1)
    for path in tf.io.gfile.glob(os.path.join(directory, "ckpt-*")):
        name = os.path.basename(path)
        match = _INPUT_STATE_FILE.fullmatch(name)
        if match is None:
            if name.endswith("_temp") and tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            continue
        step = int(match.group(1))
        if step not in kept and step < newest:
            tf.io.gfile.remove(path)


class NonFiniteLossError(FloatingPointError):
    """The loss or gradients became NaN/Inf in full precision; training stops."""


def compute_dtype(precision: str):
    """`--precision` -> the activations' dtype."""
    return _COMPUTE_DTYPES[precision]


def _scale_gradient(g, factor):
    if g is None:
        return None
    if isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(g.values * factor, g.indices, g.dense_shape)
    return g * factor


def _batch_rows(features) -> tf.Tensor:
    """int64 scalar: the examples in a batch (the first dimension of its features)."""
    return tf.cast(tf.shape(next(iter(features.values())))[0], tf.int64)


def _pad_slices(grad, full_length: int, length: tf.Tensor):
    """An `IndexedSlices` gradient of a batch cut to `length` positions (int32 scalar Tensor:
    the length-polymorphic trace of --pad_to_longest), given the rows the uncut batch
    (`full_length` positions) would give it: zero rows at index 0 appended. Its sum, norm and
    update are unchanged (x + 0.0, and 0.0 squared), and its row count no longer depends on the
    cut, so the XLA-compiled update (`_apply_clipped`) is compiled once instead of once per
    batch length (each compilation costs seconds at start-up: docs/benchmarks.md, "Start-up:
    one trace for every batch length"). Dense gradients are returned as they are."""
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    rows = tf.shape(grad.values, out_type=tf.int32)[0]
    extra = tf.maximum(rows // tf.cast(length, tf.int32) * full_length - rows, 0)
    values = tf.pad(grad.values, [[0, extra]] + [[0, 0]] * (grad.values.shape.rank - 1))
    indices = tf.pad(grad.indices, [[0, extra]])
    return tf.IndexedSlices(values, indices, grad.dense_shape)


def _relaxed_spec(features, length: int, batch: bool = False):
    """`tf.TensorSpec`s of `features` with an unknown last axis where it is `length` long (the
    sequence axis; rank >= 2), and with `batch` an unknown first axis: tracing a step function
    with them gives one graph for every length the batches are cut to (and every batch
    size), instead of one per length."""
    def spec(t):
        shape = t.shape.as_list()
        if len(shape) >= 2 and shape[-1] == length:
            shape[-1] = None
        if batch and shape:
            shape[0] = None
        return tf.TensorSpec(shape, t.dtype)
    return {name: spec(t) for name, t in features.items()}


class _LengthPolymorphic:
    """Calls step functions so that batches cut to different lengths share one trace.

    With --pad_to_longest every batch is cut to its longest example rounded up to
    --pad_to_multiple_of, so a step function would be traced (and its graph optimised) once per
    length, seconds each on a CPU and up to max_seq_length / multiple times per run
    (docs/benchmarks.md, "Start-up: one trace for every batch length"). Instead `call` first
    asks the function for the trace whose features have an unknown sequence axis
    (`get_concrete_function`: traced once per function and its other arguments), which then
    runs every batch, cut or not. The ops are the same: results equal the per-length traces'
    up to float rounding, and dropout's masks do not depend on the cut
    (`execution.DropoutStream`)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def call(self, fn, task: contract.Task, features, *args, batch: bool = False):
        """`fn(features, *args)` through the length-polymorphic trace; `task` says where the
        sequence axis is (`task.sequence_length`); `batch`: the batch size varies too."""
        length = task.sequence_length(features) if self.enabled else None
        if length is not None:
            fn.get_concrete_function(_relaxed_spec(features, length, batch), *args)
        return fn(features, *args)


def _sum_dicts(dicts):
    out = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out[k] + v if k in out else v
    return out


class _StopSignals:
    """Turns SIGHUP/SIGTERM/SIGINT into a request to checkpoint and stop after this step."""

    SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received = None
        self._previous = {}

    def __enter__(self):
        for sig in self.SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: signals cannot be caught here
                pass
        return self

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.received is None:
            logging.warning("Received %s: finishing the current step, then writing a "
                            "checkpoint and exiting.", name)
        self.received = name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class _TowersInput(NamedTuple):
    """What every tower of a micro-batch receives (`towers.run_towers`' `shared`)."""
    step: tf.Tensor  # int64 scalar: the global step of the update (dropout's counter)
    context: Dict[str, tf.Tensor]  # the task's normalisers of the global batch
    route: Optional[int]  # the route trained (`contract.Task.route`), None: the task's loss


def _draws_outside_xla(devices) -> bool:
    """Whether compiled towers draw dropout's random numbers outside XLA: when every tower runs
    on a CPU.

    With --use_xla on CPU, dropout's random numbers are drawn by TensorFlow's kernels before
    the compiled tower (XLA's CPU generator is several times slower, see
    `execution.OutsideDraws`); all of a tower's draws are then held at once (2 bytes per
    dropped-out value), which on a GPU would cost memory for no measured gain, so GPUs draw
    inside the compilation (not measured here: no GPU)."""
    return all(tf.DeviceSpec.from_string(d).device_type == "CPU" for d in devices)


def traced_as_configured(cfg: TrainConfig, **changes):
    """The execution context (`model/execution.py`, declared in `engine/contract.py`) the trainer
    traces a task under: the encoder layers recomputed in the backward pass
    (`cfg.gradient_checkpointing`) or each one XLA computation (`cfg.xla_layers`), a RoPE
    model's global attention in chunks of `cfg.attention_chunk` query rows, with
    `changes` (the towers' dropout stream) on top. A context manager.

    Without XLA (neither --use_xla nor --xla_layers) training runs on the real tokens only
    where the task's loss ignores the padding (`real_tokens`): the same update to float
    rounding, without the padding's share of the dense layers."""
    return execution.entered(recompute_layers=cfg.gradient_checkpointing,
                             compile_layers=cfg.xla_layers, attention_chunk=cfg.attention_chunk,
                             real_tokens=not (cfg.use_xla or cfg.xla_layers), **changes)


class UpdateStep:
    """The traced update: global batch -> towers -> sum -> (workers) -> clip -> apply.

    Owns the variables' optimizer, `global_step`, the fp16 loss scale and the accumulators.
    Calling it runs one update on a global batch; everything inside is traced.
    """

    def __init__(self, task: contract.Task, cfg: TrainConfig, devices, cluster=None,
                 lr_multipliers=None):
        self.task, self.cfg, self.devices, self.cluster = task, cfg, list(devices), cluster
        self.variables = task.named_variables()
        self._names = list(self.variables)
        self.global_step = optimization.create_global_step()
        if cfg.lr_schedule == "one_cycle":
            schedule = optimization.one_cycle_schedule(cfg.learning_rate, cfg.num_train_steps)
        elif cfg.lr_schedule == "wsd":
            schedule = optimization.warmup_stable_decay_schedule(
                cfg.learning_rate, cfg.num_train_steps, cfg.num_warmup_steps,
                cfg.num_decay_steps, cfg.final_lr_fraction)
        else:
            schedule = optimization.learning_rate_schedule(
                cfg.learning_rate, cfg.num_train_steps, cfg.num_warmup_steps)
        if cfg.optimizer == "lamb":
            self.optimizer = optimization.LAMB(schedule)
        else:
            self.optimizer = optimization.AdamWeightDecay(
                schedule, bias_correction=cfg.adam_bias_correction)
        self.optimizer.build(self.variables)
        if lr_multipliers:
            self.optimizer.set_lr_multipliers(lr_multipliers)
        # The update (clip scale, moments, weight decay, the step) is one XLA-compiled function
        # whatever --use_xla says: every variable's ~12 element-wise ops fuse into one pass
        # over the variable and its two slots. Same update up to float rounding; faster on CPUs
        # (docs/benchmarks.md), and on GPUs a few fused kernels instead of a dozen per
        # variable. The global norm and the finiteness check before it are TensorFlow's ops
        # (`_clip_and_apply`): XLA's CPU reductions and a conditional around the compiled
        # update were about half of its time (docs/benchmarks.md, "The global norm before the
        # compiled update").
        self._apply_clipped = tf.function(self._apply_clipped_impl, jit_compile=True,
                                          autograph=False)
        self.fp16 = cfg.precision == "fp16"
        self.loss_scale = tf.Variable(INITIAL_LOSS_SCALE if self.fp16 else 1.0,
                                      dtype=tf.float32, trainable=False, name="loss_scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                      name="loss_scale_good_steps")
        self._grad_fn = towers.make_tower_grad_fn(self._tower_fn, self.variables.values(),
                                                  jit_compile=cfg.use_xla,
                                                  draw_outside=_draws_outside_xla(self.devices))
        self.accumulators = None
        self._grad_is_none = {}  # per route: which variables the traced towers leave without
        if cfg.num_accumulation_steps > 1:
            # Accumulation always completes within one update, so these are never saved.
            self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False)
                                 for v in self.variables.values()]
        self.shapes = _LengthPolymorphic(cfg.pad_to_multiple_of > 0)
        self._train_step = tf.function(self._train_step_impl, autograph=False)
        self.global_context = tf.function(self._global_context_impl, autograph=False)
        self._accumulate = tf.function(self._accumulate_impl, autograph=False)
        self._apply_accumulated = tf.function(self._apply_accumulated_impl,
                                               autograph=False)

    def _task_of(self, route) -> contract.TrainingLoss:
        """The task whose loss a batch trains: the task, or for a routed (multi-task) batch
        `task.routes[route]` (see `__call__`)."""
        return self.task if route is None else self.task.routes[route]

    def _tower_fn(self, shard, example_offset, shared: "_TowersInput"):
        """One tower's share of the loss; `example_offset`: int64 scalar, the position of its
        first example in the global batch."""
        # Dropout masks keyed by (seed, step, global example position): the same whatever the
        # split over towers, micro-batches and workers, and again after a resume. With a
        # layout length (fine-tuning: the training file's longest example, rounded up), trimmed
        # (--pad_to_longest) and padded batches draw them in that layout: on the real tokens,
        # the same masks whatever the cut (see execution.DropoutStream). The task says where
        # a batch's sequence axis is.
        length = self.task.sequence_length(shard) if self.cfg.dropout_layout_length > 0 else None
        stream = execution.DropoutStream(
            self.cfg.random_seed, shared.step, example_offset, _batch_rows(shard),
            seq_length=length,
            full_length=self.cfg.dropout_layout_length if length is not None else None)
        with traced_as_configured(self.cfg, stream=stream):
            return self._task_of(shared.route).tower_loss(shard, shared.context, training=True)

    def towers(self, features, context, offset=0, route=None):
        """Summed (still loss-scaled) gradients of the towers on one micro-batch, and their
        summed statistics.

        Args:
          features: the micro-batch, dict of Tensors [batch, ...].
          context: the task's normalisers of the global batch.
          offset: int scalar, the position of the micro-batch's first example in the global
            batch (of every worker).
          route: None, or (a routed task) the index of the batch's task, a Python int.
        """
        shards = towers.split_batch(features, self.cfg.n_gpus)
        rows = _batch_rows(shards[0])
        offset = tf.cast(offset, tf.int64)
        shared = _TowersInput(self.global_step.read_value(), context, route)
        outputs, grads = towers.run_towers(self._grad_fn, shards, self.devices, self.loss_scale,
                                           [offset + i * rows for i in range(len(shards))],
                                           shared)
        grads = towers.sum_gradients(grads)
        length = self.task.sequence_length(features) if self.cfg.dropout_layout_length > 0 else None
        if isinstance(length, tf.Tensor):  # the one trace of batches cut to any length
            grads = [_pad_slices(g, self.cfg.dropout_layout_length, length) for g in grads]
        return grads, _sum_dicts(o["sums"] for o in outputs)

    def _worker_offset(self, features):
        """Position of this worker's part in the global batch (workers' parts in index order)."""
        if self.cluster is None:
            return tf.constant(0, tf.int64)
        return self.cluster.task_index * _batch_rows(features)

    def _global_context_impl(self, features, route=None):
        """The task's normalisers of the global batch: summed over workers."""
        context = self._task_of(route).context(features)
        if self.cluster is None:
            return context
        keys = sorted(context)
        return dict(zip(keys, self.cluster.sum([context[k] for k in keys])))

    def _apply(self, grads, stop, sums):
        """Sum over workers, unscale, check, clip by global norm, apply once, count the step.

        Args:
          grads: this worker's summed (loss-scaled) gradients.
          stop: float scalar, 1.0 if this worker was asked to stop (a signal).
          sums: the task's additive statistics of this worker's batch.

        Returns:
          (learning rate, finite flag, global norm before clipping, stop flag of any worker,
          statistics summed over workers).
        """
        if self.cluster is not None:
            # One all-reduce carries the gradients, the stop flags and the logged statistics.
            keys = sorted(sums)
            n = len(grads)
            reduced = self.cluster.sum(list(grads) + [stop] + [sums[k] for k in keys])
            grads, stop = reduced[:n], reduced[n]
            sums = dict(zip(keys, reduced[n + 1:]))
        if self.fp16:
            grads = [_scale_gradient(g, 1.0 / self.loss_scale) for g in grads]
        named = {n: g for n, g in zip(self._names, grads) if g is not None}
        lr, finite, global_norm = self._clip_and_apply(named)
        if self.fp16:
            self._update_loss_scale(finite)
        return lr, finite, global_norm, stop, sums

    def _clip_and_apply(self, named_grads):
        """Clips by global norm and applies the update, unless a gradient is not finite.

        Returns (learning rate, finite flag, global norm before clipping); `global_step` is
        incremented only when the update is applied.
        """
        global_norm = optimization.global_norm(
            named_grads, indexed_slices_norm=self.cfg.indexed_slices_norm, unique_rows=True)
        # Any NaN or Inf in a gradient makes the global norm non-finite, so its finiteness is
        # the check (a separate is_finite pass would read every gradient once more).
        # The norm also overflows once some |gradient| > ~1e19, which is taken as non-finite.
        finite = tf.math.is_finite(global_norm)

        def skip():
            return tf.cast(self.optimizer.learning_rate_at(self.global_step), tf.float32)

        return (tf.cond(finite, lambda: self._apply_clipped(named_grads, global_norm), skip),
                finite, global_norm)

    def _apply_clipped_impl(self, named_grads, global_norm):
        """The update with the gradients clipped to `global_norm` (theirs, finite); returns the
        learning rate used and increments `global_step`."""
        clipped, _ = optimization.clip_by_global_norm(named_grads, self.cfg.clip_norm,
                                                      norm=global_norm)
        lr = self.optimizer.apply_gradients(clipped, self.global_step)
        self.global_step.assign_add(1)
        return tf.cast(lr, tf.float32)

    def _update_loss_scale(self, finite):
        grow = tf.logical_and(finite, self.good_steps + 1 >= LOSS_SCALE_GROWTH_INTERVAL)
        new_scale = tf.where(finite, tf.where(grow, self.loss_scale * 2.0, self.loss_scale),
                             tf.maximum(self.loss_scale / 2.0, 1.0))
        new_good = tf.where(tf.logical_and(finite, tf.logical_not(grow)),
                            self.good_steps + 1, tf.zeros_like(self.good_steps))
        self.loss_scale.assign(new_scale)
        self.good_steps.assign(new_good)

    def _train_step_impl(self, features, stop, route=None):
        context = self._global_context_impl(features, route)
        grads, sums = self.towers(features, context, self._worker_offset(features), route)
        lr, finite, global_norm, stop, sums = self._apply(grads, stop, sums)
        return sums, context, lr, finite, global_norm, stop

    def _accumulate_impl(self, features, context, offset, route=None):
        grads, sums = self.towers(features, context, offset, route)
        self._grad_is_none[route] = [g is None for g in grads]
        for acc, g in zip(self.accumulators, grads):
            if g is not None:
                acc.assign_add(tf.convert_to_tensor(g))
        return sums

    def _apply_accumulated_impl(self, stop, sums, route=None):
        grads = [None if none else acc.read_value()
                 for acc, none in zip(self.accumulators, self._grad_is_none[route])]
        result = self._apply(grads, stop, sums)
        for acc in self.accumulators:
            acc.assign(tf.zeros_like(acc))
        return result

    def __call__(self, features, stop: bool = False, num_micro_batches: Optional[int] = None):
        """One update on a global batch (eager entry point; everything inside is traced).

        Args:
          features: dict of Tensors [batch, ...]: this worker's part of the global batch,
            batch = train_batch_size * n_gpus * num_micro_batches.
          stop: this worker was asked to stop (multi-worker: every worker learns it).
          num_micro_batches: micro-batches accumulated into this update; default
            num_accumulation_steps (the batch ramp passes fewer, see `MicroBatches.at`).

        Returns:
          dict: the task's metrics of the global batch, `learning_rate`, `global_norm`,
          `finite`, `stop` (some worker asked to stop).

        The task's `route(features)` says which of its `routes` a batch trains (None: its own
        loss; `tasks/multitask.py`'s `MultiTaskClassifier` has one route per task); the update
        is traced once per route, so the variables that route does not use get no gradient and
        are not updated at all.
        """
        route = self.task.route(features)
        stop = tf.constant(1.0 if stop else 0.0)
        k = num_micro_batches or self.cfg.num_accumulation_steps
        if k == 1:
            sums, context, lr, finite, global_norm, stop = self.shapes.call(
                self._train_step, self.task, features, stop, route)
        else:
            context = self.shapes.call(self.global_context, self.task, features, route)
            base = self._worker_offset(features)
            micros = towers.split_batch(features, k)
            rows = _batch_rows(micros[0])
            sums = _sum_dicts(self.shapes.call(self._accumulate, self.task, micro, context,
                                               base + m * rows, route)
                              for m, micro in enumerate(micros))
            lr, finite, global_norm, stop, sums = self._apply_accumulated(stop, sums, route)
        out = dict(self._task_of(route).metrics(sums, context))
        out.update(learning_rate=lr, global_norm=global_norm, finite=finite, stop=stop > 0)
        return out

    def checkpoint_tensors(self) -> Dict[str, tf.Variable]:
        """Everything a resume needs, under Google's names."""
        tensors = dict(self.variables)
        tensors.update(self.optimizer.slot_variables())
        tensors["global_step"] = self.global_step
        if self.fp16:
            tensors["loss_scale"] = self.loss_scale
            tensors["loss_scale_good_steps"] = self.good_steps
        return tensors


class MicroBatches:
    """How many micro-batches (train_batch_size x n_gpus each) each update takes: always
    num_accumulation_steps, except during Cramming's batch ramp."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg

    def at(self, step: int) -> int:
        """Micro-batches of update `step` (0-based): num_accumulation_steps, or with
        `batch_ramp_steps` = R > 0 a linear ramp from 1 at step 0 to num_accumulation_steps at
        step R (Cramming's batch-size ramp)."""
        k, ramp = self.cfg.num_accumulation_steps, self.cfg.batch_ramp_steps
        if not ramp or step >= ramp:
            return k
        return 1 + (step * (k - 1)) // ramp

    def between(self, first: int, last: int) -> int:
        """Micro-batches that updates first .. last - 1 consume."""
        if last <= first:
            return 0
        ramped = range(first, min(last, self.cfg.batch_ramp_steps))
        return (sum(self.at(s) for s in ramped)
                + self.cfg.num_accumulation_steps * (last - first - len(ramped)))

    def batches_to_skip(self, step: int) -> int:
        """Input batches consumed by updates 0 .. step - 1: without the ramp the input yields
        whole global batches, one per update; with it, micro-batches."""
        return self.between(0, step) if self.cfg.batch_ramp_steps else step

    def next_batch(self, iterator, step: int):
        """The features of update `step` and their number of micro-batches (None: default)."""
        if not self.cfg.batch_ramp_steps:
            return next(iterator), None
        k = self.at(step)
        parts = [next(iterator) for _ in range(k)]
        return {name: tf.concat([p[name] for p in parts], 0) for name in parts[0]}, k


class ResumeState:
    """Checkpoints and input positions: what makes a killed run resume exactly.

    The checkpoint (chief only) holds the update's tensors under Google's names; the input
    pipeline's position of every worker is saved next to it (`input_state/ckpt-STEP`, a tf.data
    iterator state) with a recipe (`ckpt-STEP.json`: examples consumed, the batch the input
    yields, workers, records skipped when the pipeline was built). A rerun with the same batch
    restores the iterator; a rerun with another global batch on one worker (e.g. a smaller
    --train_batch_size after running out of memory) continues at the next example instead.
    `resume` is the one sequence that does it, for training and for evaluation alike.
    """

    def __init__(self, cfg: TrainConfig, update: UpdateStep, micro: MicroBatches,
                 cluster=None):
        self.cfg, self.update, self.micro, self.cluster = cfg, update, micro, cluster
        self.is_chief = cluster.is_chief if cluster else True
        self.num_workers = cluster.num_workers if cluster else 1
        # Examples (of every worker) in one micro-batch, and in one batch of the input.
        self.micro_examples = cfg.train_batch_size * cfg.n_gpus * self.num_workers
        self.input_batch = cfg.train_batch_size * cfg.n_gpus * (
            1 if cfg.batch_ramp_steps else cfg.num_accumulation_steps)
        # Examples consumed at update `step` = base_examples + micro.between(base_step, step)
        # x micro_examples; the input pipeline skipped `skip_records` records when built.
        self.base_step = self.base_examples = self.skip_records = 0
        self.repositioned = False

    def examples_consumed(self, step: int) -> int:
        return self.base_examples + self.micro.between(self.base_step, step) * \
            self.micro_examples

    def resume(self, dataset: Optional[tf.data.Dataset] = None
               ) -> Tuple[int, Optional["InputPosition"]]:
        """The resume sequence, the only one: restores the newest checkpoint in output_dir
        (weights, slots, step, loss scale), else initialises; then, given the training input,
        positions it where that step left it.

        Args:
          dataset: the training input (global batches), or None (evaluation or prediction
            without training: only the weights are restored).

        Returns:
          (the step training continues from, the input positioned there: None without
          `dataset`).
        """
        step = self.restore_checkpoint()
        if dataset is None:
            return step, None
        if self.cfg.batch_ramp_steps:
            # The ramp takes a varying number of micro-batches per update: re-cut the global
            # batches into micro-batches (the records' order is unchanged).
            dataset = dataset.unbatch().batch(self.input_batch, drop_remainder=True)
        skip = self.plan_input(step) if step else 0
        if skip:
            # The pipeline starts at record `skip` of the stream (a run that resumed with
            # another global batch, and every rerun from its checkpoints).
            dataset = dataset.unbatch().skip(skip).batch(self.input_batch, drop_remainder=True)
        position = InputPosition(dataset)
        if step and not self.repositioned and step < self.cfg.num_train_steps and \
                not self.restore_input(step, position.checkpoint):
            position = InputPosition(dataset)  # a failed restore leaves the iterator unusable
            self.skip_to(step, position.iterator)
        return int(self.update.global_step.numpy()), position

    def restore_checkpoint(self) -> int:
        """Restores the newest checkpoint, else initialises; returns its global step."""
        prefix = checkpoint.latest_checkpoint(self.cfg.output_dir)
        if prefix is None:
            if self.cfg.init_checkpoint:
                checkpoint.init_from_checkpoint(self.cfg.init_checkpoint, self.update.variables)
            else:
                logging.info("No checkpoint in %s and no --init_checkpoint: training from "
                             "scratch (random initialisation).", self.cfg.output_dir)
            return 0
        tensors = self.update.checkpoint_tensors()
        optional = {n: tensors.pop(n) for n in ("loss_scale", "loss_scale_good_steps")
                    if n in tensors}
        checkpoint.restore_checkpoint(prefix, tensors, strict=True)
        if optional:
            checkpoint.restore_checkpoint(prefix, optional, strict=False)
        step = int(self.update.global_step.numpy())
        logging.info("Resumed from %s at global_step %d", prefix, step)
        return step

    def plan_input(self, step: int) -> int:
        """Decides how the input resumes at `step`; returns the records the pipeline must skip
        when built (0: none).

        Raises:
          ValueError: the global batch changed where the position cannot be carried over
            (several workers, the batch ramp, or a multi-task run).
        """
        self.base_step = step
        self.base_examples = self.micro.between(0, step) * self.micro_examples
        recipe = self._read_recipe(step)
        if recipe is None:  # an older checkpoint: the same batch is assumed
            return 0
        self.base_examples, self.skip_records = recipe["examples"], recipe["skip_records"]
        if (recipe["input_batch"], recipe["workers"]) == (self.input_batch, self.num_workers):
            return self.skip_records
        # A routed (multi-task) run's input batches are one task's each, the task drawn per
        # step: re-cut, they would no longer be one step's task (or would mix tasks).
        routed = bool(self.update.task.routes)
        if self.num_workers > 1 or recipe["workers"] > 1 or self.cfg.batch_ramp_steps or routed:
            raise ValueError(
                f"{self.cfg.output_dir}: the checkpoint at step {step} was trained with input "
                f"batches of {recipe['input_batch']} on {recipe['workers']} worker(s); now "
                f"{self.input_batch} on {self.num_workers}. Another global batch can resume "
                f"only on one worker, without --batch_ramp_steps and with one --task_name: "
                f"rerun with the same --train_batch_size/--n_gpus/--num_accumulation_steps/"
                f"workers.")
        examples = recipe["examples"]
        new_step = examples // self.cfg.global_batch_size
        logging.warning(
            "The global batch changed (input batches of %d -> %d): continuing at example %d of "
            "the input, so no example is repeated or skipped; global_step %d -> %d (the "
            "learning-rate schedule continues at step %d of %d).", recipe["input_batch"],
            self.input_batch, examples, step, new_step, new_step, self.cfg.num_train_steps)
        self.update.global_step.assign(new_step)
        self.base_step, self.base_examples = new_step, examples
        self.skip_records, self.repositioned = examples, True
        return examples

    def restore_input(self, step, input_checkpoint) -> bool:
        """Restores the input position saved for `step`; False when there is none or it was
        written by another version of the input pipeline (then the caller builds a fresh
        iterator and calls `skip_to`: a failed restore leaves the iterator unusable)."""
        state = self._input_state_path(step)
        if not tf.io.gfile.exists(state + ".index"):
            logging.warning("No saved input position for step %d.", step)
            return False
        try:
            input_checkpoint.read(state).assert_existing_objects_matched()
        except (tf.errors.OpError, AssertionError) as e:
            message = getattr(e, "message", str(e)).splitlines()[0]
            logging.warning("The input position %s does not fit this input pipeline (written "
                            "by another version?): %s", state, message[:160])
            return False
        logging.info("Input position restored from %s", state)
        return True

    def skip_to(self, step, iterator) -> None:
        """Reaches the input position of `step` by reading the batches before it."""
        skip = (self.examples_consumed(step) // self.num_workers - self.skip_records) \
            // self.input_batch if self.skip_records else self.micro.batches_to_skip(step)
        logging.warning("Skipping %d input batches to reach step %d.", skip, step)
        for _ in range(skip):
            next(iterator)

    def _read_recipe(self, step: int) -> Optional[dict]:
        path = self._input_state_path(step) + ".json"
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)

    def _input_state_dir(self) -> str:
        directory = os.path.join(self.cfg.output_dir, INPUT_STATE_DIR)
        if self.cluster is not None:
            directory = os.path.join(directory, f"worker-{self.cluster.task_index}")
        return directory

    def _input_state_path(self, step: int) -> str:
        return os.path.join(self._input_state_dir(), f"ckpt-{step}")

    def save(self, input_checkpoint: Optional[tf.train.Checkpoint] = None) -> Optional[str]:
        """Writes this worker's input position and its recipe, then (chief) the checkpoint.

        The checkpoint publishes the step; a worker whose input position for it is missing
        (it died before writing it) skips the batches on resume instead, which is exact too.
        """
        step = int(self.update.global_step.numpy())
        if input_checkpoint is not None:
            path = self._input_state_path(step)
            input_checkpoint.write(path)
            recipe = {"examples": self.examples_consumed(step), "input_batch": self.input_batch,
                      "workers": self.num_workers, "skip_records": self.skip_records}
            with tf.io.gfile.GFile(path + ".json.tmp", "w") as f:
                f.write(json.dumps(recipe) + "\n")
            tf.io.gfile.rename(path + ".json.tmp", path + ".json", overwrite=True)
        prefix = None
        if self.is_chief:
            prefix = checkpoint.save_checkpoint(
                self.cfg.output_dir, step, self.update.checkpoint_tensors(),
                keep_checkpoint_max=self.cfg.keep_checkpoint_max)
            logging.info("Saved checkpoint %s", prefix)
        self._prune_input_states()
        return prefix

    def _prune_input_states(self):
        directory = self._input_state_dir()
        state = tf.train.get_checkpoint_state(self.cfg.output_dir)
        if state is None or not tf.io.gfile.isdir(directory):
            return
        kept = {int(m.group(1)) for m in (_CKPT_STEP.search(p)
                                          for p in state.all_model_checkpoint_paths) if m}
        prune_input_states(directory, kept)


class InputPosition:
    """An iterator over the training input and the checkpoint of its position."""

    def __init__(self, dataset: tf.data.Dataset):
        self.iterator = iter(dataset)
        self.checkpoint = tf.train.Checkpoint(input=self.iterator)


class _Loop:
    """The bookkeeping of one `Trainer.train` call: steps, timing, what was saved."""

    def __init__(self, start_step: int):
        self.step = self.saved_step = self.last_step = start_step
        self.start_step = start_step
        self.start = self.last_time = time.monotonic()
        self.metrics: Dict[str, float] = {}


class Trainer:
    """Multi-tower training of a task (`contract.Task`) with Google's optimizer, checkpoints and
    logs: `UpdateStep` (the traced update), `ResumeState` (checkpoints, input positions) and
    the loop below (logging, summaries, signals), plus evaluation and prediction."""

    def __init__(self, task: contract.Task, cfg: TrainConfig, devices, cluster=None,
                 lr_multipliers=None):
        """Builds the optimizer and the step functions (no tracing yet).

        Args:
          task: a `contract.Task` (`tasks/base.py`'s `BertTask` gives its optional members).
          cfg: `TrainConfig`.
          devices: one device name per tower (`towers.setup_devices(cfg.n_gpus)`).
          cluster: a `cluster.Cluster` for multi-worker training, or None.
          lr_multipliers: optional variable name -> learning-rate factor (layer-wise decay).
        """
        cfg.validate()
        if len(devices) != cfg.n_gpus:
            raise ValueError(f"{len(devices)} devices for --n_gpus={cfg.n_gpus}")
        self.task, self.cfg, self.devices, self.cluster = task, cfg, list(devices), cluster
        self.num_workers = cluster.num_workers if cluster else 1
        self.is_chief = cluster.is_chief if cluster else True
        self.update = UpdateStep(task, cfg, devices, cluster, lr_multipliers)
        self.micro = MicroBatches(cfg)
        self.state = ResumeState(cfg, self.update, self.micro, cluster)
        self._eval_step = tf.function(task.eval_sums, autograph=False)
        self._predict_step = tf.function(task.predict, autograph=False)
        # task -> (task, its traced eval_sums, its traced predict): the trained task's, and
        # those of the tasks a multi-task model is evaluated by (`evaluate(..., task=)`).
        self._traced: Dict[int, tuple] = {id(task): (task, self._eval_step, self._predict_step)}

    # -- what the jobs and tests use of the parts ------------------------------------------------

    @property
    def variables(self) -> Dict[str, tf.Variable]:
        """The task's variables by Google's name."""
        return self.update.variables

    @property
    def global_step(self) -> tf.Variable:
        return self.update.global_step

    @property
    def loss_scale(self) -> tf.Variable:
        """fp16's dynamic loss scale (1.0 otherwise)."""
        return self.update.loss_scale

    def step(self, features, stop: bool = False,
             num_micro_batches: Optional[int] = None) -> Dict[str, tf.Tensor]:
        """One update on a global batch: `UpdateStep.__call__`."""
        return self.update(features, stop=stop, num_micro_batches=num_micro_batches)

    def checkpoint_tensors(self) -> Dict[str, tf.Variable]:
        """Everything a checkpoint holds, under Google's names."""
        return self.update.checkpoint_tensors()

    def restore_or_initialize(self) -> int:
        """Restores the newest checkpoint of output_dir, else initialises (--init_checkpoint);
        returns the global step. For a job that evaluates or predicts without training."""
        return self.state.resume()[0]

    def save(self, input_checkpoint: Optional[tf.train.Checkpoint] = None) -> Optional[str]:
        """Writes a checkpoint (chief) and this worker's input position: `ResumeState.save`."""
        return self.state.save(input_checkpoint)

    # -- the loop ---------------------------------------------------------------------------

    def train(self, dataset: tf.data.Dataset, on_step=None) -> Dict[str, float]:
        """Trains until `num_train_steps` updates (or a stop signal); returns the last metrics.

        Args:
          dataset: yields global batches (deterministic; see data/input_pipeline.py).
          on_step: optional `on_step(step, outputs)`, called after every applied update with
            the new global step and `step()`'s outputs; returning True stops training as a
            signal does (checkpoint, then return). E.g. a wall-clock budget.
        """
        cfg = self.cfg
        start, position = self.state.resume(dataset)
        iterator, input_checkpoint = position.iterator, position.checkpoint
        loop = _Loop(start)
        if self.cluster is not None:
            # Same starting weights everywhere, whatever each worker initialised or restored.
            self.cluster.broadcast_from_chief(list(self.variables.values()))
        self._log_start(loop.start_step)
        if loop.start_step >= cfg.num_train_steps:
            logging.info("global_step %d >= num_train_steps %d: nothing to train.",
                         loop.start_step, cfg.num_train_steps)
            return {}
        writer = tf.summary.create_file_writer(cfg.output_dir) if self.is_chief \
            else tf.summary.create_noop_writer()
        with _StopSignals() as signals, writer.as_default():
            while loop.step < cfg.num_train_steps:
                try:
                    features, micro = self.micro.next_batch(iterator, loop.step)
                    features = self.trim(features)
                except StopIteration:
                    logging.warning("Input exhausted at step %d.", loop.step)
                    break
                out = self._run_step(features, micro, signals, loop)
                if out is None:  # fp16: the update was skipped
                    continue
                stop = self._after_step(out, signals, loop, on_step, input_checkpoint)
                if stop:
                    break
        writer.flush()
        return loop.metrics

    def _log_start(self, start_step: int) -> None:
        cfg = self.cfg
        logging.info("***** Training *****")
        logging.info("  Towers (--n_gpus) = %d on %s", cfg.n_gpus, ", ".join(self.devices))
        logging.info("  Global batch = %d (train_batch_size %d x n_gpus %d x accumulation %d"
                     " x workers %d)", cfg.global_batch_size * self.num_workers,
                     cfg.train_batch_size, cfg.n_gpus, cfg.num_accumulation_steps,
                     self.num_workers)
        if cfg.batch_ramp_steps:
            logging.info("  Batch ramp: accumulation grows from 1 to %d over %d steps",
                         cfg.num_accumulation_steps, cfg.batch_ramp_steps)
        logging.info("  Steps = %d (from %d), warmup %d, learning rate %g, precision %s, "
                     "XLA %s", cfg.num_train_steps, start_step, cfg.num_warmup_steps,
                     cfg.learning_rate, cfg.precision, cfg.use_xla)

    def _run_step(self, features, micro, signals, loop) -> Optional[dict]:
        """One update; None when fp16 skipped it. Raises on a lost worker or a diverged loss."""
        try:
            out = self.step(features, stop=signals.received is not None,
                            num_micro_batches=micro)
        except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
                tf.errors.CancelledError, tf.errors.AbortedError) as e:
            if self.cluster is None:
                raise
            raise cluster_lib.WorkerLostError(
                f"worker {self.cluster.task_index}: the all-reduce of step {loop.step + 1} "
                f"did not complete ({type(e).__name__}): a worker died or is unreachable. "
                f"Stopping; relaunch every worker to resume from the last checkpoint (step "
                f"{loop.saved_step}).") from None
        if bool(out.pop("finite")):
            return out
        if self.update.fp16:
            logging.warning("Step %d: non-finite gradients, update skipped; loss scale now %g.",
                            loop.step + 1, float(self.loss_scale))
            return None
        raise NonFiniteLossError(
            f"non-finite loss or gradient norm at step {loop.step + 1} (loss = "
            f"{float(out['loss'])}); the update was not applied and no checkpoint was written "
            f"after step {loop.saved_step}. Lower --learning_rate or check the input.")

    def _after_step(self, out, signals, loop, on_step, input_checkpoint) -> bool:
        """Logs, checkpoints and decides whether to stop after an applied update."""
        cfg = self.cfg
        # Multi-worker: every worker stops at the step where any worker's flag arrived through
        # the all-reduce; alone, a signal stops after the current step.
        stop = bool(out.pop("stop")) or (self.cluster is None and signals.received is not None)
        loop.step = int(self.global_step.numpy())
        if on_step is not None and on_step(loop.step, out):
            # Stops like a signal: alone at once, multi-worker with the next step.
            signals.received = signals.received or "on_step"
            stop = stop or self.cluster is None
        if loop.step % cfg.log_every_n_steps == 0 or loop.step == cfg.num_train_steps \
                or loop.step == loop.start_step + 1:
            self._log_and_summarize(out, loop)
        if loop.step % cfg.save_checkpoints_steps == 0 or loop.step == cfg.num_train_steps:
            self.save(input_checkpoint)
            loop.saved_step = loop.step
        if stop:
            if loop.saved_step != loop.step:
                self.save(input_checkpoint)
            logging.warning("Stopped by %s at global_step %d; checkpoint written. Run the same "
                            "command again to resume.",
                            signals.received or "a signal to another worker", loop.step)
        return stop

    def _log_and_summarize(self, out, loop) -> None:
        cfg = self.cfg
        now = time.monotonic()
        metrics = {k: float(v) for k, v in out.items()}
        if self.update.fp16:
            metrics["loss_scale"] = float(self.loss_scale)
        parts = [f"{k} = {v:.6g}" for k, v in metrics.items() if k != "learning_rate"]
        head = f"step {loop.step}/{cfg.num_train_steps}: {', '.join(parts)}, " \
               f"lr = {metrics['learning_rate']:.3e}"
        if loop.step == loop.start_step + 1:
            # The first update includes tracing (and XLA compilation): no rate or ETA from it.
            logging.info("%s, first update (tracing included) took %s; examples/s and ETA "
                         "from the next log line on", head, format_duration(now - loop.start))
        else:
            # Examples per micro-batch of the whole job (the batch ramp varies their number).
            micro_examples = cfg.train_batch_size * cfg.n_gpus * self.num_workers
            rate = self.micro.between(loop.last_step, loop.step) * micro_examples \
                / max(now - loop.last_time, 1e-9)
            metrics["examples_per_sec"] = rate
            left = self.micro.between(loop.step, cfg.num_train_steps) * micro_examples
            logging.info("%s, %.1f examples/s (global), elapsed %s, ETA %s", head, rate,
                         format_duration(now - loop.start),
                         format_duration(left / max(rate, 1e-9)))
        for name, value in metrics.items():
            write_scalar_summary(name, value, loop.step)
        loop.metrics = metrics
        loop.last_time, loop.last_step = time.monotonic(), loop.step

    # -- evaluation and prediction --------------------------------------------------------------

    def _traced_steps(self, task: Optional[contract.Task]):
        """(task, traced eval_sums, traced predict) of `task`, by default the trained one."""
        task = self.task if task is None else task
        if id(task) not in self._traced:
            self._traced[id(task)] = (task, tf.function(task.eval_sums, autograph=False),
                                      tf.function(task.predict, autograph=False))
        return self._traced[id(task)]

    def trim(self, features):
        """`features` without the padding past its longest example, rounded up to
        --pad_to_multiple_of (with --pad_to_longest; else unchanged). Outputs of the real
        tokens are the padded batch's up to float rounding: padding is masked out of attention
        (exp(-10000) is 0 in float32) and dropout draws the run's layout's masks. Every length
        runs through one trace of each step function (`_LengthPolymorphic`); the rounding
        bounds the XLA compilations (--use_xla) to ceil(max_seq_length / multiple) per batch
        size."""
        return self._trim(features, self.task)

    def _trim(self, features, task: contract.Task):
        if not self.cfg.pad_to_multiple_of:
            return features
        return task.trim_padding(features, self.cfg.pad_to_multiple_of)

    def _batches(self, dataset, task: contract.Task, max_steps: Optional[int] = None):
        """(features trimmed by `task`, example indexes or None) of each batch of an
        evaluation dataset; the indexes are a `length_sorted_dataset`'s positions in the
        files."""
        for i, features in enumerate(dataset):
            if max_steps is not None and i >= max_steps:
                break
            features = dict(features)
            index = features.pop(input_pipeline.EXAMPLE_INDEX, None)
            yield self._trim(features, task), index

    def evaluate(self, dataset: tf.data.Dataset, max_steps: Optional[int] = None,
                 task: Optional[contract.Task] = None) -> Dict:
        """Runs the task's eval over `dataset` (at most `max_steps` batches, all by default) on
        the first tower's device; returns the task's eval metrics plus `global_step`.

        `task`: the trained task by default; else a task over some of its variables (one task
        of a multi-task model, `tasks/multitask.py`'s `MultiTaskClassifier.tasks`)."""
        task, eval_step, _ = self._traced_steps(task)
        totals: Dict[str, np.ndarray] = {}
        with tf.device(self.devices[0]), traced_as_configured(self.cfg):
            for features, _ in self._batches(dataset, task, max_steps):
                for k, v in self.update.shapes.call(eval_step, task, features,
                                                        batch=True).items():
                    totals[k] = totals[k] + v.numpy() if k in totals else v.numpy()
        result = task.eval_metrics(totals) if totals else {}
        result["global_step"] = int(self.global_step.numpy())
        return result

    def predict(self, dataset: tf.data.Dataset,
                task: Optional[contract.Task] = None) -> Dict[str, np.ndarray]:
        """The task's `predict` over every batch of `dataset`, on the first tower's device:
        name -> array concatenated over the batches, in the files' order (a
        `length_sorted_dataset`'s outputs are put back in it). `task`: as `evaluate`'s."""
        task, _, predict_step = self._traced_steps(task)
        outputs: Dict[str, list] = {}
        indexes = []
        with tf.device(self.devices[0]), traced_as_configured(self.cfg):
            for features, index in self._batches(dataset, task):
                if index is not None:
                    indexes.append(index.numpy())
                for name, value in self.update.shapes.call(predict_step, task, features,
                                                           batch=True).items():
                    outputs.setdefault(name, []).append(value.numpy())
        result = {name: np.concatenate(parts, axis=0) for name, parts in outputs.items()}
        if indexes:
            # In file order (of the examples predicted, should the dataset be cut short).
            order = np.argsort(np.concatenate(indexes), kind="stable")
            result = {name: value[order] for name, value in result.items()}
        return result


# Marks a summary as a TensorBoard scalar without importing TensorBoard (not a dependency: the
# event files are plain TF; users install tensorboard only to look at them).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalar_summary(name: str, value: float, step: int) -> None:
    """Writes one TensorBoard scalar to the default summary writer."""
    tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_METADATA)


def write_eval_results(path: str, result: Mapping, log: bool = True) -> None:
    """Google's eval_results.txt: `key = value` lines, sorted by key; written atomically; with
    `log`, also logged as Google's `***** Eval results *****` block."""
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        for key in sorted(result):
            f.write(f"{key} = {result[key]}\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)
    if not log:
        return
    logging.info("***** Eval results (%s) *****", path)
    for key in sorted(result):
        logging.info("  %s = %s", key, result[key])


def save_effective_config(output_dir: str, run_config: Mapping, bert_config=None) -> None:
    """Writes the run's flags (`run_config.json`) and the model config into output_dir."""
    tf.io.gfile.makedirs(output_dir)

    def default(o):
        if isinstance(o, (np.integer, np.floating)):
            return o.item()
        return str(o)

    with tf.io.gfile.GFile(os.path.join(output_dir, "run_config.json"), "w") as f:
        f.write(json.dumps(dict(run_config), indent=2, sort_keys=True, default=default) + "\n")
    if bert_config is not None:
        bert_config.to_json_file(os.path.join(output_dir, "bert_config.json"))
