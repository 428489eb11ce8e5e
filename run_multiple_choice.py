#!/usr/bin/env python
r"""BERT fine-tuning for multiple choice (SWAG's CSV files), with in-graph towers.

Usage:
  python run_multiple_choice.py --data_dir=$SWAG_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=true \
    --do_train=true --do_eval=true --do_predict=true --max_seq_length=80 \
    --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=3 --output_dir=$OUT --n_gpus=2

$SWAG_DIR holds SWAG's train.csv, val.csv (or dev.csv) and test.csv: a header row naming the
columns, the context in sent1, each choice `sent2 + " " + ending<i>` (i < --num_choices), the
right ending's index in label (may be empty in test.csv); other columns are ignored. Each
choice is one `[CLS] context [SEP] choice [SEP]` sequence padded to --max_seq_length. Writes
eval_results.txt (eval_accuracy, eval_loss; --do_eval), test_results.tsv (each choice's
probability, one row per example) and predict.txt (the predicted choice index, one line per
example, every example; --do_predict) in --output_dir. --train_batch_size is per tower and
counts examples (each of --num_choices sequences).
"""

from bert_mgpu import cli
from bert_mgpu.configs.multiple_choice import MultipleChoiceConfig
from bert_mgpu.scripts import run

cli.define_config_flags(MultipleChoiceConfig)


def main(_):
    from bert_mgpu.data.multiple_choice_data import check_multiple_choice_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(MultipleChoiceConfig, check_multiple_choice_inputs)
    from bert_mgpu.tasks.multiple_choice import run_multiple_choice
    run_multiple_choice(cfg)


if __name__ == "__main__":
    run(main)
