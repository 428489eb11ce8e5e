"""distill.py: a fine-tuned classifier, run_ner.py or run_squad.py run (the teacher) -> a
student with fewer layers or a smaller width, trained on the teacher's softened outputs plus
the labels (Hinton et al. 2015), and written as a normal run of the teacher's script (Google's
variable names, its own bert_config.json, run_config.json with the teacher's labels or answer
flags) that export_saved_model.py and the teacher's script read.

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
from bert_mgpu.model import execution, heads, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import distill_losses
from bert_mgpu.tasks.classifier import (
    BertClassifier,
    classifier_inputs,
    dev_results,
    evaluate_classifier,
    predict_classifier,
)
from bert_mgpu.tasks.ner import TaggingTask, run_ner
from bert_mgpu.tasks.squad import SquadTask, run_squad

# The student's initial weights (cut from the teacher), written once into its output_dir.
STUDENT_INIT = os.path.join("student_init", "model.ckpt")
_LAYER_PREFIX = "bert/encoder/layer_"
# The name scope of the student's variables that only its training has (TinyBERT's W).
PROJECTION_SCOPE = "distill"


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


class _Distiller:
    """What a student task shares whatever its head (a `BertModel` `bert` and a frozen
    `teacher` task with one): the soft targets' temperature and the labels' weight `alpha`,
    the `inner` losses (distill_losses.py) and TinyBERT's projections across widths,
    `distill/hidden_projection` [d', d] (and `distill/embedding_projection` when the embedding
    widths differ): task variables (trained, checkpointed, resumed) that no export or
    fine-tuning run reads."""

    def _distills(self, config: BertConfig, teacher_config: BertConfig, temperature: float,
                  alpha: float, inner: distill_losses.InnerLosses) -> None:
        self.temperature = temperature
        self.alpha = alpha
        self.inner = inner
        self._projections = modeling.ParameterStore()
        if inner.hidden:
            for name, student_width, teacher_width in (
                    ("hidden_projection", config.hidden_size, teacher_config.hidden_size),
                    ("embedding_projection", config.embedding_size,
                     teacher_config.embedding_size)):
                if student_width != teacher_width:
                    self._projections.add(
                        f"{PROJECTION_SCOPE}/{name}", [student_width, teacher_width],
                        modeling.truncated_normal_initializer(config.initializer_range))

    def student_variables(self):
        """The student model's variables (Google's names): what it starts from."""
        return super().named_variables()

    def named_variables(self):
        return dict(super().named_variables(), **self._projections.as_dict())

    def inner_loss(self, student, teacher, input_mask) -> tf.Tensor:
        """float32 [B]: the weighted sum of the `inner` losses of the student's and teacher's
        `BertOutputs` (the TinyBERT ones summed over the student's layers, as Jiao et al.)."""
        inner = self.inner
        # Read as the model reads its weights (the towers may differentiate per-device copies).
        context = execution.current()
        projections = {name: context.value(var) for name, var in self._projections.items()}
        loss = tf.zeros_like(tf.cast(input_mask[:, 0], tf.float32))
        pairs = list(enumerate(inner.layer_targets))
        if inner.hidden:
            embedding = f"{PROJECTION_SCOPE}/embedding_projection"
            hidden = f"{PROJECTION_SCOPE}/hidden_projection"
            terms = [distill_losses.hidden_mse(
                student.embedding_output, teacher.embedding_output, input_mask,
                projections[embedding] if embedding in projections else None)]
            terms += [distill_losses.hidden_mse(
                student.all_encoder_layers[s], teacher.all_encoder_layers[t], input_mask,
                projections[hidden] if hidden in projections else None) for s, t in pairs]
            loss += inner.hidden * tf.add_n(terms)
        if inner.attention_scores:
            heads_n = self.config.num_attention_heads
            terms = [distill_losses.attention_score_mse(
                self._scores(self.bert, student, s, heads_n),
                self._scores(self.teacher.bert, teacher, t, heads_n), input_mask)
                for s, t in pairs]
            loss += inner.attention_scores * tf.add_n(terms)
        if inner.attention_kl or inner.value_kl:
            loss += self._minilm_loss(student, teacher, input_mask)
        return loss

    def _minilm_loss(self, student, teacher, input_mask) -> tf.Tensor:
        """MiniLM's weighted KL terms of the last layers' attention and value relations."""
        inner = self.inner
        heads_n = inner.relation_heads or self.config.num_attention_heads
        s_q, s_k, s_v = _layer_projections(self.bert, student, -1)
        t_q, t_k, t_v = _layer_projections(self.teacher.bert, teacher, -1)
        loss = 0.0
        if inner.attention_kl:
            loss += inner.attention_kl * distill_losses.relation_kl(
                distill_losses.relation_scores(s_q, s_k, heads_n),
                distill_losses.relation_scores(t_q, t_k, heads_n), input_mask)
        if inner.value_kl:
            loss += inner.value_kl * distill_losses.relation_kl(
                distill_losses.relation_scores(s_v, s_v, heads_n),
                distill_losses.relation_scores(t_v, t_v, heads_n), input_mask)
        return loss

    @staticmethod
    def _scores(model, out, layer: int, heads_n: int) -> tf.Tensor:
        """float32 [B, N, S, S]: layer `layer`'s attention scores Q K^T / sqrt(H)."""
        query, key, _ = _layer_projections(model, out, layer)
        return distill_losses.relation_scores(query, key, heads_n)


class DistillClassifier(_Distiller, BertClassifier):
    """The student (Google's `BertClassifier`: its variables are the task's `named_variables`,
    its evaluation and prediction the classifier's) trained against a frozen teacher
    `BertClassifier`: the per-example loss is `distillation_loss` at `temperature` plus `alpha`
    times the labels' cross-entropy, plus the weighted `inner` losses (`_Distiller`)."""

    def __init__(self, config: BertConfig, teacher_config: BertConfig, num_labels: int,
                 temperature: float, alpha: float, compute_dtype=tf.float32,
                 label_names=None, classifier_input: str = "pooled",
                 inner: distill_losses.InnerLosses = distill_losses.InnerLosses()):
        super().__init__(config, num_labels, compute_dtype, label_names=label_names,
                         classifier_input=classifier_input)
        self.teacher = BertClassifier(teacher_config, num_labels, compute_dtype,
                                      label_names=label_names, classifier_input=classifier_input)
        self._distills(config, teacher_config, temperature, alpha, inner)

    def teacher_outputs(self, features):
        """(`BertOutputs`, logits float32 [B, num_labels]) of the teacher: no dropout, no
        gradient (its variables are not the task's). The [batch, length] layout of training
        (no padding skipped), so the towers trace it as the student."""
        teacher = self.teacher
        out = teacher.bert(features["input_ids"], features["input_mask"],
                           features["segment_ids"], training=False)
        head_input = heads.classifier_features(out, features["input_mask"],
                                               teacher.classifier_input)
        return out, tf.stop_gradient(teacher.classifier.logits(head_input, training=False))

    def teacher_logits(self, features) -> tf.Tensor:
        """float32 [B, num_labels]: the teacher's logits (`teacher_outputs`)."""
        return self.teacher_outputs(features)[1]

    def per_example_loss(self, features, training) -> tf.Tensor:
        """float32 [B]; an unlabelled example (`is_real_example` 0, --unlabeled_file) has no
        labels' term."""
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        head_input = heads.classifier_features(out, features["input_mask"],
                                               self.classifier_input)
        student = self.classifier(head_input, features.get("label_ids"), training=training)
        teacher_out, teacher_logits = self.teacher_outputs(features)
        loss = distillation_loss(teacher_logits, student["logits"], self.temperature)
        if self.inner.any:
            loss += self.inner_loss(out, teacher_out, features["input_mask"])
        if not self.alpha:
            return loss
        hard = self.alpha * student["per_example_loss"]
        if "is_real_example" in features:
            hard *= tf.cast(tf.reshape(features["is_real_example"], [-1]), tf.float32)
        return loss + hard


class DistillTagger(_Distiller, TaggingTask):
    """A run_ner.py student (Google's `BertModel` + `TokenTaggingHead`: its evaluation and
    prediction run_ner.py's) trained against a frozen teacher `TaggingTask`: at every labelled
    position (`label_weights` 1: a word's first piece in the window that labels it) the token
    loss is `distillation_loss` over the tags at `temperature` plus `alpha` times the tag's
    cross-entropy; the global batch's loss is their sum over the labelled positions divided by
    the global number of them (as `TaggingTask`), plus the weighted `inner` losses' mean over
    the global batch's windows."""

    def __init__(self, config: BertConfig, teacher_config: BertConfig, num_tags: int,
                 temperature: float, alpha: float, compute_dtype=tf.float32, tag_names=None,
                 padded_length=None,
                 inner: distill_losses.InnerLosses = distill_losses.InnerLosses()):
        super().__init__(config, num_tags, compute_dtype, tag_names=tag_names,
                         padded_length=padded_length)
        self.teacher = TaggingTask(teacher_config, num_tags, compute_dtype, tag_names=tag_names)
        self._distills(config, teacher_config, temperature, alpha, inner)

    @staticmethod
    def context(features):
        return {"label_weight_sum": tf.reduce_sum(tf.cast(features["label_weights"],
                                                          tf.float32)),
                "num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def teacher_outputs(self, features):
        """(`BertOutputs`, logits float32 [B, S, num_tags]) of the teacher: no dropout, no
        gradient, the training layout."""
        out = self.teacher.bert(features["input_ids"], features["input_mask"],
                                features["segment_ids"], training=False)
        return out, tf.stop_gradient(self.teacher.tagger(out.sequence_output)["logits"])

    def tower_loss(self, features, context, training=True):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        student = self.tagger(out.sequence_output, features["label_ids"],
                              features["label_weights"], training=training)
        teacher_out, teacher_logits = self.teacher_outputs(features)
        per_token = distillation_loss(teacher_logits, student["logits"], self.temperature)
        if self.alpha:
            per_token += self.alpha * student["per_token_loss"]
        weights = tf.cast(features["label_weights"], tf.float32)
        sums = {"token_sum": tf.reduce_sum(weights * per_token),
                "inner_sum": tf.constant(0.0)}
        if self.inner.any:
            sums["inner_sum"] = tf.reduce_sum(
                self.inner_loss(out, teacher_out, features["input_mask"]))
        return {"loss": self.metrics(sums, context)["loss"], "sums": sums}

    @classmethod
    def metrics(cls, sums, context):
        return {"loss": sums["token_sum"] / cls._denominator(context)
                + sums["inner_sum"] / context["num_examples"]}


class DistillSpan(_Distiller, SquadTask):
    """A run_squad.py student (Google's `BertModel` + `SpanHead`: its prediction and
    post-processing run_squad.py's) trained against a frozen teacher `SquadTask`: a window's
    loss is the mean of `distillation_loss` over the start positions and over the end
    positions at `temperature` (as Google's span loss averages its start and end terms) plus
    `alpha` times Google's span loss, plus the weighted `inner` losses; the global batch's
    loss their mean over its windows (`SquadTask`'s)."""

    def __init__(self, config: BertConfig, teacher_config: BertConfig, temperature: float,
                 alpha: float, compute_dtype=tf.float32, padded_length=None,
                 inner: distill_losses.InnerLosses = distill_losses.InnerLosses()):
        super().__init__(config, compute_dtype, padded_length=padded_length)
        self.teacher = SquadTask(teacher_config, compute_dtype, padded_length=padded_length)
        self._distills(config, teacher_config, temperature, alpha, inner)

    def _span(self, model: SquadTask, out, features, training, **positions):
        """`model`'s span head on its `BertOutputs` `out` (the padding masked out of the span
        softmax as `SquadTask` does with `padded_length`)."""
        mask = features["input_mask"] if model.padded_length is not None else None
        return model.span(model.bert.token_head(out.sequence_output), input_mask=mask,
                          training=training, **positions)

    def teacher_outputs(self, features):
        """(`BertOutputs`, {`start_logits`, `end_logits`: float32 [B, S]}) of the teacher: no
        dropout, no gradient, the training layout (no padding skipped, as the student's)."""
        out = self.teacher.bert(features["input_ids"], features["input_mask"],
                                features["segment_ids"], training=False)
        logits = self._span(self.teacher, out, features, training=False)
        return out, {k: tf.stop_gradient(logits[k]) for k in ("start_logits", "end_logits")}

    def per_example_loss(self, features, training) -> tf.Tensor:
        """float32 [B]: the window's loss (the class docstring)."""
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        student = self._span(self, out, features, training,
                             start_positions=features["start_positions"],
                             end_positions=features["end_positions"])
        teacher_out, teacher = self.teacher_outputs(features)
        loss = (distillation_loss(teacher["start_logits"], student["start_logits"],
                                  self.temperature)
                + distillation_loss(teacher["end_logits"], student["end_logits"],
                                    self.temperature)) / 2.0
        if self.inner.any:
            loss += self.inner_loss(out, teacher_out, features["input_mask"])
        if self.alpha:
            loss += self.alpha * student["per_example_loss"]
        return loss


def _layer_projections(model, out, layer: int):
    """(query, key, value) [B, S, N*H] of `model`'s layer `layer` (negative: from the end),
    from its `BertOutputs` `out`."""
    layer %= len(out.all_encoder_layers)
    layer_input = out.embedding_output if layer == 0 else out.all_encoder_layers[layer - 1]
    return model.attention_projections(layer, layer_input)


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
    task = _distill_task(cfg, job, teacher_config, labels, student)
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
        student_layer_map=student.layer_map,
        **({"teacher_layer_targets": list(task.inner.layer_targets)} if task.inner.any else {}))
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


def inner_losses(cfg, teacher_config: BertConfig, student: Student) -> distill_losses.InnerLosses:
    """The TinyBERT/MiniLM losses of a DistillConfig `cfg`: its weights, and the teacher layer
    each student layer learns (from the layers it was cut from; a --student_config student
    from --student_layers' map of its depth)."""
    teacher_layers = teacher_config.num_hidden_layers
    layer_map = student.layer_map or student_layer_map(
        teacher_layers, student.config.num_hidden_layers, cfg.student_layers)
    return distill_losses.InnerLosses(
        hidden=cfg.tinybert_hidden_weight, attention_scores=cfg.tinybert_attention_weight,
        attention_kl=cfg.minilm_attention_weight, value_kl=cfg.minilm_value_weight,
        relation_heads=cfg.minilm_relation_heads,
        layer_targets=distill_losses.layer_targets(teacher_layers, layer_map))


def _distill_task(cfg, job: Job, teacher_config: BertConfig, labels,
                  student: Student) -> DistillClassifier:
    return DistillClassifier(job.bert_config, teacher_config, len(labels), cfg.temperature,
                             cfg.alpha, compute_dtype=job.compute_dtype(), label_names=labels,
                             classifier_input=cfg.classifier_input,
                             inner=inner_losses(cfg, teacher_config, student))


def _student_train_config(cfg, job: Job, task, student: Student, teacher_checkpoint: str,
                          train_files: Sequence[str], num_train: int):
    """The trainer's config of the student: the classifier's steps over `num_train` examples
    (the training set's and the unlabelled ones'), initialised as `_with_student_init`."""
    train_cfg = with_dropout_layout(cfg, cfg.train_config(num_train, job.num_workers),
                                    train_files)
    return _with_student_init(cfg, job, task, student, teacher_checkpoint, train_cfg,
                              f"{num_train} examples")


def _with_student_init(cfg, job: Job, task, student: Student, teacher_checkpoint: str,
                       train_cfg, what: str):
    """`train_cfg` initialised from `student.init_checkpoint` or from the student's layers
    cut from the teacher (STUDENT_INIT, written once before the first checkpoint by the
    chief); logs the distillation (`what`: the training set)."""
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
            write_student_init(init, teacher_checkpoint, task.student_variables(),
                               student.layer_map)
            logging.info("Student of %d layers initialised from the teacher's layers %s (%s)",
                         len(student.layer_map), student.layer_map, teacher_checkpoint)
    if cfg.do_train:
        logging.info("***** Running distillation: %s, %g epochs, %d steps, T=%g, "
                     "alpha=%g *****", what, cfg.num_train_epochs,
                     train_cfg.num_train_steps, cfg.temperature, cfg.alpha)
        if task.inner.any:
            logging.info("Inner losses: TinyBERT hidden %g, attention scores %g; MiniLM "
                         "attention %g, values %g (relation heads %s); student layer i learns "
                         "teacher layer %s", cfg.tinybert_hidden_weight,
                         cfg.tinybert_attention_weight, cfg.minilm_attention_weight,
                         cfg.minilm_value_weight, cfg.minilm_relation_heads or "the models'",
                         list(task.inner.layer_targets))
    return dataclasses.replace(train_cfg, init_checkpoint=init)


def run_distill_ner(cfg) -> dict:
    """Runs distill.py with a run_ner.py teacher (a configs/distill.py DistillNerConfig);
    returns the eval results. The student's run is run_ner.py's (`run_ner` with a
    `DistillTagger`): the same data path, trainer, evaluation and files."""
    teacher_checkpoint = checkpoint.resolve_checkpoint_path(cfg.teacher_dir)
    teacher_labels = list(checkpoint.read_run_config(cfg.teacher_dir)["labels"])

    def student_tagger(job: Job, data, train_cfg):
        teacher_config = job.bert_config
        student = student_of(cfg, teacher_config)
        if list(data.labels) != teacher_labels:
            raise ValueError(f"the student's tags {list(data.labels)} are not the teacher's "
                             f"{teacher_labels} (--label_list, in the teacher's order)")
        job.bert_config = student.config
        task = DistillTagger(student.config, teacher_config, len(data.labels),
                             cfg.temperature, cfg.alpha, compute_dtype=job.compute_dtype(),
                             tag_names=data.labels, padded_length=cfg.model.max_seq_length,
                             inner=inner_losses(cfg, teacher_config, student))
        return _start_student(cfg, job, task, student, teacher_checkpoint, train_cfg)

    return run_ner(cfg, student_tagger)


def run_distill_squad(cfg) -> dict:
    """Runs distill.py with a run_squad.py teacher (a configs/distill.py DistillSquadConfig);
    returns the eval results. The student's run is run_squad.py's (`run_squad` with a
    `DistillSpan`): the same features, trainer, prediction files and evaluation."""
    teacher_checkpoint = checkpoint.resolve_checkpoint_path(cfg.teacher_dir)

    def student_span(job: Job, train_cfg):
        teacher_config = job.bert_config
        student = student_of(cfg, teacher_config)
        job.bert_config = student.config
        task = DistillSpan(student.config, teacher_config, cfg.temperature, cfg.alpha,
                           compute_dtype=job.compute_dtype(),
                           padded_length=(cfg.model.max_seq_length if cfg.pad_to_longest
                                          else None),
                           inner=inner_losses(cfg, teacher_config, student))
        return _start_student(cfg, job, task, student, teacher_checkpoint, train_cfg)

    return run_squad(cfg, student_span)


def _start_student(cfg, job: Job, task, student: Student, teacher_checkpoint: str, train_cfg):
    """The NER and SQuAD students' common start: the teacher's weights restored into `task`,
    the student initialised (over the training windows); (task, train_cfg, extras)."""
    checkpoint.restore_checkpoint(teacher_checkpoint, task.teacher.named_variables())
    train_cfg = _with_student_init(cfg, job, task, student, teacher_checkpoint, train_cfg,
                                   "the training windows")
    return task, train_cfg, _student_extras(cfg, task, student, train_cfg, teacher_checkpoint)


def _student_extras(cfg, task, student: Student, train_cfg, teacher_checkpoint: str) -> dict:
    """What a student's run_config.json records beside its flags: its model files, the
    teacher's checkpoint and the teacher layers the student starts from (and learns)."""
    extra = dict(bert_config_file=os.path.join(cfg.output_dir, "bert_config.json"),
                 init_checkpoint=train_cfg.init_checkpoint,
                 teacher_checkpoint=teacher_checkpoint, student_layer_map=student.layer_map)
    if task.inner.any:
        extra["teacher_layer_targets"] = list(task.inner.layer_targets)
    return extra
