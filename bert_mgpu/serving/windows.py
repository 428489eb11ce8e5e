"""Doc-stride windows in the serving graph, shared by the SQuAD export and the classifier export
of a `--doc_stride` run.

`window_spans` is `bert_mgpu.data.sequence.window_spans` (Google's `run_squad.py` rule: windows
of up to `max_tokens` tokens starting `min(max_tokens, stride)` apart, the last one ending at
the last token, one window for no token) over a whole batch at once. The SQuAD export slides it
over the context (`squad.SquadServing.windows`); `document_windows` slides it over a classifier's
`text_a` with the rule of `bert_mgpu.data.classifier_data.document_windows` (a `text_b` is cut
once and kept in every window), and `pool` pools each text's windows as the classifier's eval
and predict do (`classifier_data.pool_windows`).
"""

import tensorflow as tf

from bert_mgpu.serving.tokenizer import keep_first

# --window_pooling's values (configs.classifier.WINDOW_POOLINGS) -> the segment reduction.
_POOLS = {"mean": tf.math.unsorted_segment_mean, "max": tf.math.unsorted_segment_max}


def window_spans(num_tokens, max_tokens, stride):
    """The windows of every row of a batch.

    Args:
      num_tokens: int64 Tensor [batch_size], the tokens of each row (>= 0).
      max_tokens: int64 Tensor [batch_size], each row's window length (>= 1).
      stride: int or int64 Tensor [batch_size] (>= 1).

    Returns:
      (row, start, length): int64 Tensors [W], W = the windows of the whole batch in row order:
      the row each window belongs to, its first token and its number of tokens.
    """
    step = tf.minimum(max_tokens, tf.cast(stride, tf.int64))
    over = tf.maximum(num_tokens - max_tokens, 0)
    num_windows = 1 + (over + step - 1) // step                        # [B]
    row = tf.repeat(tf.range(tf.size(num_windows, out_type=tf.int64)), num_windows)
    k = tf.ragged.range(num_windows).values                           # [W] index in its row
    start = k * tf.gather(step, row)
    length = tf.minimum(tf.gather(num_tokens, row) - start, tf.gather(max_tokens, row))
    return row, start, length


def slice_windows(tokens, row, start, length):
    """int32 RaggedTensor [W, (length)]: the tokens of each window (`window_spans`) of the rows
    of `tokens` (int32 RaggedTensor [batch_size, (tokens)]), and the index of each window token
    in `tokens.values` (int64 RaggedTensor of the same shape)."""
    positions = tf.ragged.range(start, start + length)                 # [W, (length)]
    index = positions.with_values(
        tf.gather(tokens.row_splits[:-1], tf.gather(row, positions.value_rowids()))
        + positions.values)
    return index.with_values(tf.gather(tokens.values, index.values)), index


def document_windows(tokenizer, text_a, text_b, doc_stride, padded_length=None):
    """The windows `run_classifier_mgpu.py --doc_stride` makes of each (text_a, text_b).

    As `classifier_data.document_windows`: without a second text (None, or one without tokens),
    windows of `max_seq_length - 2` tokens of text_a; with one, text_b is cut to
    `min(len_b, max(room // 2, room - len_a))` tokens (room = max_seq_length - 3) and follows
    every window of text_a, whose windows take the room left (at least 1). A pair that fits is
    one window, Google's record.

    Args:
      tokenizer: the `ServingTokenizer` (its max_seq_length is the windows').
      text_a: string Tensor [batch_size].
      text_b: string Tensor [batch_size] or None.
      doc_stride: int >= 1, tokens between window starts.
      padded_length: as `tokenizer.pack_rows` (None: the longest window).

    Returns:
      dict, W = the windows of the whole batch in text order: `input_ids`, `input_mask`,
      `segment_ids` int32 [W, padded_length]; `example_index` int32 [W] (the text each window
      belongs to).
    """
    seq_length = tokenizer.max_seq_length
    a = tokenizer.tokenize_ids(text_a)
    num_a = a.row_lengths()
    single = tf.fill(tf.shape(num_a), tf.constant(max(1, seq_length - 2), tf.int64))
    b = None
    if text_b is None:
        max_a = single
    else:
        b = tokenizer.tokenize_ids(text_b)
        num_b = b.row_lengths()
        room = tf.constant(seq_length - 3, tf.int64)
        kept_b = tf.minimum(num_b, tf.maximum(room // 2, room - num_a))
        max_a = tf.where(num_b > 0, tf.maximum(room - kept_b, 1), single)
        b = keep_first(b, kept_b)
    row, start, length = window_spans(num_a, max_a, doc_stride)
    windows_a, _ = slice_windows(a, row, start, length)
    packed = tokenizer.pack(windows_a, None if b is None else tf.gather(b, row), padded_length)
    packed["example_index"] = tf.cast(row, tf.int32)
    return packed


def pool(values, example_index, num_texts, pooling):
    """Each text's pooled value over its windows, as `classifier_data.pool_windows`.

    Args:
      values: float32 Tensor [W, ...] (a window's probabilities or score).
      example_index: int32 Tensor [W], each window's text (every text has a window).
      num_texts: scalar int Tensor, the batch size.
      pooling: "mean" or "max" (elementwise over the text's windows).

    Returns:
      float32 Tensor [num_texts, ...].
    """
    return _POOLS[pooling](values, example_index, num_texts)
