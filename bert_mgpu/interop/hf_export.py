"""Writing a Google-layout BERT checkpoint as a Hugging Face folder (the other direction of
hf_checkpoint.py).

The folder holds `config.json`, `model.safetensors`, `vocab.txt`, `tokenizer_config.json` and
`special_tokens_map.json`; `transformers` loads it with `BertModel`, `BertForPreTraining` (when
the checkpoint has the masked-LM and next-sentence heads), `BertForMaskedLM` (masked-LM head
only) or `BertForSequenceClassification` (the classifier's `output_weights`/`output_bias`).
Nothing here needs PyTorch: safetensors is an 8-byte little-endian header length, a JSON header
(name -> dtype, shape, byte offsets) and the raw little-endian tensors, written here directly.

The GELU trap, this way round: Google's `"gelu"` is the tanh approximation, which Hugging Face
calls `"gelu_new"`; this project's `"gelu_exact"` (erf) is Hugging Face's `"gelu"`.

Weights are written as Hugging Face's own `save_pretrained` writes them: `bert.` prefix when a
head is present (none without), kernels transposed to PyTorch's [out, in], the masked-LM decoder
weight left out (tied to the word embeddings) and its bias as `cls.predictions.bias`. So a
Hugging Face folder converted to Google's layout by convert_hf_checkpoint.py and back gives the
same tensors, bit for bit.
"""

import json
import os
import re
import struct
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from bert_mgpu.configs import registry
from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.interop.hf_checkpoint import ConversionError
from bert_mgpu.model.head_spec import ClassifierHeadSpec, classifier_head_of_run, head_scope

# Google hidden_act -> Hugging Face hidden_act (the same numerics).
_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh"}
# Config options of this project that Hugging Face's BERT cannot express, with their BERT value.
_BERT_ONLY = {"embedding_size": None, "share_parameters": "none", "pre_layer_norm": False,
              "use_bias": True, "position_embedding_type": "absolute", "num_hidden_groups": None}
# Checkpoint entries that are not model weights (optimizer slots, step, our input state, an
# fp16 run's loss scale).
NOT_WEIGHTS = re.compile(r"(/adam_[mv]|/lamb_[mv]|/Momentum|/accumulat\w*)$|^global_step$"
                         r"|^_CHECKPOINTABLE_OBJECT_GRAPH$|^input_state"
                         r"|^loss_scale(_good_steps)?$")

# A multi-task run's heads (config.head_scope).
_TASK_HEAD = re.compile(rf"^{re.escape(head_scope(''))}[^/]+/output_(weights|bias)$")

_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}


def _reverse_layer_names():
    return {google: hf for hf, google in hf_checkpoint.LAYER_NAMES.items()}


def google_to_hf_name(name: str) -> Tuple[str, bool]:
    """Google variable name -> (Hugging Face parameter name without `bert.`, transpose?).

    `bert/...` names come back without the `bert.` prefix (added by the caller when a head is
    written); head names are returned whole (`cls.predictions.bias`, `classifier.weight`).

    Raises:
      KeyError: the name is not one of Google's BERT variables.
    """
    heads = {google: hf for hf, google in hf_checkpoint.HEAD_NAMES.items()}
    if name in heads:
        return heads[name], False
    module, _, param = name.rpartition("/")
    m = re.match(r"^bert/encoder/layer_(\d+)/(.+)$", module)
    layer_names = _reverse_layer_names()
    top = {google: hf for hf, google in hf_checkpoint.TOP_NAMES.items()}
    if m and m.group(2) in layer_names:
        hf_module = f"encoder.layer.{m.group(1)}.{layer_names[m.group(2)]}"
    elif name in top and name.endswith("_embeddings"):
        return f"{top[name]}.weight", False
    elif module in top:
        hf_module = top[module]
    else:
        raise KeyError(name)
    if hf_module.endswith("LayerNorm"):
        hf_param = {"gamma": "weight", "beta": "bias"}.get(param)
        if hf_param:
            return f"{hf_module}.{hf_param}", False
    elif param in ("kernel", "bias"):
        return f"{hf_module}.{'weight' if param == 'kernel' else 'bias'}", param == "kernel"
    raise KeyError(name)


def export_weights(weights: Mapping[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], str]:
    """Google name -> array  =>  (Hugging Face state dict, architecture name).

    Optimizer slots and the step are skipped; any other name that is not part of Google's BERT
    is an error (nothing is dropped silently).
    """
    mapped, unknown = {}, []
    for name, value in weights.items():
        if NOT_WEIGHTS.search(name):
            continue
        try:
            hf_name, transpose = google_to_hf_name(name)
        except KeyError:
            unknown.append(name)
            continue
        value = np.asarray(value)
        mapped[hf_name] = np.ascontiguousarray(value.T) if transpose else value
    if unknown:
        raise ConversionError(f"{len(unknown)} checkpoint variable(s) are not part of Google's "
                              f"BERT (ALBERT/other layouts do not convert): "
                              f"{', '.join(sorted(unknown))}")
    heads = {n.split(".")[0] for n in mapped if n.startswith(("cls.", "classifier."))}
    has_mlm = "cls.predictions.bias" in mapped
    has_nsp = "cls.seq_relationship.weight" in mapped
    if "classifier" in heads:
        architecture = "BertForSequenceClassification"
    elif has_mlm and has_nsp:
        architecture = "BertForPreTraining"
    elif has_mlm:
        architecture = "BertForMaskedLM"
    else:
        architecture = "BertModel"
    prefix = "" if architecture == "BertModel" else "bert."
    out = {}
    for name, value in mapped.items():
        is_head = name.startswith(("cls.", "classifier."))
        out[name if is_head else prefix + name] = value
    return out, architecture


def export_config(bert_config: Mapping, architecture: str,
                  labels: Optional[Sequence[str]] = None, num_labels: Optional[int] = None,
                  source: str = "bert_config.json", task_type: str = "classification") -> Dict:
    """Google `bert_config.json` dict -> Hugging Face `config.json` dict (`task_type`: the
    classifier head's --task_type)."""
    for key, bert_value in _BERT_ONLY.items():
        value = bert_config.get(key, bert_value)
        if key == "embedding_size" and value == bert_config.get("hidden_size"):
            continue
        if value != bert_value:
            raise ConversionError(f"{source}: {key}={value!r} has no Hugging Face BERT "
                                  f"equivalent (only Google's BERT layout converts)")
    act = bert_config.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ConversionError(f"{source}: hidden_act {act!r} has no Hugging Face equivalent")
    out = {"architectures": [architecture], "model_type": "bert"}
    for key in hf_checkpoint.CONFIG_KEYS:
        if key not in bert_config:
            raise ConversionError(f"{source}: missing key {key}")
        out[key] = bert_config[key]
    out.update(hidden_act=_ACTIVATIONS[act], layer_norm_eps=1e-12, pad_token_id=0,
               position_embedding_type="absolute", tie_word_embeddings=True)
    if num_labels is not None:
        out.update(label_keys(labels, num_labels, task_type))
    return out


def label_keys(labels: Optional[Sequence[str]], num_labels: int,
               task_type: str = "classification") -> Dict:
    """config.json's `id2label`, `label2id` (`labels`, else LABEL_0..) and `problem_type` (by
    the classifier's --task_type) of a head of `num_labels` outputs.

    Raises:
      ConversionError: `labels` has another length.
    """
    names = [str(x) for x in labels] if labels else [f"LABEL_{i}" for i in range(num_labels)]
    if len(names) != num_labels:
        raise ConversionError(f"--label_list has {len(names)} labels, the classifier head "
                              f"{num_labels}")
    out = {"id2label": {str(i): n for i, n in enumerate(names)},
           "label2id": {n: i for i, n in enumerate(names)}}
    problem_type = registry.task_type(task_type).hf_problem_type
    if problem_type is not None:
        out["problem_type"] = problem_type
    return out


_NUMPY_TO_SAFETENSORS = {np.dtype(v).str[1:]: k
                         for k, v in hf_checkpoint.SAFETENSORS_DTYPES.items()}


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes `tensors` in the safetensors format (little-endian, names sorted, as the
    `safetensors` package writes them; the header is padded with spaces to 8 bytes)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        dtype = _NUMPY_TO_SAFETENSORS.get(array.dtype.str[1:])
        if dtype is None:
            raise ConversionError(f"{name}: dtype {array.dtype} cannot be written to safetensors")
        blob = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".incomplete"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def run_of_checkpoint(prefix: str) -> Dict:
    """The run_config.json next to the checkpoint `prefix` (or one directory up, for a run's
    `best/`); {} when there is none."""
    from bert_mgpu.engine import checkpoint  # TensorFlow only when converting

    folder = os.path.dirname(prefix)
    return checkpoint.read_run_config(folder) or checkpoint.read_run_config(
        os.path.dirname(folder))


def classifier_head(weights: Dict[str, np.ndarray], prefix: str, task_label: Optional[str],
                    architecture: str = "BertForSequenceClassification") -> ClassifierHeadSpec:
    """The classifier head to write (a multi-task run's `task_<label>/` head renamed in
    `weights` to Google's root-level `output_weights`/`output_bias`, the other tasks' heads
    dropped), read with the run's run_config.json (`run_of_checkpoint`) when there is one.
    `architecture`: the Hugging Face model that reads it (named in the error of a head that
    does not read the pooled output)."""
    run = run_of_checkpoint(prefix)
    try:
        head = classifier_head_of_run(run, list(weights), task_label,
                                      f"--init_checkpoint={prefix}")
    except ValueError as e:
        raise ConversionError(str(e)) from None
    if head.scope:
        for name in [n for n in weights if _TASK_HEAD.match(n)]:
            value = weights.pop(name)
            if name.startswith(head.scope + "/"):
                weights[name[len(head.scope) + 1:]] = value
    if "output_bias" in weights and head.classifier_input != "pooled":
        raise ConversionError(f"--classifier_input={head.classifier_input} (the run's): "
                              f"Hugging Face's {architecture} reads the pooled output "
                              f"(--classifier_input=pooled) only")
    return head


def convert_checkpoint(bert_config_file: str, init_checkpoint: str, vocab_file: str,
                       do_lower_case: bool, output_dir: str,
                       labels: Optional[Sequence[str]] = None,
                       task_label: Optional[str] = None) -> Dict[str, str]:
    """Google-layout checkpoint -> a Hugging Face folder in `output_dir`; returns the paths.

    A multi-task run's checkpoint: `task_label` chooses the task whose head becomes the
    classifier (its label names and task type from the run's run_config.json unless `labels`).
    """
    with open(bert_config_file, encoding="utf-8") as f:
        try:
            bert_config = json.load(f)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{bert_config_file}:{e.lineno}: invalid JSON ({e.msg})") \
                from None
    prefix, weights = _read_weights(init_checkpoint, bert_config)
    head = classifier_head(weights, prefix, task_label)
    if labels is None and head.labels and registry.task_type(head.task_type).has_label_names:
        labels = head.labels
    state, architecture = export_weights(weights)
    if "bert.embeddings.word_embeddings.weight" in state or \
            "embeddings.word_embeddings.weight" in state:
        vocab_size = weights["bert/embeddings/word_embeddings"].shape[0]
        if vocab_size != bert_config.get("vocab_size"):
            raise ConversionError(f"{bert_config_file}: vocab_size {bert_config.get('vocab_size')}"
                                  f", the checkpoint's embeddings have {vocab_size} rows")
    num_labels = weights["output_bias"].shape[0] if "output_bias" in weights else None
    hf_config = export_config(bert_config, architecture, labels, num_labels, bert_config_file,
                              head.task_type)
    with open(vocab_file, encoding="utf-8") as f:
        vocab_lines = len(f.readlines())  # Google's load_vocab: one token per line
    if vocab_lines != bert_config["vocab_size"]:
        raise ConversionError(f"{vocab_file}: {vocab_lines} tokens, but vocab_size is "
                              f"{bert_config['vocab_size']} in {bert_config_file}")
    return _write_folder(output_dir, state, hf_config, vocab_file, do_lower_case,
                         bert_config["max_position_embeddings"])


def _read_weights(init_checkpoint: str, bert_config: dict):
    """(the checkpoint's prefix, name -> array of its weights, optimizer slots left out).

    Raises:
      ConversionError: a BERT variable the config needs is not there (naming it).
    """
    import tensorflow as tf  # only to read the checkpoint

    from bert_mgpu.engine import checkpoint

    prefix = checkpoint.resolve_checkpoint_path(init_checkpoint)
    reader = tf.train.load_checkpoint(prefix)
    weights = {name: reader.get_tensor(name)
               for name in reader.get_variable_to_shape_map() if not NOT_WEIGHTS.search(name)}
    missing = [n for n in hf_checkpoint.expected_bert_names(
        _ConfigView(bert_config)) if n not in weights]
    if missing:
        raise ConversionError(f"{prefix}: {len(missing)} BERT variable(s) missing: "
                              f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}")
    return prefix, weights


def _write_folder(output_dir: str, state, hf_config: dict, vocab_file: str,
                  do_lower_case: bool, model_max_length: int) -> Dict[str, str]:
    """The Hugging Face folder's files, written; returns name -> path."""
    os.makedirs(output_dir, exist_ok=True)
    paths = {name: os.path.join(output_dir, name) for name in
             ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
              "special_tokens_map.json")}
    write_safetensors(paths["model.safetensors"], state, {"format": "pt"})
    _write_json(paths["config.json"], hf_config)
    with open(vocab_file, "rb") as src, open(paths["vocab.txt"], "wb") as dst:
        dst.write(src.read())
    # Hugging Face's BertTokenizer with Google's casing: lower-casing strips accents (its
    # `strip_accents=None` follows `do_lower_case`), Chinese characters are split.
    _write_json(paths["tokenizer_config.json"], dict(
        _SPECIAL_TOKENS, tokenizer_class="BertTokenizer", do_lower_case=bool(do_lower_case),
        strip_accents=None, tokenize_chinese_chars=True,
        model_max_length=model_max_length))
    _write_json(paths["special_tokens_map.json"], _SPECIAL_TOKENS)
    return paths


class _ConfigView:
    """The two attributes `expected_bert_names` reads, from a config dict."""

    def __init__(self, config):
        self.num_hidden_layers = config.get("num_hidden_layers", 0)


def _write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
