"""The config of distill.py (a fine-tuned run -> a smaller student) and its flags.

The teacher is a run directory of run_classifier_mgpu.py (one --task_name, --task_type
classification; `DistillConfig`), run_ner.py (`DistillNerConfig`) or run_squad.py
(`DistillSquadConfig`): its run_config.json gives the data and text flags the student is
trained with (for a classifier: the task, data dir, vocabulary, casing, max_seq_length,
truncation, labels, what the head reads), each unless given on distill.py's command line; its
bert_config.json and latest checkpoint give the teacher model. The student is written as a
normal run of the teacher's script.
"""

import dataclasses
import glob
import json
import os
from typing import Any, Dict, Mapping, Optional

from bert_mgpu.configs.base import Flag, check_at_least
from bert_mgpu.configs.classifier import ClassifierConfig
from bert_mgpu.configs.ner import NerConfig
from bert_mgpu.configs.squad import SquadAnswerOptions, SquadConfig

# --student_layers: which teacher layers initialise the student's k layers (of the teacher's L).
STUDENT_LAYER_CHOICES = ("spread", "first")

# The teacher run's flags the student takes over unless given: model flags (the `model`
# subtree) and the classifier's own.
TEACHER_MODEL_FLAGS = ("vocab_file", "spm_model_file", "do_lower_case", "max_seq_length")
TEACHER_TASK_FLAGS = ("task_name", "data_dir", "classifier_input", "truncation", "head_tokens",
                      "text_columns", "column_names", "data_format", "processors_file")
# A run_ner.py teacher's: its data, tags and windows.
TEACHER_NER_FLAGS = ("data_dir", "tag_scheme", "doc_stride")
# A run_squad.py teacher's: its data, its batches' padding, and its windows and answers (the
# `answers` subtree: every SquadAnswerOptions field).
TEACHER_SQUAD_FLAGS = ("train_file", "predict_file", "pad_to_longest")


def read_json(path: str) -> Dict[str, Any]:
    """A JSON object file (local path) as a dict.

    Raises:
      ValueError: the file is missing or not a JSON object, naming it (and the line).
    """
    if not os.path.isfile(path):
        raise ValueError(f"--teacher_dir: {path} not found (a run_classifier_mgpu.py "
                         f"--output_dir holds it)")
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: not a JSON object")
    return value


def is_ner_run(run: Mapping[str, Any]) -> bool:
    """Whether a run_config.json is a run_ner.py run's (it records --tag_scheme)."""
    return bool(run.get("labels")) and "tag_scheme" in run


def is_squad_run(run: Mapping[str, Any]) -> bool:
    """Whether a run_config.json is a run_squad.py run's (it records --max_query_length)."""
    return "max_query_length" in run and not run.get("labels")


def teacher_kind(teacher_dir: Optional[str]) -> str:
    """"ner" or "squad" when --teacher_dir holds a run_ner.py or run_squad.py run, else
    "classifier" (also when it holds no readable run_config.json: the classifier's config then
    names what is wrong)."""
    path = os.path.join(teacher_dir or "", "run_config.json")
    try:
        run = read_json(path) if teacher_dir else {}
    except ValueError:
        return "classifier"
    return "ner" if is_ner_run(run) else "squad" if is_squad_run(run) else "classifier"


def teacher_run(teacher_dir: str) -> Dict[str, Any]:
    """The teacher's run_config.json, checked to be a single-task classification run, a
    run_ner.py or a run_squad.py run, with a checkpoint.

    Raises:
      ValueError: one line naming the file and what makes it no teacher.
    """
    path = os.path.join(teacher_dir, "run_config.json")
    run = read_json(path)
    ner = is_ner_run(run) or is_squad_run(run)
    if not ner and (not run.get("labels") or not run.get("task_name")):
        raise ValueError(f"--teacher_dir={teacher_dir} is not a run_classifier_mgpu.py run "
                         f"(nor a run_ner.py run): {path} has no labels/task_name")
    if not ner and (run.get("task_type", "classification") != "classification"
                    or "," in run["task_name"]):
        raise ValueError(f"--teacher_dir={teacher_dir}: distill.py distils a single-task "
                         f"classification run; {path} has task_name={run['task_name']}, "
                         f"task_type={run.get('task_type')}")
    if not glob.glob(os.path.join(teacher_dir, "*.index")):
        raise ValueError(f"--teacher_dir={teacher_dir} holds no checkpoint (model.ckpt-N.index)")
    if not ner and run.get("doc_stride"):
        raise ValueError(f"--teacher_dir={teacher_dir} was trained with --doc_stride (windows), "
                         f"which distill.py does not support yet")
    return run


def _from_teacher(cls, values: Dict[str, Any], given, run: Mapping[str, Any],
                  task_flags=TEACHER_TASK_FLAGS) -> Dict[str, Any]:
    """`values` of config class `cls` with the teacher run's flags (the model's and
    `task_flags`) where not given (`flags` too, so the student's run_config.json records them
    and the file checks read them)."""
    filled = {}
    model_changes = {n: run[n] for n in TEACHER_MODEL_FLAGS if n not in given and n in run}
    filled.update(model_changes)
    for name in task_flags:
        if name not in given and name in run:
            filled[name] = run[name]
            values[name] = cls.flag(name).field_value(run[name])
    if "bert_config_file" not in given:
        teacher_config = os.path.join(values["teacher_dir"], "bert_config.json")
        model_changes["bert_config_file"] = teacher_config
        filled["bert_config_file"] = teacher_config
    values["model"] = dataclasses.replace(values["model"], **model_changes)
    values["flags"] = dict(values["flags"], **filled)
    if "labels" not in run:  # a run_squad.py teacher
        return values
    if "label_list" in given and list(values["label_list"] or ()) != list(run["labels"]):
        raise ValueError(f"--label_list={','.join(values['label_list'] or ())}: the teacher's "
                         f"labels are {','.join(run['labels'])} (in this order); the student "
                         f"learns the teacher's outputs")
    if "label_list" not in given:
        values["label_list"] = cls.flag("label_list").field_value(list(run["labels"]))
        values["flags"] = dict(values["flags"], label_list=list(run["labels"]))
    return values


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Distillation:
    """What distill.py's configs share (a classifier teacher's, a run_ner.py teacher's, a
    run_squad.py teacher's): the teacher and distillation flags (declared once here: each
    config's fields follow its task's), their checks, and the student's depth."""
    teacher_dir: str = Flag("string", None, "The teacher: a run_classifier_mgpu.py --output_dir "
                                            "(run_config.json, bert_config.json, its latest "
                                            "checkpoint).").field(required=True)
    student_num_layers: int = Flag("integer", 0, "The student's encoder layers (default 0: half "
                                                 "the teacher's, rounded up); at most the "
                                                 "teacher's.").field()
    student_layers: str = Flag("enum", "spread", "Which teacher layers initialise the student's "
                                                 "k layers (of the teacher's L): spread = "
                                                 "layer floor(i * L / k) for student layer i "
                                                 "(half: 0, 2, 4, ..., as DistilBERT); first = "
                                                 "layers 0..k-1. Embeddings, pooler and output "
                                                 "layer: the teacher's.",
                               STUDENT_LAYER_CHOICES).field()
    student_config: Optional[str] = Flag(
        "string", None, "A smaller student: its bert_config.json (the teacher's vocab_size, any "
                        "hidden size and depth up to the teacher's), initialised from "
                        "--init_checkpoint (its output layer random). Default: the teacher's "
                        "config with --student_num_layers layers.").field()
    unlabeled_file: Optional[str] = Flag(
        "string", None, "Unlabelled text the student also learns from, soft targets only: a "
                        "UTF-8 file, one example per line (a pair task: text_a<TAB>text_b); "
                        "its lines count as training examples (epochs and steps).").field()
    temperature: float = Flag("float", 2.0, "The softmax temperature T of the soft targets: the "
                                            "loss is T^2 * KL(teacher_T || student_T) + alpha * "
                                            "cross-entropy(labels) (Hinton et al. 2015).").field()
    alpha: float = Flag("float", 0.5, "The weight of the labels' cross-entropy in the loss (0: "
                                      "soft targets only).").field()
    tinybert_hidden_weight: float = Flag(
        "float", 0.0, "Weight of TinyBERT's hidden-state loss (Jiao et al. 2020; 0: off): the "
                      "MSE of the student's embeddings and of each layer's output against its "
                      "teacher layer's (--student_layers' map, the last of each block), through "
                      "a learned projection when the widths differ.").field()
    tinybert_attention_weight: float = Flag(
        "float", 0.0, "Weight of TinyBERT's attention-score loss (0: off): the MSE of each "
                      "student layer's unnormalised attention scores against its teacher "
                      "layer's (the same number of heads).").field()
    minilm_attention_weight: float = Flag(
        "float", 0.0, "Weight of MiniLM's self-attention distribution loss (Wang et al. 2020; "
                      "0: off): the KL of the last layers' attention probabilities, teacher to "
                      "student, any widths.").field()
    minilm_value_weight: float = Flag(
        "float", 0.0, "Weight of MiniLM's value-relation loss (0: off): the KL of the last "
                      "layers' softmax(V V^T / sqrt(d)), teacher to student.").field()
    minilm_relation_heads: int = Flag(
        "integer", 0, "The heads of MiniLM's losses: 0 = the models' attention heads (the "
                      "same number in both), else the queries, keys and values split into this "
                      "many relation heads (MiniLMv2; it divides both hidden sizes).").field()


    def validate_distillation(self) -> None:
        """Raises ValueError naming the flag of the first impossible distillation value."""
        check_at_least(self, 0, "student_num_layers")
        if self.student_layers not in STUDENT_LAYER_CHOICES:
            raise ValueError(f"--student_layers must be one of "
                             f"{', '.join(STUDENT_LAYER_CHOICES)}, got {self.student_layers!r}")
        if not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0, got {self.temperature}")
        if not self.alpha >= 0:
            raise ValueError(f"--alpha must be >= 0, got {self.alpha}")
        if self.student_config and not self.model.init_checkpoint:
            raise ValueError("--student_config needs --init_checkpoint (the smaller model's "
                             "pretrained weights)")
        if self.model.init_checkpoint and not self.student_config:
            raise ValueError("--init_checkpoint is the weights of --student_config; without it "
                             "the student starts from the teacher's layers")
        self._validate_student_size()
        self._validate_inner_losses()

    def _validate_student_size(self) -> None:
        """The student is no larger than the teacher (depth, width) and reads its vocabulary."""
        teacher = read_json(self.model.bert_config_file)
        layers = teacher.get("num_hidden_layers", 0)
        if self.student_num_layers > layers:
            raise ValueError(f"--student_num_layers={self.student_num_layers} is larger than the "
                             f"teacher's {layers} layers ({self.model.bert_config_file})")
        if not self.student_config:
            return
        student = read_json(self.student_config)
        for key in ("num_hidden_layers", "hidden_size"):
            if student.get(key, 0) > teacher.get(key, 0):
                raise ValueError(f"--student_config={self.student_config}: {key}="
                                 f"{student.get(key)} is larger than the teacher's "
                                 f"{teacher.get(key)}")
        if student.get("vocab_size") != teacher.get("vocab_size"):
            raise ValueError(f"--student_config={self.student_config}: vocab_size="
                             f"{student.get('vocab_size')}, the teacher's is "
                             f"{teacher.get('vocab_size')} (the student reads the teacher's "
                             f"input ids)")
        if self.student_num_layers:
            raise ValueError("--student_num_layers applies to a student cut from the teacher; "
                             "--student_config sets its own depth")

    def _validate_inner_losses(self) -> None:
        """The TinyBERT/MiniLM weights are >= 0 and the two models can be compared as asked
        (heads, relation heads, no rotary attention)."""
        weights = {"tinybert_hidden_weight": self.tinybert_hidden_weight,
                   "tinybert_attention_weight": self.tinybert_attention_weight,
                   "minilm_attention_weight": self.minilm_attention_weight,
                   "minilm_value_weight": self.minilm_value_weight}
        for name, weight in weights.items():
            if not weight >= 0:
                raise ValueError(f"--{name} must be >= 0, got {weight}")
        check_at_least(self, 0, "minilm_relation_heads")
        attention = [n for n, w in weights.items() if w and n != "tinybert_hidden_weight"]
        if not attention:
            return
        teacher = read_json(self.model.bert_config_file)
        student = read_json(self.student_config) if self.student_config else teacher
        for where, config in (("the teacher's", teacher), ("--student_config's", student)):
            if config.get("position_embedding_type") == "rope":
                raise ValueError(f"--{attention[0]}: {where} model has rotary attention, whose "
                                 f"scores the attention losses do not read")
        heads = (student.get("num_attention_heads"), teacher.get("num_attention_heads"))
        minilm = self.minilm_attention_weight or self.minilm_value_weight
        if heads[0] != heads[1] and (self.tinybert_attention_weight or
                                     (minilm and not self.minilm_relation_heads)):
            flag = "--tinybert_attention_weight" if self.tinybert_attention_weight else \
                "--minilm_attention_weight/--minilm_value_weight (or --minilm_relation_heads)"
            raise ValueError(f"{flag} compares head by head: the student has {heads[0]} "
                             f"attention heads, the teacher {heads[1]}")
        relation = self.minilm_relation_heads
        widths = (student.get("hidden_size", 0), teacher.get("hidden_size", 0))
        if minilm and relation and any(w % relation for w in widths):
            raise ValueError(f"--minilm_relation_heads={relation} does not divide the hidden "
                             f"sizes {widths[0]} (student) and {widths[1]} (teacher)")

    def student_depth(self, teacher_layers: int) -> int:
        """The student's layers when cut from a teacher of `teacher_layers` layers."""
        return self.student_num_layers or (teacher_layers + 1) // 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistillConfig(_Distillation, ClassifierConfig):
    """distill.py: run_classifier_mgpu.py's flags (the training, evaluation and prediction of
    the student) plus the teacher and the distillation's own. Data and text flags default to
    the teacher run's; --bert_config_file is the teacher's (TEACHER_DIR/bert_config.json)."""
    required_flags = ("teacher_dir", "output_dir")
    narrowed_flags = dict(
        ClassifierConfig.narrowed_flags,
        init_checkpoint={"help": "With --student_config: the student's pretrained weights (a "
                                 "smaller BERT of the teacher's vocabulary). Without: not "
                                 "allowed (the student starts from the teacher's layers)."},
        bert_config_file={"help": "The teacher's model config (default: "
                                  "TEACHER_DIR/bert_config.json)."})
    @classmethod
    def build(cls, values, given) -> "DistillConfig":
        """The teacher run's data and text flags where not given, then the classifier's
        build (--task_type and --best_metric)."""
        run = teacher_run(values["teacher_dir"])
        if is_ner_run(run):
            raise ValueError(f"--teacher_dir={values['teacher_dir']} is a run_ner.py run "
                             f"(DistillNerConfig)")
        values = _from_teacher(cls, dict(values), given, run)
        return super().build(values, given)

    def validate(self) -> None:
        super().validate()
        if self.num_tasks != 1 or self.task_type != "classification":
            raise ValueError("distill.py distils one classification task (--task_name, "
                             "--task_type=classification)")
        if self.doc_stride:
            raise ValueError("--doc_stride is not supported by distill.py yet")
        self.validate_distillation()
        if self.unlabeled_file and not os.path.isfile(self.unlabeled_file):
            raise ValueError(f"--unlabeled_file={self.unlabeled_file}: not found")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistillNerConfig(_Distillation, NerConfig):
    """distill.py with a run_ner.py teacher: run_ner.py's flags (the student's training,
    evaluation and prediction) plus the distillation's; the data directory, tag scheme,
    windows, vocabulary, casing, --max_seq_length and tags default to the teacher run's. The
    script defines DistillConfig's flags and this one's (--tag_scheme) and builds this config
    when --teacher_dir holds a run_ner.py run (`teacher_kind`)."""
    required_flags = ("teacher_dir", "output_dir")
    narrowed_flags = dict(NerConfig.narrowed_flags, **{
        name: DistillConfig.narrowed_flags[name] for name in ("init_checkpoint",
                                                              "bert_config_file")})
    data_dir: str = NerConfig.flag("data_dir").field(default=None)

    @classmethod
    def build(cls, values, given) -> "DistillNerConfig":
        """The teacher run's data, tag and text flags where not given; --best_metric eval_f1
        (run_ner.py's default) unless given."""
        run = teacher_run(values["teacher_dir"])
        values = _from_teacher(cls, dict(values), given, run, TEACHER_NER_FLAGS)
        if "best_metric" not in given:
            values["best_metric"] = NerConfig.flag("best_metric").default
        return super().build(values, given)

    def validate(self) -> None:
        if not self.data_dir:
            raise ValueError("--data_dir is required (the teacher run's has none)")
        super().validate()
        self.validate_distillation()
        if self.unlabeled_file:
            raise ValueError("--unlabeled_file is for a classifier teacher (a run_ner.py "
                             "teacher learns from --data_dir's CoNLL files)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistillSquadConfig(_Distillation, SquadConfig):
    """distill.py with a run_squad.py teacher: run_squad.py's flags (the student's training,
    prediction and evaluation) plus the distillation's; the SQuAD files, windows and answer
    flags, --pad_to_longest, vocabulary, casing and --max_seq_length default to the teacher
    run's. The script builds this config when --teacher_dir holds a run_squad.py run
    (`teacher_kind`)."""
    required_flags = ("teacher_dir", "output_dir")
    narrowed_flags = dict(SquadConfig.narrowed_flags, **{
        name: DistillConfig.narrowed_flags[name] for name in ("init_checkpoint",
                                                              "bert_config_file")})

    @classmethod
    def build(cls, values, given) -> "DistillSquadConfig":
        """The teacher run's files, windows, answer and text flags where not given."""
        run = teacher_run(values["teacher_dir"])
        values = _from_teacher(cls, dict(values), given, run, TEACHER_SQUAD_FLAGS)
        answers = {f.name: run[f.name] for f in dataclasses.fields(SquadAnswerOptions)
                   if f.name not in given and f.name in run}
        values["answers"] = dataclasses.replace(values["answers"], **{
            name: SquadAnswerOptions.flag(name).field_value(value)
            for name, value in answers.items()})
        values["flags"] = dict(values["flags"], **answers)
        return super().build(values, given)

    def validate(self) -> None:
        super().validate()
        self.validate_distillation()
        if self.unlabeled_file:
            raise ValueError("--unlabeled_file is for a classifier teacher (a run_squad.py "
                             "teacher learns from --train_file's questions)")
