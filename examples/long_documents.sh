#!/usr/bin/env bash
# Whole-document classification: a text longer than --max_seq_length is split into windows of
# max_seq_length - 2 pieces starting --doc_stride pieces apart (the last window ends at the
# text's end) instead of being truncated. Training sees every window with its document's label,
# each weighted 1 / (its document's windows) so every document counts once; eval and predict
# pool each document's windows (--window_pooling, default mean) into one line per document in
# test_results.tsv / predict.txt and per-document metrics in eval_results.txt.
# train_batch_size is per tower and counts windows (global batch = 16 x 4 = 64 windows).
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# DATA_DIR with your long documents (train/dev/test.tsv), a download of the model (~440 MB)
# and GPUs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3
DATA_DIR=${DATA_DIR:-./data/classification/long_reviews}   # train/dev/test.tsv(.gz)
OUTPUT_DIR=${OUTPUT_DIR:-./long_documents_output}

# The model: MODEL, a Hugging Face name downloaded once (or found in the Hugging Face cache
# offline) and converted to Google's layout (docs/checkpoints.md, "Pretrained models"); or Google's release
# in BERT_BASE_DIR (uncased_L-12_H-768_A-12: vocab.txt, bert_config.json, bert_model.ckpt).
MODEL=${MODEL:-hf:google-bert/bert-base-uncased}
if [ -n "${BERT_BASE_DIR:-}" ]; then
  MODEL_FLAGS=(--vocab_file="$BERT_BASE_DIR/vocab.txt"
    --bert_config_file="$BERT_BASE_DIR/bert_config.json"
    --init_checkpoint="$BERT_BASE_DIR/bert_model.ckpt")
else
  MODEL_FLAGS=(--init_checkpoint="$MODEL")
fi

python -u run_classifier_mgpu.py \
  --task_name=tsv --do_train=true --do_eval=true --do_predict=true \
  --data_dir="$DATA_DIR" \
  "${MODEL_FLAGS[@]}" \
  --max_seq_length=256 --doc_stride=128 --window_pooling=mean \
  --train_batch_size=16 --n_gpus=4 --learning_rate=2e-5 --num_train_epochs=3 \
  --warmup_proportion=0.1 --eval_batch_size=64 --predict_batch_size=64 \
  --output_dir="$OUTPUT_DIR"

echo "per-document dev results: $OUTPUT_DIR/eval_results.txt (eval_examples = documents," \
     "eval_windows = windows); predictions, one line per document: $OUTPUT_DIR/predict.txt"
