"""Numeric labels sort as numbers (issue 30, item 4): a tsv task's labels 0..11 get indices
0..11 ('2' before '10'), the label list is logged and written beside predict.txt
(label_list.txt), and a run resumed from an output directory (or predicting from a checkpoint
whose run_config.json is beside it) keeps the order its output layer was trained with."""

import io
import json
import os
import sys
import types

import numpy as np
import pytest
from _oracle import REPO
from _tiny_bert import WORDS, tiny_bert_dir
from _together import run_command

from bert_mgpu.data import classifier_data, processors

LEXICOGRAPHIC = ["0", "1", "10", "11", "2", "3", "4", "5", "6", "7", "8", "9"]


def write_tsv(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


@pytest.mark.parametrize("labels,expected", [
    ([str(i) for i in range(12)], [str(i) for i in range(12)]),
    (["-1", "1", "0", "10", "2"], ["-1", "0", "1", "2", "10"]),
    (["neg", "pos", "10", "2"], ["10", "2", "neg", "pos"]),  # not all integers: as strings
    (["1.5", "10", "2"], ["1.5", "10", "2"]),
])
def test_integer_labels_sort_as_numbers(tmp_path, labels, expected):
    write_tsv(tmp_path / "train.tsv", [["sentence", "label"]] + [["x y", name] for name in labels])
    assert processors.get_processor("tsv").get_labels(str(tmp_path)) == expected


def config(output_dir, init_checkpoint=None, label_list=None, task_name="tsv"):
    return types.SimpleNamespace(output_dir=str(output_dir), label_list=label_list,
                                 task_name=task_name,
                                 model=types.SimpleNamespace(init_checkpoint=init_checkpoint))


def test_an_existing_runs_label_order_is_kept(tmp_path, caplog):
    numeric = [str(i) for i in range(12)]
    old = tmp_path / "old"
    old.mkdir()
    (old / "run_config.json").write_text(json.dumps({"labels": LEXICOGRAPHIC}))
    caplog.set_level("INFO", logger="absl")  # absl's logger, whatever level a test left it at
    # Resuming in the old run's --output_dir, or predicting from its checkpoint elsewhere.
    assert classifier_data.run_labels(config(old), numeric) == LEXICOGRAPHIC
    assert classifier_data.run_labels(
        config(tmp_path / "new", str(old / "model.ckpt-10")), numeric) == LEXICOGRAPHIC
    assert "Keeping the label order of the run in" in caplog.text
    # A new run, another label set, or an explicit --label_list: the numeric order.
    assert classifier_data.run_labels(config(tmp_path / "new"), numeric) == numeric
    assert classifier_data.run_labels(config(old), numeric + ["12"]) == numeric + ["12"]
    assert classifier_data.run_labels(config(old, label_list=tuple(numeric)), numeric) == numeric
    assert "Labels (index: label, as in predict.txt and label_list.txt): 0: 0, 1: 1, 2: 2" in \
        caplog.text


def test_predict_txt_indices_are_read_with_label_list_txt(tmp_path):
    """A tsv run with labels 0..11: label_list.txt beside predict.txt holds them in numeric
    order, as run_config.json; each predicted index is the label on that line."""
    rng = np.random.RandomState(0)
    data = tmp_path / "data"
    data.mkdir()
    rows = [[" ".join(rng.choice(WORDS, size=4)), str(i % 12)] for i in range(48)]
    write_tsv(data / "train.tsv", [["sentence", "label"]] + rows)
    write_tsv(data / "test.tsv", [["sentence"]] + [[r[0]] for r in rows[:5]])
    model = tiny_bert_dir(tmp_path / "model")
    out = tmp_path / "out"
    proc = run_command([sys.executable, os.path.join(REPO, "run_classifier.py"),
                        "--task_name=tsv", f"--data_dir={data}", f"--vocab_file={model}/vocab.txt",
                        f"--bert_config_file={model}/bert_config.json",
                        f"--init_checkpoint={model}/bert_model.ckpt", f"--output_dir={out}",
                        "--do_train=true", "--do_predict=true", "--max_seq_length=16",
                        "--train_batch_size=16", "--num_train_epochs=1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    numeric = [str(i) for i in range(12)]
    assert (out / "label_list.txt").read_text().splitlines() == numeric
    assert json.loads((out / "run_config.json").read_text())["labels"] == numeric
    assert "Labels (index: label, as in predict.txt and label_list.txt): 0: 0, 1: 1" in \
        proc.stderr
    indices = [int(x) for x in (out / "predict.txt").read_text().split()]
    # Index i is column i of test_results.tsv, whose columns are label_list.txt's order.
    probabilities = np.loadtxt(out / "test_results.tsv")
    assert probabilities.shape == (5, 12)
    assert indices == [int(i) for i in np.argmax(probabilities, axis=1)]


def test_a_resumed_tsv_run_predicts_with_its_saved_lexicographic_order(tmp_path):
    """An output directory whose run_config.json holds the old lexicographic order (here made
    by training with --label_list in that order: its head was trained with those indices).
    Predicting again from it without --label_list (the labels made from train.tsv, numeric
    order) keeps the saved order: label_list.txt and the predictions equal the first run's."""
    rng = np.random.RandomState(1)
    data = tmp_path / "data"
    data.mkdir()
    rows = [[" ".join(rng.choice(WORDS, size=4)), str(i % 12)] for i in range(24)]
    write_tsv(data / "train.tsv", [["sentence", "label"]] + rows)
    write_tsv(data / "test.tsv", [["sentence"]] + [[r[0]] for r in rows[:6]])
    model = tiny_bert_dir(tmp_path / "model")
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=tsv",
           f"--data_dir={data}", f"--vocab_file={model}/vocab.txt",
           f"--bert_config_file={model}/bert_config.json", f"--output_dir={out}",
           "--do_predict=true", "--max_seq_length=16"]
    first = run_command(cmd + [f"--init_checkpoint={model}/bert_model.ckpt", "--do_train=true",
                               "--train_batch_size=8", "--num_train_epochs=1",
                               "--label_list=" + ",".join(LEXICOGRAPHIC)])
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((out / "run_config.json").read_text())["labels"] == LEXICOGRAPHIC
    before = {name: (out / name).read_text() for name in ("test_results.tsv", "predict.txt")}
    again = run_command(cmd + ["--do_train=false"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Keeping the label order of the run in" in again.stderr
    assert (out / "label_list.txt").read_text().splitlines() == LEXICOGRAPHIC
    np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv"),
                               np.loadtxt(io.StringIO(before["test_results.tsv"])), atol=1e-6)
    assert (out / "predict.txt").read_text() == before["predict.txt"]
