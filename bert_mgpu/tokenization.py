"""Tokenization: Google BERT's WordPiece tokenizer, exactly, plus SentencePiece vocabularies.

The public API is the one of Google's `tokenization.py` (`FullTokenizer`, `BasicTokenizer`,
`WordpieceTokenizer`, `load_vocab`, `convert_to_unicode`, `printable_text`, `convert_by_vocab`,
`convert_tokens_to_ids`, `convert_ids_to_tokens`, `whitespace_tokenize`,
`validate_case_matches_checkpoint`), and for every input the tokens are the ones Google's code
produces: the tests compare against Google's own code on every shipped corpus and on an adversarial
set (control and zero-width characters, accents, CJK extensions, very long words, ...).

How it is fast while staying exact
----------------------------------
Google's pipeline has only two stages and both are local:

1. a per-character map over the whole text (`_clean_text` drops NUL, U+FFFD and control
   characters and turns whitespace into " "; `_tokenize_chinese_chars` pads CJK ideographs with
   spaces), followed by `str.split()`;
2. for each resulting whitespace-free chunk on its own: lower-casing, accent stripping (NFD minus
   category Mn), punctuation splitting, and greedy longest-match WordPiece on each piece.

Stage 1 here is one `str.translate` call whose table is filled lazily with Google's per-character
result (a pure-ASCII text without control characters is left as it is: `str.split()` already
treats tab, newline and carriage return as spaces). Stage 2 is a bounded memo `chunk -> wordpieces`
whose misses run the reference algorithm, so the output is Google's by construction, and natural
text repeats its words so often that nearly every chunk is a dictionary hit.

One shortcut serves Chinese text: a character is "solo" when it is a CJK ideograph or a
punctuation mark that Google's pipeline, given the character alone, maps to exactly itself (the
memo learns this on its misses). A text made only of solo characters has no letters with case and
no whitespace, every character of it is split off on its own (CJK padding, punctuation
splitting), and each maps to itself whatever its neighbours, so its tokens are `list(text)`.

tensorflow-text was considered and not chosen: the memo pipeline is faster (`bench/tokenization.py`
measures it against Hugging Face's `tokenizers` and Google's code; docs/benchmarks.md has the
figures), it is exact by construction rather than by case-by-case normalisation fixes, and it
needs neither an extra dependency nor a TensorFlow import to tokenize.

Byte-level BPE (ModernBERT)
---------------------------
`BpeTokenizer(tokenizer.json)` reads a Hugging Face `tokenizer.json` with the `tokenizers`
library and offers the same `tokenize` / `convert_tokens_to_ids` interface; --vocab_file names it
(`is_tokenizer_json`). Its ids are the library's (tests/test_bpe_tokenizer.py).

SentencePiece
-------------
`FullTokenizer(vocab_file=None, do_lower_case=..., spm_model_file=PATH)` follows ALBERT's
`tokenization.py`: the vocabulary is the model's pieces, ids come from the model, and `tokenize`
applies ALBERT's `preprocess_text` (which ALBERT's data processors call before `tokenize`; here
`tokenize` does it, so `do_lower_case` means the same thing for both vocabulary kinds) and then
`encode_pieces` (SentencePiece plus ALBERT's rule that splits a trailing comma off a number).

TensorFlow is imported only to read a path that is not a local file (e.g. `gs://...`).
"""

import collections
import gc
import os
import re
import unicodedata

# The piece-boundary marker that SentencePiece puts in front of a word (U+2581).
SPIECE_UNDERLINE = "\u2581"

# Maximum entries of a tokenizer's chunk memo. A chunk is one whitespace-separated run of text,
# so natural text has far fewer distinct chunks than this; the bound only keeps memory in check
# (a few hundred bytes per entry) on adversarial input. When full the memo is cleared, which
# never changes results.
DEFAULT_CACHE_SIZE = 1 << 18

_UNUSED_TOKEN_RE = re.compile(r"^\[unused\d+\]$")

# ASCII control characters that Google's `_clean_text` deletes (everything in category Cc except
# tab, newline and carriage return, which it turns into spaces). A pure-ASCII text without them
# needs no character pass at all.
_ASCII_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Google's punctuation within ASCII is exactly the code point ranges 33-47, 58-64, 91-96 and
# 123-126 (every ASCII character of category P* lies in them), so on ASCII text this splits
# exactly as `_run_split_on_punc` does: runs of other characters, and single punctuation marks.
_ASCII_PUNC_SPLIT_RE = re.compile(r"[^!-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Checks whether the casing flag is consistent with the checkpoint name.

    Google's released checkpoints do not record whether they were trained on lower-cased text, so
    (as Google does) the casing is inferred from the model name in the checkpoint path, e.g.
    `.../uncased_L-12_H-768_A-12/bert_model.ckpt`. Unknown names are accepted.

    Args:
        do_lower_case: bool, the `--do_lower_case` flag.
        init_checkpoint: str or None, the `--init_checkpoint` flag.

    Raises:
        ValueError: if the checkpoint is a known cased model and `do_lower_case` is True, or a known
            uncased model and `do_lower_case` is False.
    """
    if not init_checkpoint:
        return
    match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)

    lower_models = [
        "uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
        "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12",
    ]
    cased_models = [
        "cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12",
    ]

    if model_name in lower_models and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    elif model_name in cased_models and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise ValueError(
        f"You passed in `--do_lower_case={actual_flag}` with "
        f"`--init_checkpoint={init_checkpoint}`. However, `{model_name}` seems to be a "
        f"{case_name} model, so you should pass in `--do_lower_case={opposite_flag}` so that the "
        "fine-tuning matches how the model was pre-training. If this error is wrong, please just "
        "comment out this check.")


def convert_to_unicode(text):
    """Returns `text` as `str`, decoding bytes as UTF-8 (invalid bytes are dropped, as Google does).

    Args:
        text: str or bytes.

    Returns:
        str.

    Raises:
        ValueError: for any other type.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


def printable_text(text):
    """Returns `text` in a form suitable for print or logging (`str` on Python 3).

    Args:
        text: str or bytes.

    Returns:
        str.

    Raises:
        ValueError: for any other type.
    """
    return convert_to_unicode(text)


def _read_file(path, binary, what):
    """Reads a whole file from a local path or any filesystem `tf.io.gfile` knows (gs://, ...).

    Args:
        path: str, the file's path or URL.
        binary: bool, return bytes instead of str.
        what: str, what the file is, for the error message.

    Returns:
        str (UTF-8 decoded, a leading byte-order mark dropped, newlines untranslated) or bytes.

    Raises:
        FileNotFoundError: with a one-line message naming the file.
    """
    path = os.fspath(path)
    if "://" not in path:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what} not found: {path}")
        if binary:
            with open(path, "rb") as f:
                return f.read()
        # newline="" keeps "\r" inside lines, as tf.io.gfile does: only "\n" ends a line;
        # utf-8-sig drops a leading byte-order mark (Windows editors write one).
        with open(path, "r", encoding="utf-8-sig", newline="") as f:
            return f.read()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (costs seconds)

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    return data if binary else data.decode("utf-8-sig")


def load_vocab(vocab_file):
    """Loads a vocabulary file (one token per line) into an ordered token -> id dict.

    As in Google's code, each line is stripped of surrounding whitespace, the id is the line's
    position among distinct tokens, and a repeated token keeps its first id.

    Args:
        vocab_file: str, a local path or a `tf.io.gfile` URL.

    Returns:
        collections.OrderedDict mapping str token -> int id.

    Raises:
        FileNotFoundError: if the file does not exist.
    """
    text = _read_file(vocab_file, binary=False, what="vocab file")
    lines = text.split("\n")
    if lines[-1] == "":
        # The text after the last newline is not a line when it is empty (Google's reader hits
        # end of file there); an empty line in the middle is a token "", as in Google's code.
        lines.pop()
    vocab = collections.OrderedDict()
    for line in lines:
        token = line.strip()
        if token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def convert_by_vocab(vocab, items):
    """Converts a sequence of tokens or ids through `vocab`.

    Args:
        vocab: dict, token -> id or id -> token.
        items: iterable of keys of `vocab`.

    Returns:
        list of the mapped values.

    Raises:
        KeyError: naming the first item that is not in `vocab`.
    """
    try:
        return list(map(vocab.__getitem__, items))
    except KeyError as e:
        raise KeyError(f"{e.args[0]!r} is not in the vocabulary") from None


def convert_tokens_to_ids(vocab, tokens):
    """Converts tokens to ids with a token -> id `vocab` (KeyError names an unknown token)."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Converts ids to tokens with an id -> token `inv_vocab` (KeyError names an unknown id)."""
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Splits `text` on whitespace (Python's definition, as Google's code does).

    Args:
        text: str.

    Returns:
        list of str, without empty strings.
    """
    return text.split()


def _is_whitespace(char):
    """Whether Google's BERT treats `char` as whitespace (space, \\t, \\n, \\r, category Zs)."""
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Whether Google's BERT deletes `char` as a control character (category Cc or Cf).

    Tab, newline and carriage return are category Cc but count as whitespace instead.
    """
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Whether Google's BERT splits on `char`: category P*, or any ASCII non-letter non-digit.

    ASCII characters such as "^", "$" and "`" are not Unicode punctuation but Google treats them as
    punctuation for consistency, and so do we.
    """
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """Whether code point `cp` is in one of the CJK ideograph blocks Google pads with spaces.

    Hangul, Hiragana and Katakana are not included: those scripts are written with spaces between
    words and are handled like every other language (Google's definition).
    """
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class _CleanTable(dict):
    """A `str.translate` table from code point to Google's cleaned-and-padded text for it.

    Entries are computed on first use, so the table holds only characters that were seen.
    """

    __slots__ = ()

    def __missing__(self, cp):
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            result = ""
        elif _is_whitespace(char):
            result = " "
        elif _is_chinese_char(cp):
            result = f" {char} "
        else:
            result = char
        self[cp] = result
        return result


class _CategoryTable(dict):
    """Lazily filled `str.translate` table that deletes the characters of one Unicode category."""

    __slots__ = ("_category",)

    def __init__(self, category):
        super().__init__()
        self._category = category

    def __missing__(self, cp):
        result = None if unicodedata.category(chr(cp)) == self._category else cp
        self[cp] = result
        return result


class _PunctuationTable(dict):
    """Lazily filled code point -> bool table of `_is_punctuation`."""

    __slots__ = ()

    def __missing__(self, cp):
        result = _is_punctuation(chr(cp))
        self[cp] = result
        return result


# Pure functions of one character, so one table serves every tokenizer in the process.
_CLEAN_TABLE = _CleanTable()
_NON_SPACING_MARKS = _CategoryTable("Mn")
_PUNCTUATION = _PunctuationTable()


def _clean_and_pad(text):
    """Google's `_clean_text` followed by `_tokenize_chinese_chars`, up to spacing.

    The result splits (`str.split()`) into exactly the chunks Google's text does: a pure-ASCII text
    without control characters is returned unchanged because its only change would be tab, newline
    and carriage return becoming spaces, which `str.split()` treats as spaces anyway.
    """
    if text.isascii() and _ASCII_CONTROL_RE.search(text) is None:
        return text
    return text.translate(_CLEAN_TABLE)


def _split_on_punctuation(text):
    """Splits `text` into runs of non-punctuation characters and single punctuation characters."""
    if text.isascii():
        return _ASCII_PUNC_SPLIT_RE.findall(text)
    output = []
    start = 0
    for i, char in enumerate(text):
        if _PUNCTUATION[ord(char)]:
            if start < i:
                output.append(text[start:i])
            output.append(char)
            start = i + 1
    if start < len(text):
        output.append(text[start:])
    return output


class BasicTokenizer:
    """Runs basic tokenization: cleaning, CJK splitting, lower casing, punctuation splitting."""

    def __init__(self, do_lower_case=True, vocab=(), preserve_unused_tokens=False):
        """Constructs a BasicTokenizer.

        Args:
            do_lower_case: bool, whether to lower-case the input and strip accents.
            vocab: container of str, only used with `preserve_unused_tokens`.
            preserve_unused_tokens: bool, Google's flag of the same name (default False): a
                whitespace-separated `[unusedN]` that is in `vocab` is kept as one token.
        """
        self.do_lower_case = do_lower_case
        self.vocab = vocab
        self.preserve_unused_tokens = preserve_unused_tokens

    def tokenize(self, text):
        """Tokenizes a piece of text.

        Args:
            text: str or UTF-8 bytes.

        Returns:
            list of str tokens (words and single punctuation characters).
        """
        text = _clean_and_pad(convert_to_unicode(text))
        output = []
        for chunk in text.split():
            output.extend(self._tokenize_chunk(chunk))
        return output

    def _preserve(self, chunk):
        return (self.preserve_unused_tokens and chunk in self.vocab
                and _UNUSED_TOKEN_RE.search(chunk) is not None)

    def _tokenize_chunk(self, chunk):
        """Basic tokens of one whitespace-free chunk of cleaned text.

        Everything Google does after whitespace splitting is local to a chunk, which is what makes
        the chunk memo of `FullTokenizer` exact.
        """
        if self._preserve(chunk):
            return [chunk]
        if self.do_lower_case:
            chunk = self._run_strip_accents(chunk.lower())
        pieces = _split_on_punctuation(chunk)
        if chunk.isascii():
            return pieces
        # Lower-casing or NFD can in principle produce whitespace; Google re-splits on it.
        return " ".join(pieces).split()

    def _clean_text(self, text):
        """Deletes NUL, U+FFFD and control characters; turns whitespace into " " (as Google)."""
        return "".join("" if c in "\x00\ufffd" or _is_control(c)
                       else " " if _is_whitespace(c) else c for c in text)

    def _tokenize_chinese_chars(self, text):
        """Puts a space on both sides of every CJK ideograph."""
        return "".join(f" {c} " if _is_chinese_char(ord(c)) else c for c in text)

    def _run_strip_accents(self, text):
        """Strips accents: NFD decomposition, then deletion of non-spacing marks (category Mn)."""
        if text.isascii():
            return text
        return unicodedata.normalize("NFD", text).translate(_NON_SPACING_MARKS)

    def _run_split_on_punc(self, text):
        """Splits punctuation off: a list of non-punctuation runs and punctuation characters."""
        return _split_on_punctuation(text)


class WordpieceTokenizer:
    """Runs WordPiece tokenization (greedy longest-match-first against a vocabulary)."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        """Constructs a WordpieceTokenizer.

        Args:
            vocab: dict or set of str tokens; continuation pieces start with "##". Not to be
                changed afterwards (the longest-piece bounds below are computed once).
            unk_token: str, emitted for a word that cannot be covered by vocabulary pieces.
            max_input_chars_per_word: int, longer words become `unk_token` (Google: 200).
        """
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No substring longer than these can match, so the greedy search may start there instead
        # of at the end of the word: same result, linear instead of quadratic on long words.
        self._max_first = max((len(t) for t in vocab), default=0)
        self._max_continuation = max(
            (len(t) - 2 for t in vocab if t.startswith("##")), default=0)

    def tokenize(self, text):
        """Tokenizes a piece of text into its word pieces.

        For example, `"unaffable"` -> `["un", "##aff", "##able"]`.

        Args:
            text: str or UTF-8 bytes, one word or whitespace-separated words, normally the output
                of `BasicTokenizer`.

        Returns:
            list of str word pieces.
        """
        output = []
        for word in convert_to_unicode(text).split():
            output.extend(self._tokenize_word(word))
        return output

    def _tokenize_word(self, word):
        """Word pieces of one whitespace-free word."""
        vocab = self.vocab
        n = len(word)
        if n > self.max_input_chars_per_word:
            return [self.unk_token]
        if word in vocab:
            return [word]
        pieces = []
        start = 0
        max_len = self._max_first
        while start < n:
            end = min(n, start + max_len)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return [self.unk_token]
            pieces.append(piece)
            start = end
            max_len = self._max_continuation
        return pieces


class _ChunkMemo(dict):
    """Bounded memo: whitespace-free chunk of cleaned text -> tuple of its word pieces."""

    __slots__ = ("_compute", "max_size")

    def __init__(self, compute, max_size):
        super().__init__()
        self._compute = compute
        self.max_size = max_size

    def __missing__(self, chunk):
        pieces = tuple(self._compute(chunk))
        if len(self) >= self.max_size:
            self.clear()
        self[chunk] = pieces
        return pieces


def preprocess_text(inputs, remove_space=True, lower=False):
    """ALBERT's text normalisation for SentencePiece vocabularies.

    Args:
        inputs: str or UTF-8 bytes.
        remove_space: bool, collapse runs of whitespace into one space and strip the ends.
        lower: bool, lower-case (after normalisation).

    Returns:
        str: NFKD-normalised text without combining characters, optionally lower-cased.
    """
    outputs = convert_to_unicode(inputs)
    if remove_space:
        outputs = " ".join(outputs.split())
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join(c for c in outputs if not unicodedata.combining(c))
    if lower:
        outputs = outputs.lower()
    return outputs


def _split_number_commas(sp_model, pieces):
    """ALBERT's fix-up of SentencePiece pieces: a piece such as "▁1990," becomes "▁1990", ",".

    The digits are re-encoded on their own; if the original piece did not start a word, the word
    marker SentencePiece adds in front of the re-encoded digits is dropped again.
    """
    output = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub_pieces = sp_model.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            if (piece[0] != SPIECE_UNDERLINE and sub_pieces
                    and sub_pieces[0][0] == SPIECE_UNDERLINE):
                if len(sub_pieces[0]) == 1:
                    sub_pieces = sub_pieces[1:]
                else:
                    sub_pieces[0] = sub_pieces[0][1:]
            sub_pieces.append(piece[-1])
            output.extend(sub_pieces)
        else:
            output.append(piece)
    return output


def encode_pieces(sp_model, text, sample=False):
    """ALBERT's `encode_pieces`: SentencePiece pieces of `text` with number-comma splitting.

    Args:
        sp_model: sentencepiece.SentencePieceProcessor.
        text: str, normally the output of `preprocess_text`.
        sample: bool, sample a segmentation (subword regularisation, as ALBERT: nbest 64,
            alpha 0.1) instead of the best one.

    Returns:
        list of str pieces.
    """
    if sample:
        pieces = sp_model.encode(text, out_type=str, enable_sampling=True, nbest_size=64,
                                 alpha=0.1)
    else:
        pieces = sp_model.encode(text, out_type=str)
    return _split_number_commas(sp_model, pieces)


class FullTokenizer:
    """Runs end-to-end tokenization: text -> WordPiece (or SentencePiece) tokens -> ids.

    Attributes:
        vocab: OrderedDict (WordPiece) or dict (SentencePiece) of str token -> int id.
        inv_vocab: dict of int id -> str token.
        basic_tokenizer: BasicTokenizer (WordPiece vocabularies only).
        wordpiece_tokenizer: WordpieceTokenizer (WordPiece vocabularies only).
        sp_model: sentencepiece.SentencePieceProcessor or None.
    """

    def __init__(self, vocab_file, do_lower_case=True, spm_model_file=None, *,
                 preserve_unused_tokens=False, cache_size=DEFAULT_CACHE_SIZE):
        """Constructs a FullTokenizer.

        Args:
            vocab_file: str, WordPiece vocabulary (one token per line); ignored (may be None) when
                `spm_model_file` is given.
            do_lower_case: bool, lower-case the input (and strip accents for WordPiece).
            spm_model_file: str or None, a SentencePiece model to use instead of WordPiece.
            preserve_unused_tokens: bool, Google's flag (default False): keep a
                whitespace-separated `[unusedN]` that is in the vocabulary as one token.
            cache_size: int, maximum entries of the chunk memo behind `tokenize`.

        Raises:
            FileNotFoundError: naming the vocabulary or model file if it does not exist.
        """
        self.do_lower_case = do_lower_case
        self.sp_model = None
        self.basic_tokenizer = None
        self.wordpiece_tokenizer = None
        if spm_model_file:
            import sentencepiece as spm  # pylint: disable=import-outside-toplevel

            self.sp_model = spm.SentencePieceProcessor()
            self.sp_model.LoadFromSerializedProto(
                _read_file(spm_model_file, binary=True, what="SentencePiece model file"))
            self.vocab = {self.sp_model.IdToPiece(i): i
                          for i in range(self.sp_model.GetPieceSize())}
        else:
            if vocab_file is None:
                raise ValueError("FullTokenizer needs a vocab_file or an spm_model_file")
            self.vocab = load_vocab(vocab_file)
            self.basic_tokenizer = BasicTokenizer(
                do_lower_case=do_lower_case, vocab=self.vocab,
                preserve_unused_tokens=preserve_unused_tokens)
            self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
            self._memo = _ChunkMemo(self._wordpieces_of_chunk, cache_size)
            # Characters known to be their own single token in any text of solo characters (see
            # the module docstring); at most one entry per distinct character.
            self._solo = set()
        self.inv_vocab = {v: k for k, v in self.vocab.items()}

    def _wordpieces_of_chunk(self, chunk):
        """Google's tokens for one whitespace-free chunk of cleaned text (the memo's miss path)."""
        # pylint: disable=protected-access
        basic = self.basic_tokenizer
        tokenize_word = self.wordpiece_tokenizer._tokenize_word
        output = []
        for token in basic._tokenize_chunk(chunk):
            if basic.preserve_unused_tokens and basic._preserve(token):
                output.append(token)
            else:
                output.extend(tokenize_word(token))
        if (len(chunk) == 1 and output == [chunk]
                and (_is_chinese_char(ord(chunk)) or _PUNCTUATION[ord(chunk)])):
            self._solo.add(chunk)
        return output

    def tokenize(self, text):
        """Tokenizes one text.

        Args:
            text: str or UTF-8 bytes.

        Returns:
            list of str tokens, identical to Google's `FullTokenizer.tokenize` (WordPiece) or to
            ALBERT's `encode_pieces(preprocess_text(text, lower=do_lower_case))` (SentencePiece).
        """
        if self.sp_model is not None:
            return encode_pieces(self.sp_model,
                                 preprocess_text(text, lower=self.do_lower_case))
        text = convert_to_unicode(text)
        if not text.isascii() and self._solo.issuperset(text):
            return list(text)
        memo = self._memo
        return [p for chunk in _clean_and_pad(text).split() for p in memo[chunk]]

    def tokenize_batch(self, texts):
        """Tokenizes many texts; the same as `[self.tokenize(t) for t in texts]`, faster.

        Args:
            texts: iterable of str or UTF-8 bytes.

        Returns:
            list (one entry per text) of lists of str tokens.
        """
        # The output is millions of small objects built in one go; the cyclic garbage collector
        # would otherwise rescan them again and again (none of them can form a cycle).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if self.sp_model is not None:
                return self._tokenize_batch_sentencepiece(texts)
            memo = self._memo
            solo = self._solo
            clean = _clean_and_pad
            output = []
            append = output.append
            for text in texts:
                if text.__class__ is not str:
                    text = convert_to_unicode(text)
                if not text.isascii() and solo.issuperset(text):
                    append(list(text))
                else:
                    append([p for chunk in clean(text).split() for p in memo[chunk]])
            return output
        finally:
            if gc_was_enabled:
                gc.enable()

    def _tokenize_batch_sentencepiece(self, texts):
        lower = self.do_lower_case
        prepared = [preprocess_text(t, lower=lower) for t in texts]
        # SentencePiece encodes a list in C++ (multi-threaded); the result equals per-text encode.
        encoded = self.sp_model.encode(prepared, out_type=str)
        return [_split_number_commas(self.sp_model, pieces) for pieces in encoded]

    def convert_tokens_to_ids(self, tokens):
        """Converts tokens to int ids.

        Args:
            tokens: iterable of str.

        Returns:
            list of int.

        Raises:
            KeyError: naming a token that is not in the WordPiece vocabulary. (With SentencePiece,
                as in ALBERT, an unknown piece maps to the model's unknown-piece id.)
        """
        if self.sp_model is not None:
            return [self.sp_model.PieceToId(printable_text(t)) for t in tokens]
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        """Converts int ids to tokens.

        Args:
            ids: iterable of int.

        Returns:
            list of str.

        Raises:
            KeyError: naming an id that is not in the vocabulary.
        """
        return convert_by_vocab(self.inv_vocab, ids)

    def tokenize_words(self, sentences):
        """The pieces of every word of pre-split sentences: each word tokenized on its own
        (Google's `run_squad.py` and the BERT-NER ports).

        Args:
            sentences: iterable of lists of str words.

        Returns:
            list (one per sentence) of lists (one per word) of lists of str tokens; a word
            may have none.
        """
        sentences = [list(words) for words in sentences]
        pieces = iter(self.tokenize_batch([w for words in sentences for w in words]))
        return [[next(pieces) for _ in words] for words in sentences]

    def convert_tokens_to_string(self, tokens):
        """WordPieces -> text as Google's `write_predictions` de-tokenizes them: " ##" joined,
        whitespace runs made single spaces."""
        text = " ".join(tokens).replace(" ##", "").replace("##", "")
        return " ".join(text.strip().split())


def is_tokenizer_json(path) -> bool:
    """Whether a --vocab_file names a Hugging Face `tokenizer.json` (by its `.json` suffix; a
    WordPiece vocabulary is a `.txt` of one token a line)."""
    return os.fspath(path).endswith(".json")


class BpeTokenizer:
    """A Hugging Face `tokenizer.json` (ModernBERT's byte-level BPE, GPT-NeoX style), with the
    `FullTokenizer` interface the scripts use: text -> tokens -> ids.

    `tokenize` gives the tokens of the text alone (added tokens such as runs of spaces and
    [MASK] recognised, no [CLS]/[SEP]: the scripts add those themselves as for BERT), so
    [CLS] + tokenize(a) + [SEP] (+ tokenize(b) + [SEP]) has the ids of Hugging Face's
    `Tokenizer.encode(a, b)` with ModernBERT's post-processor. Tokens are byte-level strings
    ("Ġworld" for " world"). The Hugging Face `tokenizers` library does the work; its import is
    deferred so the WordPiece path never needs it.

    Attributes:
        vocab: dict of str token -> int id (added tokens included).
        inv_vocab: dict of int id -> str token.
        do_lower_case: always False (the tokenizer.json carries its own normalizer).
    """

    def __init__(self, tokenizer_file):
        """Args: tokenizer_file: path of a `tokenizer.json`.

        Raises:
            FileNotFoundError / ValueError: naming the file when it is missing or not a
                tokenizer.json the library reads.
        """
        from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel

        text = _read_file(tokenizer_file, binary=True, what="tokenizer.json file")
        try:
            self._tokenizer = Tokenizer.from_str(text.decode("utf-8"))
        except Exception as e:  # the library raises its own Exception type
            raise ValueError(f"{tokenizer_file}: not a Hugging Face tokenizer.json "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                             ) from None
        self.do_lower_case = False
        self.vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}

    def tokenize(self, text):
        """text (str or UTF-8 bytes) -> list of str tokens, without special tokens around.

        The tokens are the vocabulary's entries of the ids (`Encoding.tokens` would give an
        added token with the text it consumed, e.g. " [MASK]" for [MASK] with its left strip).
        """
        inv_vocab = self.inv_vocab
        encoding = self._tokenizer.encode(convert_to_unicode(text), add_special_tokens=False)
        return [inv_vocab[i] for i in encoding.ids]

    def tokenize_batch(self, texts):
        """The same as `[self.tokenize(t) for t in texts]`, encoded by the library in one call."""
        texts = [convert_to_unicode(t) for t in texts]
        inv_vocab = self.inv_vocab
        return [[inv_vocab[i] for i in e.ids]
                for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def tokenize_words(self, sentences):
        """The pieces of every word of pre-split sentences, as the words read in running text:
        each sentence is encoded once as its words joined by single spaces, and each token goes
        to the word holding its last character (by the library's character offsets; a token of
        the separating space alone goes to the next word). So a word after the first carries
        its leading space ("Ġworld"), as in pretraining, and a sentence's pieces concatenated
        are `tokenize(" ".join(words))`.

        Args:
            sentences: iterable of lists of str words (without spaces inside).

        Returns:
            list (one per sentence) of lists (one per word) of lists of str tokens.
        """
        sentences = [[convert_to_unicode(w) for w in words] for words in sentences]
        inv_vocab = self.inv_vocab
        encodings = self._tokenizer.encode_batch([" ".join(words) for words in sentences],
                                                 add_special_tokens=False)
        out = []
        for words, encoding in zip(sentences, encodings):
            owner = []  # character index -> word index (a separating space: the next word)
            for index, word in enumerate(words):
                owner.extend([index] * (len(word) + (1 if index else 0)))
            pieces = [[] for _ in words]
            for token_id, (start, end) in zip(encoding.ids, encoding.offsets):
                pieces[owner[max(end - 1, start)]].append(inv_vocab[token_id])
            out.append(pieces)
        return out

    def convert_tokens_to_string(self, tokens):
        """Byte-level tokens -> text (the tokenizer's decoder), whitespace runs made single
        spaces and stripped, as `write_predictions` compares answer texts."""
        return " ".join(self._tokenizer.decoder.decode(list(tokens)).split())

    def convert_tokens_to_ids(self, tokens):
        """tokens -> ids; a token outside the vocabulary is a KeyError naming it."""
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)

    def normalize(self, text):
        """str -> str: the file's normalizer (the identity when it has none); the graph
        tokenizer matches the normalized added tokens by it, as the library does."""
        normalizer = self._tokenizer.normalizer
        return normalizer.normalize_str(text) if normalizer is not None else text

    def decode(self, ids):
        """ids -> text (byte-level decoding, special tokens kept)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)
