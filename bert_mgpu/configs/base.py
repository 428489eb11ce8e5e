"""Run configurations: what a job needs, and the flags that fill it.

A job's config is composed of named subtrees, as cramming's `cfg.arch` / `cfg.train`: `model`
(ModelFiles), `train` (TrainOptions), `cluster` (ClusterConfig or None, from ClusterOptions),
then the job's own fields (one module per job beside this one). Each field declares its flag
(`Flag`: Google's name, kind, default, help, enum values), so a flag and its default are written
once; a job's config narrows what differs for its script (`FromFlags.narrowed_flags`, or a field
redeclared with `Flag.field(help=..., default=...)`). cli.py builds absl flags from these
declarations and fills the configs by field name; nothing below it reads FLAGS. Every
`validate()` raises ValueError naming the flag. No TensorFlow import: flags are checked before
TensorFlow loads.
"""

import dataclasses
import json
import os
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Mapping, Optional, Tuple

PRECISIONS = ("fp32", "fp16", "bf16")


OPTIMIZERS = ("adamw", "lamb")


LR_SCHEDULES = ("linear", "one_cycle", "wsd")


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


# ---------------------------------------------------------------------------------------------
# Flags declared on config fields.

# Field metadata keys: a field is a flag (`Flag`), a subtree of flags (`Subtree`), or filled with
# the run's flag values / the names of the flags given on the command line.
FLAG, SUBTREE, FLAG_VALUES, FLAGS_GIVEN = "flag", "subtree", "flag_values", "flags_given"

FLAG_KINDS = ("string", "bool", "integer", "float", "list", "enum")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a config field is given on the command line (absl's DEFINE_<kind>).

    Attributes:
      kind: one of FLAG_KINDS.
      default: the flag's default (the field's default is `convert(default)`).
      help: the help text `--help` shows.
      enum: the values of an "enum" flag.
      name: the flag's name when it is not the field's (Google's name wins).
      convert: the field's value of a flag value that is not None (e.g. a list -> a tuple);
        a ValueError it raises names the flag.
      ignored: accepted for compatibility with Google's scripts and ignored (a warning when
        given).
      output: "dir" or "files": where the run writes, checked writable before any work.
    """
    kind: str
    default: Any
    help: str
    enum: Tuple[str, ...] = ()
    name: str = ""
    convert: Optional[Callable[[Any], Any]] = None
    ignored: bool = False
    output: str = ""

    def __post_init__(self):
        if self.kind not in FLAG_KINDS or bool(self.enum) != (self.kind == "enum"):
            raise ValueError(f"flag kind {self.kind!r} with enum values {self.enum}")

    def narrowed(self, **changes) -> "Flag":
        """This flag with a script's own `help`/`default` (or other attributes)."""
        return dataclasses.replace(self, **changes) if changes else self

    def field_value(self, value):
        """The field's value of the flag's `value`."""
        return self.convert(value) if self.convert is not None and value is not None else value

    def field(self, required: bool = False, **changes) -> Any:
        """A dataclass field declaring this flag (`changes`: `narrowed`'s); its default is the
        flag's, converted, unless `required` (the config cannot be made without it)."""
        flag = self.narrowed(**changes)
        metadata = {FLAG: flag}
        if required:
            return dataclasses.field(metadata=metadata)
        return dataclasses.field(default=flag.field_value(flag.default), metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Subtree:
    """A field whose value `cls.build` makes from the flags of `cls`'s fields (`flags`: only
    these of them are the script's; None: all)."""
    cls: type
    flags: Optional[Tuple[str, ...]] = None


def subtree(cls: type, flags: Optional[Tuple[str, ...]] = None, **default) -> Any:
    """A dataclass field filled by `cls.build` from the flags `cls` declares (`default=`: the
    field's default when the config is made in code)."""
    return dataclasses.field(metadata={SUBTREE: Subtree(cls, flags)}, **default)


def flag_values() -> Any:
    """A field holding every flag of the script by name (run_config.json)."""
    return dataclasses.field(default_factory=dict, metadata={FLAG_VALUES: True})


def flags_given() -> Any:
    """A field holding the names of the flags given on the command line."""
    return dataclasses.field(default=frozenset(), metadata={FLAGS_GIVEN: True})


class FromFlags:
    """A config that cli.py fills from flags by field name.

    Class attributes a job's config sets for its script:
      required_flags: flags that must be given, checked in this order before anything else.
      narrowed_flags: flag name -> `Flag.narrowed` changes, for flags of its subtrees whose
        help or default differ in this script (its own fields narrow their declaration).
      accepted_flags: classes of flags the script accepts without a field (Google's TPU flags,
        `Verbosity`).
    """
    required_flags: ClassVar[Tuple[str, ...]] = ()
    narrowed_flags: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    accepted_flags: ClassVar[Tuple[type, ...]] = ()

    @classmethod
    def build(cls, values: Dict[str, Any], given: FrozenSet[str]):
        """The config of its fields' `values` (flags converted, subtrees built); `given`: the
        flags set on the command line. Raises ValueError naming the flag."""
        del given
        return cls(**values)

    def validate(self) -> None:
        """Raises ValueError naming the flag of the first impossible value (none here)."""

    @classmethod
    def flag(cls, name: str) -> Flag:
        """The flag declared on field `name`, for a config that declares it again."""
        return next(f.metadata[FLAG] for f in dataclasses.fields(cls) if f.name == name)


def as_tuple(value) -> Optional[tuple]:
    """A list flag's value as a config's tuple (None when empty)."""
    return tuple(value) if value else None


# Flags several configs declare: one declaration each (a script narrows its help or default).
OUTPUT_DIR = Flag("string", None, "The output directory where the model checkpoints will be "
                                  "written.", output="dir")
DO_TRAIN = Flag("bool", False, "Whether to run training.")
DO_EVAL = Flag("bool", False, "Whether to run eval on the dev set.")
DO_PREDICT = Flag("bool", False, "Whether to run the model in inference mode on the test set "
                                 "(writes test_results.tsv and predict.txt).")
EVAL_BATCH_SIZE = Flag("integer", 8, "Total batch size for eval.")
PREDICT_BATCH_SIZE = Flag("integer", 8, "Total batch size for predict.")
NUM_TRAIN_EPOCHS = Flag("float", 3.0, "Total number of training epochs to perform.")
WARMUP_PROPORTION = Flag("float", 0.1, "Proportion of training to perform linear learning rate "
                                       "warmup for. E.g., 0.1 = 10% of training.")
ALLOW_RANDOM_WEIGHTS = Flag("bool", False, "Allow --do_eval/--do_predict without --do_train, a "
                                           "checkpoint in --output_dir or --init_checkpoint (an "
                                           "untrained model: normally a mistake).")
LAYERWISE_LR_DECAY = Flag("float", 1.0, "Layer-wise LR decay: encoder layer l of L gets "
                                        "learning_rate * RATE^(L - l), the embeddings RATE^L, "
                                        "the classifier the full rate. 1.0 = off.")
INPUT_FILE = Flag("string", None, "Input TF example files (can be a glob or comma separated).")
OUTPUT_FILE = Flag("string", None, "Output JSON-lines file.", output="files")
MAX_PREDICTIONS_PER_SEQ = Flag("integer", 20, "Maximum number of masked LM predictions per "
                                              "sequence. Must match data generation.")
NUM_WORKERS = Flag("integer", 0, "0: Google's mode, the whole input in memory, output identical "
                                 "to Google's script. N>=1: sharded mode for large corpora: "
                                 "shards of --shard_size_mb made by N processes, each with a "
                                 "seed derived from --random_seed; memory bounded by the shard "
                                 "size.")
PROGRESS_INTERVAL = Flag("float", 10.0, "Seconds between progress lines.")
LABEL_LIST = Flag("list", None, "tsv task: the labels in id order (default: the sorted set of "
                                "labels in train.tsv). Several tasks: one list per task, "
                                "separated by ';' (empty: that task's default).",
                  convert=as_tuple)
TRUNCATION = Flag("enum", "head", "How to shorten a long single text: 'head' keeps the "
                                  "beginning (Google); 'head_tail' keeps --head_tokens from the "
                                  "start and the rest from the end (Sun et al. 2019).",
                  enum=TRUNCATIONS)
HEAD_TOKENS = Flag("integer", 128, "With --truncation=head_tail: tokens kept from the start of "
                                   "the text.")
DOC_STRIDE = Flag("integer", 128, "When splitting up a long document into chunks, how much "
                                  "stride to take between chunks.")
TASK_LABEL = Flag("string", None, "A multi-task run of run_classifier_mgpu.py: the task whose "
                                  "head is exported (its label: the task name, or <name>_<i> "
                                  "for a name given twice, as OUTPUT_DIR/<label>/); required "
                                  "for such a run.")
# The masking flags of create_pretraining_data.py, also run_pretraining.py --dynamic_masking's.
MASKED_LM_PROB = Flag("float", 0.15, "Masked LM probability.")
DO_WHOLE_WORD_MASK = Flag("bool", False, "Whether to use whole word masking rather than "
                                         "per-WordPiece masking.")
SPAN_MASKING = Flag("bool", False, "Mask one contiguous span of whole words per instance "
                                   "instead of scattered tokens.")
SPAN_LENGTH = Flag("integer", 0, "With --span_masking: words per span; 0 fills the usual "
                                 "masking budget min(max_predictions_per_seq, round(length * "
                                 "masked_lm_prob)).")
NO_NEXT_SENTENCE = Flag("bool", False, "Masked LM only (data made with "
                                       "create_pretraining_data.py --no_next_sentence or "
                                       "--pack_sequences): no next-sentence head, no "
                                       "cls/seq_relationship variables.")
DYNAMIC_MASKING = Flag("bool", False, "RoBERTa's dynamic masking, deterministic: "
                                      "create_pretraining_data.py writes unmasked records (with "
                                      "word_starts); run_pretraining.py masks each example anew "
                                      "every time it is read, from (random_seed, the example's "
                                      "index in the input stream).")
RANDOM_SEED = Flag("integer", 12345, "Seed of the input order, of dropout and of the "
                                     "initialisation of variables not loaded from a checkpoint.")


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
class ModelFiles(FromFlags):
    """The files that define a model and how text becomes its input (Google's flags)."""
    bert_config_file: Optional[str] = Flag(
        "string", None, "The config json file corresponding to the pre-trained BERT model. This "
                        "specifies the model architecture.").field()
    init_checkpoint: Optional[str] = Flag(
        "string", None, "Initial checkpoint (usually from a pre-trained BERT model). Also a "
                        "Hugging Face BERT folder or hf:ORG/NAME (converted once and cached; "
                        "--vocab_file, --bert_config_file and --do_lower_case then default to "
                        "the model's).").field()
    vocab_file: Optional[str] = Flag(
        "string", None, "The vocabulary file that the BERT model was trained on.").field()
    spm_model_file: Optional[str] = Flag(
        "string", None, "A SentencePiece model to use instead of --vocab_file (ALBERT "
                        "style).").field()
    do_lower_case: bool = Flag(
        "bool", True, "Whether to lower case the input text. Should be True for uncased models "
                      "and False for cased models.").field()
    max_seq_length: int = Flag(
        "integer", 128, "The maximum total input sequence length after WordPiece tokenization. "
                        "Longer sequences are truncated, shorter padded.").field()

    def validate(self, min_seq_length: int = 1, needs_tokenizer: bool = False) -> None:
        if needs_tokenizer and not self.vocab_file and not self.spm_model_file:
            raise ValueError("--vocab_file (or --spm_model_file) is required")
        if self.max_seq_length < min_seq_length:
            raise ValueError(f"--max_seq_length must be >= {min_seq_length}, got "
                             f"{self.max_seq_length}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainOptions(FromFlags):
    """How to train, whatever the task and however long (the `train` subtree of a job).

    Batch semantics follow the multi-GPU fork: `train_batch_size` is per tower, one update sees
    `train_batch_size * n_gpus * num_accumulation_steps` examples (times the number of workers).
    """
    train_batch_size: int = Flag("integer", 32, "Batch size for training, per tower "
                                                "(--n_gpus).").field()
    n_gpus: int = Flag("integer", 1, "Number of towers (model replicas in one graph). Tower i "
                                     "runs on visible GPU i % (number of GPUs); more towers "
                                     "than GPUs is allowed. train_batch_size is per tower. "
                                     "Without a GPU the CPU is split into n_gpus logical "
                                     "devices.").field()
    num_accumulation_steps: int = Flag("integer", 1, "Micro-batches (each train_batch_size x "
                                                     "n_gpus) whose gradients are summed before "
                                                     "one update.").field()
    learning_rate: float = Flag("float", 5e-5, "The initial learning rate for Adam.").field()
    optimizer: str = Flag("enum", "adamw", "adamw = Google's AdamWeightDecay; lamb = layer-wise "
                                           "adaptive (large batches).", OPTIMIZERS).field()
    # PyTorch/Hugging Face AdamW's bias-corrected moments for --optimizer=adamw (not Google's).
    adam_bias_correction: bool = Flag(
        "bool", False, "With --optimizer=adamw: bias-corrected Adam moments, as PyTorch's "
                       "AdamW; false = Google's AdamWeightDecay exactly. Default true in the "
                       "fine-tuning scripts, false in run_pretraining.py (docs/migrating.md: "
                       "deliberate differences).").field()
    precision: str = Flag("enum", "fp32", "Activation precision: fp16 uses dynamic loss scaling "
                                          "(non-finite steps are skipped), bf16 none; variables "
                                          "stay fp32.", PRECISIONS).field()
    use_xla: bool = Flag("bool", False, "Compile each tower's forward and backward pass with "
                                        "XLA.").field()
    xla_layers: bool = Flag("bool", False, "Compile each encoder layer's forward and backward "
                                           "pass with XLA (its element-wise work fused between "
                                           "the matmuls), the rest of the step as without; the "
                                           "same gradients, dropout masks included.").field()
    gradient_checkpointing: bool = Flag("bool", False, "Recompute each encoder layer's "
                                                       "activations in the backward pass "
                                                       "instead of keeping them: less memory "
                                                       "for more compute, the same gradients "
                                                       "(dropout masks included).").field()
    attention_chunk: int = Flag("integer", 256, "ModernBERT (RoPE) models: each global attention "
                                                "layer takes its queries this many rows at a "
                                                "time and recomputes their probabilities in the "
                                                "backward pass instead of keeping the whole "
                                                "[batch, heads, length, length] matrix (the same "
                                                "values, memory linear in the length), on "
                                                "sequences longer than this and when "
                                                "attention_probs_dropout_prob is 0; 0 = keep "
                                                "the whole matrix.").field()
    clip_norm: float = Flag("float", 1.0, "Gradients are clipped to this global norm (Google: "
                                          "1.0; Cramming: 0.5).").field()
    # How an IndexedSlices gradient counts in the clipped global norm (see
    # optimization.clip_by_global_norm): "dense" (ours) or "values" (Google's TF1 clipping).
    indexed_slices_norm: str = Flag(
        "enum", "dense", "The word-embedding gradient in the clipped global norm: dense = the "
                         "summed gradient's norm (the same for any --n_gpus); values = Google's "
                         "TF1 clipping (a repeated token's rows counted apart; one worker, no "
                         "accumulation).", ("dense", "values")).field()
    # Cramming's schedules (off by default): "one_cycle" LR, and a batch ramp through
    # accumulation over the first `batch_ramp_steps` updates (0 = off).
    lr_schedule: str = Flag("enum", "linear", "linear = Google's warmup then linear decay; "
                                              "one_cycle = Cramming's triangle: 0 -> "
                                              "learning_rate at half of num_train_steps -> 0 "
                                              "(num_warmup_steps unused); wsd = ModernBERT's "
                                              "warmup-stable-decay: warmup, constant, then "
                                              "1-sqrt decay over run_pretraining.py's "
                                              "--num_decay_steps (0: no decay).",
                            LR_SCHEDULES).field()
    batch_ramp_steps: int = Flag("integer", 0, "Cramming's batch ramp: over the first N updates "
                                               "the accumulated micro-batches grow linearly "
                                               "from 1 to num_accumulation_steps. 0 = "
                                               "off.").field()
    save_checkpoints_steps: int = Flag("integer", 1000, "How often to save the model "
                                                        "checkpoint.").field()
    keep_checkpoint_max: int = Flag("integer", 5, "Checkpoints kept in output_dir (0 = "
                                                  "all).").field()
    log_every_n_steps: int = Flag("integer", 100, "Log and write summaries every N "
                                                  "updates.").field()
    random_seed: int = RANDOM_SEED.field()
    # 0: the whole training set in a fresh seeded permutation every epoch (in memory);
    # N >= 1: Google's record shuffle buffer (see input_pipeline.record_dataset).
    shuffle_buffer_size: int = Flag(
        "integer", 100, "0 = the whole training set, held in memory, in a fresh seeded "
                        "permutation every epoch (run_classifier_mgpu.py's default: a file "
                        "sorted by label still trains); N >= 1 = Google's record shuffle buffer "
                        "(run_pretraining.py's default 100; 1 = records in file "
                        "order).").field()

    @classmethod
    def build(cls, values, given) -> "TrainOptions":
        """The options, validated. --optimizer=lamb always corrects its moments: a fine-tuning
        script's default --adam_bias_correction=true does not apply to it (given explicitly,
        `validate` refuses it, naming the flag)."""
        if values["optimizer"] != "adamw" and "adam_bias_correction" not in given:
            values = dict(values, adam_bias_correction=False)
        options = cls(**values)
        options.validate()
        return options

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
        if self.attention_chunk < 0:
            raise ValueError(f"--attention_chunk must be >= 0, got {self.attention_chunk}")
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


# The length of a run (run_pretraining.py's flags; a fine-tuning job derives it from epochs).
NUM_TRAIN_STEPS = Flag("integer", 100000, "Number of training steps (updates).")
NUM_WARMUP_STEPS = Flag("integer", 10000, "Number of warmup steps.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainOptions):
    """What the trainer needs: the options, plus where and for how long (`num_train_steps`
    counts updates). Jobs derive it with `TrainConfig.of(options, ...)`."""
    output_dir: str
    num_train_steps: int = NUM_TRAIN_STEPS.default
    num_warmup_steps: int = NUM_WARMUP_STEPS.default
    init_checkpoint: Optional[str] = None
    # --lr_schedule=wsd: the last num_decay_steps updates decay the rate to 0 (1-sqrt; 0 =
    # constant after the warmup).
    num_decay_steps: int = 0
    final_lr_fraction: float = 0.0  # the rate the decay ends at, times learning_rate
    # Length-aware batching (fine-tuning jobs' --pad_to_longest / --group_by_length): every
    # batch trimmed to its longest example rounded up to this multiple (0 = kept at the
    # records' length, max_seq_length), and training batches grouped by length.
    pad_to_multiple_of: int = 0
    group_by_length: bool = False
    # Dropout's layout length (0: none, masks drawn in each batch's own shape): fine-tuning
    # jobs set the training file's longest example rounded up to pad_to_multiple_of (at most
    # the records' length, --max_seq_length), so padded and trimmed batches get the same masks
    # on real tokens.
    dropout_layout_length: int = 0

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
        self._validate_decay()
        if self.pad_to_multiple_of and self.dropout_layout_length < 1:
            raise ValueError("pad_to_multiple_of needs dropout's layout length (at most the "
                             "records' --max_seq_length)")
        check_group_by_length(self.group_by_length, self.shuffle_buffer_size)

    def _validate_decay(self) -> None:
        if self.lr_schedule != "wsd":
            return
        check_at_least(self, 0, "num_decay_steps")
        if not 0.0 <= self.final_lr_fraction <= 1.0:
            raise ValueError(f"--final_lr_fraction must be in [0, 1], got "
                             f"{self.final_lr_fraction}")
        if self.num_warmup_steps + self.num_decay_steps > self.num_train_steps:
            raise ValueError(f"--lr_schedule=wsd: --num_warmup_steps={self.num_warmup_steps} + "
                             f"--num_decay_steps={self.num_decay_steps} must be <= "
                             f"--num_train_steps={self.num_train_steps}")

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


COLLECTIVE_TIMEOUT_SECONDS = Flag(
    "float", 300.0, "Multi-machine training: a worker that does not answer an all-reduce within "
                    "this time is taken as dead and the others stop.")


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """The workers of a multi-machine job and this process's place among them."""
    worker_hosts: tuple
    task_index: int
    timeout_seconds: float = COLLECTIVE_TIMEOUT_SECONDS.default

    @property
    def num_workers(self) -> int:
        return len(self.worker_hosts)

    @property
    def is_chief(self) -> bool:
        return self.task_index == 0

    def tf_config(self) -> str:
        return json.dumps({"cluster": {"worker": list(self.worker_hosts)},
                           "task": {"type": "worker", "index": self.task_index}})


@dataclasses.dataclass(frozen=True)
class ClusterOptions(FromFlags):
    """The multi-machine flags; a job's `cluster` field is built from them (`build`)."""
    worker_hosts: Optional[str] = Flag(
        "string", None, "Multi-machine training: comma-separated host:port of every worker "
                        "(the same list on each); worker 0 is the chief. Without it, TF_CONFIG "
                        "is used if set.").field()
    task_index: Optional[int] = Flag(
        "integer", None, "Multi-machine training: this worker's index in "
                         "--worker_hosts.").field()
    collective_timeout_seconds: float = COLLECTIVE_TIMEOUT_SECONDS.field()

    @classmethod
    def build(cls, values, given) -> Optional[ClusterConfig]:
        """The cluster: from --worker_hosts/--task_index or TF_CONFIG, or None."""
        del given
        if values["collective_timeout_seconds"] <= 0:
            raise ValueError("--collective_timeout_seconds must be > 0")
        if values["task_index"] is not None and not values["worker_hosts"]:
            raise ValueError("--task_index needs --worker_hosts")
        return resolve_cluster(values["worker_hosts"], values["task_index"],
                               values["collective_timeout_seconds"])


_IGNORED = "Accepted for compatibility; ignored."


@dataclasses.dataclass(frozen=True)
class TpuCompatibility(FromFlags):
    """The TPU flags of Google's scripts: accepted so old launch scripts keep working, then
    ignored (a warning names each one given)."""
    use_tpu: bool = Flag("bool", False, "Accepted for compatibility; ignored (no TPU support).",
                         ignored=True).field()
    tpu_name: Optional[str] = Flag("string", None, _IGNORED, ignored=True).field()
    tpu_zone: Optional[str] = Flag("string", None, _IGNORED, ignored=True).field()
    gcp_project: Optional[str] = Flag("string", None, _IGNORED, ignored=True).field()
    master: Optional[str] = Flag("string", None, _IGNORED, ignored=True).field()
    num_tpu_cores: int = Flag("integer", 8, _IGNORED, ignored=True).field()
    iterations_per_loop: int = Flag("integer", 1000, _IGNORED, ignored=True).field()
    use_one_hot_embeddings: bool = Flag("bool", False, _IGNORED, ignored=True).field()


@dataclasses.dataclass(frozen=True)
class Verbosity(FromFlags):
    """What a script logs beyond its progress and results (cli.py sets the log level; no job
    reads it)."""
    verbose: bool = Flag("bool", False, "Also log what Google's scripts logged in full: the "
                                        "`*** Example ***` dumps of the first records and the "
                                        "`**** Trainable Variables ****` list of a checkpoint's "
                                        "initialisation (Google's format).").field()


def resolve_cluster(worker_hosts: Optional[str] = None, task_index: Optional[int] = None,
                    timeout_seconds: float = COLLECTIVE_TIMEOUT_SECONDS.default,
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
    of a job that trims batches (pad_to_multiple_of, group_by_length, dropout_layout_length).

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
class LengthBatching(FromFlags):
    """The length-aware batching flags of the fine-tuning jobs (run_classifier_mgpu.py,
    run_ner.py, run_squad.py), one definition for all: with `pad_to_longest` every batch,
    training, evaluation and prediction, is cut to its longest example rounded up to
    `pad_to_multiple_of` (TrainConfig.pad_to_multiple_of); `group_by_length` also groups the
    training batches by length. A job's config derives from it (a job may change a default)."""
    pad_to_longest: bool = Flag("bool", True, "Pad each batch only to its longest example "
                                              "(rounded up to --pad_to_multiple_of), not to "
                                              "--max_seq_length; evaluation and prediction "
                                              "sorted by length, written in file order. "
                                              "Results equal the fully padded run's.").field()
    pad_to_multiple_of: int = Flag("integer", 0, "With --pad_to_longest: batch lengths are "
                                                 "multiples of this. 0: 1 when the towers run "
                                                 "uncompiled (one trace serves every length), "
                                                 "16 with --use_xla or --xla_layers (XLA "
                                                 "compiles once per length: at most "
                                                 "max_seq_length / 16 "
                                                 "compilations).").field()
    group_by_length: bool = Flag("bool", False, "Hugging Face's group_by_length: each epoch's "
                                                "shuffled order is cut into mega-batches of 50 "
                                                "global batches, each sorted by length, and the "
                                                "resulting batches are shuffled; seeded per "
                                                "epoch. Faster with --pad_to_longest, but "
                                                "changes the batches examples are seen "
                                                "in.").field()

    def pad_multiple(self) -> int:
        """The multiple batch lengths and dropout's layout length are rounded up to:
        --pad_to_multiple_of, or when 0 its default for this run (the flag's help). Without
        XLA nothing is gained by rounding (the trainer traces once for every length), and
        every position of rounding is a padded token each layer computes."""
        if self.pad_to_multiple_of:
            return self.pad_to_multiple_of
        return 16 if (self.train.use_xla or self.train.xla_layers) else 1

    def length_batching(self, max_seq_length: int) -> Dict[str, Any]:
        """The TrainConfig fields of these flags (`epochs_train_config`'s `length_batching`),
        for records of `max_seq_length`; none without --pad_to_longest."""
        if not self.pad_to_longest:
            return {}
        return dict(pad_to_multiple_of=self.pad_multiple(),
                    group_by_length=self.group_by_length,
                    dropout_layout_length=max_seq_length)

    def validate_length_batching(self, shuffle_buffer_size: int) -> None:
        """Raises ValueError naming the flag (one line)."""
        check_at_least(self, 0, "pad_to_multiple_of")
        if self.group_by_length and not self.pad_to_longest:
            raise ValueError("--group_by_length needs --pad_to_longest (grouped batches are "
                             "only faster when trimmed)")
        check_group_by_length(self.group_by_length, shuffle_buffer_size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalDuringTraining(FromFlags):
    """The fine-tuning jobs' evaluation during training (a job's config derives from it)."""
    eval_every_n_steps: int = Flag("integer", 0, "Evaluate the dev set every N updates (and at "
                                                 "the last): eval_history.tsv, TensorBoard run "
                                                 "'eval', eval_curve.png (with matplotlib). 0 = "
                                                 "only at the end (Google).").field()
    keep_best_checkpoint: bool = Flag("bool", False, "With --eval_every_n_steps: keep the model "
                                                     "at the best --best_metric in "
                                                     "OUTPUT_DIR/best (survives "
                                                     "--keep_checkpoint_max); --do_predict uses "
                                                     "it.").field()
    best_metric: str = Flag("string", "eval_accuracy", "The eval_results key that decides the "
                                                       "best checkpoint and early stopping "
                                                       "(losses: lower is better; others: "
                                                       "higher). Several tasks: one per task, "
                                                       "comma-separated, or one for all; their "
                                                       "mean decides.").field()
    early_stopping_patience: int = Flag("integer", 0, "Stop training after this many "
                                                      "evaluations without improvement of "
                                                      "--best_metric (0 = never).").field()


# The fine-tuning scripts' trainer defaults that differ from Google's (docs/migrating.md,
# "Deliberate differences"): bias-corrected Adam, as Mosbach et al. and Zhang et al. (ICLR 2021)
# fine-tune (--adam_bias_correction=false is Google's AdamWeightDecay exactly), and the whole
# training set shuffled every epoch (Google's buffer of 100 learns nothing from a file sorted by
# label).
FINE_TUNING_FLAGS = {"adam_bias_correction": {"default": True},
                     "shuffle_buffer_size": {"default": 0}}


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
