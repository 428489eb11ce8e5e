"""Classifier features: examples -> Google's classifier TFRecords, cached by what made them.

The layout is Google's `run_classifier.convert_single_example` (`[CLS] a [SEP] (b [SEP])`,
segment ids, zero padding, `label_ids`, `is_real_example`). Two differences from Google's and the
fork's scripts, both for correctness:

- Feature files are keyed on everything that produced them (vocabulary and SentencePiece model
  contents, casing, length, truncation, label list, task, and the size and modification time of
  the input files): `train.<key>.tf_record`. A changed flag or data file never reuses stale
  features (the fork reused `train.tf_record` whatever changed).
- Evaluation and prediction keep every example (no padding examples, no dropped tail): the
  input pipeline keeps the last partial batch.

`--truncation=head_tail` (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification")
keeps the first `head_tokens` and the last `max_seq_length - 2 - head_tokens` tokens of a long
single text instead of its beginning only (the paper's best: 128 + 382 at length 512). Sentence
pairs keep Google's rule (the longer text loses its last token first).
"""

import hashlib
import json
import os
from typing import Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from bert_mgpu.configs.classifier import TASK_TYPES
from bert_mgpu.data import features, file_io, tfrecord
from bert_mgpu.data.processors import DataError, InputExample, split_labels
from bert_mgpu.data.sequence import pack_tokens, window_spans
from bert_mgpu.progress import Progress

# Bumped whenever the feature layout written here changes, so old caches are not reused.
CACHE_FORMAT_VERSION = 1


def truncate_head_tail(tokens: List[str], budget: int, head_tokens: int) -> List[str]:
    """Keeps `head_tokens` tokens from the start and the rest of `budget` from the end."""
    if len(tokens) <= budget:
        return tokens
    head = min(head_tokens, budget)
    tail = budget - head
    return tokens[:head] + (tokens[-tail:] if tail else [])


def _index(label: Optional[str], label_map: Dict[str, int]) -> List[int]:
    return [label_map[label] if label is not None else 0]


def _score(label: Optional[str], label_map: Dict[str, int]) -> List[float]:
    del label_map  # a score is its own value
    return [float(label) if label is not None else 0.0]


def _multi_hot(label: Optional[str], label_map: Dict[str, int]) -> List[float]:
    hot = [0.0] * len(label_map)
    for name in split_labels(label or ""):
        hot[label_map[name]] = 1.0
    return hot


# TaskType.label_encoding -> label (None: an unlabelled test example) -> the label feature.
_LABEL_ENCODERS = {"index": _index, "score": _score, "multi_hot": _multi_hot}


def convert_single_example(example: InputExample, label_map: Dict[str, int],
                           max_seq_length: int, tokenizer, truncation: str = "head",
                           head_tokens: int = 128, tokens_a=None, tokens_b=None,
                           task_type: str = "classification") -> Dict:
    """One example -> the classifier feature dict (lists of ints).

    Args:
      example: `InputExample`; an unlabelled one (label None) gets label id 0.
      label_map: label -> id.
      max_seq_length: padded length.
      tokenizer: `FullTokenizer`.
      truncation: "head" (Google) or "head_tail".
      head_tokens: with head_tail, tokens kept from the start.
      tokens_a, tokens_b: already tokenized texts (batch tokenization), else tokenized here.
      task_type: "classification" (Google's record: `label_ids`), "regression" (`label_values`
        [1], the float score) or "multilabel" (`label_values` [len(label_map)], multi-hot).
    """
    if tokens_a is None:
        tokens_a = tokenizer.tokenize(example.text_a)
    if tokens_b is None and example.text_b is not None:
        tokens_b = tokenizer.tokenize(example.text_b)
    # Google's `if tokens_b:`: a second text without tokens is no second text.
    tokens_b = tokens_b or None
    if truncation == "head_tail" and tokens_b is None:
        tokens_a = truncate_head_tail(tokens_a, max_seq_length - 2, head_tokens)
    packed = pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer.convert_tokens_to_ids)
    out = {"input_ids": packed.input_ids, "input_mask": packed.input_mask,
           "segment_ids": packed.segment_ids}
    kind = TASK_TYPES[task_type]
    out[kind.label_feature] = _LABEL_ENCODERS[kind.label_encoding](example.label, label_map)
    out["is_real_example"] = [1]
    return out


def document_windows(num_a: int, num_b: Optional[int], max_seq_length: int, doc_stride: int):
    """The windows of one document (see the module's docstring).

    Args:
      num_a: pieces of text_a.
      num_b: pieces of text_b (None or 0: no second text, as Google's `if tokens_b:`).
      max_seq_length: the record length.
      doc_stride: pieces between window starts (>= 1).

    Returns:
      ((start, length) of each window over text_a, pieces of text_b kept in every window).
    """
    if not num_b:
        return window_spans(num_a, max(1, max_seq_length - 2), doc_stride), 0
    room = max_seq_length - 3  # [CLS] a [SEP] b [SEP]
    kept_b = min(num_b, max(room // 2, room - num_a))
    return window_spans(num_a, max(1, room - kept_b), doc_stride), kept_b


def convert_document(example: InputExample, label_map: Dict[str, int], max_seq_length: int,
                     tokenizer, doc_stride: int, doc_index: int, tokens_a=None, tokens_b=None,
                     task_type: str = "classification") -> List[Dict]:
    """One example -> the feature dicts of its windows (`convert_single_example`'s, each with
    `doc_index` [doc_index] and `window_weight` [1 / number of windows]).

    Args:
      example, label_map, max_seq_length, tokenizer, tokens_a, tokens_b, task_type: as
        `convert_single_example`'s.
      doc_stride: pieces between window starts (>= 1).
      doc_index: the example's index in its split.
    """
    if tokens_a is None:
        tokens_a = tokenizer.tokenize(example.text_a)
    if tokens_b is None and example.text_b is not None:
        tokens_b = tokenizer.tokenize(example.text_b)
    spans, kept_b = document_windows(len(tokens_a), len(tokens_b or ()), max_seq_length,
                                     doc_stride)
    # A list (possibly empty: no second text) so that convert_single_example does not
    # tokenize text_b again.
    tokens_b = list(tokens_b[:kept_b]) if tokens_b is not None else None
    weight = 1.0 / len(spans)
    out = []
    for start, length in spans:
        values = convert_single_example(example, label_map, max_seq_length, tokenizer,
                                        tokens_a=tokens_a[start:start + length],
                                        tokens_b=tokens_b, task_type=task_type)
        values[features.DOC_INDEX] = [doc_index]
        values[features.WINDOW_WEIGHT] = [weight]
        out.append(values)
    return out


def cache_key(task_name: str, split: str, input_files: Sequence[str], vocab_file: Optional[str],
              spm_model_file: Optional[str], do_lower_case: bool, max_seq_length: int,
              label_list: Sequence[str], truncation: str, head_tokens: int,
              task_type: str = "classification", processor: Optional[dict] = None,
              doc_stride: int = 0) -> str:
    """A short hash of everything the features of a split depend on (`processor`: what else
    the processor says keys them, e.g. a --processors_file's content; `doc_stride` only when
    windows are on, so the keys of earlier caches stay)."""
    parts = {
        "version": CACHE_FORMAT_VERSION, "task": task_name, "split": split,
        "inputs": [file_io.file_stats(p) for p in input_files],
        "vocab": file_io.file_sha256(vocab_file), "spm": file_io.file_sha256(spm_model_file),
        "do_lower_case": bool(do_lower_case), "max_seq_length": max_seq_length,
        "labels": list(label_list), "truncation": truncation,
        "head_tokens": head_tokens if truncation == "head_tail" else None,
    }
    if task_type != "classification":  # classification keys stay those of earlier caches
        parts["task_type"] = task_type
    if processor:
        parts["processor"] = processor
    if doc_stride > 0:
        parts["doc_stride"] = doc_stride
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def write_features(examples: Sequence[InputExample], label_list: Sequence[str],
                   max_seq_length: int, tokenizer, output_file: str, truncation: str = "head",
                   head_tokens: int = 128, task_type: str = "classification",
                   doc_stride: int = 0) -> int:
    """Writes Google's classifier records for `examples` (atomically; with `doc_stride` > 0,
    one windowed record per window: `convert_document`); returns the number of records."""
    label_map = {label: i for i, label in enumerate(label_list)}
    progress = Progress("examples", total=len(examples))
    batch = 1024
    count = 0
    # The temporary name is unique per process: several workers may write one cache file.
    with tfrecord.RecordFileWriter(output_file) as writer:
        for start in range(0, len(examples), batch):
            chunk = examples[start:start + batch]
            tokens_a = tokenizer.tokenize_batch([e.text_a for e in chunk])
            pairs = [i for i, e in enumerate(chunk) if e.text_b is not None]
            tokens_b = dict(zip(pairs, tokenizer.tokenize_batch([chunk[i].text_b
                                                                 for i in pairs])))
            for i, example in enumerate(chunk):
                if doc_stride > 0:
                    records = convert_document(example, label_map, max_seq_length, tokenizer,
                                               doc_stride, start + i, tokens_a[i],
                                               tokens_b.get(i), task_type)
                else:
                    records = [convert_single_example(
                        example, label_map, max_seq_length, tokenizer, truncation, head_tokens,
                        tokens_a[i], tokens_b.get(i), task_type)]
                for values in records:
                    writer.write(tfrecord.encode_example(values))
                count += len(records)
            progress.update(len(chunk))
    return count


def cached_features(examples_fn, split: str, output_dir: str, key: str, label_list,
                    max_seq_length: int, tokenizer, truncation: str, head_tokens: int,
                    task_type: str = "classification", doc_stride: int = 0):
    """Returns (path, number of records) of the split's features, writing them if needed;
    the `.json` beside them holds `num_examples` (records: windows with `doc_stride` > 0) and,
    with windows, `num_documents` (`feature_meta`).

    Args:
      examples_fn: () -> list of `InputExample` (only called when the cache misses).
      split: "train", "eval" or "predict" (Google's file stems).
      key: `cache_key(...)`.
    """
    path = os.path.join(output_dir, f"{split}.{key}.tf_record")
    meta_path = path + ".json"
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(meta_path):
        meta = feature_meta(path)
        logging.info("Reusing %s features (%d examples): %s", split, meta["num_examples"], path)
        return path, meta["num_examples"]
    examples = examples_fn()
    tf.io.gfile.makedirs(output_dir)
    n = write_features(examples, label_list, max_seq_length, tokenizer, path, truncation,
                       head_tokens, task_type, doc_stride)
    meta = {"num_examples": n, "key": key}
    if doc_stride > 0:
        meta["num_documents"] = len(examples)
    tmp = f"{meta_path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        json.dump(meta, f)
    tf.io.gfile.rename(tmp, meta_path, overwrite=True)
    if doc_stride > 0:
        logging.info("Wrote %s features (%d windows of %d documents): %s", split, n,
                     len(examples), path)
    else:
        logging.info("Wrote %s features (%d examples): %s", split, n, path)
    return path, n


def feature_meta(path: str) -> dict:
    """The `.json` beside a feature file `path`: `num_examples`, `key` (and `num_documents`
    for windowed records)."""
    with tf.io.gfile.GFile(path + ".json") as f:
        return json.load(f)


class FeatureFiles:
    """The cached feature files of a classifier run's splits (`train`, `dev`, `test`).

    The dev and test files a run will need (`--do_eval`, `--do_predict`) are read and checked
    when this is made, before training, so an unknown label, a wrong column or a file without
    examples fails at start, not after hours of training.
    """

    _STEMS = {"train": "train", "dev": "eval", "test": "predict"}  # Google's file stems

    def __init__(self, cfg, processor, tokenizer, label_list: Sequence[str]):
        """Args: cfg a `configs/classifier.py` `ClassifierConfig`; processor from
        `processors.get_processor`.

        Raises:
          DataError: a dev/test file the run needs is missing, malformed or has no example.
        """
        self.cfg, self.processor, self.tokenizer = cfg, processor, tokenizer
        self.label_list = list(label_list)
        self.task_type = cfg.task_type
        kind = TASK_TYPES[self.task_type]
        if kind.label_feature == "label_ids":
            self.shapes = features.classifier_shapes(cfg.model.max_seq_length)
        else:
            self.shapes = features.label_values_shapes(
                cfg.model.max_seq_length, kind.label_width(len(self.label_list)))
        if cfg.doc_stride > 0:
            self.shapes = features.with_windows(self.shapes)
        self._examples: Dict[str, List[InputExample]] = {}
        for split, needed in (("dev", cfg.do_eval), ("test", cfg.do_predict)):
            if needed and not self._cached(split):
                self._examples[split] = self._read(split)

    def _key(self, split: str) -> str:
        cfg, model = self.cfg, self.cfg.model
        return cache_key(cfg.task_name, split, self.processor.input_files(cfg.data_dir, split),
                         model.vocab_file, model.spm_model_file, model.do_lower_case,
                         model.max_seq_length, self.label_list, cfg.truncation, cfg.head_tokens,
                         self.task_type, self.processor.cache_parts(), cfg.doc_stride)

    def _path(self, split: str) -> str:
        return os.path.join(self.cfg.output_dir,
                            f"{self._STEMS[split]}.{self._key(split)}.tf_record")

    def _cached(self, split: str) -> bool:
        path = self._path(split)
        return tf.io.gfile.exists(path) and tf.io.gfile.exists(path + ".json")

    def _read(self, split: str) -> List[InputExample]:
        """The examples of `split` (read once); a split without any is an error."""
        if split in self._examples:
            return self._examples.pop(split)
        read = {"train": self.processor.get_train_examples,
                "dev": self.processor.get_dev_examples,
                "test": self.processor.get_test_examples}[split]
        examples = read(self.cfg.data_dir)
        if not examples:
            files = ", ".join(self.processor.input_files(self.cfg.data_dir, split))
            raise DataError(f"{files}: no {split} examples (a header row only, or no row "
                            f"this task reads)")
        return examples

    def get(self, split: str):
        """(path, number of examples) of `split`'s features, written if not cached."""
        cfg, model = self.cfg, self.cfg.model
        return cached_features(lambda: self._read(split), self._STEMS[split], cfg.output_dir,
                               self._key(split), self.label_list, model.max_seq_length,
                               self.tokenizer, cfg.truncation, cfg.head_tokens, self.task_type,
                               cfg.doc_stride)

    def num_documents(self, split: str) -> int:
        """The documents of `split`'s windowed records (--doc_stride; after `get(split)`)."""
        return int(feature_meta(self._path(split))["num_documents"])


def pool_windows(values, doc_index, num_documents: int, pooling: str):
    """Each document's pooled value over its windows (host side, eval and predict).

    Args:
      values: float array [num_windows, ...] (a window's probabilities or score).
      doc_index: int array [num_windows], each window's document (0 .. num_documents - 1).
      num_documents: documents of the split; each must have a window.
      pooling: "mean" or "max" (elementwise over the document's windows).

    Returns:
      float64 array [num_documents, ...].

    Raises:
      RuntimeError: a document without a window (the records are not the split's).
    """
    import numpy as np

    values = np.asarray(values, np.float64)
    docs = np.asarray(doc_index, np.int64).reshape(-1)
    counts = np.bincount(docs, minlength=num_documents)
    if len(counts) != num_documents or not counts.all():
        raise RuntimeError(f"windows of {np.count_nonzero(counts)} documents, expected "
                           f"{num_documents} (documents 0..{num_documents - 1})")
    shape = (num_documents,) + values.shape[1:]
    if pooling == "max":
        out = np.full(shape, -np.inf)
        np.maximum.at(out, docs, values)
        return out
    out = np.zeros(shape)
    np.add.at(out, docs, values)
    return out / counts.reshape((-1,) + (1,) * (values.ndim - 1))


def document_values(values, doc_index, num_documents: int):
    """Each document's value of a feature its windows share (e.g. the label): array
    [num_documents, ...] from `values` [num_windows, ...]."""
    import numpy as np

    values = np.asarray(values)
    out = np.zeros((num_documents,) + values.shape[1:], values.dtype)
    out[np.asarray(doc_index, np.int64).reshape(-1)] = values
    return out


def _write_lines_atomically(path: str, lines) -> None:
    tmp = f"{path}.incomplete-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        for line in lines:
            f.write(line)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_predictions(output_dir: str, probabilities,
                      labels: Optional[Sequence[str]] = None) -> None:
    """test_results.tsv (Google: one row of class probabilities per test example) and
    predict.txt (the fork: one predicted label index per line), in input order; with `labels`,
    label_list.txt (what each index means)."""
    import numpy as np

    if labels is not None:
        write_label_list(output_dir, labels)

    _write_lines_atomically(
        os.path.join(output_dir, "test_results.tsv"),
        ("\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    _write_lines_atomically(
        os.path.join(output_dir, "predict.txt"),
        (f"{int(i)}\n" for i in np.argmax(probabilities, axis=-1)))


def write_regression_predictions(output_dir: str, scores) -> None:
    """--task_type=regression: test_results.tsv and predict.txt both hold one predicted score
    per test example, in input order."""
    lines = [f"{float(x)}\n" for x in scores]
    _write_lines_atomically(os.path.join(output_dir, "test_results.tsv"), lines)
    _write_lines_atomically(os.path.join(output_dir, "predict.txt"), lines)


def write_multilabel_predictions(output_dir: str, probabilities, label_names: Sequence[str],
                                 threshold: float) -> None:
    """--task_type=multilabel: test_results.tsv holds each label's probability (label-list
    order, as label_list.txt), predict.txt the labels above `threshold` joined by commas (an
    empty line: none)."""
    write_label_list(output_dir, label_names)
    _write_lines_atomically(
        os.path.join(output_dir, "test_results.tsv"),
        ("\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    _write_lines_atomically(
        os.path.join(output_dir, "predict.txt"),
        (",".join(name for name, p in zip(label_names, row) if p > threshold) + "\n"
         for row in probabilities))


def _saved_labels(run_dir: str) -> Optional[List[str]]:
    """The `labels` of run_dir/run_config.json (a single-task run's), or None."""
    path = os.path.join(run_dir, "run_config.json")
    try:
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as f:
            saved = json.load(f).get("labels")
    except (ValueError, OSError, tf.errors.OpError):
        return None
    return [str(name) for name in saved] if isinstance(saved, list) else None


def run_labels(cfg, labels: Sequence[str]) -> List[str]:
    """The label list of a classifier run (`cfg`: one task's config), logged with its indices.

    A label list made from the data (tsv without --label_list) whose labels are those of an earlier
    run keeps that run's order: the run in --output_dir (a resumed run), else the run that wrote
    --init_checkpoint (its run_config.json beside it). Its head was trained with those indices, and
    earlier versions sorted integer labels as strings ('10' before '2'), which numeric order would
    silently reinterpret.
    """
    labels = list(labels)
    if labels and cfg.task_name == "tsv" and not cfg.label_list:
        dirs = [cfg.output_dir]
        if cfg.model.init_checkpoint:
            dirs.append(os.path.dirname(cfg.model.init_checkpoint))
        for run_dir in dirs:
            saved = _saved_labels(run_dir) if run_dir else None
            if saved and saved != labels and sorted(saved) == sorted(labels):
                logging.info("Keeping the label order of the run in %s (its run_config.json), "
                             "whose output layer was trained with it: %s (not %s)", run_dir,
                             saved, labels)
                labels = saved
                break
    if labels:
        logging.info("Labels (index: label, as in predict.txt and label_list.txt): %s",
                     ", ".join(f"{i}: {name}" for i, name in enumerate(labels)))
    return labels


def write_label_list(output_dir: str, labels: Sequence[str]) -> None:
    """label_list.txt beside predict.txt: line i + 1 is the label of index i (predict.txt's
    indices, test_results.tsv's columns)."""
    _write_lines_atomically(os.path.join(output_dir, "label_list.txt"),
                            (f"{name}\n" for name in labels))
