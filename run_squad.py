#!/usr/bin/env python
r"""BERT fine-tuning and prediction on SQuAD v1.1/v2.0 with in-graph towers (Google's run_squad.py,
TF2).

Usage (Google's command line, plus --n_gpus; --train_batch_size is per tower):
  export CUDA_VISIBLE_DEVICES=0,1
  python run_squad.py \
    --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
    --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json \
    --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/ --n_gpus=2

SQuAD 2.0: add --version_2_with_negative=True (and --null_score_diff_threshold). Writes
predictions.json, nbest_predictions.json and (v2.0) null_odds.json in --output_dir; --do_eval
(with a --predict_file that holds the answers) also writes the official EM/F1 to
eval_results.txt.
"""

from bert_mgpu import cli
from bert_mgpu.configs.squad import SquadConfig
from bert_mgpu.scripts import run

cli.define_config_flags(SquadConfig)


def main(_):
    from bert_mgpu.data.squad_data import check_squad_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(SquadConfig, check_squad_inputs)
    from bert_mgpu.tasks.squad import run_squad
    run_squad(cfg)


if __name__ == "__main__":
    run(main)
