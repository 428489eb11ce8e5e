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
                             int32 [batch, seq_length] -> probabilities float32 [batch, labels]
    saved_model.pb, variables/, assets/vocab.txt
                             signatures tokenize, tokenize_pair (as the fp32 export's) and
                             labels (-> label string [labels]); no encoder weights
    assets/python_tokenizer.json
                             (WordPiece vocabularies) what the runner's Python tokenizer needs
                             besides the vocabulary: do_lower_case, max_seq_length,
                             truncation, head_tokens

`serving/int8_runner.py` serves it (raw text in, the fp32 export's `probabilities`, `label_id`,
`label` out) with tensorflow, tensorflow-text and bert_mgpu/tokenization.py (stdlib only):
tokenizing a request in Python costs a small fraction of a `tokenize` signature call.

Scope: `--task=classifier` runs of single-label classification without `--doc_stride`;
anything else is refused before a file is written (`check`).
"""

import json
import os

import tensorflow as tf

from bert_mgpu.configs import registry
from bert_mgpu.serving.int8_runner import PYTHON_TOKENIZER_FILE, TFLITE_FILE
from bert_mgpu.serving.task import ExportError


def check(task: str, spec, precision: str, jit_compile: bool) -> None:
    """Raises ExportError (one line naming the flag) for an export --quantize=int8 cannot make.

    Args:
      task: --task.
      spec: the resolved export (`serving.export.ResolvedExport`).
      precision: --precision (int8 replaces it: only fp32 may be given).
      jit_compile: --jit_compile (XLA does not apply to a LiteRT model).
    """
    if task != "classifier":
        raise ExportError(f"--quantize=int8 exports --task=classifier only, not --task={task}")
    encoding = registry.task_type(spec.head.task_type).label_encoding
    if encoding != "index":
        raise ExportError(f"--quantize=int8 exports single-label classification only, not "
                          f"--task_type={spec.head.task_type}")
    if spec.doc_stride:
        raise ExportError(f"--quantize=int8 reads one window per text; the run's "
                          f"--doc_stride={spec.doc_stride} needs the fp32 export "
                          f"(--quantize=none) or --doc_stride=0")
    if precision != "fp32":
        raise ExportError(f"--quantize=int8 sets the compute; --precision={precision} cannot "
                          f"be combined with it")
    if jit_compile:
        raise ExportError("--quantize=int8 runs on LiteRT; --jit_compile (XLA) cannot be "
                          "combined with it")


class TokenizerModule(tf.Module):
    """The SavedModel beside the LiteRT model: the in-graph tokenizer and the label names."""

    def __init__(self, tokenizer, labels):
        super().__init__(name=None)
        self.tokenizer = tokenizer
        self.label_names = tf.constant(list(labels))

    def signatures(self):
        text = tf.TensorSpec([None], tf.string, name="text_a")
        text_b = tf.TensorSpec([None], tf.string, name="text_b")
        return {
            "tokenize": tf.function(lambda text_a: self.tokenizer.tokenize(text_a),
                                    input_signature=[text], autograph=False),
            "tokenize_pair": tf.function(
                lambda text_a, text_b: self.tokenizer.tokenize(text_a, text_b),
                input_signature=[text, text_b], autograph=False),
            "labels": tf.function(lambda: {"label": tf.identity(self.label_names)},
                                  input_signature=[], autograph=False),
        }


def _encoder_function(model):
    """The classifier's ids -> probabilities of `model` (a `ServingModel`), padded inputs of any
    batch and length (the runner cuts them to the batch's longest text)."""
    ids = [tf.TensorSpec([None, None], tf.int32, name=n)
           for n in ("input_ids", "input_mask", "segment_ids")]

    def probabilities(input_ids, input_mask, segment_ids):
        # drop_padding gathers the real rows with dynamic shapes; LiteRT runs the plain graph
        # (the runner already cut the padding to the batch's longest text).
        out = model.bert(input_ids, input_mask, segment_ids, training=False,
                         first_token_only=model.task_serving.first_token_only,
                         drop_padding=False)
        return {"probabilities": model.task_serving.outputs(model.head, out,
                                                            input_mask)["probabilities"]}

    return tf.function(probabilities, input_signature=ids, autograph=False)


def tflite_int8(model) -> bytes:
    """The LiteRT flatbuffer of `model`'s encoder and head with dynamic-range int8 weights.

    Every constant weight matrix (the encoder's dense layers, the embedding tables, the pooler
    and the head) is stored as int8 with one float scale per output channel; activations stay
    float32 between layers and are quantized per call inside each matrix product.
    """
    function = _encoder_function(model)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    # Builtin ops only: a model needing TensorFlow ops (Flex) would not load in plain LiteRT.
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def write_int8(model, directory: str) -> None:
    """Writes the int8 export of `model` (a `ServingModel` of a classifier) into `directory`
    (the caller's temporary directory, renamed into place afterwards)."""
    flatbuffer = tflite_int8(model)
    tokenizer = TokenizerModule(model.tokenizer, [s.decode("utf-8") for s in
                                                  model.labels.numpy().tolist()])
    tf.saved_model.save(tokenizer, directory, signatures=tokenizer.signatures())
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
