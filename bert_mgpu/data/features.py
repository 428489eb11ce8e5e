"""The single source of TFRecord feature names, dtypes and shapes (Google's formats).

Pretraining records (Google's `create_pretraining_data.py` → `run_pretraining.py`):
  input_ids, input_mask, segment_ids        int64 [max_seq_length]
  masked_lm_positions, masked_lm_ids        int64 [max_predictions_per_seq]
  masked_lm_weights                         float [max_predictions_per_seq]
  next_sentence_labels                      int64 [1]
Unmasked pretraining records (create_pretraining_data.py --dynamic_masking → run_pretraining.py
--dynamic_masking, which masks them in the input pipeline into the 7 features above):
  input_ids, input_mask, segment_ids        int64 [max_seq_length]
  word_starts                               int64 [max_seq_length] 1 where a word begins
  next_sentence_labels                      int64 [1]
Classifier records (Google's `run_classifier.py` `file_based_convert_examples_to_features`):
  input_ids, input_mask, segment_ids        int64 [max_seq_length]
  label_ids, is_real_example                int64 [1]
Regression / multi-label classifier records (run_classifier_mgpu.py --task_type; no Google
counterpart): as the classifier's, with `label_ids` replaced by
  label_values                              float [1] (the score) / [num_labels] (multi-hot)
Windowed classifier records (run_classifier_mgpu.py --doc_stride > 0; no Google counterpart): one
record per window of a long text, as the classifier's (any task type) plus
  doc_index                                 int64 [1] the example's index in its split
  window_weight                             float [1] 1 / its document's number of windows

TFRecords store int64; `parse_example` casts to int32 after parsing, as Google's `_decode_record`
does (int32 is what the model and the GPU kernels want).
"""

import collections
from typing import Dict, Mapping

# Reading protobufs and parsing records needs TensorFlow; writing the feature dicts does not
# (create_pretraining_data builds tf.train.Example protos in the writer), so TF is imported lazily.

PRETRAINING_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                        "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
CLASSIFIER_FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
# The features with a sequence axis that a batch trimmed to its longest example shortens
# (input_pipeline.trim_padding): those of every classifier record kind.
SEQUENCE_FEATURES = frozenset({"input_ids", "input_mask", "segment_ids"})
# Evaluation batches sorted by length: each example's 1 / (size of its batch in file order),
# float32 [batch], so that the Estimator's `loss` (a mean of batch means) is the file order's.
FILE_BATCH_WEIGHT = "file_batch_weight"
# Unmasked (dynamic-masking) records: `word_starts` is 1 on a maskable token that begins a
# whole-word masking group (0 on a continuation piece, [CLS], [SEP] and padding).
WORD_STARTS = "word_starts"
DYNAMIC_PRETRAINING_FEATURES = ("input_ids", "input_mask", "segment_ids", "next_sentence_labels",
                                WORD_STARTS)
# Packed records (create_pretraining_data.py --pack_sequences --document_ids): int
# [max_seq_length], each position's document in the instance (1, 2, ...; 0 at padding), each
# document a contiguous run; the model keeps a token to its own document.
DOCUMENT_IDS = "document_ids"
# Every float feature of every record kind (a feature name means one thing in every format):
# the pretraining masked-LM weights, the token-tagging (NER) label weights, the regression /
# multi-label classifier targets.
FLOAT_FEATURES = frozenset({"masked_lm_weights", "label_weights", "label_values",
                            "window_weight"})
# Windowed classifier records (--doc_stride): the document a window belongs to and its weight.
DOC_INDEX = "doc_index"
WINDOW_WEIGHT = "window_weight"
# Multi-task training batches (data/multitask.py; not a record feature): int32 [batch], the index
# of the task every example of the batch belongs to.
TASK_ID = "task_id"


def pretraining_shapes(max_seq_length: int, max_predictions_per_seq: int) -> Dict[str, int]:
    """Feature name -> fixed length of a pretraining record."""
    return collections.OrderedDict([
        ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length), ("masked_lm_positions", max_predictions_per_seq),
        ("masked_lm_ids", max_predictions_per_seq), ("masked_lm_weights", max_predictions_per_seq),
        ("next_sentence_labels", 1)])


def dynamic_pretraining_shapes(max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of an unmasked (--dynamic_masking) pretraining record."""
    return collections.OrderedDict([
        ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length), ("next_sentence_labels", 1),
        (WORD_STARTS, max_seq_length)])


def classifier_shapes(max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of a classifier record."""
    return collections.OrderedDict([
        ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length), ("label_ids", 1), ("is_real_example", 1)])


def label_values_shapes(max_seq_length: int, num_values: int) -> Dict[str, int]:
    """Feature name -> fixed length of a regression (num_values 1) or multi-label
    (num_values = number of labels) record."""
    return collections.OrderedDict([
        ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length), ("label_values", num_values), ("is_real_example", 1)])


def with_windows(shapes: Mapping[str, int]) -> Dict[str, int]:
    """Classifier record `shapes` plus the windowed records' `doc_index` and `window_weight`."""
    return collections.OrderedDict([*shapes.items(), (DOC_INDEX, 1), (WINDOW_WEIGHT, 1)])


def feature_spec(shapes: Mapping[str, int]):
    """name -> tf.io.FixedLenFeature for `tf.io.parse_single_example`/`parse_example`."""
    import tensorflow as tf
    return {name: tf.io.FixedLenFeature([length], tf.float32 if name in FLOAT_FEATURES
                                        else tf.int64)
            for name, length in shapes.items()}


def parse_example(serialized, shapes: Mapping[str, int]):
    """Parses one or a batch of serialized records; int64 features become int32 (as Google).

    Args:
      serialized: string Tensor, scalar or [batch].
      shapes: from `pretraining_shapes` / `classifier_shapes`.

    Returns:
      dict name -> Tensor ([length] or [batch, length]); int32 except `masked_lm_weights`.
    """
    import tensorflow as tf
    spec = feature_spec(shapes)
    if serialized.shape.ndims == 0:
        parsed = tf.io.parse_single_example(serialized, spec)
    else:
        parsed = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in parsed.items()}


def record_lengths(serialized: bytes) -> Dict[str, int]:
    """name -> number of values in one serialized record (to check it against the flags)."""
    import tensorflow as tf
    example = tf.train.Example.FromString(serialized)
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[name] = len(getattr(feature, kind).value) if kind else 0
    return out
