"""run_multiple_choice.py: the script end to end on a slice of the shipped SWAG-format data
(train, eval, predict), 2 towers == 1 device with dropout on, the export equal to
test_results.tsv, and bad input in one line."""

import collections
import csv
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO
from _pretraining_data import TINY_CONFIG
from _together import bad_input_jobs, run_command, started, with_the_module

from bert_mgpu import tokenization
from bert_mgpu.data import multiple_choice_data as mc_data

SCRIPT = os.path.join(REPO, "run_multiple_choice.py")
SHIPPED = os.path.join(REPO, "data", "multiple_choice", "hellaswag_activitynet")
SEQ = 32
TRAIN_ROWS, DEV_ROWS = 32, 12


def _rows(name, n):
    with open(os.path.join(SHIPPED, name), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:n + 1]


def _write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header] + rows)


def _vocab(rows, header):
    """[PAD] .. [MASK] and the 150 most frequent words of the texts (others are [UNK])."""
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    texts = [row[header.index(c)] for row in rows for c in header
             if c in ("sent1", "sent2") or c.startswith("ending")]
    counts = collections.Counter(w for t in texts for w in basic.tokenize(t))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w, _ in
                                                             counts.most_common(150)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """data/ (train.csv, val.csv, test.csv = val.csv unlabelled), bad data dirs, the model
    files (dropout on, and a dropout-off copy)."""
    root = tmp_path_factory.mktemp("mc")
    header, train = _rows("train.csv", TRAIN_ROWS)
    _, dev = _rows("dev.csv", DEV_ROWS)
    label = header.index("label")
    for name in ("data", "no_test"):
        (root / name).mkdir()
        _write_csv(root / name / "train.csv", header, train)
        _write_csv(root / name / "val.csv", header, dev)
    _write_csv(root / "data" / "test.csv", header,
               [r[:label] + [""] + r[label + 1:] for r in dev])
    (root / "wrong_column").mkdir()
    _write_csv(root / "wrong_column" / "train.csv",
               [c if c != "ending3" else "ending_3" for c in header], train)
    (root / "bad_label").mkdir()
    _write_csv(root / "bad_label" / "train.csv", header,
               train[:5] + [train[5][:label] + ["7"] + train[5][label + 1:]] + train[6:])
    vocab = _vocab(train + dev, header)
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY_CONFIG, vocab_size=len(vocab), max_position_embeddings=64)
    dropout = dict(config, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    (root / "bert_config.json").write_text(json.dumps(dropout))
    (root / "bert_config_nodrop.json").write_text(json.dumps(dict(
        config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    return root


def _command(root, out, n_gpus, batch, **changes):
    flags = {"--data_dir": root / "data", "--vocab_file": root / "vocab.txt",
             "--bert_config_file": root / "bert_config.json", "--output_dir": out,
             "--do_train": "true", "--do_eval": "true", "--do_predict": "true",
             "--max_seq_length": SEQ, "--train_batch_size": batch, "--n_gpus": n_gpus,
             "--num_train_epochs": 1, "--learning_rate": "1e-3", "--warmup_proportion": 0.25,
             "--eval_batch_size": 5, "--predict_batch_size": 7, "--random_seed": 3,
             "--save_checkpoints_steps": 1000, "--log_every_n_steps": 50,
             "--allow_random_weights": "true", **changes}
    return [sys.executable, SCRIPT] + [f"{k}={v}" for k, v in flags.items()]


# One changed flag of the good run, and the one line it must give.
BAD_INPUT = [
    ({"--data_dir": "{root}/no_test"}, "test.csv not found (--do_predict reads it)"),
    ({"--data_dir": "{root}/wrong_column", "--do_eval": "false", "--do_predict": "false",
      "--eval_every_n_steps": 0}, "no column named 'ending3'"),
    ({"--data_dir": "{root}/bad_label", "--do_eval": "false", "--do_predict": "false",
      "--eval_every_n_steps": 0}, "label '7' is not a choice index 0-3"),
    ({"--num_choices": 1}, "--num_choices must be >= 2"),
]

_runs_with_the_module = with_the_module("runs")


@pytest.fixture(scope="module")
def runs(files):
    """The script's runs, started together: 2 towers of 4 ("good": train, eval every 2 updates
    and at the end, predict), one
    device of 8 with dropout on ("one") and off ("nodrop"), the bad inputs and --help."""
    root = files
    good = _command(root, root / "good", 2, 4, **{"--eval_every_n_steps": 2})
    jobs = {
        "good": lambda: run_command(good, timeout=600),
        "one": lambda: run_command(_command(root, root / "one", 1, 8, **{
            "--do_eval": "false", "--do_predict": "false"}), timeout=600),
        "nodrop": lambda: run_command(_command(root, root / "nodrop", 1, 8, **{
            "--do_eval": "false", "--do_predict": "false",
            "--bert_config_file": root / "bert_config_nodrop.json"}), timeout=600)}
    bad = [({k: str(v).format(root=root) for k, v in change.items()}, message)
           for change, message in BAD_INPUT]
    jobs.update(bad_input_jobs(good, bad, root))
    jobs["help"] = lambda: run_command([sys.executable, SCRIPT, "--help"])
    with started(jobs) as futures:
        yield futures


def _final_weights(out):
    reader = tf.train.load_checkpoint(str(out))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_trains_evaluates_and_predicts_every_example(runs, files):
    proc = runs["good"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = files / "good"
    result = dict(line.split(" = ") for line in
                  (out / "eval_results.txt").read_text().splitlines())
    assert {"eval_accuracy", "eval_loss", "loss", "global_step"} <= set(result), result
    assert int(result["global_step"]) == TRAIN_ROWS // 8
    assert 0.0 <= float(result["eval_accuracy"]) <= 1.0 and float(result["eval_loss"]) > 0
    rows = [[float(x) for x in line.split("\t")] for line in
            (out / "test_results.tsv").read_text().splitlines()]
    assert np.array(rows).shape == (DEV_ROWS, 4)
    np.testing.assert_allclose(np.sum(rows, axis=1), 1.0, rtol=1e-5)
    predicted = (out / "predict.txt").read_text().split("\n")
    assert predicted[-1] == "" and predicted[:-1] == [str(int(np.argmax(r))) for r in rows]
    history = (out / "eval_history.tsv").read_text().splitlines()
    assert len(history) == 1 + 2 and "eval_accuracy" in history[0]  # updates 2 and 4
    run = json.loads((out / "run_config.json").read_text())
    assert run["num_choices"] == 4 and run["max_seq_length"] == SEQ
    # The evaluation's accuracy is the predictions' on the same rows (test = dev unlabelled).
    _, dev = _rows("dev.csv", DEV_ROWS)
    labels = [int(r[-1]) for r in dev]
    accuracy = np.mean([int(p) == y for p, y in zip(predicted[:-1], labels)])
    assert float(result["eval_accuracy"]) == pytest.approx(accuracy)


def test_two_towers_equal_one_device_with_dropout_on(runs, files):
    for key in ("good", "one", "nodrop"):
        proc = runs[key].result()
        assert proc.returncode == 0, (key, proc.stderr[-3000:])
    two, one = _final_weights(files / "good"), _final_weights(files / "one")
    assert sorted(two) == sorted(one) and int(one["global_step"]) == TRAIN_ROWS // 8
    for name in one:
        np.testing.assert_allclose(two[name], one[name], atol=1e-5, err_msg=name)
    # Dropout acted: without it the same run ends elsewhere.
    nodrop = _final_weights(files / "nodrop")
    assert max(float(np.abs(nodrop[k] - one[k]).max()) for k in one) > 1e-4


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_is_one_line(runs, case):
    proc = runs[f"bad{case}"].result()
    message = BAD_INPUT[case][1]
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ERROR" in lines[0] and message in lines[0], proc.stderr


def test_help_says_every_choice_is_padded(runs):
    proc = runs["help"].result()  # (absl's --help exits with 1)
    assert "--num_choices" in proc.stdout and "no length-aware batching" in proc.stdout


def test_export_equals_test_results(runs, files, tmp_path):
    """export_saved_model.py --task=multiple_choice of the run: the raw-text signature gives
    test_results.tsv's probabilities and predict.txt's choices for the same rows."""
    assert runs["good"].result().returncode == 0
    out = files / "good"
    proc = run_command([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                        "--task=multiple_choice", f"--output_dir={out}",
                        f"--export_dir={tmp_path / 'export'}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    examples = mc_data.read_swag_csv(str(files / "data" / "test.csv"), "test")
    served = model.signatures["serving_default"](
        context=tf.constant([e.context for e in examples]),
        choices=tf.constant([list(e.choices) for e in examples]))
    expected = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    np.testing.assert_array_equal(served["label_id"].numpy(),
                                  np.loadtxt(out / "predict.txt", dtype=int))
    # `tokenize` gives the job's records.
    ids = model.signatures["tokenize"](context=tf.constant([examples[0].context]),
                                       choices=tf.constant([list(examples[0].choices)]))
    vocab = tokenization.FullTokenizer(str(files / "vocab.txt"), do_lower_case=True)
    job = mc_data.convert_example(examples[0], SEQ, vocab)
    for name in mc_data.CHOICE_FEATURES:
        np.testing.assert_array_equal(ids[name].numpy()[0], job[name])
