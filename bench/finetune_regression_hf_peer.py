"""The benchmark peer of bench/finetune_regression.py: Hugging Face
`BertForSequenceClassification(num_labels=1, problem_type="regression")` fine-tuned on PyTorch
(CPU), from the same initial weights as ours, on our features in our trainer's order.

Run by bench/finetune_regression.py with the oracle virtualenv's interpreter (torch and
transformers live there), with HF_HUB_OFFLINE=1; prints one JSON object on the last line of
stdout and writes `dev_predictions.npy` and `test_predictions.npy` (float32 [N], one score per
example, file order) to `--output_dir`; the bench computes every metric from them.

Inputs, written by the bench from our side:
  `--model_dir`: our init checkpoint (encoder and regression head, `output_weights` [1, H])
    converted by convert_to_hf.py, so both arms start from the very same numbers;
  `--data`: an .npz of our features: `train_<name>` [steps x batch, S] (name: input_ids,
    input_mask, segment_ids; `train_label_values` [steps x batch]), the global batches our
    trainer read, update after update (the seeded per-epoch permutations of
    input_pipeline.record_dataset); `dev_<name>` and `test_<name>` in file order.

Recipe: `_common.torch_adamw_google_schedule` (torch AdamW set up as Google's optimizer,
Google's warm-up and linear decay; `--google_adam`: ner_hf_peer.GoogleAdamWeightDecay, Google's
optimizer without bias correction, with the same groups and schedule) and
`_common.torch_update` (gradients clipped to global norm 1.0); dropout from config.json (0.1;
its masks are torch's); the loss is Hugging Face's regression loss (MSE over the batch, as ours).
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
import transformers
from transformers import BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import torch_adamw_google_schedule, torch_update  # noqa: E402
from ner_hf_peer import GoogleAdamWeightDecay  # noqa: E402

FEATURES = ("input_ids", "input_mask", "segment_ids")


def tensors(data, split):
    """input_ids, attention_mask, token_type_ids of `split` as int64 tensors [N, S]."""
    ids, mask, segments = (torch.from_numpy(data[f"{split}_{k}"].astype(np.int64))
                           for k in FEATURES)
    return ids, mask, segments


@torch.no_grad()
def predict(model, data, split, batch_size):
    """float32 [N]: the model's score of every example of `split`, in file order."""
    model.eval()
    ids, mask, segments = tensors(data, split)
    out = [model(input_ids=ids[i:i + batch_size], attention_mask=mask[i:i + batch_size],
                 token_type_ids=segments[i:i + batch_size]).logits[:, 0]
           for i in range(0, len(ids), batch_size)]
    return torch.cat(out).numpy().astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True, help="Hugging Face folder of our init weights")
    p.add_argument("--data", required=True, help=".npz of our features (see the docstring)")
    p.add_argument("--batch_size", type=int, required=True, help="global batch")
    p.add_argument("--learning_rate", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup_steps", type=int, required=True)
    p.add_argument("--skip_steps", type=int, default=10,
                   help="updates excluded from the steady-state rate")
    p.add_argument("--eval_batch_size", type=int, default=64)
    p.add_argument("--seed", type=int, default=12345, help="torch's seed (dropout masks)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (on shared cores, 2 threads spin: several times slower)")
    p.add_argument("--google_adam", action="store_true",
                   help="Google's AdamWeightDecay (no bias correction, as ours) instead of "
                        "torch's AdamW")
    p.add_argument("--output_dir", required=True)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    model = BertForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=1, problem_type="regression")
    data = np.load(args.data)
    ids, mask, segments = tensors(data, "train")
    labels = torch.from_numpy(data["train_label_values"].astype(np.float32))
    if len(ids) != args.steps * args.batch_size:
        raise SystemExit(f"{args.data}: {len(ids)} training examples, expected "
                         f"{args.steps} x {args.batch_size}")
    optimizer, scheduler = torch_adamw_google_schedule(model, args.learning_rate, args.steps,
                                                       args.warmup_steps)
    if args.google_adam:
        optimizer = GoogleAdamWeightDecay(
            [{"params": g["params"], "weight_decay": g["weight_decay"]}
             for g in optimizer.param_groups], lr=args.learning_rate)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])
    model.train()
    ends, losses = [], []
    for step in range(args.steps):
        b = slice(step * args.batch_size, (step + 1) * args.batch_size)
        out = model(input_ids=ids[b], attention_mask=mask[b], token_type_ids=segments[b],
                    labels=labels[b])
        losses.append(torch_update(model, optimizer, scheduler, out.loss))
        ends.append(time.perf_counter())
        if (step + 1) % 10 == 0:
            print(f"step {step + 1}/{args.steps}: loss {np.mean(losses[-10:]):.4f}", flush=True)
    skip = min(args.skip_steps, args.steps - 1)
    timed_seconds = ends[-1] - ends[skip - 1] if skip else ends[-1] - ends[0]

    os.makedirs(args.output_dir, exist_ok=True)
    for split in ("dev", "test"):
        np.save(os.path.join(args.output_dir, f"{split}_predictions.npy"),
                predict(model, data, split, args.eval_batch_size))
    print(json.dumps({
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "timed_steps": args.steps - skip, "timed_seconds": timed_seconds,
        "examples_per_sec": (args.steps - skip) * args.batch_size / timed_seconds,
        "losses": losses}))


if __name__ == "__main__":
    main()
