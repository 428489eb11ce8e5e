"""run_ner.py: token classification (a tagging head on every first WordPiece of a word) and its
job (CoNLL files in data/ner_data.py, conlleval's scores in metrics/ner.py)."""

import os
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.data import checks, input_pipeline, ner_data
from bert_mgpu.engine.job import Job, read_splits, start_job, train_watched, with_dropout_layout
from bert_mgpu.metrics import collapse
from bert_mgpu.metrics import ner as ner_metrics
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import (
    BertTask,
    Tensors,
    class_names,
    pad_positions,
    ratio,
    training_options,
)


class TaggingTask(BertTask, tf.Module):
    """Token classification (run_ner.py): `BertModel` + `TokenTaggingHead`.

    Records (data/ner_data.py) carry `label_ids` and `label_weights` [B, S]: weight 1.0 on the
    first piece of each word a window labels, 0.0 elsewhere. The loss of a global batch is the
    weighted token cross-entropy divided by the *global* sum of `label_weights` (the labelled
    words of the whole batch), so N towers equal one device; the labels of unweighted positions
    never reach the loss. A global batch without a labelled word has loss 0 (the sum is taken
    as at least 1: weights are 0/1, so this is exact whenever a word is labelled).

    Batches trimmed to their longest window (--pad_to_longest) cut the labels and weights with
    the inputs (`ner_data.SEQUENCE_FEATURES`); the padding carries no weight, so the loss and
    the scores are the padded batch's. `padded_length`: the records' length, which `predict`
    pads its outputs back to (so batches of any cut concatenate); None: left at the batch's.
    """

    def __init__(self, config, num_tags, compute_dtype=tf.float32,
                 tag_names: Optional[Sequence[str]] = None, dropout_prob=None,
                 padded_length: Optional[int] = None):
        super().__init__(name=None)
        self.config = config
        self.num_tags = num_tags
        self.padded_length = padded_length
        self.tag_names = class_names(tag_names, num_tags, "tag")
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.tagger = heads.TokenTaggingHead(config, num_tags, dropout_prob=dropout_prob)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.tagger)

    def _forward(self, features, training):
        # The tagger's loss weighs the padding 0 (label_weights): training may skip it.
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training, **(training_options() if training else {}))
        return self.tagger(self.bert.token_head(out.sequence_output), features.get("label_ids"),
                           features.get("label_weights"), training=training)

    def trim_padding(self, features, multiple: int) -> Tensors:
        """The inputs, labels and label weights cut to the longest window (rounded up to
        `multiple`)."""
        return input_pipeline.trim_padding(features, multiple, ner_data.SEQUENCE_FEATURES)

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
            "eval_loss": ratio(sums["loss_sum"], sums["label_weight"]),
            "eval_token_accuracy": ratio(sums["correct"], sums["label_weight"]),
            "loss": ratio(sums["batch_loss_sum"], sums["num_batches"]),
            **collapse.tagging_keys(sums["predicted_tags"]),
        }

    def predict(self, features) -> Tensors:
        """`tag_ids` int32 [B, S]: the most likely tag at every position (no dropout); only a
        word's labelled position is read back (ner_data.predicted_tags). With `padded_length`,
        S is that length: the positions a trimmed batch has not are tag 0, never read."""
        logits = self._forward(features, training=False)["logits"]
        tag_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        if self.padded_length is not None:
            tag_ids = pad_positions(tag_ids, self.padded_length)
        return {"tag_ids": tag_ids}


def run_ner(cfg, tagger: Optional[Callable] = None) -> dict:
    """Runs run_ner.py with a configs/ner.py `NerConfig`; returns the eval results.

    CoNLL files -> windowed records with labels on each word's first piece (data/ner_data.py),
    `TaggingTask` on the shared trainer; evaluation adds conlleval's entity scores
    (metrics/ner.py) to the task's token metrics; prediction writes predictions.txt with every
    test token. With --pad_to_longest every batch (training, evaluation, prediction) is cut to
    its longest window; evaluation and prediction batches stay in file order (the Estimator's
    `loss`, a mean of the file's batch means, is then the padded run's).

    `tagger(job, data, train_cfg) -> (task, train_cfg, run_config extras)` makes the task
    (default: `TaggingTask` of the job's model config); distill.py's makes a student, which
    may change `job.bert_config` (the student's, written as bert_config.json) and the
    trainer's config.
    """
    job = start_job(cfg)
    data = ner_data.FeatureFiles(cfg, checks.tokenizer_for(cfg.model))
    # Every input file is read and checked (and its features cached) before training starts.
    splits = read_splits(cfg, data.get)
    num_train = splits["train"].num_records if cfg.do_train else 0
    train_cfg = with_dropout_layout(cfg, cfg.train_config(num_train, job.num_workers),
                                    [splits["train"].path] if cfg.do_train else [])
    if cfg.do_train:
        logging.info("***** Running training: %d windows, %g epochs, %d steps *****",
                     num_train, cfg.num_train_epochs, train_cfg.num_train_steps)
    task, train_cfg, extra = (tagger or _tagging_task)(job, data, train_cfg)
    job.save_effective_config(labels=data.labels, doc_stride=data.doc_stride, **extra)
    trainer = job.trainer(task, train_cfg, job.layerwise_lr_multipliers(task))
    watch = train_watched(
        job, trainer, lambda: job.training_input([splits["train"].path], data.shapes, train_cfg),
        lambda: _evaluate_ner(trainer, data, splits["dev"]))
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        logging.info("***** Running evaluation: %d sentences, %d windows, batch size %d *****",
                     len(splits["dev"].sentences), splits["dev"].num_records,
                     cfg.eval_batch_size)
        result = watch.check(_evaluate_ner(trainer, data, splits["dev"]))
        job.write_eval_results(result)
    if job.chief and cfg.do_predict:
        _predict_ner(job, trainer, data, splits["test"])
    job.print_summary(cfg.best_metric, result, None)
    return result



def _tagging_task(job: Job, data, train_cfg):
    """run_ner.py's task: Google's model of the job's config and the tagging head."""
    task = TaggingTask(job.bert_config, len(data.labels), compute_dtype=job.compute_dtype(),
                       tag_names=data.labels, padded_length=job.cfg.model.max_seq_length)
    return task, train_cfg, {}


def _evaluate_ner(trainer, data, dev) -> dict:
    """The dev set's results (eval_results.txt, and each evaluation during training, so
    --best_metric=eval_f1 works): the task's token metrics (`Trainer.evaluate`) plus
    conlleval's entity precision/recall/F1 and accuracy over the words' predicted tags, in the
    file's scheme."""
    dataset = input_pipeline.record_dataset([dev.path], data.shapes, data.cfg.eval_batch_size,
                                            is_training=False)
    result = trainer.evaluate(dataset)
    tags = _predicted_file_tags(trainer, data, dev, dataset)
    scores = ner_metrics.evaluate([s.tags for s in dev.sentences], tags)
    result.update(scores.as_metrics("eval_"))
    result.update(eval_sentences=len(dev.sentences), eval_windows=dev.num_records,
                  eval_tokens=scores.tokens)
    logging.info("conlleval on the dev set:\n%s", scores.report())
    return result


def _predicted_file_tags(trainer, data, split, dataset):
    """Per sentence, per word: the predicted tag, in the split file's scheme."""
    tag_ids = trainer.predict(dataset).get("tag_ids", np.zeros([0, 0], np.int32))
    if len(tag_ids) != split.num_records:
        raise RuntimeError(f"predicted {len(tag_ids)} of {split.num_records} windows")
    return split.file_tags(ner_data.predicted_tags(split.model_sentences, split.windows,
                                                   tag_ids, data.labels))


def _predict_ner(job: Job, trainer, data, test) -> None:
    job.weights_for_prediction(trainer, job.cfg.keep_best_checkpoint)
    logging.info("***** Running prediction: %d sentences, %d windows, batch size %d *****",
                 len(test.sentences), test.num_records, job.cfg.predict_batch_size)
    tags = _predicted_file_tags(trainer, data, test, input_pipeline.record_dataset(
        [test.path], data.shapes, job.cfg.predict_batch_size, is_training=False))
    path = os.path.join(job.cfg.output_dir, "predictions.txt")
    ner_data.write_predictions(path, test.sentences, tags)
    missing = ner_data.words_without_pieces(test.model_sentences, test.windows)
    logging.info("Wrote %s: %d sentences, %d tokens (%d without a WordPiece, predicted O)",
                 path, len(test.sentences), sum(len(s.words) for s in test.sentences), missing)
