"""Runs Google's run_squad.create_model on one of our checkpoints, as a test oracle.

Executed only in the oracle virtualenv (bert-tensorflow 1.0.4, whose `create_model` is the same
as the latest run_squad.py's), in TF1 graph mode with the contrib shim of _google_compat.py.
The weights are loaded exactly as Google's `model_fn` loads --init_checkpoint:
`modeling.get_assignment_map_from_checkpoint(tf.trainable_variables(), ckpt)` then
`tf.train.init_from_checkpoint` (by name; a variable the checkpoint lacks keeps its random
initial value, so the names it initialised are reported).

Usage: python google_squad_model.py REQUEST.json
REQUEST: {"config": {...bert_config...}, "init_checkpoint": prefix, "inputs": npz with
          input_ids, input_mask, segment_ids [N, S], "output": npz path, "names": json path,
          "save_checkpoint": optional prefix}
Writes start_logits, end_logits [N, S]; names.json: [[variable, initialised from the checkpoint]].
"init_checkpoint": null keeps Google's random initialisation; "save_checkpoint" then writes the
model's variables with TF1's `tf.train.Saver`, as Google's run_squad.py writes its checkpoints.
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


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    install_contrib_shim()
    tf1.disable_v2_behavior()
    from bert import modeling, run_squad  # noqa: E402  (Google's code)

    config = modeling.BertConfig.from_dict(request["config"])
    data = dict(np.load(request["inputs"]))
    graph = tf.Graph()
    with graph.as_default():
        ph = {k: tf1.constant(v.astype(np.int32)) for k, v in data.items()}
        start_logits, end_logits = run_squad.create_model(
            bert_config=config, is_training=False, input_ids=ph["input_ids"],
            input_mask=ph["input_mask"], segment_ids=ph["segment_ids"],
            use_one_hot_embeddings=False)
        tvars = tf1.trainable_variables()
        initialized = {}
        if request.get("init_checkpoint"):
            assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
                tvars, request["init_checkpoint"])
            tf1.train.init_from_checkpoint(request["init_checkpoint"], assignment_map)
        saver = tf1.train.Saver(tvars) if request.get("save_checkpoint") else None
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            start, end = sess.run([start_logits, end_logits])
            if saver is not None:
                saver.save(sess, request["save_checkpoint"])
    with open(request["names"], "w") as f:
        json.dump([[v.op.name, v.name in initialized] for v in tvars], f)
    np.savez(request["output"], start_logits=start, end_logits=end)


if __name__ == "__main__":
    main(sys.argv[1])
