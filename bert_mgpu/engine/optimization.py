"""Learning-rate schedules, Google's `AdamWeightDecay`, LAMB and global-norm clipping.

Nothing here knows BERT's structure: optimizers work on a mapping of Google-style variable names
(`bert/encoder/layer_0/attention/self/query/kernel`, `output_weights`, ...) to `tf.Variable`s, and
their slots are named `<name>/adam_m` and `<name>/adam_v` so that a checkpoint written from
`{**model_vars, **opt.slot_variables(), "global_step": step}` has Google's layout.

The global step
---------------
`global_step` is an int64 `tf.Variable` (see `create_global_step`) that the *caller* owns and
increments after `apply_gradients`, exactly as Google's `create_optimizer` did
(`global_step.assign(global_step + 1)` next to the optimizer's train op). The optimizers only
read it: `apply_gradients(named_grads, step)` takes the number of updates already applied (the
value of `global_step` *before* the increment). So the first update runs at step 0, whose LR is
0 when there is warmup — as Google's code documents it. (Google's `create_optimizer` groups the
update and the increment without a control dependency, so which of the two rates TF1 actually
used was up to the executor: run under TF 2.21 graph mode it reads step t + 1. We follow the
documented step t, deterministically; tests/test_optimization.py checks six steps against Google's
code with its own LR tensor pinned to step t.) The caller decides whether a step counts (gradient
accumulation, a skipped non-finite mixed-precision step), which is why the increment is not hidden
in here.

Typical use inside one `tf.function` train step::

    opt = AdamWeightDecay(learning_rate_schedule(5e-5, num_train_steps, num_warmup_steps))
    opt.build(named_variables)                       # eagerly, before tracing
    global_step = create_global_step()
    ...
    grads, _ = clip_by_global_norm(summed_grads, clip_norm=1.0)
    opt.apply_gradients(grads, global_step)
    global_step.assign_add(1)
"""

import re
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf

# Google's `create_optimizer` values.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

LearningRate = Union[float, Callable[[tf.Tensor], tf.Tensor]]
Gradient = Union[tf.Tensor, tf.IndexedSlices, None]


def learning_rate_at(step, init_lr: float, num_train_steps: int,
                     num_warmup_steps: int = 0) -> tf.Tensor:
    """Google's BERT learning rate at `step`: linear warmup, then linear decay to 0.

    The same computation as Google's `create_optimizer`: `tf.train.polynomial_decay` with
    power 1 from `init_lr` to 0.0 at `num_train_steps` (no cycling, so clamped at 0 after it),
    and while `step < num_warmup_steps` the rate is `init_lr * step / num_warmup_steps` instead.
    Note that warmup does not rescale the decay: at the end of warmup the rate jumps from about
    `init_lr` to the decayed `init_lr * (1 - num_warmup_steps / num_train_steps)`, as Google's.

    Args:
      step: int or float scalar (Python number, Tensor or Variable): updates applied so far.
      init_lr: peak learning rate.
      num_train_steps: step at which the rate reaches 0; must be > 0.
      num_warmup_steps: warmup length; 0 means no warmup.

    Returns:
      float32 scalar Tensor. Works eagerly and inside `tf.function` on a tensor step.
    """
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be > 0, got {num_train_steps}")
    if num_warmup_steps < 0:
        raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
    step = tf.cast(step, tf.float32)
    decay_steps = tf.constant(float(num_train_steps), tf.float32)
    # polynomial_decay: p = min(step, decay_steps) / decay_steps; (lr - end) * (1 - p)^1 + end.
    done = tf.minimum(step, decay_steps) / decay_steps
    learning_rate = tf.constant(init_lr, tf.float32) * (1.0 - done)
    if num_warmup_steps:
        warmup_steps = tf.constant(float(num_warmup_steps), tf.float32)
        warmup_learning_rate = init_lr * (step / warmup_steps)
        learning_rate = tf.where(step < warmup_steps, warmup_learning_rate, learning_rate)
    return learning_rate


def learning_rate_schedule(init_lr: float, num_train_steps: int,
                           num_warmup_steps: int = 0) -> Callable[[tf.Tensor], tf.Tensor]:
    """Returns `step -> learning_rate_at(step, init_lr, num_train_steps, num_warmup_steps)`."""
    # Validate now rather than at the first trace.
    learning_rate_at(0, init_lr, num_train_steps, num_warmup_steps)

    def schedule(step):
        return learning_rate_at(step, init_lr, num_train_steps, num_warmup_steps)

    return schedule


def one_cycle_learning_rate_at(step, peak_lr: float, num_train_steps: int) -> tf.Tensor:
    """Cramming's simplified one-cycle rate: a triangle, 0 at step 0, `peak_lr` at the middle
    of training, 0 again at `num_train_steps` (and after).

    Args:
      step: int or float scalar (Python number, Tensor or Variable): updates applied so far.
      peak_lr: the rate at `num_train_steps / 2`.
      num_train_steps: step at which the rate is back to 0; must be > 0.

    Returns:
      float32 scalar Tensor.
    """
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be > 0, got {num_train_steps}")
    half = tf.constant(num_train_steps / 2.0, tf.float32)
    step = tf.minimum(tf.cast(step, tf.float32), 2.0 * half)
    # Up for the first half, down for the second: 1 - |step / half - 1|.
    return tf.constant(peak_lr, tf.float32) * (1.0 - tf.abs(step / half - 1.0))


def one_cycle_schedule(peak_lr: float, num_train_steps: int) -> Callable[[tf.Tensor], tf.Tensor]:
    """Returns `step -> one_cycle_learning_rate_at(step, peak_lr, num_train_steps)`."""
    one_cycle_learning_rate_at(0, peak_lr, num_train_steps)

    def schedule(step):
        return one_cycle_learning_rate_at(step, peak_lr, num_train_steps)

    return schedule


def warmup_stable_decay_learning_rate_at(step, peak_lr: float, num_train_steps: int,
                                         num_warmup_steps: int, num_decay_steps: int,
                                         final_fraction: float = 0.0) -> tf.Tensor:
    """ModernBERT's warmup-stable-decay (trapezoidal) rate with its 1-sqrt decay (Hägele et al.
    2024; ModernBERT's code: its `OneMinusSqrtScheduler`, whose floor `alpha_f` is
    `final_fraction` here).

    With W = `num_warmup_steps`, D = `num_decay_steps`, T = `num_train_steps`, a =
    `final_fraction`: `peak_lr * step / W` while step < W (Google's warmup: 0 at step 0);
    `peak_lr` while step < T - D; then `peak_lr * (a + (1 - a) * (1 - sqrt((step - (T - D)) /
    D)))`, `a * peak_lr` at T and after. D = 0 keeps `peak_lr` to the end (a phase that a later
    one, started from its checkpoint, decays: ModernBERT decays only at the end of its context
    extension).

    Args:
      step: int or float scalar (Python number, Tensor or Variable): updates applied so far.
      peak_lr: the rate of the stable phase.
      num_train_steps: T, the step at which the rate reaches 0; must be > 0.
      num_warmup_steps: W >= 0.
      num_decay_steps: D >= 0, with W + D <= T.
      final_fraction: a in [0, 1].

    Returns:
      float32 scalar Tensor.
    """
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be > 0, got {num_train_steps}")
    if num_warmup_steps < 0 or num_decay_steps < 0 or \
            num_warmup_steps + num_decay_steps > num_train_steps:
        raise ValueError(f"warmup-stable-decay needs num_warmup_steps >= 0, num_decay_steps "
                         f">= 0 and their sum <= num_train_steps, got {num_warmup_steps}, "
                         f"{num_decay_steps}, {num_train_steps}")
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"final_fraction must be in [0, 1], got {final_fraction}")
    step = tf.cast(step, tf.float32)
    learning_rate = tf.constant(peak_lr, tf.float32)
    if num_decay_steps:
        decay_start = float(num_train_steps - num_decay_steps)
        into_decay = tf.clip_by_value(step - decay_start, 0.0, float(num_decay_steps))
        # 1 through the stable phase, then 1 - sqrt of the decay's elapsed fraction, scaled
        # into [final_fraction, 1].
        learning_rate *= final_fraction + (1.0 - final_fraction) * (
            1.0 - tf.sqrt(into_decay / float(num_decay_steps)))
    if num_warmup_steps:
        warmup = peak_lr * (step / float(num_warmup_steps))
        learning_rate = tf.where(step < float(num_warmup_steps), warmup, learning_rate)
    return learning_rate


def warmup_stable_decay_schedule(peak_lr: float, num_train_steps: int, num_warmup_steps: int,
                                 num_decay_steps: int, final_fraction: float = 0.0
                                 ) -> Callable[[tf.Tensor], tf.Tensor]:
    """Returns `step -> warmup_stable_decay_learning_rate_at(step, ...)` (validated now)."""
    warmup_stable_decay_learning_rate_at(0, peak_lr, num_train_steps, num_warmup_steps,
                                         num_decay_steps, final_fraction)

    def schedule(step):
        return warmup_stable_decay_learning_rate_at(step, peak_lr, num_train_steps,
                                                    num_warmup_steps, num_decay_steps,
                                                    final_fraction)

    return schedule


def create_global_step() -> tf.Variable:
    """The int64 scalar `global_step` variable (checkpoint name `global_step`), starting at 0.

    The caller increments it once per applied update (see the module docstring).
    """
    return tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")


def _densify(grad: Gradient, like: tf.Variable) -> tf.Tensor:
    """`grad` as a dense float32 Tensor shaped like `like`; `IndexedSlices` rows are summed.

    Google's TF1 optimizer densified `IndexedSlices` implicitly (`tf.multiply(1 - beta_1, grad)`)
    and the moments decay on every row anyway, so a sparse update could not match it.
    """
    if isinstance(grad, tf.IndexedSlices):
        # Duplicate indices (a token seen twice in the batch) add up, as in convert_to_tensor.
        grad = tf.math.unsorted_segment_sum(grad.values, grad.indices, like.shape[0])
    return tf.cast(grad, tf.float32)


class _AdamBase(tf.Module):
    """Slots, name handling and the shared Adam moment update of `AdamWeightDecay` and `LAMB`."""

    # The model's variables are referenced, not owned: keep them out of `self.variables` so the
    # module's variables are exactly its slots.
    _TF_MODULE_IGNORED_PROPERTIES = frozenset(
        tf.Module._TF_MODULE_IGNORED_PROPERTIES | {"_params", "_updates"})

    def __init__(self, learning_rate: LearningRate, weight_decay_rate: float, beta_1: float,
                 beta_2: float, epsilon: float,
                 exclude_from_weight_decay: Optional[Sequence[str]], name: str):
        super().__init__(name=name)
        self._learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = (
            list(DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY) if exclude_from_weight_decay is None
            else list(exclude_from_weight_decay))
        self._params: Dict[str, tf.Variable] = {}
        self._m: Dict[str, tf.Variable] = {}
        self._v: Dict[str, tf.Variable] = {}
        self._built = False
        self.lr_multipliers: Dict[str, float] = {}
        self._updates: Dict[Tuple[bool, ...], Callable] = {}

    # -- construction ----------------------------------------------------------------------

    def build(self, named_variables: Mapping[str, tf.Variable]) -> None:
        """Creates the zero-initialised float32 slots `<name>/adam_m` and `<name>/adam_v`.

        Call it once, eagerly, before the train step is traced (a `tf.function` must not create
        variables on later traces). Calling it again with the same names and shapes is a no-op;
        with a different set it is an error.

        Args:
          named_variables: Google-style name -> trainable `tf.Variable` (shapes fully defined).
        """
        if self._built:
            same = (list(self._params) == list(named_variables) and all(
                self._params[n].shape == v.shape for n, v in named_variables.items()))
            if not same:
                raise ValueError(f"{self.name}: build() was already called with other variables")
            return
        for name, var in named_variables.items():
            if not var.shape.is_fully_defined():
                raise ValueError(f"{self.name}: variable {name} has an undefined shape {var.shape}")
            # Explicit names (no scope) so `slot_variables()` keys equal the variables' names.
            with tf.init_scope():
                self._m[name] = tf.Variable(tf.zeros(var.shape, tf.float32), trainable=False,
                                            name=f"{name}/adam_m")
                self._v[name] = tf.Variable(tf.zeros(var.shape, tf.float32), trainable=False,
                                            name=f"{name}/adam_v")
        self._params = dict(named_variables)
        self._built = True

    def set_lr_multipliers(self, multipliers: Mapping[str, float]) -> None:
        """Per-variable factors on the learning rate (e.g. layer-wise LR decay); 1.0 if absent.

        Call after `build` and before the train step is traced.
        """
        unknown = sorted(set(multipliers) - set(self._params))
        if unknown:
            raise ValueError(f"{self.name}: LR multipliers for unknown variables: "
                             f"{', '.join(unknown)}")
        self.lr_multipliers = {n: float(m) for n, m in multipliers.items() if float(m) != 1.0}

    def slot_variables(self) -> Dict[str, tf.Variable]:
        """Checkpoint name -> slot variable: `<name>/adam_m`, `<name>/adam_v` for every variable."""
        slots = {}
        for name in self._params:
            slots[f"{name}/adam_m"] = self._m[name]
            slots[f"{name}/adam_v"] = self._v[name]
        return slots

    # -- helpers ---------------------------------------------------------------------------

    def learning_rate_at(self, step=None) -> tf.Tensor:
        """The float32 scalar learning rate of an update at `step` (updates applied so far)."""
        if callable(self._learning_rate):
            if step is None:
                raise ValueError(f"{self.name}: a learning-rate schedule needs the step")
            return tf.cast(self._learning_rate(step), tf.float32)
        return tf.constant(self._learning_rate, tf.float32)

    def _do_use_weight_decay(self, name: str) -> bool:
        """Google's rule: decay unless the rate is 0 or a pattern re.search-matches the name."""
        if not self.weight_decay_rate:
            return False
        return not any(re.search(r, name) is not None for r in self.exclude_from_weight_decay)

    def _next_moments(self, m: tf.Tensor, v: tf.Tensor,
                      grad: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        # Google's expressions and constant forms (Python floats), so float32 rounding matches.
        next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
        next_v = tf.multiply(self.beta_2, v) + tf.multiply(1.0 - self.beta_2, tf.square(grad))
        return next_m, next_v

    def _bias_corrected(self, next_m: tf.Tensor, next_v: tf.Tensor,
                        step) -> Tuple[tf.Tensor, tf.Tensor]:
        """m / (1 - beta_1^t), v / (1 - beta_2^t), t = step + 1 (this update's 1-based count)."""
        t = tf.cast(step, tf.float32) + 1.0
        return next_m / (1.0 - tf.pow(self.beta_1, t)), next_v / (1.0 - tf.pow(self.beta_2, t))

    def _checked_grads(self, named_grads: Mapping[str, Gradient]) -> Iterable[Tuple[str, Gradient]]:
        if not self._built:
            raise ValueError(f"{self.name}: call build(named_variables) before apply_gradients")
        unknown = [n for n in named_grads if n not in self._params]
        if unknown:
            raise ValueError(f"{self.name}: gradients for variables not given to build(): "
                             + ", ".join(unknown))
        # Variables without a gradient (None or absent) are left untouched, as Google's.
        return [(n, named_grads[n]) for n in self._params if named_grads.get(n) is not None]

    def _update_direction(self, kind: Tuple[bool, ...], param: tf.Tensor, next_m: tf.Tensor,
                          next_v: tf.Tensor, step: Optional[tf.Tensor]) -> tf.Tensor:
        """The step's direction for a variable of `kind` (see `_update_kind`)."""
        raise NotImplementedError

    def apply_gradients(self, named_grads: Mapping[str, Gradient], step=None) -> tf.Tensor:
        """Applies one update. Does NOT increment `global_step` (the caller does).

        Args:
          named_grads: name -> float Tensor shaped like the variable, `tf.IndexedSlices` (rows
            of the variable's first dimension; duplicate indices are summed) or None (skipped).
            Names must be among those given to `build`.
          step: int scalar (Tensor, Variable or Python int): updates applied before this one.
            Needed by a learning-rate schedule and by LAMB's bias correction.

        Returns:
          float32 scalar Tensor: the learning rate used.
        """
        grads = self._checked_grads(named_grads)
        learning_rate = self.learning_rate_at(step)
        step = None if step is None else tf.convert_to_tensor(step)
        for name, grad in grads:
            var = self._params[name]
            lr = learning_rate * self.lr_multipliers[name] if name in self.lr_multipliers \
                else learning_rate
            new_param, next_m, next_v = self._update_of(name)(
                tf.cast(var, tf.float32), tf.convert_to_tensor(self._m[name]),
                tf.convert_to_tensor(self._v[name]), _densify(grad, var), lr, step)
            var.assign(tf.cast(new_param, var.dtype))
            self._m[name].assign(next_m)
            self._v[name].assign(next_v)
        return learning_rate

    def _update_of(self, name: str) -> Callable:
        """The traced update of one variable: `(param, m, v, grad, lr, step) -> (new param,
        next m, next v)`, shared by every variable the same rules apply to (weight decay or
        not, layer adaptation or not); traced once per shape among them. Tracing a variable's
        dozen ops once per kind and shape rather than once per variable (BERT's layers repeat
        the same shapes) makes the train step's first trace shorter, which users wait for
        before the first update; inside the XLA-compiled update the calls are inlined, so
        the computation is the one written out per variable."""
        key = self._update_kind(name)
        if key not in self._updates:
            def update(param, m, v, grad, lr, step):
                next_m, next_v = self._next_moments(m, v, grad)
                direction = self._update_direction(key, param, next_m, next_v, step)
                return param - lr * direction, next_m, next_v
            self._updates[key] = tf.function(update, autograph=False)
        return self._updates[key]

    def _update_kind(self, name: str) -> Tuple[bool, ...]:
        """What decides a variable's update beyond its values: (weight decay,)."""
        return (self._do_use_weight_decay(name),)


class AdamWeightDecay(_AdamBase):
    """Google's `AdamWeightDecayOptimizer` (BERT `optimization.py`), exactly.

    Per variable, with float32 slots m, v (zeros at start) and NO bias correction::

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        update = m / (sqrt(v) + epsilon)
        update += weight_decay_rate * param      # unless a pattern re.search-matches the name
        param -= learning_rate * update

    Defaults are those of Google's `create_optimizer` (weight decay 0.01, excluding
    `LayerNorm`, `layer_norm` and `bias`), not of the class (whose decay default was 0).

    `bias_correction=True` (`--adam_bias_correction`, not Google's) divides the moments by
    (1 - beta^t) in the update, as PyTorch's `AdamW` (Hugging Face's default) does: without it
    the first updates are several times larger (x6.2 at update 10, x3.2 at 100, x1.6 at 500,
    for the default betas). The slots are stored uncorrected either way.
    """

    def __init__(self, learning_rate: LearningRate, weight_decay_rate: float = 0.01,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Optional[Sequence[str]] = None,
                 name: str = "AdamWeightDecay", bias_correction: bool = False):
        """Args:
          learning_rate: float, or a callable `step -> float32 scalar` such as
            `learning_rate_schedule(...)`.
          weight_decay_rate: decoupled L2 decay coefficient.
          beta_1, beta_2, epsilon: Adam constants.
          exclude_from_weight_decay: regex patterns; None means ("LayerNorm", "layer_norm",
            "bias"); an empty list decays everything.
          name: module name (not part of any variable name).
          bias_correction: PyTorch AdamW's bias-corrected moments (then `apply_gradients`
            needs the step).
        """
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, name)
        self.bias_correction = bias_correction

    def apply_gradients(self, named_grads: Mapping[str, Gradient], step=None) -> tf.Tensor:
        if step is None and self.bias_correction:
            raise ValueError(f"{self.name}: bias correction needs the step")
        return super().apply_gradients(named_grads, step)

    def _update_direction(self, kind, param, next_m, next_v, step):
        (decay,) = kind
        if self.bias_correction:
            next_m, next_v = self._bias_corrected(next_m, next_v, step)
        update = next_m / (tf.sqrt(next_v) + self.epsilon)
        if decay:
            update += self.weight_decay_rate * param
        return update


class LAMB(_AdamBase):
    """Layer-wise adaptive moments (You et al. 2019, "Large Batch Optimization for Deep
    Learning: Training BERT in 76 minutes"), as in NVIDIA's BERT `LAMBOptimizer`.

    Choices (those of NVIDIA's TF BERT, which trains from Google's checkpoints)::

        t = step + 1                                  # 1-based count of this update
        m = beta_1 * m + (1 - beta_1) * g             # the same slots as AdamWeightDecay
        v = beta_2 * v + (1 - beta_2) * g^2
        r = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)   # bias-corrected
        r += weight_decay_rate * param                # unless excluded from weight decay
        ratio = ||param|| / ||r||  if both norms > 0, else 1.0    (phi = identity, no clamp)
        ratio = 1.0                                   # if excluded from layer adaptation
        param -= learning_rate * ratio * r

    Norms are the L2 norms of the whole variable (a "layer" is one variable). The moments are
    stored without bias correction, so slots are interchangeable with `AdamWeightDecay`'s and
    checkpoints keep the `<name>/adam_m`, `<name>/adam_v` names.
    """

    def __init__(self, learning_rate: LearningRate, weight_decay_rate: float = 0.01,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Optional[Sequence[str]] = None,
                 exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
                 name: str = "LAMB"):
        """Args as `AdamWeightDecay`, plus:
          exclude_from_layer_adaptation: regex patterns of variables updated with ratio 1.0;
            None means the same list as `exclude_from_weight_decay` (LayerNorm and biases).
        """
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, name)
        self.exclude_from_layer_adaptation = (
            list(self.exclude_from_weight_decay) if exclude_from_layer_adaptation is None
            else list(exclude_from_layer_adaptation))

    def _do_layer_adaptation(self, name: str) -> bool:
        return not any(re.search(r, name) is not None for r in self.exclude_from_layer_adaptation)

    def apply_gradients(self, named_grads: Mapping[str, Gradient], step=None) -> tf.Tensor:
        if step is None:
            raise ValueError(f"{self.name}: LAMB needs the step for its bias correction")
        return super().apply_gradients(named_grads, step)

    def _update_kind(self, name):
        return (self._do_use_weight_decay(name), self._do_layer_adaptation(name))

    def _update_direction(self, kind, param, next_m, next_v, step):
        decay, adapt = kind
        next_m_unbiased, next_v_unbiased = self._bias_corrected(next_m, next_v, step)
        update = next_m_unbiased / (tf.sqrt(next_v_unbiased) + self.epsilon)
        if decay:
            update += self.weight_decay_rate * param
        if adapt:
            w_norm = tf.norm(param)
            u_norm = tf.norm(update)
            ratio = tf.where(tf.logical_and(w_norm > 0.0, u_norm > 0.0),
                             w_norm / tf.maximum(u_norm, 1e-30), 1.0)
            update = ratio * update
        return update


def _norm_input(grad: Gradient, indexed_slices_norm: str,
                unique_rows: bool = False) -> Optional[tf.Tensor]:
    """The tensor whose squared L2 norm is `grad`'s contribution to the global norm."""
    if grad is None:
        return None
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    if indexed_slices_norm == "values":
        return grad.values
    # "dense": the norm of the densified gradient; duplicate rows must be summed first.
    if grad.dense_shape is not None and not unique_rows:
        # A static-size segment sum keeps the graph XLA-friendly (no tf.unique).
        num_rows = tf.cast(grad.dense_shape[0], grad.indices.dtype)
        return tf.math.unsorted_segment_sum(grad.values, grad.indices, num_rows)
    unique, positions = tf.unique(grad.indices)
    return tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique)[0])


def _flat(grads):
    """(keys or None, list of entries) of a sequence or a name -> gradient mapping."""
    if isinstance(grads, Mapping):
        return list(grads.keys()), list(grads.values())
    return None, list(grads)


def _check_indexed_slices_norm(indexed_slices_norm: str):
    if indexed_slices_norm not in ("dense", "values"):
        raise ValueError(f"indexed_slices_norm must be 'dense' or 'values', "
                         f"got {indexed_slices_norm!r}")


def global_norm(grads: Union[Sequence[Gradient], Mapping[str, Gradient]],
                indexed_slices_norm: str = "dense", unique_rows: bool = False) -> tf.Tensor:
    """float32 scalar: the L2 norm of all gradients together, as `tf.linalg.global_norm`
    computes it (sqrt(2 x the sum of `tf.nn.l2_loss`), one kernel per gradient, no squared
    copy); entries as `clip_by_global_norm`'s. Non-finite if any gradient is.

    `unique_rows` (with "dense"): an `IndexedSlices` counts through its distinct rows' sums
    (`tf.unique`, which XLA cannot compile) instead of a segment sum into every row of its
    variable: the same norm to float rounding, without two passes over the whole table (a
    word-embedding gradient touches a few hundred of its tens of thousands of rows)."""
    _check_indexed_slices_norm(indexed_slices_norm)
    parts = [_norm_input(g, indexed_slices_norm, unique_rows) for g in _flat(grads)[1]]
    halves = [tf.nn.l2_loss(tf.cast(p, tf.float32)) for p in parts if p is not None]
    return tf.sqrt(2.0 * tf.add_n(halves)) if halves else tf.constant(0.0, tf.float32)


def clip_by_global_norm(grads: Union[Sequence[Gradient], Mapping[str, Gradient]],
                        clip_norm: float = 1.0, indexed_slices_norm: str = "dense",
                        norm: Optional[tf.Tensor] = None
                        ) -> Tuple[Union[List[Gradient], Dict[str, Gradient]], tf.Tensor]:
    """Scales all gradients by `clip_norm / max(global_norm, clip_norm)` (`tf.clip_by_global_norm`).

    The caller applies it once, after the towers are summed (Google clipped at 1.0 before the
    update).

    Args:
      grads: list/tuple or name -> gradient mapping; entries are float Tensors,
        `tf.IndexedSlices` or None.
      clip_norm: float scalar > 0.
      indexed_slices_norm: how an `IndexedSlices` counts in the global norm. "dense" (default):
        the norm of the densified gradient, whatever its representation (duplicate indices are
        summed first), so one tower and N towers give the same norm. "values": the norm of the
        raw `values` rows, which is what TF1's `tf.clip_by_global_norm` computed in Google's
        `run_classifier.py` (word-embedding gradients from `tf.gather` are `IndexedSlices`
        there); the two differ when an index repeats.
      norm: optional float32 scalar, `global_norm(grads, indexed_slices_norm)` computed by
        the caller (the trainer computes it outside its XLA-compiled update).

    Returns:
      (clipped, global_norm): `clipped` has the structure of `grads` (a list for a sequence, a
      dict with the same keys for a mapping); dense entries stay dense, `IndexedSlices` keep
      their indices with scaled values, None stays None. `global_norm` is a float32 scalar
      Tensor (before clipping). A non-finite norm gives NaN gradients, as in TF.
    """
    _check_indexed_slices_norm(indexed_slices_norm)
    keys, flat = _flat(grads)
    if norm is None:
        norm = global_norm(flat, indexed_slices_norm)
    # tf.clip_by_global_norm's formula: clip_norm * min(1 / norm, 1 / clip_norm).
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)

    clipped: List[Gradient] = []
    for g in flat:
        if g is None:
            clipped.append(None)
        elif isinstance(g, tf.IndexedSlices):
            values = g.values * tf.cast(scale, g.values.dtype)
            clipped.append(tf.IndexedSlices(values, g.indices, g.dense_shape))
        else:
            clipped.append(g * tf.cast(scale, g.dtype))
    if keys is not None:
        return dict(zip(keys, clipped)), norm
    return clipped, norm
