"""The configs of create_pretraining_data.py and run_pretraining.py, and their flags."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ALLOW_RANDOM_WEIGHTS,
    DO_EVAL,
    DO_TRAIN,
    DO_WHOLE_WORD_MASK,
    DYNAMIC_MASKING,
    EVAL_BATCH_SIZE,
    INPUT_FILE,
    MASKED_LM_PROB,
    MAX_PREDICTIONS_PER_SEQ,
    NO_NEXT_SENTENCE,
    NUM_TRAIN_STEPS,
    NUM_WARMUP_STEPS,
    NUM_WORKERS,
    OUTPUT_DIR,
    OUTPUT_FILE,
    PROGRESS_INTERVAL,
    RANDOM_SEED,
    SPAN_LENGTH,
    SPAN_MASKING,
    ClusterConfig,
    ClusterOptions,
    Flag,
    FromFlags,
    ModelFiles,
    TpuCompatibility,
    TrainConfig,
    TrainOptions,
    Verbosity,
    check_at_least,
    flag_values,
    subtree,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingConfig(FromFlags):
    """run_pretraining.py (Google's flags, same meaning, plus the trainer's)."""
    required_flags = ("bert_config_file", "input_file", "output_dir")
    # The model flags of Google's run_pretraining.py (it reads ids: no tokenizer flags), and
    # --vocab_file for --dynamic_masking.
    model: ModelFiles = subtree(ModelFiles, ("bert_config_file", "init_checkpoint",
                                             "max_seq_length", "vocab_file"))
    train: TrainOptions = subtree(TrainOptions)
    cluster: Optional[ClusterConfig] = subtree(ClusterOptions, default=None)
    accepted_flags = (TpuCompatibility, Verbosity)
    narrowed_flags = {"vocab_file": {"help": "With --dynamic_masking: the vocabulary the "
                                             "records were made with ([MASK], [CLS], [SEP] ids; "
                                             "random words are drawn from it)."}}
    output_dir: str = OUTPUT_DIR.field(required=True)
    input_file: str = INPUT_FILE.field(required=True)
    do_train: bool = DO_TRAIN.field()
    do_eval: bool = DO_EVAL.field()
    num_train_steps: int = NUM_TRAIN_STEPS.field()
    num_warmup_steps: int = NUM_WARMUP_STEPS.field()
    num_decay_steps: int = Flag("integer", 0, "With --lr_schedule=wsd (ModernBERT's "
                                              "warmup-stable-decay): the last N updates decay "
                                              "the rate from --learning_rate to "
                                              "--final_lr_fraction of it as 1 - sqrt(fraction "
                                              "of the decay done); 0 = constant "
                                              "after the warmup (a phase a later one "
                                              "decays).").field()
    final_lr_fraction: float = Flag("float", 0.0, "With --lr_schedule=wsd: the rate the decay "
                                                  "ends at (and keeps), as a fraction of "
                                                  "--learning_rate (ModernBERT's code: "
                                                  "alpha_f, 0.1 by default there).").field()
    max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ.field()
    eval_batch_size: int = EVAL_BATCH_SIZE.field()
    max_eval_steps: int = Flag("integer", 100, "Maximum number of eval steps.").field()
    no_next_sentence: bool = NO_NEXT_SENTENCE.field()
    allow_random_weights: bool = ALLOW_RANDOM_WEIGHTS.field()
    # --dynamic_masking: unmasked records masked in the input pipeline (see
    # input_pipeline.DynamicMasking); the masking flags below apply only then: those of
    # create_pretraining_data.py, applied in the input pipeline.
    dynamic_masking: bool = DYNAMIC_MASKING.field()
    masked_lm_prob: float = MASKED_LM_PROB.field(
        help="With --dynamic_masking: masked LM probability (e.g. 0.15 Google, up to 0.4 "
             "Wettig et al. 2022).")
    do_whole_word_mask: bool = DO_WHOLE_WORD_MASK.field(
        help="With --dynamic_masking: mask whole words (the records' word_starts: ## pieces, "
             "or --word_segmented_input units).")
    span_masking: bool = SPAN_MASKING.field(
        help="With --dynamic_masking: mask one contiguous span of whole words per example (as "
             "create_pretraining_data.py --span_masking).")
    span_length: int = SPAN_LENGTH.field()
    flags: Dict[str, Any] = flag_values()

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig.of(self.train, output_dir=self.output_dir,
                              num_train_steps=self.num_train_steps,
                              num_warmup_steps=self.num_warmup_steps,
                              num_decay_steps=self.num_decay_steps,
                              final_lr_fraction=self.final_lr_fraction,
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
class CreatePretrainingDataConfig(FromFlags):
    """create_pretraining_data.py: Google's flags (same meaning) and the new ones (defaults keep
    Google's output)."""
    required_flags = ("input_file", "output_file", "vocab_file")
    accepted_flags = (Verbosity,)
    input_file: str = INPUT_FILE.field(
        required=True, help="Input raw text file (or comma-separated list of files; globs "
                            "allowed). One sentence per line, a blank line between documents; "
                            "'.gz' files are read decompressed.")
    output_file: str = OUTPUT_FILE.field(
        required=True, help="Output TF example file (or comma-separated list of files; "
                            "instances are written round-robin across them).")
    vocab_file: str = ModelFiles.flag("vocab_file").field(required=True)
    do_lower_case: bool = ModelFiles.flag("do_lower_case").field()
    do_whole_word_mask: bool = DO_WHOLE_WORD_MASK.field()
    max_seq_length: int = ModelFiles.flag("max_seq_length").field(
        help="Maximum sequence length.")
    max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ.field(
        help="Maximum number of masked LM predictions per sequence.")
    random_seed: int = RANDOM_SEED.field(help="Random seed for data generation.")
    dupe_factor: int = Flag("integer", 10, "Number of times to duplicate the input data (with "
                                           "different masks).").field()
    masked_lm_prob: float = MASKED_LM_PROB.field()
    short_seq_prob: float = Flag("float", 0.1, "Probability of creating sequences which are "
                                               "shorter than the maximum length.").field()
    num_workers: int = NUM_WORKERS.field()
    shard_size_mb: float = Flag("float", 8.0, "Sharded mode: input MB per shard (cut at "
                                              "document boundaries). The output depends on it, "
                                              "not on --num_workers.").field()
    sentence_order_prediction: bool = Flag("bool", False, "ALBERT's sentence-order prediction: "
                                                          "segment B always follows A in the "
                                                          "document; label 1 means they were "
                                                          "swapped.").field()
    no_next_sentence: bool = NO_NEXT_SENTENCE.field(
        help="Masked-LM-only single-segment instances ([CLS] text [SEP], segment_ids 0, "
             "next_sentence_labels 0).")
    pack_sequences: bool = Flag("bool", False, "Cramming's packed masked-LM-only instances: the "
                                               "documents, each followed by [SEP], are one "
                                               "token stream cut into full-length [CLS] ... "
                                               "[SEP] instances (only the last one is "
                                               "shorter).").field()
    document_ids: bool = Flag("bool", False, "With --pack_sequences: write a document_ids "
                                             "feature (each position's document in the "
                                             "instance, 1, 2, ...; 0 at padding) so that "
                                             "run_pretraining.py keeps each token to its own "
                                             "document (a RoPE model: ModernBERT).").field()
    span_masking: bool = SPAN_MASKING.field()
    span_length: int = SPAN_LENGTH.field()
    word_segmented_input: bool = Flag("bool", False, "Input words are separated by whitespace "
                                                     "(e.g. Chinese run through a word "
                                                     "segmenter): mask whole words, as "
                                                     "Chinese-BERT-wwm.").field()
    progress_interval: float = PROGRESS_INTERVAL.field()
    # Unmasked records; run_pretraining.py draws the masks.
    dynamic_masking: bool = DYNAMIC_MASKING.field()

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
        if self.document_ids and not self.pack_sequences:
            raise ValueError("--document_ids marks the documents of packed instances: it needs "
                             "--pack_sequences")
        if self.pack_sequences and (self.sentence_order_prediction or self.span_masking):
            raise ValueError("--pack_sequences excludes --sentence_order_prediction and "
                             "--span_masking (packed instances have no sentence pairs, and a "
                             "span could cover a document-separating [SEP])")
