"""The config of run_squad.py and its flags, and the answer options the SQuAD export shares
with it."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ALLOW_RANDOM_WEIGHTS,
    DO_EVAL,
    DO_PREDICT,
    DO_TRAIN,
    DOC_STRIDE,
    FINE_TUNING_FLAGS,
    NUM_TRAIN_EPOCHS,
    OUTPUT_DIR,
    PREDICT_BATCH_SIZE,
    WARMUP_PROPORTION,
    ClusterConfig,
    ClusterOptions,
    Flag,
    FromFlags,
    LengthBatching,
    ModelFiles,
    TpuCompatibility,
    TrainConfig,
    TrainOptions,
    Verbosity,
    check_at_least,
    check_epochs,
    epochs_train_config,
    flag_values,
    subtree,
)
from bert_mgpu.configs.registry import RegisteredTask, register


@dataclasses.dataclass(frozen=True)
class SquadAnswerOptions(FromFlags):
    """run_squad.py's flags that shape the windows and the answer (Google's names and
    defaults), as a SQuAD export reads them."""
    doc_stride: int = DOC_STRIDE.field()
    max_query_length: int = Flag("integer", 64, "The maximum number of tokens for the question. "
                                                "Questions longer than this will be truncated "
                                                "to this length.").field()
    n_best_size: int = Flag("integer", 20, "The total number of n-best predictions to generate "
                                           "in the nbest_predictions.json output "
                                           "file.").field()
    max_answer_length: int = Flag("integer", 30, "The maximum length of an answer that can be "
                                                 "generated. This is needed because the start "
                                                 "and end predictions are not conditioned on "
                                                 "one another.").field()
    version_2_with_negative: bool = Flag("bool", False, "If true, the SQuAD examples contain "
                                                        "some that do not have an "
                                                        "answer.").field()
    null_score_diff_threshold: float = Flag("float", 0.0, "If null_score - best_non_null is "
                                                          "greater than the threshold predict "
                                                          "null.").field()

    def validate(self, max_seq_length: Optional[int] = None) -> None:
        check_at_least(self, 1, "doc_stride", "max_query_length", "n_best_size",
                        "max_answer_length")
        if max_seq_length is not None and max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"--max_seq_length ({max_seq_length}) must be greater than "
                             f"--max_query_length ({self.max_query_length}) + 3")


register(RegisteredTask(
    "squad", "'squad' (a run_squad.py model: question + context -> answer, its character offsets "
             "and logits)", serving="bert_mgpu.serving.squad", options=SquadAnswerOptions,
    int8=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadConfig(LengthBatching):
    """run_squad.py: Google's flags (same names, defaults and meaning), plus `do_eval` and the
    trainer's; the windows' and answers' flags are the `answers` subtree (what a SQuAD export
    reads back from the run).

    Length-aware batching (`LengthBatching`) is off by default here: Google's span softmax and
    n-best ranking run over every position, padding included, which no trimmed batch has. With
    `pad_to_longest` the span head leaves the padding out of both (tasks/squad.py), so trimmed
    and padded batches give the same weights and predictions, and neither is Google's exactly.
    """
    required_flags = ("vocab_file", "bert_config_file", "output_dir")
    accepted_flags = (TpuCompatibility, Verbosity)
    # Google's run_squad.py length; fine-tuning shuffles the whole training set every epoch.
    narrowed_flags = {
        **FINE_TUNING_FLAGS,
        "max_seq_length": {"default": 384},
        "train_batch_size": {"help": "Batch size for training, per tower (--n_gpus); Google: "
                                     "total batch size."}}
    model: ModelFiles = subtree(ModelFiles)
    train: TrainOptions = subtree(TrainOptions)
    cluster: Optional[ClusterConfig] = subtree(ClusterOptions, default=None)
    output_dir: str = OUTPUT_DIR.field(required=True)
    train_file: Optional[str] = Flag("string", None, "SQuAD json for training. E.g., "
                                                     "train-v1.1.json").field()
    predict_file: Optional[str] = Flag("string", None, "SQuAD json for predictions. E.g., "
                                                       "dev-v1.1.json or "
                                                       "test-v1.1.json").field()
    do_train: bool = DO_TRAIN.field()
    do_predict: bool = DO_PREDICT.field(
        help="Whether to run predictions on --predict_file (writes predictions.json, "
             "nbest_predictions.json and, with --version_2_with_negative, null_odds.json).")
    do_eval: bool = DO_EVAL.field(help="Predict on --predict_file (which holds the answers) "
                                       "and write the official EM/F1 to eval_results.txt.")
    predict_batch_size: int = PREDICT_BATCH_SIZE.field()
    num_train_epochs: float = NUM_TRAIN_EPOCHS.field()
    warmup_proportion: float = WARMUP_PROPORTION.field()
    answers: SquadAnswerOptions = subtree(SquadAnswerOptions, default=SquadAnswerOptions())
    verbose_logging: bool = Flag("bool", False, "If true, all of the warnings related to data "
                                                "processing will be printed. A number of "
                                                "warnings are expected for a normal SQuAD "
                                                "evaluation.").field()
    allow_random_weights: bool = ALLOW_RANDOM_WEIGHTS.field()
    # Off: trimmed batches have no padding for Google's span softmax and n-best ranking to run
    # over.
    pad_to_longest: bool = LengthBatching.flag("pad_to_longest").field(
        default=False,
        help="Pad each batch only to its longest window (rounded up to --pad_to_multiple_of), "
             "not to --max_seq_length, in training and prediction (sorted by length, written "
             "in file order). The span softmax and the n-best ranking then leave the padding "
             "out (Google's run over every position, padding included: off by default); the "
             "results equal those of the same run with every batch padded.")
    flags: Dict[str, Any] = flag_values()

    def train_config(self, num_train_examples: int = 0, num_workers: int = 1) -> TrainConfig:
        """The trainer's config. Steps as Google's `run_squad.main`: int(training *examples*
        (questions, not their doc-stride windows) / batch * epochs), over the global batch of
        every worker; warmup `warmup_proportion` of them.

        Raises:
          ValueError: the training set makes no step.
        """
        return epochs_train_config(self, num_train_examples, num_workers,
                                   source=f" in {self.train_file}",
                                   **self.length_batching(self.model.max_seq_length))

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
        check_at_least(self, 1, "predict_batch_size")
        self.answers.validate()
        if self.model.max_seq_length <= self.answers.max_query_length + 3:
            raise ValueError(f"The max_seq_length ({self.model.max_seq_length}) must be greater "
                             f"than max_query_length ({self.answers.max_query_length}) + 3")
        check_epochs(self)
        self.train.validate()
        self.validate_length_batching(self.train.shuffle_buffer_size)
