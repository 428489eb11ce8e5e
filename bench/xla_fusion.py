"""XLA fusion on this CPU: the encoder's training pass uncompiled, with --xla_layers (each layer
one XLA computation) and compiled whole (what --use_xla does per tower), and why XLA does not
pay here: the matmuls of a fine-tuning step's shapes under XLA and under TensorFlow's kernels.

Run by hand with the project's venv (not a test; about 3 minutes on 2 cores):

    .venv/bin/python bench/xla_fusion.py                 # writes docs/benchmarks.md
    .venv/bin/python bench/xla_fusion.py --no_write

What is timed (one process, the arms alternating call by call so that the host's slow and fast
phases hit every arm alike; medians over --rounds calls after one untimed call per arm):

  - **encoder pass**: all-MiniLM-L6-v2's shape (6 layers, H=384, 12 heads, I=1536), random
    weights, a batch of --batch sequences of --seq_length tokens with their masks, forward and
    backward of a loss on the pooled output, in the trainer's position-keyed dropout stream
    (dropout 0.1, and again with dropout 0);
  - **matmul chain**: the dense layers' matmuls of 6 layers at the step's row count
    (--batch x --seq_length rows: Q, K, V, output, intermediate, output), as one `tf.function`
    and as one `tf.function(jit_compile=True)`, in GFLOP/s.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402


def median_ms(times):
    return 1000.0 * float(np.median(times))


def alternate(functions, args, rounds):
    """name -> median ms of `functions[name](*args)`, the functions called in turn."""
    for f in functions.values():
        _fetch(f(*args))
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, f in functions.items():
            start = time.perf_counter()
            _fetch(f(*args))
            times[name].append(time.perf_counter() - start)
    return {name: median_ms(t) for name, t in times.items()}


def _fetch(out):
    first = out[0] if isinstance(out, (list, tuple)) else out
    first.numpy()


def encoder_arms(tf, dropout, batch, seq_length, rounds):
    from bert_mgpu.model import execution, modeling
    from bert_mgpu.model.bert_config import BertConfig
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    tf.random.set_seed(1)
    model = modeling.BertModel(config)
    variables = list(model.named_variables().values())
    rng = np.random.RandomState(0)
    ids = tf.constant(rng.randint(5, 30000, size=(batch, seq_length)), tf.int32)
    lengths = rng.randint(seq_length // 2, seq_length + 1, size=(batch, 1))
    mask = tf.constant((np.arange(seq_length)[None] < lengths).astype(np.int32))
    target = tf.constant(rng.randn(batch, config.hidden_size).astype(np.float32))

    def make(compiled_layers, whole):
        def step(ids, mask, update):
            stream = execution.DropoutStream(7, update, 0, batch, seq_length=seq_length,
                                             full_length=seq_length)
            with execution.entered(stream=stream, compile_layers=compiled_layers):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(model(ids, mask, training=True).pooled_output * target)
                grads = tape.gradient(loss, variables)
            return [loss] + [tf.convert_to_tensor(g) for g in grads]
        return tf.function(step, autograph=False, jit_compile=whole)

    arms = {"uncompiled": make(False, False), "--xla_layers": make(True, False),
            "whole pass compiled": make(False, True)}
    return alternate(arms, (ids, mask, tf.constant(5, tf.int64)), rounds)


def matmul_arms(tf, rows, rounds):
    h, i = 384, 1536
    x = tf.random.normal([rows, h])
    square = tf.random.normal([h, h]) * 0.05
    up, down = tf.random.normal([h, i]) * 0.05, tf.random.normal([i, h]) * 0.05

    def chain(x):
        for _ in range(6):
            for _ in range(4):  # Q, K, V and the attention output
                x = tf.matmul(x, square)
            x = tf.matmul(tf.matmul(x, up), down) * 0.5
        return x

    flops = 6 * (4 * 2 * rows * h * h + 2 * 2 * rows * h * i)
    ms = alternate({"TensorFlow's kernels": tf.function(chain),
                    "XLA": tf.function(chain, jit_compile=True)}, (x,), rounds)
    return {name: (t, flops / (t / 1000.0) / 1e9) for name, t in ms.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no_write", action="store_true")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    import tensorflow as tf
    started = time.strftime("%Y-%m-%d %H:%M")
    rows = []
    for dropout in (0.1, 0.0):
        ms = encoder_arms(tf, dropout, args.batch, args.seq_length, args.rounds)
        base = ms["uncompiled"]
        for name, t in ms.items():
            rows.append(f"| encoder forward + backward, dropout {dropout} | {name} | "
                        f"{t:.1f} ms | {t / base:.3f}x |")
    mm = matmul_arms(tf, args.batch * args.seq_length, args.rounds)
    base = mm["TensorFlow's kernels"][0]
    for name, (t, rate) in mm.items():
        rows.append(f"| matmul chain, {args.batch * args.seq_length} rows | {name} | "
                    f"{t:.1f} ms ({rate:.0f} GFLOP/s) | {t / base:.3f}x |")
    text = "\n".join([
        "### XLA fusion on this CPU: --xla_layers and whole-pass XLA (issue 33)",
        "",
        f"Command: `.venv/bin/python bench/xla_fusion.py --batch {args.batch} --seq_length "
        f"{args.seq_length} --rounds {args.rounds}` ({started}).",
        f"Machine: {machine()}.",
        "",
        "One process, the arms alternating call by call, medians over the rounds; "
        "all-MiniLM-L6-v2's shape with random weights (bench/xla_fusion.py's docstring).",
        "",
        "| measurement | arm | median | / first arm |",
        "|---|---|---:|---:|",
        *rows,
    ])
    print(text)
    if not args.no_write:
        write_section("xla-fusion", text)


if __name__ == "__main__":
    main()
