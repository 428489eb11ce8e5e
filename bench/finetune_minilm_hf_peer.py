"""The benchmark peer of bench/finetune_minilm.py: Hugging Face `BertForSequenceClassification`
fine-tuned on PyTorch (CPU).

Run by bench/finetune_minilm.py with the oracle virtualenv's interpreter (torch + transformers
live there, never in the project's venv), with HF_HUB_OFFLINE=1; prints one JSON object on the
last line of stdout.

The model and the tokenizer are loaded from the very Hugging Face folder our side converts
(all-MiniLM-L6-v2: erf GELU, dropout 0.1 from its config.json; the classifier layer is new, as on
our side). The recipe follows Google's `run_classifier.py` as far as `torch.optim.AdamW` allows:
the same learning rate, Google's schedule (linear warm-up from 0 over `int(steps x
warmup_proportion)` updates, then `lr x (1 - step / steps)`), weight decay 0.01 on everything but
biases and LayerNorm, Adam betas (0.9, 0.999) and epsilon 1e-6, gradients clipped to global norm
1.0, the same global batch, epochs (`steps = int(examples / batch x epochs)`) and max_seq_length.
Padding (`--padding`): `max_length` pads every sequence to max_seq_length as Google's features
are; `longest` pads each batch to its longest sequence, as Hugging Face's `Trainer` does
(`DataCollatorWithPadding`, no `pad_to_multiple_of`); `--group_by_length` orders each epoch with
Hugging Face's `get_length_grouped_indices` (its `Trainer`'s `group_by_length`). The one
difference left is AdamW's bias correction, which torch cannot turn off (Google's
AdamWeightDecay has none).

Timing: every update is timed (forward, backward, clipping, optimizer and scheduler steps);
the steady-state rate counts the updates after the first `--skip_steps` (the clock runs from the
end of update `skip_steps` to the end of the last one). Tokenization and model loading are not
timed. Batches are slices of in-memory tensors (the peer pays nothing for input but the
per-batch padding). Prediction: after the evaluation (a warm-up), `--predict_repeats` timed
passes over test.tsv in batches of `--predict_batch_size` (`predict_examples_per_sec`).
"""

import argparse
import csv
import json
import os
import time

import numpy as np
import torch
import transformers
from transformers import BertForSequenceClassification, BertTokenizerFast


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = rows[0]
    label_col = header.index("label")
    text_col = [i for i in range(len(header)) if i != label_col]
    assert len(text_col) == 1, header
    return [r[text_col[0]] for r in rows[1:]], [r[label_col] for r in rows[1:]]


def encode(tokenizer, texts, labels, label_ids, max_seq_length):
    """Padded to max_seq_length; `lengths` [n] says how much of each row is real."""
    enc = tokenizer(texts, max_length=max_seq_length, truncation=True, padding="max_length",
                    return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "token_type_ids": enc["token_type_ids"],
            "labels": torch.tensor([label_ids[x] for x in labels], dtype=torch.long),
            "lengths": enc["attention_mask"].sum(1)}


AUTOCAST = False  # --bf16


def autocast():
    """bf16 autocast on the CPU with --bf16, else a no-op context."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=AUTOCAST)


def make_batch(data, idx, padding):
    """The examples `idx` (a tensor or slice), cut to their longest with padding="longest"
    (what DataCollatorWithPadding gives), else at max_seq_length."""
    batch = {k: v[idx] for k, v in data.items() if k != "lengths"}
    if padding == "longest":
        longest = int(data["lengths"][idx].max())
        batch = {k: v[:, :longest] if v.dim() == 2 else v for k, v in batch.items()}
    return batch


@torch.no_grad()
def accuracy(model, data, padding, batch_size=64):
    model.eval()
    n = data["labels"].shape[0]
    correct = 0
    loss_sum = 0.0
    for i in range(0, n, batch_size):
        batch = make_batch(data, slice(i, i + batch_size), padding)
        with autocast():
            out = model(**batch)
        correct += int((out.logits.argmax(-1) == batch["labels"]).sum())
        loss_sum += float(out.loss) * batch["labels"].shape[0]
    model.train()
    return correct / n, loss_sum / n


@torch.no_grad()
def predict_rate(model, data, padding, batch_size, repeats):
    """Examples/s of `repeats` passes of prediction (probabilities) over `data`, in order."""
    model.eval()
    n = data["labels"].shape[0]
    start = time.perf_counter()
    for _ in range(repeats):
        for i in range(0, n, batch_size):
            batch = make_batch(data, slice(i, i + batch_size), padding)
            batch.pop("labels")
            with autocast():
                logits = model(**batch).logits
            torch.softmax(logits.float(), -1)
    return repeats * n / (time.perf_counter() - start)


def epoch_batches(lengths, batch_size, group_by_length, rng, generator):
    """One epoch's full batches: a fresh permutation, or Hugging Face's length grouping."""
    n = len(lengths)
    if group_by_length:
        from transformers.trainer_pt_utils import get_length_grouped_indices
        perm = np.asarray(get_length_grouped_indices(lengths.tolist(), batch_size,
                                                     generator=generator))
    else:
        perm = rng.permutation(n)
    return [perm[i * batch_size:(i + 1) * batch_size] for i in range(n // batch_size)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True, help="Hugging Face BERT folder")
    p.add_argument("--data_dir", required=True, help="train.tsv, dev.tsv, test.tsv (SST-2 layout)")
    p.add_argument("--max_seq_length", type=int, required=True)
    p.add_argument("--batch_size", type=int, required=True, help="global batch")
    p.add_argument("--learning_rate", type=float, required=True)
    p.add_argument("--num_train_epochs", type=float, required=True)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--clip_norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--skip_steps", type=int, default=10,
                   help="updates excluded from the steady-state rate")
    p.add_argument("--log_every", type=int, default=50)
    p.add_argument("--padding", choices=("max_length", "longest"), default="max_length")
    p.add_argument("--group_by_length", action="store_true")
    p.add_argument("--predict_batch_size", type=int, default=64)
    p.add_argument("--predict_repeats", type=int, default=5)
    p.add_argument("--bf16", action="store_true",
                   help="torch.autocast(cpu, bfloat16) around every forward (weights float32)")
    args = p.parse_args()
    global AUTOCAST  # pylint: disable=global-statement
    AUTOCAST = args.bf16

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    tokenizer = BertTokenizerFast.from_pretrained(args.model_dir)
    train_texts, train_labels = read_tsv(os.path.join(args.data_dir, "train.tsv"))
    labels = sorted(set(train_labels))
    label_ids = {x: i for i, x in enumerate(labels)}
    splits = {"train": encode(tokenizer, train_texts, train_labels, label_ids,
                              args.max_seq_length)}
    for name in ("dev", "test"):
        texts, y = read_tsv(os.path.join(args.data_dir, f"{name}.tsv"))
        splits[name] = encode(tokenizer, texts, y, label_ids, args.max_seq_length)

    model = BertForSequenceClassification.from_pretrained(args.model_dir, num_labels=len(labels))
    model.train()

    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    decay = [q for n, q in model.named_parameters() if not any(k in n for k in no_decay)]
    rest = [q for n, q in model.named_parameters() if any(k in n for k in no_decay)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    n_train = splits["train"]["labels"].shape[0]
    steps = int(n_train / args.batch_size * args.num_train_epochs)
    warmup = int(steps * args.warmup_proportion)

    def google_schedule(t):  # t = updates done before this one, as Google's global_step
        if warmup and t < warmup:
            return t / warmup
        return max(0.0, 1.0 - t / steps)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, google_schedule)

    # Batches: a fresh (or length-grouped) order per epoch, full batches only (as Google's
    # drop_remainder).
    order = []
    while len(order) < steps:
        order += epoch_batches(splits["train"]["lengths"], args.batch_size,
                               args.group_by_length, rng, generator)

    step_ends, losses = [], []
    train = splits["train"]
    start, start_unix = time.perf_counter(), time.time()
    for step in range(steps):
        batch = make_batch(train, torch.from_numpy(order[step]), args.padding)
        with autocast():
            out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss = float(out.loss)
        step_ends.append(time.perf_counter())
        losses.append(loss)
        if (step + 1) % args.log_every == 0 or step + 1 == steps:
            print(f"step {step + 1}/{steps}: loss {np.mean(losses[-args.log_every:]):.4f}, "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
    skip = min(args.skip_steps, steps - 1)
    timed_steps = steps - skip
    timed_seconds = step_ends[-1] - step_ends[skip - 1] if skip else step_ends[-1] - start
    dev_acc, dev_loss = accuracy(model, splits["dev"], args.padding)
    test_acc, test_loss = accuracy(model, splits["test"], args.padding)
    predict_per_sec = predict_rate(model, splits["test"], args.padding,
                                   args.predict_batch_size, args.predict_repeats)
    print(json.dumps({
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "labels": labels, "train_examples": n_train, "num_train_steps": steps,
        "num_warmup_steps": warmup, "timed_steps": timed_steps, "timed_seconds": timed_seconds,
        "examples_per_sec": timed_steps * args.batch_size / timed_seconds,
        "total_train_seconds": step_ends[-1] - start,
        "step_ends": [t - start for t in step_ends], "losses": losses,
        "first_update_end_unix": start_unix + step_ends[0] - start,
        "final_loss": float(np.mean(losses[-10:])),
        "dev_accuracy": dev_acc, "dev_loss": dev_loss,
        "dev_examples": int(splits["dev"]["labels"].shape[0]),
        "test_accuracy": test_acc, "test_loss": test_loss,
        "test_examples": int(splits["test"]["labels"].shape[0]),
        "predict_examples_per_sec": predict_per_sec, "padding": args.padding,
        "group_by_length": args.group_by_length, "bf16": args.bf16,
    }))


if __name__ == "__main__":
    main()
