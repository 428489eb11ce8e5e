"""Name-based TensorFlow checkpoints in Google's BERT layout.

A checkpoint is a TF "bundle": `PREFIX.index` plus `PREFIX.data-00000-of-00001` (TF1 tools also
wrote `PREFIX.meta`, which nothing here needs), with tensors keyed by Google's variable names
(`bert/embeddings/word_embeddings`, `bert/.../adam_m`, `global_step`, ...). That is the format of
Google's released `bert_model.ckpt` and of every `model.ckpt-STEP` written by Google's scripts, so
`tf.train.load_checkpoint`, `tf.train.list_variables`, `tf.train.latest_checkpoint` and Google's
own code read what we write, and we read theirs. Nothing here knows BERT's structure: everything
works on a mapping of checkpoint name -> `tf.Variable` (or tensor).

Crash safety of `save_checkpoint` (one writer per output directory, as TF's savers assume):

1. The bundle is written with `tf.raw_ops.SaveV2` under a temporary prefix inside a hidden
   directory `OUTPUT_DIR/.tmp-ckpt-<random>/`, then fsynced.
2. If that step was saved before, it is first removed from the state file, then its files are
   deleted (index first).
3. The data file(s) are renamed into place, then the index: an `.index` next to its data means the
   data is complete.
4. The `checkpoint` state file is rewritten through a temporary file and an atomic rename.
5. Checkpoints beyond `keep_checkpoint_max` are deleted, after the state file stops naming them.

So whenever the process dies, the state file names only complete checkpoints; leftovers are an
ignored hidden directory (removed by the next save) or unlisted orphan files. `latest_checkpoint`
additionally checks that what the state file names is readable and falls back to the previous
entry otherwise (for files damaged by other tools or a full disk).
"""

import codecs
import dataclasses
import json
import os
import re
import uuid
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf
from absl import logging as absl_logging

CHECKPOINT_STATE_FILE = "checkpoint"
_TMP_DIR_PREFIX = ".tmp-ckpt-"
_DATA_SUFFIX_RE = re.compile(r"\.data-(\d{5})-of-(\d{5})$")
_BUNDLE_FILE_RE = re.compile(r"^(.*)\.(index|meta|data-\d{5}-of-\d{5})$")
_STEP_PREFIX_RE = re.compile(r"^model\.ckpt-(\d+)$")
_STATE_LINE_RE = re.compile(r'^\s*(\w+)\s*:\s*"((?:[^"\\]|\\.)*)"\s*$')

TensorLike = Union[tf.Variable, tf.Tensor, np.ndarray]


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model; the message names the checkpoint and variables."""


class CheckpointNotFoundError(FileNotFoundError):
    """No checkpoint at the given path; the message names the path."""


# -- small file helpers ----------------------------------------------------------------------

def _is_local(path: str) -> bool:
    return "://" not in path


def _fsync_file(path: str) -> None:
    # Renames are only crash-safe (power loss) if the renamed bytes reached the disk first.
    if _is_local(path):
        with open(path, "rb") as f:
            os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    if not _is_local(path):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # Some file systems cannot fsync a directory; the rename still happened.
        pass
    finally:
        os.close(fd)


def _rename(src: str, dst: str) -> None:
    """Atomic on a local file system (rename(2)); tests replace it to simulate crashes."""
    tf.io.gfile.rename(src, dst, overwrite=True)


def _rmtree(path: str) -> None:
    """Removes a temporary directory; tests replace it to simulate a killed process."""
    tf.io.gfile.rmtree(path)


def _data_files(prefix: str) -> List[str]:
    """The existing `PREFIX.data-XXXXX-of-YYYYY` files, sorted."""
    found = tf.io.gfile.glob(prefix + ".data-*-of-*")
    return sorted(f for f in found
                  if f.startswith(prefix) and _DATA_SUFFIX_RE.fullmatch(f[len(prefix):]))


def _bundle_files(prefix: str) -> List[str]:
    """Every existing file of the bundle, index first (deleting it first marks it unreadable)."""
    files = [prefix + ".index"] if tf.io.gfile.exists(prefix + ".index") else []
    files += _data_files(prefix)
    if tf.io.gfile.exists(prefix + ".meta"):
        files.append(prefix + ".meta")
    return files


def _delete_bundle(prefix: str) -> None:
    for path in _bundle_files(prefix):
        try:
            tf.io.gfile.remove(path)
        except tf.errors.NotFoundError:
            pass


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- readability -----------------------------------------------------------------------------

def _bundle_problem(prefix: str) -> Optional[str]:
    """Why the bundle at `prefix` cannot be read, or None when it can.

    Opening the index does not touch the data files, so this also checks that every data shard
    exists and that together they are at least as large as the fixed-size tensors the index lists
    (TF writes them unpadded): a missing or truncated data file is caught here, not mid-restore.
    """
    if not tf.io.gfile.exists(prefix + ".index"):
        return "no .index file"
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except Exception as e:  # TF raises OpError, ValueError or IndexError depending on the damage.
        return f"unreadable index ({_first_line(e)})"
    data = _data_files(prefix)
    if not data:
        return "no .data file" if shapes else None
    num_shards = int(_DATA_SUFFIX_RE.search(data[0]).group(2))
    wanted = [f"{prefix}.data-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    missing = [f for f in wanted if f not in data]
    if missing:
        return f"missing {os.path.basename(missing[0])}"
    needed = sum(int(np.prod(shapes[name], dtype=np.int64)) * dtypes[name].size
                 for name in shapes if dtypes[name] != tf.string)
    present = sum(tf.io.gfile.stat(f).length for f in wanted)
    if present < needed:
        return f"data file(s) hold {present} bytes, the index needs {needed} (truncated)"
    return None


# -- the `checkpoint` state file -------------------------------------------------------------

def _read_state(output_dir: str) -> Tuple[Optional[str], List[str]]:
    """(model_checkpoint_path, all_model_checkpoint_paths) as written (possibly relative).

    Parsed by hand rather than through `tf.train.get_checkpoint_state` so that a damaged line does
    not hide the rest; keys other than these two (e.g. TF's timestamps) are ignored.
    """
    path = os.path.join(output_dir, CHECKPOINT_STATE_FILE)
    if not tf.io.gfile.exists(path):
        return None, []
    with tf.io.gfile.GFile(path, "r") as f:
        text = f.read()
    newest, listed = None, []
    for line in text.splitlines():
        match = _STATE_LINE_RE.match(line)
        if not match:
            continue
        value = codecs.escape_decode(match.group(2).encode("utf-8"))[0].decode("utf-8")
        if match.group(1) == "model_checkpoint_path":
            newest = value
        elif match.group(1) == "all_model_checkpoint_paths":
            listed.append(value)
    return newest, listed


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_state(output_dir: str, tmp_dir: str, listed: Sequence[str]) -> None:
    """Atomically replaces the state file: newest = the last of `listed` (oldest first)."""
    lines = []
    if listed:
        lines.append(f"model_checkpoint_path: {_quote(listed[-1])}")
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in listed]
    tmp = os.path.join(tmp_dir, CHECKPOINT_STATE_FILE)
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    _fsync_file(tmp)
    _rename(tmp, os.path.join(output_dir, CHECKPOINT_STATE_FILE))
    _fsync_dir(output_dir)


def _same_file(a: str, b: str) -> bool:
    if _is_local(a) and _is_local(b):
        return os.path.abspath(a) == os.path.abspath(b)
    return a == b


def _resolve_in_dir(output_dir: str, path: str) -> str:
    # As TF: relative entries are relative to the directory holding the state file.
    if os.path.isabs(path) or not _is_local(path):
        return path
    return os.path.join(output_dir, path)


# -- writing ---------------------------------------------------------------------------------

def _write_temp_bundle(tmp_dir: str, basename: str,
                       named_tensors: Mapping[str, TensorLike]) -> str:
    """Writes the bundle under `tmp_dir/basename` with SaveV2 and fsyncs it; returns the prefix."""
    if not named_tensors:
        raise ValueError(f"nothing to save in {basename}: named_tensors is empty")
    names = list(named_tensors)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"checkpoint names must be non-empty strings, got {bad[:3]}")
    tmp_prefix = os.path.join(tmp_dir, basename)
    with tf.device("CPU:0"):
        tensors = [v.read_value() if isinstance(v, tf.Variable) else tf.convert_to_tensor(v)
                   for v in named_tensors.values()]
        # Empty shape_and_slices: whole tensors, as Google's Saver wrote them.
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                          shape_and_slices=[""] * len(names), tensors=tensors)
    for path in _bundle_files(tmp_prefix):
        _fsync_file(path)
    return tmp_prefix


def _publish_bundle(tmp_prefix: str, prefix: str) -> None:
    """Moves a complete temporary bundle to `prefix`: data file(s) first, the index last."""
    for data in _data_files(tmp_prefix):
        _rename(data, prefix + data[len(tmp_prefix):])
    _rename(tmp_prefix + ".index", prefix + ".index")
    _fsync_dir(os.path.dirname(prefix) or ".")


def _new_tmp_dir(output_dir: str) -> str:
    tmp_dir = os.path.join(output_dir, f"{_TMP_DIR_PREFIX}{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(tmp_dir)
    return tmp_dir


def _remove_tmp_dirs(output_dir: str) -> None:
    """Removes temporary directories left by saves that died (one writer per directory)."""
    for path in tf.io.gfile.glob(os.path.join(output_dir, _TMP_DIR_PREFIX + "*")):
        _rmtree(path)


def write_bundle(prefix: str, named_tensors: Mapping[str, TensorLike]) -> str:
    """Atomically writes a standalone bundle at `prefix` (no state file), e.g. `bert_model.ckpt`.

    For converters that produce Google's released layout. An existing bundle at `prefix` is
    replaced.

    Args:
      prefix: path prefix; writes `prefix.index` and `prefix.data-00000-of-00001`.
      named_tensors: checkpoint name -> `tf.Variable`, Tensor or numpy array (any dtype/shape).

    Returns:
      `prefix`.
    """
    directory = os.path.dirname(prefix) or "."
    tf.io.gfile.makedirs(directory)
    tmp_dir = _new_tmp_dir(directory)
    try:
        tmp_prefix = _write_temp_bundle(tmp_dir, os.path.basename(prefix), named_tensors)
        _delete_bundle(prefix)
        _publish_bundle(tmp_prefix, prefix)
    finally:
        _rmtree(tmp_dir)
    return prefix


def save_checkpoint(output_dir: str, step: int, named_tensors: Mapping[str, TensorLike],
                    keep_checkpoint_max: Optional[int] = 5) -> str:
    """Writes `OUTPUT_DIR/model.ckpt-STEP` and makes it the newest entry of the state file.

    Tensor names are written exactly as given (Google's variable names, `<var>/adam_m`,
    `<var>/adam_v`, `global_step` as int64, ...). Crash-safe as described in the module
    docstring. Call it from one process per `output_dir` (the chief worker).

    Args:
      output_dir: directory (created if missing); local, or any file system `tf.io.gfile` knows.
      step: int, the global step; names the checkpoint.
      named_tensors: checkpoint name -> `tf.Variable`, Tensor or numpy array.
      keep_checkpoint_max: how many checkpoints the state file keeps (oldest deleted first);
        0 or None keeps all, as Google's Saver.

    Returns:
      The checkpoint prefix, `os.path.join(output_dir, f"model.ckpt-{step}")`.
    """
    step = int(step)
    basename = f"model.ckpt-{step}"
    prefix = os.path.join(output_dir, basename)
    tf.io.gfile.makedirs(output_dir)
    _remove_tmp_dirs(output_dir)
    tmp_dir = _new_tmp_dir(output_dir)
    try:
        tmp_prefix = _write_temp_bundle(tmp_dir, basename, named_tensors)
        _, listed = _read_state(output_dir)
        # Entries naming this prefix (a step saved again) go; others are kept as written.
        others = [p for p in listed if not _same_file(_resolve_in_dir(output_dir, p), prefix)]
        if _bundle_files(prefix):
            if len(others) != len(listed):
                _write_state(output_dir, tmp_dir, others)
            _delete_bundle(prefix)
        _publish_bundle(tmp_prefix, prefix)
        kept = others + [basename]
        dropped: List[str] = []
        if keep_checkpoint_max and len(kept) > keep_checkpoint_max:
            dropped, kept = kept[:-keep_checkpoint_max], kept[-keep_checkpoint_max:]
        _write_state(output_dir, tmp_dir, kept)
    finally:
        _rmtree(tmp_dir)
    for old in dropped:
        old_prefix = _resolve_in_dir(output_dir, old)
        # Only this directory's own checkpoints: an entry may point elsewhere (older tools).
        if _same_file(os.path.dirname(old_prefix), output_dir):
            _delete_bundle(old_prefix)
    return prefix


# -- finding checkpoints ---------------------------------------------------------------------

def latest_checkpoint(output_dir: str) -> Optional[str]:
    """The newest readable checkpoint the `checkpoint` state file lists, or None.

    Like `tf.train.latest_checkpoint`, but when the newest entry is missing or unreadable (e.g.
    an older tool crashed mid-save, or the disk filled up) it logs a warning and falls back to the
    previous entry. Files not listed (temporary leftovers, orphans) are never considered.

    Args:
      output_dir: directory holding the `checkpoint` state file.

    Returns:
      str prefix joined with `output_dir` as TF returns it, or None (no state file, or nothing
      listed is readable).
    """
    newest, listed = _read_state(output_dir)
    candidates = []
    for path in ([newest] if newest else []) + listed[::-1]:
        if path not in candidates:
            candidates.append(path)
    for path in candidates:
        prefix = _resolve_in_dir(output_dir, path)
        problem = _bundle_problem(prefix)
        if problem is None:
            return prefix
        absl_logging.warning("Checkpoint %s listed in %s is unreadable (%s); trying the "
                             "previous one.", prefix,
                             os.path.join(output_dir, CHECKPOINT_STATE_FILE), problem)
    return None


def _prefixes_in_dir(directory: str) -> List[str]:
    return sorted(f[:-len(".index")]
                  for f in tf.io.gfile.glob(os.path.join(directory, "*.index")))


def resolve_checkpoint_path(path: str) -> str:
    """Turns what a user passes as `--init_checkpoint` into a checkpoint prefix.

    Accepts a prefix (`.../bert_model.ckpt`, `.../model.ckpt-100`), a file of a bundle
    (`.index`, `.data-00000-of-00001`, `.meta`), or a directory: its latest readable checkpoint
    from the state file, else its only bundle (Google's released folders have no state file),
    else its highest `model.ckpt-N`.

    Raises:
      CheckpointNotFoundError: a one-line message naming `path`.
    """
    if not path:
        raise CheckpointNotFoundError("no checkpoint path given (empty string)")
    if tf.io.gfile.isdir(path):
        found = latest_checkpoint(path)
        if found:
            return found
        prefixes = [p for p in _prefixes_in_dir(path) if _bundle_problem(p) is None]
        if len(prefixes) == 1:
            return prefixes[0]
        steps = [(int(m.group(1)), p) for p in prefixes
                 for m in [_STEP_PREFIX_RE.match(os.path.basename(p))] if m]
        if steps:
            return max(steps)[1]
        if prefixes:
            names = ", ".join(os.path.basename(p) for p in prefixes)
            raise CheckpointNotFoundError(
                f"{path}: directory holds several checkpoints ({names}) and no state file; "
                f"pass a prefix")
        raise CheckpointNotFoundError(f"{path}: no readable checkpoint in this directory")
    match = _BUNDLE_FILE_RE.match(path)
    prefix = match.group(1) if match else path
    if tf.io.gfile.exists(prefix + ".index"):
        return prefix
    raise CheckpointNotFoundError(
        f"{path}: no checkpoint there (expected {prefix}.index and {prefix}.data-*)")


def describe_weights(output_dir: str, init_checkpoint: Optional[str], global_step: int) -> str:
    """Which weights a model holds after `restore_or_initialize` (and any training), for the
    log: the newest checkpoint of `output_dir` at `global_step`, else `init_checkpoint` (a
    fine-tuned model's, with the global_step it was saved at), else random ones."""
    prefix = latest_checkpoint(output_dir)
    if prefix:
        return f"the weights of {prefix} (global_step {global_step})"
    if init_checkpoint:
        try:
            prefix = resolve_checkpoint_path(init_checkpoint)
            reader = tf.train.load_checkpoint(prefix)
            saved = (f"saved at global_step {int(reader.get_tensor('global_step'))}"
                     if reader.has_tensor("global_step") else "no global_step in it")
        except (CheckpointNotFoundError, tf.errors.OpError, ValueError):
            return f"the weights of --init_checkpoint={init_checkpoint}"
        return f"the weights of --init_checkpoint={prefix} ({saved})"
    return f"random weights (global_step {global_step})"


# -- reading into variables ------------------------------------------------------------------

def _compatible(ckpt_dtype: tf.DType, var_dtype: tf.DType) -> bool:
    # Casting between float widths (a float16/bfloat16 copy) or int widths (an int32 global_step
    # written by an older tool) is lossless enough to be what the user means; anything else is not.
    if ckpt_dtype == var_dtype:
        return True
    return ((ckpt_dtype.is_floating and var_dtype.is_floating)
            or (ckpt_dtype.is_integer and var_dtype.is_integer))


def _open(prefix: str):
    try:
        reader = tf.train.load_checkpoint(prefix)
        return reader, reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except Exception as e:
        raise CheckpointError(f"{prefix}: cannot read checkpoint ({_first_line(e)})") from None


def _assign(reader, prefix: str, name: str, var: tf.Variable) -> None:
    try:
        value = reader.get_tensor(name)
    except Exception as e:
        raise CheckpointError(f"{prefix}: cannot read {name} ({_first_line(e)})") from None
    var.assign(tf.cast(value, var.dtype))


def _mismatch_error(prefix: str, problems: List[str], what: str) -> CheckpointError:
    head = f"{len(problems)} variable(s) {what} {prefix}:"
    return CheckpointError("\n".join([head] + [f"  {p}" for p in problems]))


@dataclasses.dataclass
class RestoreReport:
    """What `restore_checkpoint` did: `restored` and (non-strict only) `missing` names."""
    checkpoint: str
    restored: List[str]
    missing: List[str]


class _Mismatch(NamedTuple):
    kind: str  # "missing", "shape" or "dtype"
    message: str


def _mismatch(name: str, var, shapes, dtypes) -> Optional[_Mismatch]:
    """Why the checkpoint's `name` cannot be assigned to `var` (None: it can), one line."""
    if name not in shapes:
        return _Mismatch("missing", f"{name}: not in the checkpoint")
    if list(shapes[name]) != var.shape.as_list():
        return _Mismatch("shape", f"{name}: shape {list(shapes[name])} in the checkpoint, "
                                  f"{var.shape.as_list()} in the model")
    if not _compatible(dtypes[name], var.dtype):
        return _Mismatch("dtype", f"{name}: dtype {dtypes[name].name} in the checkpoint, "
                                  f"{var.dtype.name} in the model")
    return None


def restore_checkpoint(prefix: str, named_variables: Mapping[str, tf.Variable],
                       strict: bool = True) -> RestoreReport:
    """Full restore (resume): assigns every given variable from the checkpoint by name.

    Args:
      prefix: a checkpoint prefix or anything `resolve_checkpoint_path` accepts.
      named_variables: checkpoint name -> `tf.Variable` (weights, `<var>/adam_m|adam_v`,
        `global_step`, ...).
      strict: when True every variable must be in the checkpoint; when False, absent ones are
        left as they are (and reported). A shape or dtype mismatch is always an error.

    Returns:
      RestoreReport. Nothing is assigned unless every check passes.

    Raises:
      CheckpointError: first line `N variable(s) cannot be restored from PREFIX:`, then one line
        per variable (not in the checkpoint / shape / dtype).
    """
    prefix = resolve_checkpoint_path(prefix)
    reader, shapes, dtypes = _open(prefix)
    problems, missing, restorable = [], [], []
    for name, var in named_variables.items():
        problem = _mismatch(name, var, shapes, dtypes)
        if problem is None:
            restorable.append(name)
        elif problem.kind == "missing":
            missing.append(name)
            if strict:
                problems.append(problem.message)
        else:
            problems.append(problem.message)
    if problems:
        raise _mismatch_error(prefix, problems, "cannot be restored from")
    for name in restorable:
        _assign(reader, prefix, name, named_variables[name])
    if missing:
        absl_logging.warning("%d variable(s) not in %s kept their values: %s", len(missing),
                             prefix, ", ".join(missing))
    return RestoreReport(checkpoint=prefix, restored=restorable, missing=missing)


@dataclasses.dataclass
class InitReport:
    """What `init_from_checkpoint` did.

    Attributes:
      checkpoint: the resolved prefix.
      initialized: model names assigned from the checkpoint.
      not_in_checkpoint: model names (outside the required prefixes) left as initialised.
      shape_mismatch: model names outside the required prefixes present with another shape, left
        as initialised (e.g. a classifier with another number of labels).
      ignored: checkpoint names no model variable asked for (`cls/...`, `.../adam_m`, ...).
    """
    checkpoint: str
    initialized: List[str]
    not_in_checkpoint: List[str]
    shape_mismatch: List[str]
    ignored: List[str]


def _log_initialisation(logger, prefix: str, named_variables, initialised, skipped,
                        shapes) -> None:
    """Google's log of an initialisation: a count, each skipped (mis-shaped optional) variable,
    then (at DEBUG level: shown with --verbose) `**** Trainable Variables ****` and one line per
    variable, tagged `*INIT_FROM_CKPT*` when it came from the checkpoint."""
    logger.info("Initialised %d of %d variables from %s", len(initialised),
                len(named_variables), prefix)
    for name in skipped:
        logger.warning("Not initialised from %s: %s has shape %s there, %s in the model", prefix,
                       name, list(shapes[name]), named_variables[name].shape.as_list())
    initialised = set(initialised)
    logger.debug("**** Trainable Variables ****")
    for name, var in named_variables.items():
        # Google printed TF1 `var.name` (with the `:0` output suffix) and `var.shape`.
        tag = ", *INIT_FROM_CKPT*" if name in initialised else ""
        logger.debug("  name = %s:0, shape = %s%s", name, tuple(var.shape.as_list()), tag)


def init_from_checkpoint(init_checkpoint: str, named_variables: Mapping[str, tf.Variable],
                         required_prefixes: Sequence[str] = ("bert/",),
                         logger=absl_logging) -> InitReport:
    """Google's fine-tuning initialisation (`get_assignment_map_from_checkpoint` +
    `tf.train.init_from_checkpoint`), with errors instead of silent gaps.

    Every model variable whose name is in the checkpoint with the same shape is assigned. A
    variable under one of `required_prefixes` that is missing or has another shape is an error.
    Variables outside them that are absent (e.g. the classifier's `output_weights`) or mis-shaped
    keep their initial values. Checkpoint entries no variable asks for (`cls/...` heads,
    `.../adam_m`, `global_step`) are ignored. Pass trainable variables, as Google did
    (`tf.trainable_variables()`), so a fine-tuning run does not inherit `global_step` or slots.

    Logs like Google's scripts (at DEBUG level, the scripts' --verbose): `**** Trainable
    Variables ****`, then per variable `  name = NAME:0, shape = (d0, d1), *INIT_FROM_CKPT*`
    (the tag only when initialised).

    Args:
      init_checkpoint: a prefix, bundle file or directory (see `resolve_checkpoint_path`).
      named_variables: Google-style name -> `tf.Variable`.
      required_prefixes: name prefixes that must all come from the checkpoint.
      logger: object with `info`, `warning` and `debug` (absl logging by default).

    Returns:
      InitReport.

    Raises:
      CheckpointNotFoundError: nothing at `init_checkpoint`.
      CheckpointError: first line `N variable(s) required from the checkpoint are missing or
        mis-shaped in PREFIX:`, then one line per variable. Nothing is assigned in that case.
    """
    prefix = resolve_checkpoint_path(init_checkpoint)
    reader, shapes, dtypes = _open(prefix)

    def required(name):
        return any(name.startswith(p) for p in required_prefixes)

    problems, to_assign, absent, skipped = [], [], [], []
    for name, var in named_variables.items():
        problem = _mismatch(name, var, shapes, dtypes)
        if problem is None:
            to_assign.append(name)
        elif problem.kind == "dtype" or required(name):
            problems.append(problem.message)
        else:  # an optional variable the checkpoint lacks or holds in another shape
            (absent if problem.kind == "missing" else skipped).append(name)
    if problems:
        raise _mismatch_error(prefix, problems,
                              "required from the checkpoint are missing or mis-shaped in")

    for name in to_assign:
        _assign(reader, prefix, name, named_variables[name])

    _log_initialisation(logger, prefix, named_variables, to_assign, skipped, shapes)
    used = set(named_variables)
    ignored = sorted(n for n in shapes if n not in used)
    return InitReport(checkpoint=prefix, initialized=to_assign, not_in_checkpoint=absent,
                      shape_mismatch=skipped, ignored=ignored)


# What engine/evaluation.py writes in a run's output directory when it keeps the best model:
# `checkpoint = best/model.ckpt-STEP` among `key = value` lines.
BEST_FILE = "best_checkpoint.txt"


def best_checkpoint(output_dir: str) -> Optional[str]:
    """The prefix of the kept best model of a run (--keep_best_checkpoint), or None."""
    path = os.path.join(output_dir, BEST_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        fields = dict(line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)
    prefix = os.path.join(output_dir, fields.get("checkpoint", ""))
    return prefix if tf.io.gfile.exists(prefix + ".index") else None


def prediction_checkpoint(output_dir: str) -> Tuple[Optional[str], str]:
    """The checkpoint of a run that its `--do_predict` used, so an export or a later predict
    serves the same model: the kept best one when the run's last invocation had
    --keep_best_checkpoint and one was kept (engine/job.py `Job.weights_for_prediction`), else
    the latest. Returns (prefix or None when the run has none, which one in words)."""
    best = best_checkpoint(output_dir)
    if best is not None and read_run_config(output_dir).get("keep_best_checkpoint"):
        return best, "the best checkpoint (--keep_best_checkpoint)"
    return latest_checkpoint(output_dir), "the latest checkpoint"


def read_run_config(run_dir: str) -> dict:
    """`run_dir`/run_config.json, the flags a training job saved beside its checkpoints
    (engine/job.py `Job.save_effective_config`), as a dict ({} when there is none): what an
    export or a conversion of the run reads back.

    Raises:
      ValueError: the file is not JSON (naming file and line).
    """
    path = os.path.join(run_dir, "run_config.json")
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
