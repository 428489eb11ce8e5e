"""run_squad.py: Google's SQuAD model (a span head on the sequence output) and its job
(features in data/squad_data.py, post-processing in data/squad_predictions.py, the official
scores in metrics/squad.py)."""

import os
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.data import checks, squad_data, squad_predictions
from bert_mgpu.engine import evaluation
from bert_mgpu.engine.job import Job, eval_input, start_job, train_watched, with_dropout_layout
from bert_mgpu.metrics import squad as squad_metrics
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import (
    MeanOverExamples,
    Tensors,
    pad_positions,
    ratio,
    training_options,
)


class SquadTask(MeanOverExamples, tf.Module):
    """Google's `run_squad` model: `BertModel` + `SpanHead` on the sequence output.

    The loss of a global batch is Google's `(mean start cross-entropy + mean end cross-entropy)
    / 2` over its features (windows), so a slice returns the sum of its features' losses divided
    by the global number of features. `predict` gives what Google's `model_fn` predicts, and
    what post-processing (squad_predictions.write_predictions) and a serving signature need:
    `unique_ids`, `start_logits`, `end_logits`.

    `padded_length` (--pad_to_longest: the records' length): the padding is left out of the
    span softmax and ranks last (`SpanHead`'s `input_mask`), so batches cut after their
    longest window train and predict as padded ones; `predict` pads its logits back to that
    length with `heads.PADDING_SPAN_LOGIT`. None: Google's model, whose softmax and n-best
    ranking include the padding positions.
    """

    def __init__(self, config, compute_dtype=tf.float32, padded_length=None):
        super().__init__(name=None)
        self.config = config
        self.padded_length = padded_length
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.span = heads.SpanHead(config)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.span)

    def _forward(self, features, training, with_positions=True):
        mask = features["input_mask"] if self.padded_length is not None else None
        # Only a masked span softmax ignores the padding (Google's includes the positions past
        # the windows): then training may skip it.
        options = training_options() if training and mask is not None else {}
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training, **options)
        sequence_output = self.bert.token_head(out.sequence_output)
        if not with_positions:
            return self.span(sequence_output, input_mask=mask, training=training)
        return self.span(sequence_output, features["start_positions"],
                         features["end_positions"], input_mask=mask, training=training)

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
        return {"loss": ratio(sums["loss_sum"], n),
                "start_accuracy": ratio(sums["start_correct"], n),
                "end_accuracy": ratio(sums["end_correct"], n)}

    def predict(self, features) -> Tensors:
        """`unique_ids` int32 [B], `start_logits` and `end_logits` float32 [B, S] (no dropout).
        A serving signature (question + context as text) would run this on the tokenized
        window and post-process with data/squad_predictions.py."""
        out = self._forward(features, training=False, with_positions=False)
        logits = {name: out[name] for name in ("start_logits", "end_logits")}
        if self.padded_length is not None:  # a trimmed batch: back to the records' length
            logits = {name: pad_positions(value, self.padded_length, heads.PADDING_SPAN_LOGIT)
                      for name, value in logits.items()}
        return {"unique_ids": tf.reshape(features["unique_ids"], [-1]), **logits}


def run_squad(cfg, span_task: Optional[Callable] = None) -> dict:
    """Runs run_squad.py with a `configs/squad.py` `SquadConfig`; returns the eval results
    (--do_eval).

    Follows Google's `run_squad.py` (features in data/squad_data.py, post-processing in
    data/squad_predictions.py, steps in `SquadConfig.train_config`); prediction and evaluation
    are the chief's.

    `span_task(job, train_cfg) -> (task, train_cfg, run_config extras)` makes the task
    (default: `SquadTask` of the job's model config); distill.py's makes a student, which may
    change `job.bert_config` (the student's, written as bert_config.json) and the trainer's
    config.
    """

    job = start_job(cfg)
    if cfg.do_eval:  # before training, not after it
        _check_has_answers(cfg.predict_file)
    tokenizer = checks.tokenizer_for(cfg.model)
    train = _squad_train_records(cfg, tokenizer) if cfg.do_train else None
    train_cfg = cfg.train_config(train.num_examples if train else 0, job.num_workers)
    if cfg.pad_to_longest:  # Google's runs (the default) draw dropout in the padded layout
        train_cfg = with_dropout_layout(cfg, train_cfg, [train.path] if train else [])
    if cfg.do_train:
        logging.info("***** Running training *****")
        logging.info("  Num orig examples = %d", train.num_examples)
        logging.info("  Num split examples = %d", train.num_features)
        logging.info("  Batch size = %d (global: %d)", cfg.train.train_batch_size,
                     train_cfg.global_batch_size * job.num_workers)
        logging.info("  Num steps = %d", train_cfg.num_train_steps)
    task, train_cfg, extra = (span_task or _squad_task)(job, train_cfg)
    job.save_effective_config(**extra)
    trainer = job.trainer(task, train_cfg)
    watch = train_watched(job, trainer, lambda: job.training_input(
        [train.path], squad_data.squad_train_shapes(cfg.model.max_seq_length), train_cfg))
    result = {}
    if job.chief and (cfg.do_predict or cfg.do_eval):
        predictions, null_odds = _predict_squad(job, trainer, tokenizer)
        if cfg.do_eval:
            result = _evaluate_squad(job, trainer, predictions, null_odds, watch)
    job.print_summary("f1", result, job.export_command("squad"))
    return result


def _squad_task(job: Job, train_cfg):
    """run_squad.py's task: Google's model of the job's config and the span head."""
    cfg = job.cfg
    task = SquadTask(job.bert_config, compute_dtype=job.compute_dtype(),
                     padded_length=cfg.model.max_seq_length if cfg.pad_to_longest else None)
    return task, train_cfg, {}


def _check_has_answers(predict_file: str) -> None:
    """--do_eval scores the predictions against the answers of --predict_file: every question
    needs an "answers" list (empty for a v2.0 question without answer)."""
    for article in squad_data.load_squad_json(predict_file)["data"]:
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                if not isinstance(qa.get("answers"), list):
                    raise ValueError(f"--do_eval: {predict_file}: question {qa.get('id')} has no "
                                     f"\"answers\" list (evaluation needs a file with the "
                                     f"answers; use --do_predict alone for a test file)")


def _squad_train_records(cfg, tokenizer):
    model, answers = cfg.model, cfg.answers
    key = squad_data.cache_key("train", cfg.train_file, model.vocab_file, model.spm_model_file,
                               model.do_lower_case, model.max_seq_length, answers.doc_stride,
                               answers.max_query_length, answers.version_2_with_negative)
    return squad_data.cached_train_features(
        cfg.train_file, cfg.output_dir, key, tokenizer, model.max_seq_length, answers.doc_stride,
        answers.max_query_length, answers.version_2_with_negative)


def _predict_squad(job: Job, trainer, tokenizer):
    """Predicts every window of every question of --predict_file (the last partial batch
    included) and writes Google's prediction files; returns (predictions, null_odds)."""
    cfg, model, answers = job.cfg, job.cfg.model, job.cfg.answers
    key = squad_data.cache_key("eval", cfg.predict_file, model.vocab_file, model.spm_model_file,
                               model.do_lower_case, model.max_seq_length, answers.doc_stride,
                               answers.max_query_length, answers.version_2_with_negative)
    examples, eval_features, records = squad_data.eval_features(
        cfg.predict_file, cfg.output_dir, key, tokenizer, model.max_seq_length, answers.doc_stride,
        answers.max_query_length)
    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(examples))
    logging.info("  Num split examples = %d", len(eval_features))
    logging.info("  Batch size = %d", cfg.predict_batch_size)
    out = trainer.predict(eval_input(cfg, [records.path],
                                     squad_data.squad_eval_shapes(model.max_seq_length),
                                     cfg.predict_batch_size))
    unique_ids = out.get("unique_ids", np.zeros([0], np.int32))
    expected = [f.unique_id for f in eval_features]
    if unique_ids.tolist() != expected:
        raise RuntimeError(f"predicted {len(unique_ids)} of {len(expected)} features of "
                           f"{cfg.predict_file}, or in another order ({records.path} is stale?)")
    results = [squad_predictions.RawResult(int(u), s, e) for u, s, e in
               zip(unique_ids, out["start_logits"], out["end_logits"])]
    files = [os.path.join(cfg.output_dir, name) for name in
             ("predictions.json", "nbest_predictions.json", "null_odds.json")]
    predictions, _, null_odds = squad_predictions.write_predictions(
        examples, eval_features, results, answers.n_best_size, answers.max_answer_length,
        model.do_lower_case, *files, answers.version_2_with_negative,
        answers.null_score_diff_threshold, cfg.verbose_logging,
        tokenizer.convert_tokens_to_string,
        decodes_original=squad_predictions.decodes_original(tokenizer))
    logging.info("Wrote predictions for %d questions to %s", len(predictions), cfg.output_dir)
    return predictions, null_odds


def _evaluate_squad(job: Job, trainer, predictions, null_odds,
                    watch: evaluation.CollapseWatch) -> dict:
    """The official evaluate-v1.1.py / evaluate-v2.0.py scores of the predictions (v2.0 as
    Google's README runs it: --na-prob-file null_odds.json, threshold 1.0), to
    eval_results.txt."""
    cfg, v2 = job.cfg, job.cfg.answers.version_2_with_negative
    result = dict(squad_metrics.evaluate(
        squad_data.load_squad_json(cfg.predict_file), predictions, v2, null_odds if v2 else None))
    result["global_step"] = int(trainer.global_step.numpy())
    job.write_eval_results(watch.check(result))
    return result
