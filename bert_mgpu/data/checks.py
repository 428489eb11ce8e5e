"""Checks of the files a run's flags name, at start and before TensorFlow loads: a mistyped path
costs a second, not the start-up, and is one line naming the flag and the file. The jobs read the
files again for real. Remote paths (gs://, ...) are left to the job, which reads them.
"""

import glob
import os
import re
from typing import Optional

from bert_mgpu import tokenization
from bert_mgpu.configs.base import ModelFiles
from bert_mgpu.data.file_io import is_remote
from bert_mgpu.model.bert_config import read_bert_config


class InputFileError(ValueError):
    """A file a flag names cannot be used; the message names the flag and the file."""


def check_model_files(model: ModelFiles, casing: bool = True) -> None:
    """Reads --bert_config_file (and checks --max_seq_length against it), checks that the
    vocabulary exists, fits the model's vocab_size and, with `casing`, suits --do_lower_case
    (Google's check, for the scripts that tokenize text: run_pretraining.py reads ids, its
    --vocab_file only names the special tokens, whatever the checkpoint's casing); then
    --init_checkpoint (`check_init_checkpoint`)."""
    bert_config = read_bert_config(model) if model.bert_config_file else None
    for flag in ("vocab_file", "spm_model_file"):
        path = getattr(model, flag)
        if path and not is_remote(path) and not os.path.isfile(path):
            raise InputFileError(f"--{flag}: {path} not found")
    flag = "spm_model_file" if model.spm_model_file else "vocab_file"
    path = getattr(model, flag)
    if bert_config is not None and path and not is_remote(path):
        if model.spm_model_file:
            import sentencepiece  # pylint: disable=import-outside-toplevel
            size = sentencepiece.SentencePieceProcessor(model_file=path).GetPieceSize()
        elif tokenization.is_tokenizer_json(path):
            size = len(tokenization.BpeTokenizer(path).vocab)
        else:
            size = len(tokenization.load_vocab(path))
        if size > bert_config.vocab_size:
            raise InputFileError(f"--{flag}: {path} has {size} tokens, more than vocab_size "
                                 f"{bert_config.vocab_size} in {model.bert_config_file} (ids "
                                 f"past the embedding table)")
    if casing and (model.vocab_file or model.spm_model_file):
        tokenization.validate_case_matches_checkpoint(model.do_lower_case,
                                                      model.init_checkpoint)
    check_init_checkpoint(model.init_checkpoint)


def check_init_checkpoint(path: Optional[str]) -> None:
    """Raises InputFileError when the local --init_checkpoint names no checkpoint: a prefix
    without its `.index`, a bundle file or a directory that does not exist (at start, before
    features are written; a directory's content and remote paths are read by the job)."""
    if not path or is_remote(path) or os.path.isdir(path):
        return
    match = re.match(r"^(.*)\.(index|meta|data-\d{5}-of-\d{5})$", path)
    prefix = match.group(1) if match else path
    if not os.path.exists(prefix + ".index"):
        raise InputFileError(f"--init_checkpoint: {path}: no checkpoint there (expected "
                             f"{prefix}.index and {prefix}.data-*)")


def _has_checkpoint(output_dir: str) -> bool:
    """Whether the trainer would resume from `output_dir` (remote: assumed, checked later)."""
    if is_remote(output_dir):
        return True
    return os.path.isfile(os.path.join(output_dir, "checkpoint")) or \
        bool(glob.glob(os.path.join(glob.escape(output_dir), "model.ckpt-*.index")))


def check_weights_to_evaluate(cfg, do_predict: bool = False) -> None:
    """--do_eval/--do_predict without --do_train evaluate the checkpoint in --output_dir, else
    --init_checkpoint: with neither, the model would be random weights (a plausible-looking
    result of nothing). Refused in one line (`cfg`: a training job's config)."""
    if cfg.do_train or cfg.model.init_checkpoint or cfg.allow_random_weights or \
            _has_checkpoint(cfg.output_dir):
        return
    what = "/".join(f"--{name}" for name, on in (("do_eval", cfg.do_eval),
                                                 ("do_predict", do_predict)) if on)
    raise InputFileError(f"{what} without --do_train: no checkpoint in --output_dir="
                         f"{cfg.output_dir} and no --init_checkpoint, so the model would have "
                         f"random weights; train first (--do_train), give --init_checkpoint, "
                         f"or pass --allow_random_weights to run an untrained model on purpose")


def check_training_job(cfg, do_predict: bool = False) -> None:
    """The model files of a training job's config `cfg` and the weights its evaluation or
    prediction would use (`do_predict`: the job predicts)."""
    check_model_files(cfg.model)
    check_weights_to_evaluate(cfg, do_predict)


def check_input_text_file(flag: str, path: Optional[str]) -> None:
    """Raises InputFileError unless the local file `path` of `--flag` exists and is not empty
    (remote paths are checked when read)."""
    if not path or is_remote(path):
        return
    if not os.path.exists(path):
        raise InputFileError(f"--{flag}: {path} not found")
    if os.path.isdir(path):
        raise InputFileError(f"--{flag}: {path} is a directory, not a text file")
    if os.path.getsize(path) == 0:
        raise InputFileError(f"--{flag}: {path} is empty (one example per line expected)")


def check_feature_inputs(cfg) -> None:
    """extract_features.py's files at start (`cfg`: an ExtractFeaturesConfig): its input text
    and the model files."""
    check_input_text_file("input_file", cfg.input_file)
    check_model_files(cfg.model)


def tokenizer_for(model: ModelFiles):
    """The tokenizer of `model`'s vocabulary (or SentencePiece model) and casing, after
    Google's check that the casing suits a released checkpoint (the script's config builder
    has checked the files against the model: `check_model_files`): a `FullTokenizer`, or a
    `BpeTokenizer` when --vocab_file is a Hugging Face tokenizer.json (ModernBERT's)."""
    if model.vocab_file and tokenization.is_tokenizer_json(model.vocab_file):
        return tokenization.BpeTokenizer(model.vocab_file)
    tokenization.validate_case_matches_checkpoint(model.do_lower_case, model.init_checkpoint)
    return tokenization.FullTokenizer(model.vocab_file, model.do_lower_case,
                                      spm_model_file=model.spm_model_file)
