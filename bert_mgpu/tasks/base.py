"""The task contract between a job and the trainer, and one task per job.

A task is a model (`modeling.BertModel` + heads from heads.py) seen from the trainer. The trainer
(training.py) splits a global batch over towers, accumulation micro-batches and workers, sums
what the towers return and applies one update; it knows nothing of BERT. For the split not to
matter (N towers == one device on the same global batch), a task never normalises by its own
slice: `context` computes the normalisers of the *global* batch once, and `tower_loss` returns
the slice's share of the global loss, so the shares add up to the global loss and their
gradients add up to its gradient.
"""

from typing import Dict, Mapping, Optional, Protocol, Sequence, runtime_checkable

import numpy as np
import tensorflow as tf

from bert_mgpu.configs import base as config_lib
from bert_mgpu.model import heads, modeling
from bert_mgpu.metrics import classification as metrics_lib, collapse
from bert_mgpu.data import features as features_lib
from bert_mgpu.data.features import FILE_BATCH_WEIGHT

Tensors = Dict[str, tf.Tensor]


@runtime_checkable
class Task(Protocol):
    """What the trainer needs of a task. Every method may be traced several times in one graph
    (once per tower); none creates variables, sets devices or reads flags."""

    def named_variables(self) -> Dict[str, tf.Variable]:
        """Google's variable name -> variable, every variable the task trains or restores."""

    def context(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Normalisers of a global batch: float32 scalars, additive (a multi-worker job sums
        them over the workers before any tower runs)."""

    def tower_loss(self, features: Mapping[str, tf.Tensor], context: Tensors,
                   training: bool = True) -> Dict:
        """One slice's share of the global loss.

        Returns:
          dict: `loss`, a float32 scalar such that the sum over the slices of a global batch is
          the global batch's loss; `sums`, additive float32 statistics for `metrics`.
        """

    def metrics(self, sums: Tensors, context: Tensors) -> Tensors:
        """What the training log shows for a global batch (at least `loss`), from the summed
        `sums` of its slices."""

    def eval_sums(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Additive statistics of one evaluation batch (no dropout)."""

    def eval_metrics(self, sums: Mapping[str, np.ndarray]) -> Dict[str, float]:
        """The evaluation results (what eval_results.txt holds) from summed `eval_sums`."""

    def predict(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Named outputs of one batch, each with the batch as its first dimension."""


class _MeanOverExamples:
    """For tasks whose loss is the mean over the global batch's examples of a per-example loss
    (`per_example_loss(features, training)`, float32 [B]): each slice returns its sum divided
    by the global example count."""

    @staticmethod
    def context(features) -> Tensors:
        return {"num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def tower_loss(self, features, context, training=True) -> Dict:
        loss_sum = tf.reduce_sum(self.per_example_loss(features, training))
        return {"loss": loss_sum / context["num_examples"], "sums": {"loss_sum": loss_sum}}

    @staticmethod
    def metrics(sums, context) -> Tensors:
        return {"loss": sums["loss_sum"] / context["num_examples"]}


def _ratio(a, b) -> float:
    return float(a) / float(b) if float(b) else 0.0


class BertPretrainer(tf.Module):
    """Google's pretraining model: `BertModel` + masked LM + next sentence.

    The masked-LM loss of the global batch is divided by the global sum of `masked_lm_weights`
    (+1e-5, Google's epsilon), the next-sentence loss by the global number of examples.

    With `next_sentence=False` (masked-LM-only data: `create_pretraining_data.py
    --no_next_sentence` or `--pack_sequences`, as Cramming and RoBERTa train) there is no
    next-sentence head, no `cls/seq_relationship` variables, and the loss is the masked-LM loss;
    `next_sentence_labels` is then ignored. ALBERT's sentence-order prediction is trained by the
    next-sentence head unchanged (same variables, label 1 = swapped).
    """

    def __init__(self, config, compute_dtype=tf.float32, next_sentence=True):
        super().__init__(name=None)
        self.config = config
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.masked_lm = heads.MaskedLMHead(config)
        self.next_sentence = heads.NextSentenceHead(config) if next_sentence else None

    def named_variables(self):
        parts = [self.masked_lm] + ([self.next_sentence] if self.next_sentence else [])
        return modeling.merge_named_variables(self.bert, *parts)

    @staticmethod
    def context(features) -> Tensors:
        return {
            "masked_lm_weight_sum": tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                                          tf.float32)),
            "num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32),
        }

    def _forward(self, features, training):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        mlm = self.masked_lm(out.sequence_output, out.embedding_table,
                             features["masked_lm_positions"], features["masked_lm_ids"],
                             features["masked_lm_weights"])
        if self.next_sentence is None:
            return mlm, None
        return mlm, self.next_sentence(out.pooled_output, features["next_sentence_labels"])

    def tower_loss(self, features, context, training=True) -> Dict:
        mlm, nsp = self._forward(features, training)
        loss = mlm["numerator"] / (context["masked_lm_weight_sum"]
                                   + heads.MASKED_LM_DENOMINATOR_EPSILON)
        sums = {"masked_lm_numerator": mlm["numerator"]}
        if nsp is not None:
            nsp_sum = tf.reduce_sum(nsp["per_example_loss"])
            loss += nsp_sum / context["num_examples"]
            sums["next_sentence_loss_sum"] = nsp_sum
        return {"loss": loss, "sums": sums}

    @staticmethod
    def metrics(sums, context) -> Tensors:
        mlm = sums["masked_lm_numerator"] / (context["masked_lm_weight_sum"]
                                             + heads.MASKED_LM_DENOMINATOR_EPSILON)
        if "next_sentence_loss_sum" not in sums:
            return {"loss": mlm, "masked_lm_loss": mlm}
        nsp = sums["next_sentence_loss_sum"] / context["num_examples"]
        return {"loss": mlm + nsp, "masked_lm_loss": mlm, "next_sentence_loss": nsp}

    def eval_sums(self, features) -> Tensors:
        mlm, nsp = self._forward(features, training=False)
        weights = tf.reshape(tf.cast(features["masked_lm_weights"], tf.float32), [-1])
        mlm_pred = tf.argmax(mlm["log_probs"], axis=-1, output_type=tf.int32)
        mlm_correct = tf.cast(tf.equal(mlm_pred, tf.reshape(features["masked_lm_ids"], [-1])),
                              tf.float32)
        sums = {
            "masked_lm_weighted_loss": tf.reduce_sum(weights * mlm["per_example_loss"]),
            "masked_lm_weighted_correct": tf.reduce_sum(weights * mlm_correct),
            "masked_lm_weight": tf.reduce_sum(weights),
            "batch_loss_sum": mlm["loss"],
            "num_batches": tf.constant(1.0),
        }
        if nsp is None:
            return sums
        nsp_labels = tf.reshape(features["next_sentence_labels"], [-1])
        nsp_pred = tf.argmax(nsp["log_probs"], axis=-1, output_type=tf.int32)
        sums.update(
            next_sentence_loss_sum=tf.reduce_sum(nsp["per_example_loss"]),
            next_sentence_correct=tf.reduce_sum(
                tf.cast(tf.equal(nsp_pred, nsp_labels), tf.float32)),
            num_examples=tf.cast(tf.shape(nsp_labels)[0], tf.float32),
            batch_loss_sum=mlm["loss"] + nsp["loss"])
        return sums

    @staticmethod
    def eval_metrics(sums) -> Dict[str, float]:
        """Google's eval keys (tf.metrics semantics); without the next-sentence head, no
        `next_sentence_*` keys."""
        result = {
            "masked_lm_accuracy": _ratio(sums["masked_lm_weighted_correct"],
                                         sums["masked_lm_weight"]),
            "masked_lm_loss": _ratio(sums["masked_lm_weighted_loss"], sums["masked_lm_weight"]),
            # The Estimator's `loss`: the mean over eval batches of each batch's total loss.
            "loss": _ratio(sums["batch_loss_sum"], sums["num_batches"]),
        }
        if "next_sentence_correct" in sums:
            result.update(
                next_sentence_accuracy=_ratio(sums["next_sentence_correct"],
                                              sums["num_examples"]),
                next_sentence_loss=_ratio(sums["next_sentence_loss_sum"],
                                          sums["num_examples"]))
        return result

    def predict(self, features) -> Tensors:
        """`masked_lm_predictions` int32 [B, P] (the most likely id at each masked position)
        and, with the next-sentence head, `next_sentence_probabilities` float32 [B, 2]."""
        mlm, nsp = self._forward(features, training=False)
        shape = tf.shape(features["masked_lm_positions"])
        out = {"masked_lm_predictions": tf.reshape(
            tf.argmax(mlm["log_probs"], axis=-1, output_type=tf.int32), shape)}
        if nsp is not None:
            out["next_sentence_probabilities"] = tf.exp(nsp["log_probs"])
        return out


def _inference_options(training: bool, classifier_input: str) -> Dict[str, bool]:
    """`BertModel` keyword arguments of a sequence-level head's call: for eval and predict
    (never traced under XLA here), the dense layers skip the padding and, when the head reads
    the [CLS] vector only, the last layer runs for [CLS] only; the same outputs to float
    rounding (modeling's tests) for less work. Training keeps the [batch, length] layout, in
    which the position-keyed dropout masks are drawn."""
    if training:
        return {}
    return {"drop_padding": True, "first_token_only": classifier_input in ("pooled", "cls")}


class BertClassifier(_MeanOverExamples, tf.Module):
    """Google's `run_classifier` model: `BertModel` + `ClassifierHead`; the loss of a global
    batch is the mean cross-entropy over its examples. `classifier_input` chooses what the head
    reads (heads.classifier_features; "pooled" is Google's). `encoder` and `scope` make one task
    of a multi-task model (`MultiTaskClassifier`): a shared `BertModel`, the head under
    `scope/`."""

    def __init__(self, config, num_labels, compute_dtype=tf.float32,
                 label_names: Optional[Sequence[str]] = None, classifier_input: str = "pooled",
                 encoder: Optional[modeling.BertModel] = None, scope: str = ""):
        super().__init__(name=None)
        self.config = config
        self.num_labels = num_labels
        self.label_names = [str(n) for n in label_names] if label_names is not None else \
            [str(i) for i in range(num_labels)]
        if len(self.label_names) != num_labels:
            raise ValueError(f"{len(self.label_names)} label names for {num_labels} labels")
        self.bert = encoder if encoder is not None else modeling.BertModel(
            config, compute_dtype=compute_dtype)
        self.classifier_input = classifier_input
        self.classifier = heads.ClassifierHead(
            config, num_labels, scope=scope,
            input_width=heads.classifier_input_width(config, classifier_input))

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.classifier)

    def _forward(self, features, training):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training, **_inference_options(training, self.classifier_input))
        head_input = heads.classifier_features(out, features["input_mask"],
                                               self.classifier_input)
        return self.classifier(head_input, features.get("label_ids"), training=training)

    def per_example_loss(self, features, training) -> tf.Tensor:
        return self._forward(features, training)["per_example_loss"]

    def eval_sums(self, features) -> Tensors:
        """Losses, and the confusion matrix [num_labels (true), num_labels (predicted)]."""
        out = self._forward(features, training=False)
        labels = tf.reshape(features["label_ids"], [-1])
        predictions = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
        return {
            "loss_sum": tf.reduce_sum(out["per_example_loss"]),
            "num_examples": tf.cast(tf.shape(labels)[0], tf.float32),
            **_estimator_loss_sums(out["per_example_loss"], features),
            "confusion": tf.math.confusion_matrix(labels, predictions, self.num_labels,
                                                  dtype=tf.float32),
        }

    def eval_metrics(self, sums) -> Dict[str, float]:
        """Google's keys (`eval_accuracy`, `eval_loss`, `loss`) plus macro-F1, per-class
        precision/recall/F1 (`<metric>_<label name>`) and `eval_predicted_classes`
        (metrics/collapse.py)."""
        confusion = np.asarray(sums["confusion"], np.float64)
        n = float(sums["num_examples"])
        result = {
            "eval_accuracy": _ratio(np.trace(confusion), n),
            "eval_loss": _ratio(sums["loss_sum"], n),
            # The Estimator's `loss`: the mean over eval batches of each batch's mean loss.
            "loss": _ratio(sums["batch_loss_sum"], sums["num_batches"]),
        }
        f1s = []
        for i, name in enumerate(self.label_names):
            tp = confusion[i, i]
            precision = _ratio(tp, confusion[:, i].sum())
            recall = _ratio(tp, confusion[i, :].sum())
            f1 = _ratio(2 * precision * recall, precision + recall)
            result.update({f"eval_precision_{name}": precision, f"eval_recall_{name}": recall,
                           f"eval_f1_{name}": f1})
            f1s.append(f1)
        result["eval_f1_macro"] = float(np.mean(f1s)) if f1s else 0.0
        result.update(collapse.classification_keys(confusion))
        return result

    def predict(self, features) -> Tensors:
        """`probabilities` float32 [B, num_labels] (no dropout)."""
        return {"probabilities": self._forward(features, training=False)["probabilities"]}


def _estimator_loss_sums(per_example_loss, features) -> Tensors:
    """The sums of the Estimator's eval `loss`: the mean over the file's eval batches of each
    batch's mean loss. Batches sorted by length are not the file's: their examples carry
    1 / (the size of their batch in the file) (`input_pipeline.FILE_BATCH_WEIGHT`), whose
    weighted sum over all batches is the file batches' mean losses summed, and whose sum is
    their number.

    Args:
      per_example_loss: float32 Tensor [B].
      features: the batch, with or without `FILE_BATCH_WEIGHT` float32 [B].
    """
    weights = features.get(FILE_BATCH_WEIGHT)
    if weights is None:
        return {"batch_loss_sum": tf.reduce_mean(per_example_loss),
                "num_batches": tf.constant(1.0)}
    weights = tf.cast(tf.reshape(weights, [-1]), per_example_loss.dtype)
    return {"batch_loss_sum": tf.reduce_sum(weights * per_example_loss),
            "num_batches": tf.reduce_sum(weights)}


class SquadTask(_MeanOverExamples, tf.Module):
    """Google's `run_squad` model: `BertModel` + `SpanHead` on the sequence output.

    The loss of a global batch is Google's `(mean start cross-entropy + mean end cross-entropy)
    / 2` over its features (windows), so a slice returns the sum of its features' losses divided
    by the global number of features. `predict` gives what Google's `model_fn` predicts, and
    what post-processing (squad_metrics.write_predictions) and a serving signature need:
    `unique_ids`, `start_logits`, `end_logits`.
    """

    def __init__(self, config, compute_dtype=tf.float32):
        super().__init__(name=None)
        self.config = config
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.span = heads.SpanHead(config)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.span)

    def _forward(self, features, training, with_positions=True):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        if not with_positions:
            return self.span(out.sequence_output)
        return self.span(out.sequence_output, features["start_positions"],
                         features["end_positions"])

    def per_example_loss(self, features, training) -> tf.Tensor:
        return self._forward(features, training)["per_example_loss"]

    def eval_sums(self, features) -> Tensors:
        """On training-format records (with positions): the loss and how often the most
        likely start/end is the labelled one."""
        out = self._forward(features, training=False)
        sums = {"loss_sum": tf.reduce_sum(out["per_example_loss"]),
                "num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}
        for name in ("start", "end"):
            predicted = tf.argmax(out[f"{name}_logits"], axis=-1, output_type=tf.int32)
            labels = tf.reshape(features[f"{name}_positions"], [-1])
            sums[f"{name}_correct"] = tf.reduce_sum(
                tf.cast(tf.equal(predicted, labels), tf.float32))
        return sums

    @staticmethod
    def eval_metrics(sums) -> Dict[str, float]:
        """`loss` (mean over features), `start_accuracy`, `end_accuracy`. The SQuAD scores
        (EM/F1) come from the predictions' text: squad_metrics.evaluate."""
        n = sums["num_examples"]
        return {"loss": _ratio(sums["loss_sum"], n),
                "start_accuracy": _ratio(sums["start_correct"], n),
                "end_accuracy": _ratio(sums["end_correct"], n)}

    def predict(self, features) -> Tensors:
        """`unique_ids` int32 [B], `start_logits` and `end_logits` float32 [B, S] (no dropout).
        A serving signature (question + context as text) would run this on the tokenized
        window and post-process with squad_metrics."""
        out = self._forward(features, training=False, with_positions=False)
        return {"unique_ids": tf.reshape(features["unique_ids"], [-1]),
                "start_logits": out["start_logits"], "end_logits": out["end_logits"]}

class _LinearHeadTask(_MeanOverExamples, tf.Module):
    """`BertModel` + the classifier's output layer (Google's `output_weights` [num_outputs, W],
    `output_bias`) without the softmax; the loss of a global batch is the mean over its
    examples of a per-example loss (`_per_example_loss`)."""

    def __init__(self, config, num_outputs, compute_dtype=tf.float32,
                 classifier_input: str = "pooled", encoder: Optional[modeling.BertModel] = None,
                 scope: str = ""):
        super().__init__(name=None)
        self.config = config
        self.classifier_input = classifier_input
        self.bert = encoder if encoder is not None else modeling.BertModel(
            config, compute_dtype=compute_dtype)
        self.classifier = heads.ClassifierHead(
            config, num_outputs, scope=scope,
            input_width=heads.classifier_input_width(config, classifier_input))

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.classifier)

    def _logits(self, features, training) -> tf.Tensor:
        """float32 [B, num_outputs]."""
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training, **_inference_options(training, self.classifier_input))
        return self.classifier.logits(
            heads.classifier_features(out, features["input_mask"], self.classifier_input),
            training=training)

    def _per_example_loss(self, logits, label_values) -> tf.Tensor:
        raise NotImplementedError()

    def per_example_loss(self, features, training) -> tf.Tensor:
        return self._per_example_loss(self._logits(features, training), features["label_values"])

    def _loss_sums(self, per_example_loss, features) -> Tensors:
        return {
            "loss_sum": tf.reduce_sum(per_example_loss),
            "num_examples": tf.cast(tf.shape(per_example_loss)[0], tf.float32),
            **_estimator_loss_sums(per_example_loss, features),
        }

    @staticmethod
    def _loss_metrics(sums) -> Dict[str, float]:
        return {"eval_loss": _ratio(sums["loss_sum"], sums["num_examples"]),
                # The Estimator's `loss`: the mean over eval batches of each batch's mean loss.
                "loss": _ratio(sums["batch_loss_sum"], sums["num_batches"])}


class BertRegressor(_LinearHeadTask):
    """`--task_type=regression` (STS-B style): one output (`output_weights` [1, W]) read as
    the score; the loss is the mean squared error over the global batch.

    Evaluation: `eval_sums` are additive (squared errors and the float64 moments that give
    Pearson's r); Spearman's rho needs the ranks of the whole dev set, so it comes from
    `prediction_metrics` on the collected `predict` outputs (the job runs both over the dev
    set: jobs.FullEvaluation).
    """

    def __init__(self, config, compute_dtype=tf.float32, classifier_input: str = "pooled",
                 encoder: Optional[modeling.BertModel] = None, scope: str = ""):
        super().__init__(config, 1, compute_dtype, classifier_input, encoder, scope)

    def _per_example_loss(self, logits, label_values):
        return tf.square(logits[:, 0] - tf.cast(label_values[:, 0], tf.float32))

    def eval_sums(self, features) -> Tensors:
        scores = self._logits(features, training=False)[:, 0]
        labels = tf.cast(features["label_values"][:, 0], tf.float32)
        sums = self._loss_sums(tf.square(scores - labels), features)
        # float64: the moments of a large dev set lose the correlation to cancellation in float32.
        x, y = tf.cast(scores, tf.float64), tf.cast(labels, tf.float64)
        sums.update(sum_x=tf.reduce_sum(x), sum_y=tf.reduce_sum(y),
                    sum_xx=tf.reduce_sum(x * x), sum_yy=tf.reduce_sum(y * y),
                    sum_xy=tf.reduce_sum(x * y))
        return sums

    def eval_metrics(self, sums) -> Dict[str, float]:
        """`eval_mse` (= `eval_loss`), `loss`, `eval_pearson`, and the spreads
        `eval_prediction_std`, `eval_label_std` (metrics/collapse.py)."""
        result = self._loss_metrics(sums)
        result["eval_mse"] = result["eval_loss"]
        result["eval_pearson"] = metrics_lib.pearson_from_moments(
            sums["num_examples"], sums["sum_x"], sums["sum_y"], sums["sum_xx"], sums["sum_yy"],
            sums["sum_xy"])
        result.update(collapse.regression_keys(sums["num_examples"], sums["sum_x"],
                                               sums["sum_xx"], sums["sum_y"], sums["sum_yy"]))
        return result

    @staticmethod
    def prediction_metrics(outputs: Mapping[str, np.ndarray]) -> Dict[str, float]:
        """`eval_spearman` (and `eval_pearson`, the same as from the moments) from `predict`
        over the whole dev set."""
        scores, labels = outputs["predictions"], outputs["label_values"]
        return {"eval_spearman": metrics_lib.spearman(scores, labels),
                "eval_pearson": metrics_lib.pearson(scores, labels)}

    def predict(self, features) -> Tensors:
        """`predictions` float32 [B] (the scores) and, when the features have them, the
        records' `label_values` [B] (0 for unlabelled test examples), for
        `prediction_metrics`."""
        out = {"predictions": self._logits(features, training=False)[:, 0]}
        if "label_values" in features:
            out["label_values"] = tf.cast(features["label_values"][:, 0], tf.float32)
        return out


class BertMultiLabelClassifier(_LinearHeadTask):
    """`--task_type=multilabel`: one sigmoid per label (`output_weights` [num_labels, W]); the
    loss is the binary cross-entropy averaged over the labels and the examples of the global
    batch. A label is predicted when its probability is above `threshold`. Every evaluation
    statistic is an additive count, so the dev set is evaluated in one pass."""

    def __init__(self, config, num_labels, compute_dtype=tf.float32,
                 label_names: Optional[Sequence[str]] = None, threshold: float = 0.5,
                 classifier_input: str = "pooled", encoder: Optional[modeling.BertModel] = None,
                 scope: str = ""):
        super().__init__(config, num_labels, compute_dtype, classifier_input, encoder, scope)
        self.num_labels = num_labels
        self.threshold = threshold
        self.label_names = [str(n) for n in label_names] if label_names is not None else \
            [str(i) for i in range(num_labels)]
        if len(self.label_names) != num_labels:
            raise ValueError(f"{len(self.label_names)} label names for {num_labels} labels")

    def _per_example_loss(self, logits, label_values):
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(label_values, tf.float32), logits=logits), axis=-1)

    def eval_sums(self, features) -> Tensors:
        """Losses, per-label true/false positives and false negatives [num_labels], and the
        number of examples whose whole label set is predicted right."""
        logits = self._logits(features, training=False)
        truth = features["label_values"] > 0.5  # bool [B, L]
        predicted = tf.sigmoid(logits) > self.threshold
        sums = self._loss_sums(self._per_example_loss(logits, features["label_values"]),
                               features)

        def count(mask, axis=0):
            return tf.reduce_sum(tf.cast(mask, tf.float32), axis=axis)

        sums.update(
            true_positives=count(predicted & truth),
            false_positives=count(predicted & ~truth),
            false_negatives=count(~predicted & truth),
            exact_matches=count(tf.reduce_all(tf.equal(predicted, truth), axis=-1), None))
        return sums

    def eval_metrics(self, sums) -> Dict[str, float]:
        """`eval_f1_micro`, `eval_f1_macro`, `eval_exact_match` (metrics.py's definitions),
        `eval_loss`, `loss`, each label's `eval_f1_<name>`, `eval_predicted_labels` and
        `eval_constant_predictions` (metrics/collapse.py)."""
        tp, fp, fn = (np.asarray(sums[k], np.float64) for k in
                      ("true_positives", "false_positives", "false_negatives"))
        result = self._loss_metrics(sums)
        result.update(metrics_lib.multilabel_metrics_from_counts(
            tp, fp, fn, sums["exact_matches"], sums["num_examples"]))
        for name, f1 in zip(self.label_names, metrics_lib.per_label_f1(tp, fp, fn)):
            result[f"eval_f1_{name}"] = float(f1)
        result.update(collapse.multilabel_keys(tp + fp, sums["num_examples"]))
        return result

    def predict(self, features) -> Tensors:
        """`probabilities` float32 [B, num_labels] (the sigmoids)."""
        return {"probabilities": tf.sigmoid(self._logits(features, training=False))}


# ---------------------------------------------------------------------------------------------
# Multi-task fine-tuning (run_classifier_mgpu.py with several --task_name)

class MultiTaskClassifier(tf.Module):
    """Several classifier tasks on one encoder: `tasks[i]` (a `BertClassifier`, `BertRegressor`
    or `BertMultiLabelClassifier` built with `encoder=` this model's `bert` and
    `scope=head_scope(labels[i])`) owns the head `task_<label>/output_weights`,
    `task_<label>/output_bias`; the `bert/` variables exist once.

    Training batches come from one task each (data/multitask.py): the union of the tasks'
    features (`label_ids` [B, 1] and/or `label_values` [B, W], zero-padded to the widest task)
    plus `task_id` int32 [B]. The trainer asks `route(features)` (eagerly) whose batch it is and
    traces one update per task with `routes[i]`, that task's loss alone, so the other heads get
    no gradient (None, not zeros): the optimizer leaves them and their Adam slots untouched, as
    Google's AdamWeightDecay skips a variable without a gradient (a zero gradient would still
    move a head by its momentum and weight decay). Evaluation and prediction run one task at a
    time on its own records (`training.Trainer.with_task(tasks[i])`).
    """

    def __init__(self, encoder: modeling.BertModel, tasks_by_label: Mapping[str, tf.Module]):
        super().__init__(name=None)
        self.bert = encoder
        self.labels = list(tasks_by_label)
        self.tasks = list(tasks_by_label.values())
        if any(task.bert is not encoder for task in self.tasks):
            raise ValueError("every task of a MultiTaskClassifier must share its encoder")
        self.routes = [_OneTaskOfBatch(task) for task in self.tasks]

    @staticmethod
    def head_scope(label: str) -> str:
        """The variable scope of a task's head."""
        return config_lib.head_scope(label)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, *(t.classifier for t in self.tasks))

    def route(self, features: Mapping[str, tf.Tensor]) -> int:
        """The index of the task of a global batch (eager: it selects the traced update).

        Raises:
          ValueError: the batch mixes tasks (its rows were re-cut: see data/multitask.py).
        """
        ids = np.unique(features[features_lib.TASK_ID].numpy())
        if len(ids) != 1:
            raise ValueError(f"a multi-task training batch mixes tasks {ids.tolist()}: each "
                             f"batch must be one task's (a rerun with another global batch "
                             f"cannot re-cut them; rerun with the same --train_batch_size, "
                             f"--n_gpus and --num_accumulation_steps)")
        return int(ids[0])

    def _one_task_at_a_time(self, features):
        raise TypeError("a multi-task model is evaluated and predicted one task at a time: "
                        "Trainer.with_task(model.tasks[i])")

    eval_sums = predict = _one_task_at_a_time


class _OneTaskOfBatch:
    """A task's training contract (`context`, `tower_loss`, `metrics`) on multi-task batches:
    the task sees the inputs and its own label feature, cut to its width."""

    def __init__(self, task):
        self.task = task
        if isinstance(task, BertClassifier):
            self.label_feature, self.width = "label_ids", 1
        else:
            self.label_feature, self.width = "label_values", task.classifier.num_labels

    def _own(self, features) -> Tensors:
        own = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
        own[self.label_feature] = features[self.label_feature][:, :self.width]
        return own

    def context(self, features) -> Tensors:
        return self.task.context(self._own(features))

    def tower_loss(self, features, context, training=True) -> Dict:
        return self.task.tower_loss(self._own(features), context, training)

    def metrics(self, sums, context) -> Tensors:
        return self.task.metrics(sums, context)


# ---------------------------------------------------------------------------------------------
# run_ner.py

class TaggingTask(tf.Module):
    """Token classification (run_ner.py): `BertModel` + `TokenTaggingHead`.

    Records (data/ner_data.py) carry `label_ids` and `label_weights` [B, S]: weight 1.0 on the
    first piece of each word a window labels, 0.0 elsewhere. The loss of a global batch is the
    weighted token cross-entropy divided by the *global* sum of `label_weights` (the labelled
    words of the whole batch), so N towers equal one device; the labels of unweighted positions
    never reach the loss. A global batch without a labelled word has loss 0 (the sum is taken
    as at least 1: weights are 0/1, so this is exact whenever a word is labelled).
    """

    def __init__(self, config, num_tags, compute_dtype=tf.float32,
                 tag_names: Optional[Sequence[str]] = None, dropout_prob=None):
        super().__init__(name=None)
        self.config = config
        self.num_tags = num_tags
        self.tag_names = [str(n) for n in tag_names] if tag_names is not None else \
            [str(i) for i in range(num_tags)]
        if len(self.tag_names) != num_tags:
            raise ValueError(f"{len(self.tag_names)} tag names for {num_tags} tags")
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.tagger = heads.TokenTaggingHead(config, num_tags, dropout_prob=dropout_prob)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.tagger)

    def _forward(self, features, training):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        return self.tagger(out.sequence_output, features.get("label_ids"),
                           features.get("label_weights"), training=training)

    @staticmethod
    def context(features) -> Tensors:
        return {"label_weight_sum": tf.reduce_sum(tf.cast(features["label_weights"],
                                                          tf.float32))}

    @staticmethod
    def _denominator(context):
        return tf.maximum(context["label_weight_sum"], 1.0)

    def tower_loss(self, features, context, training=True) -> Dict:
        numerator = self._forward(features, training)["numerator"]
        return {"loss": numerator / self._denominator(context),
                "sums": {"loss_sum": numerator}}

    @classmethod
    def metrics(cls, sums, context) -> Tensors:
        return {"loss": sums["loss_sum"] / cls._denominator(context)}

    def eval_sums(self, features) -> Tensors:
        """Weighted loss and correct tags over the labelled positions (no dropout)."""
        out = self._forward(features, training=False)
        weights = tf.cast(features["label_weights"], tf.float32)
        predictions = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
        correct = tf.cast(tf.equal(predictions, features["label_ids"]), tf.float32)
        return {
            "loss_sum": out["numerator"],
            "label_weight": out["denominator"],
            "correct": tf.reduce_sum(weights * correct),
            "batch_loss_sum": out["numerator"] / tf.maximum(out["denominator"], 1.0),
            "num_batches": tf.constant(1.0),
            "predicted_tags": tf.reduce_sum(  # [num_tags]: labelled words predicted as each
                tf.one_hot(predictions, self.num_tags) * weights[..., None], axis=[0, 1]),
        }

    @staticmethod
    def eval_metrics(sums) -> Dict[str, float]:
        """`eval_loss` (mean over the labelled words), `eval_token_accuracy` (their tags; the
        job adds conlleval's entity scores and `eval_accuracy` from the words' tags) and `loss`
        (the mean over batches of each batch's loss, the Estimator's key), and
        `eval_predicted_tags` (metrics/collapse.py)."""
        return {
            "eval_loss": _ratio(sums["loss_sum"], sums["label_weight"]),
            "eval_token_accuracy": _ratio(sums["correct"], sums["label_weight"]),
            "loss": _ratio(sums["batch_loss_sum"], sums["num_batches"]),
            **collapse.tagging_keys(sums["predicted_tags"]),
        }

    def predict(self, features) -> Tensors:
        """`tag_ids` int32 [B, S]: the most likely tag at every position (no dropout); only a
        word's labelled position is read back (ner_data.predicted_tags)."""
        logits = self._forward(features, training=False)["logits"]
        return {"tag_ids": tf.argmax(logits, axis=-1, output_type=tf.int32)}
