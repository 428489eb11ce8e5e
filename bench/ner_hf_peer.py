"""The benchmark peer of bench/ner_peoples_daily.py: Hugging Face `BertForTokenClassification`
fine-tuned on PyTorch (CPU), from the same initial weights, on the same windows in the same
order.

Run by bench/ner_peoples_daily.py with the oracle virtualenv's interpreter; prints one JSON
object on the last line of stdout.

Inputs (written by the bench from our side): `--weights`, an .npz of Hugging Face parameter
names -> arrays (our init checkpoint, encoder and tagging head, renamed and transposed);
`--data`, an .npz with the training windows (`input_ids`, `input_mask`, `label_ids`,
`label_weights` [N, S]), `order` (the window index of every training example, update after
update: our trainer's seeded per-epoch permutations) and the dev windows (`dev_*`). Labels
on positions of weight 0 become -100, so `CrossEntropyLoss`'s mean over the batch is our loss
(the weighted sum over the labelled words of the global batch divided by their number).

Recipe, as bench/finetune_minilm_hf_peer.py: torch AdamW (weight decay 0.01 except biases and
LayerNorm, betas 0.9/0.999, epsilon 1e-6), Google's schedule (linear warm-up over
`warmup_steps`, then linear decay to 0 at `steps`), gradients clipped to global norm 1.0,
dropout from the config (its masks are torch's, seeded by `--seed`: the one difference left
besides AdamW's bias correction). Before training, the logits of the first dev windows are
compared with ours (`check_logits` in `--data`, computed by our model at the same initial
weights without dropout); the largest difference is printed as `init_logits_max_diff`.
Timing: every update (forward, backward, clip, step); the rate counts the updates after
`--skip_steps`.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from transformers import BertForTokenClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import hf_bert_config  # noqa: E402

# Google's bert_config.json activation -> Hugging Face's name for the same function.
HF_ACTIVATION = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu",
                 "relu": "relu", "tanh": "tanh"}


class GoogleAdamWeightDecay(torch.optim.Optimizer):
    """Google's `optimization.AdamWeightDecayOptimizer` (BERT's): Adam without bias correction,
    betas 0.9/0.999, epsilon 1e-6, decoupled weight decay added to the update before the
    learning rate: p -= lr * (m / (sqrt(v) + eps) + wd * p)."""

    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr, "weight_decay": 0.0})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p_ in group["params"]:
                if p_.grad is None:
                    continue
                state = self.state[p_]
                if not state:
                    state["m"] = torch.zeros_like(p_)
                    state["v"] = torch.zeros_like(p_)
                m, v = state["m"], state["v"]
                m.mul_(0.9).add_(p_.grad, alpha=0.1)
                v.mul_(0.999).addcmul_(p_.grad, p_.grad, value=0.001)
                update = m / (v.sqrt() + 1e-6) + group["weight_decay"] * p_
                p_.add_(update, alpha=-group["lr"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bert_config", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--num_labels", type=int, required=True)
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--learning_rate", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup_steps", type=int, required=True)
    p.add_argument("--eval_batch_size", type=int, default=64)
    p.add_argument("--skip_steps", type=int, default=10)
    p.add_argument("--output", required=True, help=".npy of the dev windows' tag ids")
    p.add_argument("--google_adam", action="store_true",
                   help="Google's AdamWeightDecay (no bias correction) instead of torch AdamW")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (on the shared 2 cores, 2 threads spun: 5x slower)")
    p.add_argument("--seed", type=int, default=0, help="torch's seed (its dropout masks)")
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    with open(args.bert_config) as f:
        google_config = json.load(f)
    config = hf_bert_config(google_config, HF_ACTIVATION[google_config["hidden_act"]])
    config.num_labels = args.num_labels
    model = BertForTokenClassification(config)
    weights = np.load(args.weights)
    state = {k: torch.from_numpy(np.ascontiguousarray(weights[k])) for k in weights.files}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise SystemExit(f"weights: missing {missing}, unexpected {unexpected}")
    data = np.load(args.data)
    ids = torch.from_numpy(data["input_ids"].astype(np.int64))
    mask = torch.from_numpy(data["input_mask"].astype(np.int64))
    labels = torch.from_numpy(np.where(data["label_weights"] > 0, data["label_ids"],
                                       -100).astype(np.int64))
    order = data["order"]

    # The same numbers as ours before training: logits of the first dev windows (no dropout).
    model.eval()
    with torch.no_grad():
        n_check = len(data["check_logits"])
        check = model(input_ids=torch.from_numpy(data["dev_input_ids"][:n_check].astype(np.int64)),
                      attention_mask=torch.from_numpy(
                          data["dev_input_mask"][:n_check].astype(np.int64)),
                      token_type_ids=torch.zeros((n_check, ids.shape[1]), dtype=torch.int64))
    init_diff = float(np.abs(check.logits.numpy() - data["check_logits"]).max())

    decay = [p_ for n, p_ in model.named_parameters()
             if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p_ for n, p_ in model.named_parameters()
                if n.endswith("bias") or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)

    def schedule(t):  # t = updates done before this one (Google's global_step)
        if t < args.warmup_steps:
            return t / args.warmup_steps
        return max(0.0, 1.0 - t / args.steps)

    if args.google_adam:
        optimizer = GoogleAdamWeightDecay(
            [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
            lr=args.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    model.train()
    ends, losses = [], []
    for step in range(args.steps):
        batch = order[step * args.batch_size:(step + 1) * args.batch_size]
        out = model(input_ids=ids[batch], attention_mask=mask[batch],
                    token_type_ids=torch.zeros_like(ids[batch]), labels=labels[batch])
        optimizer.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(out.loss.item())
        ends.append(time.perf_counter())
    timed = args.steps - args.skip_steps
    rate = timed * args.batch_size / (ends[-1] - ends[args.skip_steps - 1])

    model.eval()
    dev_ids = torch.from_numpy(data["dev_input_ids"].astype(np.int64))
    dev_mask = torch.from_numpy(data["dev_input_mask"].astype(np.int64))
    predictions = []
    with torch.no_grad():
        for start in range(0, len(dev_ids), args.eval_batch_size):
            logits = model(input_ids=dev_ids[start:start + args.eval_batch_size],
                           attention_mask=dev_mask[start:start + args.eval_batch_size],
                           token_type_ids=torch.zeros_like(
                               dev_ids[start:start + args.eval_batch_size])).logits
            predictions.append(logits.argmax(-1).numpy().astype(np.int32))
    np.save(args.output, np.concatenate(predictions))
    print(json.dumps({"examples_per_sec": rate,
                      "timed_seconds": ends[-1] - ends[args.skip_steps - 1],
                      "final_loss": float(np.mean(losses[-10:])), "torch": torch.__version__,
                      "threads": args.threads, "google_adam": args.google_adam,
                      "init_logits_max_diff": init_diff}))


if __name__ == "__main__":
    main()
