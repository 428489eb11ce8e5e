"""Where a batch-1 request's time goes (issue 52): the parts of one request through our fp32
SavedModel and our int8 export, before and after a change, measured A/B in one process.

Run by hand with the project's venv (a shared machine is fine: the arms alternate text by text
and the figures are medians of CPU time per call, all threads of the process counted):

    .venv/bin/python bench/batch1_latency.py --texts_file TEXTS.json \\
        --fp32 before=EXPORT_A/1 --fp32 after=EXPORT_B/1 --int8 EXPORT_INT8/1 [--texts 150]

`TEXTS.json`: a JSON list of raw texts (bench/serving_int8.py's work directory has one,
texts.json). Each text is one request of batch 1. Parts timed, per arm:

  - fp32: `serving_default` (the whole request), `tokenize` (the signature alone), `serve_ids`
    on the ids cut to the text's length (the encoder and head alone).
  - int8 (serving/int8_runner.py), tokenizing with its Python tokenizer and with the
    export's `tokenize` signature (the runner before issue 52): the whole call, the
    tokenization alone, `predict_ids` (the LiteRT model alone).

It prints CPU and wall medians in ms and the largest difference of the probabilities between
the fp32 arms (against the first) and between the int8 runner's two tokenizers (0: the ids are
the same).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

# This checkout's package, not an installed one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDS = ("input_ids", "input_mask", "segment_ids")


def _fp32_parts(tf, signatures, text):
    """name -> call returning the probabilities or ids, for one text."""
    features = signatures["tokenize"](text_a=tf.constant([text]))
    length = int(features["input_mask"].numpy().sum())
    ids = {k: features[k][:, :length] for k in IDS}
    return {"serving_default": lambda: signatures["serving_default"](
                text_a=tf.constant([text]))["probabilities"].numpy(),
            "tokenize": lambda: signatures["tokenize"](text_a=tf.constant([text])),
            "serve_ids": lambda: signatures["serve_ids"](**ids)["probabilities"].numpy()}


def _int8_parts(model, text, python):
    """The runner's parts, tokenizing in Python (`python`) or with the signature."""
    tokenizer = model.python_tokenizer

    def with_tokenizer(fn):
        def run():
            model.python_tokenizer = tokenizer if python else None
            try:
                return fn()
            finally:
                model.python_tokenizer = tokenizer
        return run

    ids = model._features([text])
    length = int(ids[1].sum())
    return {"call": with_tokenizer(lambda: model([text])["probabilities"]),
            "tokenize": with_tokenizer(lambda: model._features([text])),
            "predict_ids": lambda: model.predict_ids(*(x[:, :length] for x in ids))}


def _timed(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts_file", required=True)
    parser.add_argument("--texts", type=int, default=150)
    parser.add_argument("--fp32", action="append", default=[], help="NAME=EXPORT_DIR/VERSION")
    parser.add_argument("--int8", help="an int8 export's EXPORT_DIR/VERSION")
    args = parser.parse_args()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from bert_mgpu.serving.int8_runner import Int8Classifier

    with open(args.texts_file, encoding="utf-8") as f:
        texts = json.load(f)[:args.texts]
    fp32 = {name: tf.saved_model.load(path).signatures
            for name, path in (a.split("=", 1) for a in args.fp32)}
    int8 = Int8Classifier(args.int8) if args.int8 else None
    times, diffs = {}, {}
    for warm_up in (True, False):
        for i, text in enumerate(texts):
            parts = {(name, part): fn for name, sig in fp32.items()
                     for part, fn in _fp32_parts(tf, sig, text).items()}
            if int8 is not None:
                for arm, python in (("int8 python tokenizer", True),
                                    ("int8 tokenize signature", False)):
                    parts.update({(arm, part): fn
                                  for part, fn in _int8_parts(int8, text, python).items()})
            keys = list(parts) if i % 2 == 0 else list(parts)[::-1]
            outs = {}
            for key in keys:
                outs[key], cpu, wall = _timed(parts[key])
                if not warm_up:
                    times.setdefault(key, []).append((cpu, wall))
            if warm_up:
                continue
            names = list(fp32)
            for name in names[1:]:
                diff = np.abs(outs[(name, "serving_default")]
                              - outs[(names[0], "serving_default")]).max()
                diffs[f"{name} vs {names[0]}"] = max(diffs.get(f"{name} vs {names[0]}", 0), diff)
            if int8 is not None:
                diff = np.abs(outs[("int8 python tokenizer", "call")]
                              - outs[("int8 tokenize signature", "call")]).max()
                diffs["int8 tokenizers"] = max(diffs.get("int8 tokenizers", 0), diff)
    print(f"{len(texts)} texts, batch 1, arms alternating; medians of ms per call")
    for (arm, part), values in times.items():
        cpu, wall = (1e3 * np.median([v[k] for v in values]) for k in (0, 1))
        print(f"{arm:26s} {part:16s} CPU {cpu:7.2f}  wall {wall:7.2f}")
    for name, diff in diffs.items():
        print(f"max |probability difference| {name}: {diff:.2e}")


if __name__ == "__main__":
    main()
