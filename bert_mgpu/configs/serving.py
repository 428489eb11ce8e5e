"""The configs of export_saved_model.py, convert_to_hf.py and convert_hf_checkpoint.py, and
their flags."""

import dataclasses
from typing import Optional

from bert_mgpu.configs import registry
from bert_mgpu.configs.base import (
    HEAD_TOKENS,
    LABEL_LIST,
    TASK_LABEL,
    TRUNCATION,
    TRUNCATIONS,
    Flag,
    FromFlags,
    ModelFiles,
    TrainOptions,
    check_at_least,
    flags_given,
    subtree,
)
from bert_mgpu.configs.classifier import WINDOW_POOLING, WINDOW_POOLINGS
from bert_mgpu.configs.squad import SquadAnswerOptions

# export_saved_model.py --length_chunks (see serving/export.py).
DEFAULT_LENGTH_CHUNKS = 4
# export_saved_model.py --quantize (see serving/int8.py).
QUANTIZATIONS = ("none", "int8")


def _task_flag() -> Flag:
    """--task: the registered tasks (configs/registry.py), each saying what it returns."""
    known = registry.tasks()
    returns = [t.returns for t in known.values()]
    listed = ", ".join(returns[:-1]) + " or " + returns[-1] if len(returns) > 1 else returns[0]
    return Flag("enum", "classifier", f"What the SavedModel returns: {listed}.", tuple(known))


@dataclasses.dataclass(frozen=True)
class ConvertHfConfig(FromFlags):
    """convert_hf_checkpoint.py."""
    required_flags = ("hf_model_dir", "output_dir")
    hf_model_dir: str = Flag("string", None, "Hugging Face BERT folder: config.json, "
                                             "model.safetensors or pytorch_model.bin, "
                                             "vocab.txt.").field(required=True)
    output_dir: str = Flag("string", None, "Where to write bert_config.json, "
                                           "bert_model.ckpt.{index,data-00000-of-00001} and "
                                           "vocab.txt.", output="dir").field(required=True)
    gelu: str = Flag("enum", "exact", "How to write Hugging Face's erf 'gelu': 'exact' keeps its "
                                      "numerics (hidden_act 'gelu_exact'); 'tanh' writes "
                                      "Google's 'gelu' (the tanh approximation Google's code "
                                      "computes).", ("exact", "tanh")).field()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig(FromFlags):
    """export_saved_model.py: a run (`output_dir`) or explicit model files -> a SavedModel.

    `model` fields left unset are read from the run's `run_config.json` (the vocabulary, casing,
    max_seq_length, truncation), its `bert_config.json` and latest checkpoint. `flags_given`
    names the flags set on the command line: those win over the run's values.
    """
    required_flags = ("export_dir",)
    narrowed_flags = {
        "init_checkpoint": {"help": "The checkpoint to export (default: the latest of "
                                    "--output_dir)."},
        "doc_stride": {"help": "--task=classifier: a text longer than max_seq_length - 2 pieces "
                               "is read in windows starting this many pieces apart, as "
                               "run_classifier_mgpu.py --doc_stride (default: the run's; 0 = "
                               "the first window only). --task=squad: run_squad.py's flag "
                               "(default: the run's, else 128). --task=ner: run_ner.py's "
                               "(default: the run's, else half a window)."}}
    model: ModelFiles = subtree(ModelFiles)
    export_dir: str = Flag("string", None, "Where the SavedModel goes, in TF Serving's layout: "
                                           "EXPORT_DIR/<version>/saved_model.pb, variables/, "
                                           "assets/vocab.txt.", output="dir").field(required=True)
    output_dir: Optional[str] = Flag(
        "string", None, "A run of run_classifier_mgpu.py, run_squad.py (or run_pretraining.py): "
                        "its latest checkpoint, bert_config.json and run_config.json "
                        "(vocabulary, casing, max_seq_length, truncation, labels, SQuAD's window "
                        "and answer flags) are exported; explicit flags win.").field()
    export_version: int = Flag("integer", 0, "The version directory under --export_dir (0: one "
                                             "more than the highest there, 1 for a new "
                                             "directory).").field()
    task: str = _task_flag().field()
    precision: str = TrainOptions.flag("precision").field(
        help="The exported compute: fp32, bf16 or fp16 (variables stay float32; outputs are "
             "float32).")
    jit_compile: bool = Flag("bool", False, "Compile the exported encoder with XLA "
                                            "(jit_compile).").field()
    quantize: str = Flag(
        "enum", "none", "int8: the model's weights in int8 with dynamically quantized "
                        "activations, as a LiteRT model (model_int8.tflite) beside a SavedModel "
                        "holding the tokenizer; serve it with python -m "
                        "bert_mgpu.serving.int8_runner. --task=classifier (single-label or "
                        "multi-label classification, no --doc_stride) or --task=squad. none: "
                        "the float SavedModel.",
        QUANTIZATIONS).field()
    truncation: str = TRUNCATION.field()
    head_tokens: int = HEAD_TOKENS.field()
    label_list: Optional[tuple] = LABEL_LIST.field(
        help="Label names in id order (default: the run's labels, else 0..N-1).")
    # A multi-task run: the task whose head is exported (its OUTPUT_DIR/<label>).
    task_label: Optional[str] = TASK_LABEL.field()
    # The classifier's batches are sorted by length and run in up to this many chunks.
    length_chunks: int = Flag(
        "integer", DEFAULT_LENGTH_CHUNKS,
        "--task=classifier: sort each batch by text length and run it in up to this many chunks "
        "(at least 8 texts each), each cut to its own longest text, so short texts are not "
        "padded to the batch's longest; 1 = off (one piece, cut to the batch's longest). The "
        "outputs are the same.").field()
    # --task=classifier of a run_classifier_mgpu.py --doc_stride run: a text read in windows
    # `doc_stride` pieces apart (None: the run's, 0 for none; the flag is run_squad.py's, read
    # from `squad`), pooled by `window_pooling` (the run's unless given).
    doc_stride: Optional[int] = None
    window_pooling: str = WINDOW_POOLING.field(
        help="--task=classifier with windows: how a text's windows are pooled, mean or max "
             "(default: the run's).")
    # --task=squad: run_squad.py's flags (read from the run's run_config.json unless given).
    squad: Optional[SquadAnswerOptions] = subtree(SquadAnswerOptions, default=None)
    flags_given: frozenset = flags_given()

    @classmethod
    def build(cls, values, given) -> "ExportConfig":
        """The export's config: --doc_stride only when given (the run's otherwise), run_squad.py's
        flags only for a task whose export reads them back (its registered `options`)."""
        answers = values["squad"]
        reads = registry.task(values["task"]).options is SquadAnswerOptions
        return cls(**dict(values, squad=answers if reads else None,
                          doc_stride=answers.doc_stride if "doc_stride" in given else None))

    def validate(self) -> None:
        if not self.output_dir and not (self.model.bert_config_file
                                        and self.model.init_checkpoint):
            raise ValueError("--output_dir (a run) or --bert_config_file and --init_checkpoint "
                             "are required")
        check_at_least(self, 0, "export_version", "head_tokens")
        check_at_least(self, 1, "length_chunks")
        if self.quantize == "int8" and not registry.task(self.task).int8:
            supported = [name for name, task in registry.tasks().items() if task.int8]
            raise ValueError(f"--quantize=int8 exports --task={' or --task='.join(supported)} "
                             f"only, not --task={self.task}")
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
class ConvertToHfConfig(FromFlags):
    """convert_to_hf.py: a Google-layout checkpoint -> a Hugging Face folder (`output_dir`)."""
    required_flags = ("bert_config_file", "init_checkpoint", "vocab_file", "output_dir")
    model: ModelFiles = subtree(ModelFiles, ("bert_config_file", "init_checkpoint", "vocab_file",
                                             "do_lower_case"))
    output_dir: str = Flag("string", None, "Where the Hugging Face folder goes: config.json, "
                                           "model.safetensors, vocab.txt, "
                                           "tokenizer_config.json.",
                           output="dir").field(required=True)
    label_list: Optional[tuple] = LABEL_LIST.field(
        help="Label names of a classifier head in id order (written as id2label; default: the "
             "run's labels from the run_config.json next to the checkpoint, else LABEL_0..).")
    task_label: Optional[str] = TASK_LABEL.field()
