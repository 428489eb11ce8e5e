"""Serving speed of the in-graph byte-level BPE (serving/bpe.py) against Hugging Face
`tokenizers` (Rust), text in, ids out; for an idle machine (timings on a shared one mean little).

Run by hand with the project's venv:

    .venv/bin/python bench/serving_bpe.py --tokenizer_json PATH/tokenizer.json

`--tokenizer_json`: a ModernBERT tokenizer.json (answerdotai/ModernBERT-base's, downloaded
elsewhere), or one trained by tests/oracles/hf_bpe_tokenizer.py. Texts: Pang & Lee test.tsv
(../shared/material) and KJV verses (data/), as they come. Arms, after one warm-up pass each:
  - ours: `ServingTokenizer(tokenizer.json)`'s traced ids function (the ops a SavedModel runs),
    texts/s at batch 32 and p50/p99 latency at batch 1;
  - tokenizers: `Tokenizer.encode_batch` (Rust, all cores) at batch 32 and `encode` at batch 1.
Every text's ids are compared between the arms (the count of differing texts is printed; it
must be 0). The end-to-end figure (SavedModel of a ModernBERT classifier vs transformers'
`ModernBertForSequenceClassification` with its tokenizer, raw text in) is bench/serving.py's
method applied to a converted ModernBERT run; the tokenizer's share of it is what this measures.
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _texts(limit):
    texts = []
    panglee = os.path.join(os.path.dirname(REPO), "shared", "material", "classification",
                           "en_panglee_sentence_polarity", "test.tsv")
    if not os.path.exists(panglee):
        panglee = "/work/shared/material/classification/en_panglee_sentence_polarity/test.tsv"
    with open(panglee, encoding="utf-8") as f:
        texts += [line.rstrip("\n").split("\t")[-1] for line in f][1:]
    with gzip.open(os.path.join(REPO, "data", "pretraining",
                                "kjv_bible_one_verse_per_line.txt.gz"), "rt",
                   encoding="utf-8") as f:
        texts += [line.rstrip("\n") for _, line in zip(range(limit), f)]
    return texts[:limit]


def _throughput(run, texts, batch):
    run(texts[:batch])
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        run(texts[i:i + batch])
    return len(texts) / (time.perf_counter() - start)


def _latency(run, texts, count):
    run(texts[:1])
    times = []
    for text in texts[:count]:
        start = time.perf_counter()
        run([text])
        times.append(time.perf_counter() - start)
    return np.percentile(times, 50) * 1e3, np.percentile(times, 99) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer_json", required=True)
    parser.add_argument("--texts", type=int, default=4000)
    parser.add_argument("--latency_texts", type=int, default=300)
    args = parser.parse_args()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel

    from bert_mgpu.serving.tokenizer import ServingTokenizer

    texts = _texts(args.texts)
    start = time.perf_counter()
    graph = ServingTokenizer(args.tokenizer_json)._traced_ids  # pylint: disable=protected-access
    print(f"built the graph tokenizer in {time.perf_counter() - start:.1f} s")
    library = Tokenizer.from_file(args.tokenizer_json)
    arms = {"ours": lambda batch: graph(tf.constant(batch)).to_list(),
            "tokenizers": lambda batch: [e.ids for e in library.encode_batch(
                batch, add_special_tokens=False)]}
    ours, theirs = arms["ours"](texts), arms["tokenizers"](texts)
    print(f"texts whose ids differ: {sum(a != b for a, b in zip(ours, theirs))} of {len(texts)}")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    for name, run in arms.items():
        rate = _throughput(run, texts, 32)
        p50, p99 = _latency(run, texts, args.latency_texts)
        print(f"{name}: {rate:.0f} texts/s at batch 32; batch 1 p50 {p50:.3f} ms, "
              f"p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
