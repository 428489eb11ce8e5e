#!/usr/bin/env python
"""`make demo`: runs what bert_mgpu can do today, end to end, on data shipped in the repo.

1. Tokenizes the whole King James Bible (data/pretraining) with Google's WordPiece algorithm
   (our fast exact implementation) and reports tokens/s.
2. Builds a small BERT (randomly initialised: pretraining lands with the tower-trainer issue) and
   writes it in Google's checkpoint layout (bert_config.json, bert_model.ckpt.*, vocab.txt).
3. Runs extract_features.py on the first verses of Genesis, as a user of Google's repo would, and
   shows where the JSON lines are.
Outputs go to demo_output/.
"""

import gzip
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "demo_output")
VOCAB = os.path.join(REPO, "data", "vocab", "bert_uncased_vocab.txt")
KJV = os.path.join(REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")


def step(title):
    print(f"\n=== {title}", flush=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    sys.path.insert(0, REPO)
    from bert_mgpu import tokenization

    step("1. Tokenize the King James Bible (Google's WordPiece, uncased vocab)")
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    start = time.perf_counter()
    tokens = tokenizer.tokenize_batch(lines)
    seconds = time.perf_counter() - start
    n_tokens = sum(map(len, tokens))
    print(f"{len(lines):,} lines -> {n_tokens:,} tokens in {seconds:.2f} s "
          f"({n_tokens / seconds:,.0f} tokens/s)")
    print("Genesis 1:1 ->", " ".join(tokens[0]))

    step("2. A small BERT in Google's checkpoint layout (random weights)")
    import tensorflow as tf
    from bert_mgpu import checkpoint, modeling
    from bert_mgpu.config import BertConfig

    model_dir = os.path.join(OUT, "tiny_bert")
    os.makedirs(model_dir, exist_ok=True)
    config = BertConfig(vocab_size=len(tokenizer.vocab), hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=512,
                        max_position_embeddings=128, type_vocab_size=2)
    config.to_json_file(os.path.join(model_dir, "bert_config.json"))
    tf.random.set_seed(12345)
    model = modeling.BertModel(config)
    checkpoint.write_bundle(os.path.join(model_dir, "bert_model.ckpt"), model.named_variables())
    with open(VOCAB, "rb") as src, open(os.path.join(model_dir, "vocab.txt"), "wb") as dst:
        dst.write(src.read())
    n_params = sum(int(v.shape.num_elements()) for v in model.named_variables().values())
    print(f"{model_dir}: {len(model.named_variables())} variables, {n_params:,} parameters")

    step("3. extract_features.py on the first verses of Genesis")
    input_file = os.path.join(OUT, "genesis_1.txt")
    with open(input_file, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:4]) + "\n" + f"{lines[4]} ||| {lines[5]}\n")
    output_file = os.path.join(OUT, "genesis_1.features.jsonl")
    cmd = [sys.executable, os.path.join(REPO, "extract_features.py"),
           f"--input_file={input_file}", f"--output_file={output_file}",
           f"--vocab_file={model_dir}/vocab.txt",
           f"--bert_config_file={model_dir}/bert_config.json",
           f"--init_checkpoint={model_dir}/bert_model.ckpt",
           "--layers=-1,-2", "--max_seq_length=64", "--batch_size=8"]
    print("$", " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run(cmd, check=True, env=env)
    with open(output_file, encoding="utf-8") as f:
        first = json.loads(f.readline())
    print(f"{output_file}: one JSON line per input line; line 0 has "
          f"{len(first['features'])} tokens x {len(first['features'][0]['layers'])} layers x "
          f"{len(first['features'][0]['layers'][0]['values'])} values")
    print("\nDemo finished. Outputs are in", OUT)


if __name__ == "__main__":
    main()
