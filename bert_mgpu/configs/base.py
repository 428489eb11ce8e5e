"""Configuration objects: `BertConfig` (Google's `bert_config.json`) and run configs.

`BertConfig` reads and writes exactly Google's JSON keys. Keys it does not know (for example
`pooler_fc_size`, `directionality` in Google's Chinese config) are kept and written back, never
fatal, so a config round-trips unchanged.

Model options of BERT's successors are more keys of the same file (`MODEL_OPTIONS`); they live in
`extra` like any other key, so a config is written back exactly as read, and a config without
them is Google's BERT (same variables, same numerics):

  key                       default     meaning
  embedding_size            hidden_size ALBERT: word/position/type embeddings of this width,
                                        projected to hidden_size (`embedding_hidden_mapping_in`)
  share_parameters          "none"      ALBERT: "all", "attention" or "ffn" sub-blocks shared
                                        by every layer (ALBERT's `num_hidden_groups: 1` = "all")
  pre_layer_norm            false       Cramming: LayerNorm before each sub-block, plus a final one
  use_bias                  true        Cramming (false): no biases in Q/K/V, attention output
                                        and feed-forward dense layers
  position_embedding_type   "learned"   Cramming: "scaled_sinusoidal", a fixed sinusoid table
                                        times one learned scale
  gated_ffn                 false       Cramming: gated feed-forward; intermediate_size is the
                                        width of the first dense layer, half of it goes on
"""

import copy
import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional

# Google's keys and defaults (modeling.BertConfig.__init__), in Google's order.
_GOOGLE_DEFAULTS = (
    ("vocab_size", None),
    ("hidden_size", 768),
    ("num_hidden_layers", 12),
    ("num_attention_heads", 12),
    ("intermediate_size", 3072),
    ("hidden_act", "gelu"),
    ("hidden_dropout_prob", 0.1),
    ("attention_probs_dropout_prob", 0.1),
    ("max_position_embeddings", 512),
    ("type_vocab_size", 16),
    ("initializer_range", 0.02),
)


# The model options (module docstring) and their defaults; `None` = see the property.
MODEL_OPTIONS = (
    ("embedding_size", None),
    ("share_parameters", "none"),
    ("pre_layer_norm", False),
    ("use_bias", True),
    ("position_embedding_type", "learned"),
    ("gated_ffn", False),
)
SHARE_PARAMETERS = ("none", "all", "attention", "ffn")
POSITION_EMBEDDING_TYPES = ("learned", "scaled_sinusoidal")


class BertConfigError(ValueError):
    """A `bert_config.json` that cannot describe a model; the message names the file and key."""


@dataclasses.dataclass
class BertConfig:
    """Configuration of a `BertModel`, with Google's attribute names and defaults.

    Attributes are Google's: `vocab_size`, `hidden_size`, `num_hidden_layers`,
    `num_attention_heads`, `intermediate_size`, `hidden_act`, `hidden_dropout_prob`,
    `attention_probs_dropout_prob`, `max_position_embeddings`, `type_vocab_size`,
    `initializer_range`. Unknown JSON keys live in `extra` and are also readable as attributes.
    """

    vocab_size: Optional[int] = None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getattr__(self, name):
        # Only called when normal lookup fails: expose unknown JSON keys as attributes.
        extra = self.__dict__.get("extra", {})
        if name in extra:
            return extra[name]
        raise AttributeError(name)

    # -- model options (read from `extra`; absent = Google's BERT) ------------------------------

    @property
    def embedding_size(self) -> int:
        """Width of the embedding tables (ALBERT's E); `hidden_size` when not factorized."""
        value = self.extra.get("embedding_size")
        return self.hidden_size if value is None else value

    @property
    def share_parameters(self) -> str:
        """One of "none", "all", "attention", "ffn". ALBERT's own configs say
        `num_hidden_groups: 1` (one group of layers: everything shared), which reads as "all"."""
        if "share_parameters" in self.extra:
            return self.extra["share_parameters"]
        if self.extra.get("num_hidden_groups") == 1:
            return "all"
        return "none"

    @property
    def pre_layer_norm(self) -> bool:
        return self.extra.get("pre_layer_norm", False)

    @property
    def use_bias(self) -> bool:
        return self.extra.get("use_bias", True)

    @property
    def position_embedding_type(self) -> str:
        return self.extra.get("position_embedding_type", "learned")

    @property
    def gated_ffn(self) -> bool:
        return self.extra.get("gated_ffn", False)

    def _validate_model_options(self, source: str) -> None:
        extra = self.extra
        for key in ("pre_layer_norm", "use_bias", "gated_ffn"):
            if key in extra and not isinstance(extra[key], bool):
                raise BertConfigError(f"{source}: '{key}' must be true or false, "
                                      f"got {extra[key]!r}")
        if extra.get("embedding_size") is not None:
            value = extra["embedding_size"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BertConfigError(
                    f"{source}: 'embedding_size' must be an integer >= 1, got {value!r}")
        if self.share_parameters not in SHARE_PARAMETERS:
            raise BertConfigError(f"{source}: 'share_parameters' must be one of "
                                  f"{', '.join(SHARE_PARAMETERS)}, got {self.share_parameters!r}")
        # ALBERT's grouping keys: only the layouts ALBERT released (one group, one inner block).
        groups = extra.get("num_hidden_groups")
        if groups is not None and groups != 1 and "share_parameters" not in extra:
            raise BertConfigError(
                f"{source}: 'num_hidden_groups' = {groups!r} is not supported (1 = all layers "
                f"share their parameters); use 'share_parameters' instead")
        if extra.get("inner_group_num", 1) != 1:
            raise BertConfigError(f"{source}: 'inner_group_num' must be 1, got "
                                  f"{extra['inner_group_num']!r}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise BertConfigError(
                f"{source}: 'position_embedding_type' must be one of "
                f"{', '.join(POSITION_EMBEDDING_TYPES)}, got {self.position_embedding_type!r}")
        if self.position_embedding_type == "scaled_sinusoidal" and self.embedding_size % 2:
            raise BertConfigError(
                f"{source}: 'position_embedding_type' scaled_sinusoidal needs an even embedding "
                f"width (sine and cosine pairs), got {self.embedding_size}")
        if self.gated_ffn and self.intermediate_size % 2:
            raise BertConfigError(
                f"{source}: 'gated_ffn' splits intermediate_size into value and gate halves; it "
                f"must be even, got {self.intermediate_size}")

    @classmethod
    def from_dict(cls, json_object: Dict[str, Any], source: str = "<dict>") -> "BertConfig":
        """Builds a config from a dict of Google's keys; unknown keys go to `extra`."""
        if not isinstance(json_object, dict):
            raise BertConfigError(f"{source}: expected a JSON object, got {type(json_object).__name__}")
        known = {name for name, _ in _GOOGLE_DEFAULTS}
        kwargs = {k: v for k, v in json_object.items() if k in known}
        extra = {k: v for k, v in json_object.items() if k not in known}
        config = cls(**kwargs, extra=copy.deepcopy(extra))
        config.validate(source)
        return config

    @classmethod
    def from_json_file(cls, json_file: str) -> "BertConfig":
        """Reads Google's `bert_config.json`; errors name the file."""
        if "://" not in json_file:  # local: no TensorFlow (config builders check it at start)
            if not os.path.isfile(json_file):
                raise BertConfigError(f"{json_file}: bert_config file not found")
            with open(json_file, "rb") as reader:
                data = reader.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise BertConfigError(f"{json_file}: not a UTF-8 JSON file") from None
        else:
            import tensorflow as tf  # gs:// etc. go through tf.io.gfile

            if not tf.io.gfile.exists(json_file):
                raise BertConfigError(f"{json_file}: bert_config file not found")
            with tf.io.gfile.GFile(json_file, "r") as reader:
                text = reader.read()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise BertConfigError(f"{json_file}:{e.lineno}: invalid JSON ({e.msg})") from None
        return cls.from_dict(obj, source=json_file)

    def validate(self, source: str = "<config>") -> None:
        """Checks the values a model needs; raises `BertConfigError` naming the key."""
        def need_int(key, minimum=1):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise BertConfigError(
                    f"{source}: '{key}' must be an integer >= {minimum}, got {value!r}")

        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            need_int(key)
        if self.hidden_size % self.num_attention_heads:
            raise BertConfigError(
                f"{source}: hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise BertConfigError(f"{source}: '{key}' must be in [0, 1), got {value!r}")
        self._validate_model_options(source)

    def to_dict(self) -> Dict[str, Any]:
        """Google's keys in Google's order, then the unknown keys as read."""
        output = {name: getattr(self, name) for name, _ in _GOOGLE_DEFAULTS}
        output.update(copy.deepcopy(self.extra))
        return output

    def to_json_string(self) -> str:
        """Serializes like Google's `BertConfig.to_json_string` (indent 2, sorted keys)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file: str) -> None:
        """Writes the config atomically (temporary file, then rename)."""
        directory = os.path.dirname(os.path.abspath(json_file))
        os.makedirs(directory, exist_ok=True)
        tmp = json_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())
        os.replace(tmp, json_file)

    def replace(self, **changes) -> "BertConfig":
        """A copy with some fields changed (e.g. dropout off for evaluation)."""
        return dataclasses.replace(self, extra=copy.deepcopy(self.extra), **changes)


# ---------------------------------------------------------------------------------------------
# Run configurations: what a job needs, built from flags by cli.py (by field name), never from
# FLAGS below it. A job's config is composed of named subtrees, as cramming's `cfg.arch` /
# `cfg.train`: `model` (ModelFiles), `train` (TrainOptions), `cluster` (ClusterConfig or None),
# then the job's own fields. Every `validate()` raises ValueError naming the flag.

PRECISIONS = ("fp32", "fp16", "bf16")
OPTIMIZERS = ("adamw", "lamb")
LR_SCHEDULES = ("linear", "one_cycle")
TRUNCATIONS = ("head", "head_tail")
# run_classifier_mgpu.py --task_type and --classifier_input (see tasks.py).
TASK_TYPES = ("classification", "regression", "multilabel")
CLASSIFIER_INPUTS = ("pooled", "cls", "mean", "cls_last4")
# Tasks whose type is fixed by their data (the others are classification, or any with tsv).
TASK_TYPE_OF = {"stsb": "regression"}
# export_saved_model.py --length_chunks (see export.py).
DEFAULT_LENGTH_CHUNKS = 4
# Multi-task fine-tuning: how the task of each global batch is drawn (data/multitask.py).
TASK_SAMPLINGS = ("proportional", "sqrt", "uniform")


def split_tasks(value: Optional[str]) -> list:
    """A comma-separated per-task flag value -> its entries, stripped ('' -> [''])."""
    return [v.strip() for v in (value or "").split(",")]


def task_labels(task_names) -> list:
    """Each task's label in a multi-task run (its subdirectory OUTPUT_DIR/<label> and its head's
    scope `task_<label>/`): the task name, or `<name>_<index>` (its 0-based position in
    --task_name) for a name given more than once."""
    names = [n.lower() for n in task_names]
    return [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]


def head_scope(label: str) -> str:
    """The variable scope of task `label`'s head in a multi-task run (`task_<label>/`)."""
    return f"task_{label}"


@dataclasses.dataclass(frozen=True)
class ClassifierHeadSpec:
    """Which classifier head of a run an export serves, and how (see `classifier_head_of_run`).

    Attributes:
      scope: "" (Google's root-level `output_weights`/`output_bias`) or `task_<label>`.
      task_type: one of TASK_TYPES.
      labels: the head's label names in id order, or None when the run did not record them.
      multilabel_threshold: --multilabel_threshold of the run.
      classifier_input: --classifier_input of the run.
    """
    scope: str = ""
    task_type: str = "classification"
    labels: Optional[tuple] = None
    multilabel_threshold: float = 0.5
    classifier_input: str = "pooled"


def classifier_head_of_run(run: Mapping[str, Any], variable_names, task_label: Optional[str],
                           source: str) -> ClassifierHeadSpec:
    """The classifier head an export takes from a run of run_classifier_mgpu.py.

    Args:
      run: the run's run_config.json ({} when there is none).
      variable_names: the checkpoint's variable names (a multi-task run's heads are its
        `task_<label>/output_bias`, also without run_config.json).
      task_label: --task_label (None or "": not given).
      source: what to name in errors (the run directory or checkpoint).

    Raises:
      ValueError: a multi-task run without --task_label or with an unknown one, or --task_label
        for a single-task run; one line naming the flag and the run's task labels.
    """
    in_checkpoint = sorted(n[len(head_scope("")):-len("/output_bias")] for n in variable_names
                           if n.startswith(head_scope("")) and n.endswith("/output_bias")
                           and n.count("/") == 1)
    tasks = {t["label"]: t for t in run.get("tasks", ())}
    task_labels_of_run = list(tasks) or in_checkpoint
    shared = dict(multilabel_threshold=float(run.get("multilabel_threshold", 0.5)),
                  classifier_input=run.get("classifier_input", "pooled"))
    if not task_labels_of_run:
        if task_label:
            raise ValueError(f"--task_label={task_label}: {source} is not a multi-task run (its "
                             f"head is the root-level output_weights/output_bias)")
        labels = run.get("labels")
        return ClassifierHeadSpec(task_type=run.get("task_type", "classification"),
                                  labels=tuple(labels) if labels else None, **shared)
    if not task_label:
        raise ValueError(f"{source} is a multi-task run: choose the task to export with "
                         f"--task_label (one of {', '.join(task_labels_of_run)})")
    if task_label not in task_labels_of_run:
        raise ValueError(f"--task_label={task_label} is not a task of {source} (its tasks: "
                         f"{', '.join(task_labels_of_run)})")
    task = tasks.get(task_label, {})
    labels = task.get("labels")
    return ClassifierHeadSpec(scope=head_scope(task_label),
                              task_type=task.get("task_type", "classification"),
                              labels=tuple(labels) if labels else None, **shared)


def _per_task(value: str, n: int, flag: str, what: str = "value") -> list:
    """One entry of a comma-separated flag per task: one entry applies to every task."""
    values = split_tasks(value)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"--{flag} has {len(values)} {what}s for {n} tasks (--task_name): give "
                         f"one for every task, or one for all")
    return values


def _check_at_least(obj, minimum: int, *names: str) -> None:
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

    def bert_config(self) -> BertConfig:
        """Reads `bert_config_file` and checks that `max_seq_length` fits the model.

        Raises:
          BertConfigError: the file is missing or invalid, naming it.
          ValueError: --max_seq_length is longer than the model's positions.
        """
        bert_config = BertConfig.from_json_file(self.bert_config_file)
        if self.max_seq_length > bert_config.max_position_embeddings:
            raise ValueError(f"--max_seq_length={self.max_seq_length} is longer than "
                             f"max_position_embeddings ({bert_config.max_position_embeddings}) "
                             f"in {self.bert_config_file}")
        return bert_config

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
        _check_at_least(self, 1, "train_batch_size", "n_gpus", "num_accumulation_steps",
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
        _check_at_least(self, 0, "shuffle_buffer_size")
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
        _check_at_least(self, 1, "num_train_steps")
        _check_at_least(self, 0, "num_warmup_steps", "pad_to_multiple_of")
        if self.pad_to_multiple_of and self.max_seq_length < 1:
            raise ValueError("pad_to_multiple_of needs the records' max_seq_length")
        _check_group_by_length(self.group_by_length, self.shuffle_buffer_size)

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingConfig:
    """run_pretraining.py (Google's flags, same meaning, plus the trainer's)."""
    model: ModelFiles
    train: TrainOptions
    cluster: Optional[ClusterConfig] = None
    output_dir: str
    input_file: str
    do_train: bool = False
    do_eval: bool = False
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    max_predictions_per_seq: int = 20
    eval_batch_size: int = 8
    max_eval_steps: int = 100
    no_next_sentence: bool = False
    allow_random_weights: bool = False
    # --dynamic_masking: unmasked records masked in the input pipeline (see
    # input_pipeline.DynamicMasking); the masking flags below apply only then.
    dynamic_masking: bool = False
    masked_lm_prob: float = 0.15
    do_whole_word_mask: bool = False
    span_masking: bool = False
    span_length: int = 0
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig.of(self.train, output_dir=self.output_dir,
                              num_train_steps=self.num_train_steps,
                              num_warmup_steps=self.num_warmup_steps,
                              init_checkpoint=self.model.init_checkpoint)

    def validate(self) -> None:
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of `do_train` or `do_eval` must be True.")
        self.model.validate()
        _check_at_least(self, 1, "max_predictions_per_seq", "eval_batch_size", "max_eval_steps")
        self.train_config.validate()
        self._validate_dynamic_masking()

    def _validate_dynamic_masking(self) -> None:
        if not self.dynamic_masking:
            for flag in ("do_whole_word_mask", "span_masking"):
                if getattr(self, flag):
                    raise ValueError(f"--{flag} needs --dynamic_masking (static records are "
                                     f"masked already, by create_pretraining_data.py)")
            return
        if not self.model.vocab_file:
            raise ValueError("--dynamic_masking needs --vocab_file (the records' vocabulary: "
                             "the [MASK], [CLS] and [SEP] ids and the random words)")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"--masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        _check_at_least(self, 0, "span_length")


def num_train_steps_for(num_examples: int, global_batch_size: int, epochs: float) -> int:
    """The fork's formula: int(examples / global batch * epochs)."""
    return int(num_examples / global_batch_size * epochs)


def _epochs_train_config(cfg, num_items: int, num_workers: int, items: str = "examples",
                         source: str = "") -> TrainConfig:
    """A fine-tuning job's TrainConfig: steps = the fork's formula over the global batch of
    every worker, warmup `warmup_proportion` of them (`cfg` has train, output_dir, model,
    do_train, num_train_epochs, warmup_proportion).

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
    lengths = {}
    if getattr(cfg, "pad_to_longest", False):
        lengths = dict(pad_to_multiple_of=cfg.pad_to_multiple_of,
                       group_by_length=cfg.group_by_length,
                       max_seq_length=cfg.model.max_seq_length)
    return TrainConfig.of(cfg.train, output_dir=cfg.output_dir, num_train_steps=steps,
                          num_warmup_steps=int(steps * cfg.warmup_proportion),
                          init_checkpoint=cfg.model.init_checkpoint, **lengths)


def _check_group_by_length(group_by_length: bool, shuffle_buffer_size: int) -> None:
    if group_by_length and shuffle_buffer_size != 0:
        raise ValueError("--group_by_length needs --shuffle_buffer_size=0 (the whole training "
                         "set, in memory, grouped every epoch)")


def _check_epochs(cfg) -> None:
    if not cfg.num_train_epochs > 0:
        raise ValueError(f"--num_train_epochs must be > 0, got {cfg.num_train_epochs}")
    if not 0 <= cfg.warmup_proportion < 1:
        raise ValueError(f"--warmup_proportion must be in [0, 1), got {cfg.warmup_proportion}")


def _check_fine_tuning(cfg) -> None:
    """The checks the classifier and the tagger share: a tokenizer, something to do, batch
    sizes, epochs and warmup, layer-wise LR decay."""
    cfg.model.validate(min_seq_length=3, needs_tokenizer=True)
    if not (cfg.do_train or cfg.do_eval or cfg.do_predict):
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    _check_at_least(cfg, 1, "eval_batch_size", "predict_batch_size")
    _check_epochs(cfg)
    if not 0 < cfg.layerwise_lr_decay <= 1:
        raise ValueError(f"--layerwise_lr_decay must be in (0, 1], got {cfg.layerwise_lr_decay}")


def _check_eval_during_training(cfg, dev_file: str) -> None:
    _check_at_least(cfg, 0, "eval_every_n_steps", "early_stopping_patience")
    if (cfg.keep_best_checkpoint or cfg.early_stopping_patience) and not cfg.eval_every_n_steps:
        raise ValueError("--keep_best_checkpoint and --early_stopping_patience need "
                         "--eval_every_n_steps")
    if cfg.eval_every_n_steps and not (cfg.do_train and cfg.do_eval):
        raise ValueError(f"--eval_every_n_steps evaluates {dev_file} during training: it needs "
                         f"--do_train and --do_eval")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierConfig:
    """run_classifier_mgpu.py (Google's flags, the fork's, and the trainer's)."""
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
    # Length-aware batching (see TrainConfig): on for every batch by default (the results are
    # the padded run's up to float rounding); grouping changes the order of training examples.
    pad_to_longest: bool = True
    pad_to_multiple_of: int = 16
    group_by_length: bool = False
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
        types = _per_task(self.task_type, n, "task_type")
        metrics = _per_task(self.best_metric, n, "best_metric")
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
        return _epochs_train_config(self, num_train_examples, num_workers)

    def validate(self) -> None:
        _check_fine_tuning(self)
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"--truncation must be one of {', '.join(TRUNCATIONS)}, got "
                             f"{self.truncation!r}")
        _check_at_least(self, 0, "head_tokens")
        _check_eval_during_training(self, "dev.tsv")
        for task in self.task_configs():
            task._validate_task_type()
        if self.num_tasks > 1:
            self._validate_multitask()
        self.train.validate()
        _check_at_least(self, 1, "pad_to_multiple_of")
        if self.group_by_length and not self.pad_to_longest:
            raise ValueError("--group_by_length needs --pad_to_longest (grouped batches are "
                             "only faster when trimmed)")
        _check_group_by_length(self.group_by_length, self.train.shuffle_buffer_size)

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
        if self.task_type == "regression" and self.label_list:
            raise ValueError("--label_list does not apply to --task_type=regression (the label "
                             "is a number)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtractFeaturesConfig:
    """extract_features.py (Google's flags, same meaning)."""
    model: ModelFiles
    input_file: str
    output_file: str
    layers: tuple = (-1, -2, -3, -4)
    batch_size: int = 32

    def validate(self) -> None:
        if self.model.max_seq_length < 3:
            raise ValueError(f"--max_seq_length must be >= 3 (room for [CLS], [SEP] and one "
                             f"token), got {self.model.max_seq_length}")
        self.model.validate(needs_tokenizer=True)
        _check_at_least(self, 1, "batch_size")
        if not self.layers:
            raise ValueError("--layers is empty")


@dataclasses.dataclass(frozen=True)
class CreatePretrainingDataConfig:
    """create_pretraining_data.py: Google's flags (same meaning) and the new ones."""
    input_file: str
    output_file: str
    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    num_workers: int = 0
    shard_size_mb: float = 8.0
    sentence_order_prediction: bool = False
    no_next_sentence: bool = False
    pack_sequences: bool = False
    span_masking: bool = False
    span_length: int = 0
    word_segmented_input: bool = False
    progress_interval: float = 10.0
    dynamic_masking: bool = False  # unmasked records; run_pretraining.py draws the masks

    def validate(self) -> None:
        single = self.no_next_sentence or self.pack_sequences
        min_length = 4 if single else 5
        if self.max_seq_length < min_length:
            raise ValueError(f"--max_seq_length must be >= {min_length} (room for [CLS], "
                             f"{'[SEP]' if single else '[SEP], [SEP]'} and 2 tokens), got "
                             f"{self.max_seq_length}")
        most = self.max_seq_length - (2 if single else 3)
        if not 1 <= self.max_predictions_per_seq <= most:
            raise ValueError(f"--max_predictions_per_seq must be in [1, {most}] (the maskable "
                             f"tokens of --max_seq_length={self.max_seq_length}), got "
                             f"{self.max_predictions_per_seq}")
        _check_at_least(self, 1, "dupe_factor")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"--masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        _check_at_least(self, 0, "num_workers")
        if self.shard_size_mb <= 0:
            raise ValueError(f"--shard_size_mb must be > 0, got {self.shard_size_mb}")
        _check_at_least(self, 0, "span_length")
        if self.sentence_order_prediction and self.no_next_sentence:
            raise ValueError("--sentence_order_prediction and --no_next_sentence exclude each "
                             "other")
        if self.dynamic_masking and (self.do_whole_word_mask or self.span_masking):
            raise ValueError("--dynamic_masking writes unmasked records: pass "
                             "--do_whole_word_mask / --span_masking to run_pretraining.py "
                             "--dynamic_masking instead")
        if self.pack_sequences and (self.sentence_order_prediction or self.span_masking):
            raise ValueError("--pack_sequences excludes --sentence_order_prediction and "
                             "--span_masking (packed instances have no sentence pairs, and a "
                             "span could cover a document-separating [SEP])")


@dataclasses.dataclass(frozen=True)
class ConvertHfConfig:
    """convert_hf_checkpoint.py."""
    hf_model_dir: str
    output_dir: str
    gelu: str = "exact"


@dataclasses.dataclass(frozen=True)
class SquadAnswerOptions:
    """run_squad.py's flags that shape the windows and the answer (Google's names and
    defaults), as a SQuAD export reads them."""
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def validate(self, max_seq_length: Optional[int] = None) -> None:
        _check_at_least(self, 1, "doc_stride", "max_query_length", "n_best_size",
                        "max_answer_length")
        if max_seq_length is not None and max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"--max_seq_length ({max_seq_length}) must be greater than "
                             f"--max_query_length ({self.max_query_length}) + 3")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """export_saved_model.py: a run (`output_dir`) or explicit model files -> a SavedModel.

    `model` fields left unset are read from the run's `run_config.json` (the vocabulary, casing,
    max_seq_length, truncation), its `bert_config.json` and latest checkpoint. `flags_given`
    names the flags set on the command line: those win over the run's values.
    """
    model: ModelFiles
    export_dir: str
    output_dir: Optional[str] = None
    export_version: int = 0
    task: str = "classifier"
    precision: str = "fp32"
    jit_compile: bool = False
    truncation: str = "head"
    head_tokens: int = 128
    label_list: Optional[tuple] = None
    # A multi-task run: the task whose head is exported (its OUTPUT_DIR/<label>).
    task_label: Optional[str] = None
    # The classifier's batches are sorted by length and run in up to this many chunks.
    length_chunks: int = DEFAULT_LENGTH_CHUNKS
    # --task=squad: run_squad.py's flags (read from the run's run_config.json unless given).
    squad: Optional[SquadAnswerOptions] = None
    flags_given: frozenset = frozenset()

    def validate(self) -> None:
        if not self.output_dir and not (self.model.bert_config_file
                                        and self.model.init_checkpoint):
            raise ValueError("--output_dir (a run) or --bert_config_file and --init_checkpoint "
                             "are required")
        _check_at_least(self, 0, "export_version", "head_tokens")
        _check_at_least(self, 1, "length_chunks")
        if self.task_label and self.task != "classifier":
            raise ValueError(f"--task_label chooses a classifier head; --task={self.task} has "
                             f"none")
        if self.squad is not None:
            self.squad.validate()
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"--truncation must be one of {', '.join(TRUNCATIONS)}, got "
                             f"{self.truncation!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertToHfConfig:
    """convert_to_hf.py: a Google-layout checkpoint -> a Hugging Face folder (`output_dir`)."""
    model: ModelFiles
    output_dir: str
    label_list: Optional[tuple] = None
    task_label: Optional[str] = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadConfig:
    """run_squad.py: Google's flags (same names, defaults and meaning), plus `do_eval` and the
    trainer's."""
    model: ModelFiles
    train: TrainOptions
    cluster: Optional[ClusterConfig] = None
    output_dir: str
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    do_train: bool = False
    do_predict: bool = False
    do_eval: bool = False
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    verbose_logging: bool = False
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    allow_random_weights: bool = False
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def train_config(self, num_train_examples: int = 0, num_workers: int = 1) -> TrainConfig:
        """The trainer's config. Steps as Google's `run_squad.main`: int(training *examples*
        (questions, not their doc-stride windows) / batch * epochs), over the global batch of
        every worker; warmup `warmup_proportion` of them.

        Raises:
          ValueError: the training set makes no step.
        """
        return _epochs_train_config(self, num_train_examples, num_workers,
                                    source=f" in {self.train_file}")

    def validate(self) -> None:
        """Google's `validate_flags_or_throw` (but the model's length, checked with the model
        config), plus --do_eval and the trainer's options."""
        self.model.validate(needs_tokenizer=True)
        if not (self.do_train or self.do_predict or self.do_eval):
            raise ValueError("At least one of `do_train`, `do_predict` or `do_eval` must be "
                             "True.")
        if self.do_train and not self.train_file:
            raise ValueError("If `do_train` is True, then `train_file` must be specified.")
        if (self.do_predict or self.do_eval) and not self.predict_file:
            raise ValueError("If `do_predict` or `do_eval` is True, then `predict_file` must be "
                             "specified.")
        _check_at_least(self, 1, "max_query_length", "doc_stride", "predict_batch_size",
                        "n_best_size", "max_answer_length")
        if self.model.max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"The max_seq_length ({self.model.max_seq_length}) must be greater "
                             f"than max_query_length ({self.max_query_length}) + 3")
        _check_epochs(self)
        self.train.validate()


VOCAB_ALGORITHMS = ("bpe", "unigram", "wordpiece")
_VOCAB_HEAD = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class CreateVocabConfig:
    """create_vocab.py (flags of the same names)."""
    input_file: str
    output_file: str
    vocab_size: int = 30522
    do_lower_case: bool = True
    algorithm: str = "bpe"
    num_unused: int = 99
    reserved_tokens: tuple = ()
    spm_model_prefix: Optional[str] = None
    min_char_count: int = 1
    max_sentences: int = 0
    num_workers: int = 0
    random_seed: int = 12345
    progress_interval: float = 10.0

    def validate(self) -> None:
        _check_at_least(self, 1, "vocab_size", "min_char_count")
        _check_at_least(self, 0, "num_unused", "max_sentences", "num_workers")
        if self.algorithm not in VOCAB_ALGORITHMS:
            raise ValueError(f"--algorithm must be one of {', '.join(VOCAB_ALGORITHMS)}, got "
                             f"{self.algorithm!r}")
        if self.spm_model_prefix and self.algorithm == "wordpiece":
            raise ValueError("--spm_model_prefix needs --algorithm=bpe or unigram (wordpiece "
                             "trains no SentencePiece model)")
        unused = {f"[unused{i}]" for i in range(self.num_unused)}
        for token in self.reserved_tokens:
            if token.split() != [token]:
                raise ValueError(f"--reserved_tokens: {token!r} contains whitespace")
            if token in _VOCAB_HEAD or token in unused:
                raise ValueError(f"--reserved_tokens: {token} is already in the vocabulary's "
                                 f"head")
        if len(set(self.reserved_tokens)) != len(self.reserved_tokens):
            raise ValueError("--reserved_tokens: a token is repeated")


# ---------------------------------------------------------------------------------------------
# run_ner.py

TAG_SCHEMES = ("bio", "bioes")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerConfig:
    """run_ner.py: token classification on CoNLL files (Google's fine-tuning flags, the
    trainer's, evaluation during training, and the tagging ones).

    `tag_scheme`: "bio" trains on the tags as written in the files; "bioes" converts them to
    BIOES first (single-word entities S-, last words E-) and writes predictions back in the
    files' scheme. `label_list`: the tags in id order, "O" first (default: "O" + the sorted
    training tags, after the conversion). `doc_stride`: pieces between the starts of a long
    sentence's windows (None: half a window).
    """
    model: ModelFiles
    train: TrainOptions
    cluster: Optional[ClusterConfig] = None
    output_dir: str
    data_dir: str
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    tag_scheme: str = "bio"
    label_list: Optional[tuple] = None
    doc_stride: Optional[int] = None
    layerwise_lr_decay: float = 1.0
    allow_random_weights: bool = False
    eval_every_n_steps: int = 0
    keep_best_checkpoint: bool = False
    best_metric: str = "eval_f1"
    early_stopping_patience: int = 0
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def effective_doc_stride(self) -> int:
        """--doc_stride, or half a window (ner_data.default_doc_stride)."""
        if self.doc_stride is not None:
            return self.doc_stride
        return max(1, (self.model.max_seq_length - 2) // 2)

    def train_config(self, num_train_windows: int = 0, num_workers: int = 1) -> TrainConfig:
        """The trainer's config: steps from the number of training windows (records), the
        fork's formula over the global batch of every worker, warmup from
        `warmup_proportion`.

        Raises:
          ValueError: the training set makes no step.
        """
        return _epochs_train_config(self, num_train_windows, num_workers, items="windows")

    def validate(self) -> None:
        _check_fine_tuning(self)
        if self.tag_scheme not in TAG_SCHEMES:
            raise ValueError(f"--tag_scheme must be one of {', '.join(TAG_SCHEMES)}, got "
                             f"{self.tag_scheme!r}")
        max_tokens = self.model.max_seq_length - 2
        if self.doc_stride is not None and not 1 <= self.doc_stride <= max_tokens:
            raise ValueError(f"--doc_stride must be in [1, max_seq_length - 2 = {max_tokens}] "
                             f"(windows must overlap or touch to cover every token), got "
                             f"{self.doc_stride}")
        _check_eval_during_training(self, "dev.txt")
        self.train.validate()
