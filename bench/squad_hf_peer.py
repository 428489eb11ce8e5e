"""The benchmark peer of bench/squad_finetune.py: Hugging Face `BertForQuestionAnswering`
fine-tuned on PyTorch (CPU) from the same initial weights, on the same windows in the same
order, each batch padded to its own longest window (Hugging Face's dynamic padding).

Run by bench/squad_finetune.py with the oracle virtualenv's interpreter; prints one JSON object
on the last line of stdout.

Inputs: `--model_dir`, the Hugging Face folder our checkpoint was converted from (encoder);
`--head`, an .npz with Google's `cls/squad/output_weights` [2, H] and `output_bias` [2] (the
SQuAD head of our init checkpoint: `qa_outputs` gets them as is); `--data`, an .npz with the
training windows (`input_ids`, `input_mask`, `segment_ids`, `start_positions`,
`end_positions` [N, S] / [N]), `order` (the window of every training example, update after
update: our trainer's seeded per-epoch permutations), the prediction windows (`eval_*`) and
`check_start_logits` (our start logits on the first prediction windows at the initial weights,
no dropout).

Recipe: torch AdamW (bench/_common.torch_adamw_google_schedule: Google's schedule, weight decay
0.01 but biases and LayerNorm, epsilon 1e-6), gradients clipped to global norm 1.0, dropout from
the model's config (torch's masks, seeded by `--seed`). The loss is Hugging Face's: the mean of
the start and end cross-entropies, Google's run_squad.py loss. Timing: every update (forward,
backward, clip, step); the rate counts the updates after `--skip_steps`.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from transformers import BertForQuestionAnswering
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import torch_adamw_google_schedule, torch_update  # noqa: E402


def trimmed(arrays, rows):
    """The rows' windows cut to their longest (the last position any of them uses)."""
    length = int(arrays["input_mask"][rows].sum(1).max())
    return {k: torch.from_numpy(arrays[k][rows][:, :length].astype(np.int64))
            for k in ("input_ids", "input_mask", "segment_ids")}


def logits(model, arrays, batch_size):
    starts, ends = [], []
    n, width = arrays["input_ids"].shape
    with torch.no_grad():
        for i in range(0, n, batch_size):
            rows = np.arange(i, min(n, i + batch_size))
            part = trimmed(arrays, rows)
            out = model(input_ids=part["input_ids"], attention_mask=part["input_mask"],
                        token_type_ids=part["segment_ids"])
            pad = width - part["input_ids"].shape[1]
            starts.append(np.pad(out.start_logits.numpy(), [[0, 0], [0, pad]]))
            ends.append(np.pad(out.end_logits.numpy(), [[0, 0], [0, pad]]))
    return np.concatenate(starts), np.concatenate(ends)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True)
    p.add_argument("--head", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--learning_rate", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup_steps", type=int, required=True)
    p.add_argument("--eval_batch_size", type=int, default=32)
    p.add_argument("--skip_steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dropout", type=float, default=None,
                   help="hidden and attention dropout in place of the folder's config")
    p.add_argument("--output", required=True, help=".npz of the prediction windows' logits")
    args = p.parse_args()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()  # qa_outputs is set below
    overrides = {} if args.dropout is None else {
        "hidden_dropout_prob": args.dropout, "attention_probs_dropout_prob": args.dropout}
    model = BertForQuestionAnswering.from_pretrained(args.model_dir, **overrides)
    head = np.load(args.head)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(torch.from_numpy(head["output_weights"]))
        model.qa_outputs.bias.copy_(torch.from_numpy(head["output_bias"]))
    data = np.load(args.data)
    train = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")}
    starts = torch.from_numpy(data["start_positions"].astype(np.int64))
    ends_ = torch.from_numpy(data["end_positions"].astype(np.int64))
    evaluation = {k: data[f"eval_{k}"] for k in ("input_ids", "input_mask", "segment_ids")}

    model.eval()
    n_check = len(data["check_start_logits"])
    check, _ = logits(model, {k: v[:n_check] for k, v in evaluation.items()}, n_check)
    real = evaluation["input_mask"][:n_check] > 0
    init_diff = float(np.abs(check - data["check_start_logits"])[real].max())

    optimizer, scheduler = torch_adamw_google_schedule(model, args.learning_rate, args.steps,
                                                       args.warmup_steps)
    model.train()
    times, losses = [], []
    for step in range(args.steps):
        rows = data["order"][step * args.batch_size:(step + 1) * args.batch_size]
        part = trimmed(train, rows)
        out = model(input_ids=part["input_ids"], attention_mask=part["input_mask"],
                    token_type_ids=part["segment_ids"], start_positions=starts[rows],
                    end_positions=ends_[rows])
        losses.append(torch_update(model, optimizer, scheduler, out.loss))
        times.append(time.perf_counter())
    timed = args.steps - args.skip_steps
    rate = timed * args.batch_size / (times[-1] - times[args.skip_steps - 1])
    model.eval()
    start_logits, end_logits = logits(model, evaluation, args.eval_batch_size)
    np.savez(args.output, start_logits=start_logits.astype(np.float32),
             end_logits=end_logits.astype(np.float32))
    print(json.dumps({"examples_per_sec": rate,
                      "timed_seconds": times[-1] - times[args.skip_steps - 1],
                      "final_loss": float(np.mean(losses[-10:])), "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "init_logits_max_diff": init_diff}))


if __name__ == "__main__":
    main()
