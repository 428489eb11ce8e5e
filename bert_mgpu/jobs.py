"""What every job does first, and one short function per script.

A training job starts with `start_job(cfg)`: the tower devices (the first TensorFlow work of the
process: without a GPU it splits the CPU into logical devices), the cluster of a multi-machine
run, the model config checked against the flags, the output directory and the seed. The returned
`Job` then builds the trainer and the training input the same way for every task, and the chief
alone writes the effective config and the results. A new job is: a script, a flag group
(cli.py), a config (config.py), a data module, a task (tasks.py) and a function here.
"""

import dataclasses
import os
from typing import Any, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu import modeling, tasks, tokenization, towers, training
from bert_mgpu.cluster import Cluster
from bert_mgpu.config import BertConfig, ModelFiles, TrainConfig
from bert_mgpu.data import classifier_data, features, input_pipeline, processors


def make_tokenizer(model: ModelFiles) -> tokenization.FullTokenizer:
    """The tokenizer of `model`'s vocabulary (or SentencePiece model) and casing, after
    Google's check that the casing suits a released checkpoint (the script's config builder
    has checked the files against the model: cli.check_model_files)."""
    tokenization.validate_case_matches_checkpoint(model.do_lower_case, model.init_checkpoint)
    return tokenization.FullTokenizer(model.vocab_file, model.do_lower_case,
                                      spm_model_file=model.spm_model_file)


@dataclasses.dataclass
class Job:
    """A started training job: its config, tower devices, cluster and model config."""
    cfg: Any
    devices: List[str]
    cluster: Optional[Cluster]
    bert_config: BertConfig

    @property
    def chief(self) -> bool:
        return self.cluster is None or self.cluster.is_chief

    @property
    def num_workers(self) -> int:
        return self.cluster.num_workers if self.cluster is not None else 1

    def save_effective_config(self, **extra) -> None:
        """run_config.json (every flag, plus `extra`) and bert_config.json: chief only."""
        if self.chief:
            training.save_effective_config(self.cfg.output_dir, dict(self.cfg.flags, **extra),
                                           self.bert_config)

    def compute_dtype(self):
        return training.compute_dtype(self.cfg.train.precision)

    def trainer(self, task, train_cfg: TrainConfig,
                lr_multipliers: Optional[Mapping[str, float]] = None) -> training.Trainer:
        return training.Trainer(task, train_cfg, self.devices, self.cluster, lr_multipliers)

    def training_input(self, input_files: Sequence[str], shapes, train_cfg: TrainConfig,
                       masking: Optional[input_pipeline.DynamicMasking] = None):
        """This worker's global batches: deterministic, sharded over the workers."""
        return input_pipeline.record_dataset(
            input_files, shapes, train_cfg.global_batch_size, is_training=True,
            seed=train_cfg.random_seed, shuffle_buffer=train_cfg.shuffle_buffer_size,
            num_shards=self.num_workers,
            shard_index=self.cluster.task_index if self.cluster is not None else 0,
            masking=masking)

    def write_eval_results(self, result: Mapping) -> None:
        training.write_eval_results(os.path.join(self.cfg.output_dir, "eval_results.txt"),
                                    result)


def start_job(cfg) -> Job:
    """The start-up of every training job (`cfg` has `model`, `train`, `cluster`,
    `output_dir` and `flags`).

    Raises:
      ValueError: naming the flag or file that cannot work (e.g. --max_seq_length longer than
        the model's positions).
    """
    # First TensorFlow work of the process: the CPU can only be split into logical tower
    # devices before the runtime starts.
    devices = towers.setup_devices(cfg.train.n_gpus)
    cluster = Cluster(cfg.cluster) if cfg.cluster is not None else None
    bert_config = cfg.model.bert_config()
    tf.io.gfile.makedirs(cfg.output_dir)
    tf.random.set_seed(cfg.train.random_seed)
    return Job(cfg, devices, cluster, bert_config)


# ---------------------------------------------------------------------------------------------
# run_pretraining.py

def run_pretraining(cfg) -> dict:
    """Runs run_pretraining.py with a `config.PretrainingConfig`; returns the eval results."""
    job = start_job(cfg)
    input_files = input_pipeline.expand_input_files(cfg.input_file)
    masking = dynamic_masking(cfg)
    input_pipeline.check_masking_mode(input_files, cfg.dynamic_masking)
    if masking is not None:
        shapes = masking.shapes
        input_pipeline.check_record_lengths(
            input_files, shapes, f"--max_seq_length={cfg.model.max_seq_length}")
    else:
        shapes = features.pretraining_shapes(cfg.model.max_seq_length,
                                             cfg.max_predictions_per_seq)
        input_pipeline.check_record_lengths(
            input_files, shapes, f"--max_seq_length={cfg.model.max_seq_length} / "
                                 f"--max_predictions_per_seq={cfg.max_predictions_per_seq}")
    logging.info("Input files: %d (%s%s)", len(input_files), ", ".join(input_files[:3]),
                 ", ..." if len(input_files) > 3 else "")
    if cfg.do_train:
        input_pipeline.warn_if_read_in_order(input_files, cfg.train.shuffle_buffer_size)
    job.save_effective_config()
    task = tasks.BertPretrainer(job.bert_config, compute_dtype=job.compute_dtype(),
                                next_sentence=not cfg.no_next_sentence)
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
    return result


def dynamic_masking(cfg) -> Optional[input_pipeline.DynamicMasking]:
    """run_pretraining.py --dynamic_masking's rule (None without the flag); the special ids and
    the random words' range come from --vocab_file.

    Raises:
      ValueError: the vocabulary lacks [MASK], [CLS] or [SEP], naming it.
    """
    if not cfg.dynamic_masking:
        return None
    vocab = tokenization.load_vocab(cfg.model.vocab_file)
    missing = [t for t in ("[MASK]", "[CLS]", "[SEP]") if t not in vocab]
    if missing:
        raise ValueError(f"--vocab_file {cfg.model.vocab_file} has no {', '.join(missing)} "
                         f"token (--dynamic_masking needs them)")
    masking = input_pipeline.DynamicMasking(
        max_seq_length=cfg.model.max_seq_length,
        max_predictions_per_seq=cfg.max_predictions_per_seq,
        masked_lm_prob=cfg.masked_lm_prob, vocab_size=len(vocab), mask_id=vocab["[MASK]"],
        cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"], seed=cfg.train.random_seed,
        whole_word=cfg.do_whole_word_mask, span=cfg.span_masking, span_length=cfg.span_length)
    logging.info("Dynamic masking: %s%s, masked_lm_prob %g, up to %d predictions, keyed by "
                 "(random_seed %d, example index)",
                 "span" if masking.span else "whole-word" if masking.whole_word else "token",
                 f" (span_length {masking.span_length})" if masking.span else "",
                 masking.masked_lm_prob, masking.max_predictions_per_seq, masking.seed)
    return masking


# ---------------------------------------------------------------------------------------------
# run_classifier_mgpu.py

def run_classifier(cfg) -> dict:
    """Runs run_classifier_mgpu.py with a `config.ClassifierConfig`; returns the eval results.

    Follows Google's `run_classifier.py` and the multi-GPU fork (see classifier_data.py for the
    files, config.ClassifierConfig.train_config for the steps).
    """
    job = start_job(cfg)
    processor = processors.get_processor(cfg.task_name, cfg.label_list)
    labels = processor.get_labels(cfg.data_dir)
    data = classifier_data.FeatureFiles(cfg, processor, make_tokenizer(cfg.model),
                                        labels)
    # Every input file is read and checked (and its features cached) before training starts.
    splits = {split: data.get(split) for split, wanted in (
        ("train", cfg.do_train), ("dev", cfg.do_eval), ("test", cfg.do_predict)) if wanted}
    train_file, num_train = splits.get("train", (None, 0))
    train_cfg = cfg.train_config(num_train, job.num_workers)
    if cfg.do_train:
        logging.info("***** Running training: %d examples, %g epochs, %d steps *****",
                     num_train, cfg.num_train_epochs, train_cfg.num_train_steps)
    job.save_effective_config(labels=labels)
    task = tasks.BertClassifier(job.bert_config, len(labels), compute_dtype=job.compute_dtype(),
                                label_names=labels)
    multipliers = None
    if cfg.layerwise_lr_decay != 1.0:
        multipliers = modeling.layerwise_lr_multipliers(
            task.named_variables(), job.bert_config.num_hidden_layers, cfg.layerwise_lr_decay)
    trainer = job.trainer(task, train_cfg, multipliers)
    if cfg.do_train:
        trainer.train(job.training_input([train_file], data.shapes, train_cfg))
    else:
        trainer.restore_or_initialize()
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        result = _evaluate_classifier(job, trainer, data, *splits["dev"])
    if job.chief and cfg.do_predict:
        _predict_classifier(job, trainer, data, *splits["test"])
    return result


def _evaluate_classifier(job: Job, trainer, data, eval_file, num_eval) -> dict:
    logging.info("***** Running evaluation: %d examples, batch size %d *****", num_eval,
                 job.cfg.eval_batch_size)
    result = trainer.evaluate(input_pipeline.record_dataset(
        [eval_file], data.shapes, job.cfg.eval_batch_size, is_training=False))
    result["eval_examples"] = num_eval
    job.write_eval_results(result)
    return result


def _predict_classifier(job: Job, trainer, data, predict_file, num_predict) -> None:
    logging.info("***** Running prediction: %d examples, batch size %d *****", num_predict,
                 job.cfg.predict_batch_size)
    probabilities = trainer.predict(input_pipeline.record_dataset(
        [predict_file], data.shapes, job.cfg.predict_batch_size,
        is_training=False)).get("probabilities", np.zeros([0]))
    if len(probabilities) != num_predict:
        raise RuntimeError(f"predicted {len(probabilities)} of {num_predict} examples")
    classifier_data.write_predictions(job.cfg.output_dir, probabilities)
    logging.info("Wrote %d predictions to %s (test_results.tsv, predict.txt)", num_predict,
                 job.cfg.output_dir)


# ---------------------------------------------------------------------------------------------
# extract_features.py

def extract_features(cfg) -> int:
    """Runs extract_features.py with a `config.ExtractFeaturesConfig`; returns the number of
    output lines."""
    from bert_mgpu import feature_extraction

    tokenizer = make_tokenizer(cfg.model)
    extractor = feature_extraction.FeatureExtractor(
        cfg.model.bert_config(), cfg.model.init_checkpoint, cfg.layers, cfg.model.max_seq_length)
    return feature_extraction.write_features(cfg.input_file, cfg.output_file, tokenizer,
                                             extractor, cfg.batch_size)
