"""run_multiple_choice.py's task (draft): BERT scoring each of an example's C choices.

Features (data/multiple_choice_data.py): `input_ids`, `input_mask`, `segment_ids` int32
[B, C, L], one `[CLS] context [SEP] choice [SEP]` sequence per choice, and `label_ids` int32 [B],
the right choice. The encoder reads the B * C sequences as one [B * C, L] batch; a one-output
classifier layer (Google's head, `heads.ClassifierHead` with one label: root-level
`output_weights` [1, H] and `output_bias` [1]; Hugging Face's `BertForMultipleChoice.classifier`)
scores each pooled output after dropout 0.1, and the loss is the cross-entropy over an example's
C scores, averaged over the global batch (`MeanOverExamples`).

Dropout: `sequence_length` is None, so the trainer lays no [B, L] layout over the masks; the
dropout stream then gives each example the draws of its position in the global batch for its
whole [C, L] block (the [B * C, ...] values are example-major), so towers, accumulation and
workers give the update of one device. A batch cut by --pad_to_longest is cut along L for every
choice alike (`trim_padding`: `input_pipeline.trim_padding` cuts the last axis); its masks are
those of the cut batch, not of the padded one.
"""

from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_mgpu.data import classifier_data
from bert_mgpu.data.multiple_choice_data import CHOICE_FEATURES
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import (
    MeanOverExamples,
    Tensors,
    estimator_loss_sums,
    inference_options,
    ratio,
)


class BertMultipleChoice(MeanOverExamples, tf.Module):
    """`BertModel` + a one-output `ClassifierHead` over the pooled output of each choice."""

    def __init__(self, config, num_choices: int, compute_dtype=tf.float32,
                 encoder: Optional[modeling.BertModel] = None):
        super().__init__(name=None)
        if num_choices < 2:
            raise ValueError(f"num_choices must be >= 2, got {num_choices}")
        self.config = config
        self.num_choices = num_choices
        self.bert = encoder if encoder is not None else modeling.BertModel(
            config, compute_dtype=compute_dtype)
        self.classifier = heads.ClassifierHead(config, 1)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.classifier)

    def sequence_length(self, features: Mapping[str, tf.Tensor]):
        """None: the masks are laid out per example over its [C, L] block (module docstring)."""
        del features
        return None

    def _logits(self, features, training) -> tf.Tensor:
        """float32 [B, C]: each choice's score."""
        shape = tf.shape(features["input_ids"])
        flat = [tf.reshape(features[name], [-1, shape[-1]]) for name in CHOICE_FEATURES]
        out = self.bert(*flat, training=training, **inference_options(training, "pooled"))
        scores = self.classifier.logits(out.pooled_output, training=training)  # [B * C, 1]
        return tf.reshape(scores, shape[:2])

    def _scored(self, features, training) -> Tensors:
        """`logits` [B, C], `probabilities` [B, C] and `per_example_loss` [B]."""
        logits = self._logits(features, training)
        labels = tf.reshape(features["label_ids"], [-1])
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
                "per_example_loss": tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=logits)}

    def per_example_loss(self, features, training) -> tf.Tensor:
        return self._scored(features, training)["per_example_loss"]

    def eval_sums(self, features) -> Tensors:
        """Losses and the count of examples whose highest-scored choice is the right one."""
        out = self._scored(features, training=False)
        labels = tf.reshape(features["label_ids"], [-1])
        correct = tf.equal(tf.argmax(out["logits"], -1, output_type=tf.int32), labels)
        return {"loss_sum": tf.reduce_sum(out["per_example_loss"]),
                "num_examples": tf.cast(tf.shape(labels)[0], tf.float32),
                "correct": tf.reduce_sum(tf.cast(correct, tf.float32)),
                **estimator_loss_sums(out["per_example_loss"], features)}

    def eval_metrics(self, sums) -> Dict[str, float]:
        """Google's classifier keys: `eval_accuracy`, `eval_loss` and the Estimator's `loss`
        (the mean over eval batches of each batch's mean loss)."""
        n = float(sums["num_examples"])
        return {"eval_accuracy": ratio(sums["correct"], n),
                "eval_loss": ratio(sums["loss_sum"], n),
                "loss": ratio(sums["batch_loss_sum"], sums["num_batches"])}

    def predict(self, features) -> Tensors:
        """`probabilities` float32 [B, C] (no dropout)."""
        return {"probabilities": tf.nn.softmax(self._logits(features, training=False), -1)}

    def choice_names(self) -> Sequence[str]:
        return [str(i) for i in range(self.num_choices)]

    def write_predictions(self, output_dir: str, outputs: Mapping[str, np.ndarray]) -> None:
        """test_results.tsv (each choice's probability), predict.txt (the chosen index) and
        label_list.txt (the indices 0 .. C-1), as the classifier writes them."""
        classifier_data.write_predictions(output_dir, outputs["probabilities"],
                                          self.choice_names())
