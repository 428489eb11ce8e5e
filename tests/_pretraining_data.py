"""Small synthetic pretraining TFRecords and a tiny BERT config for trainer tests."""

import json

import numpy as np
import tensorflow as tf

from bert_mgpu.data import tfrecord

SEQ, PREDS, VOCAB = 16, 4, 100
# One layer: what the trainer and script tests check does not depend on depth, and a run's
# tracing and XLA compilation, most of a tiny run's time, grow with it (the whole suite: pytest
# 25:18 and 44.8 CPU-minutes against 26:20-28:26 and 44-48 with two layers, within this host's
# spread). Tests where depth matters (every layer's variables listed, the learning case of
# test_collapse, layer-wise rates) say their own num_hidden_layers.
TINY_CONFIG = {
    "vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
    "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def write_records(path, n, seed=0, seq=SEQ, preds=PREDS):
    """n random but well-formed pretraining records (Google's features) at `path`."""
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(n):
            length = rng.randint(5, seq + 1)
            ids = np.zeros(seq, int)
            ids[:length] = rng.randint(1, VOCAB, size=length)
            mask = (np.arange(seq) < length).astype(int)
            segments = ((np.arange(seq) >= length // 2) & (mask == 1)).astype(int)
            k = min(preds, length - 1)
            positions = np.zeros(preds, int)
            positions[:k] = np.sort(rng.choice(np.arange(1, length), size=k, replace=False))
            weights = (np.arange(preds) < k).astype(float)
            writer.write(tfrecord.encode_example({
                "input_ids": ids.tolist(), "input_mask": mask.tolist(),
                "segment_ids": segments.tolist(), "masked_lm_positions": positions.tolist(),
                # The "masked" tokens are left in the input: a learnable copy task, so a
                # short run shows the loss falling.
                "masked_lm_ids": np.where(weights > 0, ids[positions], 0).tolist(),
                "masked_lm_weights": weights.tolist(),
                "next_sentence_labels": [int(rng.randint(2))]}))
    return str(path)


# What every real run has: the script-level resume, tower and worker tests train with it.
DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def write_config(path, **changes):
    path.write_text(json.dumps(dict(TINY_CONFIG, **changes)))
    return str(path)
