"""run_classifier_mgpu.py / run_classifier.py with one task: Google's classifier and the
regression and multi-label heads, and the job that fine-tunes, evaluates and predicts with them
(files in data/classifier_data.py; several --task_name: multitask.py)."""

import os
from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.configs.classifier import TASK_TYPES, TaskType
from bert_mgpu.data import checks, classifier_data, processors, user_processors
from bert_mgpu.data.features import DOC_INDEX
from bert_mgpu.engine import checkpoint, training
from bert_mgpu.engine.job import (
    Job,
    eval_input,
    read_splits,
    start_job,
    train_watched,
    with_dropout_layout,
)
from bert_mgpu.metrics import classification as metrics_lib
from bert_mgpu.metrics import collapse
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import (
    JobTask,
    MeanOverExamples,
    Tensors,
    class_names,
    estimator_loss_sums,
    inference_options,
    ratio,
)

# A windowed record's label in `predict`'s outputs (--doc_stride), for the documents' metrics.
DOCUMENT_LABEL = "document_label"
# -log of a pooled probability is taken at least at this (a probability of exactly 0).
_TINY = np.finfo(np.float32).tiny


def _document_loss_sums(loss) -> Dict[str, float]:
    """`eval_sums`' loss statistics over documents (float64 [num_documents]): Google's `loss`
    (a mean of batch means) is then the mean over the documents, as `eval_loss`."""
    n = float(len(loss))
    return {"loss_sum": float(np.sum(loss)), "num_examples": n,
            "batch_loss_sum": float(np.mean(loss)) if n else 0.0, "num_batches": 1.0}


# --task_type -> its Task class. A class registers itself by declaring its `task_type` (one of
# configs/classifier.py's TASK_TYPES, which the classifier's entry of the task registry holds).
TASK_CLASSES: Dict[str, type] = {}


class _ClassifierTask(MeanOverExamples):
    """What the classifier tasks share for long documents (--doc_stride): their `predict`
    passes windowed records' `doc_index` and label through, and a document's prediction is its
    windows' `pooled_output` pooled on the host (`pool_documents`); its metrics are the task's
    `eval_metrics` over documents (`document_sums`: `eval_sums`' statistics from the pooled
    predictions, numpy)."""

    task_type: TaskType
    pooled_output: str = "probabilities"  # the `predict` output pooled over windows

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "task_type" in vars(cls):
            TASK_CLASSES[cls.task_type.name] = cls

    def _with_documents(self, out: Tensors, features) -> Tensors:
        if DOC_INDEX in features:
            out[DOC_INDEX] = features[DOC_INDEX][:, 0]
            out[DOCUMENT_LABEL] = features[self.task_type.label_feature]
        return out

    def pool_documents(self, outputs: Mapping[str, np.ndarray], num_documents: int,
                       pooling: str):
        """(pooled `pooled_output` [num_documents, ...], labels [num_documents, width]) from
        `predict`'s outputs over windowed records (any order)."""
        docs = outputs[DOC_INDEX]
        return (classifier_data.pool_windows(outputs[self.pooled_output], docs, num_documents,
                                             pooling),
                classifier_data.document_values(outputs[DOCUMENT_LABEL], docs, num_documents))

    def document_sums(self, pooled: np.ndarray, labels: np.ndarray) -> Dict:
        raise NotImplementedError()

    def document_metrics(self, pooled: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
        """The evaluation results of documents from their pooled predictions."""
        return self.eval_metrics(self.document_sums(pooled, labels))


class BertClassifier(_ClassifierTask, tf.Module):
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
        self.label_names = class_names(label_names, num_labels, "label")
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
                        training=training, **inference_options(training, self.classifier_input))
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
            **estimator_loss_sums(out["per_example_loss"], features),
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
            "eval_accuracy": ratio(np.trace(confusion), n),
            "eval_loss": ratio(sums["loss_sum"], n),
            # The Estimator's `loss`: the mean over eval batches of each batch's mean loss.
            "loss": ratio(sums["batch_loss_sum"], sums["num_batches"]),
        }
        f1s = []
        for i, name in enumerate(self.label_names):
            tp = confusion[i, i]
            precision = ratio(tp, confusion[:, i].sum())
            recall = ratio(tp, confusion[i, :].sum())
            f1 = ratio(2 * precision * recall, precision + recall)
            result.update({f"eval_precision_{name}": precision, f"eval_recall_{name}": recall,
                           f"eval_f1_{name}": f1})
            f1s.append(f1)
        result["eval_f1_macro"] = float(np.mean(f1s)) if f1s else 0.0
        result.update(collapse.classification_keys(confusion))
        return result

    def predict(self, features) -> Tensors:
        """`probabilities` float32 [B, num_labels] (no dropout); windowed records: also
        `doc_index` [B] and `document_label` [B, 1]."""
        return self._with_documents(
            {"probabilities": self._forward(features, training=False)["probabilities"]},
            features)

    def pool_documents(self, outputs, num_documents: int, pooling: str):
        """As `_ClassifierTask`'s, the pooled rows renormalised to sum to 1 (a max over
        windows does not): the argmax is unchanged, the rows stay probabilities."""
        pooled, labels = super().pool_documents(outputs, num_documents, pooling)
        return pooled / pooled.sum(axis=-1, keepdims=True), labels

    def document_sums(self, pooled, labels) -> Dict:
        """`eval_sums` of documents: the cross-entropy of the pooled probabilities and the
        confusion matrix of their argmax."""
        labels = np.asarray(labels).reshape(-1).astype(np.int64)
        truth = pooled[np.arange(len(labels)), labels]
        confusion = np.zeros([self.num_labels, self.num_labels])
        np.add.at(confusion, (labels, np.argmax(pooled, axis=-1)), 1.0)
        return dict(_document_loss_sums(-np.log(np.maximum(truth, _TINY))), confusion=confusion)

    task_type = TASK_TYPES["classification"]
    label_width = 1

    @classmethod
    def for_run(cls, cfg, config, labels: Sequence[str], **shared) -> "BertClassifier":
        """The task of a run's config `cfg` (a ClassifierConfig) with its `labels`."""
        del cfg  # Google's classifier has no option of its own
        return cls(config, len(labels), label_names=labels, **shared)

    def write_predictions(self, output_dir: str, outputs: Mapping[str, np.ndarray]) -> None:
        """test_results.tsv (the probabilities), predict.txt (the predicted label's index) and
        label_list.txt (which label each index is)."""
        classifier_data.write_predictions(output_dir, outputs["probabilities"], self.label_names)


class _LinearHeadTask(_ClassifierTask, tf.Module):
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
                        training=training, **inference_options(training, self.classifier_input))
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
            **estimator_loss_sums(per_example_loss, features),
        }

    @staticmethod
    def _loss_metrics(sums) -> Dict[str, float]:
        return {"eval_loss": ratio(sums["loss_sum"], sums["num_examples"]),
                # The Estimator's `loss`: the mean over eval batches of each batch's mean loss.
                "loss": ratio(sums["batch_loss_sum"], sums["num_batches"])}


class BertRegressor(_LinearHeadTask):
    """`--task_type=regression` (STS-B style): one output (`output_weights` [1, W]) read as
    the score; the loss is the mean squared error over the global batch.

    Evaluation: `eval_sums` are additive (squared errors and the float64 moments that give
    Pearson's r); Spearman's rho needs the ranks of the whole dev set, so it comes from
    `prediction_metrics` on the collected `predict` outputs (the job runs both over the dev
    set: FullEvaluation).
    """

    needs_predictions = True

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

    def prediction_metrics(self, outputs: Mapping[str, np.ndarray]) -> Dict[str, float]:
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
        return self._with_documents(out, features)

    task_type = TASK_TYPES["regression"]
    label_width = 1
    pooled_output = "predictions"

    def document_sums(self, pooled, labels) -> Dict:
        """`eval_sums` of documents: squared errors and moments of the pooled scores."""
        x = np.asarray(pooled, np.float64)
        y = np.asarray(labels, np.float64).reshape(-1)
        return dict(_document_loss_sums((x - y) ** 2), sum_x=x.sum(), sum_y=y.sum(),
                    sum_xx=(x * x).sum(), sum_yy=(y * y).sum(), sum_xy=(x * y).sum())

    def document_metrics(self, pooled, labels) -> Dict[str, float]:
        """`eval_metrics` and `prediction_metrics` (Spearman) of the documents' scores."""
        result = super().document_metrics(pooled, labels)
        result.update(self.prediction_metrics(
            {"predictions": pooled, "label_values": np.asarray(labels).reshape(-1)}))
        return result

    @classmethod
    def for_run(cls, cfg, config, labels: Sequence[str], **shared) -> "BertRegressor":
        """The task of a run's config `cfg` (a ClassifierConfig); a score has no labels."""
        del cfg, labels
        return cls(config, **shared)

    @staticmethod
    def write_predictions(output_dir: str, outputs: Mapping[str, np.ndarray]) -> None:
        """test_results.tsv and predict.txt: one predicted score per line."""
        classifier_data.write_regression_predictions(output_dir, outputs["predictions"])


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
        self.label_names = class_names(label_names, num_labels, "label")

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
        """`eval_f1_micro`, `eval_f1_macro`, `eval_exact_match` (metrics/classification.py's
        definitions), `eval_loss`, `loss`, each label's `eval_f1_<name>`,
        `eval_predicted_labels` and `eval_constant_predictions` (metrics/collapse.py)."""
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
        return self._with_documents(
            {"probabilities": tf.sigmoid(self._logits(features, training=False))}, features)

    task_type = TASK_TYPES["multilabel"]

    def document_sums(self, pooled, labels) -> Dict:
        """`eval_sums` of documents: the binary cross-entropy of the pooled probabilities
        (averaged over the labels) and the counts of their labels above the threshold."""
        truth = np.asarray(labels) > 0.5
        predicted = pooled > self.threshold
        loss = -np.where(truth, np.log(np.maximum(pooled, _TINY)),
                         np.log(np.maximum(1.0 - pooled, _TINY))).mean(axis=-1)
        return dict(_document_loss_sums(loss),
                    true_positives=(predicted & truth).sum(0).astype(np.float64),
                    false_positives=(predicted & ~truth).sum(0).astype(np.float64),
                    false_negatives=(~predicted & truth).sum(0).astype(np.float64),
                    exact_matches=float((predicted == truth).all(-1).sum()))

    @property
    def label_width(self) -> int:
        return self.num_labels

    @classmethod
    def for_run(cls, cfg, config, labels: Sequence[str], **shared) -> "BertMultiLabelClassifier":
        """The task of a run's config `cfg` (a ClassifierConfig) with its `labels`."""
        return cls(config, len(labels), label_names=labels, threshold=cfg.multilabel_threshold,
                   **shared)

    def write_predictions(self, output_dir: str, outputs: Mapping[str, np.ndarray]) -> None:
        """test_results.tsv (each label's probability) and predict.txt (the labels above the
        threshold, comma-separated)."""
        classifier_data.write_multilabel_predictions(output_dir, outputs["probabilities"],
                                                     self.label_names, self.threshold)


def start_classifier_job(cfg) -> Job:
    """`start_job` plus the check of --classifier_input against the model's depth."""
    job = start_job(cfg)
    if cfg.classifier_input == "cls_last4" and job.bert_config.num_hidden_layers < 4:
        raise ValueError(f"--classifier_input=cls_last4 needs at least 4 layers; "
                         f"--bert_config_file has {job.bert_config.num_hidden_layers}")
    return job


def run_classifier(cfg) -> dict:
    """Runs run_classifier_mgpu.py (and run_classifier.py) with a `configs/classifier.py`
    ClassifierConfig of one --task_name; returns the eval results (several --task_name:
    multitask.run_multitask_classifier).

    Follows Google's `run_classifier.py` and the multi-GPU fork (see data/classifier_data.py for
    the files, ClassifierConfig.train_config for the steps).
    """
    job = start_classifier_job(cfg)
    labels, data, splits = classifier_inputs(cfg, checks.tokenizer_for(cfg.model))
    train_file, num_train = splits.get("train", (None, 0))
    train_cfg = with_dropout_layout(cfg, cfg.train_config(num_train, job.num_workers),
                                     [train_file] if cfg.do_train else [])
    if cfg.do_train:
        logging.info("***** Running training: %d %s, %g epochs, %d steps *****", num_train,
                     f"windows of {data.num_documents('train')} documents" if cfg.doc_stride
                     else "examples", cfg.num_train_epochs, train_cfg.num_train_steps)
    # The effective task type and --best_metric (stsb and the task types set their defaults).
    job.save_effective_config(labels=labels, task_type=cfg.task_type,
                              best_metric=cfg.best_metric)
    task = classifier_task(cfg, job, labels)
    log_head_initialisation(cfg, task)
    trainer = job.trainer(task, train_cfg, job.layerwise_lr_multipliers(task))
    watch = train_watched(job, trainer,
                          lambda: job.training_input([train_file], data.shapes, train_cfg),
                          lambda: dev_results(cfg, trainer, data, splits["dev"][0]))
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        result = evaluate_classifier(cfg, trainer, data, *splits["dev"], check=watch.check)
    if job.chief and cfg.do_predict:
        job.weights_for_prediction(trainer, job.cfg.keep_best_checkpoint)
        predict_classifier(cfg, trainer, data, *splits["test"], task=task)
    job.print_summary(cfg.best_metric, result, job.export_command())
    return result


def classifier_inputs(cfg, tokenizer):
    """(labels, feature files, splits) of one classifier task (`cfg`: a single task's config):
    every input file the run needs is read and checked (and its features cached) before
    training starts; splits maps "train"/"dev"/"test" to (record file, number of examples)."""
    processor = user_processors.for_config(cfg)
    labels = classifier_data.run_labels(cfg, processor.get_labels(cfg.data_dir))
    if TASK_TYPES[cfg.task_type].label_encoding == "multi_hot" and not labels:
        raise processors.DataError(f"{cfg.data_dir}: no label in train.tsv's label column and "
                                   f"no --label_list (--task_type=multilabel)")
    data = classifier_data.FeatureFiles(cfg, processor, tokenizer, labels)
    splits = read_splits(cfg, data.get)
    return labels, data, splits


def log_head_initialisation(cfg, task) -> None:
    """States what --init_checkpoint gives the output layer(s) when it holds classifier heads
    under other names (a multi-task run's `task_<label>/` heads for a single task, or the
    reverse): the encoder is restored by name, those heads are not used, the run's own heads
    start from random initialisation."""
    if not cfg.model.init_checkpoint:
        return
    try:
        prefix = checkpoint.resolve_checkpoint_path(cfg.model.init_checkpoint)
    except (ValueError, OSError):
        return  # the trainer's initialisation names the problem
    in_checkpoint = {name for name, _ in tf.train.list_variables(prefix)}
    heads = sorted(n for n in in_checkpoint if n.endswith("output_weights") and
                   not n.startswith(("bert/", "cls/")))
    own = [n for n in task.named_variables() if n.endswith("output_weights")]
    if heads and not in_checkpoint.intersection(own):
        logging.info("--init_checkpoint %s has the classifier head(s) %s, not this run's %s: "
                     "the encoder (bert/) is initialised from it by name, its heads are not "
                     "used, and this run's output layer(s) start from random initialisation "
                     "(when training starts from it, not when resuming from --output_dir).",
                     prefix, ", ".join(heads), ", ".join(own))


def dev_results(cfg, trainer, data, eval_file, task=None) -> dict:
    """The results of a classifier task (`cfg`: its config; `task`: one task of a multi-task
    model, else the trained one) on its dev records, the metrics of its predictions included
    (FullEvaluation); with --doc_stride, of its documents (`document_results`)."""
    dataset = eval_input(cfg, [eval_file], data.shapes, cfg.eval_batch_size)
    if cfg.doc_stride:
        return document_results(trainer, trainer.task if task is None else task, dataset,
                                data.num_documents("dev"), cfg.window_pooling)
    return FullEvaluation(trainer, task).evaluate(dataset)


def document_results(trainer, task, dataset, num_documents: int, pooling: str) -> dict:
    """The evaluation results of windowed dev records (--doc_stride) per document: every
    window predicted, each document's windows pooled (`pooling`), the task's metrics of the
    documents' pooled predictions (`eval_loss`, and `loss`: the mean over documents of the
    pooled prediction's loss, e.g. the cross-entropy of the pooled probabilities)."""
    pooled, labels = task.pool_documents(trainer.predict(dataset, task=task), num_documents,
                                         pooling)
    result = task.document_metrics(pooled, labels)
    result["global_step"] = int(trainer.global_step.numpy())
    return result



def evaluate_classifier(cfg, trainer, data, eval_file, num_eval, write: bool = True,
                        task=None, check: Optional[Callable[[dict], dict]] = None) -> dict:
    """The dev set's results (`cfg`: a single task's config; `task`: as `dev_results`'), after
    `check` (e.g. CollapseWatch.check) when given; written to its output_dir's
    eval_results.txt unless `write` is False."""
    logging.info("***** Running evaluation: %d examples, batch size %d *****", num_eval,
                 cfg.eval_batch_size)
    result = dev_results(cfg, trainer, data, eval_file, task)
    if check is not None:
        result = check(result)
    result["eval_examples"] = num_eval
    if cfg.doc_stride:
        result.update(eval_examples=data.num_documents("dev"), eval_windows=num_eval)
    if write:
        tf.io.gfile.makedirs(cfg.output_dir)
        training.write_eval_results(os.path.join(cfg.output_dir, "eval_results.txt"), result)
    return result


def predict_classifier(cfg, trainer, data, predict_file, num_predict, task) -> None:
    """test_results.tsv and predict.txt of one task (`cfg`: its config; `task`: the trained one,
    or one task of a multi-task model, which writes its files) in its output_dir."""
    logging.info("***** Running prediction: %d examples, batch size %d *****", num_predict,
                 cfg.predict_batch_size)
    outputs = trainer.predict(eval_input(cfg, [predict_file], data.shapes,
                                         cfg.predict_batch_size), task=task)
    predicted = len(next(iter(outputs.values()))) if outputs else 0
    if predicted != num_predict:
        raise RuntimeError(f"predicted {predicted} of {num_predict} examples")
    if cfg.doc_stride:  # one line per document: its windows pooled
        num_predict = data.num_documents("test")
        pooled, _ = task.pool_documents(outputs, num_predict, cfg.window_pooling)
        outputs = {task.pooled_output: pooled}
    tf.io.gfile.makedirs(cfg.output_dir)
    task.write_predictions(cfg.output_dir, outputs)
    logging.info("Wrote %d predictions to %s (test_results.tsv, predict.txt)", num_predict,
                 cfg.output_dir)


def classifier_task(cfg, job: Job, labels: Sequence[str], encoder=None, scope: str = ""):
    """The task of --task_type (classification: Google's BertClassifier); `encoder` and
    `scope` make it one task of a multi-task model (MultiTaskClassifier)."""
    return TASK_CLASSES[cfg.task_type].for_run(
        cfg, job.bert_config, labels, compute_dtype=job.compute_dtype(),
        classifier_input=cfg.classifier_input, encoder=encoder, scope=scope)


class FullEvaluation:
    """The evaluation of a task with the trainer's weights: `Trainer.evaluate`'s additive
    metrics plus those the task computes from every prediction of the dataset
    (`task.prediction_metrics(trainer.predict(dataset))`, e.g. the regression task's Spearman,
    which no additive sum gives): a second pass over the dev set, on the chief, for the tasks
    that `needs_predictions`."""

    def __init__(self, trainer: training.Trainer, task: Optional[JobTask] = None):
        """`task`: one task of a multi-task model; by default the trained one."""
        self.trainer = trainer
        self.task = trainer.task if task is None else task

    def evaluate(self, dataset, max_steps: Optional[int] = None) -> dict:
        result = self.trainer.evaluate(dataset, max_steps, task=self.task)
        if self.task.needs_predictions and result:
            if max_steps is not None:
                dataset = dataset.take(max_steps)
            result.update(self.task.prediction_metrics(
                self.trainer.predict(dataset, task=self.task)))
        return result
