"""create_vocab.py's job: a WordPiece `vocab.txt` learned from your own corpus.

Google released no code that builds a vocabulary. This one learns it from exactly the words
`FullTokenizer` will later see, and writes it in the layout of Google's vocabularies, so every tool
that reads Google's `vocab.txt` (ours, Google's `tokenization.py`, Hugging Face's BertTokenizer)
reads it unchanged.

Pipeline
--------
1. Word counts, streamed. The input (Google's pretraining text format, `.gz` allowed) is read in
   blocks of whole lines; each block is cleaned and split on whitespace into chunks (Google's
   `_clean_text` + `_tokenize_chinese_chars`, `tokenization._clean_and_pad`), the chunks are
   counted (in C, `Counter.update`) and every distinct chunk is split once by BasicTokenizer's
   per-chunk step (casing, accents, punctuation). BasicTokenizer works chunk by chunk, so the
   counts are those of `BasicTokenizer.tokenize` over every line. Only counts are kept, never the
   text. Worker processes count blocks when asked (`num_workers` >= 2) or, by default, for inputs
   over 256 MB. `max_sentences` samples that many lines (reservoir sampling, seeded, as
   SentencePiece's `input_sentence_size`).
2. Alphabet. Every character seen at least `min_char_count` times in those words becomes a token
   `c`, so a known character is never `[UNK]` on its own. Its continuation `##c` is added when a
   word can go on with it: when it was seen inside a word, or is a letter, a combining mark or a
   decimal digit. Not for CJK ideographs and punctuation, which BasicTokenizer always splits off
   as words of their own (their `##` form can never be asked for; on Chinese text that would cost
   thousands of entries), nor for symbols only ever seen alone ("①", "⊙": on the Chinese reviews,
   40 entries better spent on pieces, as Hugging Face's trainer does).
3. Pieces. SentencePiece (BPE or unigram) is trained on the word counts (a TSV of `word<TAB>count`,
   one word per "sentence", so no piece crosses a word boundary) and its pieces are converted:
   `▁word` -> `word` (starts a word), `piece` -> `##piece` (continues one). Pieces are taken in
   SentencePiece's order (merge order for BPE, score for unigram) until the vocabulary has exactly
   `vocab_size` entries. `wordpiece` is WordPiece's likelihood criterion (Schuster & Nakajima 2012):
   merge the pair of adjacent symbols whose merge raises the corpus's unigram log-likelihood most,
   approximated as count(ab) * log(count(ab) * N / (count(a) * count(b))) with N the number of
   symbols at the start (in Python, single process). Without the count(ab) factor (the
   score count(ab) / (count(a) count(b)) often quoted for WordPiece) rare pairs win: on the KJV at
   6,000 entries that gave 2.29 WordPieces per word against 1.04 with it. Whatever the
   algorithm, pieces that greedy longest-match never uses on the corpus's words (steps towards
   longer pieces, "th" on the way to "the") are replaced by the next learned ones, which lowers
   fertility at equal size.
4. Layout (Google's): `[PAD]` = 0, `[unused0]`..`[unused98]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`
   (ids 100-103 with the default 99 unused slots, as in Google's English vocabularies), then the
   `reserved_tokens` (where Google's Chinese vocabulary has `<S>`, `<T>`), then `[unused99]`... when
   `num_unused` > 99 (Google's uncased vocabulary has 994), then the single characters in code
   point order, the learned pieces in learned order, and the `##c` pieces in code point order.
5. The file is written to a temporary name next to `output_file` and renamed: an interrupted or
   failed run leaves no partial vocab.txt.
"""

import collections
import dataclasses
import gzip
import heapq
import math
import multiprocessing
import os
import random
import shutil
import tempfile
import time
import unicodedata
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from absl import logging

from bert_mgpu import tokenization
from bert_mgpu.data import file_io
from bert_mgpu.progress import Progress, format_duration

ALGORITHMS = ("bpe", "unigram", "wordpiece")

# Google's English vocabularies put 99 [unused] slots before [UNK] (so [UNK], [CLS], [SEP], [MASK]
# are ids 100-103, which some tools assume) and the rest after [MASK].
UNUSED_BEFORE_UNK = 99
SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Longer words are [UNK] as a whole in WordpieceTokenizer (max_input_chars_per_word): nothing to
# learn from them.
MAX_WORD_CHARS = 200

# Bytes of whole lines per counted block: small in one process (the block's chunk list is the
# peak memory: 256 KB keeps Chinese text at the interpreter's own ~40 MB), larger per task of a
# worker process (fewer per-block word dicts to send back and merge).
_BLOCK_BYTES = 1 << 18
_WORKER_BLOCK_BYTES = 4 << 20
# With --num_workers=0, below this much input (uncompressed estimate) words are counted in one
# process: its counting is mostly C-level, and workers must send their word dicts back to be
# merged, which costs more than they save on inputs this small (docs/benchmarks.md).
_PARALLEL_MIN_BYTES = 256 << 20


# One process: distinct chunks counted before they are folded into the word counts.
_MAX_CHUNK_COUNTS = 1 << 20


class VocabError(ValueError):
    """Input from which the asked vocabulary cannot be built; the message names the flag."""


@dataclasses.dataclass(frozen=True)
class VocabStats:
    """What a build saw and made (logged, and returned for tests and benchmarks)."""
    lines: int
    words: int
    distinct_words: int
    alphabet: int
    continuation_alphabet: int
    special: int
    learned: int
    seconds: float


# ---------------------------------------------------------------------------------------------
# Layout

def special_tokens(num_unused: int, reserved_tokens: Sequence[str]) -> List[str]:
    """The head of the vocabulary in Google's layout.

    Args:
        num_unused: int >= 0, `[unusedN]` slots.
        reserved_tokens: str tokens placed right after `[MASK]` (before the 100th+ unused slot).

    Returns:
        list of str: `[PAD]`, up to 99 `[unusedN]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, the
        reserved tokens, the remaining `[unusedN]`.
    """
    first = min(num_unused, UNUSED_BEFORE_UNK)
    return (["[PAD]"] + [f"[unused{i}]" for i in range(first)] + list(SPECIAL_TOKENS)
            + list(reserved_tokens) + [f"[unused{i}]" for i in range(first, num_unused)])


def _always_alone(char: str) -> bool:
    """Whether BasicTokenizer always makes `char` a word of its own (so `##char` is unreachable)."""
    return (tokenization._is_chinese_char(ord(char))  # pylint: disable=protected-access
            or tokenization._is_punctuation(char))  # pylint: disable=protected-access


# ---------------------------------------------------------------------------------------------
# Word counts

def _line_blocks(path: str, on_raw_bytes, block_bytes: int = 0) -> Iterator[bytes]:
    """Yields blocks of whole lines of `path` (decompressed if `.gz`); reports raw bytes read.

    Raises:
        VocabError: naming the file when it cannot be read (e.g. a corrupt `.gz`).
    """
    try:
        yield from _line_blocks_unchecked(path, on_raw_bytes, block_bytes or _BLOCK_BYTES)
    except (OSError, EOFError) as e:
        raise VocabError(f"--input_file: cannot read {path}: {e}") from None


def _line_blocks_unchecked(path: str, on_raw_bytes, block_bytes: int) -> Iterator[bytes]:
    with file_io.open_file(path) as raw:
        f = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
        yield from file_io.whole_line_blocks(_reads(f, raw, block_bytes, on_raw_bytes))


def _reads(f, raw, block_bytes: int, on_raw_bytes) -> Iterator[bytes]:
    """`block_bytes`-byte reads of `f` (which decompresses `raw`, or is it) to its end; after
    each, `on_raw_bytes` gets how many bytes of `raw` it consumed."""
    position = 0
    while True:
        data = f.read(block_bytes)
        now = raw.tell()
        on_raw_bytes(now - position)
        position = now
        if not data:
            return
        yield data


def _block_chunks(data: bytes) -> Tuple[List[str], int]:
    """Cleaned whitespace-free chunks of one block of text lines, and its non-empty lines."""
    text = tokenization.convert_to_unicode(data)
    lines = sum(1 for line in text.split("\n") if line.strip())
    # pylint: disable=protected-access  (Google's cleaning, shared with FullTokenizer)
    return tokenization._clean_and_pad(text).split(), lines


def _add_chunk_counts(chunks: Dict[str, int], words: collections.Counter,
                      do_lower_case: bool) -> None:
    """Adds the BasicTokenizer words of counted chunks to `words`."""
    # Chunks are cleaned already: BasicTokenizer's per-chunk step is all that is left to do.
    split_chunk = tokenization.BasicTokenizer(
        do_lower_case=do_lower_case)._tokenize_chunk  # pylint: disable=protected-access
    for chunk, count in chunks.items():
        for word in split_chunk(chunk):
            words[word] += count


def _count_block(args: Tuple[bytes, bool]) -> Tuple[Dict[str, int], int]:
    """BasicTokenizer word counts of one block of text lines (a worker process's task).

    Args:
        args: (UTF-8 bytes of whole lines, do_lower_case).

    Returns:
        (dict word -> count, number of non-empty lines).
    """
    data, do_lower_case = args
    chunks, lines = _block_chunks(data)
    words: collections.Counter = collections.Counter()
    _add_chunk_counts(collections.Counter(chunks), words, do_lower_case)
    return dict(words), lines


def _sampled_blocks(files: Sequence[str], max_sentences: int, seed: int,
                    on_raw_bytes) -> Iterator[bytes]:
    """Reservoir sample of `max_sentences` non-empty lines (SentencePiece's input_sentence_size)."""
    rng = random.Random(seed)
    sample: List[bytes] = []
    seen = 0
    for path in files:
        for block in _line_blocks(path, on_raw_bytes):
            for line in block.split(b"\n"):
                if not line.strip():
                    continue
                seen += 1
                if len(sample) < max_sentences:
                    sample.append(line)
                else:
                    j = rng.randrange(seen)
                    if j < max_sentences:
                        sample[j] = line
    if seen > max_sentences:
        logging.info("sampled %d of %d lines (--max_sentences)", max_sentences, seen)
    for i in range(0, len(sample), 50000):
        yield b"\n".join(sample[i:i + 50000]) + b"\n"


def count_words(files: Sequence[str], do_lower_case: bool, max_sentences: int = 0,
                num_workers: int = 0, seed: int = 12345,
                progress_interval: float = 10.0) -> Tuple[collections.Counter, int]:
    """Counts BasicTokenizer words over `files`, streaming.

    Args:
        files: list of str paths (`.gz` read decompressed).
        do_lower_case: bool, BasicTokenizer's casing (lower-case and strip accents).
        max_sentences: int, 0 = every line; else a seeded uniform sample of that many lines.
        num_workers: int, worker processes; 0 = one per core for inputs over 256 MB, else
            none; 1 = none.
        seed: int, seed of the line sample.
        progress_interval: float, seconds between progress lines.

    Returns:
        (Counter str word -> int count, int number of non-empty lines counted).
    """
    total = sum(file_io.file_size(p) for p in files)
    progress = Progress("input bytes", total=total, interval=progress_interval, unit="bytes")
    words: collections.Counter = collections.Counter()
    lines = 0
    uncompressed = sum(file_io.file_size(p) * (3 if p.endswith(".gz") else 1) for p in files)
    workers = num_workers or (os.cpu_count() or 1)
    auto_parallel = num_workers == 0 and uncompressed >= _PARALLEL_MIN_BYTES
    if workers > 1 and (num_workers > 1 or auto_parallel) and max_sentences <= 0:
        blocks = (b for path in files
                  for b in _line_blocks(path, progress.update, _WORKER_BLOCK_BYTES))
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            for block_words, block_lines in pool.imap_unordered(
                    _count_block, ((b, do_lower_case) for b in blocks)):
                words.update(block_words)
                lines += block_lines
            # Let the workers exit and be reaped (their CPU time is then counted in ours).
            pool.close()
            pool.join()
    else:
        if max_sentences > 0:
            blocks = _sampled_blocks(files, max_sentences, seed, progress.update)
        else:
            blocks = (b for path in files for b in _line_blocks(path, progress.update))
        # One process: chunks are counted across blocks (Counter.update on a list runs in C)
        # and each distinct chunk is split once; the chunk counts are folded into the word
        # counts whenever they grow large, so memory stays bounded by the distinct chunks.
        chunk_counts: collections.Counter = collections.Counter()
        for block in blocks:
            chunks, block_lines = _block_chunks(block)
            chunk_counts.update(chunks)
            lines += block_lines
            if len(chunk_counts) > _MAX_CHUNK_COUNTS:
                _add_chunk_counts(chunk_counts, words, do_lower_case)
                chunk_counts.clear()
        _add_chunk_counts(chunk_counts, words, do_lower_case)
    progress.done()
    return words, lines


def _continuing_chars(words: collections.Counter) -> set:
    """Characters seen after the first position of a word."""
    inside = set()
    for word in words:
        inside.update(word[1:])
    return inside


def _may_continue(char: str, inside: set) -> bool:
    """Whether `##char` belongs in the vocabulary: BasicTokenizer can put `char` inside a word,
    and it was seen there or is a letter, a combining mark or a decimal digit."""
    if _always_alone(char):
        return False
    return char in inside or unicodedata.category(char)[0] in "LM" or char.isdecimal()


def char_counts(words: collections.Counter) -> collections.Counter:
    """Characters of the words, weighted by word count."""
    # Words grouped by count: one C-level Counter pass per distinct count instead of a Python
    # loop over every character of every word.
    by_count: Dict[int, List[str]] = collections.defaultdict(list)
    for word, count in words.items():
        by_count[count].append(word)
    chars: collections.Counter = collections.Counter()
    for count, group in by_count.items():
        for char, n in collections.Counter("".join(group)).items():
            chars[char] += n * count
    return chars


# ---------------------------------------------------------------------------------------------
# Learning pieces

def _trainable_words(words: collections.Counter) -> Dict[str, int]:
    """Words worth learning from: longer than one character, not [UNK]-long, no U+2581."""
    return {w: c for w, c in words.items()
            if 1 < len(w) <= MAX_WORD_CHARS and tokenization.SPIECE_UNDERLINE not in w}


def _spm_pieces(words: Dict[str, int], algorithm: str, wanted: int, model_prefix: str,
                num_threads: int) -> List[str]:
    """Multi-character WordPiece tokens from SentencePiece trained on word counts, in its order.

    Args:
        words: dict str word -> int count (each word one "sentence").
        algorithm: "bpe" or "unigram".
        wanted: int, how many multi-character tokens are needed.
        model_prefix: str, where the SentencePiece model and vocab are written.
        num_threads: int.

    Returns:
        list of distinct str tokens (`word` or `##piece`, at least 2 characters of text),
        possibly fewer than `wanted` when the corpus has no more.
    """
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    tsv = model_prefix + ".words.tsv"
    with open(tsv, "w", encoding="utf-8") as f:
        for word, count in sorted(words.items(), key=lambda wc: (-wc[1], wc[0])):
            f.write(f"{word}\t{count}\n")
    symbols = set()
    for word in words:
        symbols.update(word)
    # SentencePiece's own pieces include its single characters (in both positions) and "▁":
    # ask for enough on top that `wanted` multi-character pieces remain after dropping them.
    size = wanted + 2 * len(symbols) + 8
    spm_kwargs = dict(
        input=tsv, input_format="tsv", model_prefix=model_prefix, model_type=algorithm,
        vocab_size=size, hard_vocab_limit=False, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, split_by_whitespace=True,
        # A BasicTokenizer word may mix scripts and digits ("3rd", "h2o"); WordPiece does not
        # mind, so neither does the learner.
        split_by_unicode_script=False, split_by_number=False, split_digits=False,
        max_sentencepiece_length=16, max_sentence_length=4 * MAX_WORD_CHARS + 16,
        # ALBERT's ids for --spm_model_file users: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4.
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        num_threads=num_threads,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    try:
        spm.SentencePieceTrainer.train(**spm_kwargs)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise VocabError(f"SentencePiece could not learn from the corpus: {first}") from None
    finally:
        os.remove(tsv)
    return _multi_character_pieces(
        spm.SentencePieceProcessor(model_file=model_prefix + ".model"), wanted)


def _multi_character_pieces(processor, wanted: int) -> List[str]:
    """The first `wanted` distinct multi-character pieces of a trained SentencePiece model, in
    its order, as WordPiece tokens: a piece starting a word ("▁...") is the word part, any
    other is a `##` continuation."""
    scored = []
    for i in range(processor.get_piece_size()):
        if processor.is_unknown(i) or processor.is_control(i):
            continue
        scored.append((-processor.get_score(i), i, processor.id_to_piece(i)))
    scored.sort()  # BPE: merge order; unigram: most likely first; ties in id order.
    output = []
    seen = set()
    for _, _, piece in scored:
        if piece.startswith(tokenization.SPIECE_UNDERLINE):
            token = piece[1:]
            text = token
        else:
            token = "##" + piece
            text = piece
        if len(text) < 2 or token in seen:
            continue
        seen.add(token)
        output.append(token)
        if len(output) == wanted:
            break
    return output


def _wordpiece_pieces(words: Dict[str, int], wanted: int, progress_interval: float) -> List[str]:
    """Multi-character tokens merged by the WordPiece likelihood criterion, in merge order.

    Each word is a sequence of symbols (`c`, then `##c`...). At every step the adjacent pair
    (a, b) with the largest count(ab) * log(count(ab) * N / (count(a) * count(b))) over the
    weighted words is merged (N: the symbols at the start; the gain in unigram log-likelihood
    that merge brings, to first order). Ties: higher pair count, then the smaller pair as
    strings, so the result is deterministic (see `_PairMerges`).

    Args:
        words: dict str word -> int count.
        wanted: int, merges to make (each one new multi-character token).
        progress_interval: float, seconds between progress lines.

    Returns:
        list of str tokens, possibly fewer than `wanted`.
    """
    merges = _PairMerges(words)
    output: List[str] = []
    known = set(merges.symbol_count)
    progress = Progress("wordpiece merges", total=wanted, interval=progress_interval)
    while len(output) < wanted:
        pair = merges.best()
        if pair is None:
            break
        new = merges.merge(pair)
        if new not in known:
            known.add(new)
            output.append(new)
            progress.update()
    progress.done()
    return output


class _PairMerges:
    """The weighted words as symbol sequences, with incrementally updated symbol and adjacent
    pair counts and a lazy max-heap of the pairs' merge scores.

    Heap entries are (-score, -pair count, pair): an entry is current when it equals
    `_entry(pair)`; every change of a pair's score pushes a current entry, and stale ones are
    dropped or re-queued when popped.
    """

    def __init__(self, words: Dict[str, int]):
        word_list = sorted(words)
        self.counts = [words[w] for w in word_list]
        self.seqs = [[w[0]] + ["##" + c for c in w[1:]] for w in word_list]
        self.symbol_count: collections.Counter = collections.Counter()
        self.pair_count: collections.Counter = collections.Counter()
        self.where: Dict[Tuple[str, str], set] = collections.defaultdict(set)  # pair -> words
        # symbol -> the pairs it is part of: when a merge lowers a symbol's count, the score of
        # each of those pairs rises and a fresh heap entry is pushed for it.
        self.pairs_of: Dict[str, set] = collections.defaultdict(set)
        for i, (seq, count) in enumerate(zip(self.seqs, self.counts)):
            for j, symbol in enumerate(seq):
                self.symbol_count[symbol] += count
                if j:
                    pair = (seq[j - 1], symbol)
                    self.pair_count[pair] += count
                    self.where[pair].add(i)
        for a, b in self.pair_count:
            self.pairs_of[a].add((a, b))
            self.pairs_of[b].add((a, b))
        self.total = sum(self.symbol_count.values())
        self.heap = [self._entry(p) for p in self.pair_count]
        heapq.heapify(self.heap)

    def _entry(self, pair):
        n = self.pair_count[pair]
        score = n * math.log(n * self.total
                             / (self.symbol_count[pair[0]] * self.symbol_count[pair[1]]))
        return (-score, -n, pair)

    def best(self) -> Optional[Tuple[str, str]]:
        """The pair with the highest current score (None when no pair is left)."""
        while self.heap:
            top = heapq.heappop(self.heap)
            pair = top[2]
            if self.pair_count.get(pair, 0) <= 0:
                continue
            current = self._entry(pair)
            if top == current:
                return pair
            if current < top:
                heapq.heappush(self.heap, current)
        return None

    def merge(self, pair: Tuple[str, str]) -> str:
        """Merges `pair` in every word that has it; returns the merged symbol."""
        a, b = pair
        new = a + (b[2:] if b.startswith("##") else b)
        changed = set()
        for i in self.where.pop(pair, ()):
            changed |= self._merge_in_word(i, a, b, new)
        self._requeue(changed | self.pairs_of[a] | self.pairs_of[b])
        return new

    def _merge_in_word(self, i: int, a: str, b: str, new: str) -> set:
        """Replaces every adjacent (a, b) of word `i` by `new`; returns the pairs whose counts
        changed."""
        seq, count = self.seqs[i], self.counts[i]
        out = []
        j = 0
        while j < len(seq):
            if j + 1 < len(seq) and seq[j] == a and seq[j + 1] == b:
                out.append(new)
                j += 2
            else:
                out.append(seq[j])
                j += 1
        if len(out) == len(seq):
            return set()
        changed = set()
        for k in range(1, len(seq)):
            old = (seq[k - 1], seq[k])
            self.pair_count[old] -= count
            changed.add(old)
        for symbol in seq:
            self.symbol_count[symbol] -= count
        for symbol in out:
            self.symbol_count[symbol] += count
        for k in range(1, len(out)):
            p = (out[k - 1], out[k])
            self.pair_count[p] += count
            self.where[p].add(i)
            changed.add(p)
        self.seqs[i] = out
        return changed

    def _requeue(self, pairs: set) -> None:
        """Pushes current entries for the live pairs among `pairs`; forgets the dead ones."""
        for p in pairs:
            if self.pair_count.get(p, 0) > 0:
                self.pairs_of[p[0]].add(p)
                self.pairs_of[p[1]].add(p)
                heapq.heappush(self.heap, self._entry(p))
            else:
                self.pair_count.pop(p, None)
                self.where.pop(p, None)
                self.pairs_of[p[0]].discard(p)
                self.pairs_of[p[1]].discard(p)


def _pool_size(wanted: int, taken: int) -> int:
    """Candidates to learn for `wanted` pieces: spares replace pieces greedy matching never uses
    and candidates equal to tokens already taken."""
    return wanted + wanted // 4 + taken + 16


def _select_pieces(candidates: Sequence[str], words: Dict[str, int], taken: set,
                   wanted: int, max_rounds: int = 8) -> List[str]:
    """The first `wanted` candidates that greedy longest-match actually uses on the words.

    A learned piece can be a mere step towards longer ones ("th" on the way to "the") that
    `WordpieceTokenizer` never picks on the corpus's words. Dropping such a piece changes no
    word's tokenization (greedy matching never chose it), so it is replaced by the next
    candidate, for a lower fertility at the same size; a few rounds until all are used.

    Args:
        candidates: str tokens in learned order.
        words: dict str word -> int count.
        taken: set of str tokens already in the vocabulary (special tokens, alphabet).
        wanted: int.
        max_rounds: int, rounds of replacing unused pieces.

    Returns:
        list of at most `wanted` distinct str tokens, in candidate order.
    """
    pool = [t for t in dict.fromkeys(candidates) if t not in taken]
    logging.info("%d candidate pieces; keeping %d that greedy matching uses", len(pool), wanted)
    chosen = pool[:wanted]
    next_index = len(chosen)
    dropped: set = set()
    for _ in range(max_rounds):
        if next_index >= len(pool):
            break
        vocab = set(taken) | set(chosen)
        wordpiece = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=MAX_WORD_CHARS)
        used = set()
        for word in words:
            used.update(wordpiece._tokenize_word(word))  # pylint: disable=protected-access
        unused = [t for t in chosen if t not in used]
        if not unused:
            break
        dropped.update(unused)
        kept = [t for t in chosen if t in used]
        refill = pool[next_index:next_index + len(unused)]
        next_index += len(refill)
        chosen = [t for t in pool[:next_index] if t not in dropped]
        assert len(chosen) == len(kept) + len(refill)
    if len(chosen) < wanted:
        # The corpus ran out of candidates: unused pieces are better than no vocabulary.
        chosen = [t for t in pool if t in set(chosen) or t in dropped][:wanted]
    return chosen


# ---------------------------------------------------------------------------------------------
# The job

def _check_writable(output_file: str) -> None:
    """Raises VocabError naming --output_file if it cannot be written (checked before the work,
    by creating and removing a temporary file next to it)."""
    directory = os.path.dirname(os.path.abspath(output_file))
    if os.path.isdir(output_file):
        raise VocabError(f"--output_file={output_file} is a directory")
    if not os.path.isdir(directory):
        raise VocabError(f"--output_file={output_file}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".vocab-", suffix=".tmp", dir=directory)
    except OSError as e:
        raise VocabError(f"--output_file={output_file}: cannot write in {directory}: "
                         f"{e.strerror}") from None
    os.close(fd)
    os.remove(tmp)


def _write_atomically(tokens: Iterable[str], output_file: str) -> None:
    """Writes one token per line to a temporary file next to `output_file`, then renames it."""
    directory = os.path.dirname(os.path.abspath(output_file))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".vocab-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for token in tokens:
                f.write(token + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, output_file)
    except OSError as e:
        raise VocabError(f"--output_file={output_file}: cannot write: {e.strerror or e}") \
            from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


def _learned_pieces(words, wanted: int, taken: set, algorithm: str,
                    spm_model_prefix: Optional[str], num_threads: int,
                    progress_interval: float) -> List[str]:
    """`build_vocab`'s learned pieces: up to `wanted` tokens not in `taken`, by `algorithm`
    (SentencePiece's model kept at `spm_model_prefix`, else in a temporary directory)."""
    trainable = _trainable_words(words)
    logging.info("learning %d pieces (--algorithm=%s) from %d distinct words", wanted,
                 algorithm, len(trainable))
    pool = _pool_size(wanted, len(taken))
    if algorithm == "wordpiece":
        candidates = _wordpiece_pieces(trainable, pool, progress_interval)
    elif not trainable:
        candidates = []
    else:
        threads = num_threads or (os.cpu_count() or 1)
        if spm_model_prefix:
            candidates = _spm_pieces(trainable, algorithm, pool, spm_model_prefix, threads)
        else:
            tmp_dir = tempfile.mkdtemp(prefix="create_vocab-")
            try:
                candidates = _spm_pieces(trainable, algorithm, pool,
                                         os.path.join(tmp_dir, "spm"), threads)
            finally:
                shutil.rmtree(tmp_dir, ignore_errors=True)
    return _select_pieces(candidates, trainable, taken, wanted)


def build_vocab(words: collections.Counter, vocab_size: int, algorithm: str = "bpe",
                num_unused: int = UNUSED_BEFORE_UNK, reserved_tokens: Sequence[str] = (),
                min_char_count: int = 1, spm_model_prefix: Optional[str] = None,
                num_threads: int = 0, progress_interval: float = 10.0
                ) -> Tuple[List[str], Dict[str, int]]:
    """The vocabulary (exactly `vocab_size` tokens, Google's layout) learned from word counts.

    Args:
        words: Counter str word -> int count (BasicTokenizer words).
        vocab_size: int, entries of the result.
        algorithm: one of ALGORITHMS.
        num_unused: int, `[unusedN]` slots.
        reserved_tokens: extra special tokens (after `[MASK]`).
        min_char_count: int, characters seen fewer times are left out of the alphabet.
        spm_model_prefix: str or None, keep SentencePiece's model at this prefix.
        num_threads: int, SentencePiece threads (0 = one per core).
        progress_interval: float.

    Returns:
        (list of str tokens, dict of sizes: special, alphabet, continuation_alphabet, learned).

    Raises:
        VocabError: naming --vocab_size when the size is impossible (with the possible range).
    """
    if not words:
        raise VocabError("no words in the input")
    head = special_tokens(num_unused, reserved_tokens)
    chars = char_counts(words)
    alphabet = sorted(c for c, n in chars.items() if n >= min_char_count)
    if not alphabet:
        raise VocabError(f"--min_char_count={min_char_count}: no character is seen that often")
    inside = _continuing_chars(words)
    continuation = ["##" + c for c in alphabet if _may_continue(c, inside)]
    # A reserved token may coincide with a character or piece: it is there once, in the head.
    head_set = set(head)
    alphabet = [c for c in alphabet if c not in head_set]
    continuation = [c for c in continuation if c not in head_set]
    fixed = len(head) + len(alphabet) + len(continuation)
    if vocab_size < fixed:
        raise VocabError(
            f"--vocab_size={vocab_size} is below the {fixed} entries that the special tokens "
            f"({len(head)}) and the alphabet ({len(alphabet)} characters seen >= "
            f"--min_char_count={min_char_count} times, {len(continuation)} ## forms) need: use "
            f"--vocab_size >= {fixed}, fewer --num_unused, or a higher --min_char_count")
    wanted = vocab_size - fixed
    taken = set(head) | set(alphabet) | set(continuation)
    learned: List[str] = []
    if wanted:
        learned = _learned_pieces(words, wanted, taken, algorithm, spm_model_prefix, num_threads,
                                  progress_interval)
    if len(learned) < wanted:
        most = fixed + len(learned)
        raise VocabError(
            f"--vocab_size={vocab_size} is more than this corpus gives with "
            f"--algorithm={algorithm}: at most {most} entries ({fixed} special and alphabet, "
            f"{len(learned)} learned pieces); use --vocab_size <= {most}")
    tokens = head + alphabet + learned + sorted(continuation)
    assert len(tokens) == vocab_size and len(set(tokens)) == vocab_size
    return tokens, dict(special=len(head), alphabet=len(alphabet),
                        continuation_alphabet=len(continuation), learned=len(learned))


def expand_input_files(patterns: str) -> List[str]:
    """Comma-separated globs -> sorted files (FileNotFoundError names the pattern)."""
    import glob  # pylint: disable=import-outside-toplevel

    files: List[str] = []
    for pattern in patterns.split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        if "://" in pattern:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            matches = tf.io.gfile.glob(pattern)
        else:
            matches = [m for m in glob.glob(pattern) if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"--input_file: no file matches {pattern!r}")
        files.extend(sorted(matches))
    if not files:
        raise FileNotFoundError("--input_file: no input files given")
    return list(dict.fromkeys(files))


def create_vocab(config) -> VocabStats:
    """create_vocab.py: counts words, learns pieces, writes `config.output_file`.

    Args:
        config: `configs/vocab.py`'s CreateVocabConfig.

    Returns:
        VocabStats.

    Raises:
        VocabError, FileNotFoundError: one line naming the flag or file.
    """
    start = time.monotonic()
    _check_writable(config.output_file)
    if config.spm_model_prefix:
        spm_dir = os.path.dirname(os.path.abspath(config.spm_model_prefix))
        if not os.path.isdir(spm_dir):
            raise VocabError(f"--spm_model_prefix={config.spm_model_prefix}: directory "
                             f"{spm_dir} does not exist")
    files = expand_input_files(config.input_file)
    logging.info("create_vocab: %d input file(s), --algorithm=%s, --vocab_size=%d", len(files),
                 config.algorithm, config.vocab_size)
    words, lines = count_words(files, config.do_lower_case, config.max_sentences,
                               config.num_workers, config.random_seed, config.progress_interval)
    if not words:
        raise VocabError(f"--input_file={config.input_file}: no words in {len(files)} file(s) "
                         f"({lines} non-empty lines)")
    logging.info("%d lines, %d words, %d distinct", lines, sum(words.values()), len(words))
    tokens, sizes = build_vocab(
        words, config.vocab_size, config.algorithm, config.num_unused,
        config.reserved_tokens, config.min_char_count, config.spm_model_prefix,
        config.num_workers, config.progress_interval)
    _write_atomically(tokens, config.output_file)
    seconds = time.monotonic() - start
    logging.info("wrote %s: %d entries (%d special, %d characters, %d ## characters, %d learned) "
                 "in %s", config.output_file, len(tokens), sizes["special"], sizes["alphabet"],
                 sizes["continuation_alphabet"], sizes["learned"], format_duration(seconds))
    return VocabStats(lines=lines, words=sum(words.values()), distinct_words=len(words),
                      alphabet=sizes["alphabet"],
                      continuation_alphabet=sizes["continuation_alphabet"],
                      special=sizes["special"], learned=sizes["learned"], seconds=seconds)
