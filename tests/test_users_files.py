"""Files as users have them (issue 30, item 5): a UTF-8 byte-order mark before the first line
(Excel's "CSV UTF-8", Notepad) in every text reader, SQuAD files whose answer_start is null,
missing or wrong, and (in tests/test_bad_input.py) remote paths that cannot be reached and a
missing --init_checkpoint, each one line before any work."""

import json
import logging

from bert_mgpu import tokenization
from bert_mgpu.data import pretraining_data, processors, squad_data
from bert_mgpu.tasks import features

BOM = b"\xef\xbb\xbf"


def test_a_bom_before_a_tsv_header_that_starts_with_label(tmp_path):
    """The case a BOM still broke: the header's first name is `label` ('\\ufefflabel' was
    no label column). tests/test_input_order.py's header starts with `sentence`, which the
    BOM did not disturb."""
    (tmp_path / "train.tsv").write_bytes(BOM + "label\tsentence\r\n1\tgood movie\r\n0\tbad\r\n"
                                         .encode("utf-8"))
    p = processors.get_processor("tsv")
    assert [(e.text_a, e.label) for e in p.get_train_examples(str(tmp_path))] == [
        ("good movie", "1"), ("bad", "0")]


def test_a_bom_before_a_csv_header(tmp_path):
    (tmp_path / "train.csv").write_bytes(BOM + b'label,text\r\n1,"good, really"\r\n')
    p = processors.get_processor("tsv", tsv_options={"data_format": "csv"})
    assert [(e.text_a, e.label) for e in p.get_train_examples(str(tmp_path))] == [
        ("good, really", "1")]


def test_a_bom_in_vocabularies_input_lines_and_pretraining_text(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(BOM + b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    assert list(tokenization.load_vocab(str(vocab)))[:2] == ["[PAD]", "[UNK]"]
    lines = tmp_path / "input.txt"
    lines.write_bytes(BOM + b"hello world\nsecond ||| pair\n")
    assert features.read_input_lines(str(lines)) == ["hello world", "second ||| pair"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(BOM + b"First line.\nSecond line.\n\nNext document.\n")
    blocks = b"".join(pretraining_data._read_line_blocks(str(corpus)))
    assert blocks == b"First line.\nSecond line.\n\nNext document.\n"


def _squad(path, answers, context="Bob ran to Paris. Paris is big.", bom=False):
    qas = [{"id": f"q{i}", "question": "Where?", "answers": [a]} for i, a in enumerate(answers)]
    data = json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}).encode("utf-8")
    path.write_bytes((BOM if bom else b"") + data)
    return str(path)


def test_a_bom_before_a_squad_file(tmp_path):
    path = _squad(tmp_path / "train.json", [{"text": "Bob", "answer_start": 0}], bom=True)
    (example,) = squad_data.read_squad_examples(path, is_training=True)
    assert example.orig_answer_text == "Bob" and example.start_position == 0


def test_squad_answers_without_a_usable_offset_are_located_or_skipped(tmp_path, caplog):
    """Users' own SQuAD files: answer_start null (a TypeError traceback before), absent, or
    past the context (the whole run stopped before): located by the text's first occurrence;
    an answer that is not in the context is skipped, counted with the first ids."""
    path = _squad(tmp_path / "train.json", [
        {"text": "Paris", "answer_start": 11},    # right: Google's positions
        {"text": "Paris", "answer_start": None},  # null
        {"text": "Paris"},                        # no offset
        {"text": "Paris", "answer_start": 400},   # past the context
        {"text": "Paris", "answer_start": 0},     # in the context, not at the answer
        {"text": "London", "answer_start": 3},    # not in the context at all
        {"text": "Rome", "answer_start": None},
    ])
    with caplog.at_level(logging.INFO, logger="absl"):
        examples = squad_data.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["q0", "q1", "q2", "q3", "q4"]
    # The word "Paris." (index 3): the first occurrence, where the right offset points too.
    assert {(e.start_position, e.end_position) for e in examples} == {(3, 3)}
    assert "4 answer(s) located by their text in the context" in caplog.text
    assert "2 question(s) skipped, their answer text is not in the context (as Google skips " \
           "answers it cannot recover); the first: q5, q6" in caplog.text
