"""What every training job does first, and the pieces every job builds the same way.

A training job starts with `start_job(cfg)`: the tower devices (the first TensorFlow work of the
process: without a GPU it splits the CPU into logical devices), the cluster of a multi-machine
run, the model config checked against the flags, the output directory and the seed. The returned
`Job` then builds the trainer and the training input the same way for every task, and the chief
alone writes the effective config and the results. A new job is: a script, a flag group
(cli.py), a config (configs/), a data module (data/) and a task module (tasks/).
"""

import dataclasses
import os
from typing import Any, Callable, List, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import input_pipeline
from bert_mgpu.engine import checkpoint, evaluation, towers, training
from bert_mgpu.engine.cluster import Cluster
from bert_mgpu.model.bert_config import BertConfig, read_bert_config


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
    bert_config = read_bert_config(cfg.model)
    tf.io.gfile.makedirs(cfg.output_dir)
    tf.random.set_seed(cfg.train.random_seed)
    return Job(cfg, devices, cluster, bert_config)
