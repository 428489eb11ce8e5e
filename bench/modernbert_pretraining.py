"""ModernBERT pretraining throughput: packed records with document_ids against the same packed
records without them (attention across documents), through run_pretraining.py itself.

Usage (an idle machine; each arm is its own run_pretraining.py process, one after the other):
  .venv/bin/python bench/modernbert_pretraining.py [--length=512 --layers=4 --hidden=256
    --heads=4 --intermediate=384 --batch=8 --steps=30 --verses=20000] [--write]

Data: the KJV verses the repo ships, 7 verses a document, a ModernBERT-shaped byte-level BPE
tokenizer.json trained on them by `tokenizers` (tests/oracles/hf_bpe_tokenizer.py, vocabulary
--vocab), create_pretraining_data.py --pack_sequences [--document_ids] --dynamic_masking.
Model: ModernBERT's keys (window 128, global every 3rd layer, dropout 0.1) at the given shape.
Trainer: run_pretraining.py --no_next_sentence --dynamic_masking --masked_lm_prob=0.3
--lr_schedule=wsd, 1 tower. Reported: the median global examples/s of the step lines after
the first third of the run (tracing excluded), per arm, and their ratio. --write puts the table
into docs/benchmarks.md ("ModernBERT pretraining: packed documents").
"""

import argparse
import datetime
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)

REPO = _common.REPO
KJV = os.path.join(REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")


def _run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"{os.path.basename(cmd[1])} failed:\n{proc.stderr[-3000:]}")
    return proc


def _data(args, work):
    """(tokenizer.json, {arm: records}) made in `work`."""
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        verses = [f.readline().strip() for _ in range(args.verses)]
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("".join(v + ("\n\n" if i % 7 == 6 else "\n") for i, v in enumerate(verses)))
    tokenizer = os.path.join(work, "tokenizer.json")
    _run([sys.executable, os.path.join(REPO, "tests", "oracles", "hf_bpe_tokenizer.py"),
          "train", tokenizer, str(args.vocab), corpus])
    records = {}
    for arm, extra in (("document_ids", ["--document_ids"]), ("across", [])):
        records[arm] = os.path.join(work, f"{arm}.tfrecord")
        _run([sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
              f"--input_file={corpus}", f"--output_file={records[arm]}",
              f"--vocab_file={tokenizer}", f"--max_seq_length={args.length}",
              "--pack_sequences", "--dynamic_masking", "--dupe_factor=1", *extra])
    return tokenizer, records


def _config(args, tokenizer, path):
    with open(tokenizer, encoding="utf-8") as f:
        vocab_size = 1 + max(t["id"] for t in json.load(f)["added_tokens"])
    config = {"vocab_size": vocab_size, "hidden_size": args.hidden,
              "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
              "intermediate_size": 2 * args.intermediate, "hidden_act": "gelu_exact",
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
              "max_position_embeddings": max(512, args.length), "type_vocab_size": 0,
              "pre_layer_norm": True, "use_bias": False, "gated_ffn": True,
              "position_embedding_type": "rope", "rope_theta": 160000.0,
              "local_rope_theta": 10000.0, "local_attention_window": 128,
              "global_attention_every_n_layers": 3, "layer_norm_eps": 1e-5,
              "layer_norm_bias": False, "first_layer_attention_norm": False,
              "head_bias": False, "classifier_pooling": "cls"}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path


def _examples_per_second(args, config, tokenizer, records, output_dir):
    predictions = int(round(args.length * 0.3)) + 1
    proc = _run([sys.executable, os.path.join(REPO, "run_pretraining.py"),
                 f"--bert_config_file={config}", f"--input_file={records}",
                 f"--output_dir={output_dir}", "--do_train", "--no_next_sentence",
                 f"--max_seq_length={args.length}", f"--max_predictions_per_seq={predictions}",
                 "--dynamic_masking", "--masked_lm_prob=0.3", f"--vocab_file={tokenizer}",
                 "--lr_schedule=wsd", "--num_warmup_steps=2",
                 f"--num_decay_steps={args.steps // 3}", f"--num_train_steps={args.steps}",
                 "--learning_rate=8e-4", f"--train_batch_size={args.batch}", "--n_gpus=1",
                 "--log_every_n_steps=1", f"--save_checkpoints_steps={args.steps}"])
    rates = [float(r) for r in re.findall(r"([0-9.]+) examples/s \(global\)", proc.stderr)]
    return statistics.median(rates[len(rates) // 3:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("length", 512), ("layers", 4), ("hidden", 256), ("heads", 4),
                          ("intermediate", 384), ("batch", 8), ("steps", 30),
                          ("verses", 20000), ("vocab", 8000)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        tokenizer, records = _data(args, work)
        config = _config(args, tokenizer, os.path.join(work, "bert_config.json"))
        rates = {arm: _examples_per_second(args, config, tokenizer, path,
                                           os.path.join(work, f"out_{arm}"))
                 for arm, path in records.items()}
    command = "python bench/modernbert_pretraining.py " + " ".join(sys.argv[1:])
    table = "\n".join([
        "## ModernBERT pretraining: packed documents",
        "",
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {_common.machine()}"
        f"; `{command}`",
        "",
        "| packed records | examples/s (global) |",
        "|---|---|",
        *(f"| {arm} | {rate:.1f} |" for arm, rate in rates.items()),
        "",
        f"document_ids / across: {rates['document_ids'] / rates['across']:.3f}"])
    print(table)
    if args.write:
        _common.write_section("ModernBERT pretraining: packed documents", table)


if __name__ == "__main__":
    main()
