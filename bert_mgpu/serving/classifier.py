"""The classifier's SavedModel (export_saved_model.py --task=classifier): a
run_classifier_mgpu.py head on the pooled output, its task type's outputs, and a --doc_stride
run's windows pooled per text (see serving/export.py for the signatures)."""

import tensorflow as tf

from bert_mgpu.configs import registry
from bert_mgpu.configs.classifier import WINDOW_POOLINGS
from bert_mgpu.model import heads
from bert_mgpu.model.head_spec import ClassifierHeadSpec, classifier_head_of_run
from bert_mgpu.serving import windows as serving_windows
from bert_mgpu.serving.task import ExportError, TaskServing


class ServedClassifier(tf.Module):
    """A run_classifier_mgpu.py head (Google's `output_weights`/`output_bias`, or a multi-task
    run's `task_<label>/...`) and its task type's outputs (see the module docstring)."""

    def __init__(self, bert_config, num_labels: int, head: ClassifierHeadSpec):
        super().__init__(name=None)
        self.num_labels = num_labels
        self.task_type = head.task_type
        self.threshold = head.multilabel_threshold
        self.classifier = heads.ClassifierHead(bert_config, num_labels, scope=head.scope)

    def named_variables(self):
        return self.classifier.named_variables()

    def __call__(self, pooled_output):
        """pooled_output float [B, H] -> dict of outputs [B, ...] (module docstring)."""
        logits = self.classifier.logits(tf.cast(pooled_output, tf.float32))  # [B, labels]
        return self._from_value(self._VALUES[self._encoding](logits))

    @property
    def _encoding(self):
        return registry.task_type(self.task_type).label_encoding

    @property
    def multi_label(self) -> bool:
        """One sigmoid per label (`predicted`: probability > `threshold`)."""
        return self._encoding == "multi_hot"

    def pool(self, outputs, example_index, num_texts, pooling: str):
        """The outputs of texts from those of their windows (`__call__`'s [W, ...]), as the
        classifier's eval and predict pool a --doc_stride run's windows: the `pooling` of the
        probabilities (a row renormalised to sum to 1) / scores / sigmoid probabilities, the
        label ids and predicted labels taken from the pooled values."""
        name = "predictions" if self._encoding == "score" else "probabilities"
        pooled = serving_windows.pool(outputs[name], example_index, num_texts, pooling)
        if self._encoding == "index":
            pooled = pooled / tf.reduce_sum(pooled, axis=-1, keepdims=True)
        return self._from_value(pooled)

    def _from_value(self, value):
        """The outputs of the head's value [B, ...] (probabilities, score or sigmoids)."""
        if self._encoding == "score":
            return {"predictions": value}
        if self._encoding == "multi_hot":
            return {"probabilities": value, "predicted": value > self.threshold}
        return {"probabilities": value,
                "label_id": tf.argmax(value, axis=-1, output_type=tf.int32)}

    # TaskType.label_encoding -> logits [B, labels] -> the head's value.
    _VALUES = {"score": lambda logits: logits[:, 0], "multi_hot": tf.sigmoid,
               "index": lambda logits: tf.nn.softmax(logits, axis=-1)}


class ClassifierServing(TaskServing):
    """run_classifier_mgpu.py's head (a multi-task run's --task_label head) on the pooled
    output: [CLS] only, no sequence dimension; a --doc_stride run's texts read in windows."""
    first_token_only = True
    per_position = False
    windows = True
    int8_outputs = ("probabilities",)

    def resolve(self, cfg, run, checkpoint_prefix, option):
        """The run's head (scope, task type, labels), --doc_stride and --window_pooling."""
        try:
            head = classifier_head_of_run(
                run, [n for n, _ in tf.train.list_variables(checkpoint_prefix)], cfg.task_label,
                cfg.output_dir or checkpoint_prefix)
        except ValueError as e:
            raise ExportError(str(e)) from None
        # The classifier's --doc_stride defaults to 0 (run_squad.py's flag of the same name,
        # which the export shares, to 128): the run's unless given.
        doc_stride = int(cfg.doc_stride if cfg.doc_stride is not None
                         else run.get("doc_stride") or 0)
        return dict(head=head, labels=list(cfg.label_list) if cfg.label_list else head.labels,
                    doc_stride=doc_stride,
                    window_pooling=option("window_pooling", cfg.window_pooling))

    def check(self, spec) -> None:
        """A --doc_stride export the classifier's run would refuse."""
        if not spec.doc_stride:
            return
        budget = spec.max_seq_length - 2
        if not 0 < spec.doc_stride <= budget:
            raise ExportError(f"--doc_stride={spec.doc_stride} must be in [0, --max_seq_length "
                              f"- 2 = {budget}]")
        if spec.truncation == "head_tail":
            raise ExportError(f"--doc_stride={spec.doc_stride} keeps every piece of a long "
                              f"text in windows; --truncation=head_tail cuts it: choose one")
        if spec.window_pooling not in WINDOW_POOLINGS:
            raise ExportError(f"--window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, "
                              f"got {spec.window_pooling!r}")

    def check_int8(self, spec) -> None:
        """The int8 export serves single-label and multi-label heads on one window per text."""
        if registry.task_type(spec.head.task_type).label_encoding == "score":
            raise ExportError(f"--quantize=int8 exports classification and multilabel heads, "
                              f"not --task_type={spec.head.task_type}")
        if spec.doc_stride:
            raise ExportError(f"--quantize=int8 reads one window per text; the run's "
                              f"--doc_stride={spec.doc_stride} needs the fp32 export "
                              f"(--quantize=none) or --doc_stride=0")

    def int8_signatures(self, side, model):
        """`tokenize`, `tokenize_pair` (the fp32 export's) and `labels` (-> `label` string
        [labels]; a multi-label head also `multilabel_threshold` float32 scalar)."""
        text = tf.TensorSpec([None], tf.string, name="text_a")
        text_b = tf.TensorSpec([None], tf.string, name="text_b")
        names = {"label": side.label_names}
        if model.head.multi_label:
            names["multilabel_threshold"] = tf.constant(model.head.threshold, tf.float32)
        return {
            "tokenize": tf.function(lambda text_a: side.tokenizer.tokenize(text_a),
                                    input_signature=[text], autograph=False),
            "tokenize_pair": tf.function(
                lambda text_a, text_b: side.tokenizer.tokenize(text_a, text_b),
                input_signature=[text, text_b], autograph=False),
            "labels": tf.function(lambda: {k: tf.identity(v) for k, v in names.items()},
                                  input_signature=[], autograph=False),
        }

    def build(self, bert_config, shapes, spec):
        head = spec.head
        variable = f"{head.scope}/output_bias" if head.scope else "output_bias"
        if variable not in shapes:
            raise ExportError("--task=classifier: the checkpoint has no classifier head "
                              "(output_weights/output_bias); use --task=features")
        if head.classifier_input != "pooled":
            raise ExportError(f"--classifier_input={head.classifier_input} (the run's): the "
                              f"export serves heads on the pooled output "
                              f"(--classifier_input=pooled) only")
        num_labels = shapes[variable][0]
        labels = spec.labels
        if labels is not None and len(labels) != num_labels:
            raise ExportError(f"{len(labels)} label names for a classifier head of "
                              f"{num_labels} labels")
        return ServedClassifier(bert_config, num_labels, head)

    def labels(self, head, spec):
        """The run's label names (else 0..N-1), for a task type whose outputs are labels."""
        if not registry.task_type(spec.head.task_type).has_label_names:
            return None
        return spec.labels or [str(i) for i in range(head.num_labels)]

    def outputs(self, head, bert_out, input_mask):
        del input_mask
        return head(bert_out.pooled_output)


SERVING = ClassifierServing()
