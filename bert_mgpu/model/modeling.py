"""The BERT model as a `tf.Module` of named `tf.Variable`s, with Google's numerics and names.

Everything here follows Google's `modeling.py` (Devlin et al.): post-LayerNorm transformer,
`"gelu"` is the tanh approximation, the attention mask adder is -10000, scores are scaled by
1/sqrt(head_size), LayerNorm epsilon is 1e-12, dropout only in training, and the variable names are
exactly the ones in Google's checkpoints (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_N/attention/self/query/kernel`, ...). No Keras: the variables are created once
in `__init__` (their shapes are known from the config), so calling the model N times inside one
`tf.function` (one call per tower) creates no variables and shares all weights. How a trainer
runs these layers (position-keyed dropout, weight copies, recomputed or XLA-compiled layers) is
not decided here: the layers read it from the one execution context (`model/execution.py`).

Options of BERT's successors are keys of `bert_config.json` (see `model/bert_config.py`);
without them the model is the above exactly. What they change, and the variable names they use:

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
* ModernBERT (`position_embedding_type: "rope"` and the keys beside it): no position table,
  queries and keys rotated by position (`rotary_attention.py`), each layer global or local
  (`local_attention_window`, `global_attention_every_n_layers`; a local layer computes only the
  band); `layer_norm_eps`, `layer_norm_bias: false` (no `beta` variables),
  `first_layer_attention_norm: false` (no `layer_0/attention/output/LayerNorm`),
  `type_vocab_size: 0` (no `token_type_embeddings`), `classifier_pooling` (the pooler is
  `bert/pooler/dense` without tanh, then `bert/pooler/LayerNorm`). Names and the Hugging Face
  table: `interop/hf_modernbert.py`.

Shape legend used in comments, as in Google's code:
  B = batch size (number of sequences)
  F = `from_tensor` sequence length
  T = `to_tensor` sequence length
  N = `num_attention_heads`
  H = `size_per_head`
"""

import collections
import math
from typing import Dict, List, Mapping, NamedTuple

import numpy as np
import tensorflow as tf

from bert_mgpu.model import execution, rotary_attention
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.model.execution import FIRST, SEQ

LAYER_NORM_EPSILON = 1e-12
# Added to the attention scores of masked positions before the softmax (Google's value; large
# enough to zero the probability, small enough not to overflow in float16).
ATTENTION_MASK_ADDER = -10000.0


# Google's tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
_GELU_SCALE = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu(x):
    """Gaussian Error Linear Unit, the tanh approximation Google's BERT uses as `"gelu"`.

    In the trainer's towers (`execution.current().in_trainer_towers`), on a shape the trace
    knows, the forward pass and its gradient are each one XLA computation (`_fused_gelu`);
    elsewhere (evaluation, prediction, the export, batches cut to any length) Google's formula
    runs op by op (`_fuse_activation`).

    Args:
      x: float Tensor to perform activation on.

    Returns:
      `x` with the GELU activation applied, same shape and dtype.
    """
    if _fuse_activation(x):
        return _fused_gelu(x)
    cdf = 0.5 * (1.0 + tf.tanh(_GELU_SCALE * (x + _GELU_CUBIC * tf.pow(x, 3))))
    return x * cdf


def _fuse_activation(x) -> bool:
    """Whether the activation of `x` runs as XLA computations: in the trainer's towers, when
    the trace knows `x`'s shape. XLA compiles once per shape, so a trace whose sequence axis
    is unknown (batches cut to their longest example, every length run by the one trace) would
    compile again for every new length, each costing more than fusing saves; there the formula
    runs op by op."""
    return execution.current().in_trainer_towers and x.shape.is_fully_defined()


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
    over the [rows, intermediate_size] activations; compiled, each direction is one pass, which
    speeds up the pretraining update (docs/benchmarks.md, "GELU fused by XLA"). The values are
    Google's formula's to float rounding (tests/test_modeling.py)."""
    y, t = _gelu_forward(x)

    def grad(dy):
        return _gelu_backward(dy, x, t)

    return y, grad


def gelu_exact(x):
    """GELU with the exact Gaussian CDF (erf), which Hugging Face calls `"gelu"` (so most
    converted checkpoints use it). Fused in the trainer's towers (`_fused_gelu_exact`) where
    `gelu` is (`_fuse_activation`); in the towers' traces of any batch length, op by op with
    its gradient written out (`_gelu_exact_written_out`); elsewhere Google's formula op by op."""
    if _fuse_activation(x):
        return _fused_gelu_exact(x)
    if execution.current().in_trainer_towers:
        return _gelu_exact_written_out(x)
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def _gelu_exact_cdf(x):
    """Phi(x), the standard normal CDF."""
    return 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def _gelu_exact_gradient(dy, x, cdf):
    """dy * (Phi(x) + x phi(x)), phi the standard normal density."""
    return dy * (cdf + x * (_INV_SQRT_2PI * tf.exp(-0.5 * (x * x))))


@tf.function(jit_compile=True, autograph=False)
def _gelu_exact_forward(x):
    """(GELU(x), Phi(x)), fused into one pass."""
    cdf = _gelu_exact_cdf(x)
    return x * cdf, cdf


@tf.function(jit_compile=True, autograph=False)
def _gelu_exact_backward(dy, x, cdf):
    """`_gelu_exact_gradient`, fused into one pass."""
    return _gelu_exact_gradient(dy, x, cdf)


@tf.custom_gradient
def _fused_gelu_exact(x):
    """The erf GELU, its forward pass and its gradient each one XLA computation: op by op it
    is ~5 element-wise passes over the [rows, intermediate_size] activations forward and ~8
    backward (autodiff of the formula), here one each. Values equal the formula's to float
    rounding (tests/test_modeling.py)."""
    y, cdf = _gelu_exact_forward(x)

    def grad(dy):
        return _gelu_exact_backward(dy, x, cdf)

    return y, grad


@tf.custom_gradient
def _gelu_exact_written_out(x):
    """The erf GELU op by op with the fused version's expressions: its gradient written out
    is 7 element-wise passes over the [rows, intermediate_size] activations against
    autodiff's ~10, and keeps only x and Phi(x) for the backward pass (the cost:
    docs/benchmarks.md, issue 53). Values equal the formula's to float rounding."""
    cdf = _gelu_exact_cdf(x)

    def grad(dy):
        return _gelu_exact_gradient(dy, x, cdf)

    return x * cdf, grad


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


def dropout(input_tensor, dropout_prob, training, seq_view=None, rows=None, seq_length=None):
    """Dropout that is the identity outside training or when `dropout_prob` is 0.

    Under an execution context with a `stream` (the trainer's towers, `model/execution.py`) the
    mask is a pure function of (seed, step, global example position); elsewhere it is
    `tf.nn.dropout`'s.

    Args:
      input_tensor: float Tensor.
      dropout_prob: Python float, the probability of dropping out a value (not of keeping it).
      training: Python bool.
      seq_view: the per-example layout of `input_tensor` with its sequence axes marked `SEQ`
        (e.g. (SEQ, H) for [B*S, H]; see `execution.DropoutStream.dropout`), or None when it
        has none.
      rows: optional (token_rows, padded_rows): `input_tensor` is the real-token rows
        `token_rows` (int64 [N]) of a [padded_rows, ...] Tensor (`drop_padding`); the stream
        then draws the padded Tensor's masks and keeps those rows (`seq_view` is the padded
        Tensor's).
      seq_length: the batch's sequence length, with a `FIRST` axis in `seq_view` (the first
        position only: the stream then keeps the masks of the run computing every position).

    Returns:
      A Tensor of the same shape as `input_tensor`.
    """
    if not training or dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    stream = execution.current().stream
    if stream is not None:
        return stream.dropout(input_tensor, dropout_prob, seq_view, rows, seq_length)
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
      beta: float Variable of shape [D] (Google's `LayerNorm/beta`), or None (no shift, as
        ModernBERT's bias-free LayerNorms).
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
    y = x_hat * tf.cast(gamma, x.dtype)
    if beta is not None:
        y += tf.cast(beta, x.dtype)
    return tf.cast(y, dtype)


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
        context = execution.current()
        y = tf.matmul(x, tf.cast(context.value(self.kernel), x.dtype))
        if self.bias is not None:
            y = tf.nn.bias_add(y, tf.cast(context.value(self.bias), x.dtype))
        return self.activation(y) if self.activation is not None else y


class LayerNorm:
    """`<scope>/<name>/{beta,gamma}` and the normalization (`name` is ALBERT's `LayerNorm_1`
    for its second LayerNorm of a block; Google's is always `LayerNorm`). With `bias=False`
    there is no `beta` (ModernBERT); `epsilon` is Google's 1e-12 unless a config says otherwise
    (`LayerNorm.for_config`)."""

    def __init__(self, store, scope, width, name="LayerNorm", epsilon=LAYER_NORM_EPSILON,
                 bias=True):
        self.beta = store.add(f"{scope}/{name}/beta", [width], zeros_initializer) \
            if bias else None
        self.gamma = store.add(f"{scope}/{name}/gamma", [width], ones_initializer)
        self.epsilon = epsilon

    @classmethod
    def for_config(cls, store, scope, width, config, name="LayerNorm") -> "LayerNorm":
        """A LayerNorm with the config's `layer_norm_eps` and `layer_norm_bias`."""
        return cls(store, scope, width, name=name, epsilon=config.layer_norm_eps,
                   bias=config.layer_norm_bias)

    def variables(self) -> List[tf.Variable]:
        return ([self.beta] if self.beta is not None else []) + [self.gamma]

    def __call__(self, x):
        context = execution.current()
        beta = context.value(self.beta) if self.beta is not None else None
        return layer_norm(x, context.value(self.gamma), beta, self.epsilon)


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
        tensor the execution context reads for it, `execution.ExecutionContext.value`).
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
    """Self-attention sub-block: Q, K, V, output projection and its LayerNorm.

    With `position_embedding_type: "rope"` it also knows its layer's kind: `half_window`
    (None for a global layer) and `inv_freq`, the RoPE frequencies of its theta. Layer 0 has no
    LayerNorm (`layer_norm` None) when the config says `first_layer_attention_norm: false`.
    """

    def __init__(self, store, scopes, config, index=0):
        h, r, bias = config.hidden_size, config.initializer_range, config.use_bias
        self.query = Dense(store, f"{scopes['self']}/query", h, h, r, use_bias=bias)
        self.key = Dense(store, f"{scopes['self']}/key", h, h, r, use_bias=bias)
        self.value = Dense(store, f"{scopes['self']}/value", h, h, r, use_bias=bias)
        self.output = Dense(store, scopes["output"], h, h, r, use_bias=bias)
        self.layer_norm = None
        if index > 0 or config.first_layer_attention_norm or not config.pre_layer_norm:
            self.layer_norm = LayerNorm.for_config(store, scopes["norm"][0], h, config,
                                                   name=scopes["norm"][1])
        local = config.is_local_layer(index)
        self.half_window = config.local_attention_window // 2 if local else None
        self.inv_freq = None
        if config.position_embedding_type == "rope":
            self.inv_freq = rotary_attention.rotary_inverse_frequencies(
                h // config.num_attention_heads,
                config.local_rope_theta if local else config.rope_theta)

    def normalized(self, x):
        """The sub-block's pre-LN input: LayerNorm(x), or x without a LayerNorm."""
        return self.layer_norm(x) if self.layer_norm is not None else x

    def variables(self) -> List[tf.Variable]:
        parts = (self.query, self.key, self.value, self.output) + \
            ((self.layer_norm,) if self.layer_norm is not None else ())
        return [v for part in parts for v in part.variables()]


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
        self.layer_norm = LayerNorm.for_config(store, scopes["norm"][0], h, config,
                                               name=scopes["norm"][1])

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
            f"{emb}/token_type_embeddings", [config.type_vocab_size, e], init) \
            if config.type_vocab_size else None
        self.position_embeddings = self.position_embedding_scale = None
        self._sinusoid = None
        if config.position_embedding_type == "rope":
            pass  # positions enter in the attention (rotary_attention.apply_rotary)
        elif config.position_embedding_type == "scaled_sinusoidal":
            self._sinusoid = sinusoidal_position_table(config.max_position_embeddings, e)
            self.position_embedding_scale = store.add(
                f"{emb}/position_embedding_scale", [],
                lambda shape, dtype: tf.constant(1.0 / math.sqrt(e), dtype))
        else:
            self.position_embeddings = store.add(
                f"{emb}/position_embeddings", [config.max_position_embeddings, e], init)
        self.embedding_layer_norm = LayerNorm.for_config(store, emb, e, config)
        encoder = f"{scope}/encoder"
        # ALBERT projects only when the widths differ (and names the variable so).
        self.embedding_projection = Dense(store, f"{encoder}/embedding_hidden_mapping_in", e, h,
                                          r) if e != h else None
        self.layers = self._build_layers(store, encoder, config)
        self.final_layer_norm = LayerNorm.for_config(store, encoder, h, config) \
            if config.pre_layer_norm else None
        self.pooler_norm = None
        if config.classifier_pooling is None:
            self.pooler = Dense(store, f"{scope}/pooler/dense", h, h, r, activation=tf.tanh)
        else:  # ModernBERT's classification head: LayerNorm(act(dense(pooled)))
            self.pooler = Dense(store, f"{scope}/pooler/dense", h, h, r,
                                activation=get_activation(config.hidden_act),
                                use_bias=config.head_bias)
            self.pooler_norm = LayerNorm.for_config(store, f"{scope}/pooler", h, config)

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
                elif kind == "attention":
                    blocks.append(block(store, bert, config, i))
                else:
                    blocks.append(block(store, bert, config))
            layers.append(tuple(blocks))
        return layers

    def named_variables(self) -> Dict[str, tf.Variable]:
        """Google's name -> Variable, in creation order."""
        return self._store.as_dict()

    def __call__(self, input_ids, input_mask=None, token_type_ids=None, training=False,
                 first_token_only=False, drop_padding=False, document_ids=None):
        """Runs the model.

        Args:
          input_ids: int32 Tensor of shape [batch_size, seq_length].
          input_mask: optional int32 Tensor [batch_size, seq_length], 1 = real token, 0 = pad.
          token_type_ids: optional int32 Tensor [batch_size, seq_length] (segment ids).
          training: Python bool; dropout is applied only when True.
          first_token_only: Python bool; compute the last layer for the first token ([CLS])
            only, all that `pooled_output` needs: `sequence_output` is then [batch_size, 1,
            hidden_size], the other outputs are unchanged (in training, [CLS]'s dropout masks
            are the full run's). Not always honoured: see `_first_token_only`.
          drop_padding: Python bool; the dense layers run on the real tokens' rows only (the
            same values there, 0 at padded positions; in training the dropout stream draws the
            padded run's masks). Shapes must be dynamic (not in a compiled tower).
          document_ids: optional int32 Tensor [batch_size, seq_length], RoPE models only
            (`position_embedding_type: "rope"`): several documents packed in one row, each a
            contiguous run of one id; a token attends only to its own document's tokens and
            its RoPE position restarts at 0 at its document's first token, so a packed row
            computes what each document alone computes (ModernBERT's padding-free packing).

        Returns:
          `BertOutputs`.
        """
        config = self.config
        first_token_only = self._first_token_only(first_token_only, training)
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
        packing = None
        if document_ids is not None:
            if config.position_embedding_type != "rope":
                raise ValueError("document_ids (packed documents) needs position_embedding_type "
                                 "'rope' (positions restart per document)")
            packing = rotary_attention.Packing.of(tf.convert_to_tensor(document_ids))
            attention_mask *= packing.same_document()  # [B, F, T]
        token_rows = None
        if drop_padding:
            token_rows = tf.where(tf.reshape(input_mask, [-1]) > 0)[:, 0]  # int64 [N]
        all_encoder_layers = self.encode(embedding_output, attention_mask, training,
                                         first_token_only, token_rows, packing)
        sequence_output = all_encoder_layers[-1]
        pooled_output = self.pool(sequence_output, input_mask)
        return BertOutputs(sequence_output, pooled_output, all_encoder_layers,
                           embedding_output, execution.current().value(self.word_embeddings))

    def _first_token_only(self, requested: bool, training: bool) -> bool:
        """Whether the last layer runs for [CLS] only, when `requested`: not with
        `classifier_pooling: "mean"` (the pooled output reads every token), nor in training a
        RoPE model (a local last layer's dropout masks are laid out in its band, which has no
        view of the first position alone)."""
        return requested and self.config.classifier_pooling != "mean" and not (
            training and self.config.position_embedding_type == "rope")

    def token_head(self, sequence_output):
        """What a token-level job's output layer reads: with `classifier_pooling` (ModernBERT)
        its head LayerNorm(act(dense(x))) on every token, with the pooler's weights, as Hugging
        Face's `ModernBertFor{Token,QuestionAnswering}` apply their `head`; Google's BERT reads
        the last layer itself (the identity).

        Args:
          sequence_output: float Tensor [B, S, H].

        Returns:
          float Tensor [B, S, H].
        """
        if self.pooler_norm is None:
            return sequence_output
        batch_size, seq_length, width = get_shape_list(sequence_output, expected_rank=3)
        rows = self.pooler_norm(self.pooler(tf.reshape(sequence_output, [-1, width])))
        return tf.reshape(rows, [batch_size, seq_length, width])

    def pool(self, sequence_output, input_mask):
        """The pooled output [B, H] of sequence_output [B, S, H] (S may be 1: first token only).

        Google's pooler is tanh(dense(first token)). With `classifier_pooling` (ModernBERT's
        head) it is LayerNorm(act(dense(x))), x the first token ("cls") or the mean over the
        real tokens ("mean", `input_mask` [B, S] int32: 1 = real token).
        """
        if self.config.classifier_pooling == "mean":
            if sequence_output.shape[1] == 1 and input_mask.shape[1] != 1:
                raise ValueError("classifier_pooling 'mean' needs every token's output "
                                 "(not first_token_only)")
            weights = tf.cast(input_mask, sequence_output.dtype)[:, :, None]  # [B, S, 1]
            pooled = tf.reduce_sum(sequence_output * weights, axis=1) / \
                tf.reduce_sum(weights, axis=1)
        else:  # the hidden state of the first token ([CLS])
            pooled = sequence_output[:, 0, :]  # [B, H]
        pooled = self.pooler(pooled)
        return self.pooler_norm(pooled) if self.pooler_norm is not None else pooled

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
        context = execution.current()
        output = context.gather(self.word_embeddings, input_ids)
        if self.token_type_embeddings is not None:
            output += context.gather(self.token_type_embeddings, token_type_ids)
        # Positions 0..S-1, broadcast over the batch (RoPE: in the attention instead).
        if self.position_embeddings is not None:
            output += tf.expand_dims(context.value(self.position_embeddings)[:seq_length], 0)
        elif self._sinusoid is not None:
            table = tf.constant(self._sinusoid)[:seq_length]  # [S, E]
            output += tf.expand_dims(context.value(self.position_embedding_scale) * table, 0)
        output = self.embedding_layer_norm(output)
        # Mixed precision starts here: everything downstream follows the activations' dtype.
        output = tf.cast(output, self.compute_dtype)
        return dropout(output, self.config.hidden_dropout_prob, training,
                       seq_view=(SEQ, output.shape[-1]))

    def encode(self, embedding_output, attention_mask, training, first_token_only=False,
               token_rows=None, packing=None):
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
            [B*S] positions: the dense layers, LayerNorms and residuals run
            on those N rows only; the attention scatters its keys, values (and queries) back
            to the [B, S] layout, where the mask already ignores the padding. The layers'
            outputs are 0 at the other positions.
          packing: optional `rotary_attention.Packing` (RoPE models): the documents packed in
            each row (`attention_mask` already keeps each token to its document).

        Returns:
          list of float Tensors [B, S, hidden_size], one per layer.
        """
        input_shape = get_shape_list(embedding_output, expected_rank=3)
        # Keep the activations as a 2D [B*S, H] matrix through the stack (as Google does): every
        # dense layer is then one plain GEMM.
        prev_output = reshape_to_matrix(embedding_output)
        if token_rows is not None:
            # The embeddings' dropout ran in the [B, S] layout; its gradient to the padding
            # rows is 0 through the gather, as the padded run's is through the attention mask.
            prev_output = tf.gather(prev_output, token_rows)  # [N, E]
        if self.embedding_projection is not None:
            prev_output = self.embedding_projection(prev_output)  # [B*S or N, E] -> [., H]
        layer = _EncoderLayer(self.config, training, input_shape[0], input_shape[1],
                              attention_mask, token_rows, packing)
        run_layer = self._layer_runner(layer, training)
        all_layer_outputs = []
        for index, (attention, ffn) in enumerate(self.layers):
            first_only = first_token_only and index == len(self.layers) - 1
            prev_output = run_layer(attention, ffn, prev_output, first_only)
            all_layer_outputs.append(prev_output)
        if self.final_layer_norm is not None:
            # Pre-LN leaves the residual stream unnormalised: the final LayerNorm gives the
            # output (what the heads and `sequence_output` see).
            all_layer_outputs[-1] = self.final_layer_norm(all_layer_outputs[-1])
        return layer.sequences(all_layer_outputs, first_token_only)

    def attention_projections(self, index, layer_input):
        """The queries, keys and values of layer `index`'s self-attention, computed again from
        the layer's input, for losses that read a layer's attention (distillation).

        The forward pass (`__call__`) neither calls this nor keeps anything for it, so its
        graph is the same whether or not a loss reads attention. The values are the layer's
        own: the projections have no dropout, and `layer_input` is what the layer read.

        Args:
          index: Python int, the layer (0-based).
          layer_input: float Tensor [B, S, W], what layer `index` read:
            `BertOutputs.embedding_output` for layer 0 (W = embedding_size; projected to the
            hidden size here when they differ), else `all_encoder_layers[index - 1]`.

        Returns:
          (query, key, value): float Tensors [B, S, N*H] each, the heads side by side in
          Google's order (head n is columns n*H to (n+1)*H - 1).

        Raises:
          ValueError: a RoPE model (its queries and keys are rotated inside the attention).
        """
        if self.config.position_embedding_type == "rope":
            raise ValueError("attention_projections: RoPE attention is not supported")
        batch_size, seq_length, _ = get_shape_list(layer_input, expected_rank=3)
        x = reshape_to_matrix(layer_input)  # [B*S, W]
        if index == 0 and self.embedding_projection is not None:
            x = self.embedding_projection(x)  # [B*S, E] -> [B*S, H]
        attention = self.layers[index][0]
        if self.config.pre_layer_norm:
            x = attention.normalized(x)
        shape = [batch_size, seq_length, self.config.hidden_size]
        return tuple(tf.reshape(dense(x), shape)
                     for dense in (attention.query, attention.key, attention.value))

    def _layer_runner(self, layer: "_EncoderLayer", training):
        """run(attention, ffn, x, first_only): one encoder layer as the execution context says.

        Training with `recompute_layers` (--gradient_checkpointing): only the layer's input
        and output are kept for the backward pass, which recomputes the rest (a
        first-token-only last layer is not recomputed). With
        `compile_layers` (--xla_layers) and every row (no `token_rows`): each layer one XLA
        computation, except a first-token-only last layer. Otherwise op by op.
        """
        context = execution.current()
        # Rotary layers are not all alike (global or local, layer 0 without its attention
        # LayerNorm): they run op by op, never as one compiled template layer.
        rotary = self.config.position_embedding_type == "rope"
        if training and context.recompute_layers:
            def recomputed(attention, ffn, x, first_only):
                if first_only:  # a last layer for [CLS] only: little to keep
                    return layer(attention, ffn, x, True)
                return execution.recomputed(lambda h: layer(attention, ffn, h, False), x,
                                            attention.variables() + ffn.variables())
            return recomputed
        if context.compile_layers and layer.token_rows is None and not rotary:
            compiled_layer = execution.CompiledLayer(self.layers[0], layer.for_mask)

            def compiled(attention, ffn, x, first_only):
                if first_only:
                    return layer(attention, ffn, x, True)
                return compiled_layer((attention, ffn), x, layer.attention_mask)
            return compiled
        return layer


class _EncoderLayer:
    """One encoder layer (Google's `transformer_model` loop body) for a batch of given
    dimensions: post-LN as Google's, or pre-LN; on every row, or on the real tokens' rows only
    (`token_rows`); the last layer optionally from the first token only.

    Args (of the constructor):
      config: `BertConfig`.
      training: Python bool.
      batch_size, seq_length: B and S, Python ints or int32 scalar Tensors.
      attention_mask: float Tensor [B, F, T] (F = T = S), 1 = may attend.
      token_rows: optional int64 Tensor [N] (`BertModel.encode`'s).
      packing: optional `rotary_attention.Packing` (`BertModel.encode`'s).
    """

    def __init__(self, config, training, batch_size, seq_length, attention_mask,
                 token_rows=None, packing=None):
        self.config, self.training = config, training
        self.batch_size, self.seq_length = batch_size, seq_length
        self.attention_mask, self.token_rows = attention_mask, token_rows
        self.packing = packing

    def for_mask(self, attention_mask) -> "_EncoderLayer":
        """This layer, on every row, for a batch of `attention_mask`'s dimensions (a compiled
        layer's own, traced inside its XLA computation)."""
        batch_size, _, seq_length = get_shape_list(attention_mask, expected_rank=3)
        return _EncoderLayer(self.config, self.training, batch_size, seq_length, attention_mask)

    @property
    def rows(self):
        """`dropout`'s `rows` for this layer's [N, H] activations: (token_rows, B*S), or None
        on every row."""
        if self.token_rows is None:
            return None
        return self.token_rows, self.batch_size * self.seq_length

    def padded(self, x):
        """Real-token rows [N, W] -> [B*S, W], zeros at the padding (identity without rows)."""
        if self.token_rows is None:
            return x
        shape = tf.cast(tf.stack([self.batch_size * self.seq_length, x.shape[-1]]), tf.int64)
        return tf.scatter_nd(self.token_rows[:, None], x, shape)

    def first_tokens(self, x):
        """[B*S, W] (or the real rows [N, W]) -> [B*1, W]: the first token of every sequence."""
        return tf.reshape(self.padded(x), [self.batch_size, self.seq_length, x.shape[-1]])[:, 0]

    def attend(self, attention, x, first_only=False):
        """The attention sub-block before its residual: x [B*S or N, H] -> the same rows (with
        `first_only`, [B, H]: the first token attends to every token)."""
        config = self.config
        if attention.inv_freq is not None:
            return self.attend_rotary(attention, x, first_only)
        query, key, value = attention.query, attention.key, attention.value
        if self.token_rows is not None:
            # The projections run on the real rows and are scattered to the [B*S] layout the
            # attention's reshapes need.
            query, key, value = (lambda t: self.padded(attention.query(t)),
                                 lambda t: self.padded(attention.key(t)),
                                 lambda t: self.padded(attention.value(t)))
        from_tensor, from_length, mask = x, self.seq_length, self.attention_mask
        if first_only:
            from_tensor, from_length, mask = self.first_tokens(x), 1, self.attention_mask[:, :1]
            query = attention.query
        context = attention_layer(
            from_tensor, x, query, key, value,
            attention_mask=mask,
            num_attention_heads=config.num_attention_heads,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            training=self.training, batch_size=self.batch_size,
            from_seq_length=from_length, to_seq_length=self.seq_length,
            from_first_only=first_only)
        if self.token_rows is not None and not first_only:
            context = tf.gather(context, self.token_rows)  # [B*S, H] -> [N, H]
        return self.hidden_dropout(attention.output(context), first_only)

    def hidden_dropout(self, x, first_only=False):
        """Dropout on a sub-block's output [B*S or N, H], or with `first_only` the first
        tokens' [B, H] (the masks of position 0 of the run computing every position)."""
        if first_only:
            return dropout(x, self.config.hidden_dropout_prob, self.training,
                           seq_view=(FIRST, self.config.hidden_size), seq_length=self.seq_length)
        return dropout(x, self.config.hidden_dropout_prob, self.training,
                       seq_view=(SEQ, self.config.hidden_size), rows=self.rows)

    def key_mask(self):
        """[B, T]: 1.0 at real tokens. The model's mask is a key mask broadcast over F
        (`create_attention_mask_from_input_mask`) times, when packed, the same-document mask,
        whose diagonal is 1: the diagonal of the product is the key mask."""
        if self.packing is None:
            return self.attention_mask[:, 0]
        return tf.linalg.diag_part(self.attention_mask)

    def attend_rotary(self, attention, x, first_only=False):
        """`attend` of a RoPE layer (`position_embedding_type: "rope"`): queries and keys
        rotated by position; a local layer (`attention.half_window`) computes only the band.

        A local layer masks the padding with `key_mask` and keeps each token to its document
        with the packing's document ids.
        """
        config = self.config
        num_heads = config.num_attention_heads
        size = config.hidden_size // num_heads
        batch_size, seq_length = self.batch_size, self.seq_length

        def heads(t, length):  # [B*length, N*H] -> [B, N, length, H]
            t = tf.reshape(t, [batch_size, length, num_heads, size])
            return tf.transpose(t, [0, 2, 1, 3])

        def project(dense, t):  # real rows are scattered to the [B*S] layout
            y = dense(t)
            return self.padded(y) if self.token_rows is not None else y

        def probs_dropout(probs, seq_view=None):
            return dropout(probs, config.attention_probs_dropout_prob, self.training,
                           seq_view=seq_view)

        positions = tf.range(seq_length)  # the band is about index distance
        rope_positions = positions if self.packing is None else self.packing.positions
        key = rotary_attention.apply_rotary(heads(project(attention.key, x), seq_length),
                                            rope_positions, attention.inv_freq)
        value = heads(project(attention.value, x), seq_length)
        scale = 1.0 / math.sqrt(float(size))
        if first_only:
            query = rotary_attention.apply_rotary(
                heads(attention.query(self.first_tokens(x)), 1), rope_positions[..., :1],
                attention.inv_freq)
            mask = self.attention_mask[:, :1]  # [B, 1, T]
            if attention.half_window is not None:
                mask *= rotary_attention.band_mask(positions[:1], positions,
                                                   attention.half_window)
            context = rotary_attention.masked_attention(query, key, value, mask, scale,
                                                        probs_dropout)
        else:
            query = rotary_attention.apply_rotary(heads(project(attention.query, x), seq_length),
                                                  rope_positions, attention.inv_freq)
            if attention.half_window is not None:
                context = self.local_attention(query, key, value, attention.half_window, scale,
                                               probs_dropout)
            else:
                context = self.global_attention(query, key, value, scale, probs_dropout)
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, num_heads * size])
        if self.token_rows is not None and not first_only:
            context = tf.gather(context, self.token_rows)  # [B*S, H] -> [N, H]
        return dropout(attention.output(context), config.hidden_dropout_prob, self.training,
                       seq_view=(SEQ, config.hidden_size),
                       rows=None if first_only else self.rows)

    def local_attention(self, query, key, value, half_window, scale, probs_dropout):
        """A RoPE local layer's attention, the band only (`rotary_attention.band_attention`):
        [B, N, S, H] each -> [B, N, S, H]; its dropout keyed by example position over the
        blocked [N, K, W, 3W] layout.

        In training with the execution context's `recompute_band` (and not already
        recomputing whole layers), the band's [B, N, K, W, 3W] scores and probabilities are
        not kept for the backward pass but computed again there (`execution.recomputed`, the
        same dropout masks): it keeps the queries, keys and values only.
        """
        documents = None if self.packing is None else self.packing.document_ids
        key_mask = self.key_mask()

        def band(query, key, value):
            return rotary_attention.band_attention(query, key, value, key_mask, half_window,
                                                   scale, probs_dropout, documents)

        context = execution.current()
        if self.training and context.recompute_band and not context.recompute_layers:
            # [3, B, N, S, H]: `recomputed` keeps one input.
            return execution.recomputed(lambda stacked: band(*tf.unstack(stacked)),
                                        tf.stack([query, key, value]), [])
        return band(query, key, value)

    def global_attention(self, query, key, value, scale, probs_dropout):
        """A RoPE global layer's attention over every key: [B, N, S, H] each -> [B, N, S, H].

        Chunked (`rotary_attention.chunked_attention`, the execution context's
        `attention_chunk`) on a sequence longer than the chunk when no attention dropout is
        drawn; otherwise the full [B, N, S, S] probabilities (`masked_attention`), their dropout
        keyed by example position over the [N, S, S] layout.
        """
        chunk = execution.current().attention_chunk
        dropped = self.training and self.config.attention_probs_dropout_prob > 0
        if chunk > 0 and not dropped and not (isinstance(self.seq_length, int)
                                              and self.seq_length <= chunk):
            return rotary_attention.chunked_attention(
                query, key, value, self.key_mask(), scale, chunk,
                None if self.packing is None else self.packing.document_ids)
        return rotary_attention.masked_attention(
            query, key, value, self.attention_mask, scale,
            lambda p: probs_dropout(p, (self.config.num_attention_heads, SEQ, SEQ)))

    def feed_forward(self, ffn, x, first_only=False):
        """The feed-forward sub-block before its residual (x: the real rows, or with
        `first_only` the first tokens [B, H])."""
        return self.hidden_dropout(ffn(x), first_only)

    def __call__(self, attention, ffn, layer_input, first_only=False):
        """layer_input [B*S or N, H] -> the layer's output, the same rows ([B, H] with
        `first_only`)."""
        residual = self.first_tokens(layer_input) if first_only else layer_input
        if self.config.pre_layer_norm:
            attention_output = residual + self.attend(
                attention, attention.normalized(layer_input), first_only)
            return attention_output + self.feed_forward(ffn, ffn.layer_norm(attention_output),
                                                        first_only)
        attention_output = attention.layer_norm(
            self.attend(attention, layer_input, first_only) + residual)
        return ffn.layer_norm(self.feed_forward(ffn, attention_output, first_only)
                              + attention_output)

    def sequences(self, outputs, first_token_only):
        """The layers' outputs [B*S or N, H] as [B, S, H], zeros at dropped padding; with
        `first_token_only` the last one's rows are already [B, H] and it is [B, 1, H]."""
        hidden, last = self.config.hidden_size, len(outputs) - 1
        rows = [x if first_token_only and i == last else self.padded(x)
                for i, x in enumerate(outputs)]
        shapes = [[self.batch_size, self.seq_length, hidden]] * len(outputs)
        if first_token_only:
            shapes[-1] = [self.batch_size, 1, hidden]
        return [reshape_from_matrix(x, shape) for x, shape in zip(rows, shapes)]


def attention_layer(from_tensor, to_tensor, query, key, value, attention_mask,
                    num_attention_heads, attention_probs_dropout_prob, training,
                    batch_size, from_seq_length, to_seq_length, from_first_only=False):
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
      from_first_only: Python bool; `from_tensor` is the first position of the T-long
        `to_tensor`'s sequences (F = 1): the probabilities' dropout keeps the masks of the
        attention from every position.

    Returns:
      float Tensor [B*F, N*H], the per-head context vectors concatenated.
    """
    width = from_tensor.shape[-1]
    size_per_head = width // num_attention_heads

    def to_heads(t, seq_length):
        t = tf.reshape(t, [batch_size, seq_length, num_attention_heads, size_per_head])
        return transpose(t, [0, 2, 1, 3])

    query_layer = to_heads(query(from_tensor), from_seq_length)  # [B, N, F, H]
    key_layer = to_heads(key(to_tensor), to_seq_length)  # [B, N, T, H]
    value_layer = to_heads(value(to_tensor), to_seq_length)  # [B, N, T, H]

    # `attention_scores` = [B, N, F, T]
    attention_scores = batch_matmul(query_layer, key_layer, transpose_b=True)
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
                              seq_view=(num_attention_heads, FIRST if from_first_only else SEQ,
                                        SEQ),
                              seq_length=to_seq_length)

    context_layer = batch_matmul(attention_probs, value_layer)  # [B, N, F, H]
    context_layer = transpose(context_layer, [0, 2, 1, 3])  # [B, F, N, H]
    return tf.reshape(context_layer, [-1, num_attention_heads * size_per_head])  # [B*F, N*H]


# The integer type of each float dtype's width (`transpose`).
_SAME_WIDTH_INTEGER = {tf.float32: tf.int32, tf.float16: tf.int16, tf.bfloat16: tf.int16}


def transpose(x, perm):
    """`tf.transpose(x, perm)`; under the execution context's `inference_kernels` (inference),
    the transpose of x's bits as integers of its width: a transpose moves values without
    computing, so the result is the same, and the integer op escapes the oneDNN rewrite of float
    transposes, whose per-call cost dominates at serving's shapes (docs/benchmarks.md)."""
    integer = _SAME_WIDTH_INTEGER.get(x.dtype)
    if integer is None or not execution.current().inference_kernels:
        return tf.transpose(x, perm)
    return tf.bitcast(tf.transpose(tf.bitcast(x, integer), perm), x.dtype)


def batch_matmul(a, b, transpose_b=False):
    """`tf.matmul(a, b, transpose_b=...)` of rank-4 Tensors; float32 ones under the execution
    context's `inference_kernels` as `BatchMatMulV3`, which TensorFlow's oneDNN rewrite leaves
    alone: at serving's shapes that rewrite's per-call cost is most of the product's time
    (docs/benchmarks.md). (TensorFlow's CPU BatchMatMulV3 has no float16 kernel.)"""
    if a.dtype != tf.float32 or not execution.current().inference_kernels:
        return tf.matmul(a, b, transpose_b=transpose_b)
    return tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=a.dtype, adj_y=transpose_b)


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
    "attention_layer", "create_attention_mask_from_input_mask", "dropout", "gather_indexes",
    "SEQ",
    "gelu", "gelu_exact", "get_activation", "get_shape_list", "layer_norm",
    "merge_named_variables", "sinusoidal_position_table", "truncated_normal_initializer",
    "variable_shapes",
]
