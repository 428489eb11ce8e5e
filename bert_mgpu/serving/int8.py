"""The int8 export (export_saved_model.py --quantize=int8): the classifier's encoder and head as
a LiteRT (TensorFlow Lite) model with int8 weights, run with dynamically quantized
activations, beside a SavedModel that holds the tokenizer.

Why LiteRT: TensorFlow's own CPU kernels have no fast int8 matrix product (`BatchMatMulV3` on
int8 and the oneDNN `QuantizedMatMul*` ops are slower than float32 at BERT's shapes), while
LiteRT's dynamic-range quantization stores every weight matrix in int8 (per output channel)
and its XNNPACK kernels quantize each activation on the fly and multiply in int8. The tokenizer
stays a TensorFlow graph (it needs tensorflow-text's ops, which LiteRT's builtin ops lack), so
the raw text goes through exactly the tokenizer of the fp32 SavedModel (equal to Google's
`FullTokenizer`).

Layout of EXPORT_DIR/<version>/::

    model_int8.tflite        signature serving_default: input_ids, input_mask, segment_ids
                             int32 [batch, seq_length] -> the task's `int8_outputs`:
                             classifier: probabilities float32 [batch, labels];
                             squad: start_logits, end_logits float32 [windows, seq_length]
    saved_model.pb, variables/, assets/vocab.txt
                             the task's `int8_signatures`, no encoder weights; classifier:
                             tokenize, tokenize_pair (as the fp32 export's) and labels (->
                             label string [labels], and a multi-label head's
                             multilabel_threshold); squad: tokenize (as the fp32 export's),
                             windows and answers (Google's answer search, as the fp32 export's
                             serving_default, on the LiteRT model's logits)
    assets/python_tokenizer.json
                             (WordPiece vocabularies) what the runner's Python tokenizer needs
                             besides the vocabulary: do_lower_case, max_seq_length,
                             truncation, head_tokens

`serving/int8_runner.py` serves it (raw text in, the fp32 export's `serving_default` outputs
out) with tensorflow, tensorflow-text and bert_mgpu/tokenization.py (stdlib only): tokenizing a
request in Python costs a small fraction of a `tokenize` signature call.

Scope: `--task=classifier` runs of single-label or multi-label classification without
`--doc_stride`, and `--task=squad` runs; anything else is refused before a file is written
(`check`).
"""

import json
import os

import tensorflow as tf

from bert_mgpu.model import execution
from bert_mgpu.serving.int8_runner import PYTHON_TOKENIZER_FILE, TFLITE_FILE
from bert_mgpu.serving.task import ExportError


def check(task: str, serving, spec, precision: str, jit_compile: bool) -> None:
    """Raises ExportError (one line naming the flag) for an export --quantize=int8 cannot make.

    Args:
      task: --task.
      serving: its `TaskServing`.
      spec: the resolved export (`serving.export.ResolvedExport`).
      precision: --precision (int8 replaces it: only fp32 may be given).
      jit_compile: --jit_compile (XLA does not apply to a LiteRT model).
    """
    # (configs/serving.py refuses a task not registered with `int8` before TensorFlow loads.)
    if not serving.int8_outputs:
        raise ExportError(f"--quantize=int8: --task={task} has no int8 export")
    serving.check_int8(spec)
    if precision != "fp32":
        raise ExportError(f"--quantize=int8 sets the compute; --precision={precision} cannot "
                          f"be combined with it")
    if jit_compile:
        raise ExportError("--quantize=int8 runs on LiteRT; --jit_compile (XLA) cannot be "
                          "combined with it")


class SideModule(tf.Module):
    """The SavedModel beside the LiteRT model: the in-graph tokenizer, the task's module (SQuAD's
    windows and answer search) and the label names; no encoder weight. Its signatures are the
    task's `int8_signatures`."""

    def __init__(self, model):
        """`model`: the `ServingModel` exported."""
        super().__init__(name=None)
        self.tokenizer = model.tokenizer
        self.task_module = model.task_module
        self.label_names = model.labels


def _encoder_function(model):
    """The task's ids -> `int8_outputs` of `model` (a `ServingModel`), padded inputs of any
    batch and length (the runner cuts them to the batch's longest text)."""
    ids = [tf.TensorSpec([None, None], tf.int32, name=n)
           for n in ("input_ids", "input_mask", "segment_ids")]
    names = model.task_serving.int8_outputs

    # The token-type table exactly (model/execution.py, frozen_tables); the word embeddings
    # as LiteRT quantizes them (int8, one scale for the table: an int8 row with a scale of its
    # own each was measured no better, docs/benchmarks.md).
    types = model.bert.token_type_embeddings
    tables = {types.ref(): execution.frozen_table(types.numpy())} if types is not None else {}

    def outputs(input_ids, input_mask, segment_ids):
        # drop_padding gathers the real rows with dynamic shapes; LiteRT runs the plain graph
        # (the runner already cut the padding to the batch's longest text).
        with execution.entered(frozen_tables=tables):
            out = model.plain_outputs(input_ids, input_mask, segment_ids)
        return {name: out[name] for name in names}

    return tf.function(outputs, input_signature=ids, autograph=False)


def tflite_int8(model) -> bytes:
    """The LiteRT flatbuffer of `model`'s encoder and head with dynamic-range int8 weights.

    Every constant weight matrix (the encoder's dense layers, the pooler and the head) is stored
    as int8 with one float scale per output channel; activations stay float32 between layers
    and are quantized per call inside each matrix product. The word embeddings are int8 with one
    scale for the table; the token-type and position tables stay float32.
    """
    function = _encoder_function(model)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    # Builtin ops only: a model needing TensorFlow ops (Flex) would not load in plain LiteRT.
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def write_int8(model, directory: str) -> None:
    """Writes the int8 export of `model` (a `ServingModel` of a task with `int8_outputs`) into
    `directory` (the caller's temporary directory, renamed into place afterwards)."""
    flatbuffer = tflite_int8(model)
    side = SideModule(model)
    tf.saved_model.save(side, directory,
                        signatures=model.task_serving.int8_signatures(side, model))
    with tf.io.gfile.GFile(os.path.join(directory, TFLITE_FILE), "wb") as f:
        f.write(flatbuffer)
    write_python_tokenizer_options(model.tokenizer, directory)


def write_python_tokenizer_options(tokenizer, directory: str) -> None:
    """assets/python_tokenizer.json of the SavedModel in `directory`: the options of
    `tokenizer` (a `ServingTokenizer`) that the runner's `PythonTokenizer` needs besides the
    vocabulary (saved under its base name in assets/). Nothing for SentencePiece or
    tokenizer.json vocabularies: the runner keeps the export's signatures for those."""
    if tokenizer.is_bpe or tokenizer.is_sentencepiece:
        return
    vocab = os.path.basename(tokenizer.vocab_file.asset_path.numpy().decode("utf-8"))
    options = {"vocab_file": vocab, "do_lower_case": tokenizer.do_lower_case,
               "max_seq_length": tokenizer.max_seq_length, "truncation": tokenizer.truncation,
               "head_tokens": tokenizer.head_tokens}
    with tf.io.gfile.GFile(os.path.join(directory, "assets", PYTHON_TOKENIZER_FILE), "w") as f:
        f.write(json.dumps(options, indent=1) + "\n")
