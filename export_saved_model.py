#!/usr/bin/env python
"""Exports a trained model as a SavedModel that takes raw text (TF Serving's layout).

Usage:
  python export_saved_model.py --output_dir=path/to/classifier_run --export_dir=path/to/export
  python export_saved_model.py --bert_config_file=... --init_checkpoint=... --vocab_file=... \
    --do_lower_case=true --max_seq_length=128 --task=features --export_dir=path/to/export
  python export_saved_model.py --output_dir=path/to/squad_run --task=squad --export_dir=...
  python export_saved_model.py --output_dir=path/to/classifier_run --export_dir=... --quantize=int8

From --output_dir of a run it reads the checkpoint its --do_predict used (the kept best one of a
--keep_best_checkpoint run, else the latest), bert_config.json and run_config.json
(vocabulary, casing, max_seq_length, truncation, the label names, a classifier's --doc_stride
and --window_pooling, and run_squad.py's window and answer flags); explicit flags win. Writes
EXPORT_DIR/<version>/{saved_model.pb, variables/, assets/vocab.txt} with the signatures
serving_default (text_a), serving_pair (text_a, text_b), tokenize, tokenize_pair and serve_ids
(a --doc_stride run: each text read in windows, pooled per text); --task=squad:
serving_default (question, context -> answer), tokenize and serve_ids (see
bert_mgpu/serving/export.py); --quantize=int8: a LiteRT int8 model beside a SavedModel holding
the tokenizer, served by `python -m bert_mgpu.serving.int8_runner EXPORT_DIR/1 "a text"` (see
bert_mgpu/serving/int8.py). Loading the SavedModel needs tensorflow and tensorflow-text only:

  import tensorflow as tf, tensorflow_text  # tensorflow_text registers the tokenizer's ops
  model = tf.saved_model.load("path/to/export/1")
  model.signatures["serving_default"](text_a=tf.constant(["a raw sentence"]))
"""

import os
import time

from absl import logging

from bert_mgpu import cli, summary
from bert_mgpu.configs.serving import ExportConfig
from bert_mgpu.scripts import run

cli.define_config_flags(ExportConfig)


def main(_):
    cfg = cli.build_config(ExportConfig)  # every flag and file checked before TensorFlow is loaded
    from bert_mgpu.serving.export import export_saved_model
    started = time.time()
    path = export_saved_model(cfg)
    logging.info("SavedModel: %s", path)
    print(path)
    summary.print_summary(
        started, [("result", f"a SavedModel taking raw text (--task={cfg.task})")],
        (path, sorted(os.listdir(path))), None,
        "saved_model_cli show --all --dir " + summary.shown_path(path))


if __name__ == "__main__":
    run(main)
