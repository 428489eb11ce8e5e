"""The Hugging Face arm of bench/time_to_quality.py: `BertForMaskedLM` on PyTorch (CPU).

Run by bench/time_to_quality.py with the oracle virtualenv's interpreter (torch + transformers
live there, never in the project's venv); writes one JSON file (`--output`).

The model is built from a `transformers.BertConfig` with the race's sizes (nothing is loaded
from a hub), with Google's numerics where Hugging Face has the choice: the tanh GELU
(`gelu_new` = Google's `"gelu"`) and LayerNorm epsilon 1e-12. Training follows the race's BERT
recipe: `torch.optim.AdamW` (decay 0.01 except biases and LayerNorm, epsilon 1e-6), Google's
schedule (linear warm-up, then linear decay from the peak scaled by the steps left, as
`optimization.learning_rate_at`), gradients clipped to global norm 1.0. The data are the very
records the TensorFlow arms read (exported by the race as .npz): the masked positions become
per-token labels (-100 elsewhere), as `BertForMaskedLM` expects; the next-sentence labels are
not used (this model has no such head). Batches come from memory in a seeded random order.

Held-out evaluation (clock paused) computes the masked-LM loss and accuracy exactly as the
TensorFlow arms do: over the records' masked positions, weighted by `masked_lm_weights`.
"""

import argparse
import json
import sys
import time

import numpy as np
import torch
import transformers
from _common import hf_bert_config
from transformers import BertForMaskedLM


def load(path):
    data = np.load(path)
    return {k: data[k] for k in data.files}


def labels_of(data):
    """Per-token labels: the original id at each real masked position, -100 elsewhere."""
    n, seq = data["input_ids"].shape
    labels = np.full((n, seq), -100, np.int64)
    rows = np.repeat(np.arange(n), data["masked_lm_positions"].shape[1])
    keep = data["masked_lm_weights"].reshape(-1) > 0
    labels[rows[keep], data["masked_lm_positions"].reshape(-1)[keep]] = \
        data["masked_lm_ids"].reshape(-1)[keep]
    return labels


def google_lr_factor(step, total, warmup):
    """`optimization.learning_rate_at` / init_lr (Google's schedule)."""
    decayed = 1.0 - min(step, total) / total
    if warmup and step < warmup:
        return step / warmup
    return decayed


@torch.no_grad()
def evaluate(model, heldout, batch_size=64):
    """Weighted masked-LM loss and accuracy over the held-out records' masked positions."""
    model.eval()
    loss_sum = correct = weight = 0.0
    n = heldout["input_ids"].shape[0]
    for lo in range(0, n, batch_size):
        sl = slice(lo, lo + batch_size)
        logits = model(input_ids=torch.from_numpy(heldout["input_ids"][sl].astype(np.int64)),
                       attention_mask=torch.from_numpy(heldout["input_mask"][sl].astype(np.int64)),
                       token_type_ids=torch.from_numpy(
                           heldout["segment_ids"][sl].astype(np.int64))).logits
        positions = torch.from_numpy(heldout["masked_lm_positions"][sl].astype(np.int64))
        ids = torch.from_numpy(heldout["masked_lm_ids"][sl].astype(np.int64))
        w = torch.from_numpy(heldout["masked_lm_weights"][sl].astype(np.float32))
        picked = torch.gather(logits, 1, positions[:, :, None].expand(-1, -1, logits.shape[-1]))
        log_probs = torch.log_softmax(picked.float(), dim=-1)  # [B, P, V]
        nll = -torch.gather(log_probs, 2, ids[:, :, None])[:, :, 0]
        loss_sum += float((nll * w).sum())
        correct += float(((log_probs.argmax(-1) == ids).float() * w).sum())
        weight += float(w.sum())
    model.train()
    return {"masked_lm_loss": loss_sum / weight, "masked_lm_accuracy": correct / weight}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True, help=".npz of the BERT arm's training records")
    p.add_argument("--heldout", required=True, help=".npz of the held-out records")
    p.add_argument("--config", required=True, help="bert_config.json (Google's keys)")
    p.add_argument("--output", required=True)
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--learning_rate", type=float, required=True)
    p.add_argument("--num_train_steps", type=int, required=True)
    p.add_argument("--warmup_fraction", type=float, required=True)
    p.add_argument("--budget_seconds", type=float, required=True)
    p.add_argument("--eval_every_seconds", type=float, required=True)
    p.add_argument("--calibrate_steps", type=int, default=0,
                   help="> 0: only time this many steps (no evaluation) and report the rate")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    start = time.monotonic()  # the arm's clock: model construction counts, evaluation not
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        g = json.load(f)
    config = hf_bert_config(g)
    model = BertForMaskedLM(config)
    model.train()
    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [q for n, q in named if not any(k in n for k in no_decay)],
          "weight_decay": 0.01},
         {"params": [q for n, q in named if any(k in n for k in no_decay)],
          "weight_decay": 0.0}],
        lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    total = args.num_train_steps
    warmup = int(args.warmup_fraction * total)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: google_lr_factor(s, total, warmup))

    train = load(args.train)
    heldout = load(args.heldout)
    tensors = {
        "input_ids": torch.from_numpy(train["input_ids"].astype(np.int64)),
        "attention_mask": torch.from_numpy(train["input_mask"].astype(np.int64)),
        "token_type_ids": torch.from_numpy(train["segment_ids"].astype(np.int64)),
        "labels": torch.from_numpy(labels_of(train)),
    }
    n = train["input_ids"].shape[0]
    rng = np.random.RandomState(args.seed)
    order = rng.permutation(n)
    cursor = 0

    paused = 0.0  # seconds spent evaluating (not counted)
    curve = []

    def train_seconds():
        return time.monotonic() - start - paused

    def record(step, examples):
        nonlocal paused
        t = train_seconds()
        began = time.monotonic()
        result = evaluate(model, heldout)
        paused += time.monotonic() - began
        curve.append(dict(result, seconds=t, step=step, examples=examples))
        print(f"[hf] {t:7.1f}s step {step}: {result}", file=sys.stderr, flush=True)

    steps = args.calibrate_steps or total
    if not args.calibrate_steps:
        record(0, 0)
    next_eval = args.eval_every_seconds
    step_times = []
    step = 0
    while step < steps:
        if cursor + args.batch_size > n:
            order, cursor = rng.permutation(n), 0
        idx = torch.from_numpy(order[cursor:cursor + args.batch_size])
        cursor += args.batch_size
        out = model(**{k: v[idx] for k, v in tensors.items()})
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        loss = out.loss.item()  # a host sync, as any training loop's logging
        if not np.isfinite(loss):
            raise FloatingPointError(f"non-finite loss at step {step + 1}")
        step += 1
        step_times.append(train_seconds())
        if args.calibrate_steps:
            continue
        if train_seconds() >= args.budget_seconds:
            break
        if train_seconds() >= next_eval:
            record(step, step * args.batch_size)
            next_eval += args.eval_every_seconds
    if not args.calibrate_steps and (not curve or curve[-1]["step"] != step):
        record(step, step * args.batch_size)
    result = {
        "curve": curve, "step_times": step_times, "steps": step,
        "params": sum(q.numel() for q in model.parameters()),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
    }
    with open(args.output, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
