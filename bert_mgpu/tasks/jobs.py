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

from bert_mgpu.engine import checkpoint, evaluation, towers, training
from bert_mgpu.model import modeling
from bert_mgpu.tasks import base as tasks
from bert_mgpu import tokenization
from bert_mgpu.engine.cluster import Cluster
from bert_mgpu.configs import base as config
from bert_mgpu.configs.base import BertConfig, ModelFiles, TrainConfig
from bert_mgpu.data import classifier_data, features, input_pipeline, multitask, processors


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
            masking=masking, group_by_length=train_cfg.group_by_length)

    def weights_for_prediction(self, trainer) -> None:
        """With --keep_best_checkpoint, loads the kept best model into `trainer` (else the
        current weights predict); the log says which."""
        best = evaluation.best_checkpoint(self.cfg.output_dir) \
            if getattr(self.cfg, "keep_best_checkpoint", False) else None
        if best is not None:
            checkpoint.restore_checkpoint(best, trainer.variables)
            logging.info("Predicting with the best checkpoint %s (--keep_best_checkpoint)", best)
        else:
            logging.info("Predicting with the weights at global_step %d",
                         int(trainer.global_step.numpy()))

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
    files, config.ClassifierConfig.train_config for the steps). Several --task_name: multi-task
    fine-tuning (`_run_multitask_classifier`).
    """
    job = start_job(cfg)
    if cfg.classifier_input == "cls_last4" and job.bert_config.num_hidden_layers < 4:
        raise ValueError(f"--classifier_input=cls_last4 needs at least 4 layers; "
                         f"--bert_config_file has {job.bert_config.num_hidden_layers}")
    if cfg.num_tasks > 1:
        return _run_multitask_classifier(job)
    labels, data, splits = _classifier_data(cfg, make_tokenizer(cfg.model))
    train_file, num_train = splits.get("train", (None, 0))
    train_cfg = _with_dropout_layout(cfg, cfg.train_config(num_train, job.num_workers),
                                     [train_file] if cfg.do_train else [])
    if cfg.do_train:
        logging.info("***** Running training: %d examples, %g epochs, %d steps *****",
                     num_train, cfg.num_train_epochs, train_cfg.num_train_steps)
    # The effective task type and --best_metric (stsb and the task types set their defaults).
    job.save_effective_config(labels=labels, task_type=cfg.task_type,
                              best_metric=cfg.best_metric)
    task = classifier_task(cfg, job, labels)
    _log_head_initialisation(cfg, task)
    trainer = evaluation.CollapseWatch(FullEvaluation(_fine_tuning_trainer(job, task, train_cfg)))
    if cfg.do_train:
        trainer.train(job.training_input([train_file], data.shapes, train_cfg),
                      on_step=_periodic_evaluator(job, trainer, data, splits.get("dev")))
    else:
        trainer.restore_or_initialize()
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        result = _evaluate_classifier(cfg, trainer, data, *splits["dev"])
    if job.chief and cfg.do_predict:
        job.weights_for_prediction(trainer)
        _predict_classifier(cfg, trainer, data, *splits["test"])
    return result


def _classifier_data(cfg, tokenizer):
    """(labels, feature files, splits) of one classifier task (`cfg`: a single task's config):
    every input file the run needs is read and checked (and its features cached) before
    training starts; splits maps "train"/"dev"/"test" to (record file, number of examples)."""
    processor = processors.get_processor(cfg.task_name, cfg.label_list, cfg.task_type)
    labels = processor.get_labels(cfg.data_dir)
    if cfg.task_type == "multilabel" and not labels:
        raise processors.DataError(f"{cfg.data_dir}: no label in train.tsv's label column and "
                                   f"no --label_list (--task_type=multilabel)")
    data = classifier_data.FeatureFiles(cfg, processor, tokenizer, labels)
    splits = {split: data.get(split) for split, wanted in (
        ("train", cfg.do_train), ("dev", cfg.do_eval), ("test", cfg.do_predict)) if wanted}
    return labels, data, splits


def _fine_tuning_trainer(job: Job, task, train_cfg: TrainConfig) -> training.Trainer:
    """The trainer of a fine-tuning task, with --layerwise_lr_decay's learning-rate factors."""
    multipliers = None
    if job.cfg.layerwise_lr_decay != 1.0:
        multipliers = modeling.layerwise_lr_multipliers(
            task.named_variables(), job.bert_config.num_hidden_layers,
            job.cfg.layerwise_lr_decay)
    return job.trainer(task, train_cfg, multipliers)


def _log_head_initialisation(cfg, task) -> None:
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


def eval_input(cfg, input_files: Sequence[str], shapes, batch_size: int):
    """Evaluation/prediction batches of a classifier task (`cfg`: its config): every record
    once; sorted by length with --pad_to_longest (the trainer puts the predictions back in
    file order)."""
    if getattr(cfg, "pad_to_longest", False):
        return input_pipeline.length_sorted_dataset(input_files, shapes, batch_size)
    return input_pipeline.record_dataset(input_files, shapes, batch_size, is_training=False)


def _periodic_evaluator(job: Job, trainer, data, dev):
    """`--eval_every_n_steps`: the trainer's on_step callback (see evaluation.py), or None."""
    cfg = job.cfg
    if not cfg.eval_every_n_steps:
        return None
    eval_file = dev[0]
    return evaluation.PeriodicEvaluator(
        trainer, lambda: eval_input(cfg, [eval_file], data.shapes, cfg.eval_batch_size),
        cfg.output_dir, cfg.eval_every_n_steps, best_metric=cfg.best_metric,
        keep_best=cfg.keep_best_checkpoint, patience=cfg.early_stopping_patience,
        is_chief=job.chief)


def _evaluate_classifier(cfg, trainer, data, eval_file, num_eval, write: bool = True) -> dict:
    """The dev set's results (`cfg`: a single task's config); written to its output_dir's
    eval_results.txt unless `write` is False."""
    logging.info("***** Running evaluation: %d examples, batch size %d *****", num_eval,
                 cfg.eval_batch_size)
    result = trainer.evaluate(eval_input(cfg, [eval_file], data.shapes, cfg.eval_batch_size))
    result["eval_examples"] = num_eval
    if write:
        tf.io.gfile.makedirs(cfg.output_dir)
        training.write_eval_results(os.path.join(cfg.output_dir, "eval_results.txt"), result)
    return result


def _predict_classifier(cfg, trainer, data, predict_file, num_predict) -> None:
    """test_results.tsv and predict.txt of one task (`cfg`: its config) in its output_dir."""
    logging.info("***** Running prediction: %d examples, batch size %d *****", num_predict,
                 cfg.predict_batch_size)
    outputs = trainer.predict(eval_input(cfg, [predict_file], data.shapes,
                                         cfg.predict_batch_size))
    predictions = outputs.get("predictions" if cfg.task_type == "regression"
                              else "probabilities", np.zeros([0]))
    if len(predictions) != num_predict:
        raise RuntimeError(f"predicted {len(predictions)} of {num_predict} examples")
    tf.io.gfile.makedirs(cfg.output_dir)
    if cfg.task_type == "regression":
        classifier_data.write_regression_predictions(cfg.output_dir, predictions)
    elif cfg.task_type == "multilabel":
        classifier_data.write_multilabel_predictions(cfg.output_dir, predictions,
                                                     data.label_list, cfg.multilabel_threshold)
    else:
        classifier_data.write_predictions(cfg.output_dir, predictions)
    logging.info("Wrote %d predictions to %s (test_results.tsv, predict.txt)", num_predict,
                 cfg.output_dir)


def classifier_task(cfg, job: Job, labels: Sequence[str], encoder=None, scope: str = ""):
    """The task of --task_type (classification: Google's BertClassifier); `encoder` and
    `scope` make it one task of a multi-task model (tasks.MultiTaskClassifier)."""
    dtype = job.compute_dtype()
    shared = dict(compute_dtype=dtype, classifier_input=cfg.classifier_input, encoder=encoder,
                  scope=scope)
    if cfg.task_type == "regression":
        return tasks.BertRegressor(job.bert_config, **shared)
    if cfg.task_type == "multilabel":
        return tasks.BertMultiLabelClassifier(job.bert_config, len(labels), label_names=labels,
                                              threshold=cfg.multilabel_threshold, **shared)
    return tasks.BertClassifier(job.bert_config, len(labels), label_names=labels, **shared)


def _with_dropout_layout(cfg, train_cfg, train_files):
    """`train_cfg` with dropout's layout length: the training files' longest example rounded
    up to --pad_to_multiple_of (input_pipeline.dropout_layout_length), padded or trimmed
    batches alike; unchanged without training files."""
    if not train_files:
        return train_cfg
    length = input_pipeline.dropout_layout_length(train_files, cfg.model.max_seq_length,
                                                  cfg.pad_to_multiple_of)
    logging.info("Dropout masks laid out over %d positions (the training set's longest example "
                 "rounded up to --pad_to_multiple_of=%d; --max_seq_length=%d)", length,
                 cfg.pad_to_multiple_of, cfg.model.max_seq_length)
    return dataclasses.replace(train_cfg, max_seq_length=length)


# -- multi-task fine-tuning ----------------------------------------------------------------------

def _run_multitask_classifier(job: Job) -> dict:
    """Several --task_name on one encoder: one head per task (`task_<label>/`), each global
    batch one task's, drawn by --task_sampling (data/multitask.py); each task evaluated and
    predicted in OUTPUT_DIR/<label>/, the mean of the tasks' --best_metric for the best
    checkpoint; OUTPUT_DIR/eval_results.txt holds every task's results as `<label>/<key>`."""
    cfg = job.cfg
    task_cfgs = cfg.task_configs()
    labels = config.task_labels([t.task_name for t in task_cfgs])
    mean_metric = multitask_mean_metric([t.best_metric for t in task_cfgs])
    tokenizer = make_tokenizer(cfg.model)
    inputs = [_classifier_data(t, tokenizer) for t in task_cfgs]  # (labels, data, splits)
    num_train = [splits["train"][1] if cfg.do_train else 0 for _, _, splits in inputs]
    train_cfg = _with_dropout_layout(
        cfg, cfg.train_config(sum(num_train), job.num_workers),
        [splits["train"][0] for _, _, splits in inputs] if cfg.do_train else [])
    probabilities = multitask.sampling_probabilities(num_train, cfg.task_sampling) \
        if cfg.do_train else None
    if cfg.do_train:
        logging.info("***** Running multi-task training: %d examples, %g epochs, %d steps, "
                     "--task_sampling=%s *****", sum(num_train), cfg.num_train_epochs,
                     train_cfg.num_train_steps, cfg.task_sampling)
        for label, n, p in zip(labels, num_train, probabilities):
            logging.info("  task %s: %d examples, drawn for %.1f%% of the batches", label, n,
                         100 * p)
    job.save_effective_config(tasks=[
        {"label": label, "task_name": t.task_name, "data_dir": t.data_dir,
         "task_type": t.task_type, "labels": task_labels, "best_metric": t.best_metric}
        for label, t, (task_labels, _, _) in zip(labels, task_cfgs, inputs)],
        best_metric=mean_metric)
    encoder = modeling.BertModel(job.bert_config, compute_dtype=job.compute_dtype())
    model = tasks.MultiTaskClassifier(encoder, {
        label: classifier_task(t, job, task_labels, encoder,
                               tasks.MultiTaskClassifier.head_scope(label))
        for label, t, (task_labels, _, _) in zip(labels, task_cfgs, inputs)})
    _log_head_initialisation(cfg, model)
    trainer = evaluation.CollapseWatch(_fine_tuning_trainer(job, model, train_cfg))
    dev = trainer.watching(_MultiTaskEvaluation(trainer, model, task_cfgs, inputs, mean_metric)) \
        if cfg.do_eval else None
    if cfg.do_train:
        on_step = None
        if cfg.eval_every_n_steps:
            on_step = evaluation.PeriodicEvaluator(
                dev, lambda: None, cfg.output_dir, cfg.eval_every_n_steps,
                best_metric=mean_metric, keep_best=cfg.keep_best_checkpoint,
                patience=cfg.early_stopping_patience, is_chief=job.chief)
        trainer.train(multitask.training_dataset(
            [(splits["train"][0], data.shapes) for _, data, splits in inputs],
            train_cfg.global_batch_size, train_cfg.random_seed, probabilities,
            num_shards=job.num_workers,
            shard_index=job.cluster.task_index if job.cluster is not None else 0),
            on_step=on_step)
    else:
        trainer.restore_or_initialize()
    result = {}
    if job.chief and cfg.do_eval:
        result = dev.evaluate(write=True)
        job.write_eval_results(result)
    if job.chief and cfg.do_predict:
        job.weights_for_prediction(trainer)
        for t, task, (_, data, splits) in zip(task_cfgs, model.tasks, inputs):
            _predict_classifier(t, trainer.with_task(task), data, *splits["test"])
    return result


def multitask_mean_metric(metrics: Sequence[str]) -> str:
    """The name of the scalar that picks the best checkpoint of a multi-task run, the mean over
    the tasks of each one's --best_metric: `mean_<metric>` when every task uses the same one,
    else `mean_best_metric` (scores) or `mean_best_loss` (losses).

    Raises:
      ValueError: the metrics do not improve in one direction (losses and scores mixed).
    """
    lower = {evaluation.lower_is_better(m) for m in metrics}
    if len(lower) > 1:
        raise ValueError(f"--best_metric={','.join(metrics)}: the mean of losses (lower is "
                         f"better) and scores (higher is better) means nothing; choose metrics "
                         f"that improve in one direction")
    if len(set(metrics)) == 1:
        return f"mean_{metrics[0]}"
    return "mean_best_loss" if lower == {True} else "mean_best_metric"


class _MultiTaskEvaluation:
    """The dev sets of a multi-task run: each task's results (the trainer's evaluation of that
    task, `FullEvaluation` included) as `<label>/<key>`, plus the mean over the tasks of their
    --best_metric. Stands in for the trainer in `evaluation.PeriodicEvaluator` (everything but
    `evaluate` is the trainer's)."""

    def __init__(self, trainer, model, task_cfgs, inputs, mean_metric: str):
        self.trainer, self.task_cfgs, self.inputs = trainer, task_cfgs, inputs
        self.labels = model.labels
        self.views = [FullEvaluation(trainer.with_task(task)) for task in model.tasks]
        self.mean_metric = mean_metric

    def __getattr__(self, name):  # cfg, variables, global_step: the trainer's
        return getattr(self.trainer, name)

    def evaluate(self, dataset=None, write: bool = False) -> dict:
        """Every task's dev results (`dataset` is unused: each task reads its own dev file);
        with `write`, each also to OUTPUT_DIR/<label>/eval_results.txt.

        Raises:
          ValueError: a task's --best_metric is not among its results, naming both.
        """
        del dataset
        result, best = {}, []
        for label, t, view, (_, data, splits) in zip(self.labels, self.task_cfgs, self.views,
                                                      self.inputs):
            task_result = _evaluate_classifier(t, view, data, *splits["dev"], write=write)
            if t.best_metric not in task_result:
                raise ValueError(f"--best_metric={t.best_metric} is not an evaluation result of "
                                 f"task {label}; choose one of {', '.join(sorted(task_result))}")
            best.append(float(task_result[t.best_metric]))
            result.update({f"{label}/{k}": v for k, v in task_result.items()
                           if k != "global_step"})
        result[self.mean_metric] = float(np.mean(best))
        result["global_step"] = int(self.trainer.global_step.numpy())
        return result


class FullEvaluation:
    """A trainer whose `evaluate` adds the metrics a task computes from every prediction of
    the dataset (`task.prediction_metrics(trainer.predict(dataset))`, e.g. the regression
    task's Spearman, which no additive sum gives): a second pass over the dev set, on the
    chief. Everything else is the wrapped trainer's (training.py is unchanged)."""

    def __init__(self, trainer):
        self._trainer = trainer

    def __getattr__(self, name):
        return getattr(self._trainer, name)

    def evaluate(self, dataset, max_steps: Optional[int] = None) -> dict:
        result = self._trainer.evaluate(dataset, max_steps)
        prediction_metrics = getattr(self._trainer.task, "prediction_metrics", None)
        if prediction_metrics is not None and result:
            if max_steps is not None:
                dataset = dataset.take(max_steps)
            result.update(prediction_metrics(self._trainer.predict(dataset)))
        return result


# ---------------------------------------------------------------------------------------------
# run_squad.py

def run_squad(cfg) -> dict:
    """Runs run_squad.py with a `config.SquadConfig`; returns the eval results (--do_eval).

    Follows Google's `run_squad.py` (features and post-processing in squad_data.py and
    squad_metrics.py, steps in config.SquadConfig.train_config); prediction and evaluation are
    the chief's.
    """
    from bert_mgpu.data import squad_data  # here: the other jobs never load SQuAD code

    job = start_job(cfg)
    if cfg.do_eval:  # before training, not after it
        _check_has_answers(cfg.predict_file)
    tokenizer = make_tokenizer(cfg.model)
    train = _squad_train_records(cfg, tokenizer) if cfg.do_train else None
    train_cfg = cfg.train_config(train.num_examples if train else 0, job.num_workers)
    if cfg.do_train:
        logging.info("***** Running training *****")
        logging.info("  Num orig examples = %d", train.num_examples)
        logging.info("  Num split examples = %d", train.num_features)
        logging.info("  Batch size = %d (global: %d)", cfg.train.train_batch_size,
                     train_cfg.global_batch_size * job.num_workers)
        logging.info("  Num steps = %d", train_cfg.num_train_steps)
    job.save_effective_config()
    task = tasks.SquadTask(job.bert_config, compute_dtype=job.compute_dtype())
    trainer = evaluation.CollapseWatch(job.trainer(task, train_cfg))
    if cfg.do_train:
        trainer.train(job.training_input(
            [train.path], squad_data.squad_train_shapes(cfg.model.max_seq_length), train_cfg))
    else:
        trainer.restore_or_initialize()
    result = {}
    if job.chief and (cfg.do_predict or cfg.do_eval):
        predictions, null_odds = _predict_squad(job, trainer, tokenizer)
        if cfg.do_eval:
            result = _evaluate_squad(job, trainer, predictions, null_odds)
    return result


def _check_has_answers(predict_file: str) -> None:
    """--do_eval scores the predictions against the answers of --predict_file: every question
    needs an "answers" list (empty for a v2.0 question without answer)."""
    from bert_mgpu.data import squad_data
    for article in squad_data.load_squad_json(predict_file)["data"]:
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                if not isinstance(qa.get("answers"), list):
                    raise ValueError(f"--do_eval: {predict_file}: question {qa.get('id')} has no "
                                     f"\"answers\" list (evaluation needs a file with the "
                                     f"answers; use --do_predict alone for a test file)")


def _squad_train_records(cfg, tokenizer):
    from bert_mgpu.data import squad_data
    model = cfg.model
    key = squad_data.cache_key("train", cfg.train_file, model.vocab_file, model.spm_model_file,
                               model.do_lower_case, model.max_seq_length, cfg.doc_stride,
                               cfg.max_query_length, cfg.version_2_with_negative)
    return squad_data.cached_train_features(
        cfg.train_file, cfg.output_dir, key, tokenizer, model.max_seq_length, cfg.doc_stride,
        cfg.max_query_length, cfg.version_2_with_negative)


def _predict_squad(job: Job, trainer, tokenizer):
    """Predicts every window of every question of --predict_file (the last partial batch
    included) and writes Google's prediction files; returns (predictions, null_odds)."""
    from bert_mgpu.metrics import squad as squad_metrics
    from bert_mgpu.data import squad_data
    cfg, model = job.cfg, job.cfg.model
    key = squad_data.cache_key("eval", cfg.predict_file, model.vocab_file, model.spm_model_file,
                               model.do_lower_case, model.max_seq_length, cfg.doc_stride,
                               cfg.max_query_length, cfg.version_2_with_negative)
    examples, eval_features, records = squad_data.eval_features(
        cfg.predict_file, cfg.output_dir, key, tokenizer, model.max_seq_length, cfg.doc_stride,
        cfg.max_query_length)
    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(examples))
    logging.info("  Num split examples = %d", len(eval_features))
    logging.info("  Batch size = %d", cfg.predict_batch_size)
    out = trainer.predict(input_pipeline.record_dataset(
        [records.path], squad_data.squad_eval_shapes(model.max_seq_length),
        cfg.predict_batch_size, is_training=False))
    unique_ids = out.get("unique_ids", np.zeros([0], np.int32))
    expected = [f.unique_id for f in eval_features]
    if unique_ids.tolist() != expected:
        raise RuntimeError(f"predicted {len(unique_ids)} of {len(expected)} features of "
                           f"{cfg.predict_file}, or in another order ({records.path} is stale?)")
    results = [squad_metrics.RawResult(int(u), s, e) for u, s, e in
               zip(unique_ids, out["start_logits"], out["end_logits"])]
    files = [os.path.join(cfg.output_dir, name) for name in
             ("predictions.json", "nbest_predictions.json", "null_odds.json")]
    predictions, _, null_odds = squad_metrics.write_predictions(
        examples, eval_features, results, cfg.n_best_size, cfg.max_answer_length,
        model.do_lower_case, *files, cfg.version_2_with_negative,
        cfg.null_score_diff_threshold, cfg.verbose_logging)
    logging.info("Wrote predictions for %d questions to %s", len(predictions), cfg.output_dir)
    return predictions, null_odds


def _evaluate_squad(job: Job, trainer, predictions, null_odds) -> dict:
    """The official evaluate-v1.1.py / evaluate-v2.0.py scores of the predictions (v2.0 as
    Google's README runs it: --na-prob-file null_odds.json, threshold 1.0), to
    eval_results.txt."""
    from bert_mgpu.metrics import squad as squad_metrics
    from bert_mgpu.data import squad_data
    cfg = job.cfg
    result = dict(squad_metrics.evaluate(
        squad_data.load_squad_json(cfg.predict_file), predictions, cfg.version_2_with_negative,
        null_odds if cfg.version_2_with_negative else None))
    result["global_step"] = int(trainer.global_step.numpy())
    job.write_eval_results(trainer.check(result))
    return result


# ---------------------------------------------------------------------------------------------
# extract_features.py

def extract_features(cfg) -> int:
    """Runs extract_features.py with a `config.ExtractFeaturesConfig`; returns the number of
    output lines."""
    from bert_mgpu.tasks import features as feature_extraction

    tokenizer = make_tokenizer(cfg.model)
    extractor = feature_extraction.FeatureExtractor(
        cfg.model.bert_config(), cfg.model.init_checkpoint, cfg.layers, cfg.model.max_seq_length)
    return feature_extraction.write_features(cfg.input_file, cfg.output_file, tokenizer,
                                             extractor, cfg.batch_size)


# ---------------------------------------------------------------------------------------------
# export_saved_model.py

def export_saved_model(cfg) -> str:
    """Runs export_saved_model.py with a `config.ExportConfig`; returns the version directory."""
    from bert_mgpu.serving import export

    return export.export_saved_model(cfg)


# ---------------------------------------------------------------------------------------------
# run_ner.py

def run_ner(cfg) -> dict:
    """Runs run_ner.py with a `config.NerConfig`; returns the eval results.

    CoNLL files -> windowed records with labels on each word's first piece (data/ner_data.py),
    `tasks.TaggingTask` on the shared trainer; evaluation adds conlleval's entity scores
    (ner_metrics.py) to the task's token metrics; prediction writes predictions.txt with every
    test token.
    """
    from bert_mgpu.data import ner_data

    job = start_job(cfg)
    data = ner_data.FeatureFiles(cfg, make_tokenizer(cfg.model))
    # Every input file is read and checked (and its features cached) before training starts.
    splits = {split: data.get(split) for split, wanted in (
        ("train", cfg.do_train), ("dev", cfg.do_eval), ("test", cfg.do_predict)) if wanted}
    num_train = splits["train"].num_records if cfg.do_train else 0
    train_cfg = cfg.train_config(num_train, job.num_workers)
    if cfg.do_train:
        logging.info("***** Running training: %d windows, %g epochs, %d steps *****",
                     num_train, cfg.num_train_epochs, train_cfg.num_train_steps)
    job.save_effective_config(labels=data.labels, doc_stride=data.doc_stride)
    task = tasks.TaggingTask(job.bert_config, len(data.labels),
                             compute_dtype=job.compute_dtype(), tag_names=data.labels)
    trainer = evaluation.CollapseWatch(_fine_tuning_trainer(job, task, train_cfg))
    if cfg.do_train:
        trainer.train(job.training_input([splits["train"].path], data.shapes, train_cfg),
                      on_step=_ner_periodic_evaluator(job, trainer, data, splits.get("dev")))
    else:
        trainer.restore_or_initialize()
    result = {}
    if job.chief and cfg.do_eval:  # evaluation, prediction and their files are the chief's
        logging.info("***** Running evaluation: %d sentences, %d windows, batch size %d *****",
                     len(splits["dev"].sentences), splits["dev"].num_records,
                     cfg.eval_batch_size)
        result = _NerEvaluation(trainer, data, splits["dev"]).evaluate()
        job.write_eval_results(result)
    if job.chief and cfg.do_predict:
        _predict_ner(job, trainer, data, splits["test"])
    return result


def _ner_periodic_evaluator(job: Job, trainer, data, dev):
    """`--eval_every_n_steps`: the trainer's on_step callback (conlleval's scores), or None."""
    cfg = job.cfg
    if not cfg.eval_every_n_steps:
        return None
    dev_evaluation = _NerEvaluation(trainer, data, dev)
    return evaluation.PeriodicEvaluator(
        dev_evaluation, dev_evaluation.dataset, cfg.output_dir, cfg.eval_every_n_steps,
        best_metric=cfg.best_metric, keep_best=cfg.keep_best_checkpoint,
        patience=cfg.early_stopping_patience, is_chief=job.chief)


class _NerEvaluation:
    """The dev set's evaluation: the task's token metrics (`Trainer.evaluate`) plus conlleval's
    entity precision/recall/F1 and accuracy over the words' predicted tags, in the file's
    scheme. Stands in for the trainer in `evaluation.PeriodicEvaluator` (everything but
    `evaluate` is the trainer's), so --best_metric=eval_f1 works during training."""

    def __init__(self, trainer, data, dev):
        self.trainer, self.data, self.dev = trainer, data, dev

    def __getattr__(self, name):  # cfg, variables, global_step: the trainer's
        return getattr(self.trainer, name)

    def dataset(self):
        """The dev records, once, in order."""
        return input_pipeline.record_dataset([self.dev.path], self.data.shapes,
                                             self.data.cfg.eval_batch_size, is_training=False)

    def evaluate(self, dataset=None) -> dict:
        """The results of eval_results.txt (`dataset`: `self.dataset()` when None)."""
        from bert_mgpu.metrics import ner as ner_metrics

        dataset = self.dataset() if dataset is None else dataset
        result = self.trainer.evaluate(dataset)
        tags = _predicted_file_tags(self.trainer, self.data, self.dev, dataset)
        scores = ner_metrics.evaluate([s.tags for s in self.dev.sentences], tags)
        result.update(scores.as_metrics("eval_"))
        result.update(eval_sentences=len(self.dev.sentences), eval_windows=self.dev.num_records,
                      eval_tokens=scores.tokens)
        logging.info("conlleval on the dev set:\n%s", scores.report())
        return result


def _predicted_file_tags(trainer, data, split, dataset):
    """Per sentence, per word: the predicted tag, in the split file's scheme."""
    from bert_mgpu.data import ner_data

    tag_ids = trainer.predict(dataset).get("tag_ids", np.zeros([0, 0], np.int32))
    if len(tag_ids) != split.num_records:
        raise RuntimeError(f"predicted {len(tag_ids)} of {split.num_records} windows")
    return split.file_tags(ner_data.predicted_tags(split.model_sentences, split.windows,
                                                   tag_ids, data.labels))


def _predict_ner(job: Job, trainer, data, test) -> None:
    from bert_mgpu.data import ner_data

    job.weights_for_prediction(trainer)
    logging.info("***** Running prediction: %d sentences, %d windows, batch size %d *****",
                 len(test.sentences), test.num_records, job.cfg.predict_batch_size)
    tags = _predicted_file_tags(trainer, data, test, input_pipeline.record_dataset(
        [test.path], data.shapes, job.cfg.predict_batch_size, is_training=False))
    path = os.path.join(job.cfg.output_dir, "predictions.txt")
    ner_data.write_predictions(path, test.sentences, tags)
    missing = ner_data.words_without_pieces(test.model_sentences, test.windows)
    logging.info("Wrote %s: %d sentences, %d tokens (%d without a WordPiece, predicted O)",
                 path, len(test.sentences), sum(len(s.words) for s in test.sentences), missing)
