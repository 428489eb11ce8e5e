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


def warn_if_read_in_order(input_files: Sequence[str], shuffle_buffer: int,
                          cycle_length: int = 4) -> None:
    """Logs a warning when fewer files than `cycle_length` would be read nearly in file order:
    a buffer far smaller than the file mixes only neighbouring records (fine for
    create_pretraining_data.py's shuffled output, not for a file concatenated from sources)."""
    from absl import logging  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if shuffle_buffer == 0 or len(input_files) >= cycle_length:
        return
    for path in input_files:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        if first is None:
            continue
        estimate = tf.io.gfile.stat(path).length // (len(first.numpy()) + 16)
        if estimate > 10 * shuffle_buffer:
            logging.warning(
                "%s: ~%d records are read in file order through a shuffle buffer of %d "
                "(--shuffle_buffer_size): only neighbouring records are mixed. Fine for "
                "create_pretraining_data.py output (already shuffled); shuffle a file made "
                "otherwise, split it into several files, or pass --shuffle_buffer_size=0 "
                "(whole set in memory).", path, estimate, max(shuffle_buffer, 1))


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

    Training, deterministic for a seed, repeating forever, full batches (drop_remainder):
    - `shuffle_buffer` = 0: every record of every file is held in memory and each epoch reads
      them in a fresh permutation, a pure function of (seed, epoch) (what fine-tuning does: a
      training file sorted by label is seen in random order, whatever its size);
    - `shuffle_buffer` >= 1 (Google's `input_fn_builder`; pretraining): the file order is
      shuffled each epoch, up to `cycle_length` files are interleaved record by record, and the
      records go through a `shuffle_buffer` shuffle (1 = none). Records far apart in one file
      are never mixed: a file must be shuffled already, as create_pretraining_data.py's are.
    Evaluation/prediction: files in the given order, once, no shuffle, and the last partial
    batch is kept (every example counted).

    Args:
      input_files: TFRecord paths.
      shapes: feature name -> length (`features.pretraining_shapes` / `classifier_shapes`).
      batch_size: this worker's part of the global batch (the trainer splits it over towers
        and micro-steps).
      is_training: see above.
      seed: shuffle seed (`--random_seed`).
      shuffle_buffer: 0 = whole-data permutation per epoch; else the record shuffle buffer
        (Google: 100).
      cycle_length: files read in parallel (Google: min(4, number of files)).
      num_shards, shard_index: multi-worker training: this worker's disjoint shard. By file
        when there are at least `num_shards` files (and `shuffle_buffer` >= 1); else every
        worker reads the same record stream and takes the `shard_index`-th of every
        `num_shards` consecutive batches, so the workers' batches together are exactly the
        global batches one process would read.

    Returns:
      tf.data.Dataset of dicts name -> int32 Tensor [batch, length] (float32 for
      `masked_lm_weights`).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if is_training:
        files = None if shuffle_buffer == 0 else shard_files(input_files, num_shards,
                                                             shard_index)
        by_record = files is None
        if shuffle_buffer == 0:
            d = epoch_permutations(input_files, seed)
        else:
            d = _interleaved_records(files or list(input_files), seed, shuffle_buffer,
                                     cycle_length)
        d = d.batch(batch_size, drop_remainder=True)
        if by_record and num_shards > 1:
            d = d.shard(num_shards, shard_index)
    else:
        d = tf.data.TFRecordDataset(list(input_files)).batch(batch_size, drop_remainder=False)
    d = d.map(lambda s: features.parse_example(s, shapes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return d.prefetch(2)


def _interleaved_records(files: Sequence[str], seed: int, shuffle_buffer: int,
                         cycle_length: int):
    """Google's training input: shuffled files, interleaved, through a shuffle buffer."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    d = tf.data.Dataset.from_tensor_slices(list(files))
    d = d.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    cycle = max(1, min(cycle_length, len(files)))
    d = d.interleave(tf.data.TFRecordDataset, cycle_length=cycle, block_length=1,
                     num_parallel_calls=cycle, deterministic=True)
    if shuffle_buffer > 1:
        d = d.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=True)
    return d


def epoch_permutations(input_files: Sequence[str], seed: int):
    """Serialized records of `input_files`, epoch after epoch, each epoch in the permutation
    `argsort(stateless_uniform([n], seed=(seed, epoch)))`: independent of how batches are later
    split, and resumable exactly mid-epoch (the iterator's state is the epoch and the index in
    it). The records are held in memory (a fine-tuning set: ~0.6 KB per example at length 128).

    Raises:
      InputError: the files hold no record.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    records = [r.numpy() for r in tf.data.TFRecordDataset(list(input_files))]
    if not records:
        raise InputError(f"{', '.join(input_files)}: no training records")
    table = tf.constant(records)
    n = len(records)

    def epoch(e):
        keys = tf.random.stateless_uniform([n], seed=tf.stack([tf.constant(seed, tf.int64), e]))
        return tf.data.Dataset.from_tensor_slices(tf.argsort(keys))

    d = tf.data.Dataset.range(2 ** 62).flat_map(epoch)
    return d.map(lambda i: tf.gather(table, i))
