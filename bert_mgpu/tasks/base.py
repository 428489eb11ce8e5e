"""The task contract between a job and the trainer, and what every task and job shares.

A task is a model (`BertModel` of model/modeling.py + heads from model/heads.py) seen from the
trainer. The trainer (engine/training.py) splits a global batch over towers, accumulation
micro-batches and workers, sums what the towers return and applies one update; it knows nothing
of BERT. For the split not to matter (N towers == one device on the same global batch), a task
never normalises by its own slice: `context` computes the normalisers of the *global* batch
once, and `tower_loss` returns the slice's share of the global loss, so the shares add up to the
global loss and their gradients add up to its gradient.

The engine declares what it calls (engine/contract.py: it cannot import this layer); `JobTask`
here adds what the jobs call, and `BertTask` gives the optional members their defaults, so
neither the engine nor a job probes a task for a member. What every job does around its task
(start-up, splits, trainer, training with its watch, evaluation input) is engine/job.py's.

Each job has its own module beside this one (pretraining, classifier, multitask, squad, ner,
features): its Task classes and its job function side by side.
"""

from typing import (
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    runtime_checkable,
)

import numpy as np
import tensorflow as tf

from bert_mgpu.data import input_pipeline
from bert_mgpu.data.features import FILE_BATCH_WEIGHT, WINDOW_WEIGHT
from bert_mgpu.engine import contract
from bert_mgpu.model import execution

Tensors = contract.Tensors


@runtime_checkable
class JobTask(contract.Task, Protocol):
    """What the trainer and the jobs need of a task: the engine's contract
    (engine/contract.py: the loss, evaluation and prediction, `routes`/`route`) plus what the
    jobs' evaluation calls. `BertTask` gives every optional member its default."""

    def prediction_metrics(self, outputs: Mapping[str, np.ndarray]) -> Dict[str, float]:
        """Evaluation results that no additive sum gives (e.g. a rank correlation), from
        `predict`'s outputs over the whole dev set (`Trainer.predict`); {} for most tasks.
        Only called when `needs_predictions` is True (it costs a second pass over the dev
        set)."""

    # True when `prediction_metrics` gives results: the dev set is then also predicted.
    needs_predictions: bool


class BertTask:
    """The defaults of `JobTask`'s optional members, for tasks on BERT's features: one loss (no
    routes), no results from predictions, the sequence axis and padding of BERT's records
    ([B, L]). A task class derives from it (before `tf.Module`) and overrides what differs."""

    routes: Sequence[contract.TrainingLoss] = ()
    needs_predictions: bool = False

    def route(self, features: Mapping[str, tf.Tensor]) -> Optional[int]:
        """None: every batch trains the task's own loss."""
        del features
        return None

    def prediction_metrics(self, outputs: Mapping[str, np.ndarray]) -> Dict[str, float]:
        del outputs
        return {}

    def sequence_length(self, features: Mapping[str, tf.Tensor]):
        """BERT's records: the length of `input_ids` [B, L] (None without it; an int32 scalar
        Tensor when the trace leaves it unknown)."""
        if "input_ids" not in features:
            return None
        length = features["input_ids"].shape[1]
        return int(length) if length is not None else tf.shape(features["input_ids"])[1]

    def trim_padding(self, features: Mapping[str, tf.Tensor], multiple: int) -> Tensors:
        """BERT's records: `input_ids`, `input_mask`, `segment_ids` cut along their last axis
        to the longest `input_mask` (input_pipeline.trim_padding)."""
        return input_pipeline.trim_padding(features, multiple)



class MeanOverExamples(BertTask):
    """For tasks whose loss is the mean over the global batch's examples of a per-example loss
    (`per_example_loss(features, training)`, float32 [B]): each slice returns its sum divided
    by the global example count.

    Windowed records (--doc_stride: a batch with `window_weight` float32 [B, 1], 1 / the
    number of windows of the window's document) weight each example's loss by it and divide by
    the global sum of the weights, so a document counts once whatever its length; without
    that feature the loss is exactly the plain mean."""

    @staticmethod
    def context(features) -> Tensors:
        if WINDOW_WEIGHT in features:
            return {"window_weight_sum": tf.reduce_sum(features[WINDOW_WEIGHT])}
        return {"num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    @staticmethod
    def _normaliser(context) -> tf.Tensor:
        if "window_weight_sum" in context:
            return context["window_weight_sum"]
        return context["num_examples"]

    def tower_loss(self, features, context, training=True) -> Dict:
        per_example_loss = self.per_example_loss(features, training)
        if WINDOW_WEIGHT in features:
            per_example_loss = tf.reshape(features[WINDOW_WEIGHT], [-1]) * per_example_loss
        loss_sum = tf.reduce_sum(per_example_loss)
        return {"loss": loss_sum / self._normaliser(context), "sums": {"loss_sum": loss_sum}}

    @classmethod
    def metrics(cls, sums, context) -> Tensors:
        return {"loss": sums["loss_sum"] / cls._normaliser(context)}


def ratio(a, b) -> float:
    return float(a) / float(b) if float(b) else 0.0


def class_names(names: Optional[Sequence], count: int, what: str) -> List[str]:
    """The names of a head's `count` outputs as strings (their indices when `names` is None),
    for metric keys and prediction files.

    Raises:
      ValueError: `names` has another length than `count`, saying `what` they name.
    """
    out = [str(n) for n in names] if names is not None else [str(i) for i in range(count)]
    if len(out) != count:
        raise ValueError(f"{len(out)} {what} names for {count} {what}s")
    return out


def inference_options(training: bool, classifier_input: str) -> Dict[str, bool]:
    """`BertModel` keyword arguments of a sequence-level head's call: for eval and predict
    (never traced under XLA here), the dense layers skip the padding and, when the head reads
    the [CLS] vector only, the last layer runs for [CLS] only; the same outputs to float
    rounding (modeling's tests) for less work. In training the heads read nothing else either:
    the trainer allows the same when it traces without XLA (`training_options`)."""
    first_token_only = classifier_input in ("pooled", "cls")
    if training:
        return training_options(first_token_only)
    return {"drop_padding": True, "first_token_only": first_token_only}


def training_options(first_token_only: bool = False) -> Dict[str, bool]:
    """`BertModel` keyword arguments of a training call whose loss reads nothing at the
    padding (or reads it masked): when the trainer traces without XLA
    (`execution.ExecutionContext.real_tokens`) the dense layers run on the real tokens only,
    dropout drawing the padded run's masks there, and with `first_token_only` (a loss that
    reads the last layer at [CLS] only, each example's sequence its own) the last layer runs
    for [CLS] only, dropout drawing the masks of that position: the update is the padded run's
    to float rounding."""
    real_tokens = execution.current().real_tokens
    return {"drop_padding": real_tokens, "first_token_only": first_token_only and real_tokens}


def estimator_loss_sums(per_example_loss, features) -> Tensors:
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


def pad_positions(values: tf.Tensor, length: int, value=0) -> tf.Tensor:
    """`values` [B, S'] of a batch cut to S' <= `length` positions (--pad_to_longest), padded
    back with `value` to the records' `length`, so the predictions of batches of any cut
    concatenate."""
    return tf.pad(values, [[0, 0], [0, length - tf.shape(values)[1]]], constant_values=value)
