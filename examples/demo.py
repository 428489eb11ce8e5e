#!/usr/bin/env python
"""`make demo`: the BERT workflow end to end on data shipped in the repo, on this machine's CPU.

1. Tokenizes the whole King James Bible (data/pretraining) with Google's WordPiece algorithm
   (our fast exact implementation) and reports tokens/s.
2. create_pretraining_data.py: the KJV -> Google-format pretraining TFRecords.
3. run_pretraining.py --n_gpus=2: pretrains a small BERT with two towers (logical CPU devices
   here, GPUs on a GPU machine), then evaluates it (eval_results.txt).
4. extract_features.py on the first verses of Genesis with the pretrained checkpoint.
(Fine-tuning with run_classifier_mgpu.py joins when it lands: issue 5.)
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


def run_script(script, *args):
    """Runs one of the repo's scripts as a user would, showing the command."""
    cmd = [sys.executable, os.path.join(REPO, script), *args]
    print("$", " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd[1:]),
          flush=True)
    subprocess.run(cmd, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


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

    step("2. create_pretraining_data.py on the KJV (128 tokens, 20 predictions)")
    corpus = os.path.join(OUT, "kjv.txt")
    with gzip.open(KJV, "rt", encoding="utf-8") as src, open(corpus, "w", encoding="utf-8") as dst:
        dst.write(src.read())
    records = os.path.join(OUT, "kjv.seq128.tfrecord")
    run_script("create_pretraining_data.py", f"--input_file={corpus}",
               f"--output_file={records}", f"--vocab_file={VOCAB}", "--do_lower_case=true",
               "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=1",
               "--random_seed=12345")

    step("3. run_pretraining.py with 2 towers, then eval")
    model_dir = os.path.join(OUT, "pretraining_output")
    config_file = os.path.join(OUT, "bert_config_small.json")
    with open(config_file, "w") as f:
        json.dump({"vocab_size": len(tokenizer.vocab), "hidden_size": 128,
                   "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
                   "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                   "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
                   "type_vocab_size": 2, "initializer_range": 0.02}, f, indent=2)
    run_script("run_pretraining.py", f"--bert_config_file={config_file}",
               f"--input_file={records}", f"--output_dir={model_dir}", "--do_train=true",
               "--do_eval=true", "--train_batch_size=16", "--n_gpus=2",
               "--max_seq_length=128", "--max_predictions_per_seq=20", "--num_train_steps=100",
               "--num_warmup_steps=10", "--learning_rate=1e-3", "--save_checkpoints_steps=50",
               "--log_every_n_steps=20", "--eval_batch_size=32", "--max_eval_steps=20")
    with open(os.path.join(model_dir, "eval_results.txt")) as f:
        print(f"{model_dir}/eval_results.txt:\n" + f.read())

    step("4. extract_features.py on the first verses of Genesis")
    input_file = os.path.join(OUT, "genesis_1.txt")
    with open(input_file, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:4]) + "\n" + f"{lines[4]} ||| {lines[5]}\n")
    output_file = os.path.join(OUT, "genesis_1.features.jsonl")
    run_script("extract_features.py", f"--input_file={input_file}",
               f"--output_file={output_file}", f"--vocab_file={VOCAB}",
               f"--bert_config_file={config_file}", f"--init_checkpoint={model_dir}",
               "--layers=-1,-2", "--max_seq_length=64", "--batch_size=8")
    with open(output_file, encoding="utf-8") as f:
        first = json.loads(f.readline())
    print(f"{output_file}: one JSON line per input line; line 0 has "
          f"{len(first['features'])} tokens x {len(first['features'][0]['layers'])} layers x "
          f"{len(first['features'][0]['layers'][0]['values'])} values")
    print("\nDemo finished. Outputs are in", OUT)


if __name__ == "__main__":
    main()
