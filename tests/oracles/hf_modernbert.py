"""Hugging Face ModernBERT as the reference (test oracle; oracle venv only).

Usage: python hf_modernbert.py REQUEST.json  (one request or a list of them)

REQUEST: {"save_dir": folder to save a new random model into (or to load from), "new": true to
build one (config keys in "config", seed in "seed"), "classifier": true for a
ModernBertForSequenceClassification (else ModernBertForMaskedLM; or "kind": "classifier",
"token" (ModernBertForTokenClassification), "qa" (ModernBertForQuestionAnswering),
"multiple_choice" (ModernBertForMultipleChoice: ids and mask [B, C, L], logits [B, C])),
"input_ids": [[...]], "attention_mask": [[...]], "out": .npz path, optional "labels" (a
classifier: [B]; token: [B, S] with -100 where unlabelled) or "start_positions" /
"end_positions" [B] (qa)}.

A new model's every 1-D parameter (LayerNorm weights and biases, decoder bias) is drawn at
random too, so each weight is exercised. The model is saved by `save_pretrained` (safetensors)
and run, reloaded from the folder, with the eager and with the sdpa attention (no flash-attn:
padding is then not removed by unpadding; padded keys are masked in a 4-D mask and padded
positions still compute, so only real positions are compared). The .npz holds, for each
implementation, the per-layer hidden states (before the final norm), the last hidden state
(after it) and the masked-LM logits at every position; for a classifier, its pooled features
(`head` on the [CLS] or mean-pooled state) and its logits. A head model with labels also
gives its loss (`{attn}_loss`) and, from the eager run, the loss's gradient of every parameter
(`grad/<name>`, Hugging Face's names); a token or qa model gives its logits (qa: start_logits
and end_logits).
"""

import json
import sys

import numpy as np
import torch
from transformers import (
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForMultipleChoice,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
)

HEAD_MODELS = {"classifier": ModernBertForSequenceClassification,
               "token": ModernBertForTokenClassification, "qa": ModernBertForQuestionAnswering,
               "multiple_choice": ModernBertForMultipleChoice}


def kind_of(request):
    return request.get("kind") or ("classifier" if request.get("classifier") else "masked_lm")


def build(request):
    torch.manual_seed(request.get("seed", 0))
    kind = HEAD_MODELS.get(kind_of(request), ModernBertForMaskedLM)
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


def run_head(request, ids, mask):
    """A token or qa model's logits, and with labels its loss and (eager) gradients."""
    targets = {key: torch.tensor(request[key], dtype=torch.long)
               for key in ("labels", "start_positions", "end_positions") if key in request}
    out = {}
    for attn in ("eager", "sdpa"):
        model = HEAD_MODELS[kind_of(request)].from_pretrained(
            request["save_dir"], attn_implementation=attn).eval()
        result = model(input_ids=ids, attention_mask=mask, **targets)
        for name in ("logits", "start_logits", "end_logits"):
            if getattr(result, name, None) is not None:
                out[f"{attn}_{name}"] = getattr(result, name).detach().numpy()
        out[f"{attn}_implementation"] = np.array(model.config._attn_implementation)
        if result.loss is not None:
            out[f"{attn}_loss"] = result.loss.detach().numpy()
            if attn == "eager":
                result.loss.backward()
                out.update({f"grad/{name}": param.grad.numpy()
                            for name, param in model.named_parameters()
                            if param.grad is not None})
    np.savez(request["out"], **out)


def run(request):
    ids = torch.tensor(request["input_ids"], dtype=torch.long)
    mask = torch.tensor(request["attention_mask"], dtype=torch.long)
    if kind_of(request) == "classifier" and "labels" not in request:
        return run_classifier(request, ids, mask)
    if kind_of(request) in HEAD_MODELS:
        return run_head(request, ids, mask)
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
