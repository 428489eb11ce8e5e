"""Runs Google's own modeling.py (PyPI bert-tensorflow==1.0.4) as a test oracle.

Executed only in the oracle virtualenv (BERT_MGPU_ORACLE_PYTHON), never imported by the project.
Google's code is TF1 graph code: it runs under TF 2.21 in `tf.compat.v1` graph mode with two
shims: `tf.layers.dense` comes from tf-keras (TF_USE_LEGACY_KERAS=1), and
`tensorflow.contrib.layers.layer_norm`, gone since TF 2.0, is replaced by a function with the same
contract (variables `<scope>/beta`, `<scope>/gamma`, normalization over the last axis, variance
epsilon 1e-12, as contrib's implementation). Everything else is Google's code as published.

Usage:
  python google_modeling.py REQUEST.json

REQUEST.json: {"config": {...bert_config...}, "inputs": "in.npz", "weights": "w.npz" or null,
"heads": bool, "num_labels": int or 0, "output": "out.npz", "names": "names.json"}
in.npz holds input_ids, input_mask, segment_ids and, for heads, masked_lm_positions,
masked_lm_ids, masked_lm_weights, next_sentence_labels, label_ids. w.npz maps Google variable
names (with '/' replaced by '|') to arrays; without it Google's random initialisation is used.
names.json receives [[name, shape], ...] of the graph's variables, in creation order.
"""

import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _google_compat import install_contrib_shim  # noqa: E402

tf1 = tf.compat.v1


def _run_graph(build, weights, data):
    """Builds a graph with `build(ph) -> fetches`, loads `weights`, runs it.

    Returns (fetched numpy dict, [[name, shape], ...] of the graph's variables).
    """
    graph = tf.Graph()
    with graph.as_default():
        ph = {k: tf1.constant(v) for k, v in data.items()}
        fetches = build(ph)
        variables = tf1.global_variables()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            if weights is not None:
                for v in variables:
                    key = v.op.name.replace("/", "|")
                    if key not in weights:
                        raise KeyError(f"oracle: no weight given for {v.op.name}")
                    v.load(weights[key], sess)
            out = sess.run(fetches)
    return out, [[v.op.name, v.shape.as_list()] for v in variables]


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    install_contrib_shim()
    tf1.disable_v2_behavior()
    from absl import flags  # noqa: E402
    from bert import modeling  # noqa: E402  (Google's code)

    config = modeling.BertConfig.from_dict(request["config"])
    data = dict(np.load(request["inputs"]))
    weights = dict(np.load(request["weights"])) if request.get("weights") else None

    def build_pretraining(ph):
        model = modeling.BertModel(
            config=config, is_training=False, input_ids=ph["input_ids"],
            input_mask=ph["input_mask"], token_type_ids=ph["segment_ids"],
            use_one_hot_embeddings=False)
        fetches = {"sequence_output": model.get_sequence_output(),
                   "pooled_output": model.get_pooled_output(),
                   "embedding_output": model.get_embedding_output()}
        for i, layer in enumerate(model.get_all_encoder_layers()):
            fetches[f"layer_{i}"] = layer
        if request.get("heads"):
            from bert import run_pretraining  # noqa: E402
            mlm_loss, _, mlm_log_probs = run_pretraining.get_masked_lm_output(
                config, model.get_sequence_output(), model.get_embedding_table(),
                ph["masked_lm_positions"], ph["masked_lm_ids"], ph["masked_lm_weights"])
            nsp_loss, _, nsp_log_probs = run_pretraining.get_next_sentence_output(
                config, model.get_pooled_output(), ph["next_sentence_labels"])
            fetches.update(masked_lm_loss=mlm_loss, masked_lm_log_probs=mlm_log_probs,
                           next_sentence_loss=nsp_loss, next_sentence_log_probs=nsp_log_probs)
        return fetches

    def build_classifier(ph):
        # run_pretraining and run_classifier define the same flags at import: drop the first
        # script's before importing the second.
        for flag in flags.FLAGS.get_flags_for_module("bert.run_pretraining"):
            delattr(flags.FLAGS, flag.name)
        from bert import run_classifier  # noqa: E402
        loss, _, logits, probs = run_classifier.create_model(
            config, False, ph["input_ids"], ph["input_mask"], ph["segment_ids"],
            ph["label_ids"], request["num_labels"], False)
        return {"classifier_loss": loss, "classifier_logits": logits,
                "classifier_probabilities": probs}

    out, names = _run_graph(build_pretraining, weights, data)
    if request.get("num_labels"):
        # create_model builds its own BertModel, so the classifier runs in a graph of its own
        # with the same weights; its root-level variables are added to the name list.
        clf_out, clf_names = _run_graph(build_classifier, weights, data)
        out.update(clf_out)
        known = {name for name, _ in names}
        names += [entry for entry in clf_names if entry[0] not in known]
    with open(request["names"], "w") as f:
        json.dump(names, f)
    np.savez(request["output"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
