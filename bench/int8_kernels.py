"""Which int8 matrix product TensorFlow's CPU kernels run fast: the probe behind
export_saved_model.py --quantize=int8's choice of LiteRT (serving/int8.py).

    .venv/bin/python bench/int8_kernels.py [--rows 1,25,512]

One dense layer pair of all-MiniLM-L6-v2's feed-forward shapes ([rows, 384] x [384, 1536] x
[1536, 384], random weights), chained 10 times in one tf.function, per matrix product:
  - fp32: tf.matmul (oneDNN).
  - bf16: tf.matmul on bfloat16 (reference only: a different precision).
  - int8 BatchMatMulV3: activations quantized per tensor, int8 x int8 -> int32, rescaled.
  - int8 oneDNN: QuantizedMatMulWithBiasAndDequantize (quint8 activations, qint8 weights).
  - int8 LiteRT: the same layers converted with dynamic-range quantization, XNNPACK.
Prints microseconds per matrix product (median of 200 calls) and the relative error of each
int8 arm against fp32. Indicative on a shared machine: compare the arms of one run.
"""

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

PAIRS = 10


def timed(f, calls=200):
    f()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times) / (2 * PAIRS)


def per_channel(w):
    scale = np.abs(w).max(axis=0) / 127
    return np.round(w / scale).astype(np.int8), scale.astype(np.float32)


def arms(w1, w2):
    """name -> tf.function of x [rows, 384] (10 chained layer pairs)."""
    f1, f2 = tf.constant(w1), tf.constant(w2)
    b1, b2 = tf.cast(f1, tf.bfloat16), tf.cast(f2, tf.bfloat16)
    (q1, s1), (q2, s2) = per_channel(w1), per_channel(w2)

    def bmm(y, q, s):
        amax = tf.maximum(tf.reduce_max(tf.abs(y)), 1e-6)
        yq = tf.cast(tf.round(y * (127.0 / amax)), tf.int8)
        acc = tf.raw_ops.BatchMatMulV3(x=yq, y=tf.constant(q), Tout=tf.int32)
        return tf.cast(acc, tf.float32) * (amax / 127.0 * s)

    def onednn(y, q, s):
        yq, low, high = tf.quantization.quantize(y, tf.reduce_min(y), tf.reduce_max(y),
                                                 tf.quint8, mode="MIN_FIRST")
        # One weight range per tensor: the op takes no per-channel scales.
        limit = float(127 * s.max())
        return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=yq, b=tf.bitcast(tf.constant(q), tf.qint8), bias=tf.zeros([q.shape[1]]),
            min_a=low, max_a=high, min_b=-limit, max_b=limit, min_freezed_output=-1.0,
            max_freezed_output=1.0, Toutput=tf.float32, input_quant_mode="MIN_FIRST")

    layers = {"fp32": lambda y: tf.matmul(tf.matmul(y, f1), f2),
              "bf16": lambda y: tf.cast(tf.matmul(tf.matmul(tf.cast(y, tf.bfloat16), b1), b2),
                                        tf.float32),
              "int8 BatchMatMulV3": lambda y: bmm(bmm(y, q1, s1), q2, s2),
              "int8 oneDNN": lambda y: onednn(onednn(y, q1, s1), q2, s2)}

    def chained(layer):
        def run(y):
            for _ in range(PAIRS):
                y = layer(y)
            return y
        return tf.function(run, input_signature=[tf.TensorSpec([None, 384], tf.float32)])

    return {name: chained(layer) for name, layer in layers.items()}


def litert(function, rows):
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    interpreter = tf.lite.Interpreter(model_content=converter.convert())
    index = interpreter.get_input_details()[0]["index"]
    interpreter.resize_tensor_input(index, [rows, 384])
    interpreter.allocate_tensors()
    out = interpreter.get_output_details()[0]["index"]

    def run(x):
        interpreter.set_tensor(index, x)
        interpreter.invoke()
        return interpreter.get_tensor(out)
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,25,512")
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    w1 = (rng.randn(384, 1536) / 20).astype(np.float32)
    w2 = (rng.randn(1536, 384) / 40).astype(np.float32)
    functions = arms(w1, w2)
    for rows in [int(r) for r in args.rows.split(",")]:
        x = rng.randn(rows, 384).astype(np.float32)
        reference = functions["fp32"](tf.constant(x)).numpy()
        scale = np.abs(reference).max()
        runs = {name: (lambda f=f: f(tf.constant(x)).numpy()) for name, f in functions.items()}
        lite = litert(functions["fp32"], rows)
        runs["int8 LiteRT"] = lambda: lite(x)
        for name, run in runs.items():
            error = np.abs(run() - reference).max() / scale
            print(f"rows {rows:4d} {name:20s} {timed(run):9.1f} us per product, "
                  f"max error {error:.1e} of the largest output")


if __name__ == "__main__":
    main()
