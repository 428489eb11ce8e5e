"""The config of run_squad.py, and the answer options the SQuAD export shares with it."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ClusterConfig,
    LengthBatching,
    ModelFiles,
    TrainConfig,
    TrainOptions,
    check_at_least,
    check_epochs,
    epochs_train_config,
)


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
        check_at_least(self, 1, "doc_stride", "max_query_length", "n_best_size",
                        "max_answer_length")
        if max_seq_length is not None and max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"--max_seq_length ({max_seq_length}) must be greater than "
                             f"--max_query_length ({self.max_query_length}) + 3")


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
    answers: SquadAnswerOptions = SquadAnswerOptions()
    verbose_logging: bool = False
    allow_random_weights: bool = False
    pad_to_longest: bool = False
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)

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
