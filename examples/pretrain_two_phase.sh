#!/usr/bin/env bash
# Two-phase pretraining (Google's README and SciBERT's recipe): 90% of the steps at length 128,
# then 10% at 512 starting from phase 1's weights. The data is generated twice, once per length.
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# a bert_config.json and vocab.txt in BERT_BASE_DIR (examples/domain_vocab.sh makes both),
# your corpus as DATA/corpus-*.txt, and GPUs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3
BERT_BASE_DIR=${BERT_BASE_DIR:-./uncased_L-12_H-768_A-12}   # bert_config.json + vocab.txt
DATA=${DATA:-./pretraining_data}
OUT=${OUT:-./two_phase}

for LEN in 128 512; do
  PRED=$(( LEN == 128 ? 20 : 80 ))
  python create_pretraining_data.py \
    --input_file="$DATA/corpus-*.txt" --output_file="$DATA/tf_examples.seq$LEN.tfrecord" \
    --vocab_file="$BERT_BASE_DIR/vocab.txt" --do_lower_case=True \
    --max_seq_length=$LEN --max_predictions_per_seq=$PRED --dupe_factor=5 --num_workers=4
done

# Phase 1: from scratch (no --init_checkpoint), length 128.
python -u run_pretraining.py \
  --input_file="$DATA/tf_examples.seq128.tfrecord" --output_dir="$OUT/phase1" \
  --do_train=True --bert_config_file="$BERT_BASE_DIR/bert_config.json" \
  --train_batch_size=64 --n_gpus=4 --max_seq_length=128 --max_predictions_per_seq=20 \
  --num_train_steps=900000 --num_warmup_steps=10000 --learning_rate=1e-4 \
  --precision=fp16 --optimizer=adamw

# Phase 2: length 512, initialised from phase 1's last checkpoint (a directory works too).
python -u run_pretraining.py \
  --input_file="$DATA/tf_examples.seq512.tfrecord" --output_dir="$OUT/phase2" \
  --do_train=True --do_eval=True --bert_config_file="$BERT_BASE_DIR/bert_config.json" \
  --init_checkpoint="$OUT/phase1" \
  --train_batch_size=8 --n_gpus=4 --num_accumulation_steps=2 \
  --max_seq_length=512 --max_predictions_per_seq=80 \
  --num_train_steps=100000 --num_warmup_steps=1000 --learning_rate=1e-4 --precision=fp16
