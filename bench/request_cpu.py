"""Where one request's CPU goes at batch 1: the fp32 SavedModel and the int8 export, stage by
stage, in CPU seconds of this process (user + sys over all its threads, `time.process_time`),
not wall-clock time, so that other jobs on a shared machine count for little.

    .venv/bin/python bench/request_cpu.py --work DIR [--texts FILE] [--requests 300]
    .venv/bin/python bench/request_cpu.py --fp32 EXPORT_FP32/1 --int8 EXPORT_INT8/1 ...

Both exports come from the same classifier run (export_saved_model.py, without and with
--quantize=int8); with --work, all-MiniLM-L6-v2 with a seeded 2-way head, as
bench/serving_int8.py without --run_dir (made in DIR once). Each request is one text of FILE
(a TSV whose first column is the text, or one text a line), in file order, each stage timed
on its own after a warm-up pass over the same texts:

- fp32: `serving_default` (the whole request), `tokenize` (the in-graph tokenizer alone, as a
  signature call), `serve_ids` on the tokenized ids cut to the text (the encoder and head, as a
  signature call), and a signature call's own overhead: `tokenize` on an empty batch.
- int8: the runner's whole `__call__`, its `tokenize` signature call, the LiteRT resize and
  allocation when the length changes, and `set_tensor` + `invoke` (the encoder).

Prints one table (median and mean CPU ms per request of each stage).
"""

import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _texts(path, limit):
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if lines and "\t" in lines[0]:
        lines = [line.split("\t")[0] for line in lines[1:]]
    return lines[:limit]


def _cpu(fn):
    """(CPU seconds of this process over `fn()`, its value)."""
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


def fp32_stages(export_dir, texts):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    sig = tf.saved_model.load(export_dir).signatures
    stages = {"whole request": [], "tokenize (signature)": [], "serve_ids (signature)": [],
              "empty signature call": []}
    empty = tf.constant([], tf.string)
    for warm in (True, False):
        for text in texts:
            batch = tf.constant([text])
            whole, _ = _cpu(lambda: sig["serving_default"](text_a=batch))
            tok, ids = _cpu(lambda: sig["tokenize"](text_a=batch))
            n = max(int(np.sum(ids["input_mask"].numpy())), 1)
            cut = {k: v[:, :n] for k, v in ids.items()}
            enc, _ = _cpu(lambda: sig["serve_ids"](**cut))
            call, _ = _cpu(lambda: sig["tokenize"](text_a=empty))
            if not warm:
                for name, value in zip(stages, (whole, tok, enc, call)):
                    stages[name].append(value)
    return stages


def int8_stages(export_dir, texts):
    import importlib.util

    import numpy as np
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location(
        "int8_runner", os.path.join(REPO, "bert_mgpu", "serving", "int8_runner.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    model = runner.load(export_dir)
    lite = model._model
    stages = {"whole request": [], "tokenize (signature)": [], "LiteRT resize": [],
              "LiteRT invoke": []}
    for warm in (True, False):
        for text in texts:
            whole, _ = _cpu(lambda: model([text]))
            tok, ids = _cpu(lambda: model._tokenize(text_a=tf.constant([text])))
            arrays = [ids[k].numpy() for k in ("input_ids", "input_mask", "segment_ids")]
            n = max(int(arrays[1].sum()), 1)
            arrays = [np.ascontiguousarray(a[:, :n], np.int32) for a in arrays]
            interpreter = lite._interpreter

            def resize():
                for index in lite._inputs.values():
                    interpreter.resize_tensor_input(index, arrays[0].shape)
                interpreter.allocate_tensors()

            # The runner resizes only when the length changes: time it as a change.
            lite._shape = None
            size, _ = _cpu(resize)
            lite._shape = arrays[0].shape

            def invoke():
                for array, index in zip(arrays, lite._inputs.values()):
                    interpreter.set_tensor(index, array)
                interpreter.invoke()

            run, _ = _cpu(invoke)
            if not warm:
                for name, value in zip(stages, (whole, tok, size, run)):
                    stages[name].append(value)
    return stages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp32")
    parser.add_argument("--int8")
    parser.add_argument("--work", help="where the MiniLM exports are made (without --fp32, "
                                       "--int8)")
    parser.add_argument("--texts", default=None)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import serving as fp32_bench

    texts = _texts(args.texts or fp32_bench.DEFAULT_DATA, args.requests)
    if not (args.fp32 and args.int8):
        import serving_int8

        targets, _ = serving_int8.prepare(args.work, None, onnx=False)
        args.fp32, args.int8 = targets["ours_fp32"], targets["ours_int8"]
    for name, stages in (("fp32", fp32_stages(args.fp32, texts)),
                         ("int8", int8_stages(args.int8, texts))):
        print(f"\n{name}: CPU ms per request ({len(texts)} requests of one text)")
        print("| stage | median | mean |")
        print("|---|---:|---:|")
        for stage, values in stages.items():
            print(f"| {stage} | {1e3 * statistics.median(values):.2f} | "
                  f"{1e3 * statistics.fmean(values):.2f} |")


if __name__ == "__main__":
    main()
