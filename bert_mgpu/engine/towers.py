"""In-graph towers: devices, batch splitting and gradient summing. Knows nothing of BERT.

The multi-GPU fork of Google's BERT replicated the model as "towers" in one graph: every tower
runs the same model (shared variables) on its slice of the batch on its own GPU; the towers'
gradients are summed (`sum_gradients`: each tower differentiates its share of the global loss,
where the fork averaged per-tower means) and applied once. Here the traced `tf.function` of a
train step is that one graph.

Devices: tower `i` runs on visible GPU `i % n_visible`, so more towers than GPUs is allowed
(several towers share a GPU, which raises utilisation for short sequences). Without a GPU the CPU
is split into logical devices (`setup_devices`) so that exactly the same code path runs, and is
tested, on CPU.
"""

from typing import Callable, Dict, List, Mapping, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.model import execution


def setup_devices(n_towers: int) -> List[str]:
    """Prepares the devices for `n_towers` towers and returns their names.

    With GPUs, nothing is configured (CUDA_VISIBLE_DEVICES decides what is visible). Without,
    the physical CPU is split into `n_towers` logical CPU devices. This must run before
    TensorFlow initialises its runtime (before the first op); if it already did, the existing
    logical devices are used, wrapping around.

    Args:
      n_towers: int >= 1, the number of towers (`--n_gpus`).

    Returns:
      list of `n_towers` device names, e.g. ["/GPU:0", "/GPU:1"] or ["/CPU:0", "/CPU:1"].
    """
    if n_towers < 1:
        raise ValueError(f"--n_gpus must be >= 1, got {n_towers}")
    # Only physical-device queries and configuration here: listing *logical* devices would
    # start the runtime, after which neither the CPU split nor the collective ops of a
    # multi-worker job (`engine/cluster.py`) can be configured any more.
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return [f"/GPU:{i % len(gpus)}" for i in range(n_towers)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu) or []
    if len(configured) < n_towers:
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * n_towers)
        except RuntimeError:
            # The runtime is already initialised (e.g. a test process): towers wrap around
            # the logical devices that exist.
            logging.info("TensorFlow already initialised; %d towers share the existing "
                         "logical CPU devices", n_towers)
            return tower_devices(n_towers)
    count = max(1, len(tf.config.get_logical_device_configuration(cpu) or []))
    return [f"/CPU:{i % count}" for i in range(n_towers)]


def tower_devices(n_towers: int) -> List[str]:
    """Device of each tower: GPU `i % n_gpus` if there are GPUs, else logical CPU `i % n_cpus`."""
    gpus = tf.config.list_logical_devices("GPU")
    kind, devices = ("GPU", gpus) if gpus else ("CPU", tf.config.list_logical_devices("CPU"))
    return [f"/{kind}:{i % len(devices)}" for i in range(n_towers)]


def split_batch(features: Mapping[str, tf.Tensor], n: int) -> List[Dict[str, tf.Tensor]]:
    """Splits every feature along axis 0 into `n` equal consecutive slices.

    Args:
      features: name -> Tensor [batch, ...]; every batch dimension must be divisible by `n`.
      n: number of slices.

    Returns:
      list of `n` dicts name -> Tensor [batch / n, ...]; slice i holds rows
      [i * batch / n, (i + 1) * batch / n).
    """
    if n == 1:
        return [dict(features)]
    out = [dict() for _ in range(n)]
    for name, tensor in features.items():
        batch = tensor.shape[0]
        if batch is not None and batch % n:
            raise ValueError(f"batch of {batch} (feature {name}) cannot be split into {n} "
                             f"equal parts")
        for i, part in enumerate(tf.split(tensor, n, axis=0)):
            out[i][name] = part
    return out


def sum_gradients(tower_grads: Sequence[Sequence]) -> List:
    """Sums the gradients of several towers, variable by variable.

    The trainer's towers each return their share of the global loss, so the gradient of the
    global loss is the sum of theirs.

    Args:
      tower_grads: one list per tower, each with one entry per variable (same order): a dense
        Tensor, an `IndexedSlices` (embedding lookups), or None (no gradient).

    Returns:
      list with one entry per variable: the sum over towers. Dense gradients stay dense;
      when every tower's gradient is an `IndexedSlices` the result is one too (the towers' rows
      concatenated: applying it sums duplicate rows); mixed dense/sparse is densified; None stays
      None only if every tower has None (a None next to real gradients counts as zero).
    """
    n = len(tower_grads)
    if n == 0:
        raise ValueError("no towers")
    if n == 1:
        return list(tower_grads[0])
    combined = []
    for per_var in zip(*tower_grads):
        present = [g for g in per_var if g is not None]
        if not present:
            combined.append(None)
        elif all(isinstance(g, tf.IndexedSlices) for g in present):
            combined.append(tf.IndexedSlices(
                values=tf.concat([g.values for g in present], axis=0),
                indices=tf.concat([g.indices for g in present], axis=0),
                dense_shape=present[0].dense_shape))
        else:
            combined.append(tf.add_n([tf.convert_to_tensor(g) for g in present]))
    return combined


def _traced_grad_fn(tower_fn: Callable, variables: List[tf.Variable]) -> Callable:
    """`make_tower_grad_fn` without XLA: one trace called on every tower's device."""
    # One trace serves every tower: the towers' calls differ only in their tensors (the
    # shard, the position) and their device, and a traced function's ops without a device
    # of their own run where its call is placed. The model's forward and backward pass is
    # traced once instead of once per tower, which saves tracing time with many towers
    # (docs/benchmarks.md, "Start-up: the towers share one trace"). The runtime inlines the
    # calls: the same ops, results equal to float rounding (towers vs one device: 1e-5).
    @tf.function(autograph=False)
    def traced(shard, loss_scale, position, shared):
        with tf.GradientTape() as tape:
            out = tower_fn(shard, position, shared)
            scaled = out["loss"] * tf.cast(loss_scale, out["loss"].dtype)
        return out, tape.gradient(scaled, variables)

    def grad_fn(shard, loss_scale, position, shared):
        out, grads = traced(shard, tf.convert_to_tensor(loss_scale),
                            tf.convert_to_tensor(position), shared)
        return out, [_static_dense_shape(g, v) for g, v in zip(grads, variables)]
    return grad_fn


def make_tower_grad_fn(tower_fn: Callable, variables: Sequence[tf.Variable],
                       jit_compile: bool = False, draw_outside: bool = False) -> Callable:
    """Wraps `tower_fn` into `grad_fn(shard, loss_scale, position, shared) -> (outputs, grads)`.

    Args:
      tower_fn: function(shard, position, shared) -> dict with a scalar float `loss` (and other
        outputs): `position` is what differs between the towers (e.g. where the tower's slice
        starts in the batch), `shared` what every tower receives (a nest of Tensors and Python
        values, e.g. the step and the batch's normalisers). It may be called several times in
        one trace and must create no variables.
      variables: the variables to differentiate, in a fixed order.
      jit_compile: compile each tower's forward and backward pass with XLA. Compiling per tower
        (not the whole multi-device step) keeps every XLA cluster on one device. An XLA
        cluster cannot read a variable that lives on another device, so the compiled tower
        receives copies of the weights made on its own device (what a GPU tower reads each step
        anyway), runs under an execution context whose `parameters` are those copies, and
        differentiates with respect to them.
      draw_outside: with jit_compile, False (the tower's random numbers are drawn inside the
        compiled function) or True: the tower is traced once more outside the compiled
        function under a recording `execution.OutsideDraws`, only for its draws (the rest of
        that trace is unused and pruned), and the compiled tower takes those in order instead
        of drawing: on CPU TensorFlow's generator kernels are several times faster than
        XLA's.

    Returns:
      grad_fn(shard, loss_scale, position, shared): loss_scale is a float scalar the loss is
      multiplied by before differentiation (1.0 without mixed precision); the returned
      gradients are *scaled*, the caller unscales once after summing. Call it under the
      tower's device scope.
    """
    variables = list(variables)
    if not jit_compile:
        return _traced_grad_fn(tower_fn, variables)
    return _compiled_grad_fn(tower_fn, variables, draw_outside)


def _compiled_grad_fn(tower_fn, variables, draw_outside: bool):
    """`make_tower_grad_fn`'s grad_fn with jit_compile: each tower one XLA computation on weight
    copies made on its device, its random draws made outside it with `draw_outside`."""
    @tf.function(jit_compile=True, autograph=False)
    def compiled(shard, loss_scale, values, position, shared, drawn):
        with tf.GradientTape() as tape:
            tape.watch(values)
            supplied = execution.OutsideDraws.supplied(drawn) if draw_outside else None
            with execution.entered(parameters=execution.substituted(variables, values),
                                   drawn_outside=supplied):
                out = tower_fn(shard, position, shared)
            if supplied is not None:
                supplied.check_all_taken()
            scaled = out["loss"] * tf.cast(loss_scale, out["loss"].dtype)
        return out, tape.gradient(scaled, values)

    def grad_fn(shard, loss_scale, position, shared):
        values = [tf.identity(v) for v in variables]  # on the caller's (the tower's) device
        drawn = []
        if draw_outside:
            recording = execution.OutsideDraws.recording()
            with execution.entered(parameters=execution.substituted(variables, values),
                                   drawn_outside=recording):
                tower_fn(shard, position, shared)
            drawn = recording.drawn
        return compiled(shard, tf.convert_to_tensor(loss_scale), values, position, shared,
                        drawn)

    return grad_fn


def _static_dense_shape(grad, variable):
    """`grad` with its static shape: an IndexedSlices returned by a traced function carries
    its dense shape as a tensor the caller's graph cannot read statically; the variable's
    shape restores it (densifying, e.g. for the workers' all-reduce, needs it)."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values, grad.indices,
                                tf.constant(variable.shape.as_list(), grad.dense_shape.dtype))
    return grad


def run_towers(grad_fn: Callable, shards: Sequence, devices: Sequence[str], loss_scale,
               positions: Sequence, shared):
    """Runs `grad_fn(shard, loss_scale, positions[i], shared)` (from `make_tower_grad_fn`) on
    each shard, each on its device.

    Args:
      positions: one per tower, what differs between the towers (e.g. the position of the
        tower's slice in the batch).
      shared: what every tower receives.

    Returns:
      (outputs, grads): outputs is the list of the towers' dicts; grads a list (one per tower) of
      lists of gradients in the variables' order.
    """
    outputs, grads = [], []
    for shard, device, position in zip(shards, devices, positions):
        with tf.device(device):
            out, g = grad_fn(shard, loss_scale, position, shared)
        outputs.append(out)
        grads.append(g)
    return outputs, grads
