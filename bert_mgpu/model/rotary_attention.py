"""ModernBERT's attention: rotary position embeddings and sliding-window (local) attention.

Used by `modeling.py` when `bert_config.json` says `position_embedding_type: "rope"` (see
`model/bert_config.py`). Queries and keys are rotated by their position (RoPE, Su et al. 2021, in
GPT-NeoX's rotate-half layout, as ModernBERT and Hugging Face's `ModernBertModel`); a global layer
attends to every key, a local layer to the keys at distance <= `half_window` of its query.

The local layer computes only the band: the sequence is cut into blocks of `half_window`
positions and each query block scores the keys of its own block and of its two neighbours
(3 * half_window keys), so scores, softmax and context cost O(S * window), not O(S^2). The
values equal masked full attention with the band mask (`masked_attention`, which is also the
reference the tests compare with).

Shape legend, as in Google's code: B = batch size, N = heads, F = from (query) length,
T = to (key) length, H = size per head, S = F = T for self-attention, W = half_window,
K = number of blocks.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

# Added to the scores of masked keys before the softmax, as modeling.ATTENTION_MASK_ADDER.
MASK_ADDER = -10000.0


def rotary_inverse_frequencies(head_size, theta):
    """The RoPE frequencies 1 / theta^(2i / head_size), i < head_size / 2.

    Computed in float32 as Hugging Face's `compute_default_rope_parameters` (a float32 power), so
    the angles position * frequency round the same way.

    Returns:
      float32 numpy array [head_size / 2].
    """
    exponents = np.arange(0, head_size, 2, dtype=np.float32) / np.float32(head_size)
    return (np.float32(1.0) / np.power(np.float32(theta), exponents)).astype(np.float32)


def apply_rotary(x, positions, inv_freq):
    """Rotates each head's vector by its position (rotate-half layout: the first half of the
    head's dimensions are the pairs' first components, the second half their second).

    Args:
      x: float Tensor [B, N, S, H].
      positions: int Tensor [S] (every sequence's) or [B, S] (per sequence: packed documents),
        the position of each row.
      inv_freq: float32 numpy array [H / 2] (`rotary_inverse_frequencies`).

    Returns:
      float Tensor [B, N, S, H], x's dtype; the rotation is computed in float32.
    """
    angles = tf.cast(positions, tf.float32)[..., None] * tf.constant(inv_freq)  # [(B,) S, H/2]
    angles = tf.concat([angles, angles], axis=-1)  # [(B,) S, H]
    if angles.shape.rank == 3:
        angles = angles[:, None]  # [B, 1, S, H]: the same for every head
    cos, sin = tf.cos(angles), tf.sin(angles)
    x32 = tf.cast(x, tf.float32)
    first, second = tf.split(x32, 2, axis=-1)
    rotated = tf.concat([-second, first], axis=-1)
    return tf.cast(x32 * cos + rotated * sin, x.dtype)


def band_mask(from_positions, to_positions, half_window):
    """1.0 where |from - to| <= half_window: float32 Tensor [F, T]."""
    distance = tf.abs(from_positions[:, None] - to_positions[None, :])
    return tf.cast(distance <= half_window, tf.float32)


def masked_attention(query, key, value, attention_mask, scale, probs_dropout):
    """Scaled dot-product attention over every key, masked (Google's attention core).

    Args:
      query: float Tensor [B, N, F, H]; key, value: float Tensors [B, N, T, H].
      attention_mask: float Tensor [B, F, T] (or broadcastable), 1 = may attend, or None.
      scale: Python float, multiplies the scores (1 / sqrt(H)).
      probs_dropout: function probs [B, N, F, T] -> probs (dropout on the probabilities).

    Returns:
      float Tensor [B, N, F, H].
    """
    scores = tf.matmul(query, key, transpose_b=True)  # [B, N, F, T]
    scores *= tf.cast(scale, scores.dtype)
    if attention_mask is not None:
        adder = (1.0 - tf.cast(attention_mask, tf.float32)) * MASK_ADDER
        scores += tf.cast(tf.expand_dims(adder, 1), scores.dtype)  # [B, 1, F, T]
    probs = probs_dropout(tf.nn.softmax(scores))
    return tf.matmul(probs, value)


class Packing(NamedTuple):
    """Documents packed in the rows of a batch (ModernBERT's padding-free sequences).

    Attributes:
      document_ids: int32 Tensor [B, S]; each document a contiguous run of one id in a row.
      positions: int32 Tensor [B, S], the position of each token in its document (its RoPE
        position).
    """
    document_ids: tf.Tensor
    positions: tf.Tensor

    @classmethod
    def of(cls, document_ids) -> "Packing":
        """The packing of `document_ids` [B, S]: positions restart at each run's first token."""
        document_ids = tf.cast(document_ids, tf.int32)
        shape = tf.shape(document_ids)
        index = tf.broadcast_to(tf.range(shape[1]), shape)  # [B, S]
        starts = tf.concat([tf.ones_like(document_ids[:, :1], tf.bool),
                            document_ids[:, 1:] != document_ids[:, :-1]], axis=1)
        # Run r of row b is segment b*S + r; its first index is the segment's minimum.
        run = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1 + \
            tf.range(shape[0])[:, None] * shape[1]  # [B, S]
        first = tf.math.unsorted_segment_min(index, run, shape[0] * shape[1])
        return cls(document_ids, index - tf.gather(first, run))

    def same_document(self):
        """float32 [B, S, S]: 1.0 where the query's and the key's documents are the same."""
        ids = self.document_ids
        return tf.cast(tf.equal(ids[:, :, None], ids[:, None, :]), tf.float32)


def _blocks_with_neighbours(x, block, num_blocks):
    """x [B, N, K*W, D] -> [B, N, K, 3W, D]: block k's previous, own and next block (zeros
    beyond the ends)."""
    shape = tf.shape(x)
    padded = tf.pad(x, [[0, 0], [0, 0], [block, block], [0, 0]])
    blocks = tf.reshape(padded, tf.stack([shape[0], shape[1], num_blocks + 2, block,
                                          shape[3]]))
    return tf.concat([blocks[:, :, :-2], blocks[:, :, 1:-1], blocks[:, :, 2:]], axis=3)


def band_attention(query, key, value, key_mask, half_window, scale, probs_dropout,
                   document_ids=None):
    """Sliding-window self-attention computing only the band: each query attends to the keys
    at distance <= half_window (and not masked).

    Queries are taken in blocks of W = half_window rows; block k scores the 3W keys of blocks
    k - 1, k, k + 1, which hold every key within W of any of its queries. Work and memory are
    O(B * N * S * 3W * H), linear in S.

    Args:
      query, key, value: float Tensors [B, N, S, H] (S may be dynamic).
      key_mask: float or int Tensor [B, S], 1 = real key, 0 = padding.
      half_window: Python int W >= 1.
      scale: Python float, multiplies the scores (1 / sqrt(H)).
      probs_dropout: function probs [B, N, K, W, 3W] -> probs.
      document_ids: optional int Tensor [B, S] (`Packing`): a query attends only to keys of
        its own document.

    Returns:
      float Tensor [B, N, S, H], equal to `masked_attention` with the mask
      key_mask * band_mask(positions, positions, half_window) at every query with a key to
      attend to (a padded query whose window holds only padding gets an average of values).
    """
    w = half_window
    shape = tf.shape(query)
    seq_length = shape[2]
    num_blocks = (seq_length + w - 1) // w
    extra = num_blocks * w - seq_length  # pad S up to K*W

    def pad_rows(t):
        return tf.pad(t, [[0, 0], [0, 0], [0, extra], [0, 0]])

    blocked_query = tf.reshape(pad_rows(query),
                               tf.stack([shape[0], shape[1], num_blocks, w, shape[3]]))
    keys = _blocks_with_neighbours(pad_rows(key), w, num_blocks)  # [B, N, K, 3W, H]
    values = _blocks_with_neighbours(pad_rows(value), w, num_blocks)  # [B, N, K, 3W, H]
    mask = tf.pad(tf.cast(key_mask, tf.float32), [[0, 0], [0, extra]])[:, None, :, None]
    mask = _blocks_with_neighbours(mask, w, num_blocks)[:, 0, :, :, 0]  # [B, K, 3W]
    # Query i of a block and key j of its window are (j - W) - i positions apart, whatever the
    # block: one [W, 3W] band serves every block.
    band = band_mask(tf.range(w), tf.range(3 * w) - w, w)  # [W, 3W]
    allowed = mask[:, None, :, None, :] * band  # [B, 1, K, W, 3W]
    if document_ids is not None:
        # Ids as float32 (exact below 2**24) to reuse the float blocking; the keys beyond the
        # ends get id 0 but are already masked by `mask`.
        docs = tf.pad(tf.cast(document_ids, tf.float32), [[0, 0], [0, extra]])  # [B, K*W]
        query_docs = tf.reshape(docs, tf.stack([shape[0], num_blocks, w]))  # [B, K, W]
        key_docs = _blocks_with_neighbours(docs[:, None, :, None], w, num_blocks)[:, 0, :, :, 0]
        same = tf.cast(tf.equal(query_docs[:, :, :, None], key_docs[:, :, None, :]), tf.float32)
        allowed *= same[:, None]  # keys of other documents are masked

    scores = tf.matmul(blocked_query, keys, transpose_b=True)  # [B, N, K, W, 3W]
    scores *= tf.cast(scale, scores.dtype)
    scores += tf.cast((1.0 - allowed) * MASK_ADDER, scores.dtype)
    probs = probs_dropout(tf.nn.softmax(scores))
    context = tf.matmul(probs, values)  # [B, N, K, W, H]
    context = tf.reshape(context, tf.stack([shape[0], shape[1], num_blocks * w, shape[3]]))
    return context[:, :, :seq_length]


def _chunk_adder(key_mask, query_docs, key_docs):
    """The additive mask of one chunk of queries: 0 where a query may attend, MASK_ADDER
    elsewhere (what `masked_attention` adds for the mask key_mask * same document).

    Args:
      key_mask: float32 Tensor [B, T], 1 = real key.
      query_docs: int32 Tensor [B, C] (the chunk's queries' documents) or None (no packing).
      key_docs: int32 Tensor [B, T] or None.

    Returns:
      float32 Tensor [B, 1, C or 1, T].
    """
    allowed = key_mask[:, None, :]  # [B, 1, T]
    if query_docs is not None:
        allowed = allowed * tf.cast(tf.equal(query_docs[:, :, None], key_docs[:, None, :]),
                                    tf.float32)  # [B, C, T]
    return ((1.0 - allowed) * MASK_ADDER)[:, None]


def _in_chunks(x, chunk, num_chunks, fill=0):
    """x [B, N, S, D] (or [B, S]) -> [K, B, N, C, D] ([K, B, C]): rows cut into K chunks of C,
    the last one padded with `fill`."""
    axis = 2 if x.shape.rank == 4 else 1  # the rows' axis
    extra = num_chunks * chunk - tf.shape(x)[axis]
    padding = [[0, 0]] * x.shape.rank
    padding[axis] = [0, extra]
    shape = tf.shape(x)
    blocked = tf.reshape(tf.pad(x, padding, constant_values=fill),
                         tf.concat([shape[:axis], [num_chunks, chunk], shape[axis + 1:]], 0))
    return tf.transpose(blocked, [axis] + [j for j in range(x.shape.rank + 1) if j != axis])


def _from_chunks(chunks, seq_length):
    """[K, B, N, C, D] -> [B, N, S, D] (the inverse of `_in_chunks`, padding cut)."""
    shape = tf.shape(chunks)
    rows = tf.reshape(tf.transpose(chunks, [1, 2, 0, 3, 4]),
                      tf.stack([shape[1], shape[2], shape[0] * shape[3], shape[4]]))
    return rows[:, :, :seq_length]


def chunked_attention(query, key, value, key_mask, scale, chunk, document_ids=None):
    """`masked_attention` without dropout, computed `chunk` query rows at a time and keeping
    none of the [B, N, C, T] probabilities for the backward pass, which computes each chunk's
    again: memory O(B * N * C * T) at a time instead of O(B * N * S^2). The same values (each
    query's softmax is over every key, in one chunk), and gradients to float rounding.

    The chunks run one after another in a `tf.while_loop` (forward and backward), so a
    dynamic S is fine; the loop's gradient is written here (`tf.custom_gradient`), so the loop
    keeps nothing per chunk.

    Args:
      query, key, value: float Tensors [B, N, S, H].
      key_mask: float or int Tensor [B, S], 1 = real key.
      scale: Python float, multiplies the scores.
      chunk: Python int C >= 1, query rows per chunk.
      document_ids: optional int Tensor [B, S] (`Packing`): a query attends only to the keys
        of its own document.

    Returns:
      float Tensor [B, N, S, H]: `masked_attention(query, key, value, key_mask[:, None, :] *
      same_document, scale, identity)`.
    """
    seq_length = tf.shape(query)[2]
    num_chunks = (seq_length + chunk - 1) // chunk
    key_mask = tf.cast(key_mask, tf.float32)
    key_docs = None if document_ids is None else tf.cast(document_ids, tf.int32)
    # Padded query rows belong to no document (-1): masked everywhere, cut from the output.
    query_docs = None if key_docs is None else _in_chunks(key_docs, chunk, num_chunks, -1)

    def probs(i, query_chunk, key):  # chunk i's softmax [B, N, C, T]
        scores = tf.matmul(query_chunk, key, transpose_b=True) * tf.cast(scale, key.dtype)
        adder = _chunk_adder(key_mask, None if query_docs is None else query_docs[i], key_docs)
        return tf.nn.softmax(scores + tf.cast(adder, scores.dtype))

    @tf.custom_gradient
    def attend(query, key, value):
        queries = _in_chunks(query, chunk, num_chunks)

        def step(i, out):
            return i + 1, out.write(i, tf.matmul(probs(i, queries[i], key), value))

        out = tf.TensorArray(query.dtype, size=num_chunks, element_shape=queries.shape[1:])
        _, out = tf.while_loop(lambda i, _: i < num_chunks, step, (0, out),
                               parallel_iterations=1)
        return _from_chunks(out.stack(), seq_length), \
            lambda d_out: _chunked_gradients(queries, key, value, d_out, probs, scale,
                                             num_chunks, chunk)

    return attend(query, key, value)


def _chunked_gradients(queries, key, value, d_out, probs, scale, num_chunks, chunk):
    """The gradients of `chunked_attention` with respect to its query, key and value, each
    chunk's probabilities P computed again: dV = sum P^T dO, dS = P * (dP - rowsum(dP * P))
    with dP = dO V^T, dQ = scale dS K, dK = scale sum dS^T Q. Key and value gradients are summed
    in float32 over the chunks."""
    d_outs = _in_chunks(d_out, chunk, num_chunks)

    def step(i, d_queries, d_key, d_value):
        p = probs(i, queries[i], key)  # [B, N, C, T]
        d_value += tf.cast(tf.matmul(p, d_outs[i], transpose_a=True), tf.float32)
        d_probs = tf.matmul(d_outs[i], value, transpose_b=True)
        d_scores = p * (d_probs - tf.reduce_sum(d_probs * p, axis=-1, keepdims=True))
        d_scores *= tf.cast(scale, d_scores.dtype)
        d_key += tf.cast(tf.matmul(d_scores, queries[i], transpose_a=True), tf.float32)
        return i + 1, d_queries.write(i, tf.matmul(d_scores, key)), d_key, d_value

    d_queries = tf.TensorArray(queries.dtype, size=num_chunks, element_shape=queries.shape[1:])
    zeros = tf.zeros(tf.shape(key), tf.float32)
    _, d_queries, d_key, d_value = tf.while_loop(
        lambda i, *_: i < num_chunks, step, (0, d_queries, zeros, zeros), parallel_iterations=1)
    return (_from_chunks(d_queries.stack(), tf.shape(key)[2]), tf.cast(d_key, key.dtype),
            tf.cast(d_value, value.dtype))
