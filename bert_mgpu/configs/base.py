"""Run configurations: what a job needs, built from flags by cli.py (by field name), never from
FLAGS below it. A job's config is composed of named subtrees, as cramming's `cfg.arch` /
`cfg.train`: `model` (ModelFiles), `train` (TrainOptions), `cluster` (ClusterConfig or None),
then the job's own fields (one module per job beside this one). Every `validate()` raises
ValueError naming the flag. No TensorFlow import: flags are checked before TensorFlow loads.
"""

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional

PRECISIONS = ("fp32", "fp16", "bf16")


OPTIMIZERS = ("adamw", "lamb")


LR_SCHEDULES = ("linear", "one_cycle")


TRUNCATIONS = ("head", "head_tail")


def check_truncation(truncation: str, head_tokens: int, max_seq_length: int) -> None:
    """--truncation and --head_tokens: head_tail must keep a tail at this --max_seq_length (with
    --head_tokens at or over the text's budget it would keep exactly what 'head' keeps)."""
    if truncation not in TRUNCATIONS:
        raise ValueError(f"--truncation must be one of {', '.join(TRUNCATIONS)}, got "
                         f"{truncation!r}")
    if head_tokens < 0:
        raise ValueError(f"--head_tokens must be >= 0, got {head_tokens}")
    budget = max_seq_length - 2
    if truncation == "head_tail" and head_tokens >= budget:
        raise ValueError(
            f"--truncation=head_tail keeps --head_tokens={head_tokens} pieces from the start "
            f"and the rest of --max_seq_length - 2 = {budget} from the end: that leaves no "
            f"tail (the same as --truncation=head); give fewer, e.g. --head_tokens="
            f"{round(budget / 4)} (a quarter, as Sun et al. 2019's 128 of 510)")


def split_tasks(value: Optional[str]) -> list:
    """A comma-separated per-task flag value -> its entries, stripped ('' -> [''])."""
    return [v.strip() for v in (value or "").split(",")]


def per_task(value: str, n: int, flag: str, what: str = "value") -> list:
    """One entry of a comma-separated flag per task: one entry applies to every task."""
    values = split_tasks(value)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"--{flag} has {len(values)} {what}s for {n} tasks (--task_name): give "
                         f"one for every task, or one for all")
    return values


def check_at_least(obj, minimum: int, *names: str) -> None:
    for name in names:
        if getattr(obj, name) < minimum:
            raise ValueError(f"--{name} must be >= {minimum}, got {getattr(obj, name)}")


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The files that define a model and how text becomes its input (Google's flags)."""
    bert_config_file: Optional[str] = None
    init_checkpoint: Optional[str] = None
    vocab_file: Optional[str] = None
    spm_model_file: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 128

    def validate(self, min_seq_length: int = 1, needs_tokenizer: bool = False) -> None:
        if needs_tokenizer and not self.vocab_file and not self.spm_model_file:
            raise ValueError("--vocab_file (or --spm_model_file) is required")
        if self.max_seq_length < min_seq_length:
            raise ValueError(f"--max_seq_length must be >= {min_seq_length}, got "
                             f"{self.max_seq_length}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """How to train, whatever the task and however long (the `train` subtree of a job).

    Batch semantics follow the multi-GPU fork: `train_batch_size` is per tower, one update sees
    `train_batch_size * n_gpus * num_accumulation_steps` examples (times the number of workers).
    """
    train_batch_size: int = 32
    n_gpus: int = 1
    num_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    optimizer: str = "adamw"
    # PyTorch/Hugging Face AdamW's bias-corrected moments for --optimizer=adamw (not Google's).
    adam_bias_correction: bool = False
    precision: str = "fp32"
    use_xla: bool = False
    xla_layers: bool = False
    gradient_checkpointing: bool = False
    clip_norm: float = 1.0
    # How an IndexedSlices gradient counts in the clipped global norm (see
    # optimization.clip_by_global_norm): "dense" (ours) or "values" (Google's TF1 clipping).
    indexed_slices_norm: str = "dense"
    # Cramming's schedules (off by default): "one_cycle" LR, and a batch ramp through
    # accumulation over the first `batch_ramp_steps` updates (0 = off).
    lr_schedule: str = "linear"
    batch_ramp_steps: int = 0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    log_every_n_steps: int = 100
    random_seed: int = 12345
    # 0: the whole training set in a fresh seeded permutation every epoch (in memory);
    # N >= 1: Google's record shuffle buffer (see input_pipeline.record_dataset).
    shuffle_buffer_size: int = 100

    @property
    def global_batch_size(self) -> int:
        """Examples per update on one worker."""
        return self.train_batch_size * self.n_gpus * self.num_accumulation_steps

    def validate(self) -> None:
        """Raises ValueError naming the flag of the first impossible value."""
        check_at_least(self, 1, "train_batch_size", "n_gpus", "num_accumulation_steps",
                        "save_checkpoints_steps", "log_every_n_steps")
        if self.precision not in PRECISIONS:
            raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}, "
                             f"got {self.precision!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"got {self.optimizer!r}")
        if self.adam_bias_correction and self.optimizer != "adamw":
            raise ValueError("--adam_bias_correction applies to --optimizer=adamw (LAMB always "
                             "corrects its moments)")
        if self.xla_layers and (self.use_xla or self.gradient_checkpointing):
            other = "--use_xla (which compiles the whole tower)" if self.use_xla else \
                "--gradient_checkpointing"
            raise ValueError(f"--xla_layers cannot be combined with {other}")
        if not self.learning_rate > 0:
            raise ValueError(f"--learning_rate must be > 0, got {self.learning_rate}")
        if not self.clip_norm > 0:
            raise ValueError(f"--clip_norm must be > 0, got {self.clip_norm}")
        if self.indexed_slices_norm not in ("dense", "values"):
            raise ValueError(f"--indexed_slices_norm must be dense or values, "
                             f"got {self.indexed_slices_norm!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"--lr_schedule must be one of {', '.join(LR_SCHEDULES)}, "
                             f"got {self.lr_schedule!r}")
        if self.batch_ramp_steps < 0:
            raise ValueError(f"--batch_ramp_steps must be >= 0, got {self.batch_ramp_steps}")
        check_at_least(self, 0, "shuffle_buffer_size")
        if self.batch_ramp_steps and self.num_accumulation_steps < 2:
            raise ValueError("--batch_ramp_steps ramps the number of accumulated micro-batches "
                             "up to --num_accumulation_steps, which must then be >= 2")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainOptions):
    """What the trainer needs: the options, plus where and for how long (`num_train_steps`
    counts updates). Jobs derive it with `TrainConfig.of(options, ...)`."""
    output_dir: str
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    init_checkpoint: Optional[str] = None
    # Length-aware batching (fine-tuning jobs' --pad_to_longest / --group_by_length): every
    # batch trimmed to its longest example rounded up to this multiple (0 = kept at the
    # records' length, max_seq_length), and training batches grouped by length.
    pad_to_multiple_of: int = 0
    group_by_length: bool = False
    # Dropout's layout length (0: none, masks drawn in each batch's own shape): fine-tuning
    # jobs set the training file's longest example rounded up to pad_to_multiple_of (at most
    # the records' length), so padded and trimmed batches get the same masks on real tokens.
    max_seq_length: int = 0

    @classmethod
    def of(cls, options: TrainOptions, **run) -> "TrainConfig":
        """The options plus `output_dir`, `num_train_steps`, `num_warmup_steps`,
        `init_checkpoint`."""
        return cls(**{f.name: getattr(options, f.name)
                      for f in dataclasses.fields(TrainOptions)}, **run)

    def validate(self) -> None:
        super().validate()
        check_at_least(self, 1, "num_train_steps")
        check_at_least(self, 0, "num_warmup_steps", "pad_to_multiple_of")
        if self.pad_to_multiple_of and self.max_seq_length < 1:
            raise ValueError("pad_to_multiple_of needs the records' max_seq_length")
        check_group_by_length(self.group_by_length, self.shuffle_buffer_size)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """The workers of a multi-machine job and this process's place among them."""
    worker_hosts: tuple
    task_index: int
    timeout_seconds: float = 300.0

    @property
    def num_workers(self) -> int:
        return len(self.worker_hosts)

    @property
    def is_chief(self) -> bool:
        return self.task_index == 0

    def tf_config(self) -> str:
        return json.dumps({"cluster": {"worker": list(self.worker_hosts)},
                           "task": {"type": "worker", "index": self.task_index}})


def resolve_cluster(worker_hosts: Optional[str] = None, task_index: Optional[int] = None,
                    timeout_seconds: float = 300.0,
                    environ: Mapping[str, str] = os.environ) -> Optional[ClusterConfig]:
    """The cluster from the flags, else from TF_CONFIG; None for a single process.

    Raises:
      ValueError: naming the flag or TF_CONFIG when they are inconsistent.
    """
    if worker_hosts:
        hosts = tuple(h.strip() for h in worker_hosts.split(",") if h.strip())
        if task_index is None or not 0 <= task_index < len(hosts):
            raise ValueError(f"--task_index must be in [0, {len(hosts)}) with --worker_hosts "
                             f"of {len(hosts)} workers, got {task_index}")
        for host in hosts:
            if ":" not in host:
                raise ValueError(f"--worker_hosts: {host!r} is not host:port")
        config = ClusterConfig(hosts, task_index, timeout_seconds)
    elif environ.get("TF_CONFIG"):
        try:
            tf_config = json.loads(environ["TF_CONFIG"])
            hosts = tuple(tf_config["cluster"]["worker"])
            task = tf_config["task"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"TF_CONFIG: expected {{'cluster': {{'worker': [...]}}, 'task': "
                             f"{{'type': 'worker', 'index': i}}}} ({e})") from None
        if set(tf_config["cluster"]) - {"worker", "chief"} or "chief" in tf_config["cluster"]:
            raise ValueError("TF_CONFIG: only a 'worker' job is supported (worker 0 is the "
                             "chief); no parameter servers")
        if task.get("type") != "worker" or not 0 <= int(task.get("index", -1)) < len(hosts):
            raise ValueError(f"TF_CONFIG: task {task} is not one of the {len(hosts)} workers")
        config = ClusterConfig(hosts, int(task["index"]), timeout_seconds)
    else:
        return None
    if config.num_workers == 1:
        return None
    return config


def num_train_steps_for(num_examples: int, global_batch_size: int, epochs: float) -> int:
    """The fork's formula: int(examples / global batch * epochs)."""
    return int(num_examples / global_batch_size * epochs)


def epochs_train_config(cfg, num_items: int, num_workers: int, items: str = "examples",
                        source: str = "", **length_batching) -> TrainConfig:
    """A fine-tuning job's TrainConfig: steps = the fork's formula over the global batch of
    every worker, warmup `warmup_proportion` of them (`cfg` has train, output_dir, model,
    do_train, num_train_epochs, warmup_proportion); `length_batching`: the TrainConfig fields
    of a job that trims batches (pad_to_multiple_of, group_by_length, max_seq_length).

    Raises:
      ValueError: training was asked for and the training set makes no step.
    """
    global_batch = cfg.train.global_batch_size * num_workers
    steps = num_train_steps_for(num_items, global_batch, cfg.num_train_epochs)
    if cfg.do_train and steps < 1:
        raise ValueError(f"{num_items} training {items}{source} and --num_train_epochs="
                         f"{cfg.num_train_epochs} make 0 steps of {global_batch} {items} "
                         f"(train_batch_size x n_gpus x num_accumulation_steps x workers)")
    steps = max(steps, 1)  # evaluation or prediction only: no schedule is run
    return TrainConfig.of(cfg.train, output_dir=cfg.output_dir, num_train_steps=steps,
                          num_warmup_steps=int(steps * cfg.warmup_proportion),
                          init_checkpoint=cfg.model.init_checkpoint, **length_batching)


def check_group_by_length(group_by_length: bool, shuffle_buffer_size: int) -> None:
    if group_by_length and shuffle_buffer_size != 0:
        raise ValueError("--group_by_length needs --shuffle_buffer_size=0 (the whole training "
                         "set, in memory, grouped every epoch)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LengthBatching:
    """The length-aware batching flags of the fine-tuning jobs (run_classifier_mgpu.py,
    run_ner.py, run_squad.py), one definition for all: with `pad_to_longest` every batch,
    training, evaluation and prediction, is cut to its longest example rounded up to
    `pad_to_multiple_of` (TrainConfig.pad_to_multiple_of); `group_by_length` also groups the
    training batches by length. A job's config derives from it (a job may change a default)."""
    pad_to_longest: bool = True
    pad_to_multiple_of: int = 16
    group_by_length: bool = False

    def length_batching(self, max_seq_length: int) -> Dict[str, Any]:
        """The TrainConfig fields of these flags (`epochs_train_config`'s `length_batching`),
        for records of `max_seq_length`; none without --pad_to_longest."""
        if not self.pad_to_longest:
            return {}
        return dict(pad_to_multiple_of=self.pad_to_multiple_of,
                    group_by_length=self.group_by_length, max_seq_length=max_seq_length)

    def validate_length_batching(self, shuffle_buffer_size: int) -> None:
        """Raises ValueError naming the flag (one line)."""
        check_at_least(self, 1, "pad_to_multiple_of")
        if self.group_by_length and not self.pad_to_longest:
            raise ValueError("--group_by_length needs --pad_to_longest (grouped batches are "
                             "only faster when trimmed)")
        check_group_by_length(self.group_by_length, shuffle_buffer_size)


def check_epochs(cfg) -> None:
    if not cfg.num_train_epochs > 0:
        raise ValueError(f"--num_train_epochs must be > 0, got {cfg.num_train_epochs}")
    if not 0 <= cfg.warmup_proportion < 1:
        raise ValueError(f"--warmup_proportion must be in [0, 1), got {cfg.warmup_proportion}")


def check_fine_tuning(cfg) -> None:
    """The checks the classifier and the tagger share: a tokenizer, something to do, batch
    sizes, epochs and warmup, layer-wise LR decay."""
    cfg.model.validate(min_seq_length=3, needs_tokenizer=True)
    if not (cfg.do_train or cfg.do_eval or cfg.do_predict):
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    check_at_least(cfg, 1, "eval_batch_size", "predict_batch_size")
    check_epochs(cfg)
    if not 0 < cfg.layerwise_lr_decay <= 1:
        raise ValueError(f"--layerwise_lr_decay must be in (0, 1], got {cfg.layerwise_lr_decay}")


def check_eval_during_training(cfg, dev_file: str) -> None:
    check_at_least(cfg, 0, "eval_every_n_steps", "early_stopping_patience")
    if (cfg.keep_best_checkpoint or cfg.early_stopping_patience) and not cfg.eval_every_n_steps:
        raise ValueError("--keep_best_checkpoint and --early_stopping_patience need "
                         "--eval_every_n_steps")
    if cfg.eval_every_n_steps and not (cfg.do_train and cfg.do_eval):
        raise ValueError(f"--eval_every_n_steps evaluates {dev_file} during training: it needs "
                         f"--do_train and --do_eval")
