"""create_pretraining_data.py's job: masked-LM / next-sentence TFRecords, as Google's script.

Default mode (`num_workers=0`) gives, for the same input, vocabulary, flags and seed, the records of
Google's `create_pretraining_data.py` (bert-tensorflow 1.0.4; `do_whole_word_mask` as in Google's
later master), record for record and in order. That is a matter of calling Python's `random.Random`
exactly as Google does, in the same order:

  1. read all input files into one list of documents (a blank line ends a document; documents
     continue across files), shuffle the documents;
  2. for each of `dupe_factor` passes, for each document: the 10% `short_seq_prob` draw, then per
     chunk of sentences the `a_end` draw, the 50% random-next draw (not drawn for one-sentence
     chunks), the random document (up to 10 draws to avoid the current one) and its start
     sentence, one draw per token removed by the front/back truncation, and the masking: a
     shuffle of the candidate positions (or whole-word groups), then per prediction the 80% [MASK]
     draw, the 50% keep draw and the random word (`randint` over the vocabulary in file order);
  3. shuffle all instances and write them round-robin to the output files.

Why it is fast (whole process several times faster than Google's on the same input):
  * no TensorFlow import: records are framed and serialized by hand (`data/tfrecord.py`);
  * the tokenizer is the memoised one of `tokenization.py`;
  * tokens are vocabulary ids from the start, and the hot loops are Google's algorithm written
    out inline (`random.Random._randbelow` and `shuffle` are pure Python in CPython; here their
    loops call the C `getrandbits` directly: the same draws, faster: docs/benchmarks.md);
  * records are built from cached pieces (varint bytes per id, whole entries per length), and
    Google's 20 logged examples are decoded back from the records;
  * the front/back truncation counts the removals instead of deleting from list fronts.

Sharded mode (`num_workers>=1`) is for corpora that do not fit in memory: the input is cut into
shards of about `shard_size_mb` at document boundaries (a file's end always ends a document
here), each shard is processed on its own exactly as above (random-next documents come from the
same shard) with a seed derived from `random_seed` and the shard's index, by `num_workers`
processes. Each shard's records go to a temporary file; at the end the shards are interleaved
record by record into the output files. Memory is bounded by the shard size, and the output
depends on the seed and `shard_size_mb`, not on the number of workers.

Options that Google's script does not have (all off by default):
  * `sentence_order_prediction` (ALBERT's SOP): a pair is always two consecutive pieces of one
    document, A then B; with probability 1/2 they are swapped and `next_sentence_labels` is 1
    (as Google's label 1 = "B is not the continuation of A"). A chunk of one sentence is cut at a
    random token to make the pair (ALBERT falls back to a random-document negative there; here
    every negative is a swap). A one-token chunk gives no instance.
  * `no_next_sentence`: single-segment instances `[CLS] tokens [SEP]` of up to
    `max_seq_length - 2` tokens (consecutive sentences of one document), `segment_ids` all 0 and
    `next_sentence_labels` always 0, so the record layout stays the one run_pretraining reads;
    train such data without the next-sentence loss.
  * `pack_sequences` (Cramming, Geiping & Goldstein 2022; RoBERTa's FULL-SENTENCES): masked-LM
    only, no sentence pairs and no padding. Documents (in the shuffled order) are concatenated
    into one token stream, each followed by [SEP], and the stream is cut into instances
    `[CLS] <max_seq_length - 2 tokens> [SEP]`, so every instance is full length except the very
    last one of the run (of each shard in sharded mode). The stream continues from one
    `dupe_factor` pass to the next, so the cut points move between passes. No draw is made but
    the masking's; [SEP]s inside an instance are never masked. `segment_ids` and
    `next_sentence_labels` are 0 as with `no_next_sentence`.
  * `span_masking` (the multi-GPU fork's "text rewriting"): one contiguous span of whole words
    (never crossing [SEP]) is masked per instance instead of scattered tokens. `span_length`
    words (0: as many words as fit the usual budget `min(max_predictions_per_seq,
    round(len * masked_lm_prob))`, so the number of predictions is the default mode's); the span
    starts at a uniformly drawn word and grows right, then left, within its segment and the
    budget. Its tokens are all replaced by [MASK] (80%), all kept (10%) or each replaced by a
    random word (10%), as SpanBERT decides per span.
  * `word_segmented_input`: input lines are already split into words by whitespace (e.g. Chinese
    text run through a segmenter); masking picks whole words (all tokens of a whitespace unit),
    as Chinese-BERT-wwm. The tokens are those of the unsegmented text wherever the tokenizer would
    split there anyway (it always does around CJK characters). Google's `do_whole_word_mask`
    cannot do this for Chinese: every CJK character is its own token, never a `##` piece.
  * `document_ids` (with `pack_sequences`): each record also holds `document_ids`, each
    position's document in the instance (1 for the first; [CLS] with the first document, every
    document's [SEP] and the closing one with theirs; 0 at padding), for a model that keeps each
    token to its own document (ModernBERT's padding-free packing). No draw is changed.
  * a Hugging Face `tokenizer.json` as `vocab_file` (ModernBERT's byte-level BPE,
    `tokenization.BpeTokenizer`): ids are the tokenizer's, random words ids below its size;
    masked-LM only (`no_next_sentence` or `pack_sequences`), no whole-word masking
    (`check_tokenizer_options`).
  * `dynamic_masking`: the instances are made as above but not masked (no masking draw), and
    written with `word_starts` (1 where a whole-word group of the static masking begins) instead
    of the `masked_lm_*` features; run_pretraining.py --dynamic_masking masks them in its input
    pipeline (input_pipeline.mask_example), anew every epoch.
"""

import dataclasses
import hashlib
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import logging

try:
    import resource
except ImportError:  # not on Windows: the worker memory report is skipped there
    resource = None

from bert_mgpu import tokenization
from bert_mgpu.data import features as features_lib
from bert_mgpu.data import file_io, input_pipeline, tfrecord
from bert_mgpu.progress import Progress, format_duration

# Word-segmented input: a token that continues the word of the token before it carries this bit
# in its id until the record is written (so it survives every list operation for free).
_CONTINUES_WORD = 1 << 30
_ID_MASK = _CONTINUES_WORD - 1

# Input is read and tokenized in blocks of this many bytes (bounds the transient text memory).
_READ_BLOCK = 4 << 20


@dataclasses.dataclass
class Stats:
    """What a run did (also what the script logs at the end)."""
    input_files: int = 0
    documents: int = 0
    instances: int = 0
    invalid_utf8_lines: int = 0
    input_bytes: int = 0
    shards: int = 0
    worker_peak_rss_kb: int = 0  # sharded mode: the largest peak RSS of a worker process

    def add(self, other: "Stats") -> None:
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            setattr(self, field.name, max(mine, theirs) if field.name.startswith("worker_peak")
                    else mine + theirs)


# ---------------------------------------------------------------------------------------------
# Files

def _decode(data: bytes, stats: Stats) -> str:
    """UTF-8 text of `data`; invalid bytes dropped (Google's `convert_to_unicode`), counted."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # Counted per line; a newline byte always ends an invalid sequence, so decoding line by line
    # drops exactly what decoding the whole does.
    for line in data.split(b"\n"):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            stats.invalid_utf8_lines += 1
    return data.decode("utf-8", "ignore")


def _read_line_blocks(path: str, start: int = 0, end: Optional[int] = None):
    """Yields blocks of whole lines of `path[start:end]` (see `file_io.whole_line_blocks`)."""
    with file_io.open_input(path) as f:
        if start:
            f.seek(start)
        blocks = file_io.whole_line_blocks(_reads(f, None if end is None else end - start))
        for i, block in enumerate(blocks):
            # A leading byte-order mark (Windows editors) is no text of the first line.
            yield block[3:] if i == 0 and not start and block.startswith(b"\xef\xbb\xbf") \
                else block


def _reads(f, remaining: Optional[int]):
    """`_READ_BLOCK`-byte reads of `f` up to `remaining` bytes (None: to the end)."""
    while remaining is None or remaining > 0:
        data = f.read(_READ_BLOCK if remaining is None else min(_READ_BLOCK, remaining))
        if not data:
            return
        if remaining is not None:
            remaining -= len(data)
        yield data


# ---------------------------------------------------------------------------------------------
# Documents

@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """The vocabulary facts the masking needs."""
    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_subword: Tuple[bool, ...]   # id -> the token starts with "##" (Google's whole-word rule)
    inv_vocab: Dict[int, str]


def make_tokenizer(options):
    """The tokenizer of --vocab_file: Google's `FullTokenizer`, or a `BpeTokenizer` for a
    Hugging Face tokenizer.json (ModernBERT's byte-level BPE, its own normalizer)."""
    if tokenization.is_tokenizer_json(options.vocab_file):
        return tokenization.BpeTokenizer(options.vocab_file)
    return tokenization.FullTokenizer(options.vocab_file, options.do_lower_case)


def vocab_info(tokenizer: tokenization.FullTokenizer, vocab_file: str) -> VocabInfo:
    """Raises ValueError naming the vocabulary file if it lacks [CLS], [SEP] or [MASK]."""
    vocab = tokenizer.vocab
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in vocab]
    if missing:
        raise ValueError(f"--vocab_file {vocab_file} has no {', '.join(missing)} token")
    if isinstance(tokenizer, tokenization.BpeTokenizer):
        # A tokenizer.json numbers its tokens 0..N-1 (added tokens included): a random word is
        # an id drawn below N. Byte-level BPE marks no word pieces (no whole-word groups).
        size = max(vocab.values()) + 1
        return VocabInfo(size=size, cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"],
                         mask_id=vocab["[MASK]"], is_subword=(False,) * size,
                         inv_vocab=dict(tokenizer.inv_vocab))
    # Google's random word is `vocab_words[randint(0, len - 1)]` over the distinct tokens in file
    # order; `load_vocab` gives the i-th distinct token the id i, so the drawn index is the id.
    words = list(vocab)
    assert all(vocab[w] == i for i, w in enumerate(words))
    return VocabInfo(size=len(words), cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"],
                     mask_id=vocab["[MASK]"],
                     is_subword=tuple(w.startswith("##") for w in words),
                     inv_vocab=dict(tokenizer.inv_vocab))


class DocumentReader:
    """Reads Google's input format into documents: lists of sentences, sentences lists of ids.

    One sentence per line; a line that is empty after `str.strip()` starts a new document; a line
    whose tokens are empty is skipped; documents continue from one file into the next.
    """

    def __init__(self, tokenizer: tokenization.FullTokenizer, word_segmented: bool = False):
        self.tokenizer = tokenizer
        self.word_segmented = word_segmented
        self._vocab_get = tokenizer.vocab.__getitem__

    def _ids(self, lines: List[str]) -> List[List[int]]:
        """Token ids per line; with `word_segmented`, continuation tokens carry the word bit."""
        tokenizer = self.tokenizer
        get = self._vocab_get
        if not self.word_segmented:
            return [list(map(get, tokens)) for tokens in tokenizer.tokenize_batch(lines)]
        # Whitespace-separated units are the words. Google's tokenizer treats every whitespace
        # chunk on its own, so the tokens of the units are the tokens of the line.
        units_per_line = [line.split() for line in lines]
        unit_tokens = iter(tokenizer.tokenize_batch(
            [u for units in units_per_line for u in units]))
        out = []
        for units in units_per_line:
            ids = []
            for _ in units:
                tokens = next(unit_tokens)
                if tokens:
                    ids.append(get(tokens[0]))
                    ids.extend(get(t) | _CONTINUES_WORD for t in tokens[1:])
            out.append(ids)
        return out

    def add_text(self, text: str, documents: List[List[List[int]]]) -> None:
        """Appends the lines of `text` (whole lines) to `documents` (whose last one is open)."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the text after the last newline is not a line
        stripped = [line.strip() for line in lines]
        ids = iter(self._ids([s for s in stripped if s]))
        current = documents[-1]
        for s in stripped:
            if not s:
                current = []
                documents.append(current)
            else:
                sentence = next(ids)
                if sentence:
                    current.append(sentence)

    def read(self, pieces: Sequence[Tuple[str, int, Optional[int]]], stats: Stats,
             new_document_per_piece: bool = False,
             on_bytes: Optional[Callable[[int], None]] = None) -> List[List[List[int]]]:
        """Documents of the byte ranges `(path, start, end)`, empty documents removed."""
        documents: List[List[List[int]]] = [[]]
        for path, start, end in pieces:
            if new_document_per_piece:
                documents.append([])
            for block in _read_line_blocks(path, start, end):
                self.add_text(_decode(block, stats), documents)
                stats.input_bytes += len(block)
                if on_bytes is not None:
                    on_bytes(len(block))
        return [d for d in documents if d]


# ---------------------------------------------------------------------------------------------
# Instances

_BIT_LENGTH = [n.bit_length() for n in range(1 << 12)]


class InstanceMaker:
    """Google's `create_instances_from_document` + `create_masked_lm_predictions`, on ids.

    Every random draw is the one Google's code makes, in the same order; `_randbelow` and the
    shuffles are `random.Random._randbelow` / `shuffle` written out (same `getrandbits` calls).
    Instances are handed to `emit(record_bytes)` serialized.
    """

    def __init__(self, options, vocab: VocabInfo, rng: random.Random,
                 encoder: tfrecord.PretrainingRecordEncoder, special_tokens_in_text: bool):
        self.o = options
        self.vocab = vocab
        self.rng = rng
        self.encoder = encoder
        # Candidates are the non-[CLS]/[SEP] positions; when no text token has those ids (the
        # tokenizer never produces them) they are known without looking at the tokens. Packed
        # instances have document-separating [SEP]s inside, so their tokens are looked at.
        self.special_tokens_in_text = special_tokens_in_text or options.pack_sequences
        self._packed: List[int] = []  # pack_sequences: the stream not yet cut into instances
        # document_ids: the stream's document number at each of its tokens (a running count).
        self._packed_documents: List[int] = []
        self._documents_packed = 0
        self._getrandbits = rng.getrandbits
        self._random = rng.random

    # -- Python's random, as random.Random computes it --------------------------------------

    def _randbelow(self, n: int) -> int:
        getrandbits = self._getrandbits
        k = n.bit_length()
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r

    def _shuffle(self, x: list) -> None:
        getrandbits = self._getrandbits
        bit_length = _BIT_LENGTH
        for i in range(len(x) - 1, 0, -1):
            m = i + 1
            k = bit_length[m] if m < 4096 else m.bit_length()
            r = getrandbits(k)
            while r >= m:
                r = getrandbits(k)
            x[i], x[r] = x[r], x[i]

    # -- documents -> instances ---------------------------------------------------------------

    def document(self, all_documents: list, document_index: int, emit) -> int:
        """Emits the instances of one document; returns how many."""
        o = self.o
        if o.pack_sequences:
            return self._packed_document(all_documents[document_index], emit)
        if o.no_next_sentence:
            return self._single_segment_document(all_documents[document_index], emit)
        if o.sentence_order_prediction:
            return self._sop_document(all_documents[document_index], emit)
        return self._nsp_document(all_documents, document_index, emit)

    def _target_length(self, max_num_tokens: int) -> int:
        if self._random() < self.o.short_seq_prob:
            return 2 + self._randbelow(max_num_tokens - 1)  # randint(2, max_num_tokens)
        return max_num_tokens

    def _nsp_document(self, all_documents: list, document_index: int, emit) -> int:
        random_ = self._random
        randbelow = self._randbelow
        document = all_documents[document_index]
        n_docs = len(all_documents)
        max_num_tokens = self.o.max_seq_length - 3
        target_seq_length = self._target_length(max_num_tokens)
        count = 0
        chunk: List[List[int]] = []
        current_length = 0
        i = 0
        n = len(document)
        while i < n:
            segment = document[i]
            chunk.append(segment)
            current_length += len(segment)
            if i == n - 1 or current_length >= target_seq_length:
                a_end = 1
                if len(chunk) >= 2:
                    a_end = 1 + randbelow(len(chunk) - 1)
                tokens_a = [t for s in chunk[:a_end] for t in s]
                if len(chunk) == 1 or random_() < 0.5:
                    is_random_next = 1
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = randbelow(n_docs)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    tokens_b = []
                    for j in range(randbelow(len(random_document)), len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # The unused sentences are put back for the next chunk.
                    i -= len(chunk) - a_end
                else:
                    is_random_next = 0
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                tokens_a, tokens_b = self._truncate_pair(tokens_a, tokens_b, max_num_tokens)
                self._emit_pair(tokens_a, tokens_b, is_random_next, emit)
                count += 1
                chunk = []
                current_length = 0
            i += 1
        return count

    def _truncate_pair(self, tokens_a: list, tokens_b: list, max_num_tokens: int):
        """Google's `truncate_seq_pair`: one token at a time from the longer (ties: B), from the
        front or the back with one draw each; the removals are counted, then sliced once."""
        len_a, len_b = len(tokens_a), len(tokens_b)
        if len_a + len_b <= max_num_tokens:
            return tokens_a, tokens_b
        random_ = self._random
        front_a = front_b = 0
        while len_a + len_b > max_num_tokens:
            if len_a > len_b:
                len_a -= 1
                if random_() < 0.5:
                    front_a += 1
            else:
                len_b -= 1
                if random_() < 0.5:
                    front_b += 1
        return (tokens_a[front_a:front_a + len_a], tokens_b[front_b:front_b + len_b])

    @staticmethod
    def _chunks(document: list, target_seq_length: int):
        """Runs of consecutive sentences of at least `target_seq_length` tokens (the last run of
        a document may be shorter): Google's chunking, without its random-next put-back."""
        chunk: List[List[int]] = []
        current_length = 0
        last = len(document) - 1
        for i, segment in enumerate(document):
            chunk.append(segment)
            current_length += len(segment)
            if i == last or current_length >= target_seq_length:
                yield chunk
                chunk = []
                current_length = 0

    def _sop_document(self, document: list, emit) -> int:
        randbelow = self._randbelow
        max_num_tokens = self.o.max_seq_length - 3
        count = 0
        for chunk in self._chunks(document, self._target_length(max_num_tokens)):
            if len(chunk) >= 2:
                a_end = 1 + randbelow(len(chunk) - 1)
                tokens_a = [t for s in chunk[:a_end] for t in s]
                tokens_b = [t for s in chunk[a_end:] for t in s]
            elif len(chunk[0]) >= 2:
                cut = 1 + randbelow(len(chunk[0]) - 1)
                tokens_a, tokens_b = chunk[0][:cut], chunk[0][cut:]
            else:
                continue  # one token: no pair
            tokens_a, tokens_b = self._truncate_pair(tokens_a, tokens_b, max_num_tokens)
            swapped = 1 if self._random() < 0.5 else 0
            if swapped:
                tokens_a, tokens_b = tokens_b, tokens_a
            self._emit_pair(tokens_a, tokens_b, swapped, emit)
            count += 1
        return count

    def _single_segment_document(self, document: list, emit) -> int:
        random_ = self._random
        max_num_tokens = self.o.max_seq_length - 2
        vocab = self.vocab
        count = 0
        for chunk in self._chunks(document, self._target_length(max_num_tokens)):
            tokens = [t for s in chunk for t in s]
            front = 0
            length = len(tokens)
            while length > max_num_tokens:  # one draw per token: front or back
                length -= 1
                if random_() < 0.5:
                    front += 1
            self._emit([vocab.cls_id, *tokens[front:front + length], vocab.sep_id],
                       length + 2, 0, 0, emit)
            count += 1
        return count

    def _packed_document(self, document: list, emit) -> int:
        """Appends the document and a [SEP] to the stream; emits every full instance."""
        stream = self._packed
        start = len(stream)
        for sentence in document:
            stream.extend(sentence)
        stream.append(self.vocab.sep_id)
        if self.o.document_ids:
            self._documents_packed += 1
            self._packed_documents.extend([self._documents_packed] * (len(stream) - start))
        width = self.o.max_seq_length - 2
        if len(stream) < width:
            return 0
        full = len(stream) // width
        for k in range(full):
            self._emit_packed(k * width, (k + 1) * width, emit)
        del stream[:full * width]
        del self._packed_documents[:full * width]
        return full

    def _emit_packed(self, start: int, end: int, emit) -> None:
        """Emits `[CLS] stream[start:end] [SEP]`; with document_ids, the record carries each
        position's document (1 for the first in the instance; [CLS] belongs to the first
        document, the closing [SEP] to the last)."""
        tokens = [self.vocab.cls_id, *self._packed[start:end], self.vocab.sep_id]
        if self.o.document_ids:
            running = self._packed_documents[start:end]
            ids = [d - running[0] + 1 for d in running]
            emit = self._with_document_ids(emit, [ids[0], *ids, ids[-1]])
        self._emit(tokens, len(tokens), 0, 0, emit)

    def _with_document_ids(self, emit, document_ids: List[int]):
        """`emit` of the record with a `document_ids` feature appended (padded with 0)."""
        padding = [0] * (self.o.max_seq_length - len(document_ids))
        entry = tfrecord.int64_feature_entry(features_lib.DOCUMENT_IDS, document_ids + padding)

        def emit_with(record: bytes) -> None:
            emit(tfrecord.with_feature_entry(record, entry))

        return emit_with

    def finish(self, emit) -> int:
        """Emits what the last document left (pack_sequences: the one shorter instance)."""
        stream = self._packed
        sep_id = self.vocab.sep_id
        count = 0
        if any(t != sep_id for t in stream):
            self._emit_packed(0, len(stream), emit)
            count = 1
        stream.clear()
        self._packed_documents.clear()
        return count

    def _emit_pair(self, tokens_a: list, tokens_b: list, label: int, emit) -> None:
        vocab = self.vocab
        tokens = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
        self._emit(tokens, len(tokens_a) + 2, len(tokens_b) + 1, label, emit)

    # -- masking ---------------------------------------------------------------------------------

    def _emit(self, tokens: list, len_a: int, len_b: int, label: int, emit) -> None:
        """Masks `tokens` ([CLS] A [SEP] (B [SEP])) and emits the serialized record."""
        o = self.o
        if o.dynamic_masking:
            self._emit_unmasked(tokens, len_a, len_b, label, emit)
            return
        num_to_predict = min(o.max_predictions_per_seq,
                             max(1, int(round(len(tokens) * o.masked_lm_prob))))
        if o.span_masking:
            positions = self._span_positions(tokens, len_a, num_to_predict)
        elif o.word_segmented_input or o.do_whole_word_mask:
            positions = self._whole_word_positions(tokens, len_a, num_to_predict)
        else:
            positions = self._token_positions(tokens, len_a, num_to_predict)
        if o.word_segmented_input:
            tokens = [t & _ID_MASK for t in tokens]
        sorted_positions = sorted(positions)
        labels = [tokens[p] for p in sorted_positions]
        # The draws go in the order the positions were picked, as Google's.
        if o.span_masking:
            self._replace_span(tokens, positions)
        else:
            self._replace(tokens, positions)
        emit(self.encoder.encode(tokens, len_a, len_b, sorted_positions, labels, label))

    def _emit_unmasked(self, tokens: list, len_a: int, len_b: int, label: int, emit) -> None:
        """--dynamic_masking: the record without masks, with `word_starts` (no draw made)."""
        emit(self.encoder.encode(
            [t & _ID_MASK for t in tokens] if self.o.word_segmented_input else tokens,
            len_a, len_b, self._word_starts(tokens, len_a), label))

    def _word_starts(self, tokens: list, len_a: int) -> List[int]:
        """Positions that begin a whole-word group of `_whole_word_positions`, in order.

        The groups are this module's static ones exactly: a `##` piece continues the candidate
        before it (even across [SEP], as Google's), a word-segmented continuation the token just
        before it; the first candidate always begins a group. run_pretraining's masking rebuilds
        the groups from these starts and the [CLS]/[SEP] ids.
        """
        starts: List[int] = []
        previous = -2
        if self.o.word_segmented_input:
            for i in self._candidates(tokens, len_a):
                if not (tokens[i] & _CONTINUES_WORD and previous == i - 1):
                    starts.append(i)
                previous = i
        else:
            is_subword = self.vocab.is_subword
            for i in self._candidates(tokens, len_a):
                if previous == -2 or not is_subword[tokens[i]]:
                    starts.append(i)
                previous = i
        return starts

    def _candidates(self, tokens: list, len_a: int) -> List[int]:
        """Positions that are not [CLS]/[SEP], in order."""
        if self.special_tokens_in_text:
            cls_id, sep_id = self.vocab.cls_id, self.vocab.sep_id
            return [i for i, t in enumerate(tokens) if t != cls_id and t != sep_id]
        n = len(tokens)
        if len_a == n:  # [CLS] A [SEP]
            return list(range(1, n - 1))
        return [*range(1, len_a - 1), *range(len_a, n - 1)]

    def _token_positions(self, tokens: list, len_a: int, num_to_predict: int) -> List[int]:
        cand_indexes = self._candidates(tokens, len_a)
        self._shuffle(cand_indexes)
        # All candidates differ, so Google's loop takes exactly the first `num_to_predict`.
        return cand_indexes[:num_to_predict]

    def _whole_word_positions(self, tokens: list, len_a: int, num_to_predict: int) -> List[int]:
        """Google's whole-word masking: a `##` piece joins the candidate before it (whatever is
        between them; Google's grouping also crosses [SEP]). With word-segmented input the
        groups are the input's words instead (not crossing [SEP])."""
        groups: List[List[int]] = []
        if self.o.word_segmented_input:
            for i in self._candidates(tokens, len_a):
                if tokens[i] & _CONTINUES_WORD and groups and groups[-1][-1] == i - 1:
                    groups[-1].append(i)
                else:
                    groups.append([i])
        else:
            is_subword = self.vocab.is_subword
            for i in self._candidates(tokens, len_a):
                if groups and is_subword[tokens[i]]:
                    groups[-1].append(i)
                else:
                    groups.append([i])
        self._shuffle(groups)
        positions: List[int] = []
        for group in groups:
            if len(positions) >= num_to_predict:
                break
            # A word that would exceed the budget is skipped; groups never overlap.
            if len(positions) + len(group) > num_to_predict:
                continue
            positions.extend(group)
        return positions

    def _replace(self, tokens: list, positions: List[int]) -> None:
        """Google's 80% [MASK] / 10% keep / 10% random word, one position at a time."""
        random_ = self._random
        randbelow = self._randbelow
        mask_id = self.vocab.mask_id
        vocab_size = self.vocab.size
        for index in positions:
            if random_() < 0.8:
                tokens[index] = mask_id
            elif random_() < 0.5:
                pass
            else:
                tokens[index] = randbelow(vocab_size)

    def _word_groups(self, tokens: list, start: int, end: int) -> List[List[int]]:
        """Whole words of positions [start, end): `##` pieces (or word-segmented units)."""
        groups: List[List[int]] = []
        if self.o.word_segmented_input:
            for i in range(start, end):
                if groups and tokens[i] & _CONTINUES_WORD:
                    groups[-1].append(i)
                else:
                    groups.append([i])
        else:
            is_subword = self.vocab.is_subword
            for i in range(start, end):
                if groups and is_subword[tokens[i]]:
                    groups[-1].append(i)
                else:
                    groups.append([i])
        return groups

    def _span_positions(self, tokens: list, len_a: int, budget: int) -> List[int]:
        """One contiguous span of whole words within one segment, at most `budget` tokens."""
        segments = [self._word_groups(tokens, 1, len_a - 1)]
        if len_a < len(tokens):
            segments.append(self._word_groups(tokens, len_a, len(tokens) - 1))
        words = [(s, w) for s, groups in enumerate(segments) for w in range(len(groups))]
        if not words:
            return []
        s, first = words[self._randbelow(len(words))]
        groups = segments[s]
        max_words = self.o.span_length or len(groups)
        last = first
        size = len(groups[first])
        if size > budget:
            return groups[first][:budget]
        while last - first + 1 < max_words:
            if last + 1 < len(groups) and size + len(groups[last + 1]) <= budget:
                last += 1
                size += len(groups[last])
            elif first > 0 and size + len(groups[first - 1]) <= budget:
                first -= 1
                size += len(groups[first])
            else:
                break
        return [i for g in groups[first:last + 1] for i in g]

    def _replace_span(self, tokens: list, positions: List[int]) -> None:
        """SpanBERT's per-span 80% [MASK] / 10% keep / 10% random words."""
        if not positions:
            return
        if self._random() < 0.8:
            for index in positions:
                tokens[index] = self.vocab.mask_id
        elif self._random() < 0.5:
            pass
        else:
            for index in positions:
                tokens[index] = self._randbelow(self.vocab.size)


def _special_tokens_in_text(documents, vocab: VocabInfo) -> bool:
    special = {vocab.cls_id, vocab.sep_id}
    return any(not special.isdisjoint(s) for d in documents for s in d)


class _DocumentProgress(Progress):
    """Documents done (of dupe_factor passes) with the instances made so far."""

    def __init__(self, total: int, interval: float):
        super().__init__("documents", total=total, interval=interval)
        self.instances = 0

    def line(self) -> str:
        return f"{super().line()}; {self.instances:,} instances"


def make_records(documents: List[List[List[int]]], options, vocab: VocabInfo,
                 encoder: tfrecord.PretrainingRecordEncoder, seed,
                 progress_interval: float = 10.0, log_progress: bool = True) -> List[bytes]:
    """Google's `create_training_instances` after reading: serialized records, final order.

    `documents` is shuffled in place (as Google's `all_documents`).
    """
    rng = random.Random(seed)
    rng.shuffle(documents)
    maker = InstanceMaker(options, vocab, rng, encoder,
                          _special_tokens_in_text(documents, vocab))
    records: List[bytes] = []
    emit = records.append
    progress = _DocumentProgress(len(documents) * options.dupe_factor, progress_interval) \
        if log_progress else None
    for _ in range(options.dupe_factor):
        for document_index in range(len(documents)):
            made = maker.document(documents, document_index, emit)
            if progress is not None:
                progress.instances += made
                progress.update(1)
    made = maker.finish(emit)
    if progress is not None:
        progress.instances += made
    rng.shuffle(records)
    if progress is not None:
        progress.done()
    return records


# ---------------------------------------------------------------------------------------------
# Output

def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process (or not a PID we can ask about): keep its files
    return True


def _stale_temporaries(path: str) -> List[str]:
    """Temporaries (`PATH.tmp-PID`, `PATH.shards.tmp-PID`) left next to the output `path` by a
    killed run: those whose process is not running. A running process's (another run writing the
    same output) are kept."""
    directory = os.path.dirname(os.path.abspath(path))
    stale = []
    for prefix in (os.path.basename(path) + ".tmp-",
                   os.path.basename(path) + ".shards.tmp-"):
        for name in os.listdir(directory) if os.path.isdir(directory) else ():
            pid = name[len(prefix):]
            if name.startswith(prefix) and pid.isdigit() and int(pid) != os.getpid() \
                    and not _pid_running(int(pid)):
                stale.append(os.path.join(directory, name))
    return stale


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path)


def remove_stale_temporaries(paths: Sequence[str]) -> List[str]:
    """Deletes the temporaries that killed runs (SIGKILL, a crash, a power cut) left next to the
    local output `paths`, logging one line; returns what was removed."""
    stale = sorted({t for p in paths if not file_io.is_remote(p) for t in _stale_temporaries(p)})
    if not stale:
        return []
    size = 0
    for path in stale:
        try:
            size += _size(path)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except FileNotFoundError:
            pass  # removed meanwhile (by another run cleaning up)
    logging.warning("Removed %d stale temporary file(s) of killed runs (%.1f MB): %s",
                    len(stale), size / 1e6, ", ".join(stale))
    return stale


class _OutputFiles:
    """The output files under temporary names, renamed to their final names by `commit()`.

    An interrupted run leaves no file under a final name (remote paths: written locally, copied
    at the end). A local temporary is `PATH.tmp-PID`: a later run removes those of dead
    processes (`remove_stale_temporaries`).
    """

    def __init__(self, paths: Sequence[str]):
        self.paths = list(paths)
        self._tmp_dir = None
        self._created_dirs = []  # made for the outputs, deepest last: removed by abort()
        self.tmp_paths = []
        for path in self.paths:
            if file_io.is_remote(path):
                if self._tmp_dir is None:
                    self._tmp_dir = tempfile.mkdtemp(prefix="create_pretraining_data-")
                tmp = os.path.join(self._tmp_dir, f"{len(self.tmp_paths)}.tfrecord")
            else:
                self._make_directory(os.path.dirname(os.path.abspath(path)))
                tmp = f"{path}.tmp-{os.getpid()}"
            self.tmp_paths.append(tmp)
        self.files = []
        try:
            for p in self.tmp_paths:
                self.files.append(open(p, "wb"))
        except BaseException:
            self.abort()
            raise

    def _make_directory(self, directory: str) -> None:
        missing = []
        while not os.path.exists(directory) and directory not in missing:
            missing.append(directory)
            directory = os.path.dirname(directory)
        for d in reversed(missing):
            os.makedirs(d, exist_ok=True)
            self._created_dirs.append(d)

    def scratch_dir(self) -> str:
        """A new directory for intermediate files: next to the first local output (same
        disk, removed by a later run if this one is killed), else a system temporary one."""
        local = [p for p in self.paths if not file_io.is_remote(p)]
        if not local:
            return tempfile.mkdtemp(prefix="create_pretraining_data-shards-")
        path = f"{local[0]}.shards.tmp-{os.getpid()}"
        os.makedirs(path)
        return path

    def commit(self) -> None:
        for f in self.files:
            f.close()
        for tmp, path in zip(self.tmp_paths, self.paths):
            if file_io.is_remote(path):
                file_io.gfile().copy(tmp, path, overwrite=True)
            else:
                os.replace(tmp, path)
        self.abort()

    def abort(self) -> None:
        for f in self.files:
            f.close()
        for tmp in self.tmp_paths:
            if os.path.exists(tmp):
                os.remove(tmp)
        if self._tmp_dir:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
        for directory in reversed(self._created_dirs):
            try:
                os.rmdir(directory)  # only if still empty
            except OSError:
                pass
        self._created_dirs = []


def write_records(records: Sequence[bytes], files: Sequence) -> None:
    """Frames `records` and writes them round-robin to the open binary `files` (Google's order)."""
    framer = tfrecord.RecordFramer()
    n_files = len(files)
    batch = 4096 * n_files
    for start in range(0, len(records), batch):
        chunk = records[start:start + batch]
        for k, f in enumerate(files):
            f.write(b"".join([framer.frame(r) for r in chunk[k::n_files]]))


def log_examples(records: Sequence[bytes], vocab: VocabInfo, limit: int = 20,
                 names: Sequence[str] = features_lib.PRETRAINING_FEATURES) -> None:
    """Google's `*** Example ***` log of the first records (features `names`), at DEBUG level
    (shown with --verbose)."""
    for serialized in records[:limit]:
        values = tfrecord.decode_example(serialized)
        n = sum(values["input_mask"])
        tokens = " ".join(vocab.inv_vocab[t] for t in values["input_ids"][:n])
        logging.debug("*** Example ***")
        logging.debug("tokens: %s", tokens)
        for name in names:
            logging.debug("%s: %s", name, " ".join(str(x) for x in values[name]))


# ---------------------------------------------------------------------------------------------
# Sharded mode

def derived_seed(random_seed: int, shard_index: int) -> int:
    """The seed of one shard: a hash of the run's seed and the shard's index."""
    digest = hashlib.sha256(f"bert_mgpu shard {random_seed} {shard_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _next_document_boundary(f, position: int, size: int) -> int:
    """The offset just after the first blank line at or after `position` (or `size`)."""
    f.seek(position)
    if position > 0:
        f.readline()  # the rest of the line `position` falls in
    while True:
        line = f.readline()
        if not line:
            return size
        if not line.decode("utf-8", "ignore").strip():
            return f.tell()


def plan_shards(paths: Sequence[str], shard_bytes: int) -> List[Tuple[list, int]]:
    """Cuts the input into shards of about `shard_bytes`, at document boundaries.

    A file is cut into pieces after blank lines; consecutive small pieces (of several files) are
    grouped up to `shard_bytes`. Compressed files are not cut.

    Returns:
      list of (pieces, input bytes) per shard; a piece is (path, start, end), end None = to the
      end of the file.
    """
    pieces = []
    for path in paths:
        size = file_io.file_size(path)
        if path.endswith(".gz") or size <= shard_bytes:
            pieces.append((path, 0, None, size))
            continue
        with file_io.open_input(path) as f:
            start = 0
            while start < size:
                end = _next_document_boundary(f, start + shard_bytes, size) \
                    if start + shard_bytes < size else size
                pieces.append((path, start, end, end - start))
                start = end
    shards: List[Tuple[list, int]] = []
    current: list = []
    current_bytes = 0
    for path, start, end, size in pieces:
        if current and current_bytes + size > shard_bytes:
            shards.append((current, current_bytes))
            current, current_bytes = [], 0
        current.append((path, start, end))
        current_bytes += size
    if current:
        shards.append((current, current_bytes))
    return shards


# State of a worker process (set by `_init_worker`).
_WORKER = {}


def _die_with_parent() -> None:
    """Linux: this worker gets SIGKILL when the main process dies (even by SIGKILL), instead of
    finishing its shard into a directory the next run removes as stale."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _init_worker(options) -> None:
    # Ctrl-C reaches the whole process group: the main process alone handles it (terminates the
    # pool, removes the temporaries, one line); a worker would print a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    tokenizer = make_tokenizer(options)
    vocab = vocab_info(tokenizer, options.vocab_file)
    _WORKER.update(options=options, tokenizer=tokenizer, vocab=vocab,
                   encoder=_encoder(options, vocab))


def _process_shard(task) -> Tuple[int, Stats]:
    """Reads, tokenizes and makes one shard's records into `tmp_path` (framed, final order).

    `tmp_path` is created before the work, so while it exists and the run goes on, a worker is
    making the shard (the event the test of Ctrl-C with workers waits for).
    """
    shard_index, pieces, tmp_path = task
    options, vocab = _WORKER["options"], _WORKER["vocab"]
    stats = Stats(shards=1)
    with open(tmp_path, "wb") as f:
        reader = DocumentReader(_WORKER["tokenizer"], options.word_segmented_input)
        documents = reader.read(pieces, stats, new_document_per_piece=True)
        stats.documents = len(documents)
        records = make_records(documents, options, vocab, _WORKER["encoder"],
                               derived_seed(options.random_seed, shard_index),
                               log_progress=False)
        del documents
        stats.instances = len(records)
        write_records(records, [f])
    if resource is not None:
        stats.worker_peak_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return shard_index, stats


def _framed_batches(path: str, batch_bytes: int = 1 << 20):
    """Yields lists of whole framed records (header, data, CRC) of a TFRecord file we wrote."""
    with open(path, "rb") as f:
        carry = b""
        while True:
            data = f.read(batch_bytes)
            if not data:
                return
            data = carry + data
            frames = []
            pos = 0
            while pos + 12 <= len(data):
                end = pos + 16 + int.from_bytes(data[pos:pos + 8], "little")
                if end > len(data):
                    break
                frames.append(data[pos:end])
                pos = end
            carry = data[pos:]
            if frames:
                yield frames


def _interleave(shard_paths: Sequence[str], files: Sequence, group: int = 128) -> List[bytes]:
    """Writes the shards' records round-robin by shard (one record of each in turn), to `files`
    round-robin by record; at most `group` shard files are open at once. Returns the first 20
    records (for the example log)."""
    first: List[bytes] = []
    n_files = len(files)
    k = 0
    pending: List[List[bytes]] = [[] for _ in files]
    for g in range(0, len(shard_paths), group):
        streams = [_framed_batches(p) for p in shard_paths[g:g + group]]
        buffers = [[] for _ in streams]
        positions = [0] * len(streams)
        while streams:
            alive = []
            for i, stream in enumerate(streams):
                if positions[i] == len(buffers[i]):
                    buffers[i] = next(stream, None)
                    positions[i] = 0
                    if buffers[i] is None:
                        continue
                alive.append(i)
                frame = buffers[i][positions[i]]
                positions[i] += 1
                j = k % n_files
                pending[j].append(frame)
                if len(pending[j]) >= 4096:
                    files[j].write(b"".join(pending[j]))
                    pending[j] = []
                if len(first) < 20:
                    first.append(frame[12:-4])
                k += 1
            streams = [streams[i] for i in alive]
            buffers = [buffers[i] for i in alive]
            positions = [positions[i] for i in alive]
    for f, frames in zip(files, pending):
        f.write(b"".join(frames))
    return first


class _ShardProgress(Progress):
    """Input bytes done (of the total), with the documents and instances made so far."""

    def __init__(self, total_bytes: int, interval: float):
        super().__init__("input", total=total_bytes, interval=interval)
        self.documents = self.instances = 0

    def line(self) -> str:
        elapsed = max(self._clock() - self.start, 1e-9)
        rate = self.count / elapsed
        text = (f"input: {self.count / 1e6:,.1f}/{self.total / 1e6:,.1f} MB "
                f"({100.0 * self.count / max(self.total, 1):.1f}%), {rate / 1e6:,.2f} MB/s, "
                f"elapsed {format_duration(elapsed)}")
        if rate > 0 and self.count < self.total:
            text += f", ETA {format_duration((self.total - self.count) / rate)}"
        return f"{text}; {self.documents:,} documents, {self.instances:,} instances"


def _run_sharded(options, input_files: List[str], outputs: _OutputFiles, vocab: VocabInfo,
                 stats: Stats) -> List[bytes]:
    shard_bytes = max(1, int(options.shard_size_mb * (1 << 20)))
    shards = plan_shards(input_files, shard_bytes)
    logging.info("%d shard(s) of up to %s MB, %d worker process(es)", len(shards),
                 options.shard_size_mb, options.num_workers)
    tmp_dir = outputs.scratch_dir()
    try:
        shard_paths = [os.path.join(tmp_dir, f"shard-{i:06d}.tfrecord")
                       for i in range(len(shards))]
        tasks = [(i, pieces, shard_paths[i]) for i, (pieces, _) in enumerate(shards)]
        progress = _ShardProgress(sum(size for _, size in shards), options.progress_interval)
        # Forking is cheapest, but not safe once TensorFlow (and its threads) is loaded in this
        # process (a caller's, or for gs:// paths); workers never need TensorFlow.
        fork = "fork" in multiprocessing.get_all_start_methods() and \
            "tensorflow" not in sys.modules
        context = multiprocessing.get_context("fork" if fork else "spawn")
        with context.Pool(options.num_workers, initializer=_init_worker,
                          initargs=(options,)) as pool:
            for shard_index, shard_stats in pool.imap_unordered(_process_shard, tasks):
                stats.add(shard_stats)
                progress.documents, progress.instances = stats.documents, stats.instances
                progress.update(shards[shard_index][1])
        progress.done()
        if stats.worker_peak_rss_kb:
            logging.info("Peak RSS of a worker process: %.0f MB",
                         stats.worker_peak_rss_kb / 1024)
        return _interleave(shard_paths, outputs.files)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Entry point

class UnmaskedRecordEncoder(tfrecord.PretrainingRecordEncoder):
    """Serializes --dynamic_masking instances: `features.DYNAMIC_PRETRAINING_FEATURES`, no masks.

    `encode` takes the word-start positions where the masked encoder takes the predictions.
    """

    def __init__(self, max_seq_length: int, vocab_size: int):
        super().__init__(max_seq_length, 1, vocab_size, features_lib.PRETRAINING_FEATURES)
        self._k_word_starts = _tfrecord_key(features_lib.WORD_STARTS)

    def encode(self, input_ids: Sequence[int], len_a: int, len_b: int,
               word_starts: Sequence[int], next_sentence_label: int) -> bytes:
        """Serialized Example of one unmasked instance.

        Args:
          input_ids: ids of `[CLS] A [SEP] (B [SEP])`, unpadded.
          len_a, len_b: as `PretrainingRecordEncoder.encode`.
          word_starts: sorted positions where a whole-word group begins.
          next_sentence_label: 0 or 1.
        """
        varints = self._varints
        n = len(input_ids)
        starts = bytearray(self.max_seq_length)
        for p in word_starts:
            starts[p] = 1  # varint(1) is one byte, as varint(0)
        features = b"".join((
            self._int_entry(self._k_input_ids, b"".join([varints[t] for t in input_ids]) +
                            b"\x00" * (self.max_seq_length - n)),
            self._mask_entry(n),
            self._segment_entry(len_a, len_b),
            self._label_entries[next_sentence_label],
            self._int_entry(self._k_word_starts, bytes(starts))))
        return b"\x0a" + varints[len(features)] + features


def _tfrecord_key(name: str) -> bytes:
    """The map-entry key field of feature `name` (as PretrainingRecordEncoder builds its own)."""
    data = name.encode("utf-8")
    return b"\x0a" + tfrecord.varint(len(data)) + data


def _encoder(options, vocab: VocabInfo) -> tfrecord.PretrainingRecordEncoder:
    if options.dynamic_masking:
        return UnmaskedRecordEncoder(options.max_seq_length, vocab.size)
    return tfrecord.PretrainingRecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab.size,
        features_lib.PRETRAINING_FEATURES)


def check_tokenizer_options(options) -> None:
    """The options a tokenizer.json (ModernBERT's BPE) --vocab_file does not take, one line.

    ModernBERT pretrains masked-LM only: its records are single segments (--no_next_sentence) or
    packed (--pack_sequences); next-sentence and sentence-order pairs are refused (a ModernBERT
    config has no token types to tell the segments apart). Its byte-level BPE marks no word
    pieces, so whole-word masking and word-segmented input are refused too.
    """
    if not tokenization.is_tokenizer_json(options.vocab_file):
        return
    if not (options.no_next_sentence or options.pack_sequences):
        raise ValueError(f"--vocab_file={options.vocab_file} is a tokenizer.json (ModernBERT's "
                         f"BPE), which pretrains masked-LM only: add --no_next_sentence or "
                         f"--pack_sequences (no next-sentence or sentence-order pairs)")
    for flag in ("do_whole_word_mask", "word_segmented_input"):
        if getattr(options, flag):
            raise ValueError(f"--{flag} needs a WordPiece --vocab_file (## pieces); "
                             f"{options.vocab_file} is a byte-level BPE tokenizer.json")


class NoInstancesError(ValueError):
    """The input made no instance: an empty output file would only fail later, in training."""


def create_pretraining_data(options) -> Stats:
    """Runs create_pretraining_data.py on a config (`configs/pretraining.py`'s
    `CreatePretrainingDataConfig`).

    Temporaries of killed runs next to the outputs are removed first; this run's are removed
    whatever ends it (an error, Ctrl-C), and only a complete output is renamed to its final name.

    Raises:
      FileNotFoundError: an input pattern matches nothing, or the vocabulary file is missing.
      ValueError: the vocabulary lacks [CLS], [SEP] or [MASK]; NoInstancesError: the input
        made no instance (an empty corpus).
    """
    start = time.monotonic()
    check_tokenizer_options(options)
    tokenizer = make_tokenizer(options)
    vocab = vocab_info(tokenizer, options.vocab_file)
    sharded = options.num_workers > 0
    input_files = input_pipeline.expand_input_files(options.input_file, sort=sharded, unique=False)
    logging.info("*** Reading from input files ***")
    for path in input_files:
        logging.info("  %s", path)
    output_paths = [p.strip() for p in options.output_file.split(",") if p.strip()]
    if not output_paths:
        raise ValueError("--output_file: no output file given")
    stats = Stats(input_files=len(input_files))
    remove_stale_temporaries(output_paths)
    outputs = _OutputFiles(output_paths)
    try:
        if sharded:
            first = _run_sharded(options, input_files, outputs, vocab, stats)
        else:
            records = _records_in_memory(options, tokenizer, vocab, input_files, stats, start)
            first = records[:20]
        if stats.instances == 0:
            raise NoInstancesError(
                f"--input_file={options.input_file}: no instance made from {stats.documents} "
                f"document(s), {stats.input_bytes:,} bytes of input (empty, or no text the "
                f"vocabulary covers); nothing written to --output_file")
        logging.info("*** Writing to output files ***")
        for path in output_paths:
            logging.info("  %s", path)
        if not sharded:
            write_records(records, outputs.files)
            del records
        names = features_lib.DYNAMIC_PRETRAINING_FEATURES if options.dynamic_masking \
            else features_lib.PRETRAINING_FEATURES
        log_examples(first, vocab, names=names + ((features_lib.DOCUMENT_IDS,)
                                                  if options.document_ids else ()))
        outputs.commit()
    except BaseException:
        outputs.abort()
        raise
    _log_summary(stats, sharded, start)
    return stats


def _records_in_memory(options, tokenizer, vocab, input_files, stats: Stats, start: float):
    """Google's mode: every document read and tokenized, then every instance made."""
    reader = DocumentReader(tokenizer, options.word_segmented_input)
    documents = reader.read([(p, 0, None) for p in input_files], stats)
    stats.documents = len(documents)
    logging.info("%d documents, %.1f MB of text read and tokenized in %.1fs",
                 len(documents), stats.input_bytes / 1e6, time.monotonic() - start)
    records = make_records(documents, options, vocab, _encoder(options, vocab),
                           options.random_seed, options.progress_interval)
    stats.instances = len(records)
    return records


def _log_summary(stats: Stats, sharded: bool, start: float) -> None:
    if stats.invalid_utf8_lines:
        logging.warning("%d input line(s) had invalid UTF-8; the invalid bytes were dropped "
                        "(as Google's convert_to_unicode does)", stats.invalid_utf8_lines)
    if sharded and resource is not None:
        logging.info("Peak RSS of the main process: %.0f MB",
                     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    logging.info("Wrote %d total instances", stats.instances)
    logging.info("%d documents, %d instances in %.1fs", stats.documents, stats.instances,
                 time.monotonic() - start)
