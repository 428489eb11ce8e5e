"""The layer functions of Google's `modeling.py` that code builds its own layers with
(`embedding_lookup`, `embedding_postprocessor`, `attention_layer`, `transformer_model`), in TF1
graph mode: variables in TF1's variable store under Google's names (`word_embeddings`,
`query/kernel`, `layer_N/attention/output/LayerNorm/gamma`, ...), so checkpoints written by
Google's code load into them and the other way round. The arithmetic is the project's model's
(`bert_mgpu.model.modeling`): the same numbers as Google's.

Shape legend, as Google's: B = batch size, F = from_tensor length, T = to_tensor length,
N = heads, H = size per head.
"""

import math

import tensorflow as tf

from bert_mgpu.model import modeling as _model

tf1 = tf.compat.v1


def _initializer(initializer_range):
    return tf1.truncated_normal_initializer(stddev=initializer_range)


def layer_norm(input_tensor, name=None):
    """Google's: LayerNorm over the last axis with variables `<name or LayerNorm>/{beta,gamma}`
    (as `tf.contrib.layers.layer_norm`; epsilon 1e-12)."""
    with tf1.variable_scope(name, default_name="LayerNorm"):
        depth = input_tensor.shape[-1]
        beta = tf1.get_variable("beta", [depth], initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", [depth], initializer=tf1.ones_initializer())
        return _model.layer_norm(input_tensor, gamma, beta)


def dropout(input_tensor, dropout_prob):
    """Google's: `tf.nn.dropout` with the drop probability; the identity for None or 0.0."""
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, name=None, reuse=None, **unused):
    """`tf.layers.dense` of TF1: variables `<name or dense>/kernel` [in, units], `/bias`
    [units] (TF1's variable store; Glorot-uniform kernel and zero bias by default); applies
    to the last axis of an input of any rank >= 2."""
    with tf1.variable_scope(name, default_name="dense", reuse=reuse):
        width = inputs.shape[-1]
        initializer = kernel_initializer or tf1.glorot_uniform_initializer()
        kernel = tf1.get_variable("kernel", [width, units], dtype=inputs.dtype,
                                  initializer=initializer)
        outputs = tf.tensordot(inputs, kernel, [[inputs.shape.ndims - 1], [0]]) \
            if inputs.shape.ndims > 2 else tf.matmul(inputs, kernel)
        if use_bias:
            bias = tf1.get_variable("bias", [units], dtype=inputs.dtype,
                                    initializer=bias_initializer or tf1.zeros_initializer())
            outputs = tf.nn.bias_add(outputs, bias)
        return activation(outputs) if activation is not None else outputs


def embedding_lookup(input_ids, vocab_size, embedding_size=128, initializer_range=0.02,
                     word_embedding_name="word_embeddings", use_one_hot_embeddings=False):
    """Google's: looks up word embeddings.

    Args:
      input_ids: int32 Tensor [B, S] (or [B, S, k]: k ids per position, concatenated).
      vocab_size, embedding_size, initializer_range: the table's shape and initializer.
      word_embedding_name: the table's variable name.
      use_one_hot_embeddings: accepted; a gather gives the same values.

    Returns:
      (float Tensor [B, S, embedding_size * k], the table Variable [vocab_size, E]).
    """
    del use_one_hot_embeddings
    if input_ids.shape.ndims == 2:
        input_ids = tf.expand_dims(input_ids, axis=[-1])
    table = tf1.get_variable(word_embedding_name, [vocab_size, embedding_size],
                             initializer=_initializer(initializer_range))
    output = tf.gather(table, tf.reshape(input_ids, [-1]))
    shape = _model.get_shape_list(input_ids)
    return tf.reshape(output, shape[0:-1] + [shape[-1] * embedding_size]), table


def embedding_postprocessor(input_tensor, use_token_type=False, token_type_ids=None,
                            token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings",
                            use_position_embeddings=True,
                            position_embedding_name="position_embeddings",
                            initializer_range=0.02, max_position_embeddings=512,
                            dropout_prob=0.1):
    """Google's: adds token-type and position embeddings, then LayerNorm and dropout.

    Args:
      input_tensor: float Tensor [B, S, W].
      use_token_type, token_type_ids ([B, S] int32), token_type_vocab_size,
        token_type_embedding_name: the token-type table [vocab, W] and its ids.
      use_position_embeddings, position_embedding_name, max_position_embeddings: the position
        table [max_position_embeddings, W], positions 0..S-1.
      initializer_range: stddev of the tables' truncated normal initializer.
      dropout_prob: dropout after the LayerNorm (`LayerNorm/{beta,gamma}`).

    Returns:
      float Tensor [B, S, W].
    """
    _, seq_length, width = _model.get_shape_list(input_tensor, expected_rank=3)
    output = input_tensor
    if use_token_type:
        if token_type_ids is None:
            raise ValueError("`token_type_ids` must be specified if `use_token_type` is True.")
        table = tf1.get_variable(token_type_embedding_name, [token_type_vocab_size, width],
                                 initializer=_initializer(initializer_range))
        output += tf.gather(table, token_type_ids)
    if use_position_embeddings:
        table = tf1.get_variable(position_embedding_name, [max_position_embeddings, width],
                                 initializer=_initializer(initializer_range))
        output += tf.expand_dims(table[:seq_length], 0)
    return dropout(layer_norm(output), dropout_prob)


def _heads(x, batch_size, seq_length, num_heads, size_per_head):
    """[B*S, N*H] -> [B, N, S, H]."""
    x = tf.reshape(x, [batch_size, seq_length, num_heads, size_per_head])
    return tf.transpose(x, [0, 2, 1, 3])


def attention_layer(from_tensor, to_tensor, attention_mask=None, num_attention_heads=1,
                    size_per_head=512, query_act=None, key_act=None, value_act=None,
                    attention_probs_dropout_prob=0.0, initializer_range=0.02,
                    do_return_2d_tensor=False, batch_size=None, from_seq_length=None,
                    to_seq_length=None):
    """Google's multi-headed attention from `from_tensor` to `to_tensor` (dense layers
    `query`, `key`, `value` in the current variable scope).

    Args:
      from_tensor: float Tensor [B, F, W] (or [B*F, W] with batch_size, from_seq_length).
      to_tensor: float Tensor [B, T, W] (or [B*T, W] with batch_size, to_seq_length).
      attention_mask: optional int32 Tensor [B, F, T], 1 = may attend.
      num_attention_heads, size_per_head: N and H.
      query_act, key_act, value_act: activations of the projections.
      attention_probs_dropout_prob: dropout on the attention probabilities.
      initializer_range: stddev of the projections' initializer.
      do_return_2d_tensor: return [B*F, N*H] instead of [B, F, N*H].

    Returns:
      float Tensor [B, F, N*H] (or [B*F, N*H]).
    """
    from_shape = _model.get_shape_list(from_tensor, expected_rank=[2, 3])
    to_shape = _model.get_shape_list(to_tensor, expected_rank=[2, 3])
    if len(from_shape) == 3:
        batch_size, from_seq_length, to_seq_length = from_shape[0], from_shape[1], to_shape[1]
    elif batch_size is None or from_seq_length is None or to_seq_length is None:
        raise ValueError("When passing in rank 2 tensors to attention_layer, the values for "
                         "`batch_size`, `from_seq_length`, and `to_seq_length` must all be "
                         "specified.")
    width = num_attention_heads * size_per_head
    from_2d = _model.reshape_to_matrix(from_tensor)
    to_2d = _model.reshape_to_matrix(to_tensor)
    init = _initializer(initializer_range)
    q = _heads(dense(from_2d, width, query_act, name="query", kernel_initializer=init),
               batch_size, from_seq_length, num_attention_heads, size_per_head)
    k = _heads(dense(to_2d, width, key_act, name="key", kernel_initializer=init),
               batch_size, to_seq_length, num_attention_heads, size_per_head)
    v = _heads(dense(to_2d, width, value_act, name="value", kernel_initializer=init),
               batch_size, to_seq_length, num_attention_heads, size_per_head)
    scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(float(size_per_head)))
    if attention_mask is not None:
        # [B, 1, F, T]: masked positions get a large negative score before the softmax.
        adder = (1.0 - tf.cast(tf.expand_dims(attention_mask, axis=[1]), tf.float32))
        scores += adder * _model.ATTENTION_MASK_ADDER
    probs = dropout(tf.nn.softmax(scores), attention_probs_dropout_prob)
    context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, F, N, H]
    shape = [batch_size * from_seq_length, width] if do_return_2d_tensor else \
        [batch_size, from_seq_length, width]
    return tf.reshape(context, shape)


def transformer_model(input_tensor, attention_mask=None, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072,
                      intermediate_act_fn=_model.gelu, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, initializer_range=0.02,
                      do_return_all_layers=False):
    """Google's post-LayerNorm transformer encoder ("Attention is All You Need"), with the
    variables of Google's `bert/encoder` under the current scope: `layer_N/attention/self/
    {query,key,value}`, `layer_N/attention/output/{dense,LayerNorm}`,
    `layer_N/intermediate/dense`, `layer_N/output/{dense,LayerNorm}`.

    Args:
      input_tensor: float Tensor [B, S, hidden_size].
      attention_mask: optional int32 Tensor [B, S, S], 1 = may attend.
      hidden_size, num_hidden_layers, num_attention_heads, intermediate_size: the sizes.
      intermediate_act_fn: the feed-forward activation.
      hidden_dropout_prob, attention_probs_dropout_prob: dropout rates.
      initializer_range: stddev of the dense layers' initializer.
      do_return_all_layers: return every layer's output, not only the last.

    Returns:
      float Tensor [B, S, hidden_size], or a list of them (one per layer).
    """
    if hidden_size % num_attention_heads != 0:
        raise ValueError(f"The hidden size ({hidden_size}) is not a multiple of the number of "
                         f"attention heads ({num_attention_heads})")
    size_per_head = hidden_size // num_attention_heads
    batch_size, seq_length, width = _model.get_shape_list(input_tensor, expected_rank=3)
    if width != hidden_size:
        raise ValueError(f"The width of the input tensor ({width}) != hidden size "
                         f"({hidden_size})")
    init = _initializer(initializer_range)
    prev_output = _model.reshape_to_matrix(input_tensor)  # [B*S, W] through the stack
    outputs = []
    for index in range(num_hidden_layers):
        with tf1.variable_scope(f"layer_{index}"):
            with tf1.variable_scope("attention"):
                with tf1.variable_scope("self"):
                    attention = attention_layer(
                        prev_output, prev_output, attention_mask, num_attention_heads,
                        size_per_head, None, None, None, attention_probs_dropout_prob,
                        initializer_range, True, batch_size, seq_length, seq_length)
                with tf1.variable_scope("output"):
                    attention = dropout(dense(attention, hidden_size, name="dense",
                                               kernel_initializer=init), hidden_dropout_prob)
                    attention = layer_norm(attention + prev_output)
            with tf1.variable_scope("intermediate"):
                intermediate = dense(attention, intermediate_size, intermediate_act_fn,
                                     name="dense", kernel_initializer=init)
            with tf1.variable_scope("output"):
                layer_output = dropout(dense(intermediate, hidden_size, name="dense",
                                              kernel_initializer=init), hidden_dropout_prob)
                prev_output = layer_norm(layer_output + attention)
                outputs.append(prev_output)
    shape = [batch_size, seq_length, hidden_size]
    if do_return_all_layers:
        return [tf.reshape(x, shape) for x in outputs]
    return tf.reshape(outputs[-1], shape)
