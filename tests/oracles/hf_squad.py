"""Hugging Face `BertForQuestionAnswering` start/end logits, a test oracle for run_squad.py.

Usage: python hf_squad.py REQUEST.json (oracle venv: torch, transformers; HF_HUB_OFFLINE=1)
REQUEST: {"model_dir": a Hugging Face BERT folder (config.json, model.safetensors),
          "head": .npz with `output_weights` [2, H] and `output_bias` [2] (Google's
              cls/squad/* names and layout),
          "inputs": .npz with `input_ids`, `input_mask`, `segment_ids` int [N, S],
          "batch_size": int, "output": .npz path}
Writes `start_logits`, `end_logits` float32 [N, S].

The encoder is the folder's, loaded by transformers itself; `qa_outputs` (a torch Linear, weight
[out=2, in=H]) gets Google's `output_weights` [2, H] as is (Google applies it transposed, which is
what a Linear does) and the bias; logit 0 is the start, 1 the end, as in both codes.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(request_path):
    import numpy as np
    import torch
    from transformers import BertForQuestionAnswering
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the untrained qa_outputs warning: it is set below
    with open(request_path) as f:
        request = json.load(f)
    model = BertForQuestionAnswering.from_pretrained(request["model_dir"])
    model.eval()
    head = np.load(request["head"])
    with torch.no_grad():
        model.qa_outputs.weight.copy_(torch.from_numpy(head["output_weights"]))
        model.qa_outputs.bias.copy_(torch.from_numpy(head["output_bias"]))
    inputs = np.load(request["inputs"])
    n = inputs["input_ids"].shape[0]
    starts, ends = [], []
    with torch.no_grad():
        for i in range(0, n, request["batch_size"]):
            part = slice(i, i + request["batch_size"])
            out = model(input_ids=torch.from_numpy(inputs["input_ids"][part].astype(np.int64)),
                        attention_mask=torch.from_numpy(
                            inputs["input_mask"][part].astype(np.int64)),
                        token_type_ids=torch.from_numpy(
                            inputs["segment_ids"][part].astype(np.int64)))
            starts.append(out.start_logits.numpy())
            ends.append(out.end_logits.numpy())
    np.savez(request["output"], start_logits=np.concatenate(starts).astype(np.float32),
             end_logits=np.concatenate(ends).astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
