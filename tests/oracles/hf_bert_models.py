"""Hugging Face transformers (PyTorch CPU) on BERT folders: random models saved with
`save_pretrained`, and the outputs of a folder's models. Oracle venv only. Usage:

    python hf_bert_models.py REQUEST.json

REQUEST {"save": [{"class": "BertForPreTraining", "dir": ..., "config": {...}, "seed": 0}],
         "run": [{"class": ..., "dir": ..., "input_ids": [[...]], "attention_mask": [[...]],
                  "token_type_ids": [[...]]}]}
Prints JSON: per "run" entry the outputs as lists (last_hidden_state, pooler_output,
prediction_logits, seq_relationship_logits, logits), plus "hidden_act" and "id2label" of the
loaded config.
"""

import json
import sys

import torch
import transformers


def save(entry):
    torch.manual_seed(entry.get("seed", 0))
    config = transformers.BertConfig(**entry["config"])
    model = getattr(transformers, entry["class"])(config)
    # Random biases and LayerNorm parameters too (they start at 0/1), so every tensor matters.
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    model.save_pretrained(entry["dir"])


def run(entry):
    model = getattr(transformers, entry["class"]).from_pretrained(entry["dir"])
    model.eval()
    inputs = {k: torch.tensor(entry[k]) for k in ("input_ids", "attention_mask",
                                                   "token_type_ids")}
    with torch.no_grad():
        out = model(**inputs)
    result = {k: out[k].tolist() for k in ("last_hidden_state", "pooler_output",
                                          "prediction_logits", "seq_relationship_logits",
                                          "logits") if k in out}
    result["hidden_act"] = model.config.hidden_act
    result["id2label"] = {str(k): v for k, v in model.config.id2label.items()}
    return result


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    for entry in request.get("save", []):
        save(entry)
    print(json.dumps([run(entry) for entry in request.get("run", [])]))


if __name__ == "__main__":
    main(sys.argv[1])
