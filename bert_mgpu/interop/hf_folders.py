"""The converters' entry points: one call per direction, dispatching on the model family.

Hugging Face -> here: `config.json`'s `model_type` ("bert": `hf_checkpoint`; "modernbert":
`hf_modernbert`). Here -> Hugging Face: `bert_config.json`'s keys (`position_embedding_type:
"rope"`, the ModernBERT shape: `hf_modernbert`; otherwise BERT: `hf_export`).
"""

import json
import os
from typing import Dict, Optional, Sequence

from bert_mgpu.interop import hf_checkpoint, hf_export, hf_modernbert
from bert_mgpu.interop.hf_checkpoint import ConversionError


def _read_json(path: str) -> Dict:
    if not os.path.exists(path):
        raise ConversionError(f"{path}: not found")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def convert_hf_folder(hf_model_dir: str, output_dir: str, gelu: str = "exact") -> Dict[str, str]:
    """A Hugging Face folder (BERT or ModernBERT) -> this project's files; returns the paths.
    `gelu` applies to BERT's "gelu" (hf_checkpoint.convert_config); ModernBERT's keeps its
    numerics ("gelu" -> "gelu_exact")."""
    hf_config = _read_json(os.path.join(hf_model_dir, "config.json"))
    if hf_config.get("model_type") == "modernbert":
        return hf_modernbert.convert_folder(hf_model_dir, hf_config, output_dir)
    return hf_checkpoint.convert_folder(hf_model_dir, output_dir, gelu)


def convert_to_hf(bert_config_file: str, init_checkpoint: str, vocab_file: str,
                  do_lower_case: bool, output_dir: str, labels: Optional[Sequence[str]] = None,
                  task_label: Optional[str] = None) -> Dict[str, str]:
    """A checkpoint here -> a Hugging Face folder; returns the paths. A ModernBERT-shaped one
    takes its tokenizer files from --vocab_file's folder (its tokenizer.json) and is written as
    its fine-tuned head's model, else as the masked-LM model (hf_modernbert.export_checkpoint)."""
    bert_config = _read_json(bert_config_file)
    if bert_config.get("position_embedding_type") == "rope":
        return hf_modernbert.export_checkpoint(bert_config, bert_config_file, init_checkpoint,
                                               os.path.dirname(os.path.abspath(vocab_file)),
                                               output_dir, labels, task_label)
    return hf_export.convert_checkpoint(bert_config_file, init_checkpoint, vocab_file,
                                        do_lower_case, output_dir, labels, task_label)
