"""run_multiple_choice.py: BERT scoring each of an example's C choices (SWAG's CSV files,
data/multiple_choice_data.py), and its job.

Features: `input_ids`, `input_mask`, `segment_ids` int32 [B, C, L], one
`[CLS] context [SEP] choice [SEP]` sequence per choice, and `label_ids` int32 [B], the right
choice. The encoder reads the B * C sequences as one [B * C, L] batch; a one-output classifier
layer (Google's head, `heads.ClassifierHead` with one label: root-level `output_weights` [1, H]
and `output_bias` [1]; Hugging Face's `BertForMultipleChoice.classifier`) scores each pooled
output after dropout, and the loss is the cross-entropy over an example's C scores, averaged
over the global batch (`MeanOverExamples`).

Dropout: `sequence_length` is None, so the trainer lays no [B, L] layout over the masks; the
dropout stream then gives each example the draws of its position in the global batch for its
whole [C, L] block (the [B * C, ...] values are example-major), so towers, accumulation and
workers give the update of one device. The job therefore pads every choice to
--max_seq_length and never cuts a batch: a batch cut along L would draw other masks than the
padded one.
"""

import os
from typing import Dict, Mapping, NamedTuple, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.data import checks, classifier_data, input_pipeline
from bert_mgpu.data import multiple_choice_data as mc_data
from bert_mgpu.data.multiple_choice_data import CHOICE_FEATURES
from bert_mgpu.engine.job import Job, read_splits, start_job, train_watched
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import (
    MeanOverExamples,
    Tensors,
    estimator_loss_sums,
    inference_options,
    ratio,
    training_options,
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
        # Training on every choice's tokens: dropout lays each question's masks out over its
        # [C, L] block, which has no view of the choices' first positions alone.
        options = training_options() if training else inference_options(False, "pooled")
        out = self.bert(*flat, training=training, **options)
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

    @staticmethod
    def write_predictions(output_dir: str, outputs: Mapping[str, np.ndarray]) -> None:
        """test_results.tsv (one row of the C choices' probabilities per example) and
        predict.txt (the chosen index, one line per example), in file order, as the
        classifier writes them."""
        classifier_data.write_predictions(output_dir, outputs["probabilities"])


class SplitRecords(NamedTuple):
    """A split's records: `path` (a TFRecord file) and `num_examples`."""
    path: str
    num_examples: int


def _write_split(cfg, tokenizer, split: str) -> SplitRecords:
    """The records of `split`'s CSV, written to OUTPUT_DIR/<split>.tf_record (rewritten every
    run: the same bytes for the same files and flags)."""
    examples = mc_data.read_split(cfg.data_dir, split, cfg.num_choices)
    path = os.path.join(cfg.output_dir, f"{split}.tf_record")
    mc_data.write_features(examples, cfg.model.max_seq_length, tokenizer, path)
    return SplitRecords(path, len(examples))


def _batches(cfg, dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Parsed record batches with their [C, L] features restored ([B, C, L])."""
    return dataset.map(lambda features: mc_data.unflatten_choices(
        features, cfg.num_choices, cfg.model.max_seq_length))


def _file_batches(cfg, records: SplitRecords, batch_size: int) -> tf.data.Dataset:
    """Evaluation/prediction batches: every example once, in file order, fully padded."""
    shapes = mc_data.multiple_choice_shapes(cfg.num_choices, cfg.model.max_seq_length)
    return _batches(cfg, input_pipeline.record_dataset([records.path], shapes, batch_size,
                                                       is_training=False))


def run_multiple_choice(cfg) -> dict:
    """Runs run_multiple_choice.py with a configs/multiple_choice.py `MultipleChoiceConfig`;
    returns the eval results.

    SWAG's CSV -> [C, L] records (data/multiple_choice_data.py), `BertMultipleChoice` on the
    shared trainer (towers, accumulation, workers, resume); evaluation writes
    eval_results.txt (`eval_accuracy`, `eval_loss`, `loss`, `global_step`), prediction
    test_results.tsv and predict.txt. Every batch is padded to --max_seq_length.
    """
    job = start_job(cfg)
    tokenizer = checks.tokenizer_for(cfg.model)
    # Every CSV the run needs is read, checked and written as records before training starts.
    splits = read_splits(cfg, lambda split: _write_split(cfg, tokenizer, split))
    num_train = splits["train"].num_examples if cfg.do_train else 0
    train_cfg = cfg.train_config(num_train, job.num_workers)
    if cfg.do_train:
        logging.info("***** Running training: %d examples of %d choices, %g epochs, %d steps "
                     "*****", num_train, cfg.num_choices, cfg.num_train_epochs,
                     train_cfg.num_train_steps)
    job.save_effective_config()
    task = BertMultipleChoice(job.bert_config, cfg.num_choices,
                              compute_dtype=job.compute_dtype())
    trainer = job.trainer(task, train_cfg, job.layerwise_lr_multipliers(task))
    shapes = mc_data.multiple_choice_shapes(cfg.num_choices, cfg.model.max_seq_length)
    watch = train_watched(
        job, trainer,
        lambda: _batches(cfg, job.training_input([splits["train"].path], shapes, train_cfg)),
        lambda: trainer.evaluate(_file_batches(cfg, splits["dev"], cfg.eval_batch_size)))
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        logging.info("***** Running evaluation: %d examples, batch size %d *****",
                     splits["dev"].num_examples, cfg.eval_batch_size)
        result = watch.check(trainer.evaluate(
            _file_batches(cfg, splits["dev"], cfg.eval_batch_size)))
        job.write_eval_results(result)
    if job.chief and cfg.do_predict:
        _predict(job, trainer, splits["test"])
    job.print_summary(cfg.best_metric, result, job.export_command("multiple_choice"))
    return result


def _predict(job: Job, trainer, test: SplitRecords) -> None:
    cfg = job.cfg
    job.weights_for_prediction(trainer, cfg.keep_best_checkpoint)
    logging.info("***** Running prediction: %d examples, batch size %d *****",
                 test.num_examples, cfg.predict_batch_size)
    outputs = trainer.predict(_file_batches(cfg, test, cfg.predict_batch_size))
    if len(outputs["probabilities"]) != test.num_examples:
        raise RuntimeError(f"predicted {len(outputs['probabilities'])} of "
                           f"{test.num_examples} examples")
    BertMultipleChoice.write_predictions(cfg.output_dir, outputs)
    logging.info("Wrote test_results.tsv and predict.txt: %d examples", test.num_examples)
