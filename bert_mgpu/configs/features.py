"""The config of extract_features.py."""

import dataclasses

from bert_mgpu.configs.base import ModelFiles, check_at_least


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
        check_at_least(self, 1, "batch_size")
        if not self.layers:
            raise ValueError("--layers is empty")
