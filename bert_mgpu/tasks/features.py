"""extract_features.py's job: per-token activations of chosen layers, as Google's JSON lines.

Input: one example per line, a pair written `text_a ||| text_b`. Output: one JSON object per input
line, in input order, exactly Google's layout:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
      "values": [0.123456, ...]}, ...]}, ...]}

with values rounded to 6 decimals as Google's `round(float(x), 6)`. Every input line (empty ones
included, as Google's reader) gets an output line. The output is written to a temporary file and
renamed at the end, so an interrupted run leaves no truncated file behind. A line longer than
--max_seq_length is truncated as Google's script does, with a warning counting such lines.
"""

import json
import os
from typing import Iterator, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.data import checks, text_examples
from bert_mgpu.data.sequence import pack_tokens
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig, read_bert_config
from bert_mgpu.progress import Progress


def _batches(iterable, size) -> Iterator[list]:
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def layer_json(unique_id: int, tokens: List[str], layer_indexes, layer_values) -> str:
    """One output line. layer_values[j]: float array [len(tokens), hidden] of layer_indexes[j]."""
    rows = [[[round(x, 6) for x in values[i].tolist()] for values in layer_values]
            for i in range(len(tokens))]
    features = [{"token": token,
                 "layers": [{"index": index, "values": row[j]}
                            for j, index in enumerate(layer_indexes)]}
                for token, row in zip(tokens, rows)]
    return json.dumps({"linex_index": unique_id, "features": features})


class FeatureExtractor:
    """A BERT model loaded from a checkpoint, returning the chosen layers for a batch."""

    def __init__(self, bert_config: BertConfig, init_checkpoint: str, layer_indexes,
                 max_seq_length: int):
        n = bert_config.num_hidden_layers
        for index in layer_indexes:
            if not -n <= index < n:
                raise ValueError(f"--layers: index {index} is out of range for a model with "
                                 f"{n} layers (valid: {-n}..{n - 1})")
        self.layer_indexes = list(layer_indexes)
        self.max_seq_length = max_seq_length
        self.model = modeling.BertModel(bert_config)
        checkpoint.init_from_checkpoint(init_checkpoint, self.model.named_variables())
        spec = tf.TensorSpec([None, max_seq_length], tf.int32)
        self._run = tf.function(self._layers, input_signature=[spec, spec, spec],
                                autograph=False)

    def _layers(self, input_ids, input_mask, segment_ids):
        out = self.model(input_ids, input_mask, segment_ids, training=False)
        return [out.all_encoder_layers[i] for i in self.layer_indexes]

    def __call__(self, input_ids, input_mask, segment_ids) -> List[np.ndarray]:
        """int32 arrays [B, S] -> list (one per layer index) of float32 arrays [B, S, hidden]."""
        return [t.numpy() for t in self._run(input_ids, input_mask, segment_ids)]


def read_input_lines(input_file: str) -> List[str]:
    """The lines of `--input_file`.

    Raises:
      FileNotFoundError: the file is missing.
      ValueError: it is a directory, or has no line (nothing to extract).
    """
    if not tf.io.gfile.exists(input_file):
        raise FileNotFoundError(f"--input_file: {input_file} not found")
    if tf.io.gfile.isdir(input_file):
        raise ValueError(f"--input_file: {input_file} is a directory, not a text file")
    with tf.io.gfile.GFile(input_file, "r") as f:
        text = f.read()
    lines = (text[1:] if text.startswith("\ufeff") else text).splitlines()  # a byte-order mark
    if not lines:
        raise ValueError(f"--input_file: {input_file} is empty (one example per line expected)")
    return lines


class _TruncationCount:
    """Input lines longer than --max_seq_length: counted, the first one remembered."""

    def __init__(self, max_seq_length: int):
        self.max_seq_length = max_seq_length
        self.count = 0
        self.first_line = None  # 1-based line number in --input_file

    def check(self, unique_id: int, tokens_a: List[str], tokens_b: Optional[List[str]]):
        room = self.max_seq_length - (3 if tokens_b is not None else 2)
        if len(tokens_a) + len(tokens_b or ()) > room:
            self.count += 1
            if self.first_line is None:
                self.first_line = unique_id + 1

    def warn(self, input_file: str, num_lines: int) -> None:
        if self.count:
            logging.warning("%d of %d input line(s) of %s are longer than --max_seq_length=%d "
                            "tokens and were truncated (the first: line %d); their output "
                            "covers the kept tokens only", self.count, num_lines, input_file,
                            self.max_seq_length, self.first_line)


def write_features(input_file: str, output_file: str, tokenizer, extractor: FeatureExtractor,
                   batch_size: int) -> int:
    """Writes one JSON line per line of `input_file` (atomically); returns the count.

    The output's directory is created if missing. Lines longer than the model's input are
    truncated as Google's script does, with a warning that counts them.
    """
    lines = read_input_lines(input_file)
    directory = os.path.dirname(output_file)
    if directory:
        tf.io.gfile.makedirs(directory)
    progress = Progress("lines", total=len(lines))
    truncated = _TruncationCount(extractor.max_seq_length)
    tmp_path = f"{output_file}.incomplete-{os.getpid()}"
    try:
        with tf.io.gfile.GFile(tmp_path, "w") as writer:
            for batch in _batches(text_examples.read_examples(lines), batch_size):
                tokens_a = tokenizer.tokenize_batch([ex.text_a for ex in batch])
                pairs = [i for i, ex in enumerate(batch) if ex.text_b is not None]
                tokens_b = dict(zip(pairs, tokenizer.tokenize_batch([batch[i].text_b
                                                                     for i in pairs])))
                for i, example in enumerate(batch):
                    truncated.check(example.unique_id, tokens_a[i], tokens_b.get(i))
                packed = [pack_tokens(tokens_a[i], tokens_b.get(i), extractor.max_seq_length,
                                      tokenizer.convert_tokens_to_ids)
                          for i in range(len(batch))]
                arrays = [np.array([getattr(p, field) for p in packed], np.int32)
                          for field in ("input_ids", "input_mask", "segment_ids")]
                layers = extractor(*arrays)
                for b, (example, p) in enumerate(zip(batch, packed)):
                    n = len(p.tokens)
                    writer.write(layer_json(example.unique_id, p.tokens,
                                            extractor.layer_indexes,
                                            [values[b, :n] for values in layers]) + "\n")
                progress.update(len(batch))
        tf.io.gfile.rename(tmp_path, output_file, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(tmp_path):
            tf.io.gfile.remove(tmp_path)
        raise
    progress.done()
    truncated.warn(input_file, len(lines))
    logging.info("Wrote %d lines to %s", len(lines), output_file)
    return len(lines)


def extract_features(cfg) -> int:
    """Runs extract_features.py with a configs/features.py `ExtractFeaturesConfig`; returns the
    number of output lines."""
    tokenizer = checks.tokenizer_for(cfg.model)
    extractor = FeatureExtractor(read_bert_config(cfg.model), cfg.model.init_checkpoint, cfg.layers,
                                 cfg.model.max_seq_length)
    return write_features(cfg.input_file, cfg.output_file, tokenizer, extractor, cfg.batch_size)
