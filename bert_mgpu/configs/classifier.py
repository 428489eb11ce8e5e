"""The config of run_classifier_mgpu.py / run_classifier.py (one task or several)."""

import dataclasses
import os
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ClusterConfig,
    LengthBatching,
    ModelFiles,
    TrainConfig,
    TrainOptions,
    check_at_least,
    check_eval_during_training,
    check_fine_tuning,
    check_truncation,
    epochs_train_config,
    per_task,
    split_tasks,
)


@dataclasses.dataclass(frozen=True)
class TaskType:
    """What a --task_type means to every layer (the one registry of task types: the Task class
    of each type names its TaskType, tasks/classifier.TASK_CLASSES).

    Attributes:
      name: the --task_type value.
      label_feature: the records' label feature: "label_ids" (int64 [1], Google's) or
        "label_values" (float32 [label_width]).
      label_encoding: how an example's label becomes that feature: "index" (its position in
        the label list), "score" (the label as a float) or "multi_hot" (its comma-separated
        labels as 1.0 at their positions).
      default_metric: --best_metric when not given.
      hf_problem_type: Hugging Face's `problem_type` of an exported head (None: left to Hugging
        Face's inference from the labels, as its own classification folders do).
    """
    name: str
    label_feature: str
    label_encoding: str
    default_metric: str
    hf_problem_type: Optional[str] = None

    @property
    def has_label_names(self) -> bool:
        """Whether the head's outputs are named labels (a score is not)."""
        return self.label_encoding != "score"

    def label_width(self, num_labels: int) -> int:
        """The label feature's width for `num_labels` labels."""
        return num_labels if self.label_encoding == "multi_hot" else 1


TASK_TYPES = {t.name: t for t in (
    TaskType("classification", "label_ids", "index", "eval_accuracy"),
    TaskType("regression", "label_values", "score", "eval_pearson", "regression"),
    TaskType("multilabel", "label_values", "multi_hot", "eval_f1_micro",
             "multi_label_classification"),
)}


CLASSIFIER_INPUTS = ("pooled", "cls", "mean", "cls_last4")


# Tasks whose type is fixed by their data (the others are classification, or any with tsv).
TASK_TYPE_OF = {"stsb": "regression"}


# --window_pooling: how a long document's windows (--doc_stride) are pooled into its prediction.
WINDOW_POOLINGS = ("mean", "max")


# Multi-task fine-tuning: how the task of each global batch is drawn (data/multitask.py).
TASK_SAMPLINGS = ("proportional", "sqrt", "uniform")


def task_labels(task_names) -> list:
    """Each task's label in a multi-task run (its subdirectory OUTPUT_DIR/<label> and its head's
    scope `task_<label>/`): the task name, or `<name>_<index>` (its 0-based position in
    --task_name) for a name given more than once."""
    names = [n.lower() for n in task_names]
    return [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierConfig(LengthBatching):
    """run_classifier_mgpu.py (Google's flags, the fork's, and the trainer's; the length-aware
    batching flags of `LengthBatching`: on for every batch by default, the results are the
    padded run's up to float rounding, grouping changes the order of training examples)."""
    model: ModelFiles
    train: TrainOptions
    cluster: Optional[ClusterConfig] = None
    output_dir: str
    data_dir: str
    task_name: str
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    label_list: Optional[tuple] = None
    processors_file: Optional[str] = None  # users' DataProcessor classes (data/)
    text_columns: Optional[tuple] = None  # tsv: the text columns' names (data/processors.py)
    column_names: Optional[tuple] = None  # tsv: the columns of headerless files
    data_format: str = "tsv"  # tsv: "tsv" or "csv" files
    truncation: str = "head"
    head_tokens: int = 128
    # Long documents (data/classifier_data.py): 0 = Google's truncation; N > 0 = windows N
    # pieces apart, each document's windows pooled in eval and predict by `window_pooling`.
    doc_stride: int = 0
    window_pooling: str = "mean"
    layerwise_lr_decay: float = 1.0
    allow_random_weights: bool = False
    eval_every_n_steps: int = 0
    keep_best_checkpoint: bool = False
    best_metric: str = "eval_accuracy"
    early_stopping_patience: int = 0
    task_type: str = "classification"
    multilabel_threshold: float = 0.5
    classifier_input: str = "pooled"
    task_sampling: str = "proportional"
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_tasks(self) -> int:
        """Tasks trained together (comma-separated --task_name); 1 = Google's single task."""
        return len(split_tasks(self.task_name))

    def task_configs(self) -> list:
        """One single-task config per task of a multi-task run: its task name, data dir, task
        type, label list and --best_metric (each flag: one entry per task, or one for all;
        --label_list: label lists separated by ';'), its output_dir OUTPUT_DIR/<label> (see
        `task_labels`). A single-task run: [self].

        Raises:
          ValueError: a per-task flag has neither one entry nor one per task.
        """
        names = split_tasks(self.task_name)
        n = len(names)
        if n == 1:
            return [self]
        dirs = split_tasks(self.data_dir)
        if len(dirs) != n:
            raise ValueError(f"--data_dir has {len(dirs)} directories for {n} tasks "
                             f"(--task_name={self.task_name}): give one per task, "
                             f"comma-separated, in the same order")
        types = per_task(self.task_type, n, "task_type")
        metrics = per_task(self.best_metric, n, "best_metric")
        groups = ",".join(self.label_list or ()).split(";")
        if len(groups) not in (1, n):
            raise ValueError(f"--label_list has {len(groups)} label lists (separated by ';') "
                             f"for {n} tasks (--task_name): give one per task (empty for a "
                             f"task's default), or one for all")
        label_lists = [tuple(x.strip() for x in g.split(",") if x.strip()) or None
                       for g in (groups * n if len(groups) == 1 else groups)]
        return [dataclasses.replace(self, task_name=name, data_dir=d, task_type=t,
                                    best_metric=m, label_list=labels,
                                    output_dir=os.path.join(self.output_dir, label))
                for name, d, t, m, labels, label in zip(names, dirs, types, metrics,
                                                        label_lists, task_labels(names))]

    def train_config(self, num_train_examples: int = 0, num_workers: int = 1) -> TrainConfig:
        """The trainer's config; its steps come from the training set's size (the fork's
        formula over the global batch of every worker), warmup from `warmup_proportion`.

        Raises:
          ValueError: the training set makes no step.
        """
        return epochs_train_config(self, num_train_examples, num_workers,
                                   **self.length_batching(self.model.max_seq_length))

    def validate(self) -> None:
        check_fine_tuning(self)
        self._validate_windows()
        check_truncation(self.truncation, self.head_tokens, self.model.max_seq_length)
        check_eval_during_training(self, "dev.tsv")
        for task in self.task_configs():
            task._validate_task_type()
        if self.num_tasks > 1:
            self._validate_multitask()
        self.train.validate()
        self.validate_length_batching(self.train.shuffle_buffer_size)

    def _validate_windows(self) -> None:
        """--doc_stride and --window_pooling."""
        check_at_least(self, 0, "doc_stride")
        if self.window_pooling not in WINDOW_POOLINGS:
            raise ValueError(f"--window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, "
                             f"got {self.window_pooling!r}")
        if not self.doc_stride:
            return
        if self.truncation == "head_tail":
            raise ValueError(f"--doc_stride={self.doc_stride} keeps every piece of a long text "
                             f"in windows; --truncation=head_tail cuts it: choose one")
        budget = self.model.max_seq_length - 2
        if self.doc_stride > budget:
            raise ValueError(f"--doc_stride={self.doc_stride} must be <= --max_seq_length - 2 "
                             f"= {budget} (a window's text budget), or pieces would be skipped")
        if self.num_tasks > 1:
            raise ValueError("--doc_stride cannot be used with several --task_name yet "
                             "(windows are per task: train each task on its own)")

    def _validate_multitask(self) -> None:
        if self.task_sampling not in TASK_SAMPLINGS:
            raise ValueError(f"--task_sampling must be one of {', '.join(TASK_SAMPLINGS)}, got "
                             f"{self.task_sampling!r}")
        if self.train.batch_ramp_steps:
            raise ValueError("--batch_ramp_steps cannot be used with several --task_name: a "
                             "multi-task global batch is one task's, the ramp would re-cut it")
        if self.group_by_length:
            raise ValueError("--group_by_length cannot be used with several --task_name: "
                             "multi-task batches are drawn per task (data/multitask.py), not "
                             "grouped by length (--pad_to_longest still trims them)")

    def _validate_task_type(self) -> None:
        """--task_type / --multilabel_threshold / --classifier_input against the task."""
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"--task_type must be one of {', '.join(TASK_TYPES)}, got "
                             f"{self.task_type!r}")
        fixed = TASK_TYPE_OF.get(self.task_name.lower(), "classification")
        if self.task_name.lower() != "tsv" and self.task_type != fixed:
            raise ValueError(f"--task_type={self.task_type}: --task_name={self.task_name} is a "
                             f"{fixed} task (other task types need --task_name=tsv)")
        if not 0 < self.multilabel_threshold < 1:
            raise ValueError(f"--multilabel_threshold must be in (0, 1), got "
                             f"{self.multilabel_threshold}")
        if self.classifier_input not in CLASSIFIER_INPUTS:
            raise ValueError(f"--classifier_input must be one of {', '.join(CLASSIFIER_INPUTS)}, "
                             f"got {self.classifier_input!r}")
        if not TASK_TYPES[self.task_type].has_label_names and self.label_list:
            raise ValueError(f"--label_list does not apply to --task_type={self.task_type} (the "
                             f"label is a number)")
