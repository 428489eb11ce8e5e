#!/usr/bin/env bash
# SQuAD fine-tuning and prediction on several GPUs with in-graph towers: Google's run_squad.py
# command line plus --n_gpus. train_batch_size is per tower: 6 x 2 towers = Google's batch of 12.
# Prediction runs on the first GPU listed in CUDA_VISIBLE_DEVICES; every question is predicted.
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# SQuAD's train/dev JSON files in SQUAD_DIR, a download of the model (~440 MB) and GPUs.
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1
SQUAD_DIR=${SQUAD_DIR:-./squad}   # train-v1.1.json, dev-v1.1.json (or the v2.0 files)
OUTPUT_DIR=${OUTPUT_DIR:-./squad_output}

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

python run_squad.py \
  "${MODEL_FLAGS[@]}" \
  --do_train=True --train_file="$SQUAD_DIR/train-v1.1.json" \
  --do_predict=True --predict_file="$SQUAD_DIR/dev-v1.1.json" \
  --do_eval=True \
  --train_batch_size=6 --n_gpus=2 --learning_rate=3e-5 --num_train_epochs=2.0 \
  --max_seq_length=384 --doc_stride=128 \
  --output_dir="$OUTPUT_DIR"
# SQuAD 2.0: the v2.0 files and --version_2_with_negative=True; then rerun with
# --do_train=False --null_score_diff_threshold=<best_f1_thresh from eval_results.txt>.

echo "predictions: $OUTPUT_DIR/predictions.json; EM/F1: $OUTPUT_DIR/eval_results.txt"
