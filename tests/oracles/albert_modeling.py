"""Runs Google's ALBERT code (PyPI albert-tensorflow==1.1: google-research's albert/modeling.py
and the heads of its run_pretraining.py, as published) as a test oracle.

Executed only in the oracle virtualenv (BERT_MGPU_ORACLE_PYTHON), never imported by the project.
ALBERT's code is TF1 code: `tensorflow` is `tf.compat.v1` for it (as run_google_latest.py does
for Google's BERT scripts), `tf.layers.dense` comes from tf-keras (TF_USE_LEGACY_KERAS=1), and
`tensorflow.contrib` (gone since TF 2.0) is _google_compat's layer_norm plus empty stand-ins for
the TPU/data/cluster modules run_pretraining.py imports but these functions never use.

Usage:
  python albert_modeling.py REQUEST.json

REQUEST.json: {"config": {...albert_config...}, "inputs": "in.npz", "weights": "w.npz" or null,
"output": "out.npz", "names": "names.json"}. in.npz holds input_ids, input_mask, segment_ids,
masked_lm_positions, masked_lm_ids, masked_lm_weights, sentence_order_labels. w.npz maps
variable names ('/' replaced by '|') to arrays. The graph is ALBERT's pretraining model:
`AlbertModel`, then run_pretraining's `get_masked_lm_output` (on the embedding table) and
`get_sentence_order_output`. names.json receives [[name, shape], ...] of its variables, in
creation order; out.npz (with weights naming every variable) sequence_output, pooled_output,
layer_i, masked_lm_log_probs, sentence_order_log_probs.
"""

import json
import os
import sys
import types

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _google_compat import install_contrib_shim  # noqa: E402
from google_modeling import _run_graph  # noqa: E402

tf1 = tf.compat.v1


def _install_albert_shims():
    install_contrib_shim()
    contrib = sys.modules["tensorflow.contrib"]
    for name in ("cluster_resolver", "data", "tpu"):
        module = types.ModuleType(f"tensorflow.contrib.{name}")
        setattr(contrib, name, module)
        sys.modules[module.__name__] = module
    sys.modules["tensorflow"] = tf1
    tf1.contrib = contrib


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    tf1.disable_v2_behavior()
    _install_albert_shims()
    from albert import modeling, run_pretraining  # noqa: E402  (Google's ALBERT code)

    config = modeling.AlbertConfig.from_dict(request["config"])
    data = dict(np.load(request["inputs"]))
    weights = dict(np.load(request["weights"])) if request.get("weights") else None

    def build(ph):
        model = modeling.AlbertModel(
            config=config, is_training=False, input_ids=ph["input_ids"],
            input_mask=ph["input_mask"], token_type_ids=ph["segment_ids"],
            use_one_hot_embeddings=False)
        fetches = {"sequence_output": model.get_sequence_output(),
                   "pooled_output": model.get_pooled_output()}
        for i, layer in enumerate(model.get_all_encoder_layers()):
            fetches[f"layer_{i}"] = layer
        _, _, fetches["masked_lm_log_probs"] = run_pretraining.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(),
            ph["masked_lm_positions"], ph["masked_lm_ids"], ph["masked_lm_weights"])
        _, _, fetches["sentence_order_log_probs"] = run_pretraining.get_sentence_order_output(
            config, model.get_pooled_output(), ph["sentence_order_labels"])
        return fetches

    out, names = _run_graph(build, None, data)
    with open(request["names"], "w") as f:
        json.dump(names, f)
    # Run with the given weights only when they name every variable (else the names above
    # tell what differs, and there is no out.npz).
    if weights is not None and all(n.replace("/", "|") in weights for n, _ in names):
        out, _ = _run_graph(build, weights, data)
        np.savez(request["output"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
