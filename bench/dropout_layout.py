"""Cost of position-keyed dropout drawn over the full max_seq_length layout of a cut batch.

Run by hand (under a minute on 2 cores):

    .venv/bin/python bench/dropout_layout.py

`execution.DropoutStream.dropout` draws a trimmed batch's random numbers over the records'
padded layout (`full_length`) and slices the cut positions out, so that a mask never depends on
where the batch was cut. This times one encoder layer's four dropouts (3 on hidden states
[B*L, H], 1 on attention probabilities [B, N, L, L]) of a tower of 16 examples cut to 32
positions, MiniLM's widths (H=384, N=12), forward, with full_length 32 (nothing to slice), 64
and 128; the calls alternate. Prints the median milliseconds of each.

Then the generator alone, for the values of one such layer at full_length 128 (5.5M): Philox
float32 uniforms (`StatelessRandomUniformV2`, what the masks were drawn from before the 16-bit
draws) against half as many 32-bit Philox words (`StatelessRandomUniformFullIntV2`, two 16-bit
draws each, what `DropoutStream` draws now).
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tensorflow as tf  # noqa: E402

from bert_mgpu.model import execution, modeling  # noqa: E402

B, L, H, N = 16, 32, 384, 12


def make(full_length, hidden, probs):
    @tf.function
    def layer_dropouts(step):
        with execution.entered(stream=execution.DropoutStream(
                1, step, tf.constant(0, tf.int64), tf.constant(B, tf.int64), L, full_length)):
            outs = [modeling.dropout(hidden, 0.1, True, seq_view=(modeling.SEQ, H))
                    for _ in range(3)]
            outs.append(modeling.dropout(probs, 0.1, True,
                                         seq_view=(N, modeling.SEQ, modeling.SEQ)))
        return tf.add_n([tf.reduce_sum(o) for o in outs])
    return layer_dropouts


def median_ms(fns, rounds, calls):
    """{name: median milliseconds per call}: each fn called with a fresh int64 step, the fns
    alternating in every round (a slow phase of the host hits all alike); traced first."""
    for fn in fns.values():
        fn(tf.constant(0, tf.int64)).numpy()
    times = {name: [] for name in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for i in range(calls):
                out = fn(tf.constant(r * calls + i + 1, tf.int64))
            out.numpy()
            times[name].append((time.perf_counter() - start) / calls * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def generators(rounds=10, calls=5):
    values = B * 4 * L * (3 * H + N * 4 * L)
    key = tf.constant([1], tf.uint64)

    def counter(step):
        return tf.stack([tf.constant(0, tf.uint64), tf.cast(step, tf.uint64)])

    @tf.function
    def uniforms(step):
        return tf.reduce_max(tf.raw_ops.StatelessRandomUniformV2(
            shape=[values], key=key, counter=counter(step), alg=1))

    @tf.function
    def words(step):
        return tf.reduce_max(tf.raw_ops.StatelessRandomUniformFullIntV2(
            shape=[values // 2], key=key, counter=counter(step), alg=1, dtype=tf.uint32))

    fns = {"float32 uniforms": uniforms, "32-bit words (two 16-bit draws each)": words}
    for name, ms in median_ms(fns, rounds, calls).items():
        print(f"Philox {name} for {values} values: {ms:.2f} ms (with a max over them)")


def main(rounds=30, calls=5):
    hidden, probs = tf.random.normal([B * L, H]), tf.random.normal([B, N, L, L])
    fns = {full: make(full, hidden, probs) for full in (L, 2 * L, 4 * L)}
    for full, ms in median_ms(fns, rounds, calls).items():
        print(f"full_length {full}: {ms:.2f} ms for one layer's 4 dropouts "
              f"({B} examples cut to {L} positions)")

if __name__ == "__main__":
    main()
    generators()
