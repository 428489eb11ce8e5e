"""Runs Google's optimization.create_optimizer (bert-tensorflow 1.0.4) as a test oracle.

Usage: python google_optimizer.py REQUEST.json
REQUEST: {"weights": "w.npz", "grads": "g.npz", "num_steps": int, "init_lr": float,
"num_train_steps": int, "num_warmup_steps": int, "output": "out.npz"}
w.npz: name ('/' as '|') -> initial value. g.npz: "<step>:<name>" -> the gradient fed at that step.
create_optimizer takes a loss; the loss sum(w * g) with g fed per step has exactly gradient g,
so Google's own clipping, schedule, update and global-step increment run unchanged.

One thing is pinned: create_optimizer groups `apply_gradients` with `global_step.assign(+1)`
without a control dependency, so whether update t reads the learning rate of step t or t + 1 is
up to the executor (here, TF 2.21 in graph mode, it reads t + 1). Its comments document step t
("if global_step < num_warmup_steps, the learning rate will be global_step/num_warmup_steps *
init_lr"), so the oracle evaluates Google's learning-rate tensor first and feeds that value to
the update of the same step.
out.npz: every graph variable after num_steps (weights, adam_m/adam_v slots, global_step) and
`learning_rates`, the rate of each step.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    tf1.disable_v2_behavior()
    from bert import optimization  # Google's code

    learning_rates = []
    original_init = optimization.AdamWeightDecayOptimizer.__init__

    def recording_init(self, learning_rate, *args, **kwargs):
        learning_rates.append(learning_rate)
        original_init(self, learning_rate, *args, **kwargs)

    optimization.AdamWeightDecayOptimizer.__init__ = recording_init
    weights = dict(np.load(request["weights"]))
    grads = dict(np.load(request["grads"]))
    graph = tf.Graph()
    with graph.as_default():
        variables, feeds, loss = {}, {}, 0.0
        for key, value in weights.items():
            name = key.replace("|", "/")
            var = tf1.get_variable(name, initializer=tf1.constant(value))
            ph = tf1.placeholder(tf.float32, value.shape)
            variables[name], feeds[name] = var, ph
            loss += tf.reduce_sum(var * ph)
        train_op = optimization.create_optimizer(
            loss, request["init_lr"], request["num_train_steps"], request["num_warmup_steps"],
            use_tpu=False)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            (lr_tensor,) = learning_rates
            lrs = []
            for step in range(request["num_steps"]):
                feed = {feeds[n]: grads[f"{step}:{n}".replace("/", "|")] for n in variables}
                lrs.append(sess.run(lr_tensor))
                feed[lr_tensor] = lrs[-1]
                sess.run(train_op, feed)
            out = {}
            for var in tf1.global_variables():
                out[var.op.name.replace("/", "|")] = sess.run(var)
    out["learning_rates"] = np.array(lrs, np.float32)
    np.savez(request["output"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
