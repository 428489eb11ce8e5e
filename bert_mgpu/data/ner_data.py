"""Token classification (NER) data: CoNLL files -> windowed WordPiece records -> tags per token.

Input: `train.txt`, `dev.txt`, `test.txt` in CoNLL layout, one token per line with its tag in
the last column (columns in between, e.g. CoNLL-2003's POS and chunk tags, are ignored), a blank
line between sentences, `-DOCSTART-` lines skipped. UTF-8 with or without a BOM, `\\n` or `\\r\\n`
line endings. Tags are `O` or `B-`/`I-`/`E-`/`S-` + type (BIO or BIOES; the type is free). The
tag list is `O` followed by the sorted other training tags, unless given.

Features (one record per window; names and lengths in `ner_shapes`):

    tokens:        [CLS] jim hen ##son was a puppet ##eer [SEP] (padding)
    label_ids:     0     PER PER 0     O   O O      0     0
    label_weights: 0     1   1   0     1   1 1      0     0       (first piece of each word)

- Each word is WordPiece-tokenized on its own (`FullTokenizer`; with a byte-level BPE
  `tokenizer.json`, ModernBERT's, the sentence is encoded as its words joined by spaces and the
  pieces go to words by their offsets: `tokenize_words`); the word's tag id goes on its
  first piece with weight 1.0, every other position (later pieces, [CLS], [SEP], padding) has
  label id 0 and weight 0.0, so the loss `sum(weight * xent) / sum(weight)` and the token
  metrics count each word once.
- A sentence longer than `max_seq_length - 2` pieces is split into windows of at most that many
  pieces, each starting `doc_stride` pieces after the previous one (Google's `run_squad.py`
  document spans), so every piece is in some window. A word whose first piece falls in several
  windows is labelled (weight 1) and predicted only in the window where that piece has the most
  context: max over windows of min(pieces to its left, pieces to its right) + 0.01 * window
  length, the first such window on ties (Google's `_check_is_max_context`).
- A word that tokenizes to nothing (e.g. only control or zero-width characters) has no piece,
  so no label; it is still written back to `predictions.txt`, predicted `O`.

Prediction: `predicted_tags` maps per-window label ids back to one tag per original word, and
`write_predictions` writes `predictions.txt` as `token gold predicted` lines (conlleval input).
"""

import collections
import hashlib
import json
import os
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from bert_mgpu.configs.ner import default_doc_stride
from bert_mgpu.data import checks, features, file_io, tfrecord
from bert_mgpu.data.processors import DataError
from bert_mgpu.data.sequence import window_spans

# Bumped whenever the feature layout written here changes, so old caches are not reused.
CACHE_FORMAT_VERSION = 1

NER_FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_weights")
# The features with a sequence axis, which a batch trimmed to its longest window cuts
# (input_pipeline.trim_padding): BERT's inputs and the per-piece labels and weights.
SEQUENCE_FEATURES = features.SEQUENCE_FEATURES | {"label_ids", "label_weights"}
DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
PREFIXES = ("B", "I", "E", "S")
SPLIT_FILES = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}


class NerDataError(DataError):
    """A CoNLL file or tag list that cannot be used; the message names file and line."""


class Sentence(NamedTuple):
    """One sentence of a CoNLL file.

    Attributes:
      guid: "<split>-<index>", e.g. "train-12".
      words: list of str, the tokens (first column).
      tags: list of str, one tag per word (last column).
      lines: list of int, the 1-based line number of each word (for error messages).
      source: str, the file it was read from.
    """
    guid: str
    words: List[str]
    tags: List[str]
    lines: List[int]
    source: str = ""


def _read_text(path: str) -> str:
    if "://" in path:  # gs:// and other remote file systems go through TensorFlow
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        if not tf.io.gfile.exists(path):
            raise NerDataError(f"{path}: not found")
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise NerDataError(f"{path}: not found") from None
    try:
        # utf-8-sig drops a leading byte-order mark (Windows editors write one).
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise NerDataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


def check_tag(tag: str, path: str, line: int) -> None:
    """Raises NerDataError unless `tag` is `O` or one of B/I/E/S + '-' + a non-empty type."""
    if tag == OUTSIDE:
        return
    prefix, sep, type_ = tag.partition("-")
    if not sep or prefix not in PREFIXES or not type_:
        raise NerDataError(f"{path}:{line}: tag {tag!r} is neither 'O' nor B-/I-/E-/S- "
                           "followed by a type (BIO or BIOES tags)")


def read_conll(path: str, split: str = "") -> List[Sentence]:
    """Reads the sentences of a CoNLL file.

    Args:
      path: the file (local or gs://).
      split: prefix of the guids ("train", "dev", "test"); defaults to the file name's stem.

    Returns:
      list of Sentence, in file order (empty sentences never occur).

    Raises:
      NerDataError: missing file, bad UTF-8, a line with fewer than 2 columns, a malformed tag,
        or no sentence at all; naming the file and line.
    """
    split = split or os.path.splitext(os.path.basename(path))[0]
    text = _read_text(path)
    sentences: List[Sentence] = []
    words: List[str] = []
    tags: List[str] = []
    lines: List[int] = []

    def flush():
        if words:
            sentences.append(Sentence(f"{split}-{len(sentences)}", list(words), list(tags),
                                      list(lines), path))
            words.clear()
            tags.clear()
            lines.clear()

    # Split on "\n" only: str.splitlines would also break at U+2028, U+0085, ... inside tokens.
    for number, raw in enumerate(text.split("\n"), 1):
        fields = raw.split()  # any whitespace; also strips a "\r" left by "\r\n"
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            # A document break is a sentence break (usually followed by a blank line anyway).
            flush()
            continue
        if len(fields) < 2:
            raise NerDataError(f"{path}:{number}: expected a token and a tag separated by "
                               f"whitespace, got {raw.strip()!r}")
        check_tag(fields[-1], path, number)
        words.append(fields[0])
        tags.append(fields[-1])
        lines.append(number)
    flush()
    if not sentences:
        raise NerDataError(f"{path}: no sentences (expected 'token tag' lines)")
    return sentences


def read_split(data_dir: str, split: str) -> List[Sentence]:
    """`read_conll` of `train.txt`, `dev.txt` or `test.txt` in `data_dir`."""
    return read_conll(os.path.join(data_dir, SPLIT_FILES[split]), split)


def get_labels(sentences: Sequence[Sentence], label_list: Optional[Sequence[str]] = None
               ) -> List[str]:
    """The tag list: `label_list` if given (checked), else 'O' + the sorted training tags.

    'O' always has id 0: it is the label of every position that is not a word's first piece.

    Raises:
      NerDataError: a given list without 'O', with duplicates or malformed tags.
    """
    if label_list is None:
        return [OUTSIDE] + sorted({t for s in sentences for t in s.tags} - {OUTSIDE})
    labels = list(label_list)
    if not labels or labels[0] != OUTSIDE:
        raise NerDataError(f"--label_list must start with 'O' (got {','.join(labels)!r})")
    if len(set(labels)) != len(labels):
        raise NerDataError(f"--label_list has duplicate tags: {','.join(labels)!r}")
    for tag in labels:
        check_tag(tag, "--label_list", 1)
    return labels


def check_labels(sentences: Sequence[Sentence], label_list: Sequence[str]) -> None:
    """Raises NerDataError naming the file and line of the first tag not in `label_list`."""
    known = set(label_list)
    for sentence in sentences:
        for tag, line in zip(sentence.tags, sentence.lines):
            if tag not in known:
                raise NerDataError(f"{sentence.source}:{line}: tag {tag!r} is not in the tag "
                                   f"list ({','.join(label_list)})")


def bio_to_bioes(tags: Sequence[str]) -> List[str]:
    """BIO (or IOB1) tags -> BIOES: single-token chunks become S-, last tokens E-.

    Chunks are delimited as conlleval delimits them (an I- after O or after another type opens
    one), so the entities are unchanged; IOB1 input (CoNLL-2003's original files) works too, and
    `bioes_to_bio` of the result is IOB2.
    """
    from bert_mgpu.metrics import ner as ner_metrics  # pylint: disable=import-outside-toplevel
    out = []
    n = len(tags)
    for i, tag in enumerate(tags):
        prefix, type_ = ner_metrics.split_tag(tag)
        if prefix == OUTSIDE:
            out.append(OUTSIDE)
            continue
        prev_prefix, prev_type = ner_metrics.split_tag(tags[i - 1]) if i else (OUTSIDE, "")
        next_prefix, next_type = (ner_metrics.split_tag(tags[i + 1]) if i + 1 < n
                                  else (OUTSIDE, ""))
        starts = ner_metrics.start_of_chunk(prev_prefix, prefix, prev_type, type_)
        ends = ner_metrics.end_of_chunk(prefix, next_prefix, type_, next_type)
        new_prefix = ("S" if ends else "B") if starts else ("E" if ends else "I")
        out.append(f"{new_prefix}-{type_}")
    return out


def bioes_to_bio(tags: Sequence[str]) -> List[str]:
    """BIOES -> BIO: S- becomes B-, E- becomes I-."""
    return ["B" + t[1:] if t.startswith("S-") else "I" + t[1:] if t.startswith("E-") else t
            for t in tags]


def ner_shapes(max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of an NER record (in the style of data/features.py)."""
    return collections.OrderedDict((name, max_seq_length) for name in NER_FEATURES)


def parse_example(serialized, max_seq_length: int):
    """Parses one or a batch of serialized NER records (`features.parse_example` with the NER
    shapes): int32 Tensors of shape [max_seq_length] or [batch, max_seq_length], except
    `label_weights` (float32)."""
    return features.parse_example(serialized, ner_shapes(max_seq_length))


class WindowFeature(NamedTuple):
    """One record and where its labelled positions come from.

    Attributes:
      sentence_index: index of the sentence in the list given to `convert_sentences`.
      window_index: index of the window within the sentence.
      values: dict name -> list (the record; lengths `ner_shapes`).
      positions: list of int, record positions with weight 1 (each a word's first piece).
      word_indices: list of int, the word of each of `positions`.
    """
    sentence_index: int
    window_index: int
    values: Dict[str, list]
    positions: List[int]
    word_indices: List[int]


def _windows(num_pieces: int, max_tokens: int, doc_stride: int) -> List[Tuple[int, int]]:
    """(start, length) of the windows over `num_pieces` pieces (Google's document spans)."""
    return window_spans(num_pieces, max_tokens, doc_stride)


def _best_window(spans: Sequence[Tuple[int, int]], position: int) -> int:
    """The window in which piece `position` has the most context (first on ties)."""
    best, best_score = -1, None
    for i, (start, length) in enumerate(spans):
        if not start <= position < start + length:
            continue
        score = min(position - start, start + length - 1 - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best


def convert_sentences(sentences: Sequence[Sentence], label_list: Sequence[str],
                      max_seq_length: int, tokenizer, doc_stride: Optional[int] = None
                      ) -> List[WindowFeature]:
    """Sentences -> one WindowFeature per window, in sentence order.

    Args:
      sentences: from `read_conll`; their tags must be in `label_list` (`check_labels`).
      label_list: tags, 'O' first (id = index).
      max_seq_length: record length (>= 3: [CLS], one piece, [SEP]).
      tokenizer: `bert_mgpu.tokenization.FullTokenizer` or `BpeTokenizer`.
      doc_stride: pieces between window starts (1 .. max_seq_length - 2); None = half a window.

    Returns:
      list of WindowFeature.

    Raises:
      ValueError: bad lengths; NerDataError: a tag not in `label_list` (naming file and line).
    """
    max_tokens = max_seq_length - 2
    if max_tokens < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a token "
                         "between [CLS] and [SEP]")
    if doc_stride is None:
        doc_stride = default_doc_stride(max_seq_length)
    if not 1 <= doc_stride <= max_tokens:
        raise ValueError(f"doc_stride={doc_stride} must be in [1, max_seq_length - 2 = "
                         f"{max_tokens}] so that windows overlap or touch and cover every token")
    check_labels(sentences, label_list)
    label_map = {label: i for i, label in enumerate(label_list)}
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    # WordPiece: each word alone (memoized across sentences); BPE: the words in their sentence.
    all_pieces = tokenizer.tokenize_words([s.words for s in sentences])
    out: List[WindowFeature] = []
    for sentence_index, sentence in enumerate(sentences):
        piece_ids: List[int] = []
        first_piece: List[Tuple[int, int]] = []  # (piece position, word index)
        for word_index, pieces in enumerate(all_pieces[sentence_index]):
            if pieces:
                first_piece.append((len(piece_ids), word_index))
                piece_ids.extend(tokenizer.convert_tokens_to_ids(pieces))
        spans = _windows(len(piece_ids), max_tokens, doc_stride)
        # Which window labels (and later predicts) each word: the one of most context.
        labelled: List[List[Tuple[int, int]]] = [[] for _ in spans]
        for position, word_index in first_piece:
            labelled[_best_window(spans, position)].append((position, word_index))
        for window_index, (start, length) in enumerate(spans):
            window = piece_ids[start:start + length]
            out.append(_window_feature(sentence, sentence_index, window_index, start, window,
                                       labelled[window_index], label_map, max_seq_length,
                                       (cls_id, sep_id)))
    return out


def _window_feature(sentence: Sentence, sentence_index: int, window_index: int, start: int,
                    window: List[int], labelled: List[Tuple[int, int]],
                    label_map: Dict[str, int], max_seq_length: int, cls_sep) -> WindowFeature:
    """One window's record: `[CLS] window [SEP]` padded to `max_seq_length`, the tags of the
    words it labels (`labelled`: (piece position in the sentence, word index)) at their first
    pieces, weight 1.0 there and 0 elsewhere."""
    cls_id, sep_id = cls_sep
    pad = max_seq_length - len(window) - 2
    label_ids = [0] * max_seq_length
    weights = [0.0] * max_seq_length
    positions, word_indices = [], []
    for position, word_index in labelled:
        record_position = position - start + 1  # +1 for [CLS]
        label_ids[record_position] = label_map[sentence.tags[word_index]]
        weights[record_position] = 1.0
        positions.append(record_position)
        word_indices.append(word_index)
    values = {
        "input_ids": [cls_id] + window + [sep_id] + [0] * pad,
        "input_mask": [1] * (len(window) + 2) + [0] * pad,
        "segment_ids": [0] * max_seq_length,
        "label_ids": label_ids,
        "label_weights": weights,
    }
    return WindowFeature(sentence_index, window_index, values, positions, word_indices)


def write_features(windows: Sequence[WindowFeature], output_file: str) -> int:
    """Writes the records of `windows` as a TFRecord file (atomically); returns the count."""
    framer = tfrecord.RecordFramer()
    tmp = f"{output_file}.incomplete-{os.getpid()}"
    with file_io.open_file(tmp, "wb") as f:
        for window in windows:
            f.write(framer.frame(tfrecord.encode_example(window.values)))
    file_io.rename(tmp, output_file)
    return len(windows)


def cache_key(split: str, input_files: Sequence[str], vocab_file: Optional[str],
              do_lower_case: bool, max_seq_length: int, doc_stride: int,
              label_list: Sequence[str]) -> str:
    """A short hash of everything the records of a split depend on (as classifier_data's):
    input files (size, modification time), vocabulary contents, casing, length, stride, tags."""
    parts = {
        "version": CACHE_FORMAT_VERSION, "task": "ner", "split": split,
        "inputs": [file_io.file_stats(p) for p in input_files],
        "vocab": file_io.file_sha256(vocab_file),
        "do_lower_case": bool(do_lower_case), "max_seq_length": max_seq_length,
        "doc_stride": doc_stride, "labels": list(label_list),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def cached_features(sentences_fn, split: str, output_dir: str, key: str,
                    label_list: Sequence[str], max_seq_length: int, tokenizer,
                    doc_stride: Optional[int] = None) -> Tuple[str, int]:
    """(path, number of records) of a split's features, written if not cached yet.

    Args:
      sentences_fn: () -> list of Sentence (only called when the cache misses).
      split: "train", "eval" or "predict" (the file stem).
      key: `cache_key(...)`.
    """
    path = os.path.join(output_dir, f"{split}.{key}.tf_record")
    meta_path = path + ".json"
    if os.path.exists(path) and os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            return path, json.load(f)["num_records"]
    sentences = sentences_fn()
    windows = convert_sentences(sentences, label_list, max_seq_length, tokenizer, doc_stride)
    os.makedirs(output_dir, exist_ok=True)
    n = write_features(windows, path)
    tmp = f"{meta_path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"num_records": n, "num_sentences": len(sentences), "key": key}, f)
    os.replace(tmp, meta_path)
    return path, n


def predicted_tags(sentences: Sequence[Sentence], windows: Sequence[WindowFeature],
                   predicted_label_ids, label_list: Sequence[str]) -> List[List[str]]:
    """Per-window predicted label ids -> one predicted tag per original word.

    Args:
      sentences: the sentences `windows` were made from.
      windows: `convert_sentences(sentences, ...)`.
      predicted_label_ids: int array-like of shape [len(windows), max_seq_length] (argmax of
        the logits per position), in the order of `windows`.
      label_list: tags by id.

    Returns:
      list (one per sentence) of lists of tags, one per word.

    Raises:
      ValueError: the number of predictions is not the number of windows.
    """
    if len(predicted_label_ids) != len(windows):
        raise ValueError(f"{len(predicted_label_ids)} predictions for {len(windows)} windows")
    # Words that tokenized to nothing have no piece and so no prediction: they stay 'O'
    # (the only tag that cannot open a wrong entity).
    tags = [[OUTSIDE] * len(s.words) for s in sentences]
    for window, ids in zip(windows, predicted_label_ids):
        sentence_tags = tags[window.sentence_index]
        for position, word_index in zip(window.positions, window.word_indices):
            sentence_tags[word_index] = label_list[int(ids[position])]
    return tags


def words_without_pieces(sentences: Sequence[Sentence], windows: Sequence[WindowFeature]
                         ) -> int:
    """How many words have no piece (predicted 'O' by construction)."""
    predicted = sum(len(w.positions) for w in windows)
    return sum(len(s.words) for s in sentences) - predicted


def prediction_lines(sentences: Sequence[Sentence], tags: Sequence[Sequence[str]]
                     ) -> Iterable[str]:
    """`token gold predicted` lines, a blank line between sentences (conlleval's input)."""
    for i, (sentence, predicted) in enumerate(zip(sentences, tags)):
        if i:
            yield "\n"
        for word, gold, guess in zip(sentence.words, sentence.tags, predicted):
            yield f"{word} {gold} {guess}\n"


def write_predictions(path: str, sentences: Sequence[Sentence],
                      tags: Sequence[Sequence[str]]) -> None:
    """Writes `predictions.txt` (every token of every sentence), atomically.

    Raises:
      ValueError: a sentence without one predicted tag per word.
    """
    if len(tags) != len(sentences):
        raise ValueError(f"{len(tags)} predicted sentences for {len(sentences)} sentences")
    for sentence, predicted in zip(sentences, tags):
        if len(predicted) != len(sentence.words):
            raise ValueError(f"{sentence.guid}: {len(predicted)} predicted tags for "
                             f"{len(sentence.words)} words")
    tmp = f"{path}.incomplete-{os.getpid()}"
    with file_io.open_file(tmp, "wb") as f:
        f.write("".join(prediction_lines(sentences, tags)).encode("utf-8"))
    file_io.rename(tmp, path)


# ---------------------------------------------------------------------------------------------
# The splits of a run_ner.py run

_STEMS = {"train": "train", "dev": "eval", "test": "predict"}  # Google's feature file stems


def uses_bioes(sentences: Sequence[Sentence]) -> bool:
    """Whether any tag is E- or S- (the sentences are in the BIOES scheme)."""
    return any(tag[:2] in ("E-", "S-") for s in sentences for tag in s.tags)


class SplitFeatures(NamedTuple):
    """One split of a run, ready for the trainer and for writing predictions back.

    Attributes:
      path: the split's cached TFRecord file.
      num_records: its number of records (windows).
      sentences: the sentences with the tags as written in the file (the gold column).
      model_sentences: the same with the tags the model works with (--tag_scheme).
      windows: `convert_sentences(model_sentences)` (None for the training split).
      file_bioes: whether the file's own tags are BIOES (predictions are written back in the
        file's scheme).
    """
    path: str
    num_records: int
    sentences: List[Sentence]
    model_sentences: List[Sentence]
    windows: Optional[List[WindowFeature]]
    file_bioes: bool

    def file_tags(self, predicted: Sequence[Sequence[str]]) -> List[List[str]]:
        """The model's predicted tags (per sentence, per word) in the file's scheme."""
        if self.file_bioes:
            return [list(tags) for tags in predicted]
        return [bioes_to_bio(tags) for tags in predicted]


class FeatureFiles:
    """The cached records of a run_ner.py run's splits, and its tag list.

    Made before training: the tag list comes from `--label_list` or train.txt (read and
    checked then), so a malformed file, an unknown tag or a missing train.txt without
    --label_list fails at start.
    """

    def __init__(self, cfg, tokenizer):
        """Args: cfg a `configs/ner.py` `NerConfig`; tokenizer a `FullTokenizer`.

        Raises:
          NerDataError: a missing or malformed file, an unknown tag, no tag list.
        """
        self.cfg, self.tokenizer = cfg, tokenizer
        self.shapes = ner_shapes(cfg.model.max_seq_length)
        self.doc_stride = cfg.effective_doc_stride
        self._sentences: Dict[str, List[Sentence]] = {}
        train_path = os.path.join(cfg.data_dir, SPLIT_FILES["train"])
        if cfg.label_list is not None:
            self.labels = get_labels([], cfg.label_list)
        elif cfg.do_train or _exists(train_path):
            self.labels = get_labels(self._model_sentences("train"))
        else:
            raise NerDataError(f"{train_path}: not found; without training data give the "
                               f"tags with --label_list (in the order the model was trained)")

    def _read(self, split: str) -> List[Sentence]:
        if split not in self._sentences:
            self._sentences[split] = read_split(self.cfg.data_dir, split)
        return self._sentences[split]

    def _model_sentences(self, split: str) -> List[Sentence]:
        sentences = self._read(split)
        if self.cfg.tag_scheme != "bioes":
            return sentences
        return [s._replace(tags=bio_to_bioes(s.tags)) for s in sentences]

    def get(self, split: str) -> SplitFeatures:
        """The features of "train", "dev" or "test", written if not cached (dev and test are
        always read: their windows map predictions back to words)."""
        cfg, model = self.cfg, self.cfg.model
        input_file = os.path.join(cfg.data_dir, SPLIT_FILES[split])
        key = cache_key(split, [input_file], model.vocab_file or model.spm_model_file,
                        model.do_lower_case, model.max_seq_length, self.doc_stride,
                        self.labels) + ("-bioes" if cfg.tag_scheme == "bioes" else "")
        path = os.path.join(cfg.output_dir, f"{_STEMS[split]}.{key}.tf_record")
        cached = _exists(path) and _exists(path + ".json")
        windows = None
        if split == "train" and cached:
            sentences, model_sentences = [], []
        else:
            sentences, model_sentences = self._read(split), self._model_sentences(split)
            check_labels(model_sentences, self.labels)
            if split != "train":
                windows = convert_sentences(model_sentences, self.labels,
                                            model.max_seq_length, self.tokenizer,
                                            self.doc_stride)
        path, n = cached_features(lambda: model_sentences, _STEMS[split], cfg.output_dir, key,
                                  self.labels, model.max_seq_length, self.tokenizer,
                                  self.doc_stride)
        if windows is not None and n != len(windows):
            raise NerDataError(f"{path}: {n} cached records but {input_file} makes "
                               f"{len(windows)} windows (remove the stale cache file)")
        from absl import logging  # pylint: disable=import-outside-toplevel
        logging.info("%s %s features (%d windows): %s", "Reusing" if cached else "Wrote",
                     split, n, path)
        return SplitFeatures(path, n, sentences, model_sentences, windows,
                             uses_bioes(sentences))


def _exists(path: str) -> bool:
    if "://" in path:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def check_ner_inputs(cfg) -> None:
    """run_ner.py's inputs at start (`cfg`: a NerConfig): --data_dir, a malformed
    --label_list, the model files, the weights its evaluation or prediction would use, and
    the CoNLL file of each split the run reads."""
    remote = file_io.is_remote(cfg.data_dir)
    if not remote and not os.path.isdir(cfg.data_dir):
        raise checks.InputFileError(f"--data_dir={cfg.data_dir} is not a directory")
    if cfg.label_list is not None:
        get_labels([], cfg.label_list)
    checks.check_training_job(cfg, cfg.do_predict)
    if remote:
        return
    for split, wanted in (("train.txt", cfg.do_train), ("dev.txt", cfg.do_eval),
                          ("test.txt", cfg.do_predict)):
        if wanted and not os.path.isfile(os.path.join(cfg.data_dir, split)):
            raise checks.InputFileError(f"--data_dir={cfg.data_dir}: {split} not found")
