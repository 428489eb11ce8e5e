r"""ModernBERT's byte-level BPE (a Hugging Face `tokenizer.json`) as TensorFlow ops.

`BpeGraph.ids` gives, for a batch of UTF-8 strings, the ids `tokenization.BpeTokenizer` (that is,
Hugging Face `tokenizers`) gives each of them without special tokens around. A SavedModel holding
it needs `tensorflow` and, for an NFC normalizer, `tensorflow-text` (its `NormalizeUTF8` op).

The steps are the library's, in its order:

1. Bytes that are not valid UTF-8 are dropped (`BpeTokenizer` decodes with errors="ignore").
2. The added tokens that are matched before normalization (the special tokens: [CLS], [MASK], ...)
   are found in the raw text: leftmost first, the longest at a position, a token with `lstrip`
   / `rstrip` taking the whitespace on that side. RE2 (`tf.strings.regex_replace`) does the same
   search with the tokens as alternatives, longest first; the file's tokens are checked for the
   cases where the two searches could differ (see `_AddedTokens`).
3. The other parts are normalized (NFC, by TF Text's ICU) and the normalized added tokens (the
   runs of spaces of GPT-NeoX's vocabulary) are found in them the same way. `tokenizers`'
   normalization tables are older than ICU's: the characters they disagree on (combining marks
   and compositions of scripts added since) are normalized alone, which is how the older tables
   treat a character they do not know (`_nfc_isolated` finds them with both libraries).
4. The byte-level pre-tokenizer's regex, GPT-2's
   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, is applied
   as rules on the characters' classes (`_word_starts`), not as a regex: RE2 has no look-ahead, and
   RE2's Unicode tables are not the library's. The classes (letter, number, whitespace, other)
   are read, once per process, from the library's own regex (`_char_classes`).
5. Each word's UTF-8 bytes become the byte-level symbols (GPT-2's byte-to-unicode table, looked
   up in the vocabulary), and the merges are applied by rank in a `tf.while_loop`: each round
   merges, in every word, the occurrences of that word's lowest-ranked pair, left to right and
   without overlap. That is the order of the library's priority queue whenever a merge's inputs
   are made by merges of lower rank (as every BPE trainer writes them); the file is checked for
   it, so ids are equal, not just usually equal.

What a file may hold: normalizer none or NFC; pre-tokenizer ByteLevel with `use_regex` and
without `add_prefix_space`; a BPE model without dropout, byte fallback, subword prefix or suffix,
or `ignore_merges`; added tokens without `single_word`. Anything else is refused in one line
naming the file (`BpeGraphError`).
"""

import functools
import json

import numpy as np
import tensorflow as tf

_NUM_CODEPOINTS = 0x110000
_PAGE_BITS = 8
# Character classes of the pre-tokenizer's regex; _T marks an added token (one symbol).
_L, _N, _O, _W, _T = 0, 1, 2, 3, 4
_SPACE, _APOSTROPHE = 0x20, 0x27
# The regex's contractions after an apostrophe: one letter, or two.
_CONTRACTION_ONE = "stmd"
_CONTRACTION_TWO = ("re", "ve", "ll")
# Marks the added tokens' matches in a string (bytes no valid UTF-8 text contains).
_CUT, _TOKEN = b"\xff", b"\xfe"
_NO_RANK = np.iinfo(np.int32).max


class BpeGraphError(ValueError):
    """A tokenizer.json the graph tokenizer cannot reproduce exactly."""


def tf_text_module():
    """TensorFlow Text (the serving export's optional dependency), or one line saying how to
    install it."""
    try:
        import tensorflow_text  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError("the serving export needs tensorflow-text: pip install "
                          "'bert_mgpu[export]' (or tensorflow-text==2.21.*)") from e
    return tensorflow_text


def _code_points():
    """Every code point UTF-8 can carry (no surrogates), as a numpy int array."""
    return np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, _NUM_CODEPOINTS)])


@functools.lru_cache(maxsize=1)
def _char_classes():
    """int8 [0x110000]: each code point's class in the byte-level regex of the installed
    `tokenizers` (letter `\\p{L}`, number `\\p{N}`, whitespace `\\s`, other).

    The regex splits a string of every code point, in order, where the class changes (a space
    joins the run after it, and is classified alone); each run's class is that of its last
    character, found by whether it joins "a" (a letter), "1" (a number) or "!" (other)."""
    from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel

    split = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str

    def probe(char):
        for cls, lead in ((_L, "a"), (_N, "1"), (_O, "!")):
            if len(split(lead + char)) == 1:
                return cls
        return _W

    cps = _code_points()
    text = "".join(map(chr, cps))
    classes = np.full(_NUM_CODEPOINTS, _O, np.int8)
    for _, (start, end) in split(text):
        first = start + (text[start] == " " and end - start > 1)
        cls = probe(text[end - 1])
        if probe(text[first]) != cls:
            raise BpeGraphError("the installed tokenizers' byte-level regex does not split "
                                "characters by class as GPT-2's regex does")
        classes[cps[start:end]] = cls
    classes[_SPACE] = probe(" ")
    return classes


@functools.lru_cache(maxsize=1)
def _nfc_isolated():
    """int32 [n], sorted: characters `tokenizers` does not know (its normalization tables are
    older than TF Text's ICU) where ICU's NFC would treat them otherwise. Normalizing each of
    them alone gives the older tables' result: an unknown character is a starter that composes
    with nothing. Found with both libraries: the characters whose NFC after "a" and before or
    after U+0301 differs (new combining marks), those whose NFD differs (new precomposed
    characters), and the parts of those NFDs the library's own decompositions never use (the
    new letters and marks that compose in ICU only; an old mark such as U+0307 is used by the
    library's decompositions and keeps composing)."""
    from tokenizers import normalizers  # pylint: disable=import-outside-toplevel
    tf_text = tf_text_module()
    chars = [chr(c) for c in _code_points() if c != 0x0A]  # "\n" separates the probes

    def both(library, icu_form, context):
        joined = "\n".join(context.format(c) for c in chars)
        ours = library.normalize_str(joined).split("\n")
        icu = tf_text.normalize_utf8(tf.constant([joined]), icu_form).numpy()[0]
        icu = icu.decode("utf-8").split("\n")
        if not len(ours) == len(icu) == len(chars):
            raise BpeGraphError("NFC probe: a line separator was normalized")
        return ours, icu

    found = set()
    for context in ("a{}\u0301", "a\u0301{}"):
        ours, icu = both(normalizers.NFC(), "NFC", context)
        found.update(ord(c) for c, a, b in zip(chars, ours, icu) if a != b)
    ours, icu = both(normalizers.NFD(), "NFD", "{}")
    known = {ord(part) for c, a in zip(chars, ours) if a != c for part in a}
    for char, a, b in zip(chars, ours, icu):
        if a != b:
            found.add(ord(char))
            found.update(ord(part) for part in b if ord(part) not in known)
    return np.array(sorted(found), np.int32)


def _paged(values):
    """(page_base int32 [pages], entries [n]) of `values` [0x110000]: equal pages stored once."""
    pages = values.reshape(-1, 1 << _PAGE_BITS)
    unique, inverse = np.unique(pages, axis=0, return_inverse=True)
    return (np.asarray(inverse, np.int32).reshape(-1) << _PAGE_BITS), unique.reshape(-1)


def _bytes_to_unicode():
    """GPT-2's byte -> printable character table (`bytes_char` in tokenizers), as a list."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
                 + list(range(0xAE, 0xFF + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _shift_right(x, first):
    """x[i-1] at position i, `first` at position 0."""
    return tf.concat([tf.fill([1], first), x[:-1]], axis=0)[:tf.size(x)]


def _shift_left(x, last, steps=1):
    """x[i+steps] at position i, `last` past the end."""
    return tf.concat([x[steps:], tf.fill([steps], last)], axis=0)[:tf.size(x)]


def _regex_class(code_points):
    """An RE2 character class of the given code points."""
    return "[" + "".join(f"\\x{{{c:x}}}" for c in sorted(code_points)) + "]"


def _whitespace():
    """The whitespace of the regex (and of the added tokens' `lstrip`/`rstrip`, Rust's `\\s`:
    both are Unicode's White_Space) as code points."""
    return [int(c) for c in np.flatnonzero(_char_classes() == _W)]


class _AddedTokens(tf.Module):
    """One set of added tokens (the raw text's or the normalized text's) found in strings."""

    def __init__(self, tokens, source):
        """Args:
            tokens: list of (content str, id int, lstrip bool, rstrip bool), contents as
                they are matched (normalized tokens already normalized).
            source: the file's path, for errors.

        Raises:
            BpeGraphError: for a set whose RE2 search could differ from the library's
                (the content-first leftmost-longest search, then the strip).
        """
        super().__init__()
        space = set(_whitespace())
        for content, _, lstrip, rstrip in tokens:
            stripped = lstrip or rstrip
            if stripped and (ord(content[0]) in space or ord(content[-1]) in space):
                raise BpeGraphError(f"{source}: added token {content!r} strips whitespace "
                                    f"and has whitespace at its ends")
            if any(lstrip and len(other) > len(content) and other.startswith(content)
                   and not other_lstrip for other, _, other_lstrip, _ in tokens):
                raise BpeGraphError(f"{source}: added token {content!r} strips the space on "
                                    f"its left and begins a longer token that does not")
        if any(left or right for _, _, left, right in tokens) and any(ord(c[0]) in space
                                                        for c, _, _, _ in tokens):
            raise BpeGraphError(f"{source}: an added token begins with whitespace while "
                                f"another strips whitespace")
        space_class = _regex_class(space)
        alternatives = []
        for content, _, lstrip, rstrip in sorted(tokens, key=lambda t: -len(t[0].encode())):
            core = "".join(f"\\x{{{ord(c):x}}}" for c in content)
            alternatives.append((space_class + "*" if lstrip else "") + core
                                + (space_class + "*" if rstrip else ""))
        self.pattern = "(?:" + "|".join(alternatives) + ")"
        self.strip_pattern = f"^{space_class}+|{space_class}+$"
        self.table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([t[0] for t in tokens]), tf.constant([t[1] for t in tokens], tf.int32)),
            default_value=-1)

    def split(self, strings):
        """strings [n] -> (pieces, ids, consumed): string, int32 and string RaggedTensors
        [n, (pieces)], the parts between tokens (id -1; piece "") and the tokens (their id),
        in order, none empty; `consumed`: the text each took (a token's match, with the
        whitespace it strips)."""
        marked = tf.strings.regex_replace(strings, self.pattern, _CUT + _TOKEN + b"\\0" + _CUT)
        pieces = tf.strings.split(marked, sep=_CUT)
        pieces = tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)
        flat = pieces.values
        is_token = tf.equal(tf.strings.substr(flat, 0, 1), _TOKEN)
        length = tf.strings.length(flat)
        content = tf.strings.substr(flat, tf.ones_like(length), length - 1)
        ids = self.table.lookup(content)
        # A match that took whitespace (`lstrip`/`rstrip`) is its token's content without it.
        ids = tf.where(ids < 0, self.table.lookup(
            tf.strings.regex_replace(content, self.strip_pattern, "")), ids)
        return (pieces.with_values(tf.where(is_token, tf.constant(b""), flat)),
                pieces.with_values(tf.where(is_token, ids, -1)),
                pieces.with_values(tf.where(is_token, content, flat)))


def _only(component, kind, source, what):
    """`component` (a tokenizer.json part) itself, or the one element of a Sequence of them;
    None when it is null. Raises BpeGraphError for another type."""
    if component is None:
        return None
    if component.get("type") == "Sequence":
        parts = component.get(kind + "s") or component.get(kind) or []
        if len(parts) != 1:
            raise BpeGraphError(f"{source}: a {what} Sequence of {len(parts)} steps is not "
                                f"supported by the graph tokenizer")
        component = parts[0]
    return component


def _check_file(spec, source):
    """Raises BpeGraphError unless the tokenizer.json `spec` is what the graph reproduces
    (module docstring); returns whether it normalizes with NFC."""
    normalizer = _only(spec.get("normalizer"), "normalizer", source, "normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        raise BpeGraphError(f"{source}: normalizer {normalizer.get('type')} is not supported "
                            f"by the graph tokenizer (none or NFC)")
    pre = _only(spec.get("pre_tokenizer"), "pretokenizer", source, "pre-tokenizer") or {}
    if (pre.get("type") != "ByteLevel" or pre.get("add_prefix_space")
            or not pre.get("use_regex", True)):
        raise BpeGraphError(f"{source}: the graph tokenizer needs the ByteLevel pre-tokenizer "
                            f"with use_regex and without add_prefix_space, got {pre}")
    model = spec.get("model") or {}
    unsupported = [key for key in ("dropout", "byte_fallback", "continuing_subword_prefix",
                                   "end_of_word_suffix", "ignore_merges") if model.get(key)]
    if model.get("type") != "BPE" or unsupported:
        raise BpeGraphError(f"{source}: the graph tokenizer needs a BPE model without "
                            f"{', '.join(unsupported) or 'another type'}")
    for token in spec.get("added_tokens") or []:
        if token.get("single_word"):
            raise BpeGraphError(f"{source}: added token {token['content']!r} is single_word, "
                                f"which the graph tokenizer does not support")
    return normalizer is not None


def _merge_tables(model, vocab, source):
    """(keys int64 [M], merged ids int32 [M], key base): merge r of the pair (a, b) has key
    id(a) * base + id(b) and makes token id merged[r].

    Raises:
        BpeGraphError: a merge whose input is made by a merge of equal or higher rank, or a
            repeated pair (the round-by-round merging then differs from the library's).
    """
    base = max(vocab.values()) + 1
    pairs = [m.split(" ") if isinstance(m, str) else m for m in model.get("merges") or []]
    try:
        triples = [(vocab[a], vocab[b], vocab[a + b]) for a, b in pairs]
    except KeyError as e:
        raise BpeGraphError(f"{source}: merge of a token outside the vocabulary: {e}") from None
    made_at = {}
    for rank, (_, _, merged) in enumerate(triples):
        made_at[merged] = rank
    for rank, (a, b, _) in enumerate(triples):
        if made_at.get(a, -1) >= rank or made_at.get(b, -1) >= rank:
            raise BpeGraphError(f"{source}: merge {rank} ({pairs[rank]}) uses a token made by a "
                                f"later merge; the graph tokenizer needs them in order")
    keys = np.array([a * base + b for a, b, _ in triples], np.int64)
    if len(np.unique(keys)) != len(keys):
        raise BpeGraphError(f"{source}: a pair is merged twice")
    return keys, np.array([m for _, _, m in triples], np.int32), base


class BpeGraph(tf.Module):
    """A tokenizer.json's byte-level BPE as TF ops (module docstring); its tables are
    constants and hash tables of this module, so a SavedModel holding it needs no file."""

    def __init__(self, tokenizer_file, normalize=None):
        """Args:
            tokenizer_file: str, the tokenizer.json (`tokenization.BpeTokenizer`'s file).
            normalize: function str -> str, the file's normalizer (to match the normalized
                added tokens as the library does); None: no normalizer.

        Raises:
            BpeGraphError: for a file the graph cannot reproduce exactly (one line naming it).
            ImportError: when tensorflow-text is needed (NFC) and not installed.
        """
        super().__init__()
        with open(tokenizer_file, encoding="utf-8") as f:
            spec = json.load(f)
        self._nfc = _check_file(spec, tokenizer_file)
        model = spec["model"]
        vocab = dict(model["vocab"])
        symbols = _bytes_to_unicode()
        missing = [s for s in symbols if s not in vocab]
        if missing:
            raise BpeGraphError(f"{tokenizer_file}: the vocabulary lacks byte-level symbols "
                                f"{missing[:5]}")
        keys, merged, self._key_base = _merge_tables(model, vocab, tokenizer_file)
        self._byte_ids = tf.constant([vocab[s] for s in symbols], tf.int32)
        if len(keys):
            self._ranks = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.range(len(keys), dtype=tf.int32)), default_value=-1)
        self._merged = tf.constant(merged)
        page_base, entries = _paged(_char_classes())
        self._page_base = tf.constant(page_base)
        self._classes = tf.constant(entries.astype(np.int32))
        added = spec.get("added_tokens") or []
        normalize = normalize or (lambda s: s)
        self._raw = self._added_set([(t["content"], t["id"], t.get("lstrip"), t.get("rstrip"))
                                     for t in added if not t.get("normalized")], tokenizer_file)
        self._normalized = self._added_set(
            [(normalize(t["content"]), t["id"], t.get("lstrip"), t.get("rstrip"))
             for t in added if t.get("normalized")], tokenizer_file)
        if self._nfc:
            tf_text_module()
            self._isolated = tf.constant(_nfc_isolated())

    @staticmethod
    def _added_set(tokens, source):
        return _AddedTokens(tokens, source) if tokens else None

    # -----------------------------------------------------------------------------------------
    # Texts -> items (added tokens, and normalized text between them)

    @staticmethod
    def _split(strings, added):
        """`_AddedTokens.split`, or each non-empty string as one piece when there is no set."""
        if added is not None:
            return added.split(strings)
        pieces = tf.RaggedTensor.from_tensor(strings[:, None])
        pieces = tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)
        return pieces, pieces.with_values(tf.fill(tf.shape(pieces.values), -1)), pieces

    def _normalize(self, strings):
        """NFC of each string [n] as `tokenizers` computes it (module docstring, step 3)."""
        if not self._nfc:
            return strings
        normalize = lambda s: tf_text_module().normalize_utf8(s, "NFC")  # noqa: E731
        if self._isolated.shape[0] == 0:
            return normalize(strings)

        def isolated():
            decoded = tf.strings.unicode_decode(strings, "UTF-8")
            cps, rows = decoded.values, decoded.value_rowids()
            alone = tf.equal(tf.gather(self._isolated, tf.minimum(
                tf.searchsorted(self._isolated, cps), tf.size(self._isolated) - 1)), cps)
            first = tf.not_equal(rows, _shift_right(rows, tf.constant(-1, tf.int64)))
            cut = first | alone | _shift_right(alone, False)
            segments = tf.RaggedTensor.from_value_rowids(
                cps, tf.cumsum(tf.cast(cut, tf.int64)) - 1, validate=False)
            parts = normalize(tf.strings.unicode_encode(segments, "UTF-8"))
            return tf.strings.reduce_join(tf.RaggedTensor.from_value_rowids(
                parts, tf.boolean_mask(rows, cut), nrows=tf.size(strings, out_type=tf.int64),
                validate=False), axis=1)

        cps = tf.strings.unicode_decode(strings, "UTF-8").values
        hit = tf.reduce_any(tf.equal(tf.gather(self._isolated, tf.minimum(
            tf.searchsorted(self._isolated, cps), tf.size(self._isolated) - 1)), cps))
        return tf.cond(hit, isolated, lambda: normalize(strings))

    def normalize_text(self, strings):
        """string [n] -> string [n]: each (valid UTF-8) string normalized as the file's
        normalizer does (unchanged without one)."""
        return self._normalize(strings)

    def _items(self, text):
        """text string [B] -> (item strings [I], item ids int32 [I], item rows int64 [I],
        item texts string [I]): the added tokens (id >= 0, string "") and the normalized text
        between them (id -1), in order, each with its text's index and the text it stands
        for (a token's match; the normalized text itself)."""
        decoded = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
        text = tf.strings.unicode_encode(decoded, "UTF-8")
        pieces, ids, consumed = self._split(text, self._raw)
        strings, ids, rows = pieces.values, ids.values, pieces.value_rowids()
        is_text = ids < 0
        inner, inner_ids, inner_consumed = self._split(
            self._normalize(tf.boolean_mask(strings, is_text)), self._normalized)
        # Each first-level piece becomes its token, or its second-level pieces: gathered from
        # [the tokens; the second-level pieces].
        tokens = tf.size(ids, out_type=tf.int64) - tf.reduce_sum(tf.cast(is_text, tf.int64))
        text_index = tf.cumsum(tf.cast(is_text, tf.int64)) - 1
        token_index = tf.cumsum(tf.cast(~is_text, tf.int64)) - 1
        splits = inner.row_splits
        start = tf.where(is_text, tokens + tf.gather(splits, tf.maximum(text_index, 0)),
                         token_index)
        count = tf.where(is_text, tf.gather(splits, text_index + 1)
                         - tf.gather(splits, tf.maximum(text_index, 0)), 1)
        index = tf.ragged.range(start, start + count)
        pool_strings = tf.concat([tf.fill([tokens], tf.constant(b"")), inner.values], 0)
        pool_ids = tf.concat([tf.boolean_mask(ids, ~is_text), inner_ids.values], 0)
        pool_consumed = tf.concat([tf.boolean_mask(consumed.values, ~is_text),
                                   inner_consumed.values], 0)
        return (tf.gather(pool_strings, index.values), tf.gather(pool_ids, index.values),
                tf.gather(rows, index.value_rowids()), tf.gather(pool_consumed, index.values))

    # -----------------------------------------------------------------------------------------
    # Items -> words (the byte-level regex) -> byte-level symbols

    def _class(self, cps):
        """int32 [n]: each code point's class; an added token (negative) is _T."""
        safe = tf.maximum(cps, 0)
        page = tf.gather(self._page_base, tf.bitwise.right_shift(safe, _PAGE_BITS))
        cls = tf.gather(self._classes, page + tf.bitwise.bitwise_and(safe, (1 << _PAGE_BITS) - 1))
        return tf.where(cps < 0, _T, cls)

    def _word_starts(self, cps, first):
        """bool [n]: where the regex starts a word, in the characters `cps` int32 [n] of all
        items in order (`first` bool [n]: an item's first character; the regex runs on each
        item alone). The regex's alternatives, as rules on classes:

        - ` ?\\p{L}+`, ` ?\\p{N}+`, ` ?[^\\s\\p{L}\\p{N}]+`: a run of one class (letters,
          numbers or other) is one word, with the space (U+0020) just before it when that
          space ends a whitespace run;
        - `\\s+(?!\\S)`, `\\s+`: a whitespace run is one word, but one followed by a
          non-whitespace character leaves its last character to the next word (joined to it if
          it is a space, else a word of its own);
        - `'s|'t|'re|'ve|'m|'ll|'d` (first in the regex): where a word would start at an
          apostrophe (not inside a run of other characters, not after a joined space) and one
          of these follows, the apostrophe and its letters are a word and the letters after
          them start the next.
        """
        cls = self._class(cps)
        same_next = ~_shift_left(first, True)
        same_next2 = same_next & ~_shift_left(first, True, steps=2)
        prev_cls, next_cls = _shift_right(cls, -1), _shift_left(cls, -1)
        white = tf.equal(cls, _W)
        # The last character of a whitespace run that a non-whitespace character follows.
        last_white = white & same_next & tf.not_equal(next_cls, _W)
        joins = last_white & tf.equal(cps, _SPACE)
        after_join = _shift_right(joins, False)
        contraction = tf.equal(cps, _APOSTROPHE) & (
            first | (tf.not_equal(prev_cls, _O) & ~after_join))
        next1, next2 = _shift_left(cps, -1), _shift_left(cps, -1, steps=2)
        one = contraction & same_next & tf.reduce_any(
            tf.equal(next1[:, None], [ord(c) for c in _CONTRACTION_ONE]), axis=1)
        two = contraction & same_next2 & tf.reduce_any(
            tf.equal(next1[:, None], [ord(p[0]) for p in _CONTRACTION_TWO])
            & tf.equal(next2[:, None], [ord(p[1]) for p in _CONTRACTION_TWO]), axis=1)
        inside = _shift_right(one | two, False) | _shift_right(_shift_right(two, False), False)
        after = (_shift_right(_shift_right(one, False), False)
                 | _shift_right(_shift_right(_shift_right(two, False), False), False))
        starts = (first
                  | (white & (tf.not_equal(prev_cls, _W) | last_white))
                  | (~white & tf.not_equal(prev_cls, cls) & ~after_join)
                  | after)
        return starts & ~inside

    def _symbols(self, cps, word):
        """The byte-level symbols of characters `cps` int32 [n] (an added token, -1 - id, is
        its own id) and their words (`word` int64 [n]): (symbols int32 [m], words int64 [m],
        characters int64 [m]: the index in `cps` of each symbol's character)."""
        n = 1 + sum(tf.cast(cps >= limit, tf.int32) for limit in (0x80, 0x800, 0x10000))
        n = tf.where(cps < 0, 1, n)
        index = tf.ragged.range(n)
        k, parent = index.values, index.value_rowids()
        cp, length = tf.gather(cps, parent), tf.gather(n, parent)
        shifted = tf.bitwise.right_shift(tf.maximum(cp, 0), 6 * (length - 1 - k))
        lead = tf.gather(tf.constant([0, 0, 0xC0, 0xE0, 0xF0]), length)
        byte = tf.where(tf.equal(k, 0), tf.bitwise.bitwise_or(lead, shifted),
                        tf.bitwise.bitwise_or(0x80, tf.bitwise.bitwise_and(shifted, 0x3F)))
        symbols = tf.where(cp < 0, -1 - cp, tf.gather(self._byte_ids, tf.minimum(byte, 255)))
        return symbols, tf.gather(word, parent), parent

    # -----------------------------------------------------------------------------------------
    # BPE

    def _merge_round(self, symbols, words, num_words, lengths=None):
        """One round: in every word, the occurrences of its lowest-ranked pair merged, left to
        right without overlap. `lengths` int32 [symbols] (or None): the byte-level symbols
        each symbol is made of.

        Returns:
            (symbols, words, finished, lengths): the symbols and their words after the round,
            bool [symbols]: the symbol's word had nothing to merge (it never will again), and
            the symbols' lengths (None without `lengths`).
        """
        left, right = symbols[:-1], symbols[1:]
        keys = (tf.cast(left, tf.int64) * self._key_base + tf.cast(right, tf.int64))
        rank = self._ranks.lookup(keys)
        pair_word = words[:-1]
        rank = tf.where(tf.equal(pair_word, words[1:]) & (rank >= 0), rank, _NO_RANK)
        lowest = tf.math.unsorted_segment_min(rank, pair_word, num_words)
        best = tf.equal(rank, tf.gather(lowest, pair_word)) & (rank < _NO_RANK)
        # Consecutive occurrences (a pair of equal symbols repeated): every other one, from
        # the first of the run.
        position = tf.range(tf.size(best, out_type=tf.int64))
        run = tf.cumsum(tf.cast(~best, tf.int64))
        run_start = tf.math.unsorted_segment_min(
            tf.where(best, position, tf.size(best, out_type=tf.int64)), run,
            tf.size(best, out_type=tf.int64) + 1)
        merge = best & tf.equal((position - tf.gather(run_start, run)) % 2, 0)
        merged = tf.where(merge, tf.gather(self._merged, tf.where(merge, rank, 0)), left)
        symbols = tf.concat([merged, symbols[-1:]], 0)
        keep = ~_shift_right(tf.concat([merge, [False]], 0), False)
        words = tf.boolean_mask(words, keep)
        finished = tf.gather(tf.equal(lowest, _NO_RANK), words)
        if lengths is not None:
            joined = tf.where(merge, lengths[:-1] + lengths[1:], lengths[:-1])
            lengths = tf.boolean_mask(tf.concat([joined, lengths[-1:]], 0), keep)
        return tf.boolean_mask(symbols, keep), words, finished, lengths

    def _bpe(self, symbols, words, num_words, lengths=None):
        """All merges, round after round; a word with nothing left to merge leaves the rounds
        (a round costs what the words still merging hold). Returns the symbols and their words,
        in order, and with `lengths` (int32 [symbols], ones: see `_merge_round`) the byte-level
        symbols each final one is made of."""
        if self._merged.shape[0] == 0:
            return symbols, words, lengths
        tracked = (symbols, words) + ((lengths,) if lengths is not None else ())

        def body(live, done):
            symbols, words, finished, lengths = self._merge_round(*live[:2], num_words,
                                                                  *live[2:])
            live = (symbols, words) + ((lengths,) if lengths is not None else ())
            return (tuple(tf.boolean_mask(x, ~finished) for x in live),
                    tuple(tf.concat([d, tf.boolean_mask(x, finished)], 0)
                          for d, x in zip(done, live)))

        vector = tf.TensorShape([None])
        _, done = tf.while_loop(
            lambda live, _: tf.size(live[0]) > 0, body,
            (tracked, tuple(tf.zeros([0], x.dtype) for x in tracked)),
            shape_invariants=((vector,) * len(tracked),) * 2)
        # Words leave whole, each keeping its order: a stable sort by word restores the text.
        order = tf.argsort(done[1], stable=True)
        done = [tf.gather(x, order) for x in done]
        return done[0], done[1], done[2] if lengths is not None else None

    def ids(self, text):
        """Token ids of each text, as `BpeTokenizer.convert_tokens_to_ids(tokenize(text))`.

        Args:
            text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
            int32 RaggedTensor of shape [batch_size, (num_tokens)].
        """
        return self._encode(text, with_offsets=False)

    def ids_with_offsets(self, text):
        """`ids`, and the characters of each token in the text as the tokenizer reads it.

        Args:
            text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
            (ids, start, end, read): `ids`' RaggedTensor; int64 RaggedTensors of its shape,
            each token's first character and one past its last in `read` (a token's leading
            space, "Ġ", is not one of its characters unless the token is only that space:
            Hugging Face's trimmed offsets); `read` string [batch_size], the text the tokens
            come from: invalid bytes dropped, the text between added tokens normalized (the
            text itself when it is in NFC or the file has no normalizer).
        """
        return self._encode(text, with_offsets=True)

    def _encode(self, text, with_offsets):
        """`ids` or `ids_with_offsets`."""
        batch = tf.shape(text, out_type=tf.int64)[0]
        strings, ids, rows, consumed = self._items(text)
        decoded = tf.strings.unicode_decode(strings, "UTF-8")
        token = tf.RaggedTensor.from_value_rowids(
            -1 - tf.boolean_mask(ids, ids >= 0), tf.where(ids >= 0)[:, 0],
            nrows=tf.size(ids, out_type=tf.int64), validate=False)
        chars = tf.concat([decoded, token], axis=1)
        cps, item = chars.values, chars.value_rowids()
        first = tf.not_equal(item, _shift_right(item, tf.constant(-1, tf.int64)))
        starts = self._word_starts(cps, first)
        word = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
        word_row = tf.gather(rows, tf.boolean_mask(item, starts))
        symbols, words, parent = self._symbols(cps, word)
        lengths = tf.ones_like(symbols) if with_offsets else None
        symbols, words, lengths = self._bpe(symbols, words, num_words, lengths)
        ids = tf.RaggedTensor.from_value_rowids(symbols, tf.gather(word_row, words),
                                                nrows=batch, validate=False)
        if not with_offsets:
            return ids
        read = tf.RaggedTensor.from_value_rowids(consumed, rows, nrows=batch, validate=False)
        start, end = _token_chars(chars, read, lengths, parent)
        return ids, ids.with_values(start), ids.with_values(end), tf.strings.reduce_join(
            read, axis=1)


def _token_chars(chars, read, lengths, parent):
    """Each token's (first character, one past its last) in its row of the text read.

    Args:
        chars: int32 RaggedTensor [items, (chars)], each item's characters (an added token:
            one, negative).
        read: string RaggedTensor [batch_size, (items)], the text each item stands for.
        lengths: int32 [tokens], the byte-level symbols of each token, in order.
        parent: int64 [symbols], the index in `chars.values` of each byte-level symbol.

    Returns:
        (start, end): int64 [tokens].
    """
    cps, item = chars.values, chars.value_rowids()
    width = tf.cast(tf.strings.length(read.values, unit="UTF8_CHAR"), tf.int64)   # [items]
    before = tf.cumsum(width, exclusive=True)
    # (A row without items starts past the last item.)
    row_first = tf.gather(tf.concat([before, tf.reduce_sum(width, keepdims=True)], 0),
                          read.row_splits[:-1])                                    # [batch]
    item_start = before - tf.gather(row_first, read.value_rowids())
    # Each character's place in its row: a text character is one, an added token all it took.
    char_start = (tf.gather(item_start, item)
                  + tf.range(tf.size(cps, out_type=tf.int64))
                  - tf.gather(chars.row_splits, item))
    char_end = char_start + tf.where(cps < 0, tf.gather(width, item), 1)
    symbol_end = tf.cumsum(tf.cast(lengths, tf.int64))
    first = tf.gather(parent, symbol_end - tf.cast(lengths, tf.int64))
    last = tf.gather(parent, symbol_end - 1)
    leading_space = tf.equal(tf.gather(cps, first), _SPACE) & tf.not_equal(first, last)
    return (tf.gather(char_start, first) + tf.cast(leading_space, tf.int64),
            tf.gather(char_end, last))
