"""distill.py: a fine-tuned classifier (the teacher) -> a student with fewer layers or a smaller
width, trained on the teacher's softened outputs plus the labels (Hinton et al. 2015), and
written as a normal classifier run (Google's variable names, its own bert_config.json,
run_config.json with the labels) that export_saved_model.py and run_classifier.py read.

The teacher's logits are computed in the same traced step as the student's, inside the tower
function (so towers split the teacher's work too), with its weights frozen (they are not among
the task's `named_variables`: the trainer neither updates nor saves them) and without dropout.
"""

import dataclasses
import os
from typing import List, Mapping, Sequence, Tuple

import tensorflow as tf
from absl import logging

from bert_mgpu.data import checks, classifier_data, tfrecord
from bert_mgpu.data.processors import InputExample
from bert_mgpu.engine import checkpoint
from bert_mgpu.engine.job import Job, start_job, train_watched, with_dropout_layout
from bert_mgpu.model import heads
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import (
    BertClassifier,
    classifier_inputs,
    dev_results,
    evaluate_classifier,
    predict_classifier,
)

# The student's initial weights (cut from the teacher), written once into its output_dir.
STUDENT_INIT = os.path.join("student_init", "model.ckpt")
_LAYER_PREFIX = "bert/encoder/layer_"


def distillation_loss(teacher_logits, student_logits, temperature: float) -> tf.Tensor:
    """Hinton et al.'s soft-target loss per example: T^2 * KL(softmax(t/T) || softmax(s/T))
    (the T^2 keeps its gradients' scale independent of T).

    Args:
      teacher_logits: float32 Tensor [B, num_labels] (no gradient is taken through it).
      student_logits: float32 Tensor [B, num_labels].
      temperature: Python float > 0.

    Returns:
      float32 Tensor [B].
    """
    teacher_log_probs = tf.nn.log_softmax(teacher_logits / temperature, axis=-1)
    student_log_probs = tf.nn.log_softmax(student_logits / temperature, axis=-1)
    kl = tf.reduce_sum(tf.exp(teacher_log_probs) * (teacher_log_probs - student_log_probs),
                       axis=-1)
    return temperature * temperature * kl


class DistillClassifier(BertClassifier):
    """The student (Google's `BertClassifier`: its variables are the task's `named_variables`,
    its evaluation and prediction the classifier's) trained against a frozen teacher
    `BertClassifier`: the per-example loss is `distillation_loss` at `temperature` plus `alpha`
    times the labels' cross-entropy."""

    def __init__(self, config: BertConfig, teacher_config: BertConfig, num_labels: int,
                 temperature: float, alpha: float, compute_dtype=tf.float32,
                 label_names=None, classifier_input: str = "pooled"):
        super().__init__(config, num_labels, compute_dtype, label_names=label_names,
                         classifier_input=classifier_input)
        self.teacher = BertClassifier(teacher_config, num_labels, compute_dtype,
                                      label_names=label_names, classifier_input=classifier_input)
        self.temperature = temperature
        self.alpha = alpha

    def teacher_logits(self, features) -> tf.Tensor:
        """float32 [B, num_labels]: the teacher's logits, no dropout, no gradient. The
        [batch, length] layout of training (no padding skipped), so the towers trace it as
        the student."""
        teacher = self.teacher
        out = teacher.bert(features["input_ids"], features["input_mask"],
                           features["segment_ids"], training=False)
        head_input = heads.classifier_features(out, features["input_mask"],
                                               teacher.classifier_input)
        return tf.stop_gradient(teacher.classifier.logits(head_input, training=False))

    def per_example_loss(self, features, training) -> tf.Tensor:
        """float32 [B]; an unlabelled example (`is_real_example` 0, --unlabeled_file) has the
        soft-target term only."""
        student = self._forward(features, training)
        soft = distillation_loss(self.teacher_logits(features), student["logits"],
                                 self.temperature)
        if not self.alpha:
            return soft
        hard = self.alpha * student["per_example_loss"]
        if "is_real_example" in features:
            hard *= tf.cast(tf.reshape(features["is_real_example"], [-1]), tf.float32)
        return soft + hard


def student_layer_map(teacher_layers: int, student_layers: int, choice: str) -> List[int]:
    """The teacher layer each student layer starts from (`choice`: --student_layers):
    "spread" = floor(i * L / k) (half of 12: 0, 2, ..., 10, as DistilBERT), "first" = 0..k-1."""
    if choice == "first":
        return list(range(student_layers))
    return [i * teacher_layers // student_layers for i in range(student_layers)]


def _teacher_name(name: str, layer_map: Sequence[int]) -> str:
    """The teacher variable a student variable `name` starts from."""
    if not name.startswith(_LAYER_PREFIX):
        return name
    index, rest = name[len(_LAYER_PREFIX):].split("/", 1)
    return f"{_LAYER_PREFIX}{layer_map[int(index)]}/{rest}"


def write_student_init(prefix: str, teacher_checkpoint: str,
                       student_variables: Mapping[str, tf.Variable],
                       layer_map: Sequence[int]) -> str:
    """Writes the student's initial weights at `prefix`: each variable (Google's name) the
    teacher's of `_teacher_name`, read from `teacher_checkpoint`; returns the prefix.

    Raises:
      checkpoint.CheckpointError: the teacher checkpoint lacks a variable or its shape differs.
    """
    reader = tf.train.load_checkpoint(teacher_checkpoint)
    tensors, problems = {}, []
    for name, var in student_variables.items():
        source = _teacher_name(name, layer_map)
        if not reader.has_tensor(source):
            problems.append(f"{source} is missing")
            continue
        value = reader.get_tensor(source)
        if list(value.shape) != var.shape.as_list():
            problems.append(f"{source} has shape {list(value.shape)}, the student's {name} "
                            f"{var.shape.as_list()}")
            continue
        tensors[name] = value
    if problems:
        raise checkpoint.CheckpointError(f"teacher checkpoint {teacher_checkpoint}: "
                                         f"{'; '.join(problems[:3])}")
    return checkpoint.write_bundle(prefix, tensors)


@dataclasses.dataclass
class Student:
    """What the student is: its model config, and how it starts (the teacher layers it is cut
    from, or a smaller pretrained checkpoint)."""
    config: BertConfig
    layer_map: List[int]  # [] for a --student_config student
    init_checkpoint: str  # "" when it is cut from the teacher (STUDENT_INIT is written)


def student_of(cfg, teacher_config: BertConfig) -> Student:
    """The student of a DistillConfig `cfg` and the teacher's model config."""
    if cfg.student_config:
        return Student(BertConfig.from_json_file(cfg.student_config), [],
                       cfg.model.init_checkpoint)
    depth = cfg.student_depth(teacher_config.num_hidden_layers)
    layer_map = student_layer_map(teacher_config.num_hidden_layers, depth, cfg.student_layers)
    return Student(teacher_config.replace(num_hidden_layers=depth), layer_map, "")


def run_distill(cfg) -> dict:
    """Runs distill.py with a `configs/distill.py` DistillConfig; returns the eval results.

    The teacher's checkpoint is found before anything is written. The student's run is
    run_classifier_mgpu.py's: the same data path, trainer (towers, accumulation, resume,
    evaluation during training) and files.
    """
    teacher_checkpoint = checkpoint.resolve_checkpoint_path(cfg.teacher_dir)
    job = start_job(cfg)
    teacher_config = job.bert_config
    student = student_of(cfg, teacher_config)
    if cfg.classifier_input == "cls_last4" and student.config.num_hidden_layers < 4:
        raise ValueError(f"--classifier_input=cls_last4 needs at least 4 layers; the student "
                         f"has {student.config.num_hidden_layers}")
    job.bert_config = student.config
    tokenizer = checks.tokenizer_for(cfg.model)
    labels, data, splits = classifier_inputs(cfg, tokenizer)
    teacher_labels = list(checkpoint.read_run_config(cfg.teacher_dir)["labels"])
    if list(labels) != teacher_labels:
        raise ValueError(f"the student's labels {list(labels)} are not the teacher's "
                         f"{teacher_labels} (--label_list, in the teacher's order)")
    task = _distill_task(cfg, job, teacher_config, labels)
    checkpoint.restore_checkpoint(teacher_checkpoint, task.teacher.named_variables())
    train_files, num_train = [], 0
    if cfg.do_train:
        train_files, num_train = [splits["train"][0]], splits["train"][1]
        if cfg.unlabeled_file:
            unlabeled, count = unlabeled_records(cfg, data, tokenizer, labels)
            train_files, num_train = train_files + [unlabeled], num_train + count
    train_cfg = _student_train_config(cfg, job, task, student, teacher_checkpoint,
                                      train_files, num_train)
    job.save_effective_config(
        labels=labels, task_type=cfg.task_type, best_metric=cfg.best_metric,
        bert_config_file=os.path.join(cfg.output_dir, "bert_config.json"),
        init_checkpoint=train_cfg.init_checkpoint, teacher_checkpoint=teacher_checkpoint,
        student_layer_map=student.layer_map)
    trainer = job.trainer(task, train_cfg, job.layerwise_lr_multipliers(task))
    watch = train_watched(job, trainer,
                          lambda: job.training_input(train_files, data.shapes, train_cfg),
                          lambda: dev_results(cfg, trainer, data, splits["dev"][0]))
    result = {}
    if job.chief and cfg.do_eval:
        result = evaluate_classifier(cfg, trainer, data, *splits["dev"], check=watch.check)
    if job.chief and cfg.do_predict:
        job.weights_for_prediction(trainer, job.cfg.keep_best_checkpoint)
        predict_classifier(cfg, trainer, data, *splits["test"], task=task)
    return result


def unlabeled_records(cfg, data, tokenizer, labels) -> Tuple[str, int]:
    """(path, number of records) of --unlabeled_file's examples as classifier records with
    `is_real_example` 0 (and the first label as a placeholder `label_ids`), written into
    --output_dir once (keyed as the classifier's feature caches)."""
    model = cfg.model
    key = classifier_data.cache_key(
        cfg.task_name, "unlabeled", [cfg.unlabeled_file], model.vocab_file, model.spm_model_file,
        model.do_lower_case, model.max_seq_length, labels, cfg.truncation, cfg.head_tokens,
        processor=data.processor.cache_parts())
    path = os.path.join(cfg.output_dir, f"unlabeled.{key}.tf_record")
    if tf.io.gfile.exists(path):
        return path, sum(1 for _ in tf.data.TFRecordDataset(path))
    with tf.io.gfile.GFile(cfg.unlabeled_file) as f:
        lines = [line.rstrip("\r\n") for line in f]
    if not any(line.strip() for line in lines):
        raise ValueError(f"--unlabeled_file={cfg.unlabeled_file}: no text")
    label_map = {label: i for i, label in enumerate(labels)}
    count = 0
    with tfrecord.RecordFileWriter(path) as writer:
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            text_a, _, text_b = line.partition("\t")
            example = InputExample(f"unlabeled-{i}", text_a, text_b or None, labels[0])
            values = classifier_data.convert_single_example(
                example, label_map, model.max_seq_length, tokenizer, cfg.truncation,
                cfg.head_tokens)
            values["is_real_example"] = [0]
            writer.write(tfrecord.encode_example(values))
            count += 1
    logging.info("Wrote %d unlabelled examples (soft targets only): %s", count, path)
    return path, count


def _distill_task(cfg, job: Job, teacher_config: BertConfig, labels) -> DistillClassifier:
    return DistillClassifier(job.bert_config, teacher_config, len(labels), cfg.temperature,
                             cfg.alpha, compute_dtype=job.compute_dtype(), label_names=labels,
                             classifier_input=cfg.classifier_input)


def _student_train_config(cfg, job: Job, task: DistillClassifier, student: Student,
                          teacher_checkpoint: str, train_files: Sequence[str], num_train: int):
    """The trainer's config of the student: the classifier's steps over `num_train` examples
    (the training set's and the unlabelled ones'), initialised from `student.init_checkpoint`
    or from its layers cut from the teacher (STUDENT_INIT, written once before the first
    checkpoint by the chief)."""
    train_cfg = with_dropout_layout(cfg, cfg.train_config(num_train, job.num_workers),
                                    train_files)
    init = student.init_checkpoint
    if not init and not job.chief:
        # The chief's initial (or restored) weights are broadcast to every worker before the
        # first update (Trainer.train), so the others need no file the chief may not have
        # written yet.
        init = None
    elif not init:
        init = os.path.join(cfg.output_dir, STUDENT_INIT)
        fresh = checkpoint.latest_checkpoint(cfg.output_dir) is None
        if fresh and not tf.io.gfile.exists(init + ".index"):
            write_student_init(init, teacher_checkpoint, task.named_variables(),
                               student.layer_map)
            logging.info("Student of %d layers initialised from the teacher's layers %s (%s)",
                         len(student.layer_map), student.layer_map, teacher_checkpoint)
    if cfg.do_train:
        logging.info("***** Running distillation: %d examples, %g epochs, %d steps, T=%g, "
                     "alpha=%g *****", num_train, cfg.num_train_epochs,
                     train_cfg.num_train_steps, cfg.temperature, cfg.alpha)
    return dataclasses.replace(train_cfg, init_checkpoint=init)
