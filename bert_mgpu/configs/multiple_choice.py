"""The config of run_multiple_choice.py and its flags; registers the multiple-choice export."""

import dataclasses
from typing import Any, Dict, Optional

from bert_mgpu.configs.base import (
    ALLOW_RANDOM_WEIGHTS,
    DO_EVAL,
    DO_PREDICT,
    DO_TRAIN,
    EVAL_BATCH_SIZE,
    FINE_TUNING_FLAGS,
    LAYERWISE_LR_DECAY,
    NUM_TRAIN_EPOCHS,
    OUTPUT_DIR,
    PREDICT_BATCH_SIZE,
    WARMUP_PROPORTION,
    ClusterConfig,
    ClusterOptions,
    EvalDuringTraining,
    Flag,
    ModelFiles,
    TpuCompatibility,
    TrainConfig,
    TrainOptions,
    Verbosity,
    check_at_least,
    check_eval_during_training,
    check_fine_tuning,
    epochs_train_config,
    flag_values,
    subtree,
)
from bert_mgpu.configs.registry import RegisteredTask, register

# SWAG's file names (rowanz/swagaf data/): the dev split is val.csv; dev.csv is accepted too.
TRAIN_FILE, DEV_FILES, TEST_FILE = "train.csv", ("val.csv", "dev.csv"), "test.csv"


register(RegisteredTask(
    "multiple_choice", "'multiple_choice' (a run_multiple_choice.py model: context + choices -> "
                       "probabilities, label_id)", serving="bert_mgpu.serving.multiple_choice"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultipleChoiceConfig(EvalDuringTraining):
    """run_multiple_choice.py: SWAG-style multiple choice (Google's fine-tuning flags, the
    trainer's, evaluation during training, `num_choices`).

    Every choice is padded to `model.max_seq_length`: there is no length-aware batching
    (--pad_to_longest) here, because the trainer lays dropout's masks out per example over
    its whole [C, L] block, so a batch cut along L would draw other masks than the padded one
    (tasks/multiple_choice.py).
    """
    required_flags = ("data_dir", "bert_config_file", "output_dir")
    accepted_flags = (TpuCompatibility, Verbosity)
    narrowed_flags = dict(FINE_TUNING_FLAGS, max_seq_length={"help": (
        "The maximum total length of each (context, choice) sequence after WordPiece "
        "tokenization. Longer ones are truncated; every choice is padded to it (no "
        "length-aware batching: dropout's masks are laid out over the padded choices).")})
    model: ModelFiles = subtree(ModelFiles)
    train: TrainOptions = subtree(TrainOptions)
    cluster: Optional[ClusterConfig] = subtree(ClusterOptions, default=None)
    output_dir: str = OUTPUT_DIR.field(required=True)
    data_dir: str = Flag("string", None, "Directory with SWAG's CSV files: train.csv, val.csv "
                                         "(or dev.csv) and test.csv (columns sent1, sent2, "
                                         "ending0..ending<N-1>, label; the label may be empty "
                                         "in test.csv).").field(required=True)
    do_train: bool = DO_TRAIN.field()
    do_eval: bool = DO_EVAL.field(help="Whether to run eval on the dev set (val.csv, or "
                                       "dev.csv).")
    do_predict: bool = DO_PREDICT.field(help="Whether to run the model on test.csv (writes "
                                             "test_results.tsv: each choice's probability, "
                                             "and predict.txt: the predicted choice index, one "
                                             "line per example, every example).")
    eval_batch_size: int = EVAL_BATCH_SIZE.field()
    predict_batch_size: int = PREDICT_BATCH_SIZE.field()
    num_train_epochs: float = NUM_TRAIN_EPOCHS.field()
    warmup_proportion: float = WARMUP_PROPORTION.field()
    num_choices: int = Flag("integer", 4, "Choices per example: the CSV's columns ending0 .. "
                                          "ending<N-1> (SWAG: 4).").field()
    layerwise_lr_decay: float = LAYERWISE_LR_DECAY.field()
    allow_random_weights: bool = ALLOW_RANDOM_WEIGHTS.field()
    flags: Dict[str, Any] = flag_values()

    def train_config(self, num_train_examples: int = 0, num_workers: int = 1) -> TrainConfig:
        """The trainer's config: steps from the number of training examples (questions), the
        fork's formula over the global batch of every worker, warmup from
        `warmup_proportion`.

        Raises:
          ValueError: the training set makes no step.
        """
        return epochs_train_config(self, num_train_examples, num_workers)

    def validate(self) -> None:
        check_fine_tuning(self)
        check_at_least(self, 2, "num_choices")
        check_eval_during_training(self, "the dev set")
        self.train.validate()
