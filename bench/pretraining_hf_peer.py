"""The benchmark peer of bench/pretraining.py: Hugging Face `BertForPreTraining` on PyTorch (CPU).

Run by bench/pretraining.py with the oracle virtualenv's interpreter (torch + transformers live
there, never in the project's venv); prints one JSON object on stdout.

The model is built from a `BertConfig` object (nothing is loaded from a hub) with the benchmark's
sizes and Google's recipe: the tanh GELU (`gelu_new`, Google's `"gelu"`), dropout 0.1, a linear
warm-up + decay schedule, AdamW with weight decay 0.01 except biases and LayerNorm, and gradients
clipped to global norm 1.0 before each update, as `run_pretraining.py` does. The batches are the
very arrays the TensorFlow side reads from TFRecords (saved by the bench as .npz), held in
memory, so the peer pays nothing for input.
"""

import argparse
import json
import resource
import sys
import time

import numpy as np
import torch
import transformers
from _common import hf_bert_config
from transformers import BertForPreTraining


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True, help=".npz with Google's pretraining features")
    p.add_argument("--config", required=True, help="bert_config.json (Google's keys)")
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--warmup_steps", type=int, required=True)
    p.add_argument("--timed_steps", type=int, required=True)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    args = p.parse_args()

    torch.manual_seed(0)
    with open(args.config) as f:
        g = json.load(f)
    config = hf_bert_config(g)
    model = BertForPreTraining(config)
    model.train()
    attn = getattr(model.config, "_attn_implementation", None)

    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    decay = [p_ for n, p_ in model.named_parameters() if not any(k in n for k in no_decay)]
    rest = [p_ for n, p_ in model.named_parameters() if any(k in n for k in no_decay)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    total = args.warmup_steps + args.timed_steps
    warm = max(1, total // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warm if s < warm else max(0.0, (total - s) / (total - warm)))

    data = np.load(args.data)
    n = data["input_ids"].shape[0]
    seq = data["input_ids"].shape[1]
    # HF's masked-LM labels are per token: the original id at a masked position, -100 elsewhere.
    labels = np.full((n, seq), -100, np.int64)
    rows = np.repeat(np.arange(n), data["masked_lm_positions"].shape[1])
    keep = data["masked_lm_weights"].reshape(-1) > 0
    labels[rows[keep], data["masked_lm_positions"].reshape(-1)[keep]] = \
        data["masked_lm_ids"].reshape(-1)[keep]
    tensors = {
        "input_ids": torch.from_numpy(data["input_ids"].astype(np.int64)),
        "attention_mask": torch.from_numpy(data["input_mask"].astype(np.int64)),
        "token_type_ids": torch.from_numpy(data["segment_ids"].astype(np.int64)),
        "labels": torch.from_numpy(labels),
        "next_sentence_label": torch.from_numpy(
            data["next_sentence_labels"].reshape(-1).astype(np.int64)),
    }

    times, losses = [], []
    start = time.monotonic()
    for step in range(total):
        lo = (step * args.batch_size) % (n - args.batch_size + 1)
        batch = {k: v[lo:lo + args.batch_size] for k, v in tensors.items()}
        out = model(**batch)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(out.loss.item())  # a host sync, as any training loop's logging
        times.append(time.monotonic() - start)
    params = sum(p_.numel() for p_ in model.parameters())
    json.dump({"times": times, "losses": losses, "params": params,
               "torch": torch.__version__, "transformers": transformers.__version__,
               "threads": torch.get_num_threads(), "attn_implementation": attn,
               "python": sys.version.split()[0],
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
              sys.stdout)


if __name__ == "__main__":
    main()
