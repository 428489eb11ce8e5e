"""Runs PyTorch's `torch.optim.AdamW` as Hugging Face's fine-tuning recipes use it, as a test
oracle for `AdamWeightDecay(bias_correction=True)` (--adam_bias_correction).

Usage: python torch_adamw.py REQUEST.json
REQUEST: {"weights": "w.npz", "grads": "g.npz", "learning_rates": [float per step],
"weight_decay": float, "betas": [b1, b2], "eps": float, "max_grad_norm": float or null,
"no_decay": [substrings], "output": "out.npz"}
w.npz: name ('/' as '|') -> initial value. g.npz: "<step>:<name>" -> the gradient of that step.

The recipe of Hugging Face's run_glue.py / Trainer: two parameter groups, weight decay on every
parameter except those whose name contains a `no_decay` substring (their "bias",
"LayerNorm.weight"; here Google's names: "bias", "LayerNorm"), then per step:
`clip_grad_norm_(max_grad_norm)`, `optimizer.step()` at that step's learning rate (set on the
groups, as a scheduler does). float32 throughout, as a fine-tuning run.
out.npz: every parameter after the steps, and its `exp_avg` / `exp_avg_sq` as
`<name>/adam_m` / `<name>/adam_v` (PyTorch stores the moments uncorrected, as Google's slots).
"""

import json
import sys

import numpy as np
import torch


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    weights = {k.replace("|", "/"): v for k, v in np.load(request["weights"]).items()}
    grads = {k.replace("|", "/"): v for k, v in np.load(request["grads"]).items()}
    params = {name: torch.nn.Parameter(torch.tensor(value, dtype=torch.float32))
              for name, value in weights.items()}
    no_decay = request["no_decay"]
    groups = [
        {"params": [p for n, p in params.items() if not any(s in n for s in no_decay)],
         "weight_decay": request["weight_decay"]},
        {"params": [p for n, p in params.items() if any(s in n for s in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=request["learning_rates"][0],
                                  betas=tuple(request["betas"]), eps=request["eps"])
    for step, lr in enumerate(request["learning_rates"]):
        optimizer.zero_grad()
        for name, p in params.items():
            p.grad = torch.tensor(grads[f"{step}:{name}"], dtype=torch.float32)
        if request.get("max_grad_norm"):
            torch.nn.utils.clip_grad_norm_(list(params.values()), request["max_grad_norm"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
    out = {}
    for name, p in params.items():
        state = optimizer.state[p]
        out[name] = p.detach().numpy()
        out[f"{name}/adam_m"] = state["exp_avg"].numpy()
        out[f"{name}/adam_v"] = state["exp_avg_sq"].numpy()
    np.savez(request["output"], **{k.replace("/", "|"): v for k, v in out.items()})


if __name__ == "__main__":
    main(sys.argv[1])
