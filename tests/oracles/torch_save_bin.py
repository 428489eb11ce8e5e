"""Writes a real `pytorch_model.bin` with PyTorch from a `model.safetensors` (test oracle).

Usage: python torch_save_bin.py MODEL.safetensors OUT/pytorch_model.bin [fp32|bf16|fp16] [view]

With `view`, adds a non-contiguous tensor `extra.strided_view` (arange(12) as 3x4, transposed).
Run in the oracle venv only; the project reads .bin files without PyTorch.
"""

import sys

import torch
from safetensors.torch import load_file


def main(src, dst, dtype="fp32", view=None):
    state = load_file(src)
    if dtype != "fp32":
        cast = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        state = {k: v.to(cast) if v.is_floating_point() else v for k, v in state.items()}
    if view:
        # A transposed view, so the reader must honour strides rather than assume contiguity.
        state["extra.strided_view"] = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    torch.save(state, dst)


if __name__ == "__main__":
    main(*sys.argv[1:])
