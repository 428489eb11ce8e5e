"""Reading Hugging Face BERT checkpoints and mapping them to Google's layout.

A Hugging Face BERT folder holds `config.json`, `model.safetensors` or `pytorch_model.bin`, and
`vocab.txt`. This module reads the weights without PyTorch (safetensors is a JSON header plus raw
little-endian arrays; `pytorch_model.bin` since PyTorch 1.6 is a zip of a pickle whose tensors
point into raw storage files), renames them to Google's variable names, transposes the dense
kernels (PyTorch `Linear.weight` is [out, in], Google's `kernel` is [in, out]) and turns
`config.json` into `bert_config.json`.

The GELU trap: Hugging Face's `"gelu"` is the exact erf form, Google's `"gelu"` is the tanh
approximation. The converted config therefore states the numerics: `"gelu_exact"` (this
project's name for erf; Google's own code rejects it rather than silently computing something
else) unless the caller asks for Google's tanh form.
"""

import collections
import json
import os
import pickle
import re
import struct
import zipfile
from typing import Dict, Tuple

import numpy as np

# Hugging Face config keys that map one to one onto Google's bert_config.json.
CONFIG_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
                "max_position_embeddings", "type_vocab_size", "initializer_range")

SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}


class ConversionError(ValueError):
    """A Hugging Face checkpoint that cannot be converted; the message names file and tensor."""


def _bfloat16_to_float32(raw: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32 (the upper half of a float32's bits)."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Reads a `.safetensors` file into name -> numpy array (bfloat16 becomes float32)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ConversionError(f"{path}: too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + header_len])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConversionError(f"{path}: invalid safetensors header") from None
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if base + end > len(data):
            raise ConversionError(f"{path}: tensor {name} extends past the end of the file")
        buf = data[base + begin:base + end]
        dtype = info["dtype"]
        if dtype == "BF16":
            array = _bfloat16_to_float32(np.frombuffer(buf, dtype="<u2"))
        elif dtype in SAFETENSORS_DTYPES:
            array = np.frombuffer(buf, dtype=np.dtype(SAFETENSORS_DTYPES[dtype]).newbyteorder("<"))
        else:
            raise ConversionError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors


# PyTorch storage class name -> numpy dtype (bfloat16 handled apart).
_TORCH_STORAGES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
    "BFloat16Storage": "bfloat16",
}


class _StorageType:
    def __init__(self, name):
        self.name = name


def _rebuild_tensor(storage, storage_offset, size, stride, *unused):
    """Stand-in for torch._utils._rebuild_tensor_v2: a strided view of a storage, copied."""
    itemsize = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        storage[storage_offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride))
    return np.array(view)


def read_pytorch_bin(path: str) -> Dict[str, np.ndarray]:
    """Reads a `pytorch_model.bin` (PyTorch >= 1.6 zip format) without PyTorch.

    Only the few globals a state dict of tensors needs are allowed in the pickle; anything else
    (arbitrary code) is refused, which also makes loading an untrusted file safe.
    """
    if not zipfile.is_zipfile(path):
        raise ConversionError(
            f"{path}: not a zip-format PyTorch file (saved by PyTorch < 1.6?); re-save it with "
            f"a recent PyTorch or convert it to model.safetensors")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise ConversionError(f"{path}: no data.pkl in the archive")
        root = pkl[0][:-len("data.pkl")]
        storages = {}

        def load_storage(storage_type, key):
            if key not in storages:
                raw = archive.read(f"{root}data/{key}")
                kind = _TORCH_STORAGES[storage_type.name]
                if kind == "bfloat16":
                    storages[key] = _bfloat16_to_float32(np.frombuffer(raw, dtype="<u2"))
                else:
                    storages[key] = np.frombuffer(raw, dtype=np.dtype(kind).newbyteorder("<"))
            return storages[key]

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if module == "collections" and name == "OrderedDict":
                    return collections.OrderedDict
                if module == "torch._utils" and name == "_rebuild_tensor_v2":
                    return _rebuild_tensor
                if module == "torch" and name in _TORCH_STORAGES:
                    return _StorageType(name)
                if module == "torch" and name == "Size":
                    return tuple
                raise ConversionError(f"{path}: refusing to load {module}.{name} from the pickle")

            def persistent_load(self, pid):
                # ('storage', storage_type, key, location, numel)
                if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
                    raise ConversionError(f"{path}: unexpected persistent id {pid!r}")
                return load_storage(pid[1], pid[2])

        with archive.open(pkl[0]) as f:
            state = Unpickler(f).load()
    if not isinstance(state, dict):
        raise ConversionError(f"{path}: expected a state dict, got {type(state).__name__}")
    return {k: v for k, v in state.items() if isinstance(v, np.ndarray)}


def read_hf_weights(folder: str) -> Tuple[Dict[str, np.ndarray], str]:
    """Reads `model.safetensors` (preferred) or `pytorch_model.bin` from a folder."""
    for filename, reader in (("model.safetensors", read_safetensors),
                             ("pytorch_model.bin", read_pytorch_bin)):
        path = os.path.join(folder, filename)
        if os.path.exists(path):
            return reader(path), path
    raise ConversionError(f"{folder}: neither model.safetensors nor pytorch_model.bin found")


_LAYER_RE = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")
# Per-layer Hugging Face suffix -> Google suffix (under bert/encoder/layer_N/).
LAYER_NAMES = {
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}
TOP_NAMES = {
    "embeddings.word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings.position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings.token_type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings.LayerNorm": "bert/embeddings/LayerNorm",
    "pooler.dense": "bert/pooler/dense",
    "cls.predictions.transform.dense": "cls/predictions/transform/dense",
    "cls.predictions.transform.LayerNorm": "cls/predictions/transform/LayerNorm",
}
# Buffers and tied copies that carry no weights of their own.
# The heads' Hugging Face names -> Google's (one table, read both ways: interop/hf_export.py turns
# it around). The classifier and next-sentence weights are stored [out, in] by both libraries: no
# transpose.
HEAD_NAMES = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    "classifier.weight": "output_weights",
    "classifier.bias": "output_bias",
}
# Names some Hugging Face checkpoints also hold for the same tensor (read, never written).
_HEAD_ALIASES = {"cls.predictions.decoder.bias": "cls/predictions/output_bias"}
_IGNORED = re.compile(r"(^|\.)position_ids$|^cls\.predictions\.decoder\.weight$")


def hf_to_google_name(hf_name: str) -> Tuple[str, bool]:
    """Maps a Hugging Face parameter name to (Google name, transpose?).

    Raises:
      KeyError: the name is not part of a BERT model.
    """
    name = hf_name
    if name.startswith("bert."):
        name = name[len("bert."):]
    module, _, param = name.rpartition(".")
    # Old checkpoints call LayerNorm's parameters gamma/beta, new ones weight/bias.
    ln_param = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}
    m = _LAYER_RE.match(module)
    if m:
        scope = LAYER_NAMES.get(m.group(2))
        google_module = f"bert/encoder/layer_{m.group(1)}/{scope}" if scope else None
    else:
        google_module = TOP_NAMES.get(module)
    if google_module is not None:
        if google_module.endswith("LayerNorm"):
            if param in ln_param:
                return f"{google_module}/{ln_param[param]}", False
        elif google_module.endswith("_embeddings"):
            if param == "weight":
                return google_module, False
        elif param == "weight":
            return f"{google_module}/kernel", True
        elif param == "bias":
            return f"{google_module}/bias", False
    if hf_name in HEAD_NAMES:
        return HEAD_NAMES[hf_name], False
    if hf_name in _HEAD_ALIASES:
        return _HEAD_ALIASES[hf_name], False
    raise KeyError(hf_name)


def convert_weights(hf_weights: Dict[str, np.ndarray], source: str = "<weights>"
                    ) -> Dict[str, np.ndarray]:
    """Hugging Face state dict -> Google name -> float32 array (kernels transposed).

    Every tensor is either mapped or known to carry nothing (position-id buffers, the decoder
    weight tied to the word embeddings, which is checked to be equal); anything else is an error
    naming the tensors, never silently dropped.
    """
    out: Dict[str, np.ndarray] = collections.OrderedDict()
    unknown = []
    for hf_name, array in hf_weights.items():
        if _IGNORED.search(hf_name):
            continue
        try:
            name, transpose = hf_to_google_name(hf_name)
        except KeyError:
            unknown.append(hf_name)
            continue
        if name in out:
            if name == "cls/predictions/output_bias":
                continue  # `cls.predictions.bias` and `.decoder.bias` are the same tensor
            raise ConversionError(f"{source}: two tensors map to {name} (second: {hf_name})")
        value = np.asarray(array, dtype=np.float32)
        out[name] = np.ascontiguousarray(value.T) if transpose else value
    if unknown:
        raise ConversionError(f"{source}: {len(unknown)} tensor(s) are not part of a BERT model: "
                              f"{', '.join(sorted(unknown))}")
    decoder = hf_weights.get("cls.predictions.decoder.weight")
    embeddings = out.get("bert/embeddings/word_embeddings")
    if decoder is not None and embeddings is not None and not np.array_equal(decoder, embeddings):
        raise ConversionError(f"{source}: cls.predictions.decoder.weight is not tied to the "
                              f"word embeddings; Google's BERT cannot represent that")
    return out


def convert_config(hf_config: Dict, gelu: str = "exact", source: str = "config.json") -> Dict:
    """Hugging Face `config.json` dict -> Google `bert_config.json` dict.

    Args:
      hf_config: the parsed config.json.
      gelu: for Hugging Face's `"gelu"` (erf): "exact" writes `"gelu_exact"` (same numerics),
        "tanh" writes Google's `"gelu"` (the tanh approximation, max difference ~1e-3 per
        activation).
      source: file name for error messages.
    """
    missing = [k for k in CONFIG_KEYS if k not in hf_config]
    if missing:
        raise ConversionError(f"{source}: missing keys {', '.join(missing)}")
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise ConversionError(f"{source}: model_type is {model_type!r}, only 'bert' converts")
    out = {k: hf_config[k] for k in CONFIG_KEYS}
    act = hf_config.get("hidden_act", "gelu")
    if act == "gelu":
        if gelu not in ("exact", "tanh"):
            raise ConversionError(f"--gelu must be 'exact' or 'tanh', got {gelu!r}")
        out["hidden_act"] = "gelu_exact" if gelu == "exact" else "gelu"
    elif act in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        out["hidden_act"] = "gelu"
    elif act in ("relu", "tanh"):
        out["hidden_act"] = act
    else:
        raise ConversionError(f"{source}: hidden_act {act!r} has no Google equivalent")
    eps = hf_config.get("layer_norm_eps", 1e-12)
    if abs(eps - 1e-12) > 1e-15:
        raise ConversionError(f"{source}: layer_norm_eps={eps}; Google's BERT fixes it at 1e-12")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(f"{source}: position_embedding_type "
                              f"{hf_config['position_embedding_type']!r} is not Google's")
    return out


def convert_folder(hf_model_dir: str, output_dir: str, gelu: str = "exact") -> Dict[str, str]:
    """Converts a Hugging Face BERT folder to Google's layout in `output_dir`.

    Writes `bert_config.json`, `bert_model.ckpt.index` + `.data-00000-of-00001` and `vocab.txt`
    (copied when present). Returns the paths written.
    """
    from bert_mgpu.model.bert_config import BertConfig

    config_path = os.path.join(hf_model_dir, "config.json")
    if not os.path.exists(config_path):
        raise ConversionError(f"{config_path}: not found")
    with open(config_path, encoding="utf-8") as f:
        try:
            hf_config = json.load(f)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{config_path}:{e.lineno}: invalid JSON ({e.msg})") from None
    bert_config = BertConfig.from_dict(convert_config(hf_config, gelu, config_path),
                                       source=config_path)
    hf_weights, weights_path = read_hf_weights(hf_model_dir)
    weights = convert_weights(hf_weights, weights_path)
    missing = [name for name in expected_bert_names(bert_config) if name not in weights]
    if missing:
        raise ConversionError(f"{weights_path}: {len(missing)} BERT variable(s) missing: "
                              f"{', '.join(missing)}")
    os.makedirs(output_dir, exist_ok=True)
    written = {"bert_config": os.path.join(output_dir, "bert_config.json"),
               "checkpoint": os.path.join(output_dir, "bert_model.ckpt")}
    bert_config.to_json_file(written["bert_config"])
    from bert_mgpu.engine import checkpoint  # TensorFlow only when writing, after every check
    checkpoint.write_bundle(written["checkpoint"], weights)
    vocab = os.path.join(hf_model_dir, "vocab.txt")
    if os.path.exists(vocab):
        written["vocab"] = os.path.join(output_dir, "vocab.txt")
        with open(vocab, "rb") as src, open(written["vocab"], "wb") as dst:
            dst.write(src.read())
    return written


def expected_bert_names(bert_config):
    """The `bert/` variable names a model of this config has (building no TF variables)."""
    names = [f"bert/embeddings/{n}" for n in ("word_embeddings", "token_type_embeddings",
                                              "position_embeddings", "LayerNorm/beta",
                                              "LayerNorm/gamma")]
    for i in range(bert_config.num_hidden_layers):
        for scope in LAYER_NAMES.values():
            params = ("beta", "gamma") if scope.endswith("LayerNorm") else ("kernel", "bias")
            names += [f"bert/encoder/layer_{i}/{scope}/{p}" for p in params]
    return names + ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
