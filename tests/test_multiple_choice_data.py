"""Multiple-choice data (bert_mgpu/data/multiple_choice_data.py): SWAG's CSV -> [C, L] features.

The features of real rows (the shipped HellaSwag/ActivityNet split, data/multiple_choice/) equal
Hugging Face's `run_swag.py` preprocessing with the same vocabulary; a file with a BOM and CRLF
line endings, gzipped or not, reads the same; a malformed file is a one-line error naming the file
and line; records written and parsed give back the [C, L] features.
"""

import gzip
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, run_json_request

from bert_mgpu.data import input_pipeline
from bert_mgpu.data import multiple_choice_data as mc
from bert_mgpu.data.processors import DataError
from bert_mgpu.tokenization import FullTokenizer

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
DEV = os.path.join(DATA, "multiple_choice", "hellaswag_activitynet", "dev.csv")
ROWS = 200
HEADER = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,"
          "label")


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(VOCAB, do_lower_case=True)


def _parts(ids, segments, mask):
    """(context ids, choice ids) of one packed sequence, without [CLS]/[SEP] and padding."""
    n = int(sum(mask))
    first = [i for i, s in zip(ids[:n], segments[:n]) if s == 0]
    second = [i for i, s in zip(ids[:n], segments[:n]) if s == 1]
    assert first[0] == 101 and first[-1] == 102 and second[-1] == 102
    return first[1:-1], second[:-1]


def _check_against_hf(ours, theirs, max_seq_length):
    """Ours equal Hugging Face's except where both texts are cut to an odd budget and the
    context is not the longer: Google's `_truncate_seq_pair` (ours) then leaves the context one
    token more than the choice, Hugging Face's Rust `longest_first` one token fewer. Returns
    (number of choices cut, number where the two rules differ)."""
    budget = max_seq_length - 3
    cut = differ = 0
    for name in mc.CHOICE_FEATURES:
        assert np.shape(ours[name]) == (4, max_seq_length), name
    assert np.shape(theirs["input_ids"]) == (4, max_seq_length)
    for c in range(4):
        a, b = _parts(ours["input_ids"][c], ours["segment_ids"][c], ours["input_mask"][c])
        ha, hb = _parts(theirs["input_ids"][c], theirs["token_type_ids"][c],
                        theirs["attention_mask"][c])
        cut += len(a) + len(b) == budget
        if (a, b) == (ha, hb):
            assert ours["input_mask"][c] == theirs["attention_mask"][c]
            continue
        differ += 1
        assert budget % 2 == 1 and len(a) + len(b) == len(ha) + len(hb) == budget
        assert len(a) == budget // 2 + 1 and len(ha) == budget // 2
        assert ha == a[:-1] and b == hb[:-1]
    return cut, differ


def test_features_equal_hugging_face_run_swag(tokenizer, tmp_path):
    lengths = [33, 32, 128]  # budgets 30 (even) and 29 (odd): many cut; 125: padding only
    hf = json.loads(run_json_request("hf_multiple_choice_features.py", {
        "vocab_file": VOCAB, "lowercase": True, "csv_file": DEV, "limit": ROWS,
        "max_seq_lengths": lengths}, tmp_path))
    examples = mc.read_swag_csv(DEV)[:ROWS]
    counts = {}
    for n in lengths:
        theirs = hf[str(n)]
        totals = np.zeros(2, int)
        for i, example in enumerate(examples):
            ours = mc.convert_example(example, n, tokenizer)
            assert ours["label_ids"] == example.label
            totals += _check_against_hf(ours, {k: v[i] for k, v in theirs.items()}, n)
        counts[n] = totals.tolist()
    assert counts[33][0] > ROWS and counts[33][1] == 0  # an even budget: identical
    assert counts[32][0] > ROWS and counts[32][1] > 0  # the tie rule is exercised
    assert counts[128] == [0, 0]


def test_reads_swag_columns_by_name(tmp_path):
    examples = mc.read_swag_csv(DEV)
    assert len(examples) == 1000 and examples[0].guid == "dev-0"
    first = examples[0]
    assert first.context == "A group of cheerleaders run onto a stage before a cheering audience."
    assert first.choices[0] == ("they get into formation, then begin dancing and flipping as "
                                "male cheerleaders join them.")
    assert first.label == 0 and all(len(e.choices) == 4 for e in examples)
    # Without SWAG's unnamed index column, columns in another order, no label column: a test file.
    path = tmp_path / "test.csv"
    path.write_text("ending3,ending2,ending1,ending0,sent2,sent1\nd,c,b,a,She,It rains.\n")
    (example,) = mc.read_swag_csv(str(path))
    assert example == mc.MultipleChoiceExample("test-0", "It rains.",
                                               ("She a", "She b", "She c", "She d"), None)
    path.write_text(HEADER + "\nv,1,x,It rains.,She,a,gold,b,c,d,\n")
    assert mc.read_swag_csv(str(path), split="test")[0].label is None


def test_bom_crlf_and_gzip_read_the_same(tmp_path):
    data = open(DEV, "rb").read()
    assert b"\r" not in data
    windows = tmp_path / "dev.csv"
    windows.write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    packed = tmp_path / "dev.csv.gz"
    packed.write_bytes(gzip.compress(windows.read_bytes()))
    expected = mc.read_swag_csv(DEV)
    assert mc.read_swag_csv(str(windows)) == expected
    assert mc.read_swag_csv(str(packed), split="dev") == expected


@pytest.mark.parametrize("body, message", [
    (HEADER + "\nv,1,x,It rains.,She,gold,a,b,c,d\n", ":2: 10 fields, the header has 11"),
    (HEADER + "\nv,1,x,It rains.,She,gold,a,b,c,d,0\nv,1,x,s,She,gold,a,b,c,d,4\n",
     ":3: label '4' is not a choice index 0-3"),
    (HEADER + "\nv,1,x,It rains.,She,gold,a,b,c,d,first\n",
     ":2: label 'first' is not a choice index 0-3"),
    (HEADER.replace("ending2", "ending_2") + "\n", ":1: no column named 'ending2'"),
    (HEADER + '\nv,1,x,"It rains.,She,gold,a,b,c,d,0\n', ":2: a quoted field of this row"),
    (HEADER + '\nv,1,x,"It" rains.,She,gold,a,b,c,d,0\n', ":2: "),
    ("", ": empty file"),
])
def test_a_malformed_file_is_a_one_line_error(tmp_path, body, message):
    path = tmp_path / "train.csv"
    path.write_text(body)
    with pytest.raises(DataError) as error:
        mc.read_swag_csv(str(path))
    text = str(error.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_bytes_that_are_not_utf8_and_a_missing_file(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes((HEADER + "\nv,1,x,It rains.,She,gold,a,b,c,d,0\n").encode() +
                     b"v,1,x,caf\xe9,She,gold,a,b,c,d,0\n")
    with pytest.raises(DataError, match=r"train\.csv:3: not UTF-8 \(byte 0xe9"):
        mc.read_swag_csv(str(path))
    with pytest.raises(DataError, match=r"nothere\.csv: not found"):
        mc.read_swag_csv(str(tmp_path / "nothere.csv"))


def test_records_restore_choices_by_sequence(tokenizer, tmp_path):
    examples = mc.read_swag_csv(DEV)[:10]
    examples[3] = examples[3]._replace(label=None)  # an unlabelled example: label id 0
    path = str(tmp_path / "dev.tf_record")
    assert mc.write_features(examples, 40, tokenizer, path) == 10
    shapes = mc.multiple_choice_shapes(4, 40)
    assert dict(shapes) == {"input_ids": 160, "input_mask": 160, "segment_ids": 160,
                            "label_ids": 1}
    batch = next(iter(tf.data.TFRecordDataset(path).batch(10).map(
        lambda s: mc.parse_multiple_choice(s, 4, 40))))
    assert batch["input_ids"].shape == (10, 4, 40) and batch["label_ids"].shape == (10,)
    for i, example in enumerate(examples):
        values = mc.convert_example(example, 40, tokenizer)
        for name in mc.CHOICE_FEATURES:
            np.testing.assert_array_equal(batch[name][i], values[name], err_msg=name)
            assert batch[name].dtype == tf.int32
        assert int(batch["label_ids"][i]) == (example.label if i != 3 else 0)
    one = next(iter(tf.data.TFRecordDataset(path).map(
        lambda s: mc.parse_multiple_choice(s, 4, 40))))
    assert one["input_ids"].shape == (4, 40) and one["label_ids"].shape == ()


def test_the_input_pipeline_reads_the_records(tokenizer, tmp_path):
    """`input_pipeline.record_dataset` with `multiple_choice_shapes`, then `unflatten_choices`:
    evaluation batches in file order, [B, C, L]."""
    examples = mc.read_swag_csv(DEV)[:7]
    path = str(tmp_path / "dev.tf_record")
    mc.write_features(examples, 24, tokenizer, path)
    data = input_pipeline.record_dataset([path], mc.multiple_choice_shapes(4, 24), 4, False)
    batches = [mc.unflatten_choices(b, 4, 24) for b in data]
    assert [b["input_ids"].shape for b in batches] == [(4, 4, 24), (3, 4, 24)]
    labels = np.concatenate([b["label_ids"].numpy() for b in batches])
    assert labels.tolist() == [e.label for e in examples]
    np.testing.assert_array_equal(batches[1]["segment_ids"][2],
                                  mc.convert_example(examples[6], 24, tokenizer)["segment_ids"])
