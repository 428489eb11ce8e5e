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

The SQuAD export (`--task=squad`, a run_squad.py model) has its own (see serving/squad.py):

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

The NER export (`--task=ner`, a run_ner.py model: serving/ner.py) takes `text` string [batch]
and gives each text's words and a tag per word, read in the run's windows.

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

Without `jit_compile` the encoder's attention transposes its heads as integers and runs its
batched products as `BatchMatMulV3` (`inference_kernels`, model/execution.py): ops TensorFlow's
oneDNN rewrite leaves alone, whose fixed cost per call is far below the rewritten ones' at
serving's small shapes; the same values (the transposes exactly, the products to float
rounding).

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
import importlib
import os
import re
import shutil
import time
from typing import Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.configs import registry
from bert_mgpu.configs.base import check_truncation
from bert_mgpu.configs.serving import DEFAULT_LENGTH_CHUNKS
from bert_mgpu.configs.squad import SquadAnswerOptions
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import execution, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.model.head_spec import ClassifierHeadSpec
from bert_mgpu.serving import int8
from bert_mgpu.serving import windows as serving_windows
from bert_mgpu.serving.task import ExportError, TaskServing

_COMPUTE_DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}
# --length_chunks: the fewest examples of a chunk. Each chunk pays the encoder's per-op overhead
# once (a few hundred small ops); below 8 rows its matrix products also get thin, while the
# padding a split saves in a batch under 16 is a handful of rows.
MIN_CHUNK_EXAMPLES = 8


def task_serving(name: str) -> TaskServing:
    """The `TaskServing` of the registered task `name` (its serving module's `SERVING`).

    Raises:
      ExportError: no task of that name is registered.
    """
    try:
        registered = registry.task(name)
    except ValueError as e:
        raise ExportError(str(e)) from None
    return importlib.import_module(registered.serving).SERVING


# ---------------------------------------------------------------------------------------------
# The exported module.

class ServingModel(tf.Module):
    """A BERT encoder, a task head and the in-graph tokenizer, with the serving signatures.

    Built in the exporting process from bert_mgpu's modules; what is saved is the traced graphs
    and the variables, so the loader needs none of this code.
    """

    def __init__(self, bert_config: BertConfig, tokenizer, task: TaskServing, head_module,
                 labels: Optional[Sequence[str]] = None, compute_dtype=tf.float32,
                 jit_compile: bool = False, task_module: Optional[tf.Module] = None,
                 length_chunks: int = DEFAULT_LENGTH_CHUNKS, doc_stride: int = 0,
                 window_pooling: str = "mean"):
        super().__init__(name=None)
        self.tokenizer = tokenizer
        # A --doc_stride classifier: each text is read in windows, pooled by window_pooling.
        self.doc_stride = doc_stride
        self.window_pooling = window_pooling
        self.task_serving = task
        # What the task's signatures need besides the encoder and head (SQuAD's windows).
        self.task_module = task_module
        # XLA compiles per shape: cut lengths are rounded up to a multiple of 8.
        self._length_multiple = 8 if jit_compile else 1
        self._inference_kernels = not jit_compile
        # Outputs without a sequence dimension can come from chunks of different lengths.
        self._length_chunks = 1 if self.task_serving.per_position else length_chunks
        # ... and from the real tokens' rows only (the padding's rows are never computed):
        # dynamic shapes, so not under XLA.
        self._drop_padding = not self.task_serving.per_position and not jit_compile
        self.bert = modeling.BertModel(bert_config, compute_dtype=compute_dtype)
        # The pooler reads the last layer at [CLS] only, unless it averages every token
        # (ModernBERT's classifier_pooling "mean").
        self._first_token_only = (self.task_serving.first_token_only
                                  and bert_config.classifier_pooling != "mean")
        self.head = head_module
        named = self.named_variables()
        # The model keeps its variables in plain dicts; a list attribute makes the SavedModel
        # track them.
        self._weights = list(named.values())
        self.labels = tf.constant(list(labels)) if labels is not None else None
        self.encode = tf.function(self._encode_python, jit_compile=jit_compile,
                                   reduce_retracing=True, autograph=False)
        # One text has no padding left after the cut: dropping it would only add scatters
        # and gathers, so a batch of one runs the plain graph.
        self._encode_plain = tf.function(self.plain_outputs, jit_compile=jit_compile,
                                         reduce_retracing=True, autograph=False)

    def named_variables(self) -> Dict[str, tf.Variable]:
        mods = [self.bert] + ([self.head] if self.head is not None else [])
        return modeling.merge_named_variables(*mods)

    def _encode_python(self, input_ids, input_mask, segment_ids, drop_padding=None):
        # The head transposes as integers (the same values; why: model/execution.py), except
        # under XLA.
        with execution.entered(inference_kernels=self._inference_kernels):
            out = self.bert(input_ids, input_mask, segment_ids, training=False,
                            first_token_only=self._first_token_only,
                            drop_padding=self._drop_padding if drop_padding is None
                            else drop_padding)
            if self.task_serving.token_level:
                out = out._replace(sequence_output=self.bert.token_head(out.sequence_output))
        return self.task_serving.outputs(self.head, out, input_mask)

    def plain_outputs(self, input_ids, input_mask, segment_ids):
        """The task's outputs of the ids on the plain graph (every position computed, no
        padding dropped), untraced: also what the int8 export converts."""
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

    def cut_length(self, longest, length):
        """`longest` (scalar int) made at least 1, rounded up to the length multiple, at most
        `length`."""
        m = self._length_multiple
        rounded = (tf.maximum(longest, 1) + m - 1) // m * m
        return tf.minimum(tf.cast(rounded, tf.int32), tf.cast(length, tf.int32))

    def _cut(self, input_ids, input_mask, segment_ids):
        """The inputs cut after the last real position of the batch (masks are prefixes, as
        every feature builder here makes them; a mask with holes is still cut correctly)."""
        cut = self.cut_length(tf.reduce_max(_real_lengths(input_mask)),
                               tf.shape(input_mask)[1])
        return input_ids[:, :cut], input_mask[:, :cut], segment_ids[:, :cut]

    def _encode_one_piece(self, input_ids, input_mask, segment_ids):
        """The outputs of inputs cut to their longest text, as one piece (a batch of one on
        the plain graph: see `_encode_plain`)."""
        inputs = self._cut(input_ids, input_mask, segment_ids)
        if not self._drop_padding:
            return self.encode(*inputs)
        return tf.cond(tf.shape(input_ids)[0] > 1, lambda: self.encode(*inputs),
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
                cut = self.cut_length(sorted_lengths[end - 1], tf.shape(input_mask)[1])
                return self.encode(*[x[start:end, :cut] for x in inputs])

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
        if self.task_serving.per_position:
            return self._finish(self.encode(input_ids, input_mask, segment_ids))
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
    return model.task_serving.signatures(model, serve_ids)


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


def resolve(cfg) -> ResolvedExport:
    """The files and options of an export: explicit flags win over the run's `run_config.json`.

    Raises:
      ExportError: naming the flag or file that is missing.
    """
    run = checkpoint.read_run_config(cfg.output_dir) if cfg.output_dir else {}
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
            # The model the run's --do_predict used: its kept best one, else the latest.
            init_checkpoint, which = checkpoint.prediction_checkpoint(cfg.output_dir)
            if init_checkpoint is None:
                raise ExportError(f"--output_dir={cfg.output_dir}: no checkpoint")
            logging.info("Exporting %s of the run: %s (--init_checkpoint chooses another)",
                         which, init_checkpoint)
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

    # What the task reads from the run (a classifier's head and windows, SQuAD's answers).
    task_fields = task_serving(cfg.task).resolve(
        cfg, run, checkpoint.resolve_checkpoint_path(init_checkpoint), option)
    labels = task_fields.pop("labels", list(cfg.label_list) if cfg.label_list else None)
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
        max_seq_length=max_seq_length, truncation=truncation, head_tokens=head_tokens,
        labels=[str(x) for x in labels] if labels is not None else None, **task_fields)


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

    serving = task_serving(task)
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
    head = serving.build(bert_config, shapes, spec)
    labels = serving.labels(head, spec)
    tokenizer = ServingTokenizer(spec.vocab_file, do_lower_case=spec.do_lower_case,
                                 spm_model_file=spec.spm_model_file,
                                 max_seq_length=spec.max_seq_length,
                                 truncation=spec.truncation, head_tokens=spec.head_tokens)
    # A tokenizer.json may have fewer tokens than the embedding table (ModernBERT pads it to a
    # multiple of 64), as the scripts' file checks allow; a WordPiece vocabulary has them all.
    if tokenizer.vocab_size > bert_config.vocab_size or (
            not tokenizer.is_bpe and tokenizer.vocab_size != bert_config.vocab_size):
        raise ExportError(f"{spec.vocab_file or spec.spm_model_file}: {tokenizer.vocab_size} "
                          f"tokens, but vocab_size is {bert_config.vocab_size} in "
                          f"{spec.bert_config_file}")
    if spec.doc_stride and not serving.windows:
        windowed = [name for name in registry.tasks() if task_serving(name).windows]
        raise ExportError(f"--doc_stride={spec.doc_stride}: windows of long texts are "
                          f"exported for --task={' or '.join(windowed)} only")
    serving.check(spec)
    model = ServingModel(bert_config, tokenizer, serving, head, labels,
                         compute_dtype=_COMPUTE_DTYPES[precision], jit_compile=jit_compile,
                         task_module=serving.module(tokenizer, spec),
                         length_chunks=length_chunks, doc_stride=spec.doc_stride,
                         window_pooling=spec.window_pooling)
    # Every variable of the served model must come from the checkpoint.
    checkpoint.restore_checkpoint(prefix, model.named_variables(), strict=True)
    return model


def export_saved_model(cfg) -> str:
    """Runs export_saved_model.py with a `configs/serving.py` ExportConfig; returns the version
    directory.

    The SavedModel is written to a temporary directory next to the version and renamed into
    place, so TF Serving never sees a half-written version.
    """
    spec = resolve(cfg)
    if cfg.quantize == "int8":
        int8.check(cfg.task, task_serving(cfg.task), spec, cfg.precision, cfg.jit_compile)
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
        if cfg.quantize == "int8":
            int8.write_int8(model, tmp)
        else:
            tf.saved_model.save(model, tmp, signatures=_signatures(model))
        tf.io.gfile.rename(tmp, target)
    finally:
        if tf.io.gfile.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    logging.info("Exported %s (task %s, %s%s) from %s to %s", os.path.basename(
        spec.vocab_file or spec.spm_model_file), cfg.task,
        "int8 (LiteRT)" if cfg.quantize == "int8" else cfg.precision,
        ", XLA" if cfg.jit_compile else "", spec.init_checkpoint, target)
    return target
