"""The optimizer's share of the first update: tracing and compiling the clipped update.

Run by hand with the project's venv, once per checkout to compare (about 20 s a round):

    PYTHONPATH=. .venv/bin/python bench/optimizer_trace.py --rounds=2

Builds `AdamWeightDecay` over the variables of a BERT encoder (all-MiniLM-L6-v2's shape by
default: 6 layers, hidden 384, 103 variables) and measures what the trainer's XLA-compiled
update (`_apply_clipped`) pays before the first update: tracing the clipping (given the global
norm, which TensorFlow's ops compute before it) and the update in one
`tf.function(jit_compile=True)`, its first call (XLA's compile), then the mean of 5 steady
calls (the norm included). Prints one line per round; nothing is written (the figures of a
comparison go into docs/benchmarks.md by hand, with the commits compared).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # noqa: E402

from bert_mgpu.engine import optimization  # noqa: E402
from bert_mgpu.model import modeling  # noqa: E402
from bert_mgpu.model.bert_config import BertConfig  # noqa: E402


def one_round(layers, hidden, intermediate):
    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=12, intermediate_size=intermediate)
    variables = modeling.BertModel(config).named_variables()
    optimizer = optimization.AdamWeightDecay(optimization.learning_rate_schedule(1e-4, 100, 10))
    optimizer.build(variables)
    step = tf.Variable(0, dtype=tf.int64)

    def apply_clipped(grads, norm):
        clipped, _ = optimization.clip_by_global_norm(grads, 1.0, norm=norm)
        return optimizer.apply_gradients(clipped, step)

    update = tf.function(apply_clipped, jit_compile=True, autograph=False)
    global_norm = tf.function(optimization.global_norm, autograph=False)
    grads = {name: tf.ones_like(v) * 1e-3 for name, v in variables.items()}
    norm = global_norm(grads)
    start = time.perf_counter()
    traced = update.get_concrete_function(grads, norm)
    trace = time.perf_counter() - start
    start = time.perf_counter()
    update(grads, norm)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(5):
        update(grads, global_norm(grads))
    steady = (time.perf_counter() - start) / 5
    return (f"variables {len(variables)}, graph ops {len(traced.graph.get_operations())}, "
            f"trace {trace:.2f} s, first call {first:.2f} s, steady {steady * 1000:.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for i in range(args.rounds):
        print(f"round {i + 1}: {one_round(args.layers, args.hidden, args.intermediate)}",
              flush=True)


if __name__ == "__main__":
    main()
