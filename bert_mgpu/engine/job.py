"""What every training job does around its task, in one place.

A training job starts with `start_job(cfg)`: the tower devices (the first TensorFlow work of the
process: without a GPU it splits the CPU into logical devices), the cluster of a multi-machine
run, the model config checked against the flags, the output directory and the seed. The returned
`Job` then builds the trainer and the training input the same way for every task, and the chief
alone writes the effective config and the results; `read_splits`, `with_dropout_layout`,
`train_watched` and `eval_input` are the steps every fine-tuning job takes the same way.

A new job adds files and edits none: a script, a config whose fields declare their flags
(configs/<job>.py, registered in configs/registry.py's registry when it is exported), a data
module with its checks of the files the flags name (data/), a task module (tasks/) and, when it
is exported, a serving module (serving/). cli.py builds the script's flags from the config.
"""

import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu import summary
from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import input_pipeline
from bert_mgpu.engine import checkpoint, evaluation, towers, training
from bert_mgpu.engine.cluster import Cluster
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig, read_bert_config


@dataclasses.dataclass
class Job:
    """A started training job: its config, tower devices, cluster and model config."""
    cfg: Any
    devices: List[str]
    cluster: Optional[Cluster]
    bert_config: BertConfig
    # time.time() when the job started: the summary's duration and what counts as written.
    started: float = dataclasses.field(default_factory=time.time)

    @property
    def chief(self) -> bool:
        return self.cluster is None or self.cluster.is_chief

    @property
    def num_workers(self) -> int:
        return self.cluster.num_workers if self.cluster is not None else 1

    def save_effective_config(self, **extra) -> None:
        """run_config.json (every flag, plus `extra`) and bert_config.json: chief only. When
        --output_dir holds a run (a checkpoint) recorded with other values, one warning says
        that this run resumes it and which values differ."""
        if self.chief:
            run_config = dict(self.cfg.flags, **extra)
            warn_rerun_with_other_values(self.cfg.output_dir, run_config)
            training.save_effective_config(self.cfg.output_dir, run_config, self.bert_config)

    def print_summary(self, metric: Optional[str], result: Mapping[str, Any],
                      next_command: Optional[str],
                      checkpoint_use: str = "predict and export") -> None:
        """The run's closing summary (summary.py; chief only): `metric` of `result` (the final
        evaluation) and its best value during training (eval_history.tsv), what was written in
        --output_dir, the checkpoint a predict or export of the run uses
        (checkpoint.prediction_checkpoint; `checkpoint_use`: what uses it), and
        `next_command`."""
        if not self.chief:
            return
        out, lines = self.cfg.output_dir, []
        if metric and metric in result:
            lines.append(("result", f"{metric} = {float(result[metric]):.4f} at step "
                                    f"{result.get('global_step', '?')} (eval_results.txt)"))
        rows = [r for r in evaluation.read_history(out) if metric in r] if metric else []
        if rows:
            pick = min if evaluation.lower_is_better(metric) else max
            best = pick(rows, key=lambda r: r[metric])
            lines.append(("best", f"{metric} = {best[metric]:.4f} at step {best['step']} of "
                                  f"{len(rows)} evaluations (eval_history.tsv)"))
        prefix, which = checkpoint.prediction_checkpoint(out)
        summary.print_summary(
            self.started, lines, (out, summary.files_written(out, self.started)),
            f"{os.path.relpath(prefix, out)}: {which}, used by {checkpoint_use}"
            if prefix else None, next_command)

    def command(self, script: str, *args: str, **flags) -> str:
        """A command of `script` for the summary's next step: absolute paths shown relative to
        the working directory when under it."""
        shown = {name: summary.shown_path(value) if os.path.isabs(str(value)) else value
                 for name, value in flags.items()}
        return summary.command(script, *args, **shown)

    def export_command(self, task: Optional[str] = None) -> str:
        """export_saved_model.py of this run, into OUTPUT_DIR/export (`task`: its --task when
        not the classifier)."""
        out = self.cfg.output_dir
        return self.command("export_saved_model.py", output_dir=out,
                            export_dir=os.path.join(out, "export"),
                            **({"task": task} if task else {}))

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

    def periodic_evaluator(self, trainer: training.Trainer, evaluate: Callable[[], dict],
                           best_metric: Optional[str] = None
                           ) -> Optional[evaluation.PeriodicEvaluator]:
        """`--eval_every_n_steps`: the `on_step` callback of `trainer.train` that runs
        `evaluate` (the job's dev-set evaluation) every N updates and keeps the best checkpoint
        by `best_metric` (default --best_metric); None without the flag."""
        cfg = self.cfg
        if not cfg.eval_every_n_steps:
            return None
        return evaluation.PeriodicEvaluator(
            evaluate, trainer.variables, trainer.cfg.num_train_steps, cfg.output_dir,
            cfg.eval_every_n_steps, best_metric=best_metric or cfg.best_metric,
            keep_best=cfg.keep_best_checkpoint, patience=cfg.early_stopping_patience,
            is_chief=self.chief)

    def weights_for_prediction(self, trainer, keep_best_checkpoint: bool) -> None:
        """With `keep_best_checkpoint` (--keep_best_checkpoint), loads the kept best model into
        `trainer` (else the current weights predict); the log says which."""
        best = evaluation.best_checkpoint(self.cfg.output_dir) if keep_best_checkpoint else None
        if best is not None:
            checkpoint.restore_checkpoint(best, trainer.variables)
            logging.info("Predicting with the best checkpoint %s (--keep_best_checkpoint)", best)
        else:
            logging.info("Predicting with %s", checkpoint.describe_weights(
                self.cfg.output_dir, self.cfg.model.init_checkpoint,
                int(trainer.global_step.numpy())))

    def write_eval_results(self, result: Mapping) -> None:
        training.write_eval_results(os.path.join(self.cfg.output_dir, "eval_results.txt"),
                                    result)

    def layerwise_lr_multipliers(self, task) -> Optional[Dict[str, float]]:
        """--layerwise_lr_decay's learning-rate factor of each of `task`'s variables (the
        trainer's `lr_multipliers`); None when it is off (1.0)."""
        if self.cfg.layerwise_lr_decay == 1.0:
            return None
        return modeling.layerwise_lr_multipliers(task.named_variables(),
                                                 self.bert_config.num_hidden_layers,
                                                 self.cfg.layerwise_lr_decay)


# Flags that say what this invocation does or how much it logs, not what the run is: a rerun
# that changes them continues the same run.
_NOT_THE_RUN = frozenset((
    "do_train", "do_eval", "do_predict", "output_dir", "verbose", "log_every_n_steps",
    "eval_batch_size", "predict_batch_size", "max_eval_steps", "allow_random_weights",
    "save_checkpoints_steps", "keep_checkpoint_max", "use_tpu", "tpu_name", "tpu_zone",
    "gcp_project", "master", "num_tpu_cores", "iterations_per_loop", "use_one_hot_embeddings"))


def rerun_differences(recorded: Mapping[str, Any], run_config: Mapping[str, Any]) -> List[str]:
    """`name recorded -> now` for each value of `run_config` (this invocation's flags and
    extras) that differs from the run_config.json `recorded` by the run in the same
    --output_dir, except `_NOT_THE_RUN`; values compared as JSON stores them."""
    now = json.loads(json.dumps(dict(run_config), default=str))
    return [f"--{name} {recorded[name]!r} -> {now[name]!r}" for name in sorted(now)
            if name in recorded and name not in _NOT_THE_RUN and recorded[name] != now[name]]


def warn_rerun_with_other_values(output_dir: str, run_config: Mapping[str, Any]) -> None:
    """One warning when this invocation trains (--do_train) and `output_dir` holds a checkpoint
    of a run whose recorded values differ from `run_config`: the run is resumed (Google resumed
    silently), with what differs. (An eval or predict run only reads the checkpoint.)"""
    if not run_config.get("do_train"):
        return
    latest = checkpoint.latest_checkpoint(output_dir)
    differences = rerun_differences(checkpoint.read_run_config(output_dir), run_config) \
        if latest is not None else []
    if differences:
        logging.warning("--output_dir=%s holds a run (%s) recorded with other values: this "
                        "resumes that run, differing in %s; a new run needs another "
                        "--output_dir", output_dir, os.path.basename(latest),
                        ", ".join(differences))


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
    bert_config = read_bert_config(cfg.model)
    tf.io.gfile.makedirs(cfg.output_dir)
    tf.random.set_seed(cfg.train.random_seed)
    return Job(cfg, devices, cluster, bert_config)


def read_splits(cfg, read: Callable[[str], Any]) -> Dict[str, Any]:
    """"train", "dev", "test" -> `read(split)` for each split the run needs (--do_train,
    --do_eval, --do_predict of `cfg`), read in that order before any training."""
    return {split: read(split) for split, wanted in (
        ("train", cfg.do_train), ("dev", cfg.do_eval), ("test", cfg.do_predict)) if wanted}


def train_watched(job: Job, trainer: training.Trainer,
                  training_input: Callable[[], Any],
                  evaluate: Optional[Callable[[], dict]] = None,
                  best_metric: Optional[str] = None) -> evaluation.CollapseWatch:
    """What every fine-tuning job does before its final evaluation and prediction.

    With --do_train: trains on `training_input()` (called only then), the collapse watch
    recording each update's loss and, with --eval_every_n_steps, checking `evaluate()` (the
    job's dev-set evaluation; None: none during training) every N updates, the best checkpoint
    kept by `best_metric` (default --best_metric); the chief then judges the training loss.
    Without --do_train: restores the weights that evaluation and prediction use.

    Returns:
      The run's `CollapseWatch`, for the job's final evaluation (`watch.check`).
    """
    watch = evaluation.CollapseWatch(trainer.cfg, trainer.global_step, job.chief)
    if not job.cfg.do_train:
        trainer.restore_or_initialize()
        return watch
    periodic = None
    if evaluate is not None:
        periodic = job.periodic_evaluator(trainer, lambda: watch.check(evaluate()), best_metric)
    trainer.train(training_input(), on_step=watch.on_step(periodic))
    if job.chief:
        watch.after_training()
    return watch


def eval_input(cfg, input_files: Sequence[str], shapes, batch_size: int):
    """Evaluation/prediction batches of a fine-tuning task (`cfg`: its config, with the
    `LengthBatching` flags): every record once; sorted by length with --pad_to_longest (the
    trainer cuts each batch to its longest and puts the predictions back in file order)."""
    if cfg.pad_to_longest:
        return input_pipeline.length_sorted_dataset(input_files, shapes, batch_size)
    return input_pipeline.record_dataset(input_files, shapes, batch_size, is_training=False)


def with_dropout_layout(cfg, train_cfg, train_files):
    """`train_cfg` of a fine-tuning job (`cfg`: its config, with the `LengthBatching` flags)
    with dropout's layout length: the training files' longest example rounded up to
    --pad_to_multiple_of (input_pipeline.dropout_layout_length), padded or trimmed batches
    alike; unchanged without training files."""
    if not train_files:
        return train_cfg
    length = input_pipeline.dropout_layout_length(train_files, cfg.model.max_seq_length,
                                                  cfg.pad_multiple())
    logging.info("Dropout masks laid out over %d positions (the training set's longest example "
                 "rounded up to a multiple of %d; --max_seq_length=%d)", length,
                 cfg.pad_multiple(), cfg.model.max_seq_length)
    return dataclasses.replace(train_cfg, dropout_layout_length=length)
