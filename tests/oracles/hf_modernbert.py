"""Hugging Face ModernBERT as the reference (test oracle; oracle venv only).

Usage: python hf_modernbert.py REQUEST.json  (one request or a list of them)

REQUEST: {"save_dir": folder to save a new random model into (or to load from), "new": true to
build one (config keys in "config", seed in "seed"), "classifier": true for a
ModernBertForSequenceClassification (else ModernBertForMaskedLM), "input_ids": [[...]],
"attention_mask": [[...]], "out": .npz path}.

A new model's every 1-D parameter (LayerNorm weights and biases, decoder bias) is drawn at
random too, so each weight is exercised. The model is saved by `save_pretrained` (safetensors)
and run, reloaded from the folder, with the eager and with the sdpa attention (no flash-attn:
padding is then not removed by unpadding; padded keys are masked in a 4-D mask and padded
positions still compute, so only real positions are compared). The .npz holds, for each
implementation, the per-layer hidden states (before the final norm), the last hidden state
(after it) and the masked-LM logits at every position; for a classifier, its pooled features
(`head` on the [CLS] or mean-pooled state) and its logits.
"""

import json
import sys

import numpy as np
import torch
from transformers import (
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForSequenceClassification,
    ModernBertModel,
)


def build(request):
    torch.manual_seed(request.get("seed", 0))
    kind = ModernBertForSequenceClassification if request.get("classifier") else \
        ModernBertForMaskedLM
    model = kind(ModernBertConfig(**request["config"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                base = 1.0 if name.endswith("norm.weight") else 0.0
                param.copy_(base + 0.1 * torch.randn_like(param))
    model.save_pretrained(request["save_dir"])


def run_classifier(request, ids, mask):
    """The classifier's pooled features (its `head` on the pooled state) and logits."""
    out = {}
    for attn in ("eager", "sdpa"):
        model = ModernBertForSequenceClassification.from_pretrained(
            request["save_dir"], attn_implementation=attn).eval()
        pooled = []
        model.head.register_forward_hook(lambda module, args, result: pooled.append(result))
        with torch.no_grad():
            out[f"{attn}_logits"] = model(input_ids=ids, attention_mask=mask).logits.numpy()
        out[f"{attn}_pooled"] = pooled[0].numpy()
        out[f"{attn}_implementation"] = np.array(model.config._attn_implementation)
    np.savez(request["out"], **out)


def run(request):
    ids = torch.tensor(request["input_ids"], dtype=torch.long)
    mask = torch.tensor(request["attention_mask"], dtype=torch.long)
    if request.get("classifier"):
        return run_classifier(request, ids, mask)
    out = {}
    for attn in ("eager", "sdpa"):
        mlm = ModernBertForMaskedLM.from_pretrained(request["save_dir"],
                                                    attn_implementation=attn).eval()
        base = ModernBertModel.from_pretrained(request["save_dir"],
                                               attn_implementation=attn).eval()
        with torch.no_grad():
            hidden = base(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            logits = mlm(input_ids=ids, attention_mask=mask).logits
        out[f"{attn}_layers"] = torch.stack(hidden.hidden_states[1:]).numpy()
        out[f"{attn}_last"] = hidden.last_hidden_state.numpy()
        out[f"{attn}_logits"] = logits.numpy()
        out[f"{attn}_implementation"] = np.array(base.config._attn_implementation)
    np.savez(request["out"], **out)


def main(path):
    with open(path, encoding="utf-8") as f:
        requests = json.load(f)
    # One request, or a list of them served by one interpreter (torch loads once).
    for request in requests if isinstance(requests, list) else [requests]:
        if request.get("new"):
            build(request)
        run(request)


if __name__ == "__main__":
    main(*sys.argv[1:])
