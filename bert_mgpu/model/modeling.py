"""The BERT model as a `tf.Module` of named `tf.Variable`s, with Google's numerics and names.

Everything here follows Google's `modeling.py` (Devlin et al.): post-LayerNorm transformer,
`"gelu"` is the tanh approximation, the attention mask adder is -10000, scores are scaled by
1/sqrt(head_size), LayerNorm epsilon is 1e-12, dropout only in training, and the variable names are
exactly the ones in Google's checkpoints (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_N/attention/self/query/kernel`, ...). No Keras: the variables are created once
in `__init__` (their shapes are known from the config), so calling the model N times inside one
`tf.function` (one call per tower) creates no variables and shares all weights.

Options of BERT's successors are keys of `bert_config.json` (see `config.py`); without them the
model is the above exactly. What they change, and the variable names they use:

* `embedding_size` E (ALBERT): the word, token-type and position tables and the embedding
  LayerNorm are E wide, and `bert/encoder/embedding_hidden_mapping_in/{kernel [E, H], bias [H]}`
  projects to the hidden size (ALBERT's names; none when E == H). The masked-LM head transforms
  to E and decodes with the [V, E] table.
* `share_parameters` (ALBERT): a shared sub-block has the names of ALBERT's released checkpoints,
  `bert/encoder/transformer/group_0/inner_group_0/` + `attention_1/self/{query,key,value}`,
  `attention_1/output/dense`, `LayerNorm` (attention) and `ffn_1/intermediate/dense`,
  `ffn_1/intermediate/output/dense`, `LayerNorm_1` (feed-forward). "all" shares both, as ALBERT;
  "attention" or "ffn" share one, and the other sub-block of layer i keeps Google's per-layer
  names (`bert/encoder/layer_i/...`). ALBERT released only "all", so there is no name to match
  for the partial modes; this rule lets the shared half come from an ALBERT checkpoint and the
  per-layer half from a BERT one.
* `pre_layer_norm` (Cramming): x + SubBlock(LayerNorm(x)) instead of LayerNorm(x + SubBlock(x)),
  and a final `bert/encoder/LayerNorm` on the last layer. The two LayerNorms of a layer keep their
  names (the attention one, the feed-forward one): the key says where they apply.
* `use_bias: false` (Cramming): Q, K, V, attention output and feed-forward dense layers have no
  `bias` variable.
* `position_embedding_type: "scaled_sinusoidal"` (Cramming, from FLASH): no position table;
  a fixed sine/cosine table times the learned scalar `bert/embeddings/position_embedding_scale`
  (initialised to 1/sqrt(E)).
* `gated_ffn` (Cramming's GELU-GLU): `intermediate/dense` [H, I] gives value and gate halves,
  the layer outputs value * act(gate) [I/2], and `output/dense` is [I/2, H].

Shape legend used in comments, as in Google's code:
  B = batch size (number of sequences)
  F = `from_tensor` sequence length
  T = `to_tensor` sequence length
  N = `num_attention_heads`
  H = `size_per_head`
"""

import collections
import contextlib
import math
import threading
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_mgpu.model.bert_config import BertConfig

LAYER_NORM_EPSILON = 1e-12
# Added to the attention scores of masked positions before the softmax (Google's value; large
# enough to zero the probability, small enough not to overflow in float16).
ATTENTION_MASK_ADDER = -10000.0


# Google's tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
_GELU_SCALE = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def gelu(x):
    """Gaussian Error Linear Unit, the tanh approximation Google's BERT uses as `"gelu"`.

    In the trainer's towers (inside `dropout_stream`) the forward pass and its gradient are each
    one XLA computation (`_fused_gelu`); elsewhere (evaluation, prediction, the export)
    Google's formula runs op by op.

    Args:
      x: float Tensor to perform activation on.

    Returns:
      `x` with the GELU activation applied, same shape and dtype.
    """
    if in_trainer_towers():
        return _fused_gelu(x)
    cdf = 0.5 * (1.0 + tf.tanh(_GELU_SCALE * (x + _GELU_CUBIC * tf.pow(x, 3))))
    return x * cdf


@tf.function(jit_compile=True, autograph=False)
def _gelu_forward(x):
    """(GELU(x), tanh(sqrt(2/pi) (x + 0.044715 x^3))), fused into one pass."""
    t = tf.tanh(_GELU_SCALE * (x + _GELU_CUBIC * (x * x * x)))
    return x * (0.5 * (1.0 + t)), t


@tf.function(jit_compile=True, autograph=False)
def _gelu_backward(dy, x, t):
    """dy * GELU'(x), written out from the forward's tanh t, fused into one pass."""
    return dy * (0.5 * (1.0 + t)
                 + 0.5 * x * (1.0 - t * t) * _GELU_SCALE * (1.0 + 3.0 * _GELU_CUBIC * (x * x)))


@tf.custom_gradient
def _fused_gelu(x):
    """Google's tanh GELU, its forward pass and its gradient each one XLA computation.

    TensorFlow runs the formula as ~8 element-wise ops forward and ~10 backward, each a pass
    over the [rows, intermediate_size] activations; compiled, each direction is one pass. In
    the pretraining bench's uncompiled towers on the AMD host: 1.063x (one tower) and 1.031x
    (two towers) the update's speed (docs/benchmarks.md, "GELU fused by XLA"). The values
    are Google's formula's to float rounding (tests/test_modeling.py)."""
    y, t = _gelu_forward(x)

    def grad(dy):
        return _gelu_backward(dy, x, t)

    return y, grad


def gelu_exact(x):
    """GELU with the exact Gaussian CDF (erf), which Hugging Face calls `"gelu"`."""
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


# Activation names accepted in `hidden_act`. Google's `modeling.get_activation` knows
# linear/relu/gelu/tanh; "gelu_new" is Hugging Face's name for the same tanh form, and
# "gelu_exact" is an extension for converted checkpoints trained with the erf form.
_ACTIVATIONS = {
    "linear": None,
    "relu": tf.nn.relu,
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_exact": gelu_exact,
    "tanh": tf.tanh,
}


def get_activation(activation_string):
    """Maps an activation name (as in `bert_config.json`) to a function.

    Args:
      activation_string: one of "linear", "relu", "gelu" (tanh approximation, Google's),
        "gelu_new" (same), "gelu_exact" (erf), "tanh"; or a callable, or None / "" for linear.

    Returns:
      A function of one Tensor, or None for the linear activation.

    Raises:
      ValueError: the name is unknown.
    """
    if not isinstance(activation_string, str):
        return activation_string
    if not activation_string:
        return None
    act = activation_string.lower()
    if act not in _ACTIVATIONS:
        raise ValueError(f"Unsupported activation: {activation_string!r} "
                         f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
    return _ACTIVATIONS[act]


# Marks a sequence axis in a `dropout(..., seq_view=...)` layout.
SEQ = "S"


class DropoutStream:
    """Dropout masks that are a pure function of (seed, step, global example position).

    Inside `dropout_stream(...)` every `dropout` call draws its mask from a counter-based
    generator (Philox, TensorFlow's `StatelessRandomUniformFullIntV2`, one 16-bit draw per
    value): the key is derived from the seed and the call's index in the model (the same in
    every trace), the counter's high word is the global step and its low word the position of
    the tower's first value in the global batch.
    Example j of a global batch therefore gets the same mask whichever tower, accumulation
    micro-batch or worker computes it, and a run resumed after a kill draws exactly the masks the
    uninterrupted run drew: no hidden RNG state. XLA-compiled towers draw the same values: on
    CPU with TensorFlow's kernel before the compiled function (`DrawnOutside`), and inside
    it (GPUs, `--xla_layers`) XLA's Philox equals TensorFlow's kernel (tests/test_training.py:
    XLA runs with dropout equal non-XLA ones to float rounding); on GPUs that is not measured
    here.

    Each value is dropped when its 16-bit draw is below round(rate x 2**16): the keep
    probability is 1 - rate to 2**-16 (the generator is most of dropout's cost on CPU; why and
    how much: docs/benchmarks.md). Masks drawn by versions that drew float32 uniforms differ: a
    run started on such a version and resumed on this one draws other (equally valid) masks from
    the resumed step on.

    Batches trimmed to their longest example (--pad_to_longest): given `full_length` (the
    layout length L: the records' padded length, or for fine-tuning the training file's
    longest example rounded up, see `input_pipeline.dropout_layout_length`) and the batch's
    `seq_length` S, a call that names its layout (`seq_view`) draws the values of the L-long
    layout ([B, N, L, L], [B, L, H]) and keeps those of the S real positions, so a trimmed batch
    gets, on its tokens, exactly the masks of the padded batch: the update is the padded run's
    up to float rounding, whatever the trimming, the split over towers or workers, or the
    grouping of examples by length. A batch longer than L (padded to max_seq_length) gets the
    layout's masks and keeps every value past L: padding in every example of the file, which
    no real token attends to. The random values of the whole L-long layout are drawn, not only
    the trimmed ones (the cost, and the alternatives measured: docs/benchmarks.md, "Dropout's
    random numbers").
    """

    def __init__(self, seed: int, step, example_offset, num_examples,
                 seq_length: Optional[int] = None, full_length: Optional[int] = None):
        self.seed = int(seed)
        self.step = tf.cast(step, tf.int64)
        self.example_offset = tf.cast(example_offset, tf.int64)
        self.num_examples = tf.cast(num_examples, tf.int64)
        self.seq_length, self.full_length = seq_length, full_length
        self.calls = 0

    # A compiled layer's stream (`inside`) takes its keys from here: a uint64 Tensor [K] whose
    # entry i is the key of the outer stream's call `calls + i` (None: computed from the seed).
    keys: Optional[tf.Tensor] = None

    def key_value(self, call: int) -> int:
        """splitmix64 of (seed, call index): a distinct Philox key per dropout call."""
        z = (self.seed * 0x9E3779B97F4A7C15 + (call + 1) * 0xBF58476D1CE4E5B9) % 2 ** 64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
        return z ^ (z >> 31)

    def _key(self) -> tf.Tensor:
        call, self.calls = self.calls, self.calls + 1
        if self.keys is not None:
            if call >= self.keys.shape[0]:
                raise ValueError(f"a compiled layer draws more than {self.keys.shape[0]} "
                                 f"dropout masks")
            return self.keys[call:call + 1]
        return tf.constant([self.key_value(call)], tf.uint64)

    def state(self, keys: int):
        """(Tensors, statics) that `inside` rebuilds this stream from in a compiled function,
        with the keys of this stream's next `keys` calls."""
        tensors = [self.step, self.example_offset, self.num_examples,
                   tf.constant(np.array([self.key_value(self.calls + i) for i in range(keys)],
                                        np.uint64))]
        dynamic = isinstance(self.seq_length, tf.Tensor)
        if dynamic:
            tensors.append(self.seq_length)
        return tensors, (self.seed, None if dynamic else self.seq_length, self.full_length)

    @classmethod
    def inside(cls, tensors, statics) -> "DropoutStream":
        """The stream `state` describes, drawing the outer stream's masks call for call."""
        seed, seq_length, full_length = statics
        step, offset, num, keys = tensors[:4]
        stream = cls(seed, step, offset, num,
                     tensors[4] if len(tensors) > 4 else seq_length, full_length)
        stream.keys = keys
        return stream

    def dropout(self, x: tf.Tensor, rate: float, seq_view=None) -> tf.Tensor:
        """x: float Tensor whose values are example-major (e.g. [B, ...] or [B*S, H] with B the
        tower's examples); `seq_view`: optional per-example layout of x, Python ints and `SEQ`
        for a sequence axis (e.g. (SEQ, H), (N, SEQ, SEQ)). Keeps each value with probability
        1 - rate (to 2**-16), scaled by 1/(1 - rate), as `tf.nn.dropout`."""
        key = self._key()
        full_view = None
        if seq_view is not None and self.full_length is not None:
            full_view = [self.full_length if d == SEQ else d for d in seq_view]
            per_example = int(np.prod(full_view))
        else:
            per_example = tf.size(x, out_type=tf.int64) // self.num_examples
        # One 16-bit draw per value: Philox yields 4 32-bit words (8 draws) per counter
        # increment, and each example takes a whole number of increments, so an example's draws
        # start at counter offset * increments. 16 bits instead of a float32 uniform's 32 halve
        # the generator's work (its cost dominates dropout on CPU, docs/benchmarks.md).
        increments = (per_example + 7) // 8
        supplied = getattr(_DRAWN_OUTSIDE, "supply", None)
        if supplied is not None:  # drawn before the compiled function (`DrawnOutside`)
            words = supplied.take()
        else:
            counter = tf.stack([tf.cast(self.example_offset * increments, tf.uint64),
                                tf.cast(self.step, tf.uint64)])
            words = tf.raw_ops.StatelessRandomUniformFullIntV2(
                shape=tf.stack([self.num_examples, tf.cast(increments * 4, tf.int64)]),
                key=key, counter=counter, alg=1, dtype=tf.uint32)  # Philox
            recorded = getattr(_DRAWN_OUTSIDE, "record", None)
            if recorded is not None:
                recorded.append(words)
        draws = tf.reshape(tf.bitcast(words, tf.uint16), tf.stack([self.num_examples, -1]))
        draws = draws[:, :per_example]
        if full_view is not None:
            draws = tf.reshape(draws, [-1] + full_view)
            # A length unknown in the trace (one trace for every cut) is a cut of the layout:
            # a longer batch would not reshape to x below, a loud error.
            if not isinstance(self.seq_length, int) or self.seq_length <= self.full_length:
                real = tuple([slice(None)] + [slice(0, self.seq_length) if d == SEQ
                                              else slice(None) for d in seq_view])
                draws = draws[real]
            else:  # positions past the layout are padding in every example: kept
                past = self.seq_length - self.full_length
                draws = tf.pad(draws, [[0, 0]] + [[0, past] if d == SEQ else [0, 0]
                                                  for d in seq_view],
                               constant_values=np.uint16(0xFFFF))
        keep = tf.reshape(draws, tf.shape(x)) >= _drop_threshold(rate)
        scale = tf.cast(1.0 / (1.0 - rate), x.dtype)
        return tf.where(keep, x * scale, tf.zeros([], x.dtype))


def _drop_threshold(rate: float) -> tf.Tensor:
    """uint16 scalar t: a uniform 16-bit draw d is dropped when d < t, i.e. with probability
    t / 2**16 = `rate` rounded to the nearest multiple of 2**-16 (0.1 -> 0.1000061)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return tf.constant(min(int(round(rate * 65536)), 65535), tf.uint16)


_STREAM = threading.local()
_DRAWN_OUTSIDE = threading.local()


@contextlib.contextmanager
def _bound(local: threading.local, name: str, value):
    """Within the block, this thread's `local.<name>` is `value` (yielded); the previous value
    (None if unset) is restored after. The state the model reads while it is traced (the dropout
    stream, the parameter values, the drawn-outside words) is set this way."""
    previous = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield value
    finally:
        setattr(local, name, previous)


class _Supply:
    """The random words `DrawnOutside.supply` hands to the stream's calls, in order."""

    def __init__(self, words):
        self.words, self.taken = list(words), 0

    def take(self) -> tf.Tensor:
        if self.taken >= len(self.words):
            raise ValueError(f"the compiled tower draws more than the {len(self.words)} dropout "
                             f"masks drawn outside it")
        self.taken += 1
        return self.words[self.taken - 1]


class DrawnOutside:
    """Dropout's random words drawn by TensorFlow's kernels outside an XLA-compiled tower.

    On CPU, XLA's Philox (the same values as TensorFlow's kernel) takes several times the time
    of TensorFlow's `StatelessRandomUniformFullIntV2` for the same words: in the pretraining
    bench's whole-tower compilation the draws were 73 of 436 ms per update, against ~11 ms for
    the same draws uncompiled (docs/benchmarks.md, "XLA's random numbers on CPU"). So the
    towers (`towers.make_tower_grad_fn`) trace the tower once under `record` outside the
    compiled function, where every stream call's words are real draws of the caller's graph
    (the rest of that trace is unused and pruned), and pass them into the compiled function,
    whose stream calls take them under `supply` instead of drawing: the same words, call for
    call, so the same masks.
    """

    @staticmethod
    @contextlib.contextmanager
    def record():
        """Within the block, each stream call's words are also appended to the yielded list."""
        with _bound(_DRAWN_OUTSIDE, "record", []) as recorded:
            yield recorded

    @staticmethod
    @contextlib.contextmanager
    def supply(words):
        """Within the block, stream calls take `words` (a `record` block's list), in order,
        instead of drawing; every one must be taken."""
        with _bound(_DRAWN_OUTSIDE, "supply", _Supply(words)) as supply:
            yield
        if supply.taken != len(supply.words):
            raise ValueError(f"the compiled tower drew {supply.taken} dropout masks, "
                             f"{len(supply.words)} were drawn outside it")


@contextlib.contextmanager
def dropout_stream(seed: int, step, example_offset, num_examples,
                   seq_length: Optional[int] = None, full_length: Optional[int] = None):
    """Within the block (while tracing), `dropout` draws from a `DropoutStream`.

    Args:
      seed: Python int (`--random_seed`).
      step: int Tensor, the global step of the update.
      example_offset: int Tensor, the position in the global batch of the first example of
        the tensors the model computes in the block (a tower's slice).
      num_examples: int Tensor, the examples in the block's batch.
      seq_length, full_length: Python ints, the batch's sequence length and the records'
        padded length when the batch was trimmed (then the masks on the real positions are the
        padded batch's); None: not trimmed. `seq_length` may be an int32 scalar Tensor (a
        trace shared by every cut length), which is then at most `full_length`.
    """
    with _bound(_STREAM, "current", DropoutStream(seed, step, example_offset, num_examples,
                                                  seq_length, full_length)) as stream:
        yield stream


def in_trainer_towers() -> bool:
    """Whether the model is being traced in the trainer's towers (inside `dropout_stream`),
    where element-wise pieces run as XLA computations (the GELU, the masked-LM loss); the rest
    (evaluation, prediction, the export) runs TensorFlow's ops only."""
    return getattr(_STREAM, "current", None) is not None


def dropout(input_tensor, dropout_prob, training, seq_view=None):
    """Dropout that is the identity outside training or when `dropout_prob` is 0.

    Inside `dropout_stream` (the trainer's towers) the mask is a pure function of (seed, step,
    global example position); elsewhere it is `tf.nn.dropout`'s.

    Args:
      input_tensor: float Tensor.
      dropout_prob: Python float, the probability of dropping out a value (not of keeping it).
      training: Python bool.
      seq_view: the per-example layout of `input_tensor` with its sequence axes marked `SEQ`
        (e.g. (SEQ, H) for [B*S, H]; see `DropoutStream.dropout`), or None when it has none.

    Returns:
      A Tensor of the same shape as `input_tensor`.
    """
    if not training or dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    stream = getattr(_STREAM, "current", None)
    if stream is not None:
        return stream.dropout(input_tensor, dropout_prob, seq_view)
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


@tf.custom_gradient
def _normalized(x, epsilon):
    """(x - mean) / sqrt(variance + epsilon) over the last axis (float32), with the gradient
    written out: dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sqrt(variance + epsilon).

    Autodiff through `tf.nn.moments` differentiates the mean and the variance separately (about
    twice the element-wise passes); this is the same derivative in five passes and two row
    reductions, and keeps x_hat and the row factor (not x and the moments) for the backward.
    """
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    inv = tf.math.rsqrt(variance + epsilon)
    x_hat = (x - mean) * inv

    def grad(g):
        g_mean = tf.reduce_mean(g, axis=-1, keepdims=True)
        gx_mean = tf.reduce_mean(g * x_hat, axis=-1, keepdims=True)
        return inv * (g - g_mean - x_hat * gx_mean), None  # (x, epsilon)

    return x_hat, grad


def layer_norm(input_tensor, gamma, beta, epsilon=LAYER_NORM_EPSILON):
    """LayerNorm over the last dimension, as `tf.contrib.layers.layer_norm` in Google's code.

    Args:
      input_tensor: float Tensor of shape [..., D].
      gamma: float Variable of shape [D] (Google's `LayerNorm/gamma`).
      beta: float Variable of shape [D] (Google's `LayerNorm/beta`).
      epsilon: variance epsilon, 1e-12 as Google.

    Returns:
      float Tensor of the shape and dtype of `input_tensor`. Statistics are computed in at least
      float32 so float16 activations do not lose the variance. The same values as Google's to
      float32 rounding; the input gradient is written out (`_normalized`; why:
      docs/benchmarks.md).
    """
    dtype = input_tensor.dtype
    x = input_tensor
    if dtype in (tf.float16, tf.bfloat16):
        x = tf.cast(x, tf.float32)
    x_hat = _normalized(x, tf.constant(epsilon, x.dtype))
    return tf.cast(x_hat * tf.cast(gamma, x.dtype) + tf.cast(beta, x.dtype), dtype)


def get_shape_list(tensor, expected_rank=None, name=None):
    """Returns the shape of `tensor` as a list, static dimensions as ints, dynamic as scalars.

    Args:
      tensor: a Tensor.
      expected_rank: optional int or list of ints; raises if the rank is not one of them.
      name: optional name of the tensor for the error message.

    Returns:
      A list with one entry per dimension.
    """
    if expected_rank is not None:
        ranks = expected_rank if isinstance(expected_rank, (list, tuple)) else [expected_rank]
        if tensor.shape.ndims not in ranks:
            raise ValueError(f"Tensor {name or getattr(tensor, 'name', '')!s} has rank "
                             f"{tensor.shape.ndims}, expected one of {ranks}: shape {tensor.shape}")
    static = tensor.shape.as_list()
    dynamic = tf.shape(tensor)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def reshape_to_matrix(input_tensor):
    """Reshapes a >= rank 2 tensor to a rank 2 tensor ([-1, width])."""
    if input_tensor.shape.ndims == 2:
        return input_tensor
    width = input_tensor.shape[-1]
    return tf.reshape(input_tensor, [-1, width])


def reshape_from_matrix(output_tensor, orig_shape_list):
    """Reshapes a rank 2 tensor back to `orig_shape_list[:-1] + [width]`."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, orig_shape_list[:-1] + [width])


def create_attention_mask_from_input_mask(from_tensor, to_mask):
    """Creates a 3D attention mask from a 2D padding mask.

    Args:
      from_tensor: Tensor of shape [B, F, ...] (only the first two dimensions are used).
      to_mask: int32 Tensor of shape [B, T], 1 for real tokens and 0 for padding.

    Returns:
      float32 Tensor of shape [B, F, T]: 1.0 where position f may attend to position t.
    """
    from_shape = get_shape_list(from_tensor)
    batch_size, from_seq_length = from_shape[0], from_shape[1]
    to_shape = get_shape_list(to_mask, expected_rank=2)
    to_seq_length = to_shape[1]
    to_mask = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]), tf.float32)
    # Every query position sees the same keys: broadcast the key mask along F.
    broadcast_ones = tf.ones(shape=[batch_size, from_seq_length, 1], dtype=tf.float32)
    return broadcast_ones * to_mask


def truncated_normal_initializer(stddev):
    """Google's `create_initializer`: a truncated normal (re-drawn beyond 2 stddev)."""
    def init(shape, dtype=tf.float32):
        return tf.random.truncated_normal(shape, stddev=stddev, dtype=dtype)
    return init


_OVERRIDES = threading.local()


def param(var):
    """The value to use for a model variable: the variable itself, or inside
    `parameter_values(...)` the tensor given for it.

    Every read of a weight in the model and the heads goes through here, so a caller can run the
    model on per-device copies of the weights (an XLA-compiled tower cannot touch a variable that
    lives on another device) and differentiate with respect to those copies.
    """
    overrides = getattr(_OVERRIDES, "values", None)
    if overrides is None:
        return var
    return overrides.get(var.ref(), var)


@contextlib.contextmanager
def parameter_values(variables, values):
    """Within the block, `param(variables[i])` returns `values[i]` (same order)."""
    with _bound(_OVERRIDES, "values", {v.ref(): t for v, t in zip(variables, values)}):
        yield


def recomputed(fn: Callable[[tf.Tensor], tf.Tensor], x: tf.Tensor,
               variables: Sequence[tf.Variable]) -> tf.Tensor:
    """fn(x), whose activations are not kept for the backward pass but computed again there
    (gradient checkpointing, `tf.recompute_grad`): the backward pass keeps `x` and the output
    only.

    The recomputation is exact: it runs in the forward pass's dropout stream with the same
    call indices (so the same position-keyed masks) and with the same `parameter_values`, and
    the weights' values under `parameter_values` (per-device copies) are explicit inputs, so
    their gradients flow as without checkpointing.

    Args:
      fn: float Tensor [M, H] -> float Tensor [M, H], reading only `variables` (through
        `param`) and drawing its dropout from the current stream.
      x: fn's input.
      variables: the `tf.Variable`s fn reads.
    """
    stream = getattr(_STREAM, "current", None)
    overrides = getattr(_OVERRIDES, "values", None)
    first_call = stream.calls if stream is not None else 0
    copied = [v for v in variables if overrides is not None and v.ref() in overrides]
    state = {}

    @tf.recompute_grad
    def run(inputs, *copies):
        saved_calls = stream.calls if stream is not None else 0
        values = getattr(_OVERRIDES, "values", None) if overrides is None else \
            {**overrides, **{v.ref(): c for v, c in zip(copied, copies)}}
        if stream is not None:
            stream.calls = first_call  # the forward pass's masks, call for call
        try:
            with _bound(_STREAM, "current", stream), _bound(_OVERRIDES, "values", values):
                out = fn(inputs)
            state["end_calls"] = stream.calls if stream is not None else 0
            return out
        finally:
            if stream is not None:
                stream.calls = saved_calls

    out = run(x, *[overrides[v.ref()] for v in copied])
    if stream is not None:
        stream.calls = state["end_calls"]  # the next dropout call continues after fn's
    return out


# The most dropout masks one encoder layer draws (attention probabilities, attention output,
# feed-forward output).
_LAYER_DROPOUTS = 3


class _CompiledLayer:
    """Encoder layers run as one XLA computation each (`BertModel.compiled_layers`,
    --xla_layers): one `tf.function(jit_compile=True)` per `encode` call, traced once for all
    the stack's layers (whose shapes are the same) with their weights as arguments, so XLA fuses
    each layer's element-wise work (bias adds, GELU, dropout, residuals, LayerNorm, softmax)
    between the matmuls, forward and backward, and compiles once per batch shape.

    The layer computes what the uncompiled one does: its dropout draws, inside the computation,
    the masks of the current stream's next calls (the same Philox keys and counters: the keys are
    passed in, the counters derive from the same step and positions), and its weights are the
    values `param` gives outside (a tower's copies or the variables' values), so towers, gradient
    accumulation and the position-keyed masks are unchanged (tests/test_modeling.py compares
    outputs and gradients with the uncompiled layers, dropout on).
    """

    def __init__(self, template, layer_for):
        self.variables = [v for block in template for v in block.variables()]
        self.stream = getattr(_STREAM, "current", None)
        self.statics = None
        self.calls = None  # the dropout calls one layer makes (known once traced)

        def run(x, attention_mask, stream_tensors, weights):
            batch_size, _, seq_length = get_shape_list(attention_mask, expected_rank=3)
            layer = layer_for(batch_size, seq_length, attention_mask)
            inner = (DropoutStream.inside(stream_tensors, self.statics)
                     if self.stream is not None else None)
            with _bound(_STREAM, "current", inner), parameter_values(self.variables, weights):
                out = layer(*template, x, False)
            self.calls = inner.calls if inner is not None else 0
            return out

        self.run = tf.function(run, jit_compile=True, autograph=False)

    def __call__(self, attention, ffn, x, attention_mask):
        weights = [tf.convert_to_tensor(param(v))
                   for block in (attention, ffn) for v in block.variables()]
        stream_tensors = []
        if self.stream is not None:
            stream_tensors, self.statics = self.stream.state(_LAYER_DROPOUTS)
        out = self.run(x, attention_mask, stream_tensors, weights)
        if self.stream is not None:
            self.stream.calls += self.calls
        return out


class ParameterStore:
    """An ordered mapping from Google's variable names to `tf.Variable`s.

    Every module of the project keeps its weights in one of these, so checkpoints, optimizers and
    tower code see plain `name -> variable` mappings with Google's names and no wrapper scope.
    """

    def __init__(self):
        self._vars: "collections.OrderedDict[str, tf.Variable]" = collections.OrderedDict()

    def add(self, name, shape, initializer, dtype=tf.float32, trainable=True):
        """Creates and registers a variable; duplicate names are a programming error."""
        if name in self._vars:
            raise ValueError(f"variable {name} created twice")
        var = tf.Variable(initializer(shape, dtype=dtype), name=name, trainable=trainable)
        self._vars[name] = var
        return var

    def __getitem__(self, name):
        return self._vars[name]

    def __contains__(self, name):
        return name in self._vars

    def items(self):
        return self._vars.items()

    def as_dict(self) -> Dict[str, tf.Variable]:
        return collections.OrderedDict(self._vars)


def zeros_initializer(shape, dtype=tf.float32):
    return tf.zeros(shape, dtype=dtype)


def ones_initializer(shape, dtype=tf.float32):
    return tf.ones(shape, dtype=dtype)


class Dense:
    """A dense layer's weights (`<scope>/kernel` [in, out], `<scope>/bias` [out]) and its call.

    With `use_bias=False` there is no bias variable (Cramming's bias-free layers).
    """

    def __init__(self, store, scope, in_width, out_width, initializer_range, activation=None,
                 use_bias=True):
        self.kernel = store.add(f"{scope}/kernel", [in_width, out_width],
                                truncated_normal_initializer(initializer_range))
        self.bias = store.add(f"{scope}/bias", [out_width], zeros_initializer) \
            if use_bias else None
        self.activation = activation

    def variables(self) -> List[tf.Variable]:
        return [self.kernel] + ([self.bias] if self.bias is not None else [])

    def __call__(self, x):
        """x: float Tensor [M, in] -> float Tensor [M, out] (rank 2, as Google keeps it)."""
        y = tf.matmul(x, tf.cast(param(self.kernel), x.dtype))
        if self.bias is not None:
            y = tf.nn.bias_add(y, tf.cast(param(self.bias), x.dtype))
        return self.activation(y) if self.activation is not None else y


class LayerNorm:
    """`<scope>/<name>/{beta,gamma}` and the normalization (`name` is ALBERT's `LayerNorm_1`
    for its second LayerNorm of a block; Google's is always `LayerNorm`)."""

    def __init__(self, store, scope, width, name="LayerNorm"):
        self.beta = store.add(f"{scope}/{name}/beta", [width], zeros_initializer)
        self.gamma = store.add(f"{scope}/{name}/gamma", [width], ones_initializer)

    def variables(self) -> List[tf.Variable]:
        return [self.beta, self.gamma]

    def __call__(self, x):
        return layer_norm(x, param(self.gamma), param(self.beta))


class BertOutputs(NamedTuple):
    """What `BertModel.__call__` returns.

    Attributes:
      sequence_output: float Tensor [batch_size, seq_length, hidden_size], the last layer (after
        the final LayerNorm with `pre_layer_norm`).
      pooled_output: float Tensor [batch_size, hidden_size], tanh(dense(first token)).
      all_encoder_layers: list of float Tensors [batch_size, seq_length, hidden_size], one per
        layer (the last one is `sequence_output`).
      embedding_output: float Tensor [batch_size, seq_length, embedding_size], the embeddings
        after LayerNorm and dropout (with `embedding_size` != hidden_size, before the
        projection to the hidden size, as ALBERT's `get_embedding_output`).
      embedding_table: the word embeddings [vocab_size, embedding_size] (the Variable, or the
        tensor standing for it under `parameter_values`).
    """
    sequence_output: tf.Tensor
    pooled_output: tf.Tensor
    all_encoder_layers: List[tf.Tensor]
    embedding_output: tf.Tensor
    embedding_table: tf.Variable


def _bert_scopes(encoder_scope, index):
    """Google's per-layer names of layer `index`'s two sub-blocks."""
    layer = f"{encoder_scope}/layer_{index}"
    attention = {"self": f"{layer}/attention/self", "output": f"{layer}/attention/output/dense",
                 "norm": (f"{layer}/attention/output", "LayerNorm")}
    ffn = {"intermediate": f"{layer}/intermediate/dense", "output": f"{layer}/output/dense",
           "norm": (f"{layer}/output", "LayerNorm")}
    return attention, ffn


def _albert_scopes(encoder_scope):
    """ALBERT's names of the sub-blocks shared by all layers (one group, one inner group)."""
    block = f"{encoder_scope}/transformer/group_0/inner_group_0"
    attention = {"self": f"{block}/attention_1/self", "output": f"{block}/attention_1/output/dense",
                 "norm": (block, "LayerNorm")}
    ffn = {"intermediate": f"{block}/ffn_1/intermediate/dense",
           "output": f"{block}/ffn_1/intermediate/output/dense", "norm": (block, "LayerNorm_1")}
    return attention, ffn


class _AttentionBlock:
    """Self-attention sub-block: Q, K, V, output projection and its LayerNorm."""

    def __init__(self, store, scopes, config):
        h, r, bias = config.hidden_size, config.initializer_range, config.use_bias
        self.query = Dense(store, f"{scopes['self']}/query", h, h, r, use_bias=bias)
        self.key = Dense(store, f"{scopes['self']}/key", h, h, r, use_bias=bias)
        self.value = Dense(store, f"{scopes['self']}/value", h, h, r, use_bias=bias)
        self.output = Dense(store, scopes["output"], h, h, r, use_bias=bias)
        self.layer_norm = LayerNorm(store, scopes["norm"][0], h, name=scopes["norm"][1])

    def variables(self) -> List[tf.Variable]:
        return [v for part in (self.query, self.key, self.value, self.output, self.layer_norm)
                for v in part.variables()]


class _FeedForwardBlock:
    """Feed-forward sub-block: intermediate dense + activation (optionally gated), output
    dense, and its LayerNorm."""

    def __init__(self, store, scopes, config):
        h, i, r, bias = (config.hidden_size, config.intermediate_size,
                         config.initializer_range, config.use_bias)
        self.activation = get_activation(config.hidden_act)
        self.gated = config.gated_ffn
        # Gated: the activation applies to the gate half only, after the split.
        self.intermediate = Dense(store, scopes["intermediate"], h, i, r,
                                  activation=None if self.gated else self.activation,
                                  use_bias=bias)
        self.output = Dense(store, scopes["output"], i // 2 if self.gated else i, h, r,
                            use_bias=bias)
        self.layer_norm = LayerNorm(store, scopes["norm"][0], h, name=scopes["norm"][1])

    def variables(self) -> List[tf.Variable]:
        return [v for part in (self.intermediate, self.output, self.layer_norm)
                for v in part.variables()]

    def __call__(self, x):
        """x: float Tensor [M, H] -> float Tensor [M, H] (before dropout and residual)."""
        y = self.intermediate(x)  # [M, I]
        if self.gated:
            # Cramming's GLU: first half the value, second half the gate.
            value, gate = tf.split(y, 2, axis=-1)  # [M, I/2] each
            y = value * (self.activation(gate) if self.activation is not None else gate)
        return self.output(y)


def sinusoidal_position_table(length, width):
    """The fixed sinusoid table of "Attention Is All You Need" (Cramming's layout).

    Column 2k is sin(p / 10000^(2k / width)) and column 2k + 1 the cosine of the same angle.

    Args:
      length: number of positions.
      width: even embedding width.

    Returns:
      float32 numpy array [length, width], computed in float64.
    """
    position = np.arange(length, dtype=np.float64)[:, None]  # [P, 1]
    inv_timescale = np.exp(np.arange(0, width, 2, dtype=np.float64)
                           * (-math.log(10000.0) / width))  # [width / 2]
    table = np.zeros([length, width], np.float64)
    table[:, 0::2] = np.sin(position * inv_timescale)
    table[:, 1::2] = np.cos(position * inv_timescale)
    return table.astype(np.float32)


class BertModel(tf.Module):
    """BERT ("Bidirectional Encoder Representations from Transformers"), Google's model.

    Example:
      model = BertModel(BertConfig.from_json_file("bert_config.json"))
      out = model(input_ids, input_mask, token_type_ids, training=True)
      out.pooled_output  # [batch_size, hidden_size]

    The weights are created in the constructor (random, Google's initializers) and are listed
    with Google's names by `named_variables()`; load a checkpoint into them with
    `bert_mgpu.engine.checkpoint.init_from_checkpoint`. The ALBERT/Cramming options of the config
    (see the module docstring) change the structure; without them it is Google's model exactly.
    """

    def __init__(self, config: BertConfig, scope: str = "bert", compute_dtype=tf.float32):
        """Creates the weights.

        Args:
          config: `BertConfig`.
          scope: the name prefix, "bert" as in Google's checkpoints.
          compute_dtype: dtype of the activations: float32, or float16/bfloat16 for mixed
            precision (the variables stay float32 and are cast where used; LayerNorm statistics
            and the softmax of the heads are computed in float32).
        """
        super().__init__(name=None)
        config.validate()
        self.config = config
        self.compute_dtype = tf.as_dtype(compute_dtype)
        self.scope = scope
        self._store = ParameterStore()
        store, h, r = self._store, config.hidden_size, config.initializer_range
        e = config.embedding_size
        init = truncated_normal_initializer(r)
        emb = f"{scope}/embeddings"
        self.word_embeddings = store.add(f"{emb}/word_embeddings", [config.vocab_size, e], init)
        self.token_type_embeddings = store.add(
            f"{emb}/token_type_embeddings", [config.type_vocab_size, e], init)
        self.position_embeddings = self.position_embedding_scale = None
        self._sinusoid = None
        if config.position_embedding_type == "scaled_sinusoidal":
            self._sinusoid = sinusoidal_position_table(config.max_position_embeddings, e)
            self.position_embedding_scale = store.add(
                f"{emb}/position_embedding_scale", [],
                lambda shape, dtype: tf.constant(1.0 / math.sqrt(e), dtype))
        else:
            self.position_embeddings = store.add(
                f"{emb}/position_embeddings", [config.max_position_embeddings, e], init)
        self.embedding_layer_norm = LayerNorm(store, emb, e)
        encoder = f"{scope}/encoder"
        # ALBERT projects only when the widths differ (and names the variable so).
        self.embedding_projection = Dense(store, f"{encoder}/embedding_hidden_mapping_in", e, h,
                                          r) if e != h else None
        self.layers = self._build_layers(store, encoder, config)
        self.final_layer_norm = LayerNorm(store, encoder, h) if config.pre_layer_norm else None
        self.pooler = Dense(store, f"{scope}/pooler/dense", h, h, r, activation=tf.tanh)
        # --gradient_checkpointing: training recomputes each layer's activations in the
        # backward pass instead of keeping them (`recomputed`).
        self.gradient_checkpointing = False
        # --xla_layers: each encoder layer (forward and backward) runs as one XLA computation
        # (`_CompiledLayer`).
        self.compiled_layers = False

    @staticmethod
    def _build_layers(store, encoder, config):
        """(attention block, feed-forward block) per layer; shared blocks are the same object."""
        kinds = (("attention", _AttentionBlock), ("ffn", _FeedForwardBlock))
        shared = {}
        layers = []
        # Created in layer order (layer 0's blocks first), as Google's code creates them.
        for i in range(config.num_hidden_layers):
            blocks = []
            for (kind, block), bert, albert in zip(kinds, _bert_scopes(encoder, i),
                                                  _albert_scopes(encoder)):
                if config.share_parameters in ("all", kind):
                    if kind not in shared:
                        shared[kind] = block(store, albert, config)
                    blocks.append(shared[kind])
                else:
                    blocks.append(block(store, bert, config))
            layers.append(tuple(blocks))
        return layers

    def named_variables(self) -> Dict[str, tf.Variable]:
        """Google's name -> Variable, in creation order."""
        return self._store.as_dict()

    def __call__(self, input_ids, input_mask=None, token_type_ids=None, training=False,
                 first_token_only=False, drop_padding=False):
        """Runs the model.

        Args:
          input_ids: int32 Tensor of shape [batch_size, seq_length].
          input_mask: optional int32 Tensor [batch_size, seq_length], 1 = real token, 0 = pad.
          token_type_ids: optional int32 Tensor [batch_size, seq_length] (segment ids).
          training: Python bool; dropout is applied only when True.
          first_token_only: Python bool; compute the last layer for the first token ([CLS])
            only, all that `pooled_output` needs (a serving classifier): `sequence_output` is
            then [batch_size, 1, hidden_size], the other outputs are unchanged.
          drop_padding: Python bool, inference only (`training=False`); the dense layers run
            on the rows of real tokens only (`input_mask` 1), not on the padding: the same
            values at real positions for less work when the lengths differ; the encoder
            layers' outputs are 0 at padded positions. Shapes must be dynamic (not for XLA).

        Returns:
          `BertOutputs`.
        """
        config = self.config
        input_ids = tf.convert_to_tensor(input_ids)
        batch_size, seq_length = get_shape_list(input_ids, expected_rank=2, name="input_ids")
        if isinstance(seq_length, int) and seq_length > config.max_position_embeddings:
            raise ValueError(f"sequence length {seq_length} is longer than "
                             f"max_position_embeddings ({config.max_position_embeddings})")
        if input_mask is None:
            input_mask = tf.ones([batch_size, seq_length], dtype=tf.int32)
        if token_type_ids is None:
            token_type_ids = tf.zeros([batch_size, seq_length], dtype=tf.int32)
        input_mask = tf.convert_to_tensor(input_mask)
        token_type_ids = tf.convert_to_tensor(token_type_ids)

        # Embeddings: word + token type + position, then LayerNorm and dropout.
        embedding_output = self.embed(input_ids, token_type_ids, training)  # [B, S, E]

        attention_mask = create_attention_mask_from_input_mask(input_ids, input_mask)  # [B,F,T]
        token_rows = None
        if drop_padding:
            token_rows = tf.where(tf.reshape(input_mask, [-1]) > 0)[:, 0]  # int64 [N]
        all_encoder_layers = self.encode(embedding_output, attention_mask, training,
                                         first_token_only, token_rows)
        sequence_output = all_encoder_layers[-1]
        # The pooler takes the hidden state of the first token ([CLS]).
        first_token_tensor = sequence_output[:, 0, :]  # [B, H]
        pooled_output = self.pooler(first_token_tensor)
        return BertOutputs(sequence_output, pooled_output, all_encoder_layers,
                           embedding_output, param(self.word_embeddings))

    def embed(self, input_ids, token_type_ids, training):
        """Embedding lookup, post-processing (token type, position), LayerNorm and dropout.

        Args:
          input_ids: int32 Tensor [B, S].
          token_type_ids: int32 Tensor [B, S].
          training: Python bool.

        Returns:
          float Tensor [B, S, embedding_size] in the compute dtype.
        """
        seq_length = get_shape_list(input_ids)[1]
        # A gather (not Google's optional one-hot matmul): same values, and the gradient is an
        # IndexedSlices, which the tower averaging handles without densifying the table. The
        # tables are gathered from as Tensors: a gather on the variable itself (TensorFlow's
        # ResourceGather) puts it in copy-on-read mode, after which every other read of it (the
        # tied masked-LM decoder's, every update) copies the whole table.
        output = tf.gather(tf.convert_to_tensor(param(self.word_embeddings)), input_ids)
        output += tf.gather(tf.convert_to_tensor(param(self.token_type_embeddings)),
                            token_type_ids)
        # Positions 0..S-1, broadcast over the batch.
        if self.position_embeddings is not None:
            output += tf.expand_dims(param(self.position_embeddings)[:seq_length], 0)
        else:
            table = tf.constant(self._sinusoid)[:seq_length]  # [S, E]
            output += tf.expand_dims(param(self.position_embedding_scale) * table, 0)
        output = self.embedding_layer_norm(output)
        # Mixed precision starts here: everything downstream follows the activations' dtype.
        output = tf.cast(output, self.compute_dtype)
        return dropout(output, self.config.hidden_dropout_prob, training,
                       seq_view=(SEQ, output.shape[-1]))

    def encode(self, embedding_output, attention_mask, training, first_token_only=False,
               token_rows=None):
        """The transformer stack ("Attention is All You Need" encoder; post-LN as Google's, or
        pre-LN with a final LayerNorm).

        Args:
          embedding_output: float Tensor [B, S, embedding_size].
          attention_mask: float Tensor [B, F, T] (F = T = S), 1 = may attend.
          training: Python bool.
          first_token_only: Python bool; the last layer attends from the first token only (its
            keys and values are still every token's), so its output is [B, 1, hidden_size]:
            the same values as row 0 of the full layer, for a fraction of the work.
          token_rows: optional int64 Tensor [N], the rows of the real tokens in the flattened
            [B*S] positions (inference only): the dense layers, LayerNorms and residuals run
            on those N rows only; the attention scatters its keys, values (and queries) back
            to the [B, S] layout, where the mask already ignores the padding. The layers'
            outputs are 0 at the other positions.

        Returns:
          list of float Tensors [B, S, hidden_size], one per layer.
        """
        config = self.config
        input_shape = get_shape_list(embedding_output, expected_rank=3)
        batch_size, seq_length = input_shape[0], input_shape[1]
        # Keep the activations as a 2D [B*S, H] matrix through the stack (as Google does): every
        # dense layer is then one plain GEMM.
        prev_output = reshape_to_matrix(embedding_output)
        if token_rows is not None:
            if training:
                raise ValueError("drop_padding (token_rows) is for inference (training=False)")
            prev_output = tf.gather(prev_output, token_rows)  # [N, E]
        if self.embedding_projection is not None:
            prev_output = self.embedding_projection(prev_output)  # [B*S or N, E] -> [., H]
        output_shape = input_shape[:-1] + [config.hidden_size]

        def padded(x):
            # Real-token rows [N, W] -> [B*S, W], zeros at the padding (identity without rows).
            if token_rows is None:
                return x
            shape = tf.cast(tf.stack([batch_size * seq_length, x.shape[-1]]), tf.int64)
            return tf.scatter_nd(token_rows[:, None], x, shape)

        def first_tokens(x):
            # [B*S, W] (or the real rows [N, W]) -> [B*1, W]: the first token of every sequence.
            return tf.reshape(padded(x), [batch_size, seq_length, x.shape[-1]])[:, 0]

        def layer_for(batch_size, seq_length, attention_mask):
            # One encoder layer for a batch of these dimensions (in a compiled layer, its own).
            def attend(attention, x, first_only=False):
                from_tensor, from_length, mask = x, seq_length, attention_mask
                # Without the padding, the projections run on the real rows and are scattered to
                # the [B*S] layout the attention's reshapes need.
                query, key, value = (attention.query, attention.key, attention.value) \
                    if token_rows is None else (
                        lambda t: padded(attention.query(t)), lambda t: padded(attention.key(t)),
                        lambda t: padded(attention.value(t)))
                if first_only:
                    from_tensor, from_length, mask = first_tokens(x), 1, attention_mask[:, :1]
                    query = attention.query
                context = attention_layer(
                    from_tensor, x, query, key, value,
                    attention_mask=mask,
                    num_attention_heads=config.num_attention_heads,
                    attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                    training=training, batch_size=batch_size,
                    from_seq_length=from_length, to_seq_length=seq_length)
                if token_rows is not None and not first_only:
                    context = tf.gather(context, token_rows)  # [B*S, H] -> [N, H]
                return dropout(attention.output(context), config.hidden_dropout_prob, training,
                               seq_view=(SEQ, config.hidden_size))

            def feed_forward(ffn, x):
                return dropout(ffn(x), config.hidden_dropout_prob, training,
                               seq_view=(SEQ, config.hidden_size))

            def layer(attention, ffn, layer_input, first_only):
                residual = first_tokens(layer_input) if first_only else layer_input
                if config.pre_layer_norm:
                    attention_output = residual + attend(
                        attention, attention.layer_norm(layer_input), first_only)
                    return attention_output + feed_forward(ffn, ffn.layer_norm(attention_output))
                attention_output = attention.layer_norm(
                    attend(attention, layer_input, first_only) + residual)
                return ffn.layer_norm(feed_forward(ffn, attention_output) + attention_output)
            return layer

        layer = layer_for(batch_size, seq_length, attention_mask)

        all_layer_outputs = []
        compiled = None
        for index, (attention, ffn) in enumerate(self.layers):
            first_only = first_token_only and index == len(self.layers) - 1
            if training and self.gradient_checkpointing:
                # Only the layer's input and output are kept for the backward pass.
                prev_output = recomputed(
                    lambda x, a=attention, f=ffn: layer(a, f, x, False), prev_output,
                    attention.variables() + ffn.variables())
            elif self.compiled_layers and token_rows is None and not first_only:
                if compiled is None:
                    compiled = _CompiledLayer(self.layers[0], layer_for)
                prev_output = compiled(attention, ffn, prev_output, attention_mask)
            else:
                prev_output = layer(attention, ffn, prev_output, first_only)
            all_layer_outputs.append(prev_output)
        if self.final_layer_norm is not None:
            # Pre-LN leaves the residual stream unnormalised: the final LayerNorm gives the
            # output (what the heads and `sequence_output` see).
            all_layer_outputs[-1] = self.final_layer_norm(all_layer_outputs[-1])
        shapes = [output_shape] * len(all_layer_outputs)
        # (With `first_token_only` the last layer's rows are already [B, H].)
        rows = [x if first_token_only and i == len(all_layer_outputs) - 1 else padded(x)
                for i, x in enumerate(all_layer_outputs)]
        if first_token_only:
            shapes[-1] = [batch_size, 1, config.hidden_size]
        return [reshape_from_matrix(x, shape) for x, shape in zip(rows, shapes)]


def attention_layer(from_tensor, to_tensor, query, key, value, attention_mask,
                    num_attention_heads, attention_probs_dropout_prob, training,
                    batch_size, from_seq_length, to_seq_length):
    """Multi-headed scaled dot-product attention from `from_tensor` to `to_tensor`.

    Args:
      from_tensor: float Tensor [B*F, N*H].
      to_tensor: float Tensor [B*T, N*H].
      query, key, value: `Dense` projections N*H -> N*H (linear).
      attention_mask: float Tensor [B, F, T], 1 = may attend, 0 = masked; or None.
      num_attention_heads: N.
      attention_probs_dropout_prob: dropout on the attention probabilities.
      training: Python bool.
      batch_size, from_seq_length, to_seq_length: B, F, T (ints or scalar Tensors).

    Returns:
      float Tensor [B*F, N*H], the per-head context vectors concatenated.
    """
    width = from_tensor.shape[-1]
    size_per_head = width // num_attention_heads

    def to_heads(t, seq_length):
        t = tf.reshape(t, [batch_size, seq_length, num_attention_heads, size_per_head])
        return tf.transpose(t, [0, 2, 1, 3])

    query_layer = to_heads(query(from_tensor), from_seq_length)  # [B, N, F, H]
    key_layer = to_heads(key(to_tensor), to_seq_length)  # [B, N, T, H]
    value_layer = to_heads(value(to_tensor), to_seq_length)  # [B, N, T, H]

    # `attention_scores` = [B, N, F, T]
    attention_scores = tf.matmul(query_layer, key_layer, transpose_b=True)
    attention_scores *= tf.cast(1.0 / math.sqrt(float(size_per_head)), attention_scores.dtype)
    if attention_mask is not None:
        attention_mask = tf.expand_dims(attention_mask, axis=1)  # [B, 1, F, T]
        # 0.0 where attending is allowed, -10000.0 where masked: after the softmax the masked
        # positions are effectively removed.
        adder = (1.0 - tf.cast(attention_mask, tf.float32)) * ATTENTION_MASK_ADDER
        attention_scores += tf.cast(adder, attention_scores.dtype)
    attention_probs = tf.nn.softmax(attention_scores)  # [B, N, F, T]
    # Dropping out whole tokens to attend to, as in the original Transformer.
    attention_probs = dropout(attention_probs, attention_probs_dropout_prob, training,
                              seq_view=(num_attention_heads, SEQ, SEQ))

    context_layer = tf.matmul(attention_probs, value_layer)  # [B, N, F, H]
    context_layer = tf.transpose(context_layer, [0, 2, 1, 3])  # [B, F, N, H]
    return tf.reshape(context_layer, [-1, num_attention_heads * size_per_head])  # [B*F, N*H]


def gather_indexes(sequence_tensor, positions):
    """Gathers the vectors at `positions` of every sequence of the batch.

    Args:
      sequence_tensor: float Tensor [B, S, W].
      positions: int32 Tensor [B, P].

    Returns:
      float Tensor [B*P, W].
    """
    batch_size, seq_length, width = get_shape_list(sequence_tensor, expected_rank=3)
    flat_offsets = tf.reshape(tf.range(0, batch_size, dtype=tf.int32) * seq_length, [-1, 1])
    flat_positions = tf.reshape(tf.cast(positions, tf.int32) + flat_offsets, [-1])
    flat_sequence_tensor = tf.reshape(sequence_tensor, [batch_size * seq_length, width])
    return tf.gather(flat_sequence_tensor, flat_positions)


def layer_depth(name: str, num_layers: int) -> int:
    """Depth of a variable for layer-wise learning rates: embeddings 0, encoder layer_i i + 1,
    everything above the encoder (pooler, heads) num_layers + 1.

    Options: ALBERT's embedding projection counts as embeddings (0); sub-blocks shared by all
    layers (`bert/encoder/transformer/...`) and pre-LN's final `bert/encoder/LayerNorm` serve the
    top layer too, so they get its depth (num_layers).
    """
    if name.startswith("bert/embeddings/") or \
            name.startswith("bert/encoder/embedding_hidden_mapping_in/"):
        return 0
    if name.startswith("bert/encoder/layer_"):
        return int(name[len("bert/encoder/layer_"):].split("/", 1)[0]) + 1
    if name.startswith("bert/encoder/"):
        return num_layers
    return num_layers + 1


def layerwise_lr_multipliers(names, num_layers: int, rate: float) -> Dict[str, float]:
    """Layer-wise LR decay (Sun et al. 2019): encoder layer l (1 = lowest, L = top) gets
    rate^(L - l), the embeddings rate^L, the pooler and heads 1.0 (full LR)."""
    return {name: rate ** max(0, num_layers - layer_depth(name, num_layers)) for name in names}


def merge_named_variables(*modules) -> Dict[str, tf.Variable]:
    """Merges `named_variables()` of several modules; a name used twice is an error."""
    merged: Dict[str, tf.Variable] = collections.OrderedDict()
    for module in modules:
        for name, var in module.named_variables().items():
            if name in merged:
                raise ValueError(f"variable {name} defined by two modules")
            merged[name] = var
    return merged


def variable_shapes(named: Mapping[str, tf.Variable]) -> Dict[str, List[int]]:
    """name -> shape as a list of ints."""
    return {name: var.shape.as_list() for name, var in named.items()}


__all__ = [
    "BertConfig", "BertModel", "BertOutputs", "ParameterStore", "Dense", "LayerNorm",
    "attention_layer", "create_attention_mask_from_input_mask", "dropout", "dropout_stream",
    "DropoutStream", "gather_indexes", "in_trainer_towers", "SEQ",
    "gelu", "gelu_exact", "get_activation", "get_shape_list", "layer_norm",
    "merge_named_variables", "sinusoidal_position_table", "truncated_normal_initializer",
    "variable_shapes",
]
