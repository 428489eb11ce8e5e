#!/usr/bin/env bash
# Pretraining on one machine with several GPUs (in-graph towers), in the multi-GPU fork's style.
# train_batch_size is per tower: one update sees train_batch_size x n_gpus examples.
# Re-run the same command after a crash to resume from the last checkpoint in OUTPUT_DIR;
# `kill -TERM <pid>` (or a closed terminal's SIGHUP) writes a checkpoint and exits cleanly.
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# Google's release in BERT_BASE_DIR (vocab.txt, bert_config.json, bert_model.ckpt), your corpus
# as DATA/corpus-*.txt, and GPUs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3
BERT_BASE_DIR=${BERT_BASE_DIR:-./uncased_L-12_H-768_A-12}
DATA=${DATA:-./pretraining_data}
OUTPUT_DIR=${OUTPUT_DIR:-./pretraining_output}

python create_pretraining_data.py \
  --input_file="$DATA/corpus-*.txt" \
  --output_file="$DATA/tf_examples.seq128.tfrecord" \
  --vocab_file="$BERT_BASE_DIR/vocab.txt" --do_lower_case=True \
  --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \
  --random_seed=12345 --dupe_factor=5 --num_workers=4

nohup python -u run_pretraining.py \
  --input_file="$DATA/tf_examples.seq128.tfrecord" \
  --output_dir="$OUTPUT_DIR" \
  --do_train=True --do_eval=True \
  --bert_config_file="$BERT_BASE_DIR/bert_config.json" \
  --init_checkpoint="$BERT_BASE_DIR/bert_model.ckpt" \
  --train_batch_size=32 --n_gpus=4 \
  --max_seq_length=128 --max_predictions_per_seq=20 \
  --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=2e-5 \
  --save_checkpoints_steps=1000 --precision=fp16 --use_xla=True \
  > "$OUTPUT_DIR.log" 2>&1 &
echo "training in the background: tail -f $OUTPUT_DIR.log"
