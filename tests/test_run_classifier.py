"""run_classifier.py, Google's script name: the commands of Google's README run unchanged (the
same job as run_classifier_mgpu.py, --n_gpus defaulting to 1)."""

import os
import shlex
import sys

import numpy as np
import pytest
from _oracle import REPO
from _tiny_bert import WORDS, tiny_bert_dir
from _together import run_command, started

# Google's README (google-research/bert, "Sentence (and sentence-pair) classification tasks"),
# verbatim: fine-tuning on MRPC, then predicting with the fine-tuned classifier.
GOOGLE_TRAIN = r"""
python run_classifier.py \
  --task_name=MRPC \
  --do_train=true \
  --do_eval=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=2e-5 \
  --num_train_epochs=3.0 \
  --output_dir=/tmp/mrpc_output/
"""
GOOGLE_PREDICT = r"""
python run_classifier.py \
  --task_name=MRPC \
  --do_predict=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$TRAINED_CLASSIFIER \
  --max_seq_length=128 \
  --output_dir=/tmp/mrpc_output/
"""


def shell_command(text, variables, output_dir):
    """A README command as argv: $VARIABLES replaced, the script run from the repository,
    Google's /tmp/mrpc_output/ replaced by `output_dir` (nothing else changes)."""
    for name, value in variables.items():
        text = text.replace(f"${name}", value)
    argv = shlex.split(text.replace("/tmp/mrpc_output/", output_dir))
    assert argv[:2] == ["python", "run_classifier.py"]
    return [sys.executable, os.path.join(REPO, "run_classifier.py")] + argv[2:]


def write_mrpc(directory, rng):
    """GLUE's MRPC files (train/dev: Quality, #1 ID, #2 ID, #1 String, #2 String)."""
    directory.mkdir(parents=True)

    def text():
        return " ".join(rng.choice(WORDS, size=rng.randint(3, 9)))

    for split, n in (("train", 40), ("dev", 9), ("test", 6)):
        first = "index" if split == "test" else "Quality"
        rows = [[first, "#1 ID", "#2 ID", "#1 String", "#2 String"]] + [
            [str(i if split == "test" else rng.randint(2)), str(i), str(i + 1), text(), text()]
            for i in range(n)]
        (directory / f"{split}.tsv").write_text(
            "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def google_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("google_readme")
    write_mrpc(root / "glue" / "MRPC", np.random.RandomState(0))
    out = str(root / "mrpc_output") + "/"
    variables = {"GLUE_DIR": str(root / "glue"),
                 "BERT_BASE_DIR": tiny_bert_dir(root / "uncased_L-1_H-32_A-4")}
    train = run_command(shell_command(GOOGLE_TRAIN, variables, out))
    variables["TRAINED_CLASSIFIER"] = os.path.join(out, "model.ckpt-3")
    predict_dir = str(root / "predict_output") + "/"
    # Also predicting in the training run's own --output_dir with the pretrained
    # --init_checkpoint: the fine-tuned checkpoint there is what predicts.
    in_out = dict(variables, TRAINED_CLASSIFIER=os.path.join(variables["BERT_BASE_DIR"],
                                                             "bert_model.ckpt"))
    with started({"predict": lambda: run_command(shell_command(GOOGLE_PREDICT, variables,
                                                               predict_dir)),
                  "predict_in_output_dir": lambda: run_command(shell_command(
                      GOOGLE_PREDICT, in_out, out))}) as runs:
        return train, out, runs["predict"].result(), predict_dir, \
            runs["predict_in_output_dir"].result()


def test_googles_readme_commands_run_unchanged(google_runs):
    train, out, predict, predict_dir, _ = google_runs
    assert train.returncode == 0, train.stderr[-3000:]
    assert "Towers (--n_gpus) = 1" in train.stderr
    assert "Global batch = 32 (train_batch_size 32 x n_gpus 1" in train.stderr
    result = dict(line.split(" = ") for line in
                  open(os.path.join(out, "eval_results.txt")).read().splitlines())
    # int(40 / 32 * 3.0) steps on one device (--n_gpus defaults to 1), 9 dev examples.
    assert result["global_step"] == "3" and result["eval_examples"] == "9"
    assert predict.returncode == 0, predict.stderr[-3000:]
    # The fine-tuned checkpoint and its step, not "the weights at global_step 0".
    assert f"Predicting with the weights of --init_checkpoint={out}model.ckpt-3 (saved at " \
           f"global_step 3)" in predict.stderr
    rows = open(os.path.join(predict_dir, "test_results.tsv")).read().splitlines()
    assert len(rows) == 6 and all(len(r.split("\t")) == 2 for r in rows)


def test_predicting_from_the_output_dirs_checkpoint_names_it_and_its_step(google_runs):
    """Google's predict command in the fine-tuning run's --output_dir, --init_checkpoint the
    pretrained model's: the log names the checkpoint of --output_dir and its step (not "the
    weights at global_step 0", nor --init_checkpoint), and those weights predict (the same
    probabilities as with --init_checkpoint=model.ckpt-3)."""
    train, out, _, predict_dir, predict = google_runs
    assert train.returncode == 0, train.stderr[-3000:]
    assert predict.returncode == 0, predict.stderr[-3000:]
    assert f"Predicting with the weights of {os.path.join(out, 'model.ckpt-3')} " \
           f"(global_step 3)" in predict.stderr
    assert "--init_checkpoint" not in "".join(
        line for line in predict.stderr.splitlines() if "Predicting with" in line)
    np.testing.assert_allclose(np.loadtxt(os.path.join(out, "test_results.tsv")),
                               np.loadtxt(os.path.join(predict_dir, "test_results.tsv")),
                               atol=1e-6)
