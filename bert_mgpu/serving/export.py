"""SavedModels that take raw text: a trained model leaves the toolkit for TF Serving.

`export_saved_model(cfg)` writes TF Serving's layout::

    EXPORT_DIR/<version>/saved_model.pb
                        /variables/variables.{index,data-*}
                        /assets/vocab.txt          (the vocabulary, under its own file name)

Signatures of the classifier and features exports (every batch dimension is free; texts are
UTF-8 strings):

- `serving_default`: `text_a` string [batch] -> the task's outputs.
- `serving_pair`: `text_a`, `text_b` string [batch] -> the same; as in Google's
  `convert_single_example`, a `text_b` that is empty (or has no tokens) means "no second text"
  for that row.
- `tokenize` / `tokenize_pair`: the texts -> `input_ids`, `input_mask`, `segment_ids`, int32
  [batch, max_seq_length], exactly as `run_classifier_mgpu.py` builds them (truncation included).
- `serve_ids`: `input_ids`, `input_mask`, `segment_ids` int32 [batch, seq_length] -> the outputs
  (for servers that tokenize elsewhere).

A classifier run with `--doc_stride` (`ResolvedExport.doc_stride` > 0) reads long texts as
its script does (serving/windows.py): the raw-text signatures cut every text into the
script's windows, run the encoder on all windows of the batch and pool each text's windows by
`window_pooling` (`ServedClassifier.pool`), so their outputs still have one row per text;
`tokenize` / `tokenize_pair` give the windows (`input_ids`, `input_mask`, `segment_ids` int32
[windows, max_seq_length]) and `example_index` int32 [windows] (the text of each); `serve_ids`
classifies each row as one window.

The SQuAD export (`--task=squad`, a run_squad.py model) has its own (see `squad_export`):

- `serving_default`: `question`, `context` string [batch] -> `answer` string [batch] (the
  context's substring), `answer_start`, `answer_end` int32 [batch] (character offsets, end
  exclusive, -1 for no answer), `start_logit`, `end_logit`, `null_score_diff` float32 [batch];
  contexts longer than one window are read in Google's doc-stride windows, the best span over
  all of them wins.
- `tokenize`: `question`, `context` -> the windows as run_squad.py builds them: `input_ids`,
  `input_mask`, `segment_ids` int32 [windows, max_seq_length], `example_index` int32 [windows]
  (the question each window belongs to).
- `serve_ids`: the ids [windows, seq_length] -> `start_logits`, `end_logits` float32
  [windows, seq_length].

A SavedModel signature has a fixed set of inputs, which is why the optional second text is a
signature of its own rather than an optional input.

Outputs by `--task`:

- classifier, by the run's `--task_type` (a multi-task run: `--task_label`'s task):
  classification: `probabilities` float32 [batch, num_labels] (softmax, as test_results.tsv),
  `label_id` int32 [batch], `label` string [batch] (the run's label names); regression:
  `predictions` float32 [batch] (the score, as test_results.tsv); multilabel: `probabilities`
  float32 [batch, num_labels] (one sigmoid per label, as test_results.tsv), `predicted` bool
  [batch, num_labels] (probability > the run's --multilabel_threshold), `label` string [batch]
  (the predicted labels joined by commas, as predict.txt).
- features: `pooled_output` float32 [batch, hidden], `sequence_output` float32
  [batch, seq, hidden], `input_mask` int32 [batch, seq], `sentence_embedding` float32
  [batch, hidden] (the mean of `sequence_output` over the real tokens, the common sentence
  embedding).

The raw-text signatures cut the padded inputs to the longest text of the batch before the
encoder: padding is masked out of attention (Google's additive -10000 mask gives it weight 0 in
float32), so the outputs of real tokens are those of the full-length inputs up to float
summation order, and a batch of short texts costs what its texts cost. Their `sequence_output`
and `input_mask` therefore have that length. `serve_ids` cuts the same way when its outputs
have no sequence dimension (classifier) and keeps the length it is given otherwise. With
`jit_compile` the cut length is rounded up to a multiple of 8 (at most max_seq_length), so XLA
compiles for a few lengths rather than every one. The classifier computes the last layer for
the [CLS] token only (all the pooler reads).

The classifier's dense layers also run on the real tokens' rows only (`BertModel`'s
`drop_padding`: the projections, feed-forward layers and LayerNorms never see the padding; the
attention scatters its keys and values back to the [batch, length] layout); not with
`jit_compile`, whose shapes must be static.

The classifier goes further (`length_chunks` > 1, `--length_chunks`): a batch's examples are
sorted by real length and cut into up to `length_chunks` chunks of consecutive lengths (at
least `MIN_CHUNK_EXAMPLES` each, so small batches, and batch 1, run whole as above); each chunk
runs cut to its own longest text and the outputs are put back in request order. A batch of one
long and many short texts then costs little more than its texts, not batch x longest. The
chunks run in one `tf.while_loop` of the traced graph (the signatures' [None] inputs trace
once: no retracing per batch); with `jit_compile` each chunk's shape is (rows, length rounded
up to 8), the rows being floor or ceil of batch / chunks, so XLA still compiles for a bounded
set of shapes per batch size.

Loading needs `tensorflow` and `tensorflow-text` only (`import tensorflow_text` registers the
tokenizer's ops); no Python code of this package is stored or needed.
"""

import dataclasses
import json
import os
import re
import shutil
import time
from typing import Callable, Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.configs.base import check_truncation
from bert_mgpu.configs.classifier import TASK_TYPES, WINDOW_POOLINGS
from bert_mgpu.configs.serving import DEFAULT_LENGTH_CHUNKS
from bert_mgpu.configs.squad import SquadAnswerOptions
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import heads, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.model.head_spec import ClassifierHeadSpec, classifier_head_of_run
from bert_mgpu.serving import windows as serving_windows
from bert_mgpu.serving.squad import SquadServing

_COMPUTE_DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}
# --length_chunks: the fewest examples of a chunk. Each chunk pays the encoder's per-op overhead
# once (a few hundred small ops); below 8 rows its matrix products also get thin, while the
# padding a split saves in a batch under 16 is a handful of rows.
MIN_CHUNK_EXAMPLES = 8


class ExportError(ValueError):
    """An export that cannot be made; the message names the flag or file."""


# ---------------------------------------------------------------------------------------------
# What a task adds to the encoder.

@dataclasses.dataclass
class TaskExport:
    """How one `--task` turns encoder outputs into serving outputs.

    Attributes:
      build: (bert_config, checkpoint reader shapes, `ResolvedExport`) -> the task's tf.Module
        holding its head variables (Google's names via `named_variables()`), or None for no
        head.
      outputs: (head, BertOutputs, input_mask int32 [B, S]) -> dict of output Tensors.
      labels_needed: whether the task has label names.
      first_token_only: the outputs read the last layer at [CLS] only (the pooler).
      per_position: the outputs have a sequence dimension (`serve_ids` keeps its length).
    """
    build: Callable
    outputs: Callable
    labels_needed: bool = False
    first_token_only: bool = False
    per_position: bool = True


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
        return TASK_TYPES[self.task_type].label_encoding

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


def _build_classifier(bert_config, shapes, spec):
    head = spec.head
    variable = f"{head.scope}/output_bias" if head.scope else "output_bias"
    if variable not in shapes:
        raise ExportError("--task=classifier: the checkpoint has no classifier head "
                          "(output_weights/output_bias); use --task=features")
    if head.classifier_input != "pooled":
        raise ExportError(f"--classifier_input={head.classifier_input} (the run's): the export "
                          f"serves heads on the pooled output (--classifier_input=pooled) only")
    num_labels = shapes[variable][0]
    labels = spec.labels
    if labels is not None and len(labels) != num_labels:
        raise ExportError(f"{len(labels)} label names for a classifier head of {num_labels} "
                          f"labels")
    return ServedClassifier(bert_config, num_labels, head)


def _classifier_outputs(head, bert_out, input_mask):
    del input_mask
    return head(bert_out.pooled_output)


def _features_outputs(head, bert_out, input_mask):
    del head
    sequence = tf.cast(bert_out.sequence_output, tf.float32)  # [B, S, H]
    mask = tf.cast(input_mask, tf.float32)[:, :, None]        # [B, S, 1]
    count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)     # [B, 1]
    return {"pooled_output": tf.cast(bert_out.pooled_output, tf.float32),
            "sequence_output": sequence,
            "input_mask": tf.cast(input_mask, tf.int32),
            "sentence_embedding": tf.reduce_sum(sequence * mask, axis=1) / count}


def _build_squad(bert_config, shapes, spec):
    del spec
    if "cls/squad/output_bias" not in shapes:
        raise ExportError("--task=squad: the checkpoint has no SQuAD head "
                          "(cls/squad/output_weights, cls/squad/output_bias): export a "
                          "run_squad.py run")
    return heads.SpanHead(bert_config)


def _squad_outputs(head, bert_out, input_mask):
    del input_mask
    return head(bert_out.sequence_output)


# --task -> TaskExport. SQuAD's raw-text signatures are its own (`_squad_signatures`).
_TASKS: Dict[str, TaskExport] = {
    "classifier": TaskExport(_build_classifier, _classifier_outputs, labels_needed=True,
                             first_token_only=True, per_position=False),
    "features": TaskExport(lambda *unused: None, _features_outputs),
    "squad": TaskExport(_build_squad, _squad_outputs),
}
TASKS = tuple(_TASKS)


# ---------------------------------------------------------------------------------------------
# The exported module.

class ServingModel(tf.Module):
    """A BERT encoder, a task head and the in-graph tokenizer, with the serving signatures.

    Built in the exporting process from bert_mgpu's modules; what is saved is the traced graphs
    and the variables, so the loader needs none of this code.
    """

    def __init__(self, bert_config: BertConfig, tokenizer, task: str, head_module,
                 labels: Optional[Sequence[str]] = None, compute_dtype=tf.float32,
                 jit_compile: bool = False, squad: Optional[SquadAnswerOptions] = None,
                 length_chunks: int = DEFAULT_LENGTH_CHUNKS, doc_stride: int = 0,
                 window_pooling: str = "mean"):
        super().__init__(name=None)
        self.tokenizer = tokenizer
        # A --doc_stride classifier: each text is read in windows, pooled by window_pooling.
        self.doc_stride = doc_stride
        self.window_pooling = window_pooling
        self.task = task
        self._task = _TASKS[task]
        self.squad = SquadServing(tokenizer, squad) if squad is not None else None
        # XLA compiles per shape: cut lengths are rounded up to a multiple of 8.
        self._length_multiple = 8 if jit_compile else 1
        # Outputs without a sequence dimension can come from chunks of different lengths.
        self._length_chunks = 1 if self._task.per_position else length_chunks
        # ... and from the real tokens' rows only (the padding's rows are never computed):
        # dynamic shapes, so not under XLA.
        self._drop_padding = not self._task.per_position and not jit_compile
        self.bert = modeling.BertModel(bert_config, compute_dtype=compute_dtype)
        self.head = head_module
        named = self.named_variables()
        # The model keeps its variables in plain dicts; a list attribute makes the SavedModel
        # track them.
        self._weights = list(named.values())
        self.labels = tf.constant(list(labels)) if labels is not None else None
        self._encode = tf.function(self._encode_python, jit_compile=jit_compile,
                                   reduce_retracing=True, autograph=False)
        # One text has no padding left after the cut: dropping it would only add scatters
        # and gathers, so a batch of one runs the plain graph.
        self._encode_plain = tf.function(self._encode_plain_python, jit_compile=jit_compile,
                                         reduce_retracing=True, autograph=False)

    def named_variables(self) -> Dict[str, tf.Variable]:
        mods = [self.bert] + ([self.head] if self.head is not None else [])
        return modeling.merge_named_variables(*mods)

    def _encode_python(self, input_ids, input_mask, segment_ids, drop_padding=None):
        out = self.bert(input_ids, input_mask, segment_ids, training=False,
                        first_token_only=self._task.first_token_only,
                        drop_padding=self._drop_padding if drop_padding is None
                        else drop_padding)
        return self._task.outputs(self.head, out, input_mask)

    def _encode_plain_python(self, input_ids, input_mask, segment_ids):
        return self._encode_python(input_ids, input_mask, segment_ids, drop_padding=False)

    def _finish(self, outputs):
        if self.labels is None:
            return outputs
        if "label_id" in outputs:
            return dict(outputs, label=tf.gather(self.labels, outputs["label_id"]))
        if "predicted" in outputs:  # multi-label: the predicted names joined, as predict.txt
            # (A multi-label name has no comma: the label column separates them by commas.)
            names = tf.where(outputs["predicted"], self.labels + ",", "")      # [B, labels]
            joined = tf.strings.reduce_join(names, axis=1)
            return dict(outputs, label=tf.strings.regex_replace(joined, ",$", ""))
        return outputs

    def _cut_length(self, longest, length):
        """`longest` (scalar int) made at least 1, rounded up to the length multiple, at most
        `length`."""
        m = self._length_multiple
        rounded = (tf.maximum(longest, 1) + m - 1) // m * m
        return tf.minimum(tf.cast(rounded, tf.int32), tf.cast(length, tf.int32))

    def _cut(self, input_ids, input_mask, segment_ids):
        """The inputs cut after the last real position of the batch (masks are prefixes, as
        every feature builder here makes them; a mask with holes is still cut correctly)."""
        cut = self._cut_length(tf.reduce_max(_real_lengths(input_mask)),
                               tf.shape(input_mask)[1])
        return input_ids[:, :cut], input_mask[:, :cut], segment_ids[:, :cut]

    def _encode_one_piece(self, input_ids, input_mask, segment_ids):
        """The outputs of inputs cut to their longest text, as one piece (a batch of one on
        the plain graph: see `_encode_plain`)."""
        inputs = self._cut(input_ids, input_mask, segment_ids)
        if not self._drop_padding:
            return self._encode(*inputs)
        return tf.cond(tf.shape(input_ids)[0] > 1, lambda: self._encode(*inputs),
                       lambda: self._encode_plain(*inputs))

    def _encode_cut(self, input_ids, input_mask, segment_ids):
        """The outputs of the padded inputs, computed on inputs cut to the longest text (and,
        with `length_chunks` > 1 and a batch of at least 2 * MIN_CHUNK_EXAMPLES, in chunks of
        similar lengths: see the module docstring)."""
        if self._length_chunks == 1:
            return self._encode_one_piece(input_ids, input_mask, segment_ids)
        lengths = _real_lengths(input_mask)                                   # [B]
        batch = tf.shape(lengths)[0]
        chunks = tf.clip_by_value(batch // MIN_CHUNK_EXAMPLES, 1, self._length_chunks)

        def by_length():
            order = tf.argsort(lengths, stable=True)                           # [B]
            inputs = [tf.gather(x, order) for x in (input_ids, input_mask, segment_ids)]
            sorted_lengths = tf.gather(lengths, order)
            bounds = tf.range(chunks + 1) * batch // chunks                    # [chunks + 1]

            def chunk(i):
                start, end = bounds[i], bounds[i + 1]
                cut = self._cut_length(sorted_lengths[end - 1], tf.shape(input_mask)[1])
                return self._encode(*[x[start:end, :cut] for x in inputs])

            def body(i, arrays):
                out = chunk(i)
                return i + 1, {k: a.write(i, out[k]) for k, a in arrays.items()}

            # The first chunk outside the loop gives the outputs' dtypes.
            arrays = {k: tf.TensorArray(v.dtype, size=chunks, infer_shape=False).write(0, v)
                      for k, v in chunk(0).items()}
            _, arrays = tf.while_loop(lambda i, _: i < chunks, body, (tf.constant(1), arrays))
            back = tf.math.invert_permutation(order)   # request position -> sorted position
            return {k: tf.gather(a.concat(), back) for k, a in arrays.items()}

        return tf.cond(chunks > 1, by_length,
                       lambda: self._encode_one_piece(input_ids, input_mask, segment_ids))

    def serve_ids(self, input_ids, input_mask, segment_ids):
        if self._task.per_position:
            return self._finish(self._encode(input_ids, input_mask, segment_ids))
        return self._finish(self._encode_cut(input_ids, input_mask, segment_ids))

    def serve_text(self, text_a, text_b=None):
        if self.doc_stride:
            return self._serve_windows(text_a, text_b)
        features = self.tokenize(text_a, text_b)
        # Cut the padding to the longest text of the batch (at least 1 position).
        return self._finish(self._encode_cut(
            features["input_ids"], features["input_mask"], features["segment_ids"]))

    def _serve_windows(self, text_a, text_b):
        """A --doc_stride classifier: every window of every text through the encoder (cut and
        chunked by length as texts are), then each text's windows pooled."""
        windows = serving_windows.document_windows(self.tokenizer, text_a, text_b,
                                                   self.doc_stride)
        outputs = self._encode_cut(windows["input_ids"], windows["input_mask"],
                                   windows["segment_ids"])
        return self._finish(self.head.pool(outputs, windows["example_index"],
                                           tf.shape(text_a)[0], self.window_pooling))

    def tokenize_squad(self, question, context):
        """The windows of (question, context) as run_squad.py builds them (padded to
        max_seq_length) and the question each belongs to."""
        windows = self.squad.windows(question, context, self.tokenizer.max_seq_length)
        return {k: windows[k] for k in ("input_ids", "input_mask", "segment_ids",
                                        "example_index")}

    def serve_squad(self, question, context):
        """Raw (question, context) -> the answer of each question over all its windows."""
        windows = self.squad.windows(question, context)
        length = tf.shape(windows["input_ids"])[1]
        cut = self._cut_length(length, self.tokenizer.max_seq_length)
        pad = [[0, 0], [0, cut - length]]
        # (With jit_compile the windows are padded up to the rounded length.)
        windows.update({k: tf.pad(windows[k], pad) for k in ("input_ids", "input_mask",
                                                             "segment_ids", "max_context")})
        logits = self._encode(windows["input_ids"], windows["input_mask"],
                              windows["segment_ids"])
        return self.squad.answers(context, windows, logits["start_logits"],
                                  logits["end_logits"])

    def tokenize(self, text_a, text_b=None):
        if self.doc_stride:  # the windows, padded to max_seq_length, and their texts
            return serving_windows.document_windows(self.tokenizer, text_a, text_b,
                                                    self.doc_stride,
                                                    self.tokenizer.max_seq_length)
        # The ServingTokenizer follows Google's convert_single_example: a second text that is
        # empty or has no tokens leaves the row a single text (its budget and head_tail too).
        return self.tokenizer.tokenize(text_a, text_b)


def _real_lengths(input_mask):
    """int32 [B]: 1 + the last real position of each row of `input_mask` [B, S] (0 for none)."""
    positions = tf.range(1, tf.shape(input_mask)[1] + 1)[None, :]
    return tf.reduce_max(tf.where(tf.not_equal(input_mask, 0), positions, 0), axis=1)


def _signatures(model: ServingModel):
    ids = [tf.TensorSpec([None, None], tf.int32, name=n)
           for n in ("input_ids", "input_mask", "segment_ids")]
    serve_ids = tf.function(model.serve_ids, input_signature=ids, autograph=False)
    if model.task == "squad":
        texts = [tf.TensorSpec([None], tf.string, name=n) for n in ("question", "context")]
        return {"serving_default": tf.function(model.serve_squad, input_signature=texts,
                                                  autograph=False),
                "tokenize": tf.function(model.tokenize_squad, input_signature=texts,
                                           autograph=False),
                "serve_ids": serve_ids}
    text = tf.TensorSpec([None], tf.string, name="text_a")
    text_b = tf.TensorSpec([None], tf.string, name="text_b")
    return {
        "serving_default": tf.function(lambda text_a: model.serve_text(text_a),
                                       input_signature=[text], autograph=False),
        "serving_pair": tf.function(lambda text_a, text_b: model.serve_text(text_a, text_b),
                                    input_signature=[text, text_b], autograph=False),
        "tokenize": tf.function(lambda text_a: model.tokenize(text_a), input_signature=[text],
                                autograph=False),
        "tokenize_pair": tf.function(lambda text_a, text_b: model.tokenize(text_a, text_b),
                                     input_signature=[text, text_b], autograph=False),
        "serve_ids": serve_ids,
    }


# ---------------------------------------------------------------------------------------------
# Export.

@dataclasses.dataclass
class ResolvedExport:
    """Everything an export reads, after `--output_dir` (a run) or the explicit flags."""
    bert_config_file: str
    init_checkpoint: str
    vocab_file: Optional[str]
    spm_model_file: Optional[str]
    do_lower_case: bool
    max_seq_length: int
    truncation: str
    head_tokens: int
    labels: Optional[List[str]]
    squad: SquadAnswerOptions = SquadAnswerOptions()
    # --task=classifier: the run's head (a multi-task run's --task_label) and its task type.
    head: ClassifierHeadSpec = ClassifierHeadSpec()
    # --task=classifier: the run's --doc_stride (0: one window, Google's truncation) and
    # --window_pooling.
    doc_stride: int = 0
    window_pooling: str = "mean"


def read_run_config(run_dir: str) -> dict:
    """`run_dir`/run_config.json as a dict ({} when there is none).

    Raises:
      ExportError: the file is not JSON (naming file and line).
    """
    path = os.path.join(run_dir, "run_config.json")
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ExportError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def resolve(cfg) -> ResolvedExport:
    """The files and options of an export: explicit flags win over the run's `run_config.json`.

    Raises:
      ExportError: naming the flag or file that is missing.
    """
    run = read_run_config(cfg.output_dir) if cfg.output_dir else {}
    model = cfg.model

    def pick(name, explicit, default=None):
        if explicit not in (None, ""):
            return explicit
        return run.get(name, default)

    bert_config_file = model.bert_config_file
    init_checkpoint = model.init_checkpoint
    if cfg.output_dir:
        if not tf.io.gfile.isdir(cfg.output_dir):
            raise ExportError(f"--output_dir={cfg.output_dir}: not a directory")
        if not bert_config_file:
            bert_config_file = os.path.join(cfg.output_dir, "bert_config.json")
        if not init_checkpoint:
            init_checkpoint = checkpoint.latest_checkpoint(cfg.output_dir)
            if init_checkpoint is None:
                raise ExportError(f"--output_dir={cfg.output_dir}: no checkpoint")
    if not bert_config_file:
        raise ExportError("--bert_config_file (or --output_dir of a run) is required")
    if not init_checkpoint:
        raise ExportError("--init_checkpoint (or --output_dir of a run) is required")
    vocab_file = pick("vocab_file", model.vocab_file)
    spm_model_file = pick("spm_model_file", model.spm_model_file)
    if not vocab_file and not spm_model_file:
        raise ExportError("--vocab_file (or --spm_model_file, or --output_dir of a run that "
                          "recorded it) is required")
    # Casing and lengths: the run's unless the flag was given on the command line.
    flag_set = cfg.flags_given

    def option(name, value):
        return value if name in flag_set or name not in run else run[name]

    head = ClassifierHeadSpec()
    if cfg.task == "classifier":
        prefix = checkpoint.resolve_checkpoint_path(init_checkpoint)
        try:
            head = classifier_head_of_run(run, [n for n, _ in tf.train.list_variables(prefix)],
                                          cfg.task_label, cfg.output_dir or prefix)
        except ValueError as e:
            raise ExportError(str(e)) from None
    labels = list(cfg.label_list) if cfg.label_list else head.labels
    doc_stride, window_pooling = 0, "mean"
    if cfg.task == "classifier":
        # The classifier's --doc_stride defaults to 0 (run_squad.py's flag of the same name,
        # which the export shares, to 128): the run's unless given.
        doc_stride = int(cfg.doc_stride if cfg.doc_stride is not None
                         else run.get("doc_stride") or 0)
        window_pooling = option("window_pooling", cfg.window_pooling)
    given_squad = cfg.squad or SquadAnswerOptions()
    squad = SquadAnswerOptions(**{f.name: type(f.default)(option(f.name, getattr(given_squad,
                                                                                 f.name)))
                                  for f in dataclasses.fields(SquadAnswerOptions)})
    max_seq_length = int(option("max_seq_length", model.max_seq_length))
    truncation, head_tokens = option("truncation", cfg.truncation), int(option("head_tokens",
                                                                               cfg.head_tokens))
    try:
        check_truncation(truncation, head_tokens, max_seq_length)
    except ValueError as e:
        raise ExportError(str(e)) from None
    return ResolvedExport(
        bert_config_file=bert_config_file, init_checkpoint=init_checkpoint,
        vocab_file=vocab_file, spm_model_file=spm_model_file,
        do_lower_case=bool(option("do_lower_case", model.do_lower_case)),
        max_seq_length=max_seq_length, squad=squad, truncation=truncation,
        head_tokens=head_tokens, head=head,
        doc_stride=doc_stride, window_pooling=window_pooling,
        labels=[str(x) for x in labels] if labels is not None else None)


def next_version(export_dir: str) -> int:
    """1 + the highest numeric version under `export_dir` (TF Serving serves the highest)."""
    if not tf.io.gfile.isdir(export_dir):
        return 1
    versions = [int(n) for n in tf.io.gfile.listdir(export_dir) if re.fullmatch(r"\d+/?", n)
                for n in [n.rstrip("/")]]
    return max(versions, default=0) + 1


def build_serving_model(spec: ResolvedExport, task: str, precision: str = "fp32",
                        jit_compile: bool = False,
                        length_chunks: int = DEFAULT_LENGTH_CHUNKS) -> ServingModel:
    """The `ServingModel` of `spec` with its weights loaded from `spec.init_checkpoint`."""
    from bert_mgpu.serving.tokenizer import ServingTokenizer

    if task not in _TASKS:
        raise ExportError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if precision not in _COMPUTE_DTYPES:
        raise ExportError(f"--precision must be one of {', '.join(_COMPUTE_DTYPES)}, got "
                          f"{precision!r}")
    bert_config = BertConfig.from_json_file(spec.bert_config_file)
    if spec.max_seq_length > bert_config.max_position_embeddings:
        raise ExportError(f"--max_seq_length={spec.max_seq_length} is longer than "
                          f"max_position_embeddings ({bert_config.max_position_embeddings}) in "
                          f"{spec.bert_config_file}")
    prefix = checkpoint.resolve_checkpoint_path(spec.init_checkpoint)
    shapes = dict(tf.train.list_variables(prefix))
    task_export = _TASKS[task]
    head = task_export.build(bert_config, shapes, spec)
    labels = None
    if task_export.labels_needed and TASK_TYPES[spec.head.task_type].has_label_names:
        labels = spec.labels or [str(i) for i in range(head.num_labels)]
    tokenizer = ServingTokenizer(spec.vocab_file, do_lower_case=spec.do_lower_case,
                                 spm_model_file=spec.spm_model_file,
                                 max_seq_length=spec.max_seq_length,
                                 truncation=spec.truncation, head_tokens=spec.head_tokens)
    if tokenizer.vocab_size != bert_config.vocab_size:
        raise ExportError(f"{spec.vocab_file or spec.spm_model_file}: {tokenizer.vocab_size} "
                          f"tokens, but vocab_size is {bert_config.vocab_size} in "
                          f"{spec.bert_config_file}")
    squad = None
    if task == "squad":
        if spec.spm_model_file:
            raise ExportError("--task=squad needs a WordPiece --vocab_file (answers are cut "
                              "from the context by the tokens' character offsets)")
        try:
            spec.squad.validate(spec.max_seq_length)
        except ValueError as e:
            raise ExportError(str(e)) from None
        squad = spec.squad
    if spec.doc_stride:
        _check_windows(spec, task)
    model = ServingModel(bert_config, tokenizer, task, head, labels,
                         compute_dtype=_COMPUTE_DTYPES[precision], jit_compile=jit_compile,
                         squad=squad, length_chunks=length_chunks, doc_stride=spec.doc_stride,
                         window_pooling=spec.window_pooling)
    # Every variable of the served model must come from the checkpoint.
    checkpoint.restore_checkpoint(prefix, model.named_variables(), strict=True)
    return model


def _check_windows(spec: ResolvedExport, task: str) -> None:
    """Raises ExportError for a --doc_stride export the classifier's run would refuse."""
    if task != "classifier":
        raise ExportError(f"--doc_stride={spec.doc_stride}: windows of long texts are "
                          f"exported for --task=classifier only")
    budget = spec.max_seq_length - 2
    if not 0 < spec.doc_stride <= budget:
        raise ExportError(f"--doc_stride={spec.doc_stride} must be in [0, --max_seq_length - 2 "
                          f"= {budget}]")
    if spec.truncation == "head_tail":
        raise ExportError(f"--doc_stride={spec.doc_stride} keeps every piece of a long text "
                          f"in windows; --truncation=head_tail cuts it: choose one")
    if spec.window_pooling not in WINDOW_POOLINGS:
        raise ExportError(f"--window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, got "
                          f"{spec.window_pooling!r}")


def export_saved_model(cfg) -> str:
    """Runs export_saved_model.py with a `config.ExportConfig`; returns the version directory.

    The SavedModel is written to a temporary directory next to the version and renamed into
    place, so TF Serving never sees a half-written version.
    """
    spec = resolve(cfg)
    model = build_serving_model(spec, cfg.task, cfg.precision, cfg.jit_compile,
                                cfg.length_chunks)
    version = cfg.export_version or next_version(cfg.export_dir)
    target = os.path.join(cfg.export_dir, str(version))
    if tf.io.gfile.exists(target):
        raise ExportError(f"--export_dir: {target} already exists (choose another "
                          f"--export_version)")
    tmp = os.path.join(cfg.export_dir, f".tmp-{version}-{os.getpid()}-{int(time.time())}")
    tf.io.gfile.makedirs(cfg.export_dir)
    try:
        tf.saved_model.save(model, tmp, signatures=_signatures(model))
        tf.io.gfile.rename(tmp, target)
    finally:
        if tf.io.gfile.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    logging.info("Exported %s (task %s, %s%s) from %s to %s", os.path.basename(
        spec.vocab_file or spec.spm_model_file), cfg.task, cfg.precision,
        ", XLA" if cfg.jit_compile else "", spec.init_checkpoint, target)
    return target
