"""The config of run_classifier_mgpu.py / run_classifier.py (one task or several) and its
flags."""

import dataclasses
import os
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ALLOW_RANDOM_WEIGHTS,
    DO_EVAL,
    DO_PREDICT,
    DO_TRAIN,
    DOC_STRIDE,
    EVAL_BATCH_SIZE,
    FINE_TUNING_FLAGS,
    HEAD_TOKENS,
    LABEL_LIST,
    LAYERWISE_LR_DECAY,
    NUM_TRAIN_EPOCHS,
    OUTPUT_DIR,
    PREDICT_BATCH_SIZE,
    TRUNCATION,
    WARMUP_PROPORTION,
    ClusterConfig,
    ClusterOptions,
    EvalDuringTraining,
    Flag,
    LengthBatching,
    ModelFiles,
    TpuCompatibility,
    TrainConfig,
    TrainOptions,
    Verbosity,
    as_tuple,
    check_at_least,
    check_eval_during_training,
    check_fine_tuning,
    check_truncation,
    epochs_train_config,
    flag_values,
    per_task,
    split_tasks,
    subtree,
)
from bert_mgpu.configs.registry import RegisteredTask, register


@dataclasses.dataclass(frozen=True)
class TaskType:
    """What a --task_type means to every layer (the one registry of task types: the Task class
    of each type names its TaskType and so registers in tasks/classifier.TASK_CLASSES).

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


register(RegisteredTask(
    "classifier", "'classifier' (probabilities, label_id, label)",
    serving="bert_mgpu.serving.classifier", types=TASK_TYPES, int8=True))


CLASSIFIER_INPUTS = ("pooled", "cls", "mean", "cls_last4")


# Tasks whose type is fixed by their data (the others are classification, or any with tsv).
TASK_TYPE_OF = {"stsb": "regression"}


# --window_pooling: how a long document's windows (--doc_stride) are pooled into its prediction.
WINDOW_POOLINGS = ("mean", "max")
WINDOW_POOLING = Flag("enum", "mean", "With --doc_stride: how a document's windows are pooled "
                                      "into its prediction in eval and predict: the mean or the "
                                      "max of the windows' probabilities (regression: scores; "
                                      "multilabel: sigmoid probabilities). Default mean.",
                      WINDOW_POOLINGS)


# Multi-task fine-tuning: how the task of each global batch is drawn (data/multitask.py).
TASK_SAMPLINGS = ("proportional", "sqrt", "uniform")


def task_labels(task_names) -> list:
    """Each task's label in a multi-task run (its subdirectory OUTPUT_DIR/<label> and its head's
    scope `task_<label>/`): the task name, or `<name>_<index>` (its 0-based position in
    --task_name) for a name given more than once."""
    names = [n.lower() for n in task_names]
    return [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierConfig(LengthBatching, EvalDuringTraining):
    """run_classifier_mgpu.py (Google's flags, the fork's, and the trainer's; the length-aware
    batching flags of `LengthBatching`: on for every batch by default, the results are the
    padded run's up to float rounding, grouping changes the order of training examples)."""
    required_flags = ("data_dir", "task_name", "bert_config_file", "output_dir")
    accepted_flags = (TpuCompatibility, Verbosity)
    narrowed_flags = FINE_TUNING_FLAGS
    model: ModelFiles = subtree(ModelFiles)
    train: TrainOptions = subtree(TrainOptions)
    cluster: Optional[ClusterConfig] = subtree(ClusterOptions, default=None)
    output_dir: str = OUTPUT_DIR.field(required=True)
    data_dir: str = Flag("string", None, "The input data dir. Should contain the .tsv files (or "
                                         "other data files) for the task. Several tasks: one "
                                         "dir per task, comma-separated.").field(required=True)
    task_name: str = Flag("string", None, "The name of the task to train: cola, mnli, mrpc, "
                                          "xnli, stsb (GLUE's STS-B, a regression), or tsv "
                                          "(your own train/dev/test.tsv with a header row; see "
                                          "--task_type). Comma-separated names train several "
                                          "tasks at once on one encoder (multi-task; --data_dir "
                                          "one dir per task).",
                          convert=str.lower).field(required=True)
    do_train: bool = DO_TRAIN.field()
    do_eval: bool = DO_EVAL.field()
    do_predict: bool = DO_PREDICT.field()
    eval_batch_size: int = EVAL_BATCH_SIZE.field()
    predict_batch_size: int = PREDICT_BATCH_SIZE.field()
    num_train_epochs: float = NUM_TRAIN_EPOCHS.field()
    warmup_proportion: float = WARMUP_PROPORTION.field()
    label_list: Optional[tuple] = LABEL_LIST.field()
    # Users' DataProcessor classes (data/user_processors.py).
    processors_file: Optional[str] = Flag(
        "string", None, "A Python file with your own DataProcessor classes, written as for "
                        "Google's run_classifier.py (import tokenization, from run_classifier "
                        "import DataProcessor, InputExample, tf.gfile): --task_name=high_level "
                        "or =HighLevelProcessor picks class HighLevelProcessor.").field()
    # tsv: the text columns' names, the columns of headerless files, "tsv" or "csv" files
    # (data/processors.py).
    text_columns: Optional[tuple] = Flag(
        "list", None, "tsv task: the text column(s) by name (text_a[,text_b]); other columns "
                      "are ignored. Default: the columns named text_a/text/sentence/... and "
                      "text_b/sentence2/..., any other column besides 'label' being an error.",
        convert=as_tuple).field()
    column_names: Optional[tuple] = Flag(
        "list", None, "tsv task: the files have no header row; these are their columns' names, "
                      "e.g. id,text,label.", convert=as_tuple).field()
    data_format: str = Flag("enum", "tsv", "tsv task: 'tsv' (train.tsv ..., tab-separated, no "
                                           "quoting, as Google's) or 'csv' (train.csv ..., "
                                           "comma-separated, quoted fields may hold commas and "
                                           "newlines).", ("tsv", "csv")).field()
    truncation: str = TRUNCATION.field()
    head_tokens: int = HEAD_TOKENS.field()
    # Long documents (data/classifier_data.py): 0 = Google's truncation; N > 0 = windows N
    # pieces apart, each document's windows pooled in eval and predict by `window_pooling`.
    doc_stride: int = DOC_STRIDE.field(
        default=0,
        help="0 (default): a text longer than max_seq_length is truncated (Google). N > 0: it "
             "becomes windows of max_seq_length - 2 pieces starting N pieces apart (the last one "
             "ending at the text's end; with a text_b, windows over text_a with text_b in each); "
             "training sees every window with the document's label, each document weighted "
             "once; eval and predict pool each document's windows (--window_pooling), one output "
             "line per document.")
    window_pooling: str = WINDOW_POOLING.field()
    layerwise_lr_decay: float = LAYERWISE_LR_DECAY.field()
    allow_random_weights: bool = ALLOW_RANDOM_WEIGHTS.field()
    task_type: str = Flag("string", "classification",
                          "tsv task: classification (one label per row, softmax), regression (a "
                          "number, mean squared error) or multilabel (comma-separated labels, "
                          "sigmoid). --task_name=stsb is regression. Several tasks: one type per "
                          "task, comma-separated, or one for all.").field()
    multilabel_threshold: float = Flag("float", 0.5, "--task_type=multilabel: a label is "
                                                     "predicted when its probability is above "
                                                     "this.").field()
    classifier_input: str = Flag("enum", "pooled", "What the output layer reads: pooled "
                                                   "(Google: tanh(dense([CLS]))), cls (the last "
                                                   "layer's [CLS] vector, no pooler), mean (the "
                                                   "masked mean of the last layer), cls_last4 "
                                                   "(the [CLS] vectors of the last 4 layers "
                                                   "concatenated: width 4H).",
                                 CLASSIFIER_INPUTS).field()
    task_sampling: str = Flag("enum", "proportional", "Several tasks: how the task of each "
                                                      "global batch is drawn (a function of "
                                                      "--random_seed and the step): "
                                                      "proportional to its training examples, "
                                                      "sqrt (to their square root), uniform.",
                              TASK_SAMPLINGS).field()
    flags: Dict[str, Any] = flag_values()

    @classmethod
    def build(cls, values, given) -> "ClassifierConfig":
        """--task_type where the task fixes it (stsb: regression) and --best_metric's default
        per task type (eval_accuracy is a classification metric), unless given on the command
        line; per task of a multi-task run (comma-separated)."""
        values = dict(values)
        if "task_type" in given:
            task_types = split_tasks(values["task_type"])
        else:
            task_types = [TASK_TYPE_OF.get(name, values["task_type"])
                          for name in split_tasks(values["task_name"])]
            values["task_type"] = ",".join(task_types)
        if "best_metric" not in given:
            # An unknown type keeps the flag's default: validate() names it.
            values["best_metric"] = ",".join(
                TASK_TYPES[t].default_metric if t in TASK_TYPES else values["best_metric"]
                for t in task_types)
        return cls(**values)

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
        # A --processors_file class may be multilabel: checked with the file
        # (data/user_processors.py), which a config does not read.
        if self.task_name.lower() != "tsv" and self.task_type != fixed and \
                not self.processors_file:
            raise ValueError(f"--task_type={self.task_type}: --task_name={self.task_name} is a "
                             f"{fixed} task (other task types need --task_name=tsv, or a "
                             f"--processors_file class with --task_type=multilabel)")
        if not 0 < self.multilabel_threshold < 1:
            raise ValueError(f"--multilabel_threshold must be in (0, 1), got "
                             f"{self.multilabel_threshold}")
        if self.classifier_input not in CLASSIFIER_INPUTS:
            raise ValueError(f"--classifier_input must be one of {', '.join(CLASSIFIER_INPUTS)}, "
                             f"got {self.classifier_input!r}")
        if not TASK_TYPES[self.task_type].has_label_names and self.label_list:
            raise ValueError(f"--label_list does not apply to --task_type={self.task_type} (the "
                             f"label is a number)")
