"""The config of run_ner.py."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ClusterConfig,
    LengthBatching,
    ModelFiles,
    TrainConfig,
    TrainOptions,
    check_eval_during_training,
    check_fine_tuning,
    epochs_train_config,
)

TAG_SCHEMES = ("bio", "bioes")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerConfig(LengthBatching):
    """run_ner.py: token classification on CoNLL files (Google's fine-tuning flags, the
    trainer's, evaluation during training, the tagging ones, and the length-aware batching of
    `LengthBatching`: on by default, every window's tags and scores are the padded run's).

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
        return epochs_train_config(self, num_train_windows, num_workers, items="windows",
                                   **self.length_batching(self.model.max_seq_length))

    def validate(self) -> None:
        check_fine_tuning(self)
        if self.tag_scheme not in TAG_SCHEMES:
            raise ValueError(f"--tag_scheme must be one of {', '.join(TAG_SCHEMES)}, got "
                             f"{self.tag_scheme!r}")
        max_tokens = self.model.max_seq_length - 2
        if self.doc_stride is not None and not 1 <= self.doc_stride <= max_tokens:
            raise ValueError(f"--doc_stride must be in [1, max_seq_length - 2 = {max_tokens}] "
                             f"(windows must overlap or touch to cover every token), got "
                             f"{self.doc_stride}")
        check_eval_during_training(self, "dev.txt")
        self.train.validate()
        self.validate_length_batching(self.train.shuffle_buffer_size)
