"""The configs of export_saved_model.py, convert_to_hf.py and convert_hf_checkpoint.py."""

import dataclasses
from typing import Optional

from bert_mgpu.configs.base import TRUNCATIONS, ModelFiles, check_at_least
from bert_mgpu.configs.classifier import WINDOW_POOLINGS
from bert_mgpu.configs.squad import SquadAnswerOptions

# export_saved_model.py --length_chunks (see export.py).
DEFAULT_LENGTH_CHUNKS = 4


@dataclasses.dataclass(frozen=True)
class ConvertHfConfig:
    """convert_hf_checkpoint.py."""
    hf_model_dir: str
    output_dir: str
    gelu: str = "exact"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """export_saved_model.py: a run (`output_dir`) or explicit model files -> a SavedModel.

    `model` fields left unset are read from the run's `run_config.json` (the vocabulary, casing,
    max_seq_length, truncation), its `bert_config.json` and latest checkpoint. `flags_given`
    names the flags set on the command line: those win over the run's values.
    """
    model: ModelFiles
    export_dir: str
    output_dir: Optional[str] = None
    export_version: int = 0
    task: str = "classifier"
    precision: str = "fp32"
    jit_compile: bool = False
    truncation: str = "head"
    head_tokens: int = 128
    label_list: Optional[tuple] = None
    # A multi-task run: the task whose head is exported (its OUTPUT_DIR/<label>).
    task_label: Optional[str] = None
    # The classifier's batches are sorted by length and run in up to this many chunks.
    length_chunks: int = DEFAULT_LENGTH_CHUNKS
    # --task=classifier of a run_classifier_mgpu.py --doc_stride run: a text read in windows
    # `doc_stride` pieces apart (None: the run's, 0 for none), pooled by `window_pooling`
    # (the run's unless given).
    doc_stride: Optional[int] = None
    window_pooling: str = "mean"
    # --task=squad: run_squad.py's flags (read from the run's run_config.json unless given).
    squad: Optional[SquadAnswerOptions] = None
    flags_given: frozenset = frozenset()

    def validate(self) -> None:
        if not self.output_dir and not (self.model.bert_config_file
                                        and self.model.init_checkpoint):
            raise ValueError("--output_dir (a run) or --bert_config_file and --init_checkpoint "
                             "are required")
        check_at_least(self, 0, "export_version", "head_tokens")
        check_at_least(self, 1, "length_chunks")
        if self.task_label and self.task != "classifier":
            raise ValueError(f"--task_label chooses a classifier head; --task={self.task} has "
                             f"none")
        if self.squad is not None:
            self.squad.validate()
        if self.doc_stride is not None:
            check_at_least(self, 0, "doc_stride")
        if self.window_pooling not in WINDOW_POOLINGS:
            raise ValueError(f"--window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, "
                             f"got {self.window_pooling!r}")
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"--truncation must be one of {', '.join(TRUNCATIONS)}, got "
                             f"{self.truncation!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertToHfConfig:
    """convert_to_hf.py: a Google-layout checkpoint -> a Hugging Face folder (`output_dir`)."""
    model: ModelFiles
    output_dir: str
    label_list: Optional[tuple] = None
    task_label: Optional[str] = None
