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
