"""The config of extract_features.py and its flags."""

import dataclasses

from bert_mgpu.configs.base import (
    INPUT_FILE,
    OUTPUT_FILE,
    Flag,
    FromFlags,
    ModelFiles,
    TpuCompatibility,
    Verbosity,
    check_at_least,
    subtree,
)
from bert_mgpu.configs.registry import RegisteredTask, register


def parse_layers(text: str) -> tuple:
    """--layers '-1,-2' -> (-1, -2).

    Raises:
      ValueError: naming the flag.
    """
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--layers: expected comma-separated integers, got {text!r}") from None


# The encoder's features, as extract_features.py reads them, are also a SavedModel.
register(RegisteredTask(
    "features", "'features' (pooled_output, sequence_output, input_mask, sentence_embedding)",
    serving="bert_mgpu.serving.features"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtractFeaturesConfig(FromFlags):
    """extract_features.py (Google's flags, same meaning)."""
    required_flags = ("input_file", "output_file", "bert_config_file", "init_checkpoint")
    accepted_flags = (TpuCompatibility, Verbosity)
    model: ModelFiles = subtree(ModelFiles)
    input_file: str = INPUT_FILE.field(
        required=True, help="Input text: one example per line, pairs as 'text_a ||| text_b'.")
    output_file: str = OUTPUT_FILE.field(required=True)
    layers: tuple = Flag("string", "-1,-2,-3,-4", "Indexes of the encoder layers to output.",
                         convert=parse_layers).field()
    batch_size: int = Flag("integer", 32, "Batch size for predictions.").field()

    def validate(self) -> None:
        if self.model.max_seq_length < 3:
            raise ValueError(f"--max_seq_length must be >= 3 (room for [CLS], [SEP] and one "
                             f"token), got {self.model.max_seq_length}")
        self.model.validate(needs_tokenizer=True)
        check_at_least(self, 1, "batch_size")
        if not self.layers:
            raise ValueError("--layers is empty")
