"""tf.data input pipelines over Google-format TFRecords.

Training input is deterministic for a given seed and independent of how the global batch is later
split (towers, accumulation micro-steps, workers): the pipeline always yields the same global
batches in the same order, and the trainer splits them. Its position is saved with every
checkpoint (tf.data iterator state), so a resumed run neither repeats nor skips a batch.
"""

import glob
import os
from typing import List, Mapping, Sequence

from bert_mgpu.data import features

# TensorFlow is imported inside the functions that build pipelines: `expand_input_files` is
# also create_pretraining_data.py's, which never imports TensorFlow (~5 s, ~550 MB).


class InputError(ValueError):
    """Input files that cannot be used; the message names the flag or file."""


class NoInputFileError(InputError, FileNotFoundError):
    """A pattern of an input flag matches no file."""


def _is_remote(path: str) -> bool:
    return "://" in path


def expand_input_files(patterns: str, flag: str = "--input_file", sort: bool = True,
                       unique: bool = True) -> List[str]:
    """Google's `--input_file`: comma-separated globs -> the list of files.

    Local patterns are matched with `glob` (files only; TensorFlow not imported), remote ones
    (gs://...) with `tf.io.gfile.glob`.

    Args:
      patterns: the flag's value.
      flag: the flag's name, for errors.
      sort: sort each glob's matches (a result independent of the file system); False keeps
        directory order, as Google's `tf.gfile.Glob`, which create_pretraining_data.py needs
        to write Google's records.
      unique: drop files listed again (training must not read a file twice per epoch); Google's
        create_pretraining_data.py reads a repeated file twice.

    Raises:
      NoInputFileError: a pattern matches nothing, or there is no pattern.
    """
    files: List[str] = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        if _is_remote(pattern):
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            matched = tf.io.gfile.glob(pattern)
        else:
            matched = [m for m in glob.glob(pattern) if os.path.isfile(m)]
        if not matched:
            raise NoInputFileError(f"{flag}: no file matches {pattern!r}")
        files.extend(sorted(matched) if sort else matched)
    if not files:
        raise NoInputFileError(f"{flag}: no input files given")
    if not unique:
        return files
    seen = set()
    return [f for f in files if not (f in seen or seen.add(f))]


def check_record_lengths(input_files: Sequence[str], shapes: Mapping[str, int],
                         flags_hint: str) -> None:
    """Reads the first record of each file and checks its features against `shapes`.

    Raises:
      InputError: naming the file, the feature and both lengths (e.g. records written with
        another --max_seq_length), or an empty/unreadable file.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    for path in input_files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError as e:
            raise InputError(f"{path}: not a readable TFRecord file ({e.message.splitlines()[0]})"
                             ) from None
        if first is None:
            raise InputError(f"{path}: contains no records")
        lengths = features.record_lengths(first.numpy())
        for name, expected in shapes.items():
            if name not in lengths:
                raise InputError(f"{path}: records have no feature '{name}'")
            if lengths[name] != expected:
                raise InputError(f"{path}: '{name}' has length {lengths[name]} but {flags_hint} "
                                 f"expects {expected}")


def shard_files(input_files: Sequence[str], num_shards: int, index: int):
    """This worker's files when there are at least as many files as workers, else None (then
    records are sharded instead). Disjoint across workers; together, all the files."""
    if num_shards <= 1:
        return list(input_files)
    if len(input_files) >= num_shards:
        return list(input_files)[index::num_shards]
    return None


def record_dataset(input_files: Sequence[str], shapes: Mapping[str, int], batch_size: int,
                   is_training: bool, seed: int = 12345, shuffle_buffer: int = 100,
                   cycle_length: int = 4, num_shards: int = 1,
                   shard_index: int = 0):
    """Batches of parsed records.

    Training (as Google's `input_fn_builder`, made deterministic): the file order is shuffled
    each epoch, up to `cycle_length` files are interleaved, records go through a
    `shuffle_buffer` shuffle, the dataset repeats forever, batches are full
    (drop_remainder). Evaluation/prediction: files in the given order, once, no shuffle, and
    the last partial batch is kept (every example counted).

    Args:
      input_files: TFRecord paths.
      shapes: feature name -> length (`features.pretraining_shapes` / `classifier_shapes`).
      batch_size: the global batch (the trainer splits it over towers and micro-steps).
      is_training: see above.
      seed: shuffle seed (`--random_seed`).
      shuffle_buffer: record shuffle buffer (Google: 100).
      cycle_length: files read in parallel (Google: min(4, number of files)).
      num_shards, shard_index: multi-worker training: this worker reads a disjoint shard, by
        file when there are at least `num_shards` files, else by record (every worker then
        reads the same deterministic record stream and keeps every `num_shards`-th record,
        before the record shuffle). `batch_size` is this worker's part of the global batch.

    Returns:
      tf.data.Dataset of dicts name -> int32 Tensor [batch, length] (float32 for
      `masked_lm_weights`).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if is_training:
        files = shard_files(input_files, num_shards, shard_index)
        by_record = files is None
        files = list(input_files) if by_record else files
        d = tf.data.Dataset.from_tensor_slices(files)
        d = d.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        cycle = max(1, min(cycle_length, len(files)))
        d = d.interleave(tf.data.TFRecordDataset, cycle_length=cycle, block_length=1,
                         num_parallel_calls=cycle, deterministic=True)
        if by_record:
            d = d.shard(num_shards, shard_index)
        if shuffle_buffer > 1:
            d = d.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=True)
        d = d.batch(batch_size, drop_remainder=True)
    else:
        d = tf.data.TFRecordDataset(list(input_files)).batch(batch_size, drop_remainder=False)
    d = d.map(lambda s: features.parse_example(s, shapes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return d.prefetch(2)
