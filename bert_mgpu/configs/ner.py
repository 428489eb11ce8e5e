"""The config of run_ner.py and its flags."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ALLOW_RANDOM_WEIGHTS,
    DO_EVAL,
    DO_PREDICT,
    DO_TRAIN,
    DOC_STRIDE,
    EVAL_BATCH_SIZE,
    FINE_TUNING_FLAGS,
    LABEL_LIST,
    LAYERWISE_LR_DECAY,
    NUM_TRAIN_EPOCHS,
    OUTPUT_DIR,
    PREDICT_BATCH_SIZE,
    WARMUP_PROPORTION,
    ClusterConfig,
    ClusterOptions,
    EvalDuringTraining,
    Flag,
    LengthBatching,
    ModelFiles,
    TpuCompatibility,
    TrainConfig,
    TrainOptions,
    Verbosity,
    check_eval_during_training,
    check_fine_tuning,
    epochs_train_config,
    flag_values,
    subtree,
)
from bert_mgpu.configs.registry import RegisteredTask, register

TAG_SCHEMES = ("bio", "bioes")


register(RegisteredTask(
    "ner", "'ner' (a run_ner.py model: text -> its words and a tag per word)",
    serving="bert_mgpu.serving.ner"))


def default_doc_stride(max_seq_length: int) -> int:
    """run_ner.py's --doc_stride by default: half a window (at least 1), so each piece is seen
    with some context on both sides."""
    return max(1, (max_seq_length - 2) // 2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerConfig(LengthBatching, EvalDuringTraining):
    """run_ner.py: token classification on CoNLL files (Google's fine-tuning flags, the
    trainer's, evaluation during training, the tagging ones, and the length-aware batching of
    `LengthBatching`: on by default, every window's tags and scores are the padded run's).

    `tag_scheme`: "bio" trains on the tags as written in the files; "bioes" converts them to
    BIOES first (single-word entities S-, last words E-) and writes predictions back in the
    files' scheme. `label_list`: the tags in id order, "O" first (default: "O" + the sorted
    training tags, after the conversion). `doc_stride`: pieces between the starts of a long
    sentence's windows (None: half a window).
    """
    required_flags = ("data_dir", "bert_config_file", "output_dir")
    accepted_flags = (TpuCompatibility, Verbosity)
    narrowed_flags = FINE_TUNING_FLAGS
    model: ModelFiles = subtree(ModelFiles)
    train: TrainOptions = subtree(TrainOptions)
    cluster: Optional[ClusterConfig] = subtree(ClusterOptions, default=None)
    output_dir: str = OUTPUT_DIR.field(required=True)
    data_dir: str = Flag("string", None, "Directory with train.txt, dev.txt and test.txt in "
                                         "CoNLL layout (token ... tag per line, a blank line "
                                         "between sentences, -DOCSTART- lines "
                                         "skipped).").field(required=True)
    do_train: bool = DO_TRAIN.field()
    do_eval: bool = DO_EVAL.field()
    do_predict: bool = DO_PREDICT.field(help="Whether to tag test.txt (writes predictions.txt: "
                                             "token, gold and predicted tag per line, every "
                                             "token).")
    eval_batch_size: int = EVAL_BATCH_SIZE.field()
    predict_batch_size: int = PREDICT_BATCH_SIZE.field()
    num_train_epochs: float = NUM_TRAIN_EPOCHS.field()
    warmup_proportion: float = WARMUP_PROPORTION.field()
    tag_scheme: str = Flag("enum", "bio", "Tags the model is trained on: bio = as written in the "
                                          "files (BIO, IOB1 or BIOES); bioes = converted to "
                                          "BIOES (S- single-word entities, E- last words); "
                                          "predictions are written back in the files' scheme.",
                           TAG_SCHEMES).field()
    label_list: Optional[tuple] = LABEL_LIST.field(
        help="The tags in id order, 'O' first (default: 'O' and the sorted tags of train.txt, "
             "after --tag_scheme).")
    doc_stride: Optional[int] = DOC_STRIDE.field(
        default=None,
        help="A sentence longer than max_seq_length - 2 pieces is split into windows starting "
             "this many pieces apart; each word is labelled and predicted in the window where it "
             "has the most context (default: half a window).")
    layerwise_lr_decay: float = LAYERWISE_LR_DECAY.field()
    allow_random_weights: bool = ALLOW_RANDOM_WEIGHTS.field()
    best_metric: str = EvalDuringTraining.flag("best_metric").field(
        default="eval_f1",
        help="The eval_results key that decides the best checkpoint and early stopping (eval_f1: "
             "conlleval's entity F1; losses: lower is better; others: higher).")
    pad_to_longest: bool = LengthBatching.flag("pad_to_longest").field(
        help="Pad each batch only to its longest window (rounded up to --pad_to_multiple_of), "
             "not to --max_seq_length; evaluation and prediction batches in file order, each cut "
             "to its longest. Results equal the fully padded run's.")
    flags: Dict[str, Any] = flag_values()

    @property
    def effective_doc_stride(self) -> int:
        """--doc_stride, or half a window (`default_doc_stride`)."""
        if self.doc_stride is not None:
            return self.doc_stride
        return default_doc_stride(self.model.max_seq_length)

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
