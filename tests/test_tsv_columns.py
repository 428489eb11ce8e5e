"""The tsv task never guesses a column silently (issue 30, item 3): columns are chosen by name
(text/text_a/sentence/..., text_b/sentence2/..., label); a column no name explains is an error
listing the columns and naming --text_columns, which picks the text columns (the others are then
ignored); the mapping is logged; headerless files (--column_names) and CSV files
(--data_format=csv: quoted fields with commas and newlines) are read as users have them."""

import pytest

from bert_mgpu.data import processors
from bert_mgpu.data.processors import DataError, InputExample


def tsv(**options):
    return processors.get_processor("tsv", tsv_options=options)


def test_a_tutorials_id_text_label_file(tmp_path, caplog):
    """A tutorial's train.tsv: `id<TAB>text<TAB>label` with a header. It once trained on
    `[CLS] 1 [SEP] <text>` (the id column as text_a, the text as text_b) without a word."""
    (tmp_path / "train.tsv").write_text("id\ttext\tlabel\n1\tthe food was great\t1\n"
                                        "2\tcold and late\t0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv:1: the column\(s\) 'id' are not named as a "
                                        r"text or label column \(columns: 'id', 'text', 'label';"
                                        r".*--text_columns=NAME\[,NAME\]"):
        tsv().get_train_examples(str(tmp_path))
    caplog.set_level("INFO", logger="absl")  # absl's logger, whatever level a test left it at
    assert tsv(text_columns=("text",)).get_train_examples(str(tmp_path)) == [
        InputExample("train-1", "the food was great", None, "1"),
        InputExample("train-2", "cold and late", None, "0")]
    assert "train.tsv: text_a = column 2 'text', label = column 3 'label', ignored: 'id' " \
           "(--text_columns)" in caplog.text


@pytest.mark.parametrize("header,expected", [
    (["label", "sentence"], ("sentence", None)),
    (["Text", "Label"], ("Text", None)),  # case-insensitive
    (["sentence2", "label", "sentence1"], ("sentence1", "sentence2")),  # by name, not position
    (["question", "label", "passage"], ("question", "passage")),
    (["review_body", "label"], ("review_body", None)),  # the one column besides the label
])
def test_columns_by_name(tmp_path, header, expected):
    row = {"label": "1", "Label": "1"}
    (tmp_path / "train.tsv").write_text(
        "\t".join(header) + "\n" + "\t".join(row.get(h, h) for h in header) + "\n")
    (example,) = tsv().get_train_examples(str(tmp_path))
    assert (example.text_a, example.text_b, example.label) == (*expected, "1")


def test_a_test_file_with_an_index_column_needs_text_columns(tmp_path):
    """GLUE's test files start with an `index` column: it was text_a, the sentence text_b."""
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\n")
    (tmp_path / "test.tsv").write_text("index\tsentence\n0\tfine\n")
    with pytest.raises(DataError, match=r"test\.tsv:1: the column\(s\) 'index' are not named"):
        tsv().get_test_examples(str(tmp_path))
    assert tsv(text_columns=("sentence",)).get_test_examples(str(tmp_path)) == [
        InputExample("test-1", "fine", None, None)]
    with pytest.raises(DataError, match=r"--text_columns=text: no column 'text' among the "
                                        r"columns 'sentence', 'label'"):
        tsv(text_columns=("text",)).get_train_examples(str(tmp_path))


def test_headerless_files_with_column_names(tmp_path):
    """LCQMC's files as published: sentence 1, sentence 2, label, no header."""
    (tmp_path / "train.tsv").write_text(
        "开初婚未育证明怎么弄？\t初婚未育情况证明怎么开？\t1\n"
        "谁有狂三这张高清的\t这张高清图，谁有\t0\n", encoding="utf-8")
    examples = tsv(column_names=("text_a", "text_b", "label")).get_train_examples(str(tmp_path))
    assert examples[0] == InputExample(
        "train-1", "开初婚未育证明怎么弄？", "初婚未育情况证明怎么开？", "1")
    assert len(examples) == 2  # the first line is an example, not a header
    with pytest.raises(DataError, match=r"--column_names: no column named 'label'"):
        tsv(column_names=("a", "b", "c")).get_train_examples(str(tmp_path))
    with pytest.raises(DataError, match=r"train\.tsv:1: 3 columns, --column_names names 2$"):
        tsv(column_names=("text", "label")).get_train_examples(str(tmp_path))


def test_csv_files_as_pandas_writes_them(tmp_path):
    """pandas' to_csv(index=False) (wangjiwu/BERT-emotion-classification's train.csv: header
    `label,x_train`): fields with commas, quotes and newlines are quoted."""
    (tmp_path / "train.csv").write_text(
        'label,x_train\nneutral,@mattlduff Not sure what to say.\n'
        'positive,"so happy, really"\nnegative,"two\nlines, and ""quotes"""\n', encoding="utf-8")
    examples = tsv(data_format="csv", text_columns=("x_train",)).get_train_examples(
        str(tmp_path))
    assert [e.text_a for e in examples] == ["@mattlduff Not sure what to say.",
                                            "so happy, really", 'two\nlines, and "quotes"']
    assert tsv(data_format="csv").input_files(str(tmp_path), "train") == [
        str(tmp_path / "train.csv")]
    # A row after a multi-line field is named by the line it starts on.
    (tmp_path / "dev.csv").write_text('label,x_train\nneutral,"a\nb"\npositive\n')
    with pytest.raises(DataError, match=r"dev\.csv:4: 1 columns, the header has 2"):
        tsv(data_format="csv", text_columns=("x_train",)).get_dev_examples(str(tmp_path))


def test_a_broken_csv_quote_names_its_line(tmp_path):
    """csv's lenient reading merged the rows after a quote that does not close where its field
    ends into that field, up to the next '"' or the end of the file, without a word (here: two
    examples of four): it is an error naming the line the row starts on."""
    (tmp_path / "train.csv").write_text('label,text\n1,good\n0,"bad, really\n1,fine\n'
                                        '0,"dull"\n', encoding="utf-8")
    (tmp_path / "dev.csv").write_text('label,text\n1,good\n0,"bad, really\n1,fine\n',
                                      encoding="utf-8")
    (tmp_path / "test.csv").write_text('label,text\n1,"good" movie\n0,bad\n', encoding="utf-8")
    p = processors.get_processor("tsv", ["0", "1"], tsv_options={"data_format": "csv"})
    with pytest.raises(DataError, match=r"^.*train\.csv:3: ',' expected after '\"' \(a quoted "
                                        r"field ends with '\"' before the next ',' or the line's "
                                        r"end; a '\"' inside it is written '\"\"'\)$"):
        p.get_train_examples(str(tmp_path))
    with pytest.raises(DataError, match=r"dev\.csv:3: a quoted field of this row is never "
                                        r"closed \(the rest of the file would be one field\)$"):
        p.get_dev_examples(str(tmp_path))
    with pytest.raises(DataError, match=r"test\.csv:2: ',' expected after '\"'"):
        p.get_test_examples(str(tmp_path))


def test_tsv_options_apply_to_the_tsv_task_only():
    with pytest.raises(ValueError, match=r"--text_columns only apply to --task_name=tsv"):
        processors.get_processor("mrpc", tsv_options={"text_columns": ("x",)})
