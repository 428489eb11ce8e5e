"""SQuAD v1.1/v2.0 data: examples, features and TFRecords exactly as Google's `run_squad.py`.

`read_squad_examples` and `convert_examples_to_features` give, for the same file and flags, the
examples and features of Google's functions of the same names, feature for feature (unique ids
from 1000000000, doc-stride windows, `_improve_answer_span`, the max-context rule, the v2.0
rules, answers that cannot be recovered from the document skipped with Google's warning).

Records (Google's `FeatureWriter`, int64 features):
  train: unique_ids [1], input_ids, input_mask, segment_ids [max_seq_length],
         start_positions, end_positions, is_impossible [1]
  eval:  unique_ids [1], input_ids, input_mask, segment_ids [max_seq_length]

Differences from Google's script, none of which changes a feature:
- `version_2_with_negative` is an argument, not a global flag.
- A malformed file (missing key, an answer offset outside its paragraph, several answers to a
  training question) is a `DataError` naming the file and question id instead of a KeyError,
  IndexError or a ValueError without context.
- Each paragraph is tokenized once for all of its questions (Google re-tokenizes it for every
  question) and the max-context table is built once per example (Google scans every window for
  every token); both give the same values.
- Feature files are cached under a key of everything that produced them (`cache_key`).
"""

import collections
import dataclasses
import hashlib
import json
import os
import random
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from absl import logging

from bert_mgpu import tokenization
from bert_mgpu.data import checks, file_io, tfrecord
from bert_mgpu.data.processors import DataError
from bert_mgpu.data.sequence import window_spans
from bert_mgpu.progress import Progress

# Google numbers features from here on (`convert_examples_to_features`).
FIRST_UNIQUE_ID = 1000000000
# Google pre-shuffles the training examples with this seed before writing `train.tf_record`.
TRAIN_SHUFFLE_SEED = 12345
# Bumped whenever the records written here change, so that old caches are not reused.
CACHE_FORMAT_VERSION = 1

SQUAD_TRAIN_FEATURES = ("unique_ids", "input_ids", "input_mask", "segment_ids",
                        "start_positions", "end_positions", "is_impossible")
SQUAD_EVAL_FEATURES = ("unique_ids", "input_ids", "input_mask", "segment_ids")


def squad_train_shapes(max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of a SQuAD training record (Google's `FeatureWriter`)."""
    return collections.OrderedDict([
        ("unique_ids", 1), ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length), ("start_positions", 1), ("end_positions", 1),
        ("is_impossible", 1)])


def squad_eval_shapes(max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of a SQuAD prediction record (no positions)."""
    return collections.OrderedDict([
        ("unique_ids", 1), ("input_ids", max_seq_length), ("input_mask", max_seq_length),
        ("segment_ids", max_seq_length)])


@dataclasses.dataclass
class SquadExample:
    """One question about one paragraph (Google's `SquadExample`).

    Attributes:
      qas_id: str, the question id.
      question_text: str.
      doc_tokens: list of str, the paragraph split on whitespace; shared (the same list object)
        by the questions of one paragraph.
      orig_answer_text: str (training only; "" for an impossible question), else None.
      start_position, end_position: int, the answer's first and last index in `doc_tokens`
        (training only; -1 for an impossible question), else None.
      is_impossible: bool, only ever True when training on SQuAD v2.0.
    """
    qas_id: str
    question_text: str
    doc_tokens: List[str]
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    """One window of one example (Google's `InputFeatures`).

    Attributes:
      unique_id: int, from `FIRST_UNIQUE_ID` on, in order of creation.
      example_index: int, index of the example in the list that was converted.
      doc_span_index: int, index of this window among the example's windows.
      tokens: list of str, `[CLS] question [SEP] window [SEP]` (unpadded).
      token_to_orig_map: dict int -> int, position in `tokens` -> index in `doc_tokens`, for
        the window's tokens.
      token_is_max_context: dict int -> bool, position in `tokens` -> whether this window is the
        one where the token has the most context (Google's `_check_is_max_context`).
      input_ids, input_mask, segment_ids: lists of int of length max_seq_length.
      start_position, end_position: int positions in `tokens` (training; 0 when the answer is
        not in this window or the question is impossible), else None.
      is_impossible: bool, the example's.
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    token_to_orig_map: Dict[int, int]
    token_is_max_context: Dict[int, bool]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


class DocSpan(NamedTuple):
    """A window of the WordPiece tokens of a paragraph: `length` tokens from `start`."""
    start: int
    length: int


# ---------------------------------------------------------------------------------------------
# Reading SQuAD json

def load_squad_json(input_file: str) -> Dict:
    """The parsed SQuAD json file (`{"version": ..., "data": [...]}`).

    Raises:
      DataError: naming the file when it is missing, not json, or has no "data" list.
    """
    try:
        if file_io.is_remote(input_file):
            import tensorflow as tf  # pylint: disable=import-outside-toplevel  (gs:// etc.)
            with tf.io.gfile.GFile(input_file, "rb") as f:
                dataset = json.loads(f.read().decode("utf-8-sig"))
        else:  # utf-8-sig: a leading byte-order mark (Windows editors) is not json's error
            with open(input_file, "r", encoding="utf-8-sig") as f:
                dataset = json.load(f)
    except FileNotFoundError as e:
        raise DataError(f"{input_file}: not found") from e
    except json.JSONDecodeError as e:
        raise DataError(f"{input_file}: not a SQuAD json file: {e}") from e
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise DataError(f'{input_file}: not a SQuAD json file (no "data" list)')
    return dataset


def _is_squad_whitespace(c: str) -> bool:
    # Google's reader splits paragraphs on these only (not on every Unicode space, which the
    # WordPiece tokenizer later splits on as well).
    return c in " \t\r\n" or ord(c) == 0x202F


def split_paragraph(paragraph_text: str) -> Tuple[List[str], List[int]]:
    """Whitespace-splits a paragraph as Google's `read_squad_examples`.

    Returns:
      doc_tokens: list of str.
      char_to_word_offset: list of int, for every character of the paragraph the index of the
        token it belongs to (whitespace belongs to the token before it; -1 before the first).
    """
    doc_tokens: List[str] = []
    char_to_word_offset: List[int] = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if _is_squad_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def _field(obj: Dict, key: str, where: str):
    try:
        return obj[key]
    except (KeyError, TypeError):
        raise DataError(f'{where}: no "{key}" field') from None


def read_squad_examples(input_file: str, is_training: bool,
                        version_2_with_negative: bool = False) -> List[SquadExample]:
    """Reads a SQuAD json file into examples, as Google's `read_squad_examples`.

    Args:
      input_file: path of a SQuAD v1.1 or v2.0 json file (local or remote).
      is_training: read the answers (exactly one per answerable question) and their positions.
        An answer whose answer_start is missing, null or not at its text is located by its
        text (first occurrence); a question whose answer text is not in the paragraph is
        skipped, as Google skips answers it cannot recover (both counted in the log, the
        skipped ones with their first ids).
      version_2_with_negative: Google's flag: when training, read `is_impossible`.

    Returns:
      list of `SquadExample`, in file order.

    Raises:
      DataError: naming the file and question id on a malformed file.
    """
    input_data = load_squad_json(input_file)["data"]
    examples: List[SquadExample] = []
    skipped: List[str] = []  # question ids whose answer is not in the context
    located = 0  # answers found by their text (no usable answer_start)
    progress = Progress("SQuAD questions read")
    for article_index, entry in enumerate(input_data):
        where = f"{input_file}: article {article_index}"
        for paragraph in _field(entry, "paragraphs", where):
            context = _field(paragraph, "context", where)
            doc_tokens, char_to_word_offset = split_paragraph(context)
            for qa in _field(paragraph, "qas", where):
                qas_id = _field(qa, "id", where)
                at = f"{input_file}: question {qas_id}"
                question_text = _field(qa, "question", at)
                start_position = end_position = orig_answer_text = None
                is_impossible = False
                if is_training:
                    if version_2_with_negative:
                        is_impossible = _field(qa, "is_impossible", at)
                    answers = _field(qa, "answers", at)
                    if len(answers) != 1 and not is_impossible:
                        raise DataError(f"{at}: for training, each question should have exactly "
                                        f"1 answer (it has {len(answers)})")
                    if not is_impossible:
                        answer = answers[0]
                        orig_answer_text = _field(answer, "text", at)
                        span = _answer_span(answer.get("answer_start") if isinstance(answer, dict)
                                            else None, orig_answer_text, context, doc_tokens,
                                            char_to_word_offset)
                        if span is None:
                            skipped.append(qas_id)
                            continue
                        start_position, end_position, was_located = span
                        located += was_located
                    else:
                        start_position = end_position = -1
                        orig_answer_text = ""
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens,
                    orig_answer_text=orig_answer_text, start_position=start_position,
                    end_position=end_position, is_impossible=is_impossible))
                progress.update()
    logging.info("Read %d SQuAD examples from %s", len(examples), input_file)
    if located:
        logging.info("%s: %d answer(s) located by their text in the context (answer_start "
                     "missing, null or not at the answer: its first occurrence)", input_file,
                     located)
    if skipped:
        logging.warning("%s: %d question(s) skipped, their answer text is not in the context "
                        "(as Google skips answers it cannot recover); the first: %s", input_file,
                        len(skipped), ", ".join(map(str, skipped[:5])))
    return examples


def _answer_span(answer_offset, text: str, context: str, doc_tokens: Sequence[str],
                 char_to_word_offset: Sequence[int]) -> Optional[Tuple[int, int, bool]]:
    """(start word, end word, located) of a training answer, or None when it cannot be found.

    Google's rule first: the words under `answer_start` .. + len(text) must hold the answer
    (odd Unicode makes a few unrecoverable). Files users make often have "answer_start": null,
    none, or an offset that does not fit the context: the answer is then located by its text,
    its first occurrence in the context (`located` True).
    """
    cleaned = " ".join(tokenization.whitespace_tokenize(text))
    mismatch = []  # Google's warning when the words at a fitting offset are not the answer

    def span_at(offset):
        last = offset + len(text) - 1
        if not (-len(char_to_word_offset) <= min(offset, last)
                and max(offset, last) < len(char_to_word_offset)):
            return None
        # Google indexes exactly so (an empty answer indexes offset - 1).
        start, end = char_to_word_offset[offset], char_to_word_offset[last]
        actual_text = " ".join(doc_tokens[start:end + 1])
        if actual_text.find(cleaned) == -1:
            mismatch.append((actual_text, cleaned))
            return None
        return start, end

    if isinstance(answer_offset, int) and not isinstance(answer_offset, bool):
        span = span_at(answer_offset)
        if span is not None:
            return (*span, False)
    found = context.find(text) if text.strip() else -1
    span = span_at(found) if found >= 0 else None
    if span is None and mismatch:
        logging.warning("Could not find answer: '%s' vs. '%s'", *mismatch[0])
    return None if span is None else (*span, True)


def shuffle_like_google(examples: List[SquadExample]) -> None:
    """Shuffles training examples in place as Google's `main` does before writing them."""
    random.Random(TRAIN_SHUFFLE_SEED).shuffle(examples)


# ---------------------------------------------------------------------------------------------
# Features

def improve_answer_span(doc_tokens: Sequence[str], input_start: int, input_end: int, tokenizer,
                        orig_answer_text: str) -> Tuple[int, int]:
    """The answer's WordPiece span, narrowed to the tokenized answer when it is inside.

    Google's `_improve_answer_span`: character annotations project to whole words ("(1895-1943)."
    for the answer "1895"); after WordPiece the answer's own tokens can often be found within.
    The first start, then the longest end, whose tokens spell the tokenized answer wins.

    Args:
      doc_tokens: the paragraph's WordPiece tokens.
      input_start, input_end: the span of the answer's whole words (inclusive).
      tokenizer: `FullTokenizer` or `BpeTokenizer`.
      orig_answer_text: the annotated answer.

    Returns:
      (start, end), inclusive token indexes.
    """
    # The answer's tokens alone and after a space: the same for WordPiece (Google's one
    # string); for byte-level BPE an answer at a word's start reads " answer" ("Ġanswer").
    tok_answer_texts = {" ".join(tokenizer.tokenize(text))
                        for text in (orig_answer_text, " " + orig_answer_text)}
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:(new_end + 1)]) in tok_answer_texts:
                return new_start, new_end
    return input_start, input_end


def doc_spans_of(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> List[DocSpan]:
    """Google's sliding windows: up to `max_tokens_for_doc` tokens, starts `doc_stride` apart,
    the last window ending at the last token (none for a context without tokens)."""
    if not num_tokens:
        return []
    return [DocSpan(start=start, length=length)
            for start, length in window_spans(num_tokens, max_tokens_for_doc, doc_stride)]


def max_context_span_indexes(doc_spans: Sequence[DocSpan], num_tokens: int) -> List[int]:
    """For every token, the index of the window where it has the most context.

    Google's `_check_is_max_context` rule: a token's score in a window is
    min(left context, right context) + 0.01 * window length; the first window with the highest
    score wins. Computed for all tokens at once (the same scores, the same order of windows).

    Returns:
      list of int of length `num_tokens` (-1 for a token in no window).
    """
    best_score: List[Optional[float]] = [None] * num_tokens
    best_index = [-1] * num_tokens
    for span_index, span in enumerate(doc_spans):
        end = span.start + span.length - 1
        bonus = 0.01 * span.length
        for position in range(span.start, end + 1):
            score = min(position - span.start, end - position) + bonus
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best_index[position] = span_index
    return best_index


def _check_flags(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"--max_seq_length ({max_seq_length}) must be greater than "
                         f"--max_query_length ({max_query_length}) + 3")
    if doc_stride < 1:
        raise ValueError(f"--doc_stride must be positive, got {doc_stride}")


def convert_examples_to_features(examples: Sequence[SquadExample], tokenizer,
                                 max_seq_length: int, doc_stride: int, max_query_length: int,
                                 is_training: bool) -> Iterator[SquadFeature]:
    """Yields the features of `examples`, as Google's `convert_examples_to_features`.

    Every example becomes one feature per doc-stride window of its paragraph: `[CLS] question
    [SEP] window [SEP]` zero-padded to `max_seq_length`, the question cut to
    `max_query_length` tokens. When training, the answer's token positions, or 0/0 when the
    window does not contain the whole answer or the question is impossible.

    Args:
      examples: from `read_squad_examples` (with the same `is_training`).
      tokenizer: `FullTokenizer`.
      max_seq_length, doc_stride, max_query_length: Google's flags.
      is_training: compute answer positions.

    Yields:
      `SquadFeature`s, unique ids counting up from `FIRST_UNIQUE_ID`.

    Raises:
      ValueError: on lengths that leave no room for the document (naming the flags).
    """
    _check_flags(max_seq_length, doc_stride, max_query_length)
    unique_id = FIRST_UNIQUE_ID
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    progress = Progress("SQuAD examples converted", total=len(examples))
    doc = None
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
        # The questions of a paragraph share its token list: tokenize it once.
        if doc is None or example.doc_tokens is not doc.words:
            doc = _TokenizedDoc.of(example.doc_tokens, tokenizer)
        answer = (_answer_token_span(example, doc, tokenizer) if is_training
                  else _NOT_TRAINING)

        # [CLS], [SEP] and [SEP].
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = doc_spans_of(len(doc.tokens), max_tokens_for_doc, doc_stride)
        max_context = max_context_span_indexes(doc_spans, len(doc.tokens))
        query_ids = tokenizer.convert_tokens_to_ids(query_tokens)
        doc_offset = len(query_tokens) + 2

        for doc_span_index, doc_span in enumerate(doc_spans):
            window = range(doc_span.start, doc_span.start + doc_span.length)
            input_ids = ([cls_id] + query_ids + [sep_id] + doc.ids[window.start:window.stop]
                         + [sep_id])
            n = len(input_ids)
            padding = [0] * (max_seq_length - n)
            start_position, end_position = _window_positions(answer, window, doc_offset)
            yield SquadFeature(
                unique_id=unique_id, example_index=example_index, doc_span_index=doc_span_index,
                tokens=(["[CLS]"] + query_tokens + ["[SEP]"]
                        + doc.tokens[window.start:window.stop] + ["[SEP]"]),
                token_to_orig_map={doc_offset + i: doc.tok_to_orig[s]
                                   for i, s in enumerate(window)},
                token_is_max_context={doc_offset + i: max_context[s] == doc_span_index
                                      for i, s in enumerate(window)},
                input_ids=input_ids + padding, input_mask=[1] * n + padding,
                segment_ids=[0] * doc_offset + [1] * (doc_span.length + 1) + padding,
                start_position=start_position, end_position=end_position,
                is_impossible=example.is_impossible)
            unique_id += 1
        progress.update()
    if examples:
        progress.done()


@dataclasses.dataclass(frozen=True)
class _TokenizedDoc:
    """A paragraph's words (`SquadExample.doc_tokens`) as WordPieces, with both index maps."""
    words: Sequence[str]
    tokens: List[str]  # the paragraph's WordPieces
    ids: List[int]
    tok_to_orig: List[int]  # WordPiece index -> word index
    orig_to_tok: List[int]  # word index -> index of its first WordPiece

    @classmethod
    def of(cls, words: Sequence[str], tokenizer) -> "_TokenizedDoc":
        tok_to_orig: List[int] = []
        orig_to_tok: List[int] = []
        tokens: List[str] = []
        # WordPiece: each word alone (Google's); BPE: the words in running text.
        (word_pieces,) = tokenizer.tokenize_words([words])
        for i, pieces in enumerate(word_pieces):
            orig_to_tok.append(len(tokens))
            tok_to_orig.extend([i] * len(pieces))
            tokens.extend(pieces)
        return cls(words, tokens, tokenizer.convert_tokens_to_ids(tokens), tok_to_orig,
                   orig_to_tok)


def _answer_token_span(example: SquadExample, doc: _TokenizedDoc,
                       tokenizer) -> Optional[Tuple[int, int]]:
    """The answer's first and last WordPiece in the paragraph (None: impossible question),
    tightened to the answer text as Google's `_improve_answer_span` does."""
    if example.is_impossible:
        return None
    start = doc.orig_to_tok[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        end = doc.orig_to_tok[example.end_position + 1] - 1
    else:
        end = len(doc.tokens) - 1
    return improve_answer_span(doc.tokens, start, end, tokenizer, example.orig_answer_text)


_NOT_TRAINING = object()  # the answer span when features are made for prediction


def _window_positions(answer, window: range, doc_offset: int):
    """Training labels of one doc-stride window: the answer's positions in the feature, or 0/0
    ([CLS]) for an impossible question (`answer` None) or a window without the whole answer;
    (None, None) for prediction features (`answer` is `_NOT_TRAINING`)."""
    if answer is _NOT_TRAINING:
        return None, None
    if answer is None or not (answer[0] >= window.start and answer[1] <= window.stop - 1):
        return 0, 0
    return answer[0] - window.start + doc_offset, answer[1] - window.start + doc_offset

# ---------------------------------------------------------------------------------------------
# Records

def feature_values(feature: SquadFeature, is_training: bool) -> Dict[str, List[int]]:
    """The record of a feature as name -> list of ints, in Google's `FeatureWriter` order."""
    values = collections.OrderedDict([
        ("unique_ids", [feature.unique_id]), ("input_ids", feature.input_ids),
        ("input_mask", feature.input_mask), ("segment_ids", feature.segment_ids)])
    if is_training:
        values["start_positions"] = [feature.start_position]
        values["end_positions"] = [feature.end_position]
        values["is_impossible"] = [1 if feature.is_impossible else 0]
    return values


def write_features(features: Iterable[SquadFeature], output_file: str, is_training: bool,
                   on_feature: Optional[Callable[[SquadFeature], None]] = None) -> int:
    """Writes Google's SQuAD records of `features` to `output_file` atomically.

    The records go to a temporary file renamed into place at the end (remote paths: written
    locally, then copied), so an interrupted run leaves no file under the final name.

    Args:
      features: iterable of `SquadFeature` (e.g. the generator of
        `convert_examples_to_features`: records are written as features are made).
      output_file: path of the TFRecord file.
      is_training: write positions and `is_impossible` (train records) or not (eval records).
      on_feature: called with every feature after it is written (to keep eval features).

    Returns:
      int, the number of records written.
    """
    remote = file_io.is_remote(output_file)
    if remote:
        import tempfile  # pylint: disable=import-outside-toplevel
        fd, tmp = tempfile.mkstemp(suffix=".tf_record")
        os.close(fd)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
        # Unique per process: several workers may write the same cache file at once.
        tmp = f"{output_file}.incomplete-{os.getpid()}"
    framer = tfrecord.RecordFramer()
    count = 0
    try:
        with open(tmp, "wb") as f:
            for feature in features:
                f.write(framer.frame(tfrecord.encode_example(feature_values(feature,
                                                                            is_training))))
                count += 1
                if on_feature is not None:
                    on_feature(feature)
        if remote:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            tf.io.gfile.copy(tmp, output_file, overwrite=True)
        else:
            os.replace(tmp, output_file)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return count


def cache_key(split: str, input_file: str, vocab_file: Optional[str],
              spm_model_file: Optional[str], do_lower_case: bool, max_seq_length: int,
              doc_stride: int, max_query_length: int, version_2_with_negative: bool) -> str:
    """A short hash of everything the SQuAD records of a split depend on.

    Args:
      split: "train" (positions, Google's pre-shuffle) or "eval".
      input_file: the SQuAD json (its path, size and modification time enter the key).
      vocab_file, spm_model_file: their contents enter the key.
      the rest: Google's flags.
    """
    parts = {
        "version": CACHE_FORMAT_VERSION, "task": "squad", "split": split,
        "input": file_io.file_stats(input_file),
        "vocab": file_io.file_sha256(vocab_file), "spm": file_io.file_sha256(spm_model_file),
        "do_lower_case": bool(do_lower_case), "max_seq_length": max_seq_length,
        "doc_stride": doc_stride, "max_query_length": max_query_length,
        # Only training reads is_impossible; eval features do not depend on the flag.
        "version_2_with_negative": bool(version_2_with_negative) if split == "train" else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _exists(path: str) -> bool:
    if file_io.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def _read_json(path: str):
    if file_io.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        with tf.io.gfile.GFile(path, "rb") as f:
            return json.loads(f.read().decode("utf-8-sig"))
    with open(path, "r", encoding="utf-8-sig") as f:
        return json.load(f)


def _write_json_atomic(path: str, obj) -> None:
    text = json.dumps(obj, sort_keys=True)
    if file_io.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        tmp = f"{path}.tmp-{os.getpid()}"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(text)
        tf.io.gfile.rename(tmp, path, overwrite=True)
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class CachedRecords(NamedTuple):
    """A SQuAD records file and its counts."""
    path: str
    num_examples: int
    num_features: int


def cached_train_features(input_file: str, output_dir: str, key: str, tokenizer,
                          max_seq_length: int, doc_stride: int, max_query_length: int,
                          version_2_with_negative: bool) -> CachedRecords:
    """The training records of `input_file`, written (as Google: examples pre-shuffled with seed
    12345) unless `output_dir/train.<key>.tf_record` and its `.json` already exist.

    Args:
      key: `cache_key("train", ...)` of the same arguments.
    """
    path = os.path.join(output_dir, f"train.{key}.tf_record")
    meta_path = path + ".json"
    if _exists(path) and _exists(meta_path):
        meta = _read_json(meta_path)
        logging.info("Reusing SQuAD train features (%d examples, %d features): %s",
                     meta["num_examples"], meta["num_features"], path)
        return CachedRecords(path, meta["num_examples"], meta["num_features"])
    examples = read_squad_examples(input_file, True, version_2_with_negative)
    shuffle_like_google(examples)
    n = write_features(convert_examples_to_features(examples, tokenizer, max_seq_length,
                                                    doc_stride, max_query_length, True),
                       path, is_training=True)
    _write_json_atomic(meta_path, {"num_examples": len(examples), "num_features": n, "key": key})
    logging.info("Wrote SQuAD train features (%d examples, %d features): %s",
                 len(examples), n, path)
    return CachedRecords(path, len(examples), n)


def eval_features(input_file: str, output_dir: str, key: str, tokenizer, max_seq_length: int,
                  doc_stride: int, max_query_length: int
                  ) -> Tuple[List[SquadExample], List[SquadFeature], CachedRecords]:
    """Examples, features and records for prediction.

    Post-processing needs the features in memory (tokens and maps), so they are always made;
    the records are written only when `output_dir/eval.<key>.tf_record` does not exist yet.

    Args:
      key: `cache_key("eval", ...)` of the same arguments.
    """
    path = os.path.join(output_dir, f"eval.{key}.tf_record")
    examples = read_squad_examples(input_file, False)
    stream = convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                          max_query_length, False)
    if _exists(path):
        features = list(stream)
        logging.info("Reusing SQuAD eval records (%d examples, %d features): %s",
                     len(examples), len(features), path)
    else:
        features = []
        write_features(stream, path, is_training=False, on_feature=features.append)
        logging.info("Wrote SQuAD eval records (%d examples, %d features): %s",
                     len(examples), len(features), path)
    return examples, features, CachedRecords(path, len(examples), len(features))


def check_squad_inputs(cfg) -> None:
    """run_squad.py's files at start (`cfg`: a SquadConfig): the model files, the weights its
    prediction would use, and the SQuAD json files the run reads (a mistyped path fails before
    TensorFlow is loaded)."""
    checks.check_training_job(cfg, cfg.do_predict)
    for flag, path, used in (("train_file", cfg.train_file, cfg.do_train),
                             ("predict_file", cfg.predict_file, cfg.do_predict or cfg.do_eval)):
        if used and not file_io.is_remote(path) and not os.path.isfile(path):
            raise checks.InputFileError(f"--{flag}: {path} not found")
