"""Hugging Face ModernBERT folders <-> this project's layout (Google-style names), both ways.

A Hugging Face ModernBERT folder holds `config.json` (`model_type: modernbert`),
`model.safetensors` and `tokenizer.json`. ModernBERT has no Google checkpoint layout; its
weights take Google's names where the meaning is unchanged (`NAMES`, used both ways):

  Hugging Face (`model.` prefix in the head models)  here
  embeddings.tok_embeddings.weight                  bert/embeddings/word_embeddings
  embeddings.norm.{weight,bias}                     bert/embeddings/LayerNorm/{gamma,beta}
  layers.i.attn_norm (none in layer 0)              bert/encoder/layer_i/attention/output/LayerNorm
  layers.i.attn.Wqkv [3H, H]: rows q, k, v          .../attention/self/{query,key,value}/kernel
  layers.i.attn.Wo                                  .../attention/output/dense/kernel
  layers.i.mlp_norm                                 .../output/LayerNorm
  layers.i.mlp.Wi [2I, H]: rows input, gate         .../intermediate/dense/kernel [H, 2I]:
                                                    columns gate, input (Cramming's GLU order:
                                                    value * act(gate), act on the second half)
  layers.i.mlp.Wo                                   .../output/dense/kernel
  final_norm                                        bert/encoder/LayerNorm
  head.dense / head.norm (ForMaskedLM)              cls/predictions/transform/dense, /LayerNorm
  decoder.bias (decoder.weight tied)                cls/predictions/output_bias
  head.dense / head.norm (ForSequenceClassification) bert/pooler/dense, bert/pooler/LayerNorm
  classifier.{weight,bias}                          output_weights, output_bias (token
                                                    and QA models: under cls/ner/, cls/squad/)

Biases (`.bias`, `/bias`, `/beta`) exist only where the config says so (`attention_bias`,
`mlp_bias`, `norm_bias`, `classifier_bias`). Kernels are transposed ([out, in] -> [in, out]).
A masked-LM folder has no classification head: its `bert/pooler` is written as a copy of the
masked-LM transform, which is what `ModernBertForSequenceClassification.from_pretrained` does
with the same folder (its `head` has the masked-LM head's names).
"""

import json
import os
import re
import shutil
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from bert_mgpu.configs import registry
from bert_mgpu.interop import hf_export
from bert_mgpu.interop.hf_checkpoint import ConversionError, read_hf_weights
from bert_mgpu.model.head_spec import head_scope

# Files of a Hugging Face tokenizer copied as they are, both ways.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

# (Hugging Face name, name here, how): "{i}" is a layer index, "{L}" its scope
# bert/encoder/layer_{i}. how: "same" (copied), "dense" (transposed), "qkv" (three blocks of
# rows -> query, key, value; "{qkv}" in the name), "glu" (halves swapped, then as "dense" for a
# kernel). `{head}` is the masked-LM transform or the pooler (`_HEAD_SCOPES`).
NAMES = (
    ("embeddings.tok_embeddings.weight", "bert/embeddings/word_embeddings", "same"),
    ("embeddings.norm.weight", "bert/embeddings/LayerNorm/gamma", "same"),
    ("embeddings.norm.bias", "bert/embeddings/LayerNorm/beta", "same"),
    ("layers.{i}.attn_norm.weight", "{L}/attention/output/LayerNorm/gamma", "same"),
    ("layers.{i}.attn_norm.bias", "{L}/attention/output/LayerNorm/beta", "same"),
    ("layers.{i}.attn.Wqkv.weight", "{L}/attention/self/{qkv}/kernel", "qkv"),
    ("layers.{i}.attn.Wqkv.bias", "{L}/attention/self/{qkv}/bias", "qkv"),
    ("layers.{i}.attn.Wo.weight", "{L}/attention/output/dense/kernel", "dense"),
    ("layers.{i}.attn.Wo.bias", "{L}/attention/output/dense/bias", "same"),
    ("layers.{i}.mlp_norm.weight", "{L}/output/LayerNorm/gamma", "same"),
    ("layers.{i}.mlp_norm.bias", "{L}/output/LayerNorm/beta", "same"),
    ("layers.{i}.mlp.Wi.weight", "{L}/intermediate/dense/kernel", "glu"),
    ("layers.{i}.mlp.Wi.bias", "{L}/intermediate/dense/bias", "glu"),
    ("layers.{i}.mlp.Wo.weight", "{L}/output/dense/kernel", "dense"),
    ("layers.{i}.mlp.Wo.bias", "{L}/output/dense/bias", "same"),
    ("final_norm.weight", "bert/encoder/LayerNorm/gamma", "same"),
    ("final_norm.bias", "bert/encoder/LayerNorm/beta", "same"),
    ("head.dense.weight", "{head}/dense/kernel", "dense"),
    ("head.dense.bias", "{head}/dense/bias", "same"),
    ("head.norm.weight", "{head}/LayerNorm/gamma", "same"),
    ("head.norm.bias", "{head}/LayerNorm/beta", "same"),
    ("decoder.bias", "cls/predictions/output_bias", "same"),
    ("classifier.weight", "output_weights", "same"),
    ("classifier.bias", "output_bias", "same"),
)
_HEAD_SCOPES = {"mlm": "cls/predictions/transform", "classifier": "bert/pooler"}
# Where a fine-tuned model's `classifier` goes: the scope of the job's output layer
# (run_ner.py's `cls/ner/`, run_squad.py's `cls/squad/`; the classifier's is the root).
_OUTPUT_SCOPES = {"ModernBertForTokenClassification": "cls/ner/",
                  "ModernBertForQuestionAnswering": "cls/squad/"}
# The head models prefix the encoder's names with `model.`; their own names have none.
_ENCODER_PREFIX = "model."
_HEAD_NAMES = ("head.", "decoder.", "classifier.")
_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "relu": "relu", "tanh": "tanh"}
# Hugging Face keys carried through bert_config.json unchanged (for the way back).
_CARRIED = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id",
            "initializer_cutoff_factor")


def _pattern(hf_name):
    return re.compile("^" + re.escape(hf_name).replace(r"\{i\}", r"(\d+)") + "$")


_PATTERNS = [(_pattern(hf), ours, how) for hf, ours, how in NAMES]
_QKV = ("query", "key", "value")


def _our_names(template, layer, head):
    """The name(s) here of a table entry: three for "qkv"."""
    name = template.replace("{L}", f"bert/encoder/layer_{layer}").replace("{head}", head)
    return [name.replace("{qkv}", part) for part in _QKV] if "{qkv}" in name else [name]


def _swap_halves(array):
    """[2I, ...] -> the second half's rows first (an involution: the way back is the same)."""
    first, second = np.split(array, 2, axis=0)
    return np.concatenate([second, first], axis=0)


def convert_weights(hf_weights: Mapping[str, np.ndarray], source: str = "<weights>"
                    ) -> Dict[str, np.ndarray]:
    """Hugging Face ModernBERT state dict -> name here -> float32 array.

    Every tensor is mapped or known to carry nothing (the decoder weight, checked equal to the
    tied word embeddings); anything else is an error naming the tensors.
    """
    head = _HEAD_SCOPES["classifier" if "classifier.weight" in hf_weights else "mlm"]
    out, unknown = {}, []
    for hf_name, array in hf_weights.items():
        name = hf_name
        if name.startswith(_ENCODER_PREFIX) and not name.startswith(_HEAD_NAMES):
            name = name[len(_ENCODER_PREFIX):]
        if name == "decoder.weight":
            continue  # tied, checked below
        for pattern, template, how in _PATTERNS:
            match = pattern.match(name)
            if match:
                break
        else:
            unknown.append(hf_name)
            continue
        layer = match.group(1) if match.groups() else None
        value = np.asarray(array, dtype=np.float32)
        if how == "glu":
            value = _swap_halves(value)
        parts = np.split(value, 3, axis=0) if how == "qkv" else [value]
        for target, part in zip(_our_names(template, layer, head), parts):
            out[target] = np.ascontiguousarray(part.T) if part.ndim == 2 and how != "same" \
                else part
    if unknown:
        raise ConversionError(f"{source}: {len(unknown)} tensor(s) are not part of a ModernBERT "
                              f"model: {', '.join(sorted(unknown))}")
    decoder = hf_weights.get("decoder.weight")
    if decoder is not None and not np.array_equal(decoder, out.get(NAMES[0][1])):
        raise ConversionError(f"{source}: decoder.weight is not tied to the word embeddings")
    if "cls/predictions/transform/dense/kernel" in out and "bert/pooler/dense/kernel" not in out:
        for name in [n for n in out if n.startswith("cls/predictions/transform/")]:
            out[name.replace("cls/predictions/transform/", "bert/pooler/")] = out[name].copy()
    return out


def place_output_layer(weights: Dict[str, np.ndarray], hf_config: Mapping) -> None:
    """Moves a fine-tuned model's output layer (`output_weights`, `output_bias`) under the
    scope of its job by `config.json`'s `architectures`: a token classifier's to run_ner.py's
    `cls/ner/`, a question-answering model's to run_squad.py's `cls/squad/` (a sequence
    classifier's stays at the root, Google's run_classifier.py names). In place."""
    scopes = [_OUTPUT_SCOPES[a] for a in hf_config.get("architectures") or []
              if a in _OUTPUT_SCOPES]
    if scopes:
        for name in ("output_weights", "output_bias"):
            if name in weights:
                weights[scopes[0] + name] = weights.pop(name)


def export_weights(weights: Mapping[str, np.ndarray], head: Optional[str] = "mlm"
                   ) -> Dict[str, np.ndarray]:
    """Names here -> a Hugging Face state dict, the inverse of `convert_weights`.

    Args:
      weights: name here -> array.
      head: "mlm": `ModernBertForMaskedLM` (needs the masked-LM head; the pooler copy is
        dropped); "classifier": a fine-tuned head model (`bert/pooler` as `head`, the root-level
        `output_weights`/`output_bias` as `classifier`: the names of
        `ModernBertFor{SequenceClassification,TokenClassification,QuestionAnswering,
        MultipleChoice}` alike); None: `ModernBertModel` (the encoder alone).
    """
    prefix = _ENCODER_PREFIX if head else ""
    scope = _HEAD_SCOPES.get(head or "mlm")
    layers = {int(m.group(1)) for m in
              (re.match(r"^bert/encoder/layer_(\d+)/", n) for n in weights) if m}
    wanted = {"mlm": ("head.", "decoder."), "classifier": ("head.", "classifier.")}.get(head, ())
    out = {}
    for hf_template, template, how in NAMES:
        is_head = hf_template.startswith(_HEAD_NAMES)
        if is_head and not hf_template.startswith(wanted):
            continue
        for layer in sorted(layers) if "{i}" in hf_template else [None]:
            names = _our_names(template, layer, scope)
            if not all(n in weights for n in names):
                continue
            parts = [np.asarray(weights[n], np.float32) for n in names]
            parts = [p.T if p.ndim == 2 and how != "same" else p for p in parts]
            value = np.concatenate(parts, axis=0) if how == "qkv" else parts[0]
            if how == "glu":
                value = _swap_halves(value)
            hf_name = hf_template.replace("{i}", str(layer))
            out[hf_name if is_head else prefix + hf_name] = np.ascontiguousarray(value)
    return out  # decoder.weight left out: tied, as `save_pretrained` writes it


def _global_every(layer_types, source):
    """ModernBERT's `layer_types` -> n with layer i global iff i % n == 0."""
    globals_ = [i for i, kind in enumerate(layer_types) if kind == "full_attention"]
    n = globals_[1] if len(globals_) > 1 else len(layer_types)
    expected = ["full_attention" if i % n == 0 else "sliding_attention"
                for i in range(len(layer_types))]
    if not globals_ or globals_[0] != 0 or list(layer_types) != expected:
        raise ConversionError(f"{source}: layer_types {layer_types} is not 'global every n "
                              f"layers from layer 0', the pattern this model expresses")
    return n


def _rope_thetas(hf_config, source):
    """(global theta, local theta) from `rope_parameters` (transformers 5) or the older
    `global_rope_theta` / `local_rope_theta` keys."""
    params = hf_config.get("rope_parameters") or {}
    thetas = []
    for kind, old_key, default in (("full_attention", "global_rope_theta", 160000.0),
                                   ("sliding_attention", "local_rope_theta", 10000.0)):
        entry = params.get(kind) or {}
        if entry.get("rope_type", "default") != "default":
            raise ConversionError(f"{source}: rope_type {entry['rope_type']!r} of {kind} is not "
                                  f"supported (only the default RoPE)")
        thetas.append(float(entry.get("rope_theta", hf_config.get(old_key, default))))
    return tuple(thetas)


def convert_config(hf_config: Dict, source: str = "config.json") -> Dict:
    """Hugging Face ModernBERT `config.json` dict -> `bert_config.json` dict (keys of
    model/bert_config.py; ModernBERT's token ids carried along for the way back)."""
    if hf_config.get("model_type") != "modernbert":
        raise ConversionError(f"{source}: model_type is {hf_config.get('model_type')!r}, "
                              f"expected 'modernbert'")
    act = hf_config.get("hidden_activation", "gelu")
    if act not in _ACTIVATIONS or hf_config.get("classifier_activation", act) != act:
        raise ConversionError(f"{source}: hidden_activation {act!r} / classifier_activation "
                              f"{hf_config.get('classifier_activation')!r}: supported are one "
                              f"of {', '.join(_ACTIVATIONS)}, the same for both")
    if hf_config.get("attention_bias", False) != hf_config.get("mlp_bias", False):
        raise ConversionError(f"{source}: attention_bias and mlp_bias differ; one 'use_bias' "
                              f"key expresses both")
    for key, value in (("decoder_bias", True), ("tie_word_embeddings", True)):
        if hf_config.get(key, value) != value:
            raise ConversionError(f"{source}: {key} must be {value}")
    num_layers = hf_config["num_hidden_layers"]
    layer_types = hf_config.get("layer_types") or [
        "full_attention" if i % hf_config.get("global_attn_every_n_layers", 3) == 0
        else "sliding_attention" for i in range(num_layers)]
    global_theta, local_theta = _rope_thetas(hf_config, source)
    out = {
        "vocab_size": hf_config["vocab_size"],
        "hidden_size": hf_config["hidden_size"],
        "num_hidden_layers": num_layers,
        "num_attention_heads": hf_config["num_attention_heads"],
        "intermediate_size": 2 * hf_config["intermediate_size"],
        "hidden_act": _ACTIVATIONS[act],
        "hidden_dropout_prob": max(hf_config.get("embedding_dropout", 0.0),
                                   hf_config.get("mlp_dropout", 0.0)),
        "attention_probs_dropout_prob": hf_config.get("attention_dropout", 0.0),
        "max_position_embeddings": hf_config["max_position_embeddings"],
        "type_vocab_size": 0,
        "initializer_range": hf_config.get("initializer_range", 0.02),
        "pre_layer_norm": True,
        "use_bias": hf_config.get("attention_bias", False),
        "gated_ffn": True,
        "position_embedding_type": "rope",
        "rope_theta": global_theta,
        "local_rope_theta": local_theta,
        "local_attention_window": hf_config.get("local_attention", 128),
        "global_attention_every_n_layers": _global_every(layer_types, source),
        "layer_norm_eps": hf_config.get("norm_eps", 1e-5),
        "layer_norm_bias": hf_config.get("norm_bias", False),
        "first_layer_attention_norm": False,
        "head_bias": hf_config.get("classifier_bias", False),
        "classifier_pooling": hf_config.get("classifier_pooling", "cls"),
        "classifier_dropout": hf_config.get("classifier_dropout", 0.0),
    }
    out.update({key: hf_config[key] for key in _CARRIED if key in hf_config})
    return out


def export_config(bert_config: Mapping) -> Dict:
    """`bert_config.json` dict of a ModernBERT-shaped model -> Hugging Face `config.json` dict
    for `ModernBertForMaskedLM` (the inverse of `convert_config`)."""
    acts = {ours: theirs for theirs, ours in _ACTIVATIONS.items() if theirs != "gelu_new"}
    act = acts[bert_config["hidden_act"]]
    n = bert_config["global_attention_every_n_layers"]
    out = {
        "architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert",
        "vocab_size": bert_config["vocab_size"], "hidden_size": bert_config["hidden_size"],
        "num_hidden_layers": bert_config["num_hidden_layers"],
        "num_attention_heads": bert_config["num_attention_heads"],
        "intermediate_size": bert_config["intermediate_size"] // 2,
        "hidden_activation": act, "classifier_activation": act,
        "max_position_embeddings": bert_config["max_position_embeddings"],
        "initializer_range": bert_config["initializer_range"],
        "norm_eps": bert_config["layer_norm_eps"], "norm_bias": bert_config["layer_norm_bias"],
        "attention_bias": bert_config["use_bias"], "mlp_bias": bert_config["use_bias"],
        "classifier_bias": bert_config["head_bias"], "decoder_bias": True,
        "attention_dropout": bert_config["attention_probs_dropout_prob"],
        "embedding_dropout": bert_config["hidden_dropout_prob"],
        "mlp_dropout": bert_config["hidden_dropout_prob"],
        "local_attention": bert_config["local_attention_window"],
        "layer_types": ["full_attention" if i % n == 0 else "sliding_attention"
                        for i in range(bert_config["num_hidden_layers"])],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": bert_config["rope_theta"]},
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": bert_config["local_rope_theta"]}},
        "classifier_pooling": bert_config.get("classifier_pooling") or "cls",
        "classifier_dropout": bert_config.get("classifier_dropout") or 0.0,
        "tie_word_embeddings": True,
    }
    out.update({key: bert_config[key] for key in _CARRIED if key in bert_config})
    return out


# ModernBERT's special-token ids in config.json and the tokens they name (bos/eos are its
# [CLS]/[SEP], as in its released config).
_SPECIAL_TOKEN_KEYS = {"pad_token_id": "[PAD]", "bos_token_id": "[CLS]", "eos_token_id": "[SEP]",
                       "cls_token_id": "[CLS]", "sep_token_id": "[SEP]"}


def special_token_ids(tokenizer_dir: str) -> Dict[str, int]:
    """config.json's special-token ids from `tokenizer_dir`/tokenizer.json's added tokens ({}
    without the file). A model pretrained here has none in its bert_config.json (only a
    converted one carries them through), and Hugging Face's defaults (ModernBERT-base's ids)
    lie outside a smaller vocabulary."""
    path = os.path.join(tokenizer_dir, "tokenizer.json")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        added = {t["content"]: t["id"] for t in json.load(f).get("added_tokens", [])}
    return {key: added[token] for key, token in _SPECIAL_TOKEN_KEYS.items() if token in added}


def copy_tokenizer(source_dir: str, output_dir: str) -> Dict[str, str]:
    """Copies the tokenizer files present in `source_dir` (TOKENIZER_FILES); returns them."""
    written = {}
    for name in TOKENIZER_FILES:
        path = os.path.join(source_dir, name)
        if os.path.exists(path):
            written[name] = os.path.join(output_dir, name)
            shutil.copyfile(path, written[name])
    return written


def convert_folder(hf_model_dir: str, hf_config: Dict, output_dir: str) -> Dict[str, str]:
    """Converts a Hugging Face ModernBERT folder (its parsed `config.json` given) into
    `bert_config.json`, `bert_model.ckpt.*` and the tokenizer files in `output_dir`."""
    from bert_mgpu.model.bert_config import BertConfig

    config_path = os.path.join(hf_model_dir, "config.json")
    bert_config = BertConfig.from_dict(convert_config(hf_config, config_path),
                                       source=config_path)
    hf_weights, weights_path = read_hf_weights(hf_model_dir)
    weights = convert_weights(hf_weights, weights_path)
    place_output_layer(weights, hf_config)
    missing = [n for n in expected_names(bert_config) if n not in weights]
    if missing:
        raise ConversionError(f"{weights_path}: {len(missing)} ModernBERT tensor(s) missing: "
                              f"{', '.join(missing)}")
    os.makedirs(output_dir, exist_ok=True)
    written = {"bert_config": os.path.join(output_dir, "bert_config.json"),
               "checkpoint": os.path.join(output_dir, "bert_model.ckpt")}
    bert_config.to_json_file(written["bert_config"])
    from bert_mgpu.engine import checkpoint  # TensorFlow only when writing, after every check
    checkpoint.write_bundle(written["checkpoint"], weights)
    written.update(copy_tokenizer(hf_model_dir, output_dir))
    return written


def expected_names(bert_config) -> Tuple[str, ...]:
    """The `bert/` names a ModernBERT-shaped model of this config has (building no TF
    variables): the encoder and the pooler."""
    dense = ("kernel", "bias") if bert_config.use_bias else ("kernel",)
    norm = ("gamma", "beta") if bert_config.layer_norm_bias else ("gamma",)
    names = ["bert/embeddings/word_embeddings"] + [f"bert/embeddings/LayerNorm/{p}" for p in norm]
    for i in range(bert_config.num_hidden_layers):
        scope = f"bert/encoder/layer_{i}"
        scopes = [f"{scope}/attention/self/{part}" for part in _QKV] + [
            f"{scope}/attention/output/dense", f"{scope}/intermediate/dense",
            f"{scope}/output/dense"]
        names += [f"{s}/{p}" for s in scopes for p in dense]
        norms = [f"{scope}/output/LayerNorm"] + ([f"{scope}/attention/output/LayerNorm"] if i
                                                  else [])
        names += [f"{s}/{p}" for s in norms for p in norm]
    pooler = ("kernel", "bias") if bert_config.head_bias else ("kernel",)
    names += [f"bert/encoder/LayerNorm/{p}" for p in norm]
    names += [f"bert/pooler/dense/{p}" for p in pooler] + \
        [f"bert/pooler/LayerNorm/{p}" for p in norm]
    return tuple(names)


# A fine-tuned checkpoint's output layer by its scope here (`place_output_layer`, the way
# back); a root-level one is a sequence classifier's, or a run_multiple_choice.py run's.
_SCOPED_MODELS = {scope: model for model, scope in _OUTPUT_SCOPES.items()}
# What a ModernBERT checkpoint here may hold besides optimizer slots and steps: the encoder,
# the masked-LM head, and one output layer (a multi-task run's: one per task).
_EXPORTABLE = re.compile(r"^(bert/|cls/predictions/)|^(cls/ner/|cls/squad/|"
                         + re.escape(head_scope("")) + r"[^/]+/)?output_(weights|bias)$")


def _head_model(weights: Dict[str, np.ndarray], prefix: str, labels: Optional[Sequence[str]],
                task_label: Optional[str]) -> Tuple[Optional[str], Dict]:
    """(the Hugging Face model of a fine-tuned checkpoint's output layer, config.json keys of
    its labels), the layer moved in `weights` to the root-level `output_weights`/`output_bias`
    (a multi-task run's `task_label` head; the others dropped); (None, {}) without one.
    Labels: `labels`, else the run's (run_config.json next to the checkpoint)."""
    run = hf_export.run_of_checkpoint(prefix)
    for scope, model in _SCOPED_MODELS.items():
        if scope + "output_bias" in weights:
            if task_label:
                raise ConversionError(f"--task_label={task_label}: {prefix} is not a multi-task "
                                      f"classifier run (its head is {scope}output_bias)")
            for name in ("output_weights", "output_bias"):
                weights[name] = weights.pop(scope + name)
            token = model == "ModernBertForTokenClassification"
            return model, _label_keys(model, labels or (run.get("labels") if token else None),
                                      weights["output_bias"].shape[0])
    model = "ModernBertForSequenceClassification"
    head = hf_export.classifier_head(weights, prefix, task_label, model)
    if "output_bias" not in weights:
        return None, {}
    if "num_choices" in run:  # run_multiple_choice.py's one score per choice
        return "ModernBertForMultipleChoice", _label_keys("ModernBertForMultipleChoice",
                                                          labels, None)
    if labels is None and head.labels and registry.task_type(head.task_type).has_label_names:
        labels = head.labels
    return model, hf_export.label_keys(labels, weights["output_bias"].shape[0], head.task_type)


def _label_keys(model: str, labels: Optional[Sequence[str]], num_labels: Optional[int]) -> Dict:
    """config.json's label keys of a token or QA model (none for multiple choice, whose
    classifier has one output whatever num_labels says); `labels` refused where none apply."""
    if model != "ModernBertForTokenClassification" and labels:
        raise ConversionError(f"--label_list: a {model} has no label names")
    return {} if num_labels is None else hf_export.label_keys(labels, num_labels)


def _read_weights(init_checkpoint: str, config) -> Tuple[str, Dict[str, np.ndarray]]:
    """(the checkpoint's prefix, its weights by name: optimizer slots and steps left out).

    Raises:
      ConversionError: a ModernBERT variable is missing, or a variable is not part of what
        a ModernBERT folder holds (`_EXPORTABLE`), naming them.
    """
    import tensorflow as tf  # only to read the checkpoint

    from bert_mgpu.engine import checkpoint

    prefix = checkpoint.resolve_checkpoint_path(init_checkpoint)
    reader = tf.train.load_checkpoint(prefix)
    names = [n for n in reader.get_variable_to_shape_map()
             if not hf_export.NOT_WEIGHTS.search(n)]
    for problem, found in (("missing", [n for n in expected_names(config) if n not in names]),
                           ("not part of a ModernBERT model",
                            sorted(n for n in names if not _EXPORTABLE.search(n)))):
        if found:
            raise ConversionError(f"{prefix}: {len(found)} variable(s) {problem}: "
                                  f"{', '.join(found[:5])}{', ...' if len(found) > 5 else ''}")
    return prefix, {n: reader.get_tensor(n) for n in names}


def export_checkpoint(bert_config: Dict, bert_config_file: str, init_checkpoint: str,
                      tokenizer_dir: str, output_dir: str, labels: Optional[Sequence[str]] = None,
                      task_label: Optional[str] = None) -> Dict[str, str]:
    """A ModernBERT-shaped checkpoint here -> a Hugging Face folder with the tokenizer files of
    `tokenizer_dir` (the folder of --vocab_file's tokenizer.json); returns the paths.

    The model written: a fine-tuned run's head model (`_head_model`: run_classifier's
    `ModernBertForSequenceClassification`, `labels` or the run's as id2label, a multi-task
    run's `task_label` head; run_ner's `ModernBertForTokenClassification`; run_squad's
    `ModernBertForQuestionAnswering`; run_multiple_choice's `ModernBertForMultipleChoice`),
    else `ModernBertForMaskedLM`, else (no masked-LM head) `ModernBertModel`.
    """
    from bert_mgpu.model.bert_config import BertConfig

    config = BertConfig.from_dict(bert_config, source=bert_config_file)
    prefix, weights = _read_weights(init_checkpoint, config)
    model, label_config = _head_model(weights, prefix, labels, task_label)
    head = "classifier" if model else ("mlm" if "cls/predictions/output_bias" in weights
                                       else None)
    state = export_weights(weights, head)
    hf_config = export_config(config.to_dict())
    hf_config.update({k: v for k, v in special_token_ids(tokenizer_dir).items()
                      if k not in hf_config})
    hf_config.update(label_config)
    hf_config["architectures"] = [model or ("ModernBertForMaskedLM" if head
                                            else "ModernBertModel")]
    os.makedirs(output_dir, exist_ok=True)
    paths = {name: os.path.join(output_dir, name) for name in ("config.json",
                                                               "model.safetensors")}
    hf_export.write_safetensors(paths["model.safetensors"], state, {"format": "pt"})
    with open(paths["config.json"], "w", encoding="utf-8") as f:
        f.write(json.dumps(hf_config, indent=2) + "\n")
    paths.update(copy_tokenizer(tokenizer_dir, output_dir))
    return paths
