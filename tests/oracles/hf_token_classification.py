"""Oracle: Hugging Face `BertForTokenClassification` logits and loss on given weights and windows.

Request JSON: `config` (bert_config.json keys), `num_labels`, `weights` (an .npz of Hugging Face
parameter names -> arrays), `batch` (an .npz with input_ids, input_mask, segment_ids, label_ids,
label_weights [B, S]). Labels of weight-0 positions become -100 (ignored), Hugging Face's way of
labelling only first pieces. Prints JSON: `logits` [B, S, num_labels] and `loss` (the mean
cross-entropy over the labelled positions), in eval mode (no dropout).
"""

import json
import sys

import numpy as np
import torch
from transformers import BertConfig, BertForTokenClassification


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    g = request["config"]
    # Google's "gelu" is the tanh approximation: Hugging Face's "gelu_new".
    config = BertConfig(
        vocab_size=g["vocab_size"], hidden_size=g["hidden_size"],
        num_hidden_layers=g["num_hidden_layers"], num_attention_heads=g["num_attention_heads"],
        intermediate_size=g["intermediate_size"], hidden_act="gelu_new",
        hidden_dropout_prob=g["hidden_dropout_prob"],
        attention_probs_dropout_prob=g["attention_probs_dropout_prob"],
        max_position_embeddings=g["max_position_embeddings"],
        type_vocab_size=g["type_vocab_size"], layer_norm_eps=1e-12,
        num_labels=request["num_labels"])
    model = BertForTokenClassification(config)
    weights = np.load(request["weights"])
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(np.ascontiguousarray(weights[k])) for k in weights.files},
        strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise SystemExit(f"missing {missing}, unexpected {unexpected}")
    model.eval()
    batch = np.load(request["batch"])
    labels = np.where(batch["label_weights"] > 0, batch["label_ids"], -100)
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(batch["input_ids"].astype(np.int64)),
                    attention_mask=torch.from_numpy(batch["input_mask"].astype(np.int64)),
                    token_type_ids=torch.from_numpy(batch["segment_ids"].astype(np.int64)),
                    labels=torch.from_numpy(labels.astype(np.int64)))
    print(json.dumps({"logits": out.logits.numpy().tolist(), "loss": float(out.loss)}))


if __name__ == "__main__":
    main()
