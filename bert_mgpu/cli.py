"""absl flag definitions (Google's names and defaults) and flags -> frozen run configs.

The only module that imports `absl.flags`. Each top-level script calls one `define_*_flags()` at
import, then in `main` turns the parsed flags into a config with the matching `*_config()` and
hands it to the package. Nothing below this layer reads FLAGS.
"""

import dataclasses
from typing import List, Optional

from absl import flags, logging

FLAGS = flags.FLAGS

# TPU flags of Google's scripts: accepted so old launch scripts keep working, then ignored.
_TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores",
              "iterations_per_loop", "use_one_hot_embeddings")


class FlagError(ValueError):
    """A flag value that cannot work; the message names the flag."""


def _define_tpu_flags():
    flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; ignored (no TPU support).")
    flags.DEFINE_string("tpu_name", None, "Accepted for compatibility; ignored.")
    flags.DEFINE_string("tpu_zone", None, "Accepted for compatibility; ignored.")
    flags.DEFINE_string("gcp_project", None, "Accepted for compatibility; ignored.")
    flags.DEFINE_string("master", None, "Accepted for compatibility; ignored.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; ignored.")


def warn_ignored_tpu_flags():
    """Logs a warning for every TPU flag set on the command line."""
    for name in _TPU_FLAGS:
        if name in FLAGS and FLAGS[name].present:
            logging.warning("--%s is accepted for compatibility with Google's scripts and "
                            "ignored (this implementation runs on GPUs/CPU).", name)


def require(*names):
    """Raises FlagError for the first required flag that is not set."""
    for name in names:
        if getattr(FLAGS, name) in (None, ""):
            raise FlagError(f"--{name} is required")


def parse_int_list(flag_name, text) -> List[int]:
    """'-1,-2' -> [-1, -2]; errors name the flag."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise FlagError(f"--{flag_name}: expected comma-separated integers, got {text!r}") \
            from None


# ---------------------------------------------------------------------------------------------
# extract_features.py

@dataclasses.dataclass(frozen=True)
class ExtractFeaturesConfig:
    """What extract_features.py needs (Google's flags, same meaning)."""
    input_file: str
    output_file: str
    layers: tuple
    bert_config_file: str
    init_checkpoint: str
    vocab_file: Optional[str]
    spm_model_file: Optional[str]
    do_lower_case: bool
    max_seq_length: int
    batch_size: int


def define_extract_features_flags():
    flags.DEFINE_string("input_file", None, "Input text: one example per line, pairs as "
                        "'text_a ||| text_b'.")
    flags.DEFINE_string("output_file", None, "Output JSON-lines file.")
    flags.DEFINE_string("layers", "-1,-2,-3,-4", "Indexes of the encoder layers to output.")
    flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the "
                        "pre-trained BERT model. This specifies the model architecture.")
    flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after "
                         "WordPiece tokenization. Longer sequences are truncated, shorter padded.")
    flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a "
                        "pre-trained BERT model).")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was "
                        "trained on.")
    flags.DEFINE_string("spm_model_file", None, "A SentencePiece model to use instead of "
                        "--vocab_file.")
    flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be "
                      "True for uncased models and False for cased models.")
    flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
    flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility; ignored.")
    _define_tpu_flags()


def extract_features_config() -> ExtractFeaturesConfig:
    require("input_file", "output_file", "bert_config_file", "init_checkpoint")
    if not FLAGS.vocab_file and not FLAGS.spm_model_file:
        raise FlagError("--vocab_file (or --spm_model_file) is required")
    if FLAGS.max_seq_length < 2:
        raise FlagError(f"--max_seq_length must be >= 2, got {FLAGS.max_seq_length}")
    if FLAGS.batch_size < 1:
        raise FlagError(f"--batch_size must be >= 1, got {FLAGS.batch_size}")
    layers = parse_int_list("layers", FLAGS.layers)
    if not layers:
        raise FlagError("--layers is empty")
    warn_ignored_tpu_flags()
    return ExtractFeaturesConfig(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file, layers=tuple(layers),
        bert_config_file=FLAGS.bert_config_file, init_checkpoint=FLAGS.init_checkpoint,
        vocab_file=FLAGS.vocab_file, spm_model_file=FLAGS.spm_model_file,
        do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size)


# ---------------------------------------------------------------------------------------------
# convert_hf_checkpoint.py

@dataclasses.dataclass(frozen=True)
class ConvertHfConfig:
    hf_model_dir: str
    output_dir: str
    gelu: str


def define_convert_hf_flags():
    flags.DEFINE_string("hf_model_dir", None, "Hugging Face BERT folder: config.json, "
                        "model.safetensors or pytorch_model.bin, vocab.txt.")
    flags.DEFINE_string("output_dir", None, "Where to write bert_config.json, "
                        "bert_model.ckpt.{index,data-00000-of-00001} and vocab.txt.")
    flags.DEFINE_enum("gelu", "exact", ["exact", "tanh"],
                      "How to write Hugging Face's erf 'gelu': 'exact' keeps its numerics "
                      "(hidden_act 'gelu_exact'); 'tanh' writes Google's 'gelu' (the tanh "
                      "approximation Google's code computes).")


def convert_hf_config() -> ConvertHfConfig:
    require("hf_model_dir", "output_dir")
    return ConvertHfConfig(hf_model_dir=FLAGS.hf_model_dir, output_dir=FLAGS.output_dir,
                           gelu=FLAGS.gelu)


# ---------------------------------------------------------------------------------------------
# Trainer flags shared by run_pretraining.py and run_classifier_mgpu.py

def define_trainer_flags():
    """The multi-GPU fork's and this project's training flags (not in Google's scripts)."""
    flags.DEFINE_integer("n_gpus", 1, "Number of towers (model replicas in one graph). Tower i "
                         "runs on visible GPU i % (number of GPUs); more towers than GPUs is "
                         "allowed. train_batch_size is per tower. Without a GPU the CPU is split "
                         "into n_gpus logical devices.")
    flags.DEFINE_integer("num_accumulation_steps", 1, "Micro-batches (each train_batch_size x "
                         "n_gpus) whose gradients are summed before one update.")
    flags.DEFINE_bool("use_xla", False, "Compile each tower's forward and backward pass with "
                      "XLA.")
    flags.DEFINE_enum("precision", "fp32", ["fp32", "fp16", "bf16"], "Activation precision: "
                      "fp16 uses dynamic loss scaling (non-finite steps are skipped), bf16 none; "
                      "variables stay fp32.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "adamw = Google's "
                      "AdamWeightDecay; lamb = layer-wise adaptive (large batches).")
    flags.DEFINE_float("clip_norm", 1.0, "Gradients are clipped to this global norm (Google: "
                       "1.0; Cramming: 0.5).")
    flags.DEFINE_enum("indexed_slices_norm", "dense", ["dense", "values"], "How the "
                      "word-embedding gradient (an IndexedSlices) counts in the global norm "
                      "that --clip_norm clips: dense = the norm of the summed gradient (the "
                      "same for any --n_gpus); values = Google's TF1 clipping, which counted "
                      "a repeated token's rows apart (only while the gradient is still an "
                      "IndexedSlices: one worker, no accumulation).")
    flags.DEFINE_enum("lr_schedule", "linear", ["linear", "one_cycle"], "linear = Google's "
                      "warmup then linear decay; one_cycle = Cramming's triangle: 0 -> "
                      "learning_rate at half of num_train_steps -> 0 (num_warmup_steps unused).")
    flags.DEFINE_integer("batch_ramp_steps", 0, "Cramming's batch ramp: over the first N "
                         "updates the accumulated micro-batches grow linearly from 1 to "
                         "num_accumulation_steps. 0 = off.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in output_dir (0 = all).")
    flags.DEFINE_integer("random_seed", 12345, "Seed of the input order, of dropout and of the "
                         "initialisation of variables not loaded from a checkpoint.")
    flags.DEFINE_integer("log_every_n_steps", 100, "Log and write summaries every N updates.")
    flags.DEFINE_integer("shuffle_buffer_size", 100, "Training records shuffle buffer "
                         "(Google's: 100; 1 = no record shuffle).")
    flags.DEFINE_string("worker_hosts", None, "Multi-machine training: comma-separated "
                        "host:port of every worker (the same list on each); worker 0 is the "
                        "chief. Without it, TF_CONFIG is used if set.")
    flags.DEFINE_integer("task_index", None, "Multi-machine training: this worker's index in "
                         "--worker_hosts.")
    flags.DEFINE_float("collective_timeout_seconds", 300.0, "Multi-machine training: a worker "
                       "that does not answer an all-reduce within this time is taken as dead "
                       "and the others stop.")


def train_config(output_dir, num_train_steps, num_warmup_steps, init_checkpoint=None):
    """TrainConfig from the shared trainer flags and Google's common training flags."""
    from bert_mgpu.config import TrainConfig

    cfg = TrainConfig(
        output_dir=output_dir, train_batch_size=FLAGS.train_batch_size, n_gpus=FLAGS.n_gpus,
        num_accumulation_steps=FLAGS.num_accumulation_steps, num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps, learning_rate=FLAGS.learning_rate,
        optimizer=FLAGS.optimizer, precision=FLAGS.precision, use_xla=FLAGS.use_xla,
        clip_norm=FLAGS.clip_norm, indexed_slices_norm=FLAGS.indexed_slices_norm,
        lr_schedule=FLAGS.lr_schedule,
        batch_ramp_steps=FLAGS.batch_ramp_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        log_every_n_steps=FLAGS.log_every_n_steps, random_seed=FLAGS.random_seed,
        init_checkpoint=init_checkpoint, shuffle_buffer_size=FLAGS.shuffle_buffer_size)
    try:
        cfg.validate()
    except ValueError as e:
        raise FlagError(str(e)) from None
    return cfg


def cluster_config():
    """The multi-worker cluster from --worker_hosts/--task_index or TF_CONFIG, or None."""
    from bert_mgpu.cluster import resolve_cluster

    if FLAGS.collective_timeout_seconds <= 0:
        raise FlagError("--collective_timeout_seconds must be > 0")
    if FLAGS.task_index is not None and not FLAGS.worker_hosts:
        raise FlagError("--task_index needs --worker_hosts")
    return resolve_cluster(FLAGS.worker_hosts, FLAGS.task_index,
                           FLAGS.collective_timeout_seconds)


def flag_values_dict():
    """name -> value of every flag this module defined for the running script (run_config.json).
    """
    return {flag.name: flag.value for flag in FLAGS.get_flags_for_module(__name__)}


# ---------------------------------------------------------------------------------------------
# run_pretraining.py

@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """What run_pretraining.py needs (Google's flags, same meaning, plus the trainer's)."""
    bert_config_file: str
    input_file: str
    output_dir: str
    max_seq_length: int
    max_predictions_per_seq: int
    do_train: bool
    do_eval: bool
    eval_batch_size: int
    max_eval_steps: int
    train: "object"  # config.TrainConfig
    flags: dict
    cluster: "object" = None  # cluster.ClusterConfig or None
    no_next_sentence: bool = False


def _define_google_training_flags():
    """Flags that Google's run_pretraining.py and run_classifier.py both define, same meaning."""
    flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the "
                        "pre-trained BERT model. This specifies the model architecture.")
    flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints "
                        "will be written.")
    flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a "
                        "pre-trained BERT model).")
    flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after "
                         "WordPiece tokenization. Longer sequences are truncated, shorter padded.")
    flags.DEFINE_bool("do_train", False, "Whether to run training.")
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
    flags.DEFINE_integer("train_batch_size", 32, "Batch size for training, per tower "
                         "(--n_gpus).")
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model "
                         "checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "Accepted for compatibility; ignored.")
    _define_tpu_flags()
    define_trainer_flags()


def _check_google_training_flags():
    if FLAGS["iterations_per_loop"].present:
        logging.warning("--iterations_per_loop is a TPU flag: accepted and ignored.")
    warn_ignored_tpu_flags()


def define_pretraining_flags():
    _define_google_training_flags()
    flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma "
                        "separated).")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM "
                         "predictions per sequence. Must match data generation.")
    flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps (updates).")
    flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
    flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
    flags.DEFINE_bool("no_next_sentence", False, "Masked LM only (data made with "
                      "create_pretraining_data.py --no_next_sentence or --pack_sequences): no "
                      "next-sentence head, no cls/seq_relationship variables.")


def pretraining_config() -> PretrainingConfig:
    require("bert_config_file", "input_file", "output_dir")
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise FlagError("At least one of `do_train` or `do_eval` must be True.")
    for name in ("max_seq_length", "max_predictions_per_seq", "eval_batch_size",
                 "max_eval_steps"):
        if getattr(FLAGS, name) < 1:
            raise FlagError(f"--{name} must be >= 1, got {getattr(FLAGS, name)}")
    _check_google_training_flags()
    return PretrainingConfig(
        bert_config_file=FLAGS.bert_config_file, input_file=FLAGS.input_file,
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, do_train=FLAGS.do_train,
        do_eval=FLAGS.do_eval, eval_batch_size=FLAGS.eval_batch_size,
        max_eval_steps=FLAGS.max_eval_steps,
        train=train_config(FLAGS.output_dir, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                           FLAGS.init_checkpoint),
        flags=flag_values_dict(), cluster=cluster_config(),
        no_next_sentence=FLAGS.no_next_sentence)


# ---------------------------------------------------------------------------------------------
# create_pretraining_data.py

@dataclasses.dataclass(frozen=True)
class CreatePretrainingDataConfig:
    """What create_pretraining_data.py needs: Google's flags (same meaning) and the new ones."""
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


def define_create_pretraining_data_flags():
    # Google's flags, names, defaults and help.
    flags.DEFINE_string("input_file", None,
                        "Input raw text file (or comma-separated list of files; globs allowed). "
                        "One sentence per line, a blank line between documents; '.gz' files "
                        "are read decompressed.")
    flags.DEFINE_string("output_file", None, "Output TF example file (or comma-separated list "
                        "of files; instances are written round-robin across them).")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was "
                        "trained on.")
    flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be "
                      "True for uncased models and False for cased models.")
    flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking rather "
                      "than per-WordPiece masking.")
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM "
                         "predictions per sequence.")
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
    flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with "
                         "different masks).")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are "
                       "shorter than the maximum length.")
    # New flags; their defaults keep Google's output.
    flags.DEFINE_integer("num_workers", 0, "0: Google's mode, the whole input in memory, output "
                         "identical to Google's script. N>=1: sharded mode for large corpora: "
                         "shards of --shard_size_mb made by N processes, each with a seed "
                         "derived from --random_seed; memory bounded by the shard size.")
    flags.DEFINE_float("shard_size_mb", 8.0, "Sharded mode: input MB per shard (cut at "
                       "document boundaries). The output depends on it, not on --num_workers.")
    flags.DEFINE_bool("sentence_order_prediction", False, "ALBERT's sentence-order prediction: "
                      "segment B always follows A in the document; label 1 means they were "
                      "swapped.")
    flags.DEFINE_bool("no_next_sentence", False, "Masked-LM-only single-segment instances "
                      "([CLS] text [SEP], segment_ids 0, next_sentence_labels 0).")
    flags.DEFINE_bool("pack_sequences", False, "Cramming's packed masked-LM-only instances: "
                      "the documents, each followed by [SEP], are one token stream cut into "
                      "full-length [CLS] ... [SEP] instances (only the last one is shorter).")
    flags.DEFINE_bool("span_masking", False, "Mask one contiguous span of whole words per "
                      "instance instead of scattered tokens.")
    flags.DEFINE_integer("span_length", 0, "With --span_masking: words per span; 0 fills the "
                         "usual masking budget min(max_predictions_per_seq, "
                         "round(length * masked_lm_prob)).")
    flags.DEFINE_bool("word_segmented_input", False, "Input words are separated by whitespace "
                      "(e.g. Chinese run through a word segmenter): mask whole words, as "
                      "Chinese-BERT-wwm.")
    flags.DEFINE_float("progress_interval", 10.0, "Seconds between progress lines.")


def create_pretraining_data_config() -> CreatePretrainingDataConfig:
    require("input_file", "output_file", "vocab_file")
    single = FLAGS.no_next_sentence or FLAGS.pack_sequences
    min_length = 4 if single else 5
    if FLAGS.max_seq_length < min_length:
        raise FlagError(f"--max_seq_length must be >= {min_length} (room for [CLS], "
                        f"{'[SEP]' if single else '[SEP], [SEP]'} and 2 tokens), got "
                        f"{FLAGS.max_seq_length}")
    most = FLAGS.max_seq_length - (2 if single else 3)
    if not 1 <= FLAGS.max_predictions_per_seq <= most:
        raise FlagError(f"--max_predictions_per_seq must be in [1, {most}] (the maskable tokens "
                        f"of --max_seq_length={FLAGS.max_seq_length}), got "
                        f"{FLAGS.max_predictions_per_seq}")
    if FLAGS.dupe_factor < 1:
        raise FlagError(f"--dupe_factor must be >= 1, got {FLAGS.dupe_factor}")
    if not 0.0 < FLAGS.masked_lm_prob <= 1.0:
        raise FlagError(f"--masked_lm_prob must be in (0, 1], got {FLAGS.masked_lm_prob}")
    if not 0.0 <= FLAGS.short_seq_prob <= 1.0:
        raise FlagError(f"--short_seq_prob must be in [0, 1], got {FLAGS.short_seq_prob}")
    if FLAGS.num_workers < 0:
        raise FlagError(f"--num_workers must be >= 0, got {FLAGS.num_workers}")
    if FLAGS.shard_size_mb <= 0:
        raise FlagError(f"--shard_size_mb must be > 0, got {FLAGS.shard_size_mb}")
    if FLAGS.span_length < 0:
        raise FlagError(f"--span_length must be >= 0, got {FLAGS.span_length}")
    if FLAGS.sentence_order_prediction and FLAGS.no_next_sentence:
        raise FlagError("--sentence_order_prediction and --no_next_sentence exclude each other")
    if FLAGS.pack_sequences and (FLAGS.sentence_order_prediction or FLAGS.span_masking):
        raise FlagError("--pack_sequences excludes --sentence_order_prediction and "
                        "--span_masking (packed instances have no sentence pairs, and a span "
                        "could cover a document-separating [SEP])")
    # Every field of the config is the flag of the same name.
    return CreatePretrainingDataConfig(**{
        field.name: getattr(FLAGS, field.name)
        for field in dataclasses.fields(CreatePretrainingDataConfig)})


# ---------------------------------------------------------------------------------------------
# run_classifier_mgpu.py

@dataclasses.dataclass(frozen=True)
class ClassifierConfig:
    """What run_classifier_mgpu.py needs (Google's flags, the fork's, and the trainer's)."""
    data_dir: str
    task_name: str
    bert_config_file: str
    vocab_file: Optional[str]
    spm_model_file: Optional[str]
    output_dir: str
    init_checkpoint: Optional[str]
    do_lower_case: bool
    max_seq_length: int
    do_train: bool
    do_eval: bool
    do_predict: bool
    eval_batch_size: int
    predict_batch_size: int
    num_train_epochs: float
    warmup_proportion: float
    label_list: Optional[tuple]
    truncation: str
    head_tokens: int
    layerwise_lr_decay: float
    # num_train_steps / num_warmup_steps are set from the training set size at run time.
    train: "object"
    flags: dict
    cluster: "object" = None  # cluster.ClusterConfig or None


def define_classifier_flags():
    _define_google_training_flags()
    flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files "
                        "(or other data files) for the task.")
    flags.DEFINE_string("task_name", None, "The name of the task to train: cola, mnli, mrpc, "
                        "xnli, or tsv (your own train/dev/test.tsv with a header row).")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was "
                        "trained on.")
    flags.DEFINE_string("spm_model_file", None, "A SentencePiece model to use instead of "
                        "--vocab_file.")
    flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be "
                      "True for uncased models and False for cased models.")
    flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the "
                      "test set (writes test_results.tsv and predict.txt).")
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear "
                       "learning rate warmup for. E.g., 0.1 = 10% of training.")
    flags.DEFINE_list("label_list", None, "tsv task: the labels in id order (default: the "
                      "sorted set of labels in train.tsv).")
    flags.DEFINE_enum("truncation", "head", ["head", "head_tail"], "How to shorten a long "
                      "single text: 'head' keeps the beginning (Google); 'head_tail' keeps "
                      "--head_tokens from the start and the rest from the end (Sun et al. 2019).")
    flags.DEFINE_integer("head_tokens", 128, "With --truncation=head_tail: tokens kept from the "
                         "start of the text.")
    flags.DEFINE_float("layerwise_lr_decay", 1.0, "Layer-wise LR decay: encoder layer l of L "
                       "gets learning_rate * RATE^(L - l), the embeddings RATE^L, the classifier "
                       "the full rate. 1.0 = off.")


def classifier_config() -> ClassifierConfig:
    require("data_dir", "task_name", "bert_config_file", "output_dir")
    if not FLAGS.vocab_file and not FLAGS.spm_model_file:
        raise FlagError("--vocab_file (or --spm_model_file) is required")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise FlagError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    for name in ("max_seq_length", "eval_batch_size", "predict_batch_size"):
        if getattr(FLAGS, name) < 1:
            raise FlagError(f"--{name} must be >= 1, got {getattr(FLAGS, name)}")
    if FLAGS.max_seq_length < 3:
        raise FlagError(f"--max_seq_length must be >= 3, got {FLAGS.max_seq_length}")
    if not FLAGS.num_train_epochs > 0:
        raise FlagError(f"--num_train_epochs must be > 0, got {FLAGS.num_train_epochs}")
    if not 0 <= FLAGS.warmup_proportion < 1:
        raise FlagError(f"--warmup_proportion must be in [0, 1), got {FLAGS.warmup_proportion}")
    if not 0 < FLAGS.layerwise_lr_decay <= 1:
        raise FlagError(f"--layerwise_lr_decay must be in (0, 1], got "
                        f"{FLAGS.layerwise_lr_decay}")
    if FLAGS.head_tokens < 0:
        raise FlagError(f"--head_tokens must be >= 0, got {FLAGS.head_tokens}")
    _check_google_training_flags()
    return ClassifierConfig(
        data_dir=FLAGS.data_dir, task_name=FLAGS.task_name.lower(),
        bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
        spm_model_file=FLAGS.spm_model_file, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length, do_train=FLAGS.do_train, do_eval=FLAGS.do_eval,
        do_predict=FLAGS.do_predict, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, num_train_epochs=FLAGS.num_train_epochs,
        warmup_proportion=FLAGS.warmup_proportion,
        label_list=tuple(FLAGS.label_list) if FLAGS.label_list else None,
        truncation=FLAGS.truncation, head_tokens=FLAGS.head_tokens,
        layerwise_lr_decay=FLAGS.layerwise_lr_decay,
        # Placeholder steps: replaced once the training set size is known.
        train=train_config(FLAGS.output_dir, 1, 0, FLAGS.init_checkpoint),
        flags=flag_values_dict(), cluster=cluster_config())


# ---------------------------------------------------------------------------------------------
# create_vocab.py (issue 18): define_create_vocab_flags() and create_vocab_config()

_VOCAB_ALGORITHMS = ("bpe", "unigram", "wordpiece")


def define_create_vocab_flags():
    flags.DEFINE_string("input_file", None,
                        "Input raw text file (or comma-separated list of files; globs allowed), "
                        "in create_pretraining_data.py's format; '.gz' files are read "
                        "decompressed.")
    flags.DEFINE_string("output_file", None, "The vocab.txt to write (written to a temporary "
                        "file and renamed: no partial file on failure).")
    flags.DEFINE_integer("vocab_size", 30522, "Entries of the vocabulary, exactly (special "
                         "tokens and [unused] slots included).")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents, as BasicTokenizer "
                      "with do_lower_case; use the same value with the other scripts.")
    flags.DEFINE_enum("algorithm", "bpe", list(_VOCAB_ALGORITHMS),
                      "How pieces are learned from the word counts: bpe (SentencePiece BPE, the "
                      "lowest fertility measured), unigram (SentencePiece unigram LM) or "
                      "wordpiece (likelihood-scored merges, pure Python, slower).")
    flags.DEFINE_integer("num_unused", 99, "[unusedN] slots. The first 99 come before [UNK], so "
                         "[UNK], [CLS], [SEP], [MASK] get ids 100-103 as in Google's English "
                         "vocabularies; the rest follow [MASK] (Google's uncased has 994).")
    flags.DEFINE_list("reserved_tokens", [], "Comma-separated extra special tokens placed right "
                      "after [MASK] (where Google's Chinese vocabulary has <S>,<T>).")
    flags.DEFINE_string("spm_model_prefix", None, "Also keep the SentencePiece model the pieces "
                        "come from (PREFIX.model, PREFIX.vocab; --algorithm=bpe or unigram), for "
                        "--spm_model_file users: ALBERT's ids (<pad> 0, <unk> 1, [CLS] 2, [SEP] "
                        "3, [MASK] 4); its size is SentencePiece's, above --vocab_size.")
    flags.DEFINE_integer("min_char_count", 1, "Characters seen fewer times are left out of the "
                         "alphabet (their words become [UNK]); raise it on web-scale corpora.")
    flags.DEFINE_integer("max_sentences", 0, "0: count every line. N: a seeded uniform sample of "
                         "N lines (SentencePiece's input_sentence_size).")
    flags.DEFINE_integer("num_workers", 0, "Processes counting words and SentencePiece threads "
                         "(0: one per core, but inputs under 256 MB are counted in one process, "
                         "which is faster there).")
    flags.DEFINE_integer("random_seed", 12345, "Seed of the --max_sentences sample.")
    flags.DEFINE_float("progress_interval", 10.0, "Seconds between progress lines.")


def create_vocab_config():
    from bert_mgpu.config import CreateVocabConfig  # pylint: disable=import-outside-toplevel
    require("input_file", "output_file")
    if FLAGS.vocab_size < 1:
        raise FlagError(f"--vocab_size must be >= 1, got {FLAGS.vocab_size}")
    for name in ("num_unused", "max_sentences", "num_workers"):
        if getattr(FLAGS, name) < 0:
            raise FlagError(f"--{name} must be >= 0, got {getattr(FLAGS, name)}")
    if FLAGS.min_char_count < 1:
        raise FlagError(f"--min_char_count must be >= 1, got {FLAGS.min_char_count}")
    if FLAGS.spm_model_prefix and FLAGS.algorithm == "wordpiece":
        raise FlagError("--spm_model_prefix needs --algorithm=bpe or unigram (wordpiece trains "
                        "no SentencePiece model)")
    reserved = tuple(t.strip() for t in FLAGS.reserved_tokens if t.strip())
    unused = {f"[unused{i}]" for i in range(FLAGS.num_unused)}
    for token in reserved:
        if token.split() != [token]:
            raise FlagError(f"--reserved_tokens: {token!r} contains whitespace")
        if token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") or token in unused:
            raise FlagError(f"--reserved_tokens: {token} is already in the vocabulary's head")
    if len(set(reserved)) != len(reserved):
        raise FlagError("--reserved_tokens: a token is repeated")
    return CreateVocabConfig(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file,
        vocab_size=FLAGS.vocab_size, do_lower_case=FLAGS.do_lower_case,
        algorithm=FLAGS.algorithm, num_unused=FLAGS.num_unused, reserved_tokens=reserved,
        spm_model_prefix=FLAGS.spm_model_prefix, min_char_count=FLAGS.min_char_count,
        max_sentences=FLAGS.max_sentences, num_workers=FLAGS.num_workers,
        random_seed=FLAGS.random_seed, progress_interval=FLAGS.progress_interval)
