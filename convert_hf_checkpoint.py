#!/usr/bin/env python
r"""Converts a Hugging Face BERT folder into Google's checkpoint layout.

Usage:
  python convert_hf_checkpoint.py --hf_model_dir=path/to/hf_bert --output_dir=path/to/google_bert \
    [--gelu=exact|tanh]

Reads config.json, model.safetensors (or pytorch_model.bin; PyTorch is not needed) and vocab.txt;
writes bert_config.json, bert_model.ckpt.{index,data-00000-of-00001} and vocab.txt, which every
script here (and Google's own code, with --gelu=tanh) takes as --bert_config_file,
--init_checkpoint and --vocab_file.

A ModernBERT folder (config.json model_type "modernbert", model.safetensors, tokenizer.json) gives
bert_config.json with ModernBERT's keys, bert_model.ckpt.* and the tokenizer files (README,
"ModernBERT").

Hugging Face's "gelu" is the exact erf form; Google's "gelu" is the tanh approximation.
--gelu=exact (default) keeps the model's numerics and writes hidden_act "gelu_exact";
--gelu=tanh writes Google's "gelu".
"""

import os
import time

from absl import logging

from bert_mgpu import cli, summary
from bert_mgpu.configs.serving import ConvertHfConfig
from bert_mgpu.scripts import run

cli.define_config_flags(ConvertHfConfig)


def main(_):
    from bert_mgpu.interop.hf_folders import convert_hf_folder
    started = time.time()
    cfg = cli.build_config(ConvertHfConfig)
    paths = convert_hf_folder(cfg.hf_model_dir, cfg.output_dir, cfg.gelu)
    for what, path in paths.items():
        logging.info("wrote %s: %s", what, path)
    out = summary.shown_path(cfg.output_dir)
    # A ModernBERT folder's tokenizer is its tokenizer.json (no vocab.txt is written).
    vocab = "tokenizer.json" if "tokenizer.json" in paths else "vocab.txt"
    summary.print_summary(
        started, [], (cfg.output_dir, summary.files_written(cfg.output_dir, started)),
        f"{os.path.join(out, 'bert_model.ckpt')} (Google's layout)", summary.command(
            "run_classifier.py", "--task_name=tsv --data_dir=YOUR_DATA --do_train --do_eval "
            "--output_dir=YOUR_OUTPUT", init_checkpoint=os.path.join(out, "bert_model.ckpt"),
            vocab_file=os.path.join(out, vocab),
            bert_config_file=os.path.join(out, "bert_config.json")))


if __name__ == "__main__":
    run(main)
