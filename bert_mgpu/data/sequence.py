"""Packing one or two tokenized texts into BERT's input layout (Google's conventions).

    tokens:      [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP]
    segment_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1

Shared by extract_features.py and the classifier data so both truncate and lay out exactly as
Google's `extract_features.py` / `run_classifier.py`; `window_spans` is the sliding-window rule
of Google's `run_squad.py` that the SQuAD, NER and windowed classifier data share.
"""

from typing import List, NamedTuple, Optional, Sequence, Tuple


def window_spans(num_tokens: int, max_tokens: int, stride: int) -> List[Tuple[int, int]]:
    """(start, length) of Google's `run_squad.py` document spans over `num_tokens` tokens: up
    to `max_tokens` tokens each, starts `min(length, stride)` apart, the last window ending at
    the last token. At least one window ((0, 0) for no token).

    Args:
      num_tokens: int >= 0.
      max_tokens, stride: int >= 1.
    """
    spans = []
    start = 0
    while True:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


class PackedInput(NamedTuple):
    """One example laid out for the model, padded to `max_seq_length`.

    Attributes:
      tokens: list of str, the real tokens including [CLS]/[SEP] (no padding).
      input_ids: list of int, length max_seq_length (0-padded).
      input_mask: list of int, 1 for real tokens, 0 for padding.
      segment_ids: list of int, 0 for text_a (and [CLS]), 1 for text_b.
    """
    tokens: List[str]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Truncates a pair in place to a total of `max_length`, one token at a time from the longer.

    As Google: a shorter sequence is likely to carry more information per token than the
    longer one, so the longer is truncated first (ties: tokens_b).
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_tokens(tokens_a: Sequence[str], tokens_b: Optional[Sequence[str]], max_seq_length: int,
                convert_tokens_to_ids) -> PackedInput:
    """[CLS] a [SEP] (b [SEP]), truncated as Google and padded with zeros.

    Args:
      tokens_a: tokens of the first text.
      tokens_b: tokens of the second text, or None (an empty list counts as None).
      max_seq_length: int, the padded length (>= 2, >= 3 with a pair).
      convert_tokens_to_ids: tokenizer's function, tokens -> ids.

    Returns:
      PackedInput.
    """
    tokens_a = list(tokens_a)
    # Google's `if tokens_b:`: a second text without tokens (empty, or only characters the
    # tokenizer drops) is no second text, and the single-text budget applies.
    if tokens_b:
        tokens_b = list(tokens_b)
        # Account for [CLS], [SEP], [SEP] with "- 3".
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    elif len(tokens_a) > max_seq_length - 2:
        # Account for [CLS] and [SEP] with "- 2".
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = list(convert_tokens_to_ids(tokens))
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    return PackedInput(tokens, input_ids + padding, input_mask + padding, segment_ids + padding)
