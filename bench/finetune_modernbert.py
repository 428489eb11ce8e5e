"""Fine-tuning a ModernBERT classifier: run_classifier.py against Hugging Face's
`ModernBertForSequenceClassification`, the same weights, data, batch and length.

Usage (an idle machine; the oracle venv holds transformers):
  python bench/finetune_modernbert.py [--seq=512 --batch=8 --steps=30 --layers=22 --hidden=768
    --heads=12 --intermediate=1152] [--max_isa=avx2] [--write]

A random ModernBERT-base-shaped classifier (window 128, global every 3rd layer, dropout 0) is
built and saved by transformers, with a byte-level BPE tokenizer.json trained on the KJV verses
(tests/oracles/hf_bpe_tokenizer.py), and converted by convert_hf_checkpoint.py. Both arms train
on the same tsv of KJV verses joined to `--seq` tokens, fp32, one CPU process each:
- ours: run_classifier.py --do_train (AdamW, warmup 10 %, clip 1.0), the global examples/s of
  its last log line (the first update, tracing included, is left out by the script);
- peer: transformers in eager PyTorch (sdpa attention), torch.optim.AdamW with the same
  schedule and clipping, the examples/s of the updates after the first.
--write puts the table into docs/benchmarks.md ("ModernBERT fine-tuning"). Not run for timing
yet: a smoke run on a loaded machine (1 layer, 64 tokens) only checked that both arms run.
"""

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)

ORACLE_PYTHON = os.environ.get("BERT_MGPU_ORACLE_PYTHON") or os.path.join(
    _common.REPO, ".venv-oracle", "bin", "python")
ORACLES = os.path.join(_common.REPO, "tests", "oracles")
KJV = os.path.join(_common.REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")

PEER = r'''
import json, sys, time
import numpy as np, torch
from tokenizers import Tokenizer
from transformers import ModernBertForSequenceClassification
args = json.loads(sys.argv[1])
torch.manual_seed(0)
tok = Tokenizer.from_file(args["folder"] + "/tokenizer.json")
tok.enable_truncation(args["seq"])
tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), length=args["seq"])
rows = [line.rstrip("\n").split("\t") for line in open(args["tsv"], encoding="utf-8")][1:]
enc = tok.encode_batch([r[0] for r in rows])
ids = torch.tensor([e.ids for e in enc]); mask = torch.tensor([e.attention_mask for e in enc])
labels = torch.tensor([int(r[1]) for r in rows])
model = ModernBertForSequenceClassification.from_pretrained(
    args["folder"], attn_implementation="sdpa").train()
opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, eps=1e-6)
warmup = max(1, args["steps"] // 10)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup,
                                          max(0.0, (args["steps"] - s) / args["steps"])))
b, times = args["batch"], []
for step in range(args["steps"]):
    start = time.perf_counter()
    rows_ = [(step * b + i) % len(rows) for i in range(b)]
    loss = model(input_ids=ids[rows_], attention_mask=mask[rows_], labels=labels[rows_]).loss
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step()
    times.append(time.perf_counter() - start)
print(json.dumps({"examples_per_s": b * (len(times) - 1) / sum(times[1:])}))
'''


def _run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        sys.exit(f"{cmd[1]} failed:\n{proc.stderr[-3000:]}")
    return proc


def _build(args, work):
    """The tokenizer, the Hugging Face folder and its conversion; returns both folders."""
    corpus = os.path.join(work, "corpus.txt")
    with gzip.open(KJV, "rt", encoding="utf-8") as f, open(corpus, "w", encoding="utf-8") as out:
        out.write(f.read())
    hf = os.path.join(work, "hf")
    os.makedirs(hf)
    _run([ORACLE_PYTHON, os.path.join(ORACLES, "hf_bpe_tokenizer.py"), "train",
          os.path.join(hf, "tokenizer.json"), "8000", corpus])
    with open(os.path.join(hf, "tokenizer.json"), encoding="utf-8") as f:
        special = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    config = {"vocab_size": 50368, "hidden_size": args.hidden, "num_hidden_layers": args.layers,
              "num_attention_heads": args.heads, "intermediate_size": args.intermediate,
              "max_position_embeddings": 8192, "local_attention": 128, "num_labels": 2,
              "classifier_pooling": "mean", "pad_token_id": special["[PAD]"],
              "bos_token_id": special["[CLS]"], "eos_token_id": special["[SEP]"],
              "cls_token_id": special["[CLS]"], "sep_token_id": special["[SEP]"]}
    request = os.path.join(work, "build.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"save_dir": hf, "new": True, "seed": 0, "kind": "classifier",
                   "config": config, "input_ids": [[special["[CLS]"], special["[SEP]"]]],
                   "attention_mask": [[1, 1]], "out": os.path.join(work, "hf.npz")}, f)
    _run([ORACLE_PYTHON, os.path.join(ORACLES, "hf_modernbert.py"), request])
    ours = os.path.join(work, "ours")
    _run([sys.executable, os.path.join(_common.REPO, "convert_hf_checkpoint.py"),
          f"--hf_model_dir={hf}", f"--output_dir={ours}"], cwd=_common.REPO)
    return hf, ours


def _data(args, work):
    """train.tsv: consecutive KJV verses joined to about --seq words, labels alternating."""
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        words = f.read().split()
    n = args.batch * args.steps
    data = os.path.join(work, "data")
    os.makedirs(data)
    with open(os.path.join(data, "train.tsv"), "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for i in range(n):
            f.write(" ".join(words[i * args.seq:(i + 1) * args.seq]) + f"\t{i % 2}\n")
    return data


def _ours(args, folder, data, work):
    cmd = [sys.executable, os.path.join(_common.REPO, "run_classifier.py"), "--task_name=tsv",
           f"--data_dir={data}", f"--vocab_file={folder}/tokenizer.json",
           f"--bert_config_file={folder}/bert_config.json",
           f"--init_checkpoint={folder}/bert_model.ckpt", f"--output_dir={work}/out",
           "--do_train=true", f"--max_seq_length={args.seq}", f"--train_batch_size={args.batch}",
           "--num_train_epochs=1", "--learning_rate=5e-5", "--pad_to_longest=false",
           f"--log_every_n_steps={args.steps - 1}"]
    stderr = _run(cmd, cwd=_common.REPO).stderr
    rates = re.findall(r"([\d.]+) examples/s \(global\)", stderr)
    if not rates:
        sys.exit(f"run_classifier.py logged no examples/s:\n{stderr[-2000:]}")
    return float(rates[-1])


def _peer(args, hf, data):
    request = {"folder": hf, "tsv": os.path.join(data, "train.tsv"),
               "seq": args.seq, "batch": args.batch, "steps": args.steps}
    out = _run([ORACLE_PYTHON, "-c", PEER, json.dumps(request)]).stdout
    return json.loads(out.strip().splitlines()[-1])["examples_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("seq", 512), ("batch", 8), ("steps", 30), ("layers", 22),
                          ("hidden", 768), ("heads", 12), ("intermediate", 1152)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--max_load", type=float, default=0.5,
                        help="wait (up to 10 min) for a 1-minute load average below this")
    parser.add_argument("--write", action="store_true")
    _common.add_max_isa_flag(parser)
    args = parser.parse_args()
    _common.cap_isa(args.max_isa)  # both arms inherit it
    _common.wait_for_quiet(args.max_load, 600, label="finetune_modernbert")
    with tempfile.TemporaryDirectory() as work:
        hf, folder = _build(args, work)
        data = _data(args, work)
        ours = _ours(args, folder, data, work)
        peer = _peer(args, hf, data)
    table = (f"| arm | examples/s |\n|---|---|\n| run_classifier.py | {ours:.2f} |\n"
             f"| transformers ModernBertForSequenceClassification (sdpa) | {peer:.2f} |")
    text = (f"## ModernBERT fine-tuning\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"`python bench/finetune_modernbert.py --seq={args.seq} --batch={args.batch} "
            f"--steps={args.steps} --layers={args.layers}`\n\nMachine: {_common.machine()}\n\n"
            f"{table}\n")
    print(text)
    if args.write:
        _common.write_section("modernbert_finetune", text)


if __name__ == "__main__":
    main()
