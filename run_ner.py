#!/usr/bin/env python
r"""BERT fine-tuning for token classification (NER) on CoNLL files, with in-graph towers.

Usage:
  python run_ner.py --data_dir=$DATA_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=false \
    --do_train=true --do_eval=true --do_predict=true --max_seq_length=128 \
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=$OUT --n_gpus=2

$DATA_DIR holds train.txt, dev.txt and test.txt: one token per line with its tag in the last
column (BIO, IOB1 or BIOES; any types), a blank line between sentences, -DOCSTART- lines
skipped. The label of a word is on its first WordPiece; long sentences are split into windows
(--doc_stride) that cover every token. Writes eval_results.txt (conlleval's entity
eval_precision/eval_recall/eval_f1, eval_accuracy, per type; --do_eval) and predictions.txt
(token, gold tag, predicted tag per line, every test token; --do_predict) in --output_dir.
--train_batch_size is per tower.
"""

from bert_mgpu import cli
from bert_mgpu.configs.ner import NerConfig
from bert_mgpu.scripts import run

cli.define_config_flags(NerConfig)


def main(_):
    from bert_mgpu.data.ner_data import check_ner_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(NerConfig, check_ner_inputs)
    from bert_mgpu.tasks.ner import run_ner
    run_ner(cfg)


if __name__ == "__main__":
    run(main)
