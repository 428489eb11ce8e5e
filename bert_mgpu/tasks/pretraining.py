"""run_pretraining.py: Google's pretraining model (masked LM + next sentence) and its job."""

import os
from typing import Dict, Optional

import tensorflow as tf
from absl import logging

from bert_mgpu.data import features, input_pipeline
from bert_mgpu.data.features import DOCUMENT_IDS
from bert_mgpu.engine.job import start_job
from bert_mgpu.model import heads, modeling
from bert_mgpu.tasks.base import BertTask, Tensors, ratio


class BertPretrainer(BertTask, tf.Module):
    """Google's pretraining model: `BertModel` + masked LM + next sentence.

    The masked-LM loss of the global batch is divided by the global sum of `masked_lm_weights`
    (+1e-5, Google's epsilon), the next-sentence loss by the global number of examples.

    With `packed=True` the records' `document_ids` go to the model (packed documents do not
    attend to each other; RoPE positions restart per document).

    With `next_sentence=False` (masked-LM-only data: `create_pretraining_data.py
    --no_next_sentence` or `--pack_sequences`, as Cramming and RoBERTa train) there is no
    next-sentence head, no `cls/seq_relationship` variables, and the loss is the masked-LM loss;
    `next_sentence_labels` is then ignored. ALBERT's sentence-order prediction is trained by the
    next-sentence head unchanged (same variables, label 1 = swapped).
    """

    def __init__(self, config, compute_dtype=tf.float32, next_sentence=True, packed=False):
        super().__init__(name=None)
        self.config = config
        # Packed records with `document_ids` (RoPE models): each token sees its document only.
        self.packed = packed
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
                        training=training, document_ids=features[DOCUMENT_IDS] if self.packed
                        else None)
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
            "masked_lm_accuracy": ratio(sums["masked_lm_weighted_correct"],
                                         sums["masked_lm_weight"]),
            "masked_lm_loss": ratio(sums["masked_lm_weighted_loss"], sums["masked_lm_weight"]),
            # The Estimator's `loss`: the mean over eval batches of each batch's total loss.
            "loss": ratio(sums["batch_loss_sum"], sums["num_batches"]),
        }
        if "next_sentence_correct" in sums:
            result.update(
                next_sentence_accuracy=ratio(sums["next_sentence_correct"],
                                              sums["num_examples"]),
                next_sentence_loss=ratio(sums["next_sentence_loss_sum"],
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


def run_pretraining(cfg) -> dict:
    """Runs run_pretraining.py with a `configs/pretraining.py` PretrainingConfig; returns the eval
    results."""
    warn_warmup_longer_than_training(cfg)
    job = start_job(cfg)
    input_files = input_pipeline.expand_input_files(cfg.input_file)
    packed = input_pipeline.records_have_document_ids(input_files)
    check_packing(input_files, packed, job.bert_config)
    masking = dynamic_masking(cfg, packed)
    input_pipeline.check_masking_mode(input_files, cfg.dynamic_masking)
    if masking is not None:
        shapes = masking.shapes
        input_pipeline.check_record_lengths(
            input_files, shapes, f"--max_seq_length={cfg.model.max_seq_length}")
    else:
        shapes = features.pretraining_shapes(cfg.model.max_seq_length,
                                             cfg.max_predictions_per_seq)
        if packed:
            shapes[DOCUMENT_IDS] = cfg.model.max_seq_length
        input_pipeline.check_record_lengths(
            input_files, shapes, f"--max_seq_length={cfg.model.max_seq_length} / "
                                 f"--max_predictions_per_seq={cfg.max_predictions_per_seq}")
    logging.info("Input files: %d (%s%s)", len(input_files), ", ".join(input_files[:3]),
                 ", ..." if len(input_files) > 3 else "")
    if cfg.do_train:
        input_pipeline.warn_if_read_in_order(input_files, cfg.train.shuffle_buffer_size)
    job.save_effective_config()
    task = BertPretrainer(job.bert_config, compute_dtype=job.compute_dtype(),
                          next_sentence=not cfg.no_next_sentence, packed=packed)
    trainer = job.trainer(task, cfg.train_config)
    if cfg.do_train:
        trainer.train(job.training_input(input_files, shapes, cfg.train_config, masking))
    result = {}
    if cfg.do_eval and job.chief:
        if not cfg.do_train:
            trainer.restore_or_initialize()
        result = trainer.evaluate(input_pipeline.record_dataset(
            input_files, shapes, cfg.eval_batch_size, is_training=False, masking=masking),
            cfg.max_eval_steps)
        job.write_eval_results(result)
    job.print_summary("masked_lm_accuracy", result, job.command(
        "run_classifier.py", "--task_name=tsv --data_dir=YOUR_DATA --vocab_file=VOCAB "
        "--do_train --do_eval --output_dir=YOUR_OUTPUT", init_checkpoint=cfg.output_dir,
        bert_config_file=os.path.join(cfg.output_dir, "bert_config.json")),
        checkpoint_use="fine-tuning (--init_checkpoint)")
    return result


def warn_warmup_longer_than_training(cfg) -> None:
    """Logs a warning when the linear schedule's warmup outlasts the run: the learning rate
    would rise for every step and never reach --learning_rate."""
    train = cfg.train_config
    if cfg.do_train and train.lr_schedule == "linear" and \
            train.num_warmup_steps > train.num_train_steps:
        peak = train.learning_rate * train.num_train_steps / train.num_warmup_steps
        logging.warning("--num_warmup_steps=%d > --num_train_steps=%d: the learning rate rises "
                        "for the whole run and never reaches its peak --learning_rate=%g "
                        "(at most %g, at the last step)", train.num_warmup_steps,
                        train.num_train_steps, train.learning_rate, peak)


def check_packing(input_files, packed: bool, bert_config) -> None:
    """Records with `document_ids` need a model that keeps tokens to their document (RoPE:
    positions restart per document).

    Raises:
      ValueError: one line naming the file and the config key.
    """
    if packed and bert_config.position_embedding_type != "rope":
        raise ValueError(f"{input_files[0]}: records carry document_ids (packed documents), "
                         f"which needs a bert_config with position_embedding_type \"rope\" "
                         f"(ModernBERT); make them without --document_ids for this model")
    if packed:
        logging.info("Records carry document_ids: each token attends within its own document, "
                     "RoPE positions restart per document")


def dynamic_masking(cfg, packed: bool = False) -> Optional[input_pipeline.DynamicMasking]:
    """run_pretraining.py --dynamic_masking's rule (None without the flag); the special ids and
    the random words' range come from --vocab_file.

    Raises:
      ValueError: the vocabulary lacks [MASK], [CLS] or [SEP], naming it.
    """
    if not cfg.dynamic_masking:
        return None
    masking = input_pipeline.DynamicMasking.from_vocab(
        cfg.model.vocab_file, max_seq_length=cfg.model.max_seq_length,
        max_predictions_per_seq=cfg.max_predictions_per_seq,
        masked_lm_prob=cfg.masked_lm_prob, seed=cfg.train.random_seed,
        whole_word=cfg.do_whole_word_mask, span=cfg.span_masking, span_length=cfg.span_length,
        document_ids=packed)
    logging.info("Dynamic masking: %s%s, masked_lm_prob %g, up to %d predictions, keyed by "
                 "(random_seed %d, example index)",
                 "span" if masking.span else "whole-word" if masking.whole_word else "token",
                 f" (span_length {masking.span_length})" if masking.span else "",
                 masking.masked_lm_prob, masking.max_predictions_per_seq, masking.seed)
    return masking
