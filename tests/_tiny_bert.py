"""A tiny $BERT_BASE_DIR (vocab.txt, bert_config.json, bert_model.ckpt) for script runs whose
commands are users' own, paths and all."""

import json

from _pretraining_data import TINY_CONFIG

from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig

WORDS = ("the movie was good bad great terrible fine boring fun long short and but not very "
         "really quite story actors plot music ending").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS


def tiny_bert_dir(model_dir, max_position_embeddings=128):
    """Writes the three files of a Google model directory (1 layer, hidden 32) into
    `model_dir` (a pathlib.Path, created); returns it as a string."""
    model_dir.mkdir(parents=True)
    (model_dir / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = dict(TINY_CONFIG, vocab_size=len(VOCAB),
                  max_position_embeddings=max_position_embeddings)
    (model_dir / "bert_config.json").write_text(json.dumps(config))
    checkpoint.write_bundle(str(model_dir / "bert_model.ckpt"),
                            modeling.BertModel(BertConfig(**config)).named_variables())
    return str(model_dir)
