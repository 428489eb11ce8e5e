"""Google's `FullTokenizer` as TensorFlow ops, for SavedModels that take raw text.

`ServingTokenizer` is a `tf.Module` whose `tokenize_ids` gives, for a batch of UTF-8 strings, the
ids `bert_mgpu.tokenization.FullTokenizer` (Google's behaviour) gives for each of them, and whose
`tokenize` packs one or two texts into `input_ids`/`input_mask`/`segment_ids` exactly as
`run_classifier_mgpu.py` does (`[CLS] a [SEP] b [SEP]`, Google's pair truncation,
`--truncation=head_tail`). A SavedModel holding it needs `tensorflow` and `tensorflow-text` only.

Why not tensorflow-text's `BertTokenizer`: it replaces control and format characters with a space
instead of deleting them, keeps U+0000/U+FFFD, lower-cases by NFKC case folding instead of
`str.lower()` + NFD + accent stripping, uses another whitespace class and limits words to 100
bytes instead of 200 characters. Only its `FastWordpieceTokenizer` (greedy longest match, the same
result as Google's loop) and `SentencepieceTokenizer` ops are used here.

How the WordPiece pipeline stays exact
--------------------------------------
Google's basic tokenizer is a per-character map followed by splitting, with three exceptions
that depend on context; all three are handled:

1. Per character (tables generated here from Python's own Unicode data and the functions of
   `bert_mgpu.tokenization`, so Python decides every character): `_clean_text` (delete NUL, U+FFFD,
   Cc/Cf except tab/newline/CR; whitespace -> space; U+2028/U+2029, which survive cleaning but
   `str.split()` splits on, -> space too), CJK padding (the character becomes a word of its own),
   and, lower-cased, `str.lower()` + NFD + deletion of category Mn, which may give 0 to 3
   characters (Hangul syllables decompose). Each output character is a word character,
   punctuation (a word of its own) or a space.
2. `str.lower()` maps U+03A3 (capital sigma) to final sigma U+03C2 when, inside its
   whitespace-separated chunk, the nearest non-case-ignorable character before it is cased and
   the nearest after it is not (Python's `Final_Sigma` rule): computed on the chunk in the graph.
3. NFD reorders combining marks by combining class. After category Mn is deleted only marks of
   other categories remain (25 spacing marks, category Mc, have a non-zero class), and their order
   can change; when such a character is present, the graph takes a slower branch that keeps the
   Mn marks, sorts each run of combining marks stably by class, and deletes the Mn marks after.

Words (maximal runs of word characters) longer than 200 characters become `[UNK]`; the others go
through `FastWordpieceTokenizer` with the vocabulary in id order. Input bytes that are not valid
UTF-8 are dropped, as `FullTokenizer` does with `bytes.decode("utf-8", "ignore")`.

SentencePiece (`spm_model_file`) follows ALBERT as `FullTokenizer` does: `preprocess_text`
(whitespace runs -> one space, NFKD without combining characters, `str.lower()` when
`do_lower_case`), the model's pieces, ALBERT's split of a comma after digits, `PieceToId`.

The character tables freeze the Unicode data of the Python that builds them (the exporting
process); `FullTokenizer` in a Python with another Unicode version may differ on characters
assigned in between, and so would Google's code. Google's `preserve_unused_tokens` (off by
default and unused by the classifier) is not supported.

A Hugging Face tokenizer.json (ModernBERT's byte-level BPE) as `--vocab_file` is run by
serving/bpe.py (ids equal to `tokenization.BpeTokenizer`, i.e. Hugging Face `tokenizers`); the
packing, truncation and padding below are the same for it.

tensorflow-text is imported only when a `ServingTokenizer` is built (training never needs it). A
process that loads the SavedModel must `import tensorflow_text` first (it registers the ops).
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from bert_mgpu import tokenization
from bert_mgpu.serving import bpe as serving_bpe

# Code points per page of the two-level character tables: pages whose characters all need no
# work (identity, word character, no case) share one page, so the tables stay small.
_PAGE_BITS = 12
_PAGE_SIZE = 1 << _PAGE_BITS
_NUM_CODEPOINTS = 0x110000

# Classes of an output character.
_WORD, _PUNCT, _SPACE, _STRIP = 0, 1, 2, 3
# Property bits of an input character.
_ISO = 1          # a CJK ideograph: a word of its own
_IGNORABLE = 2    # skipped when looking for sigma's context (case-ignorable, or deleted)
_CASED = 4
_REORDER = 8      # its NFD holds a non-Mn mark with a non-zero combining class
_CAPITAL_SIGMA = 16  # U+03A3 when lower-casing (its output depends on context)
_SIGMA = 0x03A3
_FINAL_SIGMA = 0x03C2
# Where Google's run_squad.py splits a paragraph into words (`_is_squad_whitespace`).
SQUAD_WHITESPACE = (0x20, 0x09, 0x0D, 0x0A, 0x202F)

# Packing of a character's entry: start << _START_SHIFT | length << 1 | iso flag. NFKD expands a
# character to at most 18 (U+FDFA).
_MAX_EXPANSION = 31
_START_SHIFT = 6

MAX_INPUT_CHARS_PER_WORD = 200  # Google's WordpieceTokenizer default


class ServingTokenizerError(ValueError):
    """A vocabulary or option the graph tokenizer cannot represent."""


def _is_cased(char):
    return char.islower() or char.isupper() or unicodedata.category(char) == "Lt"


def _is_case_ignorable(char):
    """Python's Case_Ignorable property, read off how `str.lower()` treats capital sigma."""
    if _is_cased(char):
        # An ignorable character is skipped, so the non-cased "1" decides: sigma, not final.
        return ("1" + char + "\u03a3").lower()[-1] == "\u03c3"
    # Skipped, "B" (cased) follows: not final. Not skipped, this non-cased character ends it.
    return ("A\u03a3" + char + "B").lower()[1] == "\u03c3"


def _output_class(char):
    if tokenization._is_punctuation(char):  # pylint: disable=protected-access
        return _PUNCT
    if char.isspace():
        return _SPACE
    return _WORD


def _char_record(cp, do_lower_case):
    """What Google's basic tokenizer does to one character, out of context.

    Returns:
        (expansion, props, full_expansion): expansion is a tuple of (output code point - cp,
        output class) (empty when the character is deleted); props the property bits;
        full_expansion, for the reordering branch, a tuple of (delta, class, combining class)
        that keeps Mn marks (class _STRIP).
    """
    # pylint: disable=protected-access
    char = chr(cp)
    if (unicodedata.category(char) in ("Cn", "Co")
            and not tokenization._is_chinese_char(cp)):
        # Unassigned and private-use characters: kept as they are, no case, no decomposition
        # (most code points; this test makes building the tables fast).
        return _TRIVIAL
    if 0xD800 <= cp <= 0xDFFF:  # never produced by UTF-8 decoding
        return ((0, _WORD),), 0, ((0, _WORD, 0),)
    if cp == 0 or cp == 0xFFFD or tokenization._is_control(char):
        return (), _IGNORABLE, ()
    if tokenization._is_whitespace(char) or char.isspace():
        space = ((0x20 - cp, _SPACE),)
        return space, 0, ((0x20 - cp, _SPACE, 0),)
    iso = tokenization._is_chinese_char(cp)
    props = _ISO if iso else 0
    if not do_lower_case:
        expansion = tuple((ord(o) - cp, _output_class(o)) for o in char)
        return expansion, props, tuple(e + (0,) for e in expansion)
    if cp == _SIGMA:
        props |= _CAPITAL_SIGMA
    if not iso:
        if _is_case_ignorable(char):
            props |= _IGNORABLE
        elif _is_cased(char):
            props |= _CASED
    nfd = unicodedata.normalize("NFD", char.lower())
    full = []
    for o in nfd:
        if unicodedata.category(o) == "Mn":
            full.append((ord(o) - cp, _STRIP, unicodedata.combining(o)))
        else:
            full.append((ord(o) - cp, _output_class(o), unicodedata.combining(o)))
            if unicodedata.combining(o):
                props |= _REORDER
    expansion = tuple((d, c) for d, c, _ in full if c != _STRIP)
    return expansion, props, tuple(full)


_TRIVIAL = (((0, _WORD),), 0, ((0, _WORD, 0),))


class _PagedTable:
    """Accumulates per-code-point records into a two-level table (page index + pages)."""

    def __init__(self):
        self.page_base = np.zeros(_NUM_CODEPOINTS >> _PAGE_BITS, np.int32)

    def add_pages(self, values_per_page, trivial_value):
        """values_per_page: list (one per page) of int arrays of _PAGE_SIZE, or None = trivial."""
        rows = [np.full(_PAGE_SIZE, trivial_value, np.int64)]
        for page, values in enumerate(values_per_page):
            if values is None:
                self.page_base[page] = 0
            else:
                self.page_base[page] = len(rows) * _PAGE_SIZE
                rows.append(values)
        return np.concatenate(rows)


@functools.lru_cache(maxsize=2)
def _wordpiece_char_tables(do_lower_case):
    """Numpy tables of the WordPiece per-character map (see the module docstring)."""
    return _paged_tables(lambda cp: _char_record(cp, do_lower_case))


class _Interned:
    """Expansions stored once in a flat array: equal expansions share their entries."""

    def __init__(self):
        self.keys, self.size = {}, 0  # key -> its offset, in insertion order

    def offset(self, key) -> int:
        """Offset of `key`'s entries in the flat array (added at the end if new)."""
        if key not in self.keys:
            self.keys[key] = self.size
            self.size += len(key)
        return self.keys[key]


def _page_entries(records, expand_index: _Interned, full_index: _Interned):
    """One page's (info, props, full, fast) entries (see `_paged_tables`) from its records."""
    info, props, full, fast = [], [], [], []
    for expansion, prop, full_expansion in records:
        if max(len(expansion), len(full_expansion)) > _MAX_EXPANSION:
            raise ServingTokenizerError(
                f"a character expands to more than {_MAX_EXPANSION} characters")
        info.append(expand_index.offset(expansion) << _START_SHIFT
                    | len(expansion) << 1 | (prop & _ISO))
        props.append(prop)
        # The common case in one entry: one output character, no context.
        special = len(expansion) != 1 or prop & (_REORDER | _CAPITAL_SIGMA)
        delta, cls = expansion[0] if len(expansion) == 1 else (0, _WORD)
        fast.append(delta * 16 + cls * 4 + (prop & _ISO) * 2 + bool(special))
        full.append(full_index.offset(full_expansion) << _START_SHIFT
                    | len(full_expansion) << 1 | (prop & _ISO))
    return info, props, full, fast


def _paged_tables(record_of):
    """Two-level tables of per-code-point records.

    Args:
        record_of: function code point -> (expansion, props, full_expansion) as `_char_record`.

    Returns:
        dict of int32 arrays: page_base [pages]; info [entries] = start << 6 | length << 1 | iso
        into expand [n] = delta << 3 | class; props [entries]; full_info / full_expand /
        full_ccc for the reordering branch; fast [entries] = delta << 4 | class << 2 | iso << 1
        | special, where special marks characters that need `info` (not exactly one output
        character, or context).
    """
    trivial = _TRIVIAL
    expand_index, full_index = _Interned(), _Interned()
    expand_index.offset(trivial[0])
    full_index.offset(trivial[2])
    info_pages, props_pages, full_pages, fast_pages = [], [], [], []
    for page in range(_NUM_CODEPOINTS >> _PAGE_BITS):
        records = [record_of(cp) for cp in range(page << _PAGE_BITS, (page + 1) << _PAGE_BITS)]
        if all(r == trivial for r in records):
            for pages in (info_pages, props_pages, full_pages, fast_pages):
                pages.append(None)
            continue
        for pages, entries in zip((info_pages, props_pages, full_pages, fast_pages),
                                  _page_entries(records, expand_index, full_index)):
            pages.append(np.array(entries, np.int64))

    table = _PagedTable()
    info = table.add_pages(info_pages, 1 << 1)  # the trivial expansion is entry 0
    props = table.add_pages(props_pages, 0)
    full_info = table.add_pages(full_pages, 1 << 1)
    fast = table.add_pages(fast_pages, 0)
    expand = [d * 8 + c for key in expand_index.keys for d, c in key]
    full_expand = [d * 8 + c for key in full_index.keys for d, c, _ in key]
    full_ccc = [ccc for key in full_index.keys for _, _, ccc in key]
    as32 = lambda a: np.asarray(a, np.int64).astype(np.int32)  # noqa: E731
    return {"page_base": table.page_base, "fast": as32(fast), "info": as32(info),
            "props": as32(props),
            "expand": as32(expand), "full_info": as32(full_info),
            "full_expand": as32(full_expand), "full_ccc": as32(full_ccc)}


def _spm_records(do_lower_case):
    """Per-character records of ALBERT's `preprocess_text` (see `_paged_tables`).

    Two maps: "nfkd" (after whitespace collapsing) is NFKD without combining characters; "lower"
    is `str.lower()` of one character (capital sigma's context is handled in the graph).
    """
    def nfkd(cp):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            return _TRIVIAL
        if char.isspace():
            return ((0x20 - cp, _SPACE),), 0, ((0x20 - cp, _SPACE, 0),)
        if unicodedata.category(char) == "Cn":
            return _TRIVIAL
        out = [o for o in unicodedata.normalize("NFKD", char) if not unicodedata.combining(o)]
        expansion = tuple((ord(o) - cp, _WORD) for o in out)
        return expansion, 0, tuple(e + (0,) for e in expansion)

    def lower(cp):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(char) in ("Cn", "Co"):
            return _TRIVIAL
        props = 0
        if _is_case_ignorable(char):
            props |= _IGNORABLE
        elif _is_cased(char):
            props |= _CASED
        expansion = tuple((ord(o) - cp, _WORD) for o in char.lower())
        return expansion, props, tuple(e + (0,) for e in expansion)

    return {"nfkd": nfkd, "lower": lower} if do_lower_case else {"nfkd": nfkd}


@functools.lru_cache(maxsize=2)
def _spm_char_tables(do_lower_case):
    """Numpy tables for the SentencePiece preprocessing: {map name: tables}."""
    tables = {}
    for name, record in _spm_records(do_lower_case).items():
        tables[name] = _paged_tables(lambda cp, record=record: record(cp))
    return tables


def _shr(x, bits):
    return tf.bitwise.right_shift(x, tf.constant(bits, x.dtype))


def _and(x, mask):
    return tf.bitwise.bitwise_and(x, tf.constant(mask, x.dtype))


def _shift_right(x, first):
    """x[i-1] at position i, `first` at position 0 (same length as `x`, also when empty)."""
    return tf.concat([tf.fill([1], first), x[:-1]], axis=0)[:tf.size(x)]


class ServingTokenizer(tf.Module):
    """`FullTokenizer` (WordPiece or SentencePiece) or `BpeTokenizer` (a tokenizer.json) and the
    classifier's packing, as TF ops.

    Everything it needs (character tables, the WordPiece model, the SentencePiece model) is held
    as constants or resources of this module, and the vocabulary file is an asset, so a
    SavedModel that contains it copies the vocabulary (or the SentencePiece model) into
    `assets/` under the file's own base name.

    Attributes:
        do_lower_case: bool.
        max_seq_length: int, the padded length of `tokenize`'s outputs.
        truncation: "head" (Google) or "head_tail" (single texts; see classifier_data).
        head_tokens: int, tokens kept from the start with head_tail.
        vocab_size: int.
        cls_id, sep_id: int ids of [CLS] and [SEP] as `FullTokenizer` converts them.
        vocab_file / spm_model_file: `tf.saved_model.Asset` of the vocabulary file.
        is_sentencepiece: bool, the vocabulary is a SentencePiece model (`spm_model_file`).
        is_bpe: bool, the vocabulary is a tokenizer.json (ModernBERT's byte-level BPE, run by
            serving/bpe.py; `do_lower_case` does not apply: the file has its normalizer).
    """

    # The traced functions are this module's own methods, not separate objects of a
    # SavedModel: the signatures that call them carry them in their function library.
    _TF_MODULE_IGNORED_PROPERTIES = frozenset(
        tf.Module._TF_MODULE_IGNORED_PROPERTIES
        | {"_traced_ids", "_traced_offsets", "_traced_single", "_traced_pair"})

    def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None,
                 max_seq_length=128, truncation="head", head_tokens=128, name=None):
        """Builds the graph tokenizer from the same files `FullTokenizer` reads.

        Args:
            vocab_file: str, WordPiece vocabulary, or a Hugging Face tokenizer.json (a
                `.json`: byte-level BPE, as `tokenization.BpeTokenizer`); ignored with
                `spm_model_file`.
            do_lower_case: bool, as `--do_lower_case`.
            spm_model_file: str or None, a SentencePiece model (ALBERT style).
            max_seq_length: int >= 3, as `--max_seq_length`.
            truncation: "head" or "head_tail", as `--truncation`.
            head_tokens: int >= 0, as `--head_tokens`.
            name: str or None, the module's name.

        Raises:
            ServingTokenizerError: for an option or vocabulary the graph cannot represent.
            ImportError: when tensorflow-text is not installed.
        """
        super().__init__(name=name)
        tf_text = serving_bpe.tf_text_module()
        if max_seq_length < 3:
            raise ServingTokenizerError(f"--max_seq_length={max_seq_length} must be at least 3")
        if truncation not in ("head", "head_tail"):
            raise ServingTokenizerError(f"--truncation={truncation!r} must be head or head_tail")
        if head_tokens < 0:
            raise ServingTokenizerError(f"--head_tokens={head_tokens} must be >= 0")
        self.do_lower_case = bool(do_lower_case)
        self.max_seq_length = int(max_seq_length)
        self.truncation = truncation
        self.head_tokens = int(head_tokens)
        self._spm = spm_model_file is not None
        self.is_sentencepiece = self._spm
        self._init_backend(tf_text, vocab_file, do_lower_case, spm_model_file)
        # Texts -> ids (~3,000 graph ops) and -> the classifier's inputs, each traced once
        # whatever calls them: an export's signatures (text, pair, tokenize, windows, SQuAD)
        # call these instead of tracing them again (the export's start-up).
        texts = tf.TensorSpec([None], tf.string)
        ids = (self._sentencepiece_ids if self._spm else
               self._bpe.ids if self._bpe is not None else self._wordpiece_ids)
        self._traced_ids = tf.function(ids, input_signature=[texts], autograph=False)
        self._traced_offsets = None if self._spm else tf.function(
            lambda text: self._wordpiece_ids(text, with_offsets=True) if self._bpe is None
            else self._bpe_paragraph(text), input_signature=[texts], autograph=False)
        self._traced_single = tf.function(self._tokenize, input_signature=[texts],
                                          autograph=False)
        self._traced_pair = tf.function(self._tokenize, input_signature=[texts, texts],
                                        autograph=False)

    def _init_backend(self, tf_text, vocab_file, do_lower_case, spm_model_file):
        """The vocabulary's Python tokenizer (ids of [CLS]/[SEP], the size) and its graph
        backend: SentencePiece, a tokenizer.json's byte-level BPE (serving/bpe.py) or
        WordPiece."""
        self._bpe = None
        if not self._spm and tokenization.is_tokenizer_json(vocab_file):
            reference = tokenization.BpeTokenizer(vocab_file)
            self.do_lower_case = False  # the tokenizer.json has its own normalizer
        else:
            reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case,
                                                   spm_model_file=spm_model_file)
        self.vocab_size = len(reference.vocab)
        self.is_bpe = isinstance(reference, tokenization.BpeTokenizer)
        try:
            self.cls_id, self.sep_id = reference.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        except KeyError as e:
            raise ServingTokenizerError(f"{vocab_file}: {e.args[0]}") from None
        if self._spm:
            self.spm_model_file = tf.saved_model.Asset(spm_model_file)
            self._init_sentencepiece(tf_text, spm_model_file)
        elif self.is_bpe:
            self.vocab_file = tf.saved_model.Asset(vocab_file)
            try:
                self._bpe = serving_bpe.BpeGraph(vocab_file, normalize=reference.normalize)
            except serving_bpe.BpeGraphError as e:
                raise ServingTokenizerError(str(e)) from None
        else:
            self.vocab_file = tf.saved_model.Asset(vocab_file)
            self._init_wordpiece(tf_text, reference)

    # -----------------------------------------------------------------------------------------
    # WordPiece

    def _init_wordpiece(self, tf_text, reference):
        unk = reference.wordpiece_tokenizer.unk_token
        if unk not in reference.vocab:
            raise ServingTokenizerError(f"the vocabulary has no {unk} token")
        tokens = [reference.inv_vocab[i] for i in range(len(reference.vocab))]
        # Every word reaching the WordPiece op is ≤ 200 characters (longer ones are replaced by
        # the unknown token first), so a byte limit of 4 per character never cuts one.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##",
            max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD, token_out_type=tf.int32,
            unknown_token=unk, no_pretokenization=True)
        self._unk_token = unk
        tables = _wordpiece_char_tables(self.do_lower_case)
        self._tables = {k: tf.constant(v, name=k) for k, v in tables.items()}

    @staticmethod
    def _table_index(tables, codepoints):
        page = tf.gather(tables["page_base"], _shr(codepoints, _PAGE_BITS))
        return page + _and(codepoints, _PAGE_SIZE - 1)

    def _final_sigma(self, tables, codepoints, rows):
        """Replaces capital sigma by final sigma where `str.lower()` would (see docstring)."""
        props = tf.gather(tables["props"], self._table_index(tables, codepoints))
        non_ignorable = tf.equal(_and(props, _IGNORABLE), 0)
        cased = tf.not_equal(_and(props, _CASED), 0)
        positions = tf.where(non_ignorable)[:, 0]
        before = tf.cumsum(tf.cast(non_ignorable, tf.int64), exclusive=True)
        sigmas = tf.where(tf.equal(codepoints, _SIGMA))[:, 0]
        k = tf.gather(before, sigmas)  # sigma is positions[k]: it is not ignorable
        sigma_rows = tf.gather(rows, sigmas)
        prev = tf.gather(positions, tf.maximum(k - 1, 0))
        prev_cased = ((k > 0) & tf.equal(tf.gather(rows, prev), sigma_rows)
                      & tf.gather(cased, prev))
        count = tf.size(positions, out_type=tf.int64)
        nxt = tf.gather(positions, tf.minimum(k + 1, count - 1))
        next_cased = ((k + 1 < count) & tf.equal(tf.gather(rows, nxt), sigma_rows)
                      & tf.gather(cased, nxt))
        final = prev_cased & ~next_cased
        return tf.tensor_scatter_nd_update(
            codepoints, sigmas[:, None],
            tf.where(final, tf.constant(_FINAL_SIGMA, tf.int32), tf.constant(_SIGMA, tf.int32)))

    def _expand(self, tables, codepoints, rows, info_name="info", expand_name="expand"):
        """Per-character map: (output code points, class, iso flag, row, expansion index,
        input character), each a Tensor [num_output_chars]."""
        info = tf.gather(tables[info_name], self._table_index(tables, codepoints))
        start = _shr(info, _START_SHIFT)
        expansion = tf.ragged.range(start, start + _and(_shr(info, 1), _MAX_EXPANSION))
        parent = expansion.value_rowids()
        packed = tf.gather(tables[expand_name], expansion.values)
        out = tf.gather(codepoints, parent) + _shr(packed, 3)
        return (out, _and(packed, 7), tf.gather(_and(info, 1), parent), tf.gather(rows, parent),
                expansion.values, parent)

    def _expand_reordered(self, codepoints, rows):
        """`_expand` with NFD's canonical reordering of marks before Mn marks are deleted."""
        out, cls, iso, out_rows, entry, source = self._expand(self._tables, codepoints, rows,
                                                               "full_info", "full_expand")
        ccc = tf.cast(tf.gather(self._tables["full_ccc"], entry), tf.int64)
        row_start = tf.not_equal(out_rows, _shift_right(out_rows, tf.constant(-1, tf.int64)))
        group = tf.cumsum(tf.cast(tf.equal(ccc, 0) | row_start, tf.int64))
        order = tf.argsort(group * 256 + ccc, stable=True)
        mapped = tuple(tf.gather(x, order) for x in (out, cls, iso, out_rows, source))
        keep = tf.not_equal(mapped[1], _STRIP)
        return tuple(tf.boolean_mask(x, keep) for x in mapped)

    def _wordpiece_ids(self, text, with_offsets=False):
        batch = tf.shape(text, out_type=tf.int64)[0]
        decoded = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
        codepoints = decoded.values
        rows = decoded.value_rowids()
        fast = tf.gather(self._tables["fast"], self._table_index(self._tables, codepoints))
        mapped = tf.cond(
            tf.reduce_any(tf.not_equal(_and(fast, 1), 0)),
            lambda: self._map_characters(codepoints, rows),
            lambda: (codepoints + _shr(fast, 4), _and(_shr(fast, 2), 3), _and(_shr(fast, 1), 1),
                     rows, tf.range(tf.size(codepoints, out_type=tf.int64))))
        if not with_offsets:
            return self._wordpieces(batch, *mapped[:4])
        ids, source_start, source_end = self._wordpieces(batch, *mapped)
        # Input character index -> offset in its own text.
        row_start = tf.gather(decoded.row_splits, ids.value_rowids())
        return (ids, ids.with_values(source_start - row_start),
                ids.with_values(source_end - row_start))

    def _map_characters(self, codepoints, rows):
        """The per-character map with its context rules (see the module docstring).

        Args:
            codepoints: int32 Tensor [num_chars], the decoded characters of all texts.
            rows: int64 Tensor [num_chars], the text of each.

        Returns:
            (output code points, class, CJK flag, row, input character index), each a Tensor
            [num_output_chars].
        """
        unreordered = lambda: tuple(  # noqa: E731
            x for i, x in enumerate(self._expand(self._tables, codepoints, rows)) if i != 4)
        if self.do_lower_case:
            codepoints = tf.cond(tf.reduce_any(tf.equal(codepoints, _SIGMA)),
                                 lambda: self._final_sigma(self._tables, codepoints, rows),
                                 lambda: codepoints)
            props = tf.gather(self._tables["props"],
                              self._table_index(self._tables, codepoints))
            return tf.cond(tf.reduce_any(tf.not_equal(_and(props, _REORDER), 0)),
                           lambda: self._expand_reordered(codepoints, rows), unreordered)
        return unreordered()

    def _wordpieces(self, batch, out, cls, iso, out_rows, source=None):
        """Word pieces of the mapped characters: int32 RaggedTensor [batch, (tokens)].

        Given `source` (int64 [num_output_chars], the input character each output character
        comes from), also the input characters each piece spans: int64 Tensors
        [num_pieces], the first one and one past the last one (a word of more than 200
        characters, one [UNK], spans the whole word). Input characters the map deletes
        (control characters, a lower-cased model's accents) count only inside a piece."""
        # Words: maximal runs of word characters; punctuation and CJK characters are words of
        # their own; spaces separate.
        is_token = tf.not_equal(cls, _SPACE)
        alone = tf.equal(cls, _PUNCT) | tf.equal(iso, 1)
        row_start = tf.not_equal(out_rows, _shift_right(out_rows, tf.constant(-1, tf.int64)))
        new_word = is_token & (row_start | ~_shift_right(is_token, False) | alone
                               | _shift_right(alone, False))
        word_index = tf.cumsum(tf.cast(new_word, tf.int64)) - 1
        n_words = tf.reduce_sum(tf.cast(new_word, tf.int64))
        token_chars = tf.where(is_token)[:, 0]
        words = tf.RaggedTensor.from_value_rowids(
            tf.gather(out, token_chars), tf.gather(word_index, token_chars),
            nrows=n_words, validate=False)
        word_text = tf.strings.unicode_encode(words, "UTF-8")
        word_text = tf.where(words.row_lengths() > MAX_INPUT_CHARS_PER_WORD,
                             self._unk_token, word_text)
        word_rows = tf.gather(out_rows, tf.where(new_word)[:, 0])
        if source is None:
            pieces = self._wordpiece.tokenize(word_text)
            return tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=batch,
                                                     validate=False).merge_dims(1, 2)
        pieces, start_byte, _ = self._wordpiece.tokenize_with_offsets(word_text)
        ids = tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=batch,
                                                validate=False).merge_dims(1, 2)
        # Byte offsets in a word -> positions in the token characters (all words, in order).
        chars = words.values
        char_bytes = tf.cast(1 + tf.cast(chars >= 0x80, tf.int32) + tf.cast(chars >= 0x800,
                                                                            tf.int32)
                             + tf.cast(chars >= 0x10000, tf.int32), tf.int64)
        char_byte_start = tf.cumsum(char_bytes, exclusive=True)
        word_byte_start = tf.gather(tf.concat([char_byte_start, tf.reduce_sum(
            char_bytes, keepdims=True)], 0), words.row_splits)
        piece_word = pieces.value_rowids()
        long_word = tf.gather(words.row_lengths() > MAX_INPUT_CHARS_PER_WORD, piece_word)
        base = tf.gather(word_byte_start, piece_word)
        start = base + tf.where(long_word, tf.zeros_like(start_byte.values), start_byte.values)
        first = tf.searchsorted(char_byte_start, start, side="left", out_type=tf.int64)
        # The pieces of a word cover it, in order (an [UNK] the whole word): a piece ends where
        # the next one starts. The piece of every token character, then the range of their
        # input characters (NFD reordering may permute them within a piece). Linear in the
        # characters: no ragged range per piece, whose row ids tile to the longest piece.
        piece = tf.searchsorted(first, tf.range(tf.size(chars, out_type=tf.int64)),
                                side="right", out_type=tf.int64) - 1
        char_source = tf.gather(source, token_chars)
        count = tf.size(first, out_type=tf.int64)
        return (ids, tf.math.unsorted_segment_min(char_source, piece, count),
                tf.math.unsorted_segment_max(char_source, piece, count) + 1)

    # -----------------------------------------------------------------------------------------
    # SentencePiece

    def _init_sentencepiece(self, tf_text, spm_model_file):
        model = tokenization._read_file(  # pylint: disable=protected-access
            spm_model_file, binary=True, what="SentencePiece model file")
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model, out_type=tf.string)
        self._spm_tables = {
            name: {k: tf.constant(v, name=f"{name}_{k}") for k, v in tables.items()}
            for name, tables in _spm_char_tables(self.do_lower_case).items()}
        # ALBERT splits a comma off a piece whose character before the comma is a digit in
        # Python's sense (`str.isdigit`, which includes superscripts and circled digits).
        digits = [cp for cp in range(_NUM_CODEPOINTS)
                  if not 0xD800 <= cp <= 0xDFFF and chr(cp).isdigit()]
        ranges = []
        for cp in digits:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
        digit_class = "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges)
        self._number_comma_pattern = f"(?s).*[{digit_class}],"

    def _preprocess(self, text):
        """ALBERT's `preprocess_text`: UTF-8 string [batch] -> UTF-8 string [batch]."""
        decoded = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
        codepoints = decoded.values
        rows = decoded.value_rowids()
        nfkd = self._spm_tables["nfkd"]
        info = tf.gather(nfkd["info"], self._table_index(nfkd, codepoints))
        packed = tf.gather(nfkd["expand"], _shr(info, _START_SHIFT))
        is_space = tf.equal(_and(packed, 7), _SPACE)
        # " ".join(text.split()): a space is kept when it follows a non-space of its row and a
        # non-space of its row comes later.
        row_start = tf.not_equal(rows, _shift_right(rows, tf.constant(-1, tf.int64)))
        non_space = tf.cast(~is_space, tf.int64)
        seen = tf.cumsum(non_space)
        row_non_space = tf.math.segment_sum(non_space, rows)
        seen_in_row = seen - tf.gather(tf.math.segment_min(seen - non_space, rows), rows)
        keep = ~is_space | (
            ~row_start & ~_shift_right(is_space, True)
            & (seen_in_row < tf.gather(row_non_space, rows)))
        codepoints = tf.boolean_mask(codepoints, keep)
        rows = tf.boolean_mask(rows, keep)
        codepoints, _, _, rows, _, _ = self._expand(nfkd, codepoints, rows)
        if self.do_lower_case:
            lower = self._spm_tables["lower"]
            codepoints = tf.cond(tf.reduce_any(tf.equal(codepoints, _SIGMA)),
                                 lambda: self._final_sigma(lower, codepoints, rows),
                                 lambda: codepoints)
            codepoints, _, _, rows, _, _ = self._expand(lower, codepoints, rows)
        batch = tf.shape(text, out_type=tf.int64)[0]
        chars = tf.RaggedTensor.from_value_rowids(codepoints, rows, nrows=batch, validate=False)
        return tf.strings.unicode_encode(chars, "UTF-8")

    def _sentencepiece_ids(self, text):
        pieces = self._sentencepiece.tokenize(self._preprocess(text))  # [batch, (pieces)]
        flat = pieces.values
        split = tf.strings.regex_full_match(flat, self._number_comma_pattern)
        count = tf.size(flat, out_type=tf.int64)
        # ALBERT re-encodes the piece without its comma and word markers; if the piece did not
        # start a word, the marker in front of the re-encoded digits is dropped again.
        target = tf.boolean_mask(flat, split)
        length = tf.strings.length(target)
        digits = tf.strings.substr(target, tf.zeros_like(length), length - 1)
        sub = self._sentencepiece.tokenize(tf.strings.regex_replace(digits, "\u2581", ""))
        first = tf.equal(tf.ragged.range(sub.row_lengths()).values, 0)
        marker = "\u2581"
        starts_word = f"(?s){marker}.*"
        strip = (tf.gather(~tf.strings.regex_full_match(target, starts_word),
                           sub.value_rowids())
                 & first & tf.strings.regex_full_match(sub.values, starts_word))
        marker_bytes = len(marker.encode())
        length = tf.strings.length(sub.values)
        start = tf.minimum(length, marker_bytes)  # only used where the piece starts with it
        stripped = tf.strings.substr(sub.values, start, length - start)
        keep = ~(strip & tf.equal(sub.values, marker))
        sub_values = tf.where(strip, stripped, sub.values)
        sub = tf.ragged.boolean_mask(sub.with_values(sub_values), sub.with_values(keep))
        comma = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(target)[0], 1], ","))
        replaced = tf.concat([sub, comma], axis=1)
        pool = tf.concat([tf.RaggedTensor.from_tensor(flat[:, None]), replaced], axis=0)
        index = tf.where(split, count + tf.cumsum(tf.cast(split, tf.int64)) - 1,
                         tf.range(count))
        new_pieces = tf.RaggedTensor.from_row_splits(tf.gather(pool, index), pieces.row_splits)
        return self._sentencepiece.string_to_id(new_pieces.merge_dims(1, 2))

    # -----------------------------------------------------------------------------------------
    # Public

    def tokenize_ids(self, text):
        """Token ids of each text, as `FullTokenizer.convert_tokens_to_ids(tokenize(text))`.

        Args:
            text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
            int32 RaggedTensor of shape [batch_size, (num_tokens)].
        """
        return self._traced_ids(self._texts(text))

    @staticmethod
    def _texts(text):
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank != 1:
            raise ServingTokenizerError(
                f"texts must be a string Tensor of shape [batch_size], got shape {text.shape}")
        return text

    def _single_text_keep(self, tokens):
        """bool [num_tokens]: which of the RaggedTensor `tokens`' values a single text keeps
        (`head`: the first max_seq_length - 2 of its row; `head_tail`: the first head_tokens
        and the last ones)."""
        budget = self.max_seq_length - 2
        position, row = _positions(tokens), tokens.value_rowids()
        if self.truncation != "head_tail":
            return position < budget
        head = min(self.head_tokens, budget)
        length = tokens.row_lengths()
        return (tf.gather(length <= budget, row) | (position < head)
                | (position >= tf.gather(length - (budget - head), row)))

    def tokenize_with_offsets(self, text):
        """`tokenize_ids` and the characters each token comes from (WordPiece vocabularies).

        Args:
            text: string Tensor of shape [batch_size] (UTF-8; invalid bytes are dropped first,
                as `FullTokenizer` does, and offsets count the characters that remain).

        Returns:
            (ids, start, end): int32 RaggedTensor [batch_size, (num_tokens)] as
            `tokenize_ids`, and int64 RaggedTensors of the same shape: the token's first
            character and one past its last, as Python `str` indices of the text (a word
            longer than 200 characters, one [UNK], spans the whole word).

        Raises:
            ServingTokenizerError: for a SentencePiece model.
        """
        if self._spm or self._bpe is not None:
            raise ServingTokenizerError("character offsets of tokens need a WordPiece "
                                        "vocabulary (--vocab_file), not --spm_model_file; a "
                                        "tokenizer.json has tokenize_paragraph")
        return self._traced_offsets(self._texts(text))

    def tokenize_paragraph(self, text):
        """A SQuAD paragraph's token ids as run_squad.py reads it, with the characters each
        token comes from.

        run_squad.py splits a paragraph into words at " \\t\\r\\n" and U+202F (Google's
        `read_squad_examples`). WordPiece tokenizes each word alone, which gives the tokens of
        the whole text (`tokenize_with_offsets`). A tokenizer.json reads the words joined by
        single spaces (`BpeTokenizer.tokenize_words`): so does this, offsets mapped back to the
        characters of `offset_text`.

        Args:
            text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
            (ids, start, end): int32 RaggedTensor [batch_size, (num_tokens)], and int64
            RaggedTensors of the same shape: each token's first character and one past its last
            in `offset_text(text)` (a byte-level token's leading space is not one of its
            characters).

        Raises:
            ServingTokenizerError: for a SentencePiece model.
        """
        if self._spm:
            raise ServingTokenizerError("character offsets of tokens need a --vocab_file "
                                        "(WordPiece or tokenizer.json), not --spm_model_file")
        return self._traced_offsets(self._texts(text))

    def offset_text(self, text):
        """string [batch_size]: the text `tokenize_paragraph`'s offsets count the characters
        of: `text` without its invalid UTF-8 bytes (dropped, as the tokenizers drop them) and,
        for a tokenizer.json with a normalizer, normalized by it (NFC: the text itself when it
        is already in NFC, as nearly all text is)."""
        text = tf.strings.unicode_encode(
            tf.strings.unicode_decode(self._texts(text), "UTF-8", errors="ignore"), "UTF-8")
        return text if self._bpe is None else self._bpe.normalize_text(text)

    def _bpe_paragraph(self, text):
        """`tokenize_paragraph` with a tokenizer.json: the words of `offset_text` joined by
        single spaces, tokenized with offsets (`BpeGraph.ids_with_offsets`), the offsets
        mapped from the joined text back to `offset_text`."""
        decoded = tf.strings.unicode_decode(self.offset_text(text), "UTF-8")
        cps, rows = decoded.values, decoded.value_rowids()
        white = tf.reduce_any(tf.equal(cps[:, None], SQUAD_WHITESPACE), axis=1)
        position = tf.range(tf.size(cps, out_type=tf.int64)) - tf.gather(decoded.row_splits,
                                                                         rows)
        # Words before and after each character in its row.
        word = tf.cast(~white, tf.int64)
        before = tf.cumsum(word, exclusive=True)
        bounds = tf.concat([before, tf.reduce_sum(word, keepdims=True)], 0)
        words_before = before - tf.gather(bounds, tf.gather(decoded.row_splits, rows))
        words_after = tf.gather(bounds, tf.gather(decoded.row_splits[1:], rows)) - before - word
        run_start = ~_shift_right(white, False) | tf.equal(position, 0)
        # A whitespace run between two words becomes one space; runs at either end go.
        keep = ~white | (run_start & (words_before > 0) & (words_after > 0))
        joined = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(tf.where(white, tf.constant(0x20, cps.dtype), cps), keep),
            tf.boolean_mask(rows, keep), nrows=tf.size(text, out_type=tf.int64),
            validate=False)
        source = tf.boolean_mask(position, keep)        # joined character -> offset_text's
        ids, start, end, _ = self._bpe.ids_with_offsets(tf.strings.unicode_encode(joined,
                                                                                 "UTF-8"))
        base = tf.gather(joined.row_splits, ids.value_rowids())
        # (Clipped: the joined text is normalized already, so the tokenizer reads it unchanged
        # and the offsets are in range; a text where normalizing twice differs stays valid.)
        last = tf.maximum(tf.size(source, out_type=tf.int64) - 1, 0)
        source = tf.concat([source, tf.zeros([1], tf.int64)], 0)
        return (ids, ids.with_values(tf.gather(source, tf.minimum(base + start.values, last))),
                ids.with_values(tf.gather(source, tf.minimum(base + end.values - 1, last)) + 1))

    def tokenize(self, text_a, text_b=None):
        """One or two texts -> the classifier's inputs, as `run_classifier_mgpu.py` builds them.

        `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (no second [SEP] when b has no tokens, as
        Google), Google's pair truncation (the longer text loses its last token first), single
        texts cut to `max_seq_length - 2` tokens (`head`) or to their first `head_tokens` and
        last tokens (`head_tail`), zero padding.

        Args:
            text_a: string Tensor of shape [batch_size].
            text_b: string Tensor of shape [batch_size] or None.

        Returns:
            dict of int32 Tensors of shape [batch_size, max_seq_length]: input_ids, input_mask,
            segment_ids.
        """
        text_a = self._texts(text_a)
        if text_b is None:
            return self._traced_single(text_a)
        return self._traced_pair(text_a, self._texts(text_b))

    def _tokenize(self, text_a, text_b=None):
        seq_length = self.max_seq_length
        a = self._traced_ids(text_a)
        len_a = a.row_lengths()
        single = self._single_text_keep(a)
        if text_b is None:
            a, b = _masked(a, single), None
        else:
            b = self._traced_ids(text_b)
            len_b = b.row_lengths()
            budget = seq_length - 3
            # Google's loop, closed form: over budget, the shorter text keeps its tokens up to
            # half the budget (a, which wins ties, gets the odd one), the longer the rest.
            over = len_a + len_b > budget
            half = tf.constant((budget + 1) // 2, tf.int64)
            keep_a = tf.where(over, tf.minimum(len_a, tf.maximum(half, budget - len_b)), len_a)
            keep_b = tf.where(over, budget - keep_a, len_b)
            # A second text without tokens is no second text (Google's `if tokens_b:`): the row
            # is cut as a single text.
            rows_a = a.value_rowids()
            pair = _positions(a) < tf.gather(keep_a, rows_a)
            a = _masked(a, tf.where(tf.gather(len_b == 0, rows_a), single, pair))
            b = keep_first(b, keep_b)
        return self.pack(a, b, seq_length)

    def pack(self, a, b, padded_length=None):
        """`[CLS] a [SEP]` (segment 0), then `b [SEP]` (segment 1) for the rows whose `b` has
        tokens (a row with an empty `b` is a single text, as Google's `if tokens_b:`).

        Args:
            a: int32 RaggedTensor [rows, (tokens)], the first part (already cut).
            b: int32 RaggedTensor [rows, (tokens)] (already cut), or None.
            padded_length: as `pack_rows`.

        Returns:
            `pack_rows`' dict.
        """
        parts = [(token_column(a.nrows(), self.cls_id), 0), (a, 0),
                 (token_column(a.nrows(), self.sep_id), 0)]
        if b is not None:
            parts += [(b, 1), (token_column(a.nrows(), self.sep_id, b.row_lengths() > 0), 1)]
        return pack_rows(parts, padded_length)


def token_column(rows, token_id, present=None):
    """int32 RaggedTensor [rows, (1 or 0)]: `token_id` in every row (or in the rows where the
    bool Tensor `present` [rows] is True; the others are empty)."""
    if present is None:
        present = tf.ones([rows], tf.bool)
    lengths = tf.cast(present, tf.int64)
    return tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(lengths)], tf.constant(token_id, tf.int32)), lengths,
        validate=False)


# Element-wise work on a RaggedTensor's flat values (what the rows hold, row after row): the
# same results as the ragged operators, whose broadcasting checks make a graph several times larger
# to trace (an export traces these in every signature).

def _positions(ragged):
    """int64 [num_values]: each value's position in its row."""
    return tf.range(tf.size(ragged.values, out_type=tf.int64)) - tf.gather(
        ragged.row_splits, ragged.value_rowids())


def keep_first(ragged, lengths):
    """`ragged` with each row cut to its first `lengths` (int64 [rows]) values."""
    return _masked(ragged, _positions(ragged) < tf.gather(lengths, ragged.value_rowids()))


def _masked(ragged, keep):
    """`ragged` without the values where the bool [num_values] `keep` is False (rows kept)."""
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(ragged.values, keep), tf.boolean_mask(ragged.value_rowids(), keep),
        nrows=ragged.nrows(), validate=False)


def pack_rows(parts, padded_length=None):
    """Rows of BERT inputs: each row the concatenation of `parts`' rows, zero-padded.

    Args:
        parts: list of (int32 RaggedTensor [rows, (tokens)], segment id int), in order.
        padded_length: a Python int (the outputs' static length), a scalar int Tensor, or None
            (the longest row, at least 1).

    Returns:
        dict of int32 Tensors [rows, padded_length]: input_ids, input_mask (1 on the real
        tokens), segment_ids.
    """
    ids = tf.concat([p for p, _ in parts], axis=1)
    segments = tf.concat([p.with_values(tf.fill(tf.shape(p.values), tf.constant(s, p.dtype)))
                          for p, s in parts], axis=1)
    if isinstance(padded_length, int):
        shape = [None, padded_length]
    else:
        if padded_length is None:
            padded_length = tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0))
        shape = tf.stack([ids.nrows(), tf.cast(padded_length, tf.int64)])
    return {"input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": ids.with_values(tf.ones_like(ids.values)).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape)}
