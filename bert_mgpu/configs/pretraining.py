"""The configs of create_pretraining_data.py and run_pretraining.py."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ClusterConfig,
    ModelFiles,
    TrainConfig,
    TrainOptions,
    check_at_least,
)


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
        check_at_least(self, 1, "max_predictions_per_seq", "eval_batch_size", "max_eval_steps")
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
        check_at_least(self, 0, "span_length")


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
        check_at_least(self, 1, "dupe_factor")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"--masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        check_at_least(self, 0, "num_workers")
        if self.shard_size_mb <= 0:
            raise ValueError(f"--shard_size_mb must be > 0, got {self.shard_size_mb}")
        check_at_least(self, 0, "span_length")
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
