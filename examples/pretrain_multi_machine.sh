#!/usr/bin/env bash
# Pretraining on N machines x M GPUs with TensorFlow's collective all-reduce (NCCL/gRPC ring).
# Run this same script on every machine with its own TASK_INDEX (0 = the chief, which writes
# checkpoints, summaries and eval results). OUTPUT_DIR must be shared storage (NFS, gs://...):
# every worker resumes from the chief's checkpoints. Global batch =
# train_batch_size x n_gpus x num_accumulation_steps x number of workers (here 32 x 8 x 1 x 4).
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# several machines with GPUs, shared storage, a bert_config.json in BERT_BASE_DIR and
# pretraining records in DATA (create_pretraining_data.py).
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
WORKERS=${WORKERS:-node0:2222,node1:2222,node2:2222,node3:2222}
TASK_INDEX=${TASK_INDEX:?set TASK_INDEX to the position of this machine in WORKERS, 0 = chief}
BERT_BASE_DIR=${BERT_BASE_DIR:-./uncased_L-12_H-768_A-12}
DATA=${DATA:-/shared/pretraining_data}
OUTPUT_DIR=${OUTPUT_DIR:-/shared/pretraining_output}

# With more input files than workers each worker reads its own files; otherwise records are
# sharded. Relaunch every worker with the same command after a failure to resume.
nohup python -u run_pretraining.py \
  --worker_hosts="$WORKERS" --task_index="$TASK_INDEX" --collective_timeout_seconds=300 \
  --input_file="$DATA/tf_examples.seq128.*.tfrecord" --output_dir="$OUTPUT_DIR" \
  --do_train=True --do_eval=True \
  --bert_config_file="$BERT_BASE_DIR/bert_config.json" \
  --train_batch_size=32 --n_gpus=8 --max_seq_length=128 --max_predictions_per_seq=20 \
  --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4 \
  --precision=fp16 --use_xla=True --optimizer=lamb \
  > "pretraining.worker$TASK_INDEX.log" 2>&1 &
echo "worker $TASK_INDEX started: tail -f pretraining.worker$TASK_INDEX.log"
