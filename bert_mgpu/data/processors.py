"""Task processors: Google's `cola`, `mnli`, `mrpc`, `xnli` (same files, columns and labels as
Google's `run_classifier.py`) and `tsv`, a header-driven format for users' own data.

`tsv` task: `train.tsv`, `dev.tsv`, `test.tsv` in `--data_dir`, each with a header row (or none,
with `--column_names=id,text,label` naming the columns; `--data_format=csv`: `train.csv` ...,
comma-separated with quoted fields, which may hold commas and newlines). Columns are chosen by
name, never by position: `label` holds the label (it may be absent from the test file); the text
is the column named `text_a`, `text`, `sentence`, ... (TEXT_A_NAMES), a second text `text_b`,
`sentence2`, ... (TEXT_B_NAMES), or those `--text_columns=NAME[,NAME]` names. Any other column is
an error listing the columns (a tutorial's `id` column once became the text silently), unless
`--text_columns` is given (the others are then ignored); a file with one column besides the label
needs no name. The mapping is logged. The label list is the sorted set of training labels (in
numeric order when every label is an integer) unless `--label_list=a,b,c` is given. A row with
the wrong number of columns or an unknown label, or a broken CSV quote, is an error naming the
file and line, never skipped or merged with the next rows silently.

With `--task_type=regression` the `label` column holds a number (the label list is empty); with
`--task_type=multilabel` it holds comma-separated labels, possibly none, and the label list is
the sorted union of the training labels. `stsb` is GLUE's STS-B layout (a regression).
"""

import csv
import io
import os
import re
import sys
from typing import List, NamedTuple, Optional, Sequence

from absl import logging

from bert_mgpu.configs.classifier import TASK_TYPES, TaskType


class InputExample(NamedTuple):
    """A single training/test example for simple sequence classification.

    Attributes:
      guid: unique id, e.g. "train-12".
      text_a: the untokenized text of the first sequence.
      text_b: the second sequence for pair tasks, or None.
      label: the label (str), or None for unlabelled test examples.
    """
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Optional[str] = None


class DataError(ValueError):
    """A data file that cannot be read as the task says; the message names file and line."""


def _decode(data: bytes, path: str) -> str:
    """UTF-8 text of a file's bytes, a leading byte-order mark dropped (Excel and Notepad write
    one before the header); an invalid byte is an error naming the file and line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}:{line}: not UTF-8 (byte 0x{data[e.start]:02x} at column "
                        f"{column}); save the file as UTF-8") from None


def _tsv_rows(text: str) -> List[List[str]]:
    csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))
    return list(csv.reader(io.StringIO(text, newline=""), delimiter="\t",
                           quoting=csv.QUOTE_NONE))


def _numbered_rows(text: str, path: str, **options) -> List[tuple]:
    """[(line number, row)] of `text` read by `csv.reader(**options)` (a row may span lines:
    the line it starts on).

    Raises:
      DataError: `path:LINE: ...` for a row csv cannot read, LINE the line it starts on. With
        `strict=True` (CSV files), a quoted field that does not end where a field ends: csv's
        lenient reading would silently merge the rows up to the next '"' into it.
    """
    csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""), **options)
    rows, start = [], 1
    try:
        for row in reader:
            rows.append((start, row))
            start = reader.line_num + 1
    except csv.Error as e:
        if str(e) == "unexpected end of data":
            raise DataError(f"{path}:{start}: a quoted field of this row is never closed (the "
                            f"rest of the file would be one field)") from None
        hint = (" (a quoted field ends with '\"' before the next ',' or the line's end; a '\"' "
                "inside it is written '\"\"')" if options.get("strict") else "")
        raise DataError(f"{path}:{start}: {e}{hint}") from None
    return rows


def read_tsv(input_file: str) -> List[List[str]]:
    """Reads a tab-separated file as Google's `_read_tsv` (no quoting), as unicode.

    Raises:
      DataError: the file is missing, or not UTF-8 (naming the line).
    """
    import tensorflow as tf  # tf.io.gfile reads local and remote (gs://) paths alike

    if not tf.io.gfile.exists(input_file):
        raise DataError(f"{input_file}: not found")
    with tf.io.gfile.GFile(input_file, "rb") as f:
        return _tsv_rows(_decode(f.read(), input_file))


# The flag that makes a run read each split.
SPLIT_FLAGS = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}


def check_data_dir(data_dir: str) -> bool:
    """Raises DataError unless the local `data_dir` is a directory; False for a remote one
    (gs://...: only TensorFlow reads it)."""
    if "://" in data_dir:
        return False
    if not os.path.isdir(data_dir):
        what = "not a directory" if os.path.exists(data_dir) else "no such directory"
        raise DataError(f"--data_dir={data_dir}: {what}")
    return True


def _need(line: Sequence[str], n: int, path: str, line_number: int) -> None:
    if len(line) < n:
        raise DataError(f"{path}:{line_number}: expected at least {n} tab-separated columns, "
                        f"got {len(line)}")


class DataProcessor:
    """Base class: reads the train/dev/test examples of a task from `data_dir`.

    Subclasses implement `_create_examples(data_dir, split)` (split: "train", "dev", "test") or
    override the `get_*_examples` methods.
    """

    def _create_examples(self, data_dir: str, split: str) -> List[InputExample]:
        raise NotImplementedError()

    def get_train_examples(self, data_dir: str) -> List[InputExample]:
        return self._create_examples(data_dir, "train")

    def get_dev_examples(self, data_dir: str) -> List[InputExample]:
        return self._create_examples(data_dir, "dev")

    def get_test_examples(self, data_dir: str) -> List[InputExample]:
        return self._create_examples(data_dir, "test")

    def get_labels(self, data_dir: Optional[str] = None) -> List[str]:
        """The label list; `data_dir` is only needed by tasks that read it from the data."""
        raise NotImplementedError()

    def input_files(self, data_dir: str, split: str) -> List[str]:
        """The files a split is read from (their stats key the feature cache)."""
        raise NotImplementedError()

    def check_splits(self, splits: Sequence[str]) -> None:
        """Raises DataError unless the processor can read `splits` (checked at start)."""

    def check_files(self, data_dir: str, splits: Sequence[str]) -> None:
        """Raises DataError naming --data_dir and the file when `data_dir` is not a directory or
        a file of `splits` is missing: at start, before TensorFlow loads (a remote data_dir is
        left to the reading)."""
        if not check_data_dir(data_dir):
            return
        for split in splits:
            for path in self.input_files(data_dir, split):
                if not os.path.exists(path):
                    raise DataError(f"--data_dir={data_dir}: no {os.path.basename(path)} (the "
                                    f"{split} split, which {SPLIT_FLAGS[split]} needs)")

    def cache_parts(self) -> dict:
        """What else keys the feature cache (a users' processor: its file's content)."""
        return {}


class XnliProcessor(DataProcessor):
    """XNLI (Chinese by default): MultiNLI machine-translated training data, XNLI dev/test."""

    def __init__(self, language: str = "zh"):
        self.language = language

    def input_files(self, data_dir, split):
        name = {"train": os.path.join("multinli", f"multinli.train.{self.language}.tsv"),
                "dev": "xnli.dev.tsv", "test": "xnli.test.tsv"}[split]
        return [os.path.join(data_dir, name)]

    def get_train_examples(self, data_dir):
        (path,) = self.input_files(data_dir, "train")
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if i == 0:
                continue
            _need(line, 3, path, i + 1)
            label = line[2]
            if label == "contradictory":
                label = "contradiction"
            examples.append(InputExample(f"train-{i}", line[0], line[1], label))
        return examples

    def _create_examples(self, data_dir, split):
        (path,) = self.input_files(data_dir, split)
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if i == 0:
                continue
            _need(line, 8, path, i + 1)
            if line[0] != self.language:
                continue
            examples.append(InputExample(f"{split}-{i}", line[6], line[7], line[1]))
        # Google's processor has no test split; xnli.test.tsv has the dev file's layout.
        return examples


    def get_labels(self, data_dir=None):
        return ["contradiction", "entailment", "neutral"]


class MnliProcessor(DataProcessor):
    """MultiNLI (GLUE version): matched dev and test sets."""

    def input_files(self, data_dir, split):
        name = {"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv"}[split]
        return [os.path.join(data_dir, name)]

    def _create_examples(self, data_dir, split):
        (path,) = self.input_files(data_dir, split)
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if i == 0:
                continue
            _need(line, 10, path, i + 1)
            label = "contradiction" if split == "test" else line[-1]
            set_type = {"train": "train", "dev": "dev_matched", "test": "test"}[split]
            examples.append(InputExample(f"{set_type}-{line[0]}", line[8], line[9], label))
        return examples

    def get_labels(self, data_dir=None):
        return ["contradiction", "entailment", "neutral"]


class MrpcProcessor(DataProcessor):
    """Microsoft Research Paraphrase Corpus (GLUE version)."""

    def input_files(self, data_dir, split):
        return [os.path.join(data_dir, f"{split}.tsv")]

    def _create_examples(self, data_dir, split):
        (path,) = self.input_files(data_dir, split)
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if i == 0:
                continue
            _need(line, 5, path, i + 1)
            label = "0" if split == "test" else line[0]
            examples.append(InputExample(f"{split}-{i}", line[3], line[4], label))
        return examples

    def get_labels(self, data_dir=None):
        return ["0", "1"]


class ColaProcessor(DataProcessor):
    """Corpus of Linguistic Acceptability (GLUE version): train/dev have no header, test has."""

    def input_files(self, data_dir, split):
        return [os.path.join(data_dir, f"{split}.tsv")]

    def _create_examples(self, data_dir, split):
        (path,) = self.input_files(data_dir, split)
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if split == "test":
                if i == 0:
                    continue
                _need(line, 2, path, i + 1)
                examples.append(InputExample(f"{split}-{i}", line[1], None, "0"))
            else:
                _need(line, 4, path, i + 1)
                examples.append(InputExample(f"{split}-{i}", line[3], None, line[1]))
        return examples

    def get_labels(self, data_dir=None):
        return ["0", "1"]


# tsv task: the columns a header names (case-insensitive), in order of preference.
TEXT_A_NAMES = ("text_a", "text", "sentence", "sentence1", "sentence_a", "question1", "question",
                "premise", "query", "content", "review", "comment", "title", "document", "tweet")
TEXT_B_NAMES = ("text_b", "sentence2", "sentence_b", "question2", "hypothesis", "passage",
                "answer")
LABEL_NAMES = ("label",)


def _first_named(header: Sequence[str], names: Sequence[str]) -> Optional[int]:
    lower = [h.strip().lower() for h in header]
    for name in names:
        if name in lower:
            return lower.index(name)
    return None


class TsvProcessor(DataProcessor):
    """Users' own data: a `label` column and one or two text columns chosen by name (see module
    doc); headerless files with `column_names`, CSV files with `data_format="csv"`.

    Files may be gzip-compressed (`train.tsv.gz`); the plain name wins when both exist.
    """

    def __init__(self, label_list: Optional[Sequence[str]] = None,
                 task_type: str = "classification", text_columns: Optional[Sequence[str]] = None,
                 column_names: Optional[Sequence[str]] = None, data_format: str = "tsv"):
        self.task_type = task_type
        self._labels = list(label_list) if label_list else None
        if not TASK_TYPES[task_type].has_label_names:
            self._labels = []  # a score: one output, no label list
        self.text_columns = [c.strip() for c in text_columns or () if c.strip()]
        self.column_names = [c.strip() for c in column_names or () if c.strip()]
        self.data_format = data_format
        self._logged = set()
        if len(self.text_columns) > 2:
            raise DataError(f"--text_columns={','.join(self.text_columns)}: one or two columns "
                            f"(text_a, text_b)")

    def input_files(self, data_dir, split):
        plain = os.path.join(data_dir, f"{split}.{self.data_format}")
        gz = plain + ".gz"
        return [gz if not os.path.exists(plain) and os.path.exists(gz) else plain]

    def check_files(self, data_dir, splits):
        """The base class's checks, then each split file's columns (its header, or
        --column_names): a missing label column, an unnamed or unknown text column is an
        error naming the file, before TensorFlow loads."""
        super().check_files(data_dir, splits)
        if "://" in data_dir:
            return
        for split in splits:
            (path,) = self.input_files(data_dir, split)
            header = self.column_names or self._header(path)
            self._columns(header, path, split, log=False)

    def _header(self, path):
        """The first row of a local file, as `_read_split` reads it, without reading the rest
        (a CSV record may span lines: it is parsed from the first 1 MiB)."""
        import gzip
        limit = 1 << 20
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            head = f.read(limit)
        # A whole small file is decoded as the reading will (an invalid byte names its line);
        # a cut one may end inside a character, which the full reading checks later.
        text = _decode(head, path) if len(head) < limit else head.decode("utf-8-sig", "replace")
        options = {} if self.data_format == "csv" else dict(delimiter="\t",
                                                             quoting=csv.QUOTE_NONE)
        row = next(csv.reader(io.StringIO(text, newline=""), **options), None)
        if not row:
            raise DataError(f"{path}: empty file (a header row is required, or give the "
                            f"columns' names with --column_names)")
        return [h.strip() for h in row]

    def _rows(self, path):
        """[(line number, row)] of the file (a CSV row may span lines: the line it starts on)."""
        if path.endswith(".gz"):
            import gzip
            if not os.path.exists(path):
                raise DataError(f"{path}: not found")
            with gzip.open(path, "rb") as f:
                text = _decode(f.read(), path)
        else:
            import tensorflow as tf  # tf.io.gfile reads local and remote (gs://) paths alike
            if not tf.io.gfile.exists(path):
                raise DataError(f"{path}: not found")
            with tf.io.gfile.GFile(path, "rb") as f:
                text = _decode(f.read(), path)
        if self.data_format == "csv":
            return _numbered_rows(text, path, strict=True)  # a broken quote is an error
        return _numbered_rows(text, path, delimiter="\t", quoting=csv.QUOTE_NONE)

    def _columns(self, header, path, split, log=True):
        """(label column or None, text_a column, text_b column or None) of a file's header;
        `log`: the mapping is logged (once per split)."""
        where = "--column_names" if self.column_names else f"{path}:1"
        shown = ", ".join(repr(h) for h in header)
        label_col = _first_named(header, LABEL_NAMES)
        if label_col is None and split != "test":
            raise DataError(f"{where}: no column named 'label' among the columns {shown}")
        if self.text_columns:
            chosen = []
            for name in self.text_columns:
                col = _first_named(header, [name.lower()])
                if col is None:
                    raise DataError(f"{where}: --text_columns={','.join(self.text_columns)}: no "
                                    f"column {name!r} among the columns {shown}")
                chosen.append(col)
            text_a, text_b = chosen[0], (chosen[1] if len(chosen) == 2 else None)
        else:
            text_a = _first_named(header, TEXT_A_NAMES)
            text_b = _first_named(header, TEXT_B_NAMES)
            others = [i for i in range(len(header)) if i not in (label_col, text_b)]
            if text_a is None and text_b is None and len(others) == 1:
                text_a = others[0]  # the one column besides the label: no choice to make
            extra = [header[i] for i in range(len(header))
                     if i not in (label_col, text_a, text_b)]
            if extra or text_a is None:
                what = (f"the column(s) {', '.join(repr(h) for h in extra)} are not named as a "
                        f"text or label column" if extra else "no column is named as a text")
                raise DataError(f"{where}: {what} (columns: {shown}; text: {TEXT_A_NAMES[0]}, "
                                f"text, sentence, ...; a second text: text_b, sentence2, ...): "
                                f"give the text column(s) with --text_columns=NAME[,NAME], the "
                                f"others are then ignored")
        if log and split not in self._logged:
            self._logged.add(split)
            ignored = [header[i] for i in range(len(header))
                       if i not in (label_col, text_a, text_b)]
            logging.info("%s: text_a = column %d %r%s%s%s", path, text_a + 1, header[text_a],
                         "" if text_b is None else f", text_b = column {text_b + 1} "
                                                   f"{header[text_b]!r}",
                         "" if label_col is None else f", label = column {label_col + 1} "
                                                      f"{header[label_col]!r}",
                         f", ignored: {', '.join(map(repr, ignored))} (--text_columns)"
                         if ignored else "")
        return label_col, text_a, text_b

    def _read_split(self, data_dir, split, labels: Optional[Sequence[str]]):
        (path,) = self.input_files(data_dir, split)
        rows = self._rows(path)
        if self.column_names:
            header = self.column_names
        else:
            if not rows:
                raise DataError(f"{path}: empty file (a header row is required, or give the "
                                f"columns' names with --column_names)")
            header = [h.strip() for h in rows.pop(0)[1]]
        label_col, text_a, text_b = self._columns(header, path, split)
        known = set(labels) if labels is not None else None
        examples = []
        for number, row in rows:
            if len(row) != len(header):
                names = "--column_names names" if self.column_names else "the header has"
                raise DataError(f"{path}:{number}: {len(row)} columns, {names} {len(header)}")
            label = row[label_col] if label_col is not None else None
            if label is not None:
                check_label(label, self.task_type, known, labels, path, number)
            examples.append(InputExample(f"{split}-{len(examples) + 1}", row[text_a],
                                         row[text_b] if text_b is not None else None, label))
        return examples

    def get_train_examples(self, data_dir):
        examples = self._read_split(data_dir, "train", self._labels)
        if self._labels is None:
            kind = TASK_TYPES[self.task_type]
            self._labels = sort_labels({name for e in examples
                                        for name in label_names(e.label, kind)})
        return examples

    def get_dev_examples(self, data_dir):
        return self._read_split(data_dir, "dev", self._labels_for(data_dir))

    def get_test_examples(self, data_dir):
        return self._read_split(data_dir, "test", self._labels_for(data_dir))

    def _labels_for(self, data_dir):
        if self._labels is None:
            self.get_train_examples(data_dir)
        return self._labels

    def get_labels(self, data_dir=None):
        if self._labels is None:
            if data_dir is None:
                raise DataError("tsv task: the label list comes from train.tsv or --label_list")
            self.get_train_examples(data_dir)
        return list(self._labels)


def sort_labels(names) -> List[str]:
    """The label list made from a training file's labels: in numeric order when every label is
    an integer ('2' before '10': index i is label i for 0..N-1), else sorted as strings."""
    names = set(names)
    if names and all(re.fullmatch(r"[+-]?[0-9]+", name) for name in names):
        return sorted(names, key=lambda name: (int(name), name))
    return sorted(names)


def split_labels(text: str) -> List[str]:
    """A multilabel cell -> its labels: comma-separated, spaces around them ignored, an empty
    cell = no label."""
    return [name.strip() for name in text.split(",") if name.strip()]


def parse_score(text: str, path: str, line_number: int) -> float:
    """A regression label -> float; anything else (or NaN/inf) is an error naming the line."""
    import math
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataError(f"{path}:{line_number}: the label {text!r} is not a finite number "
                        f"(--task_type=regression)")
    return value


def label_names(cell: str, kind: TaskType) -> List[str]:
    """The label names a label cell holds for a task type: the cell itself (`index`), its
    comma-separated names (`multi_hot`), none (`score`: a number, not a name)."""
    if kind.label_encoding == "multi_hot":
        return split_labels(cell)
    return [cell] if kind.has_label_names else []


def check_label(label: str, task_type: str, known, labels, path: str, line_number: int) -> None:
    """Raises DataError naming the line for a label the task type cannot use."""
    kind = TASK_TYPES[task_type]
    if not kind.has_label_names:
        parse_score(label, path, line_number)
        return
    if known is None:
        return
    for name in label_names(label, kind):
        if name not in known:
            raise DataError(f"{path}:{line_number}: unknown label {name!r} (labels: "
                            f"{', '.join(labels)})")


class StsbProcessor(DataProcessor):
    """GLUE's STS-B (Semantic Textual Similarity Benchmark): a regression task.

    `train.tsv`, `dev.tsv`, `test.tsv` with a header row; sentence1 in column 7, sentence2 in
    column 8 (0-based), the similarity score (0 to 5) in the last column (`score`; test.tsv has
    none: its examples get 0).
    """

    task_type = "regression"

    def input_files(self, data_dir, split):
        return [os.path.join(data_dir, f"{split}.tsv")]

    def _create_examples(self, data_dir, split):
        (path,) = self.input_files(data_dir, split)
        examples = []
        for i, line in enumerate(read_tsv(path)):
            if i == 0:
                continue
            _need(line, 9 if split == "test" else 10, path, i + 1)
            label = "0" if split == "test" else line[-1]
            parse_score(label, path, i + 1)
            examples.append(InputExample(f"{split}-{line[0]}", line[7], line[8], label))
        return examples

    def get_labels(self, data_dir=None):
        return []


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "tsv": TsvProcessor,
    "stsb": StsbProcessor,
}


def get_processor(task_name: str, label_list: Optional[Sequence[str]] = None,
                  task_type: str = "classification", tsv_options: Optional[dict] = None,
                  known_elsewhere: Optional[str] = None) -> DataProcessor:
    """The built-in processor of `--task_name` (case-insensitive); `task_type` and
    `tsv_options` apply to tsv. Users' own classes: data/user_processors.processor_for.

    Raises:
      ValueError: an unknown task (listing the known ones, plus `known_elsewhere`: the classes
        of a --processors_file), or a flag that does not apply to the task.
    """
    name = task_name.lower()
    if name not in PROCESSORS:
        known = ", ".join(sorted(PROCESSORS)) + (
            known_elsewhere or "; your own DataProcessor classes: --processors_file=FILE.py")
        raise ValueError(f"--task_name: task not found: {task_name!r} (known: {known})")
    tsv_options = {k: v for k, v in (tsv_options or {}).items()
                   if v and v != "tsv"}  # given: text_columns, column_names, data_format=csv
    if name == "tsv":
        return TsvProcessor(label_list, task_type, **tsv_options)
    if tsv_options:
        flags = ", ".join(f"--{k}" for k in tsv_options)
        raise ValueError(f"{flags} only apply to --task_name=tsv, not {task_name!r}")
    if label_list:
        raise ValueError(f"--label_list only applies to --task_name=tsv, not {task_name!r}")
    return PROCESSORS[name]()
