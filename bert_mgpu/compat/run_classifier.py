"""Google's `run_classifier.py` module API (google-research/bert) for code that imports it:
examples, processors, `convert_single_example`, `convert_examples_to_features`,
`file_based_convert_examples_to_features` and `create_model` (TF1 graph mode), and its
`flags`/`FLAGS` (TF1's `tf.flags`: absl's, parsed at the first read). Google's module also
defined its own command-line flags when imported; this one defines none, so a user's file that
defines the same names (a copy of Google's script that imports this module for its functions)
does not collide with it.

Google's Estimator builders (`model_fn_builder`, `input_fn_builder`,
`file_based_input_fn_builder`) need `tf.estimator`, which TF 2.21 does not have: calling one ends
the run with one line naming the project's `run_classifier.py`, which does that job.
"""

import collections

import tensorflow as tf

from bert_mgpu.compat import modeling
from bert_mgpu.compat.tf1 import flags_module, unavailable
from bert_mgpu.data.processors import (
    ColaProcessor,
    InputExample,
    MnliProcessor,
    MrpcProcessor,
    XnliProcessor,
    read_tsv,
)
from bert_mgpu.data.sequence import pack_tokens, truncate_seq_pair

tf1 = tf.compat.v1

__all__ = ["InputExample", "PaddingInputExample", "InputFeatures", "DataProcessor",
           "XnliProcessor", "MnliProcessor", "MrpcProcessor", "ColaProcessor",
           "convert_single_example", "convert_examples_to_features",
           "file_based_convert_examples_to_features", "create_model", "model_fn_builder",
           "input_fn_builder", "file_based_input_fn_builder", "flags", "FLAGS"]

_truncate_seq_pair = truncate_seq_pair
flags = flags_module()
FLAGS = flags.FLAGS


class PaddingInputExample:
    """Google's fake example that pads a batch to its full size (all-zero features,
    `is_real_example` False)."""


class InputFeatures:
    """A single set of features of data (Google's)."""

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


class DataProcessor:
    """Google's base class for data converters of sequence classification data sets."""

    def get_train_examples(self, data_dir):
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        raise NotImplementedError()

    def get_labels(self):
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Reads a tab separated value file (Google's: no quoting), as unicode rows."""
        del quotechar  # Google passes None everywhere: no quoting
        return read_tsv(input_file)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """Converts one `InputExample` (or `PaddingInputExample`) into `InputFeatures` (Google's).

    Args:
      ex_index: int, the example's index (Google logs the first five; unused here).
      example: `InputExample` or `PaddingInputExample`.
      label_list: list of label strings (ids are their positions).
      max_seq_length: int, the padded length.
      tokenizer: `tokenization.FullTokenizer`.

    Returns:
      `InputFeatures` with int lists of length `max_seq_length`.
    """
    del ex_index
    if isinstance(example, PaddingInputExample):
        zeros = [0] * max_seq_length
        return InputFeatures(list(zeros), list(zeros), list(zeros), 0, is_real_example=False)
    label_map = {label: i for i, label in enumerate(label_list)}
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    packed = pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer.convert_tokens_to_ids)
    return InputFeatures(packed.input_ids, packed.input_mask, packed.segment_ids,
                         label_map[example.label], is_real_example=True)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """Google's: a list of `InputFeatures`, one per example."""
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer)
            for i, example in enumerate(examples)]


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file):
    """Google's: writes the examples' features to a TFRecord file (`input_ids`, `input_mask`,
    `segment_ids`, `label_ids`, `is_real_example`, int64)."""

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    with tf.io.TFRecordWriter(output_file) as writer:
        for i, example in enumerate(examples):
            feature = convert_single_example(i, example, label_list, max_seq_length, tokenizer)
            features = collections.OrderedDict(
                input_ids=ints(feature.input_ids), input_mask=ints(feature.input_mask),
                segment_ids=ints(feature.segment_ids), label_ids=ints([feature.label_id]),
                is_real_example=ints([int(feature.is_real_example)]))
            record = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(record.SerializeToString())


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings):
    """Google's classification model (graph mode): BERT, then `output_weights`/`output_bias`
    at the root scope on the pooled output, dropout 0.1 in training.

    Args:
      bert_config: `modeling.BertConfig`.
      is_training: bool.
      input_ids, input_mask, segment_ids: int32 Tensors [batch_size, seq_length].
      labels: int32 Tensor [batch_size].
      num_labels: int.
      use_one_hot_embeddings: accepted (same values either way).

    Returns:
      (loss float32 scalar, per_example_loss [batch_size], logits [batch_size, num_labels],
      probabilities [batch_size, num_labels]).
    """
    model = modeling.BertModel(config=bert_config, is_training=is_training,
                               input_ids=input_ids, input_mask=input_mask,
                               token_type_ids=segment_ids,
                               use_one_hot_embeddings=use_one_hot_embeddings)
    output_layer = model.get_pooled_output()
    hidden_size = output_layer.shape[-1]
    output_weights = tf1.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf1.truncated_normal_initializer(stddev=0.02))
    output_bias = tf1.get_variable("output_bias", [num_labels],
                                   initializer=tf1.zeros_initializer())
    with tf1.variable_scope("loss"):
        if is_training:
            output_layer = tf.nn.dropout(output_layer, rate=0.1)
        logits = tf.nn.bias_add(tf.matmul(output_layer, output_weights, transpose_b=True),
                                output_bias)
        probabilities = tf.nn.softmax(logits, axis=-1)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
        per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
        loss = tf.reduce_mean(per_example_loss)
        return loss, per_example_loss, logits, probabilities


def model_fn_builder(*args, **kwargs):
    """Google's Estimator `model_fn` builder: TF 2.21 has no Estimator (ends the run)."""
    unavailable("run_classifier.model_fn_builder (an Estimator model_fn)",
                "the project's run_classifier.py")


def input_fn_builder(*args, **kwargs):
    """Google's Estimator `input_fn` builder: TF 2.21 has no Estimator (ends the run)."""
    unavailable("run_classifier.input_fn_builder (an Estimator input_fn)",
                "the project's run_classifier.py")


def file_based_input_fn_builder(*args, **kwargs):
    """Google's Estimator `input_fn` builder: TF 2.21 has no Estimator (ends the run)."""
    unavailable("run_classifier.file_based_input_fn_builder (an Estimator input_fn)",
                "the project's run_classifier.py")
