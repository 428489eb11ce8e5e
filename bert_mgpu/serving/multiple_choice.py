"""The multiple-choice SavedModel (export_saved_model.py --task=multiple_choice): a
run_multiple_choice.py model, a context and its choices in, each choice's probability out.

Signatures (every batch dimension is free, and so is the number of choices C; texts are UTF-8
strings):

- `serving_default`: `context` string [batch], `choices` string [batch, C] -> `probabilities`
  float32 [batch, C] (softmax over the example's choices, as test_results.tsv) and `label_id`
  int32 [batch] (the most likely choice, as predict.txt). A choice is one SWAG choice as the
  job builds it (`sent2 + " " + ending<i>`); each (context, choice) pair is packed as
  run_multiple_choice.py packs it (Google's pair truncation, `[CLS] context [SEP] choice
  [SEP]`; a choice without tokens is no second text, as there).
- `tokenize`: the same inputs -> `input_ids`, `input_mask`, `segment_ids` int32
  [batch, C, max_seq_length], the job's records.
- `serve_ids`: those ids [batch, C, seq_length] -> the outputs of `serving_default`.

The B * C sequences run as one batch through the encoder, cut (and chunked) by length as the
classifier's texts are (serving/export.py): the scores of the real tokens are those of the
fully padded sequences the job scores, to float summation order.
"""

import tensorflow as tf

from bert_mgpu.model import heads
from bert_mgpu.serving.task import ExportError, TaskServing

SEQUENCES = ("input_ids", "input_mask", "segment_ids")


class ServedChoiceScorer(tf.Module):
    """The job's one-output classifier layer (root-level `output_weights` [1, H],
    `output_bias` [1]): one score per (context, choice) sequence."""

    def __init__(self, bert_config):
        super().__init__(name=None)
        self.classifier = heads.ClassifierHead(bert_config, 1)

    def named_variables(self):
        return self.classifier.named_variables()

    def __call__(self, pooled_output):
        """pooled_output float [N, H] -> {"score": float32 [N]}."""
        return {"score": self.classifier.logits(tf.cast(pooled_output, tf.float32))[:, 0]}


def _choice_outputs(scores, num_choices):
    """float32 [B * C] scores (example-major) -> `probabilities` [B, C], `label_id` [B]."""
    probabilities = tf.nn.softmax(tf.reshape(scores, [-1, num_choices]), axis=-1)
    return {"probabilities": probabilities,
            "label_id": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


def _tokenize(model, context, choices):
    """context [B], choices [B, C] -> the ids [B, C, max_seq_length] (module docstring)."""
    num_choices = tf.shape(choices)[1]
    pairs = model.tokenize(tf.repeat(context, num_choices), tf.reshape(choices, [-1]))
    shape = tf.stack([-1, num_choices, model.tokenizer.max_seq_length])
    return {name: tf.reshape(pairs[name], shape) for name in SEQUENCES}


def _serve_ids(model, input_ids, input_mask, segment_ids):
    """The ids [B, C, S] -> the outputs: each of the B * C sequences scored as one batch."""
    length = tf.shape(input_ids)[-1]
    flat = [tf.reshape(x, [-1, length]) for x in (input_ids, input_mask, segment_ids)]
    return _choice_outputs(model.serve_ids(*flat)["score"], tf.shape(input_ids)[1])


class MultipleChoiceServing(TaskServing):
    """run_multiple_choice.py's scorer on the pooled output: [CLS] only, no sequence
    dimension."""
    first_token_only = True
    per_position = False

    def build(self, bert_config, shapes, spec):
        del spec
        if shapes.get("output_bias") != [1]:
            raise ExportError("--task=multiple_choice: the checkpoint has no one-output "
                              "choice scorer (output_weights [1, hidden], output_bias [1]) of "
                              "a run_multiple_choice.py run")
        return ServedChoiceScorer(bert_config)

    def outputs(self, head, bert_out, input_mask):
        del input_mask
        return head(bert_out.pooled_output)

    def signatures(self, model, serve_ids):
        del serve_ids  # the [B, C, S] ids have a signature of their own
        texts = [tf.TensorSpec([None], tf.string, name="context"),
                 tf.TensorSpec([None, None], tf.string, name="choices")]
        ids = [tf.TensorSpec([None, None, None], tf.int32, name=n) for n in SEQUENCES]
        return {
            "serving_default": tf.function(
                lambda context, choices: _serve_ids(model, *_tokenize(model, context,
                                                                      choices).values()),
                input_signature=texts, autograph=False),
            "tokenize": tf.function(lambda context, choices: _tokenize(model, context, choices),
                                    input_signature=texts, autograph=False),
            "serve_ids": tf.function(
                lambda input_ids, input_mask, segment_ids: _serve_ids(
                    model, input_ids, input_mask, segment_ids),
                input_signature=ids, autograph=False),
        }


SERVING = MultipleChoiceServing()
