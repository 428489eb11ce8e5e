"""tf.data input pipelines over Google-format TFRecords.

Training input is deterministic for a given seed and independent of how the global batch is later
split (towers, accumulation micro-steps, workers): the pipeline always yields the same global
batches in the same order, and the trainer splits them. Its position is saved with every
checkpoint (tf.data iterator state), so a resumed run neither repeats nor skips a batch.
"""

import dataclasses
import glob
import os
from typing import AbstractSet, List, Mapping, Optional, Sequence

from bert_mgpu import tokenization
from bert_mgpu.data import checks, features, file_io
from bert_mgpu.data.file_io import is_remote
from bert_mgpu.model.bert_config import read_bert_config

# TensorFlow is imported inside the functions that build pipelines: `expand_input_files` is
# also create_pretraining_data.py's, which never imports TensorFlow (its start-up time and
# memory: docs/benchmarks.md).


class InputError(ValueError):
    """Input files that cannot be used; the message names the flag or file."""


class NoInputFileError(InputError, FileNotFoundError):
    """A pattern of an input flag matches no file."""


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
        if file_io.is_remote(pattern):
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



def check_pretraining_inputs(cfg) -> None:
    """run_pretraining.py's files at start (`cfg`: a PretrainingConfig): the model files, the
    weights its evaluation would use, and an --input_file pattern that matches nothing."""
    checks.check_model_files(cfg.model, casing=False)
    checks.check_weights_to_evaluate(cfg)
    expand_input_files(cfg.input_file)
    check_masked_lm_only(cfg)


def check_masked_lm_only(cfg) -> None:
    """A config without token types (ModernBERT's `type_vocab_size: 0`) has no segments for a
    next-sentence task: it pretrains masked-LM only, asked for with --no_next_sentence.

    Raises:
      InputError: one line naming the flag and the config file.
    """
    if cfg.no_next_sentence or is_remote(cfg.model.bert_config_file):
        return
    if read_bert_config(cfg.model).type_vocab_size == 0:
        raise InputError(f"--bert_config_file={cfg.model.bert_config_file} has no token types "
                         f"(type_vocab_size 0: ModernBERT), so no next-sentence task: pretrain "
                         f"it masked-LM only with --no_next_sentence")

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
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from absl import logging  # pylint: disable=import-outside-toplevel

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
                   shard_index: int = 0, masking: Optional["DynamicMasking"] = None,
                   group_by_length: bool = False):
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
      masking: unmasked records (--dynamic_masking; `shapes` is then ignored): each record is
        masked by `mask_example` keyed by its index in the record stream, counted before
        batching and worker sharding (with files sharded over workers, index * num_shards +
        shard_index), so the masks do not depend on how a batch is split, differ every epoch
        and follow the iterator's saved position. Evaluation: index in the files, so every
        evaluation sees the same masks.
      group_by_length: training with `shuffle_buffer` = 0: every epoch's permutation grouped
        by length over global batches (`_grouped_by_length`; --group_by_length).

    Returns:
      tf.data.Dataset of dicts name -> int32 Tensor [batch, length] (float32 for
      `masked_lm_weights`).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if group_by_length and shuffle_buffer != 0:
        raise ValueError("group_by_length groups epoch permutations: needs shuffle_buffer=0")
    if is_training:
        d = _training_batches(input_files, batch_size, seed, shuffle_buffer, cycle_length,
                              num_shards, shard_index, masking, group_by_length)
    else:  # every record once, in file order, the last batch kept
        d = tf.data.TFRecordDataset(list(input_files))
        d = (d if masking is None else _masked(d, masking)).batch(batch_size)
    if masking is None:
        d = d.map(lambda s: features.parse_example(s, shapes),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return prefetched(d)


def prefetched(dataset):
    """`dataset` with two batches prefetched and tf.data's autotuning off: what every pipeline
    of this module (and data/multitask.py) returns.

    Autotuning runs a thread per iterator that re-tunes the pipeline at growing intervals (up
    to 60 s). Destroying the iterator wakes that thread through a cancellation callback, but
    TensorFlow runs the callback before it marks the cancellation done, so a thread that wakes
    at once sees no cancellation and sleeps out its interval: the iterator's destructor then
    blocks for up to 60 s (measured: 46 s and 56 s between the last training checkpoint and
    the evaluation of run_classifier_mgpu.py, 2 of 3 runs; docs/benchmarks.md, issue 53).
    Without autotuning there is no such thread; `num_parallel_calls=AUTOTUNE` then means one
    call per core, and every buffer here has a fixed size."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(2).with_options(options)


def _training_batches(input_files, batch_size, seed, shuffle_buffer, cycle_length, num_shards,
                      shard_index, masking, group_by_length):
    """`record_dataset`'s training batches (serialized records, or masked features with
    `masking`): this worker's shard, repeating forever, full batches."""
    files = None if shuffle_buffer == 0 else shard_files(input_files, num_shards, shard_index)
    by_record = files is None
    if shuffle_buffer == 0:
        d = epoch_permutations(input_files, seed,
                               batch_size * num_shards if group_by_length else 0)
    else:
        d = _interleaved_records(files or list(input_files), seed, shuffle_buffer,
                                 cycle_length)
    if masking is not None:
        if by_record or num_shards == 1:
            d = _masked(d, masking)
        else:
            d = _masked(d, masking, stride=num_shards, offset=shard_index)
    d = d.batch(batch_size, drop_remainder=True)
    if by_record and num_shards > 1:
        d = d.shard(num_shards, shard_index)
    return d


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


# Records fetched per eager step by `_read_records`: one iterator step per record cost more
# than reading the file (docs/benchmarks.md, "Issue 53: CPU seconds per phase").
_READ_BATCH = 4096


def _read_records(input_files: Sequence[str]) -> List[bytes]:
    """Every serialized record of `input_files`, in order."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    records: List[bytes] = []
    for batch in tf.data.TFRecordDataset(list(input_files)).batch(_READ_BATCH):
        records.extend(batch.numpy().tolist())
    return records


def epoch_permutations(input_files: Sequence[str], seed: int, group_size: int = 0):
    """Serialized records of `input_files`, epoch after epoch, each epoch in the permutation
    `argsort(stateless_uniform([n], seed=(seed, epoch)))`: independent of how batches are later
    split, and resumable exactly mid-epoch (the iterator's state is the epoch and the index in
    it). The records are held in memory (a fine-tuning set: ~0.6 KB per example at length 128).

    `group_size` = G > 0 (--group_by_length, G = the global batch): the permutation is then
    grouped by length (`_grouped_by_length`), still a pure function of (seed, epoch).

    Raises:
      InputError: the files hold no record.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    records = _read_records(input_files)
    if not records:
        raise InputError(f"{', '.join(input_files)}: no training records")
    table = tf.constant(records)
    n = len(records)
    lengths = tf.constant(record_sequence_lengths(records)) if group_size else None

    def epoch(e):
        key = tf.stack([tf.constant(seed, tf.int64), e])
        order = tf.argsort(tf.random.stateless_uniform([n], seed=key))
        if group_size:
            order = _grouped_by_length(order, lengths, group_size, key, e)
        return tf.data.Dataset.from_tensor_slices(order)

    d = tf.data.Dataset.range(2 ** 62).flat_map(epoch)
    return d.map(lambda i: tf.gather(table, i))


# Hugging Face's `group_by_length` (LengthGroupedSampler): mega-batches of up to 50 batches.
MEGA_BATCHES = 50


def _grouped_by_length(order, lengths, batch: int, key, epoch):
    """One epoch's permutation `order` grouped by length, as Hugging Face's `group_by_length`:
    cut into mega-batches of up to MEGA_BATCHES batches (fewer on a small set, at least 4
    mega-batches when possible), each sorted by length (longest first, stable), cut into
    batches, and the batches shuffled by the epoch's key.

    The stream runs on across epochs, so the cuts follow the global batches: the first
    `(-epoch * n) mod batch` records of the epoch complete the batch the previous epoch began
    (left in place), every later full batch is one group, the tail begins the next one.

    Args:
      order: int32 Tensor [n], the epoch's permutation of the records.
      lengths: int32 Tensor [n], each record's length (`record_sequence_lengths`).
      batch: Python int, the records of one global batch.
      key: int64 Tensor [2], the epoch's seed (seed, epoch).
      epoch: int64 scalar Tensor.

    Returns:
      int32 Tensor [n], a permutation of `order`.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    n = int(order.shape[0])
    mega = batch * max(1, min(MEGA_BATCHES, n // (4 * batch)))
    head = tf.cast(tf.math.floormod(-epoch * n, batch), tf.int32)
    position = tf.range(n) - head
    longest = tf.reduce_max(lengths) + 1
    # Head first (its group is -1), then the mega-batches in turn, each longest first.
    group = tf.where(position < 0, -1, position // mega)
    order = tf.gather(order, tf.argsort(group * longest + longest - 1 - tf.gather(lengths, order),
                                        stable=True))
    num_batches = (n - head) // batch
    batches = tf.reshape(order[head:head + num_batches * batch], [num_batches, batch])
    shuffle = tf.argsort(tf.random.stateless_uniform(
        [num_batches], seed=tf.random.experimental.stateless_fold_in(key, 1)))
    return tf.concat([order[:head], tf.reshape(tf.gather(batches, shuffle), [-1]),
                      order[head + num_batches * batch:]], 0)


def record_sequence_lengths(records: Sequence[bytes]):
    """int32 array [n]: each serialized record's length (its last `input_mask` position + 1)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    masks = tf.io.parse_example(tf.constant(list(records)), {
        "input_mask": tf.io.RaggedFeature(tf.int64)})["input_mask"]
    return np.asarray(sequence_lengths(masks.to_tensor()), np.int32)


def sequence_lengths(input_mask):
    """int32 Tensor [batch]: the real length of each row of `input_mask` [batch, length] (the
    last position whose mask is not 0, + 1; BERT's masks are a prefix of ones)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    positions = tf.range(1, tf.shape(input_mask)[1] + 1)
    return tf.reduce_max(tf.where(input_mask > 0, positions, 0), axis=1)


def trimmed_length(input_mask, multiple: int) -> int:
    """The length a batch is cut to: its longest sequence rounded up to `multiple`, at most the
    padded length (so at most ceil(length / multiple) shapes). `input_mask`: [batch, ...,
    length], the sequence axis last (e.g. [batch, choices, length])."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    padded = int(input_mask.shape[-1])
    longest = int(tf.reduce_max(sequence_lengths(tf.reshape(input_mask, [-1, padded]))))
    return min(padded, max(1, -(-longest // multiple)) * multiple)


def dropout_layout_length(input_files: Sequence[str], max_seq_length: int,
                          multiple: int) -> int:
    """The length dropout lays its masks out in for a fine-tuning run on `input_files`: the
    longest record rounded up to `multiple` (as `trimmed_length` rounds a batch), at most
    `max_seq_length`. Every training batch, trimmed or padded, then draws the masks of this
    layout on its real tokens, so --pad_to_longest cannot change them, and sentences far
    shorter than --max_seq_length do not pay for drawing the padding's (modeling.DropoutStream).
    Reads the records once (a fine-tuning set; the training input holds them in memory too).
    """
    records = _read_records(input_files)
    if not records:
        return max_seq_length
    longest = int(record_sequence_lengths(records).max())
    return min(max_seq_length, max(1, -(-longest // max(1, multiple))) * max(1, multiple))


def trim_padding(batch: Mapping, multiple: int,
                 sequence_features: AbstractSet[str] = features.SEQUENCE_FEATURES) -> dict:
    """A batch cut to `trimmed_length`: the padding past its longest example dropped from the
    sequence features; called eagerly on each batch.

    Args:
      batch: dict of Tensors [batch, ...] with `input_mask` [batch, length] (or [batch, ...,
        length]: the sequence axis is the last one, which is cut in every sequence feature).
      multiple: Python int >= 1.
      sequence_features: the names of the features with that sequence axis (default: those of
        the classifier records; a tagging record's per-token labels too, ner_data).
    """
    length = trimmed_length(batch["input_mask"], multiple)
    if length == batch["input_mask"].shape[-1]:
        return dict(batch)
    return {name: t[..., :length] if name in sequence_features else t
            for name, t in batch.items()}


# Evaluation/prediction batches sorted by length carry each example's index in the files.
EXAMPLE_INDEX = "example_index"


def length_sorted_dataset(input_files: Sequence[str], shapes: Mapping[str, int],
                          batch_size: int):
    """Evaluation/prediction batches of similar lengths: every record once, in the order of
    their lengths (stable), each with its index in the files (`EXAMPLE_INDEX`, int32 [batch]),
    so that outputs are put back in file order (`Trainer.predict`), and with the weight of its
    batch in file order (`features.FILE_BATCH_WEIGHT`, float32 [batch]; the Estimator's
    `loss`, see tasks/base.py). In memory, as training's `epoch_permutations`. An empty file gives
    no batch.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    records = _read_records(input_files)
    if not records:
        return prefetched(tf.data.TFRecordDataset(list(input_files)).batch(batch_size).map(
            lambda s: features.parse_example(s, shapes)))
    order = np.argsort(record_sequence_lengths(records), kind="stable").astype(np.int32)
    n = len(records)
    last = n - (n - 1) // batch_size * batch_size  # the file's last batch, maybe partial
    weights = np.where(order >= n - last, 1.0 / last, 1.0 / batch_size).astype(np.float32)
    d = tf.data.Dataset.from_tensor_slices((tf.gather(tf.constant(records), order), order,
                                            weights))

    def parse(serialized, index, weight):
        return dict(features.parse_example(serialized, shapes),
                    **{EXAMPLE_INDEX: index, features.FILE_BATCH_WEIGHT: weight})

    return prefetched(d.batch(batch_size).map(parse))


# ---------------------------------------------------------------------------------------------
# Dynamic masking (run_pretraining.py --dynamic_masking)

# Folded into (random_seed, stream) so that the masks' random numbers are not the ones another
# user of (random_seed, index) draws (e.g. dropout keyed by position).
_MASKING_STREAM = 0x6D61736B  # "mask"


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
    """How unmasked records (create_pretraining_data.py --dynamic_masking) are masked.

    The rule is create_pretraining_data.py's (Google's): `min(max_predictions_per_seq,
    max(1, round(length * masked_lm_prob)))` predictions among the tokens that are not [CLS],
    [SEP] or padding, each replaced by [MASK] (80%), kept (10%) or a random word of the
    vocabulary (10%); whole-word masking takes whole `word_starts` groups (a group that would
    exceed the budget is skipped); span masking one contiguous run of whole words within a
    segment, grown right then left, replaced as a whole (SpanBERT). The draws are not Python's
    but a stateless generator's keyed by (seed, example index).
    """
    max_seq_length: int
    max_predictions_per_seq: int
    masked_lm_prob: float
    vocab_size: int  # random words are ids in [0, vocab_size)
    mask_id: int
    cls_id: int
    sep_id: int
    seed: int
    whole_word: bool = False
    span: bool = False
    span_length: int = 0  # span masking: words per span, 0 = fill the budget
    document_ids: bool = False  # packed records' `document_ids`, passed through unchanged

    @property
    def shapes(self):
        shapes = features.dynamic_pretraining_shapes(self.max_seq_length)
        if self.document_ids:
            shapes[features.DOCUMENT_IDS] = self.max_seq_length
        return shapes

    @classmethod
    def from_vocab(cls, vocab_file: str, **rule) -> "DynamicMasking":
        """The rule with the special ids and the random words' range of `vocab_file`
        (run_pretraining.py --dynamic_masking's --vocab_file).

        Raises:
          ValueError: the vocabulary lacks [MASK], [CLS] or [SEP], naming it.
        """
        if tokenization.is_tokenizer_json(vocab_file):
            # ModernBERT's tokenizer.json: ids 0..N-1, added (special) tokens included.
            vocab = tokenization.BpeTokenizer(vocab_file).vocab
            size = max(vocab.values()) + 1
        else:
            vocab = tokenization.load_vocab(vocab_file)
            size = len(vocab)
        missing = [t for t in ("[MASK]", "[CLS]", "[SEP]") if t not in vocab]
        if missing:
            raise ValueError(f"--vocab_file {vocab_file} has no {', '.join(missing)} token "
                             f"(--dynamic_masking needs them)")
        return cls(vocab_size=size, mask_id=vocab["[MASK]"], cls_id=vocab["[CLS]"],
                   sep_id=vocab["[SEP]"], **rule)


def check_masking_mode(input_files: Sequence[str], dynamic: bool) -> None:
    """Checks that the first record of each file is unmasked iff `dynamic`.

    Raises:
      InputError: one line naming the file and the flag to change.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    for path in input_files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError:
            continue  # check_record_lengths names the unreadable file
        if first is None:
            continue
        names = features.record_lengths(first.numpy())
        if dynamic and features.WORD_STARTS not in names and "masked_lm_positions" in names:
            raise InputError(f"{path}: records are masked already (made without "
                             f"create_pretraining_data.py --dynamic_masking); run without "
                             f"--dynamic_masking")
        if not dynamic and features.WORD_STARTS in names and "masked_lm_positions" not in names:
            raise InputError(f"{path}: records are unmasked (create_pretraining_data.py "
                             f"--dynamic_masking); pass --dynamic_masking=true")


def records_have_document_ids(input_files: Sequence[str]) -> bool:
    """Whether the records carry `document_ids` (create_pretraining_data.py --pack_sequences
    --document_ids), read from the first record of each file.

    Raises:
      InputError: some files have the feature and others not, naming the first that differs.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    seen = {}
    for path in input_files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError:
            continue  # check_record_lengths names the unreadable file
        if first is not None:
            seen[path] = features.DOCUMENT_IDS in features.record_lengths(first.numpy())
    if len(set(seen.values())) > 1:
        first_path = next(iter(seen))
        odd = next(p for p, has in seen.items() if has != seen[first_path])
        raise InputError(f"{odd}: records {'with' if seen[odd] else 'without'} document_ids, "
                         f"unlike {first_path}'s: make every file with the same "
                         f"create_pretraining_data.py --document_ids")
    return any(seen.values())


def _masked(serialized, masking: DynamicMasking, stride: int = 1, offset: int = 0):
    """Masked feature dicts of a stream of serialized unmasked records; record i of the stream
    is masked with key `i * stride + offset`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    shapes = masking.shapes

    def mask_one(i, record):
        return mask_example(features.parse_example(record, shapes), i * stride + offset,
                            masking)

    return serialized.enumerate().map(mask_one, num_parallel_calls=tf.data.AUTOTUNE,
                                      deterministic=True)


def mask_example(record: Mapping, index, masking: DynamicMasking):
    """Masks one parsed unmasked record.

    Args:
      record: name -> int32 Tensor, `DynamicMasking.shapes` (one example, not a batch).
      index: int64 scalar, the example's key (its index in the input stream).
      masking: the rule.

    Returns:
      dict of Google's 7 pretraining features (`features.pretraining_shapes`), int32 except
      `masked_lm_weights` (float32): `input_ids` with the masked tokens replaced, the sorted
      `masked_lm_positions`, their original `masked_lm_ids`, weights 1.0, padded with 0.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    m = masking
    length, preds = m.max_seq_length, m.max_predictions_per_seq
    ids = record["input_ids"]
    real = record["input_mask"] > 0
    candidates = real & tf.not_equal(ids, m.cls_id) & tf.not_equal(ids, m.sep_id)
    n = tf.reduce_sum(tf.cast(real, tf.int32))
    # Python's round() of the float64 product, as create_pretraining_data.py (half to even).
    budget = tf.cast(tf.round(tf.cast(n, tf.float64) * m.masked_lm_prob), tf.int32)
    budget = tf.minimum(preds, tf.maximum(1, budget))
    key = tf.random.experimental.stateless_fold_in(
        tf.constant([m.seed, _MASKING_STREAM], tf.int64), tf.cast(index, tf.int64))
    pick_key, replace_key, word_key = tf.unstack(
        tf.random.experimental.stateless_split(key, 3))
    chosen, to_mask, to_keep = _masking_choice(record, candidates, budget, m, pick_key,
                                               replace_key)
    random_words = tf.random.stateless_uniform([length], seed=word_key, minval=0,
                                               maxval=m.vocab_size, dtype=tf.int32)
    replaced = tf.where(to_mask, m.mask_id, tf.where(to_keep, ids, random_words))
    positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)  # ascending
    k = tf.shape(positions)[0]
    pad = [[0, preds - k]]
    return {
        "input_ids": tf.where(chosen, replaced, ids),
        "input_mask": record["input_mask"],
        "segment_ids": record["segment_ids"],
        "masked_lm_positions": tf.ensure_shape(tf.pad(positions, pad), [preds]),
        "masked_lm_ids": tf.ensure_shape(tf.pad(tf.gather(ids, positions), pad), [preds]),
        "masked_lm_weights": tf.ensure_shape(tf.pad(tf.ones([k], tf.float32), pad), [preds]),
        "next_sentence_labels": record["next_sentence_labels"],
        **({features.DOCUMENT_IDS: record[features.DOCUMENT_IDS]} if m.document_ids else {}),
    }


def _masking_choice(record, candidates, budget, m: DynamicMasking, pick_key, replace_key):
    """`mask_example`'s draws: (chosen, to_mask, to_keep), bool Tensors [max_seq_length]: the
    positions masked, and of those the ones that become [MASK] (80%), else kept (half of the
    rest) or a random word. A span takes one decision for all its tokens (SpanBERT)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    length = m.max_seq_length
    if m.span:
        chosen = _span_choice(candidates, record[features.WORD_STARTS] > 0, budget, pick_key,
                              m.span_length, length)
        decision = tf.random.stateless_uniform([2], seed=replace_key)
        return chosen, tf.fill([length], decision[0] < 0.8), tf.fill([length], decision[1] < 0.5)
    if m.whole_word:
        chosen = _whole_word_choice(candidates, record[features.WORD_STARTS] > 0, budget,
                                    pick_key, length)
    else:
        keys = tf.where(candidates, tf.random.stateless_uniform([length], seed=pick_key), 2.0)
        order = tf.argsort(keys, stable=True)
        k = tf.minimum(budget, tf.reduce_sum(tf.cast(candidates, tf.int32)))
        chosen = tf.scatter_nd(order[:k, None], tf.ones([k], tf.bool), [length])
    decision = tf.random.stateless_uniform([2, length], seed=replace_key)
    return chosen, decision[0] < 0.8, decision[1] < 0.5


def _whole_word_choice(candidates, word_starts, budget, seed, length: int):
    """Google's whole-word selection: the groups in a random order, each taken if it still fits
    the budget. A group begins at a candidate with a word start; the candidates up to the next
    start (across [CLS]/[SEP], as Google's `##` grouping) belong to it.

    Vectorized: the groups are taken in order up to the first one that does not fit (a prefix,
    by a cumulative sum); after it, fewer than a group's tokens are left, and the loop only
    looks for the next group small enough, at most that many times.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    c = tf.cast(candidates, tf.int32)
    first = candidates & tf.equal(tf.cumsum(c), 1)
    starts = candidates & (word_starts | first)
    num_groups = tf.reduce_sum(tf.cast(starts, tf.int32))
    group = tf.where(candidates, tf.cumsum(tf.cast(starts, tf.int32)) - 1, length)
    sizes = tf.math.unsorted_segment_sum(c, group, length + 1)[:length]
    valid = tf.range(length) < num_groups
    keys = tf.where(valid, tf.random.stateless_uniform([length], seed=seed), 2.0)
    order = tf.argsort(keys, stable=True)  # groups in a random order, then the unused slots
    ordered_sizes = tf.gather(sizes, order)  # 0 for the unused slots
    taken = valid & (tf.cumsum(ordered_sizes) <= budget)
    prefix = tf.reduce_sum(tf.cast(taken, tf.int32))
    total = tf.reduce_sum(tf.where(taken, ordered_sizes, 0))
    slots = tf.range(length)

    def body(last, total, taken):
        fits = valid & (slots > last) & (ordered_sizes <= budget - total)
        nxt = tf.cast(tf.argmax(tf.cast(fits, tf.int32)), tf.int32)
        return nxt, total + ordered_sizes[nxt], taken | tf.equal(slots, nxt)

    def more(last, total, taken):
        return tf.reduce_any(valid & (slots > last) & (ordered_sizes <= budget - total))

    _, _, taken = tf.while_loop(more, body, (prefix, total, taken))
    chosen_groups = tf.scatter_nd(order[:, None], tf.cast(taken, tf.int32), [length])
    return candidates & (tf.gather(tf.concat([chosen_groups, [0]], 0), group) > 0)


def _span_choice(candidates, word_starts, budget, seed, span_length: int, length: int):
    """One contiguous span of whole words within a segment (a run of candidates between
    [CLS]/[SEP]): a uniformly drawn word, grown right while the next word fits the budget, then
    left (once the right side is blocked it stays blocked: the span only grows), up to
    `span_length` words (0 = no limit); a first word longer than the budget gives its first
    `budget` tokens (create_pretraining_data.py's span masking). Cumulative sums, no loop."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    c = tf.cast(candidates, tf.int32)
    previous = tf.concat([[False], candidates[:-1]], 0)
    segment_starts = candidates & ~previous
    starts = candidates & (word_starts | segment_starts)
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32))
    word = tf.where(candidates, tf.cumsum(tf.cast(starts, tf.int32)) - 1, length)
    sizes = tf.math.unsorted_segment_sum(c, word, length + 1)[:length]  # 0 past num_words
    segment_of_start = tf.cumsum(tf.cast(segment_starts, tf.int32)) - 1
    segments = tf.math.unsorted_segment_max(tf.where(candidates, segment_of_start, -1), word,
                                            length + 1)[:length]
    first = tf.random.stateless_uniform([], seed=seed, minval=0,
                                        maxval=tf.maximum(num_words, 1), dtype=tf.int32)
    max_words = span_length if span_length > 0 else length
    words = tf.range(length)
    ends = tf.cumsum(sizes)  # tokens of words 0..j
    before = ends - sizes    # tokens of words 0..j-1
    same = (words < num_words) & tf.equal(segments, segments[first])
    # Right: words first+1..j, a prefix since the sizes are positive.
    right = same & (words > first) & (ends - before[first] <= budget) & \
        (words - first + 1 <= max_words)
    hi = first + tf.reduce_sum(tf.cast(right, tf.int32))
    left = same & (words < first) & (ends[hi] - before <= budget) & \
        (hi - words + 1 <= max_words)
    lo = first - tf.reduce_sum(tf.cast(left, tf.int32))
    in_span = candidates & (word >= lo) & (word <= hi)
    # A first word longer than the budget: its first `budget` tokens.
    in_span &= tf.cumsum(tf.cast(in_span, tf.int32)) <= budget
    return in_span & (num_words > 0)
