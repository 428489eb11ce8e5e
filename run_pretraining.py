#!/usr/bin/env python
r"""Pretrains BERT (masked LM + next sentence) with in-graph towers: Google's script on TF2.

Usage (Google's flags, plus --n_gpus and the trainer options):
  export CUDA_VISIBLE_DEVICES=0,1
  python run_pretraining.py \
    --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining_output \
    --do_train=True --do_eval=True \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --train_batch_size=32 --n_gpus=2 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

--train_batch_size is per tower: one update sees train_batch_size x n_gpus x
num_accumulation_steps examples. Re-running the same command resumes from the newest checkpoint
in --output_dir; SIGHUP/SIGTERM/SIGINT write a checkpoint and exit cleanly. Records made with
create_pretraining_data.py --dynamic_masking: add --dynamic_masking --vocab_file=vocab.txt (masks
drawn in the input pipeline from (--random_seed, example index): new every epoch, independent of
--n_gpus / accumulation / workers, exact after a resume). A ModernBERT config (type_vocab_size 0)
trains masked-LM only (--no_next_sentence), with --lr_schedule=wsd --num_decay_steps=N for its
warmup-stable-decay schedule (docs/modernbert.md).
"""

from bert_mgpu import cli
from bert_mgpu.configs.pretraining import PretrainingConfig
from bert_mgpu.scripts import run

cli.define_config_flags(PretrainingConfig)


def main(_):
    from bert_mgpu.data.input_pipeline import check_pretraining_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(PretrainingConfig, check_pretraining_inputs)
    from bert_mgpu.tasks.pretraining import run_pretraining
    run_pretraining(cfg)


if __name__ == "__main__":
    run(main)
