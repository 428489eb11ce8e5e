#!/usr/bin/env python
r"""Extracts pre-computed feature vectors from BERT (Google's extract_features.py, TF2).

Usage (Google's flags):
  python extract_features.py \
    --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

One example per input line; a sentence pair is written `text_a ||| text_b`.
"""

import os
import time

from bert_mgpu import cli, summary
from bert_mgpu.configs.features import ExtractFeaturesConfig
from bert_mgpu.scripts import run

cli.define_config_flags(ExtractFeaturesConfig)


def main(_):
    from bert_mgpu.data.checks import check_feature_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(ExtractFeaturesConfig, check_feature_inputs)
    from bert_mgpu.tasks.features import extract_features
    started = time.time()
    count = extract_features(cfg)
    summary.print_summary(started, [("result", f"features of {count:,} input lines")],
                          (os.path.dirname(os.path.abspath(cfg.output_file)),
                           [os.path.basename(cfg.output_file)]))


if __name__ == "__main__":
    run(main)
