"""Multiple-choice data: SWAG's CSV -> examples -> [C, L] features -> TFRecords.

Input: SWAG's CSV (`rowanz/swagaf` `data/{train,val,test}.csv`), comma-separated with quoted
fields, a header row naming the columns:

    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label

Columns are found by name; `sent1`, `sent2` and `ending0` .. `ending{C-1}` are required, `label`
(the index of the right ending) may be absent or empty (a test file), and every other column
(SWAG's unnamed row index, `video-id`, ...) is ignored. UTF-8 with or without a byte-order mark,
`\\n` or `\\r\\n` line endings, `.gz` or not, local or remote (`gs://`). A row with the wrong
number of fields, a broken quote, a label that is not a choice index, or bytes that are not
UTF-8 is a `DataError` naming the file and line; no row is skipped.

Examples follow Hugging Face's `run_swag.py`: the context is `sent1`, choice i is
`sent2 + " " + ending<i>`.

Features: per choice, Google's pair layout (`sequence.pack_tokens`: `[CLS] context [SEP] choice
[SEP]`, the longer of the two losing its last token first, zero padding), so one example is

    input_ids, input_mask, segment_ids   int [C, L]   (C = num_choices, L = max_seq_length)
    label_ids                            int          (the right choice; 0 when unlabelled)

Records (`tfrecord.encode_example`, the package's one Example writer) hold the [C, L] features
flattened to [C * L] in row-major order (choice 0's L values first) and `label_ids` as [1];
`multiple_choice_shapes` gives those lengths and `parse_multiple_choice` (or
`unflatten_choices` after a pipeline that parsed them) restores [C, L].
"""

import collections
import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from bert_mgpu.data import checks, features, file_io, tfrecord
from bert_mgpu.data.processors import DataError, _decode, _numbered_rows
from bert_mgpu.data.sequence import pack_tokens

CONTEXT_COLUMN = "sent1"
HEADER_COLUMN = "sent2"
LABEL_COLUMN = "label"
NUM_CHOICES = 4
# The features with [C, L] values; `label_ids` is the example's one label.
CHOICE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MULTIPLE_CHOICE_FEATURES = CHOICE_FEATURES + ("label_ids",)


class MultipleChoiceExample(NamedTuple):
    """One question.

    Attributes:
      guid: unique id, e.g. "dev-12" (the row's index in its file).
      context: str, the text every choice continues (SWAG's `sent1`).
      choices: tuple of C str, `sent2 + " " + ending<i>`.
      label: int in [0, C), the right choice; None in an unlabelled (test) file.
    """
    guid: str
    context: str
    choices: Tuple[str, ...]
    label: Optional[int] = None


def ending_columns(num_choices: int = NUM_CHOICES) -> List[str]:
    return [f"ending{i}" for i in range(num_choices)]


def _read_rows(path: str) -> List[tuple]:
    """[(line number, row)] of a CSV file, the header included."""
    if not file_io.is_remote(path) and not os.path.exists(path):
        raise DataError(f"{path}: not found")
    with file_io.open_input(path) as f:
        text = _decode(f.read(), path)
    return _numbered_rows(text, path, strict=True)  # a broken quote is an error


def _column_index(header: Sequence[str], path: str, num_choices: int) -> Dict[str, int]:
    """Column name -> position, for the columns an example reads (`label` when present)."""
    wanted = [CONTEXT_COLUMN, HEADER_COLUMN] + ending_columns(num_choices)
    missing = [name for name in wanted if name not in header]
    if missing:
        raise DataError(f"{path}:1: no column named {', '.join(map(repr, missing))} in the "
                        f"header ({','.join(header)}); SWAG's CSV has sent1, sent2, "
                        f"ending0..ending{num_choices - 1} and label")
    if LABEL_COLUMN in header:
        wanted.append(LABEL_COLUMN)
    return {name: list(header).index(name) for name in wanted}


def _label(text: str, path: str, line: int, num_choices: int) -> Optional[int]:
    """The label field's choice index; None when empty."""
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or int(text) >= num_choices:
        raise DataError(f"{path}:{line}: label {text!r} is not a choice index 0-"
                        f"{num_choices - 1}")
    return int(text)


def read_swag_csv(path: str, split: str = "", num_choices: int = NUM_CHOICES
                  ) -> List[MultipleChoiceExample]:
    """Reads SWAG's CSV into examples, in file order.

    Args:
      path: the CSV file (`.gz` is decompressed).
      split: guid prefix ("train", "dev", "test"); the file's name without extension if empty.
      num_choices: C, the number of `ending<i>` columns read.

    Returns:
      list of `MultipleChoiceExample`, guid `{split}-{row index}`.

    Raises:
      DataError: a missing file or column, or a bad row, naming the file and line.
    """
    rows = [(line, row) for line, row in _read_rows(path) if row]  # csv gives [] for a blank
    if not rows:
        raise DataError(f"{path}: empty file (SWAG's CSV starts with a header row)")
    split = split or os.path.basename(path).split(".")[0]
    header = rows[0][1]
    index = _column_index(header, path, num_choices)
    examples = []
    for number, (line, row) in enumerate(rows[1:]):
        if len(row) != len(header):
            raise DataError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
        head = row[index[HEADER_COLUMN]]
        choices = tuple(f"{head} {row[index[name]]}" for name in ending_columns(num_choices))
        label = (_label(row[index[LABEL_COLUMN]], path, line, num_choices)
                 if LABEL_COLUMN in index else None)
        examples.append(MultipleChoiceExample(f"{split}-{number}", row[index[CONTEXT_COLUMN]],
                                              choices, label))
    return examples


def convert_example(example: MultipleChoiceExample, max_seq_length: int, tokenizer,
                    context_tokens=None, choice_tokens=None) -> Dict[str, list]:
    """One example -> its features: `CHOICE_FEATURES` as C lists of `max_seq_length` ints,
    `label_ids` an int (0 when unlabelled).

    Args:
      example: `MultipleChoiceExample`.
      max_seq_length: L, the padded length of each choice's sequence (>= 3).
      tokenizer: `FullTokenizer`.
      context_tokens, choice_tokens: the context's tokens and each choice's, already tokenized
        (batch tokenization), else tokenized here.
    """
    if context_tokens is None:
        context_tokens = tokenizer.tokenize(example.context)
    if choice_tokens is None:
        choice_tokens = [tokenizer.tokenize(choice) for choice in example.choices]
    packed = [pack_tokens(context_tokens, tokens, max_seq_length,
                          tokenizer.convert_tokens_to_ids) for tokens in choice_tokens]
    return {"input_ids": [p.input_ids for p in packed],
            "input_mask": [p.input_mask for p in packed],
            "segment_ids": [p.segment_ids for p in packed],
            "label_ids": example.label if example.label is not None else 0}


def flatten(values: Dict[str, list]) -> Dict[str, List[int]]:
    """`convert_example`'s features as a record's lists: [C, L] -> [C * L], label -> [1]."""
    out = collections.OrderedDict(
        (name, [v for choice in values[name] for v in choice]) for name in CHOICE_FEATURES)
    out["label_ids"] = [values["label_ids"]]
    return out


def multiple_choice_shapes(num_choices: int, max_seq_length: int) -> Dict[str, int]:
    """Feature name -> fixed length of a multiple-choice record (the [C, L] ones flattened)."""
    shapes = collections.OrderedDict(
        (name, num_choices * max_seq_length) for name in CHOICE_FEATURES)
    shapes["label_ids"] = 1
    return shapes


def unflatten_choices(parsed, num_choices: int, max_seq_length: int):
    """Parsed multiple-choice records (`features.parse_example` or `input_pipeline`'s datasets
    with `multiple_choice_shapes`) with their [C, L] features restored.

    Args:
      parsed: dict of int32 Tensors, `CHOICE_FEATURES` [C * L] (or [B, C * L]), `label_ids` [1]
        (or [B, 1]); other features are passed through.
      num_choices, max_seq_length: C and L the records were written with.

    Returns:
      dict: `CHOICE_FEATURES` [C, L] (or [B, C, L]), `label_ids` scalar (or [B]).
    """
    import tensorflow as tf  # the writer side needs no TensorFlow
    outer = tf.shape(parsed["label_ids"])[:-1]  # [] or [B]
    out = dict(parsed)
    for name in CHOICE_FEATURES:
        out[name] = tf.reshape(parsed[name],
                               tf.concat([outer, [num_choices, max_seq_length]], 0))
    out["label_ids"] = tf.reshape(parsed["label_ids"], outer)
    return out


def parse_multiple_choice(serialized, num_choices: int, max_seq_length: int):
    """Parses one or a batch of multiple-choice records.

    Args:
      serialized: string Tensor, scalar or [B].
      num_choices, max_seq_length: C and L the records were written with.

    Returns:
      dict: `input_ids`, `input_mask`, `segment_ids` int32 [C, L] (or [B, C, L]); `label_ids`
      int32 scalar (or [B]).
    """
    shapes = multiple_choice_shapes(num_choices, max_seq_length)
    return unflatten_choices(features.parse_example(serialized, shapes), num_choices,
                             max_seq_length)


def _tokenized(chunk: Sequence[MultipleChoiceExample], tokenizer):
    """(context tokens, [choice tokens]) per example, the chunk's texts tokenized as one batch."""
    tokens = tokenizer.tokenize_batch([text for e in chunk for text in (e.context, *e.choices)])
    out, start = [], 0
    for example in chunk:
        end = start + 1 + len(example.choices)
        out.append((tokens[start], tokens[start + 1:end]))
        start = end
    return out


def write_features(examples: Sequence[MultipleChoiceExample], max_seq_length: int, tokenizer,
                   output_file: str) -> int:
    """Writes one record per example to `output_file` (atomically); returns the count."""
    batch = 256
    with tfrecord.RecordFileWriter(output_file) as writer:
        for start in range(0, len(examples), batch):
            chunk = examples[start:start + batch]
            for example, (context, choices) in zip(chunk, _tokenized(chunk, tokenizer)):
                values = convert_example(example, max_seq_length, tokenizer, context, choices)
                writer.write(tfrecord.encode_example(flatten(values)))
    return len(examples)


# ---------------------------------------------------------------------------------------------
# run_multiple_choice.py's files.

# SWAG's file names (rowanz/swagaf data/); the dev split is val.csv, dev.csv accepted too.
SPLIT_FILES = {"train": ("train.csv",), "dev": ("val.csv", "dev.csv"), "test": ("test.csv",)}


def split_path(data_dir: str, split: str) -> str:
    """The CSV of `split` ("train", "dev", "test") in `data_dir`: the first of SPLIT_FILES'
    names that exists (a remote directory: the first name)."""
    names = SPLIT_FILES[split]
    paths = [os.path.join(data_dir, name) for name in names]
    if file_io.is_remote(data_dir):
        return paths[0]
    return next((p for p in paths if os.path.isfile(p)), paths[0])


def read_split(data_dir: str, split: str, num_choices: int) -> List[MultipleChoiceExample]:
    """The examples of `split`'s CSV in `data_dir`; train and dev rows must have a label.

    Raises:
      DataError: naming the file (and line): missing, a bad row or column, no label.
    """
    path = split_path(data_dir, split)
    if not file_io.is_remote(path) and not os.path.isfile(path):
        names = SPLIT_FILES[split]
        either = names[0] + "".join(f" (or {name})" for name in names[1:])
        raise DataError(f"--data_dir={data_dir}: {either} not found (--do_{_FLAG[split]} "
                        f"reads it)")
    examples = read_swag_csv(path, split, num_choices)
    if split != "test":
        unlabelled = next((e for e in examples if e.label is None), None)
        if unlabelled is not None:
            raise DataError(f"{path}: data row {unlabelled.guid.split('-')[-1]} has no label "
                            f"(every {split} row needs the index of its right ending)")
    if not examples:
        raise DataError(f"{path}: no example (a header row only)")
    return examples


# The flag of the run that reads each split.
_FLAG = {"train": "train", "dev": "eval", "test": "predict"}


def check_multiple_choice_inputs(cfg) -> None:
    """run_multiple_choice.py's inputs at start, before TensorFlow loads (`cfg`: a
    MultipleChoiceConfig): --data_dir, the model files, the weights its evaluation or
    prediction would use, and the CSV of each split the run reads, every row (the job reads
    them again)."""
    if not file_io.is_remote(cfg.data_dir) and not os.path.isdir(cfg.data_dir):
        raise checks.InputFileError(f"--data_dir={cfg.data_dir} is not a directory")
    checks.check_training_job(cfg, cfg.do_predict)
    if file_io.is_remote(cfg.data_dir):
        return
    for split, wanted in (("train", cfg.do_train), ("dev", cfg.do_eval),
                          ("test", cfg.do_predict)):
        if wanted:
            read_split(cfg.data_dir, split, cfg.num_choices)
