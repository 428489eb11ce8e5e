"""run_classifier_mgpu.py task types: --task_type=regression|multilabel, --task_name=stsb and
--classifier_input=pooled|cls|mean|cls_last4.

Metrics are checked through the tasks' own evaluation path (the trainer's `evaluate`, plus the
job's second pass for Spearman) on crafted model outputs, against values computed by hand in
the comments. Towers == one device with dropout on (dropout is keyed by the example's position
in the global batch, so the split cannot matter).
"""

import json
import math
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, REPO
from _pretraining_data import TINY_CONFIG
from _together import run_command, started_in, with_the_module

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import classifier_data, features, input_pipeline, processors, tfrecord
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.model import heads
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.base import JobTask
from bert_mgpu.tasks.classifier import (
    BertClassifier,
    BertMultiLabelClassifier,
    BertRegressor,
    FullEvaluation,
)

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SCRIPT = os.path.join(REPO, "run_classifier_mgpu.py")
# Four layers: cls_last4 needs them.
CONFIG4 = dict(TINY_CONFIG, num_hidden_layers=4)


def trainer_for(task, tmp_path, n_gpus=1, batch=8, **kw):
    cfg = TrainConfig(output_dir=str(tmp_path), train_batch_size=batch, n_gpus=n_gpus,
                      num_train_steps=kw.pop("steps", 1), num_warmup_steps=0, **kw)
    return training.Trainer(task, cfg, towers.tower_devices(n_gpus))


def crafted(task, name):
    """Makes the task's output layer return `features[name]` (crafted logits/scores), so the
    task's whole evaluation path runs on known model outputs."""
    task._logits = lambda features, training: tf.cast(features[name], tf.float32)
    return task


def batches(values, batch_size):
    """name -> array of examples, batched in order (the last batch partial, as eval)."""
    return tf.data.Dataset.from_tensor_slices(values).batch(batch_size)


# -- metrics through the tasks' evaluation path ---------------------------------------------

def test_regression_metrics_by_hand(tmp_path):
    # p = [1, 2, 2, 4, 10], y = [1, 3, 2, 4, 5].
    # Pearson: mean p 3.8, mean y 3; dp = [-2.8, -1.8, -1.8, .2, 6.2], dy = [-2, 0, -1, 1, 2];
    #   sum dp*dy = 5.6 + 0 + 1.8 + .2 + 12.4 = 20; sum dp² = 52.8; sum dy² = 10
    #   -> r = 20 / sqrt(528).
    # Spearman: ranks p = [1, 2.5, 2.5, 4, 5] (tie), ranks y = [1, 3, 2, 4, 5]; centred
    #   [-2, -.5, -.5, 1, 2] and [-2, 0, -1, 1, 2]: 9.5 / sqrt(9.5 * 10).
    # MSE: errors [0, -1, 0, 0, 5] -> 26 / 5. Estimator `loss` with batches of 2:
    #   batch means .5, 0, 25 -> 25.5 / 3.
    task = crafted(BertRegressor(BertConfig.from_dict(TINY_CONFIG)), "scores")
    data = {"scores": np.array([[1], [2], [2], [4], [10]], np.float32),
            "label_values": np.array([[1], [3], [2], [4], [5]], np.float32),
            "input_ids": np.zeros([5, 4], np.int32)}
    result = FullEvaluation(trainer_for(task, tmp_path)).evaluate(batches(data, 2))
    assert result["eval_pearson"] == pytest.approx(20 / math.sqrt(528), abs=1e-9)
    assert result["eval_spearman"] == pytest.approx(9.5 / math.sqrt(95), abs=1e-9)
    assert result["eval_mse"] == pytest.approx(5.2, abs=1e-6)
    assert result["eval_loss"] == pytest.approx(5.2, abs=1e-6)
    assert result["loss"] == pytest.approx(8.5, abs=1e-6)
    # Additive sums alone (without the predictions) give the same Pearson: the moments.
    plain = trainer_for(task, tmp_path / "plain").evaluate(batches(data, 3))
    assert plain["eval_pearson"] == pytest.approx(20 / math.sqrt(528), abs=1e-9)
    assert "eval_spearman" not in plain


def multilabel_case():
    # Truth (labels a, b, c) and predictions (logit sign):
    #   e1 a     | a      exact
    #   e2 b,c   | b
    #   e3 -     | -      exact (an example with no label)
    #   e4 a,b   | a,c
    # a: tp 2 fp 0 fn 0 -> F1 1; b: tp 1 fp 0 fn 1 -> 2/3; c: tp 0 fp 1 fn 1 -> 0.
    # micro: tp 3 fp 1 fn 2 -> 6/9; macro (1 + 2/3 + 0) / 3 = 5/9; exact 2/4.
    # |logit| = ln 3: p = .75 on the predicted side, so a right decision costs ln(4/3) and a
    # wrong one ln 4; 9 right and 3 wrong of 12 -> eval_loss (9 ln(4/3) + 3 ln 4) / 12.
    truth = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0], [1, 1, 0]], np.float32)
    predicted = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 1]], np.float32)
    logits = np.where(predicted > 0, 1.0, -1.0) * np.log(3.0)
    return {"logits": logits.astype(np.float32), "label_values": truth,
            "input_ids": np.zeros([4, 4], np.int32)}


def test_multilabel_metrics_by_hand(tmp_path):
    task = crafted(BertMultiLabelClassifier(BertConfig.from_dict(TINY_CONFIG), 3,
                                                  label_names=["a", "b", "c"]), "logits")
    result = FullEvaluation(trainer_for(task, tmp_path)).evaluate(
        batches(multilabel_case(), 3))
    expected = {"eval_f1_micro": 2 / 3, "eval_f1_macro": 5 / 9, "eval_exact_match": 0.5,
                "eval_f1_a": 1.0, "eval_f1_b": 2 / 3, "eval_f1_c": 0.0,
                "eval_loss": (9 * math.log(4 / 3) + 3 * math.log(4)) / 12}
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-6), key


def test_multilabel_threshold(tmp_path):
    # At 0.8 no probability (.75 or .25) is above: nothing predicted, only e3 (no label) is
    # exactly right, no true positive anywhere.
    task = crafted(BertMultiLabelClassifier(BertConfig.from_dict(TINY_CONFIG), 3,
                                                  threshold=0.8), "logits")
    result = trainer_for(task, tmp_path).evaluate(batches(multilabel_case(), 4))
    assert result["eval_exact_match"] == 0.25
    assert result["eval_f1_micro"] == 0.0 and result["eval_f1_macro"] == 0.0


def test_multilabel_prediction_files(tmp_path):
    probabilities = np.array([[0.9, 0.2, 0.6], [0.1, 0.5, 0.3], [0.51, 0.7, 0.0]])
    classifier_data.write_multilabel_predictions(str(tmp_path), probabilities,
                                                 ["x", "y", "z"], 0.5)
    # 0.5 itself is not above the threshold: the second row has no label (an empty line).
    assert (tmp_path / "predict.txt").read_text() == "x,z\n\nx,y\n"
    rows = [[float(v) for v in line.split("\t")]
            for line in (tmp_path / "test_results.tsv").read_text().splitlines()]
    np.testing.assert_allclose(rows, probabilities)


# -- data -----------------------------------------------------------------------------------

def write(path, lines):
    path.write_text("".join("\t".join(line) + "\n" for line in lines))


def test_tsv_multilabel_and_regression_examples_and_records(tmp_path):
    write(tmp_path / "train.tsv", [["text", "label"], ["one", "b,a"], ["two", ""],
                                   ["three", "c , a"]])
    processor = processors.get_processor("tsv", task_type="multilabel")
    examples = processor.get_train_examples(str(tmp_path))
    assert processor.get_labels() == ["a", "b", "c"]  # the sorted union
    tokenizer = __import__("bert_mgpu.tokenization", fromlist=["x"]).FullTokenizer(VOCAB)
    label_map = {"a": 0, "b": 1, "c": 2}
    hots = [classifier_data.convert_single_example(e, label_map, 8, tokenizer,
                                                   task_type="multilabel")["label_values"]
            for e in examples]
    assert hots == [[1, 1, 0], [0, 0, 0], [1, 0, 1]]
    write(tmp_path / "dev.tsv", [["text", "label"], ["x", "a,d"]])
    with pytest.raises(processors.DataError, match=r"dev.tsv:2: unknown label 'd'"):
        processor.get_dev_examples(str(tmp_path))

    write(tmp_path / "train.tsv", [["text", "label"], ["one", "2.5"], ["two", "-1e-1"]])
    processor = processors.get_processor("tsv", task_type="regression")
    values = [classifier_data.convert_single_example(e, {}, 8, tokenizer,
                                                     task_type="regression")
              for e in processor.get_train_examples(str(tmp_path))]
    assert [v["label_values"] for v in values] == [[2.5], [-0.1]]
    assert "label_ids" not in values[0]
    # The float feature round-trips through the records.
    parsed = features.parse_example(tf.constant(tfrecord.encode_example(values[1])),
                                    features.label_values_shapes(8, 1))
    assert parsed["label_values"].dtype == tf.float32
    np.testing.assert_allclose(parsed["label_values"], [-0.1])
    write(tmp_path / "dev.tsv", [["text", "label"], ["x", "1"], ["y", "high"]])
    with pytest.raises(processors.DataError, match=r"dev.tsv:3: the label 'high' is not a "
                                                    r"finite number"):
        processor.get_dev_examples(str(tmp_path))
    # Classification records are Google's, unchanged.
    example = processors.InputExample("g", "one", None, "1")
    record = classifier_data.convert_single_example(example, {"0": 0, "1": 1}, 8, tokenizer)
    assert list(record) == ["input_ids", "input_mask", "segment_ids", "label_ids",
                            "is_real_example"] and record["label_ids"] == [1]


def test_stsb_processor_on_glue_layout(tmp_path):
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2"]
    write(tmp_path / "train.tsv", [header + ["score"],
                                   ["0", "main-captions", "MSRvid", "2012test", "0001", "none",
                                    "none", "A plane is taking off.",
                                    "An air plane is taking off.", "5.000"],
                                   ["1", "main-news", "headlines", "2013", "0002", "none",
                                    "none", "A man plays.", "A cat sleeps.", "0.250"]])
    write(tmp_path / "test.tsv", [header, ["0", "main-captions", "MSRvid", "2012test", "0024",
                                           "none", "none", "A girl sings.", "A boy runs."]])
    write(tmp_path / "dev.tsv", [header + ["score"],
                                 ["0", "g", "f", "y", "o", "s", "s", "a", "b", "n/a"]])
    processor = processors.get_processor("stsb")
    train = processor.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, float(e.label)) for e in train] == [
        ("train-0", "A plane is taking off.", "An air plane is taking off.", 5.0),
        ("train-1", "A man plays.", "A cat sleeps.", 0.25)]
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (test.text_a, test.text_b, float(test.label)) == ("A girl sings.", "A boy runs.", 0)
    with pytest.raises(processors.DataError, match=r"dev.tsv:2: the label 'n/a'"):
        processor.get_dev_examples(str(tmp_path))


# -- --classifier_input ---------------------------------------------------------------------

def test_classifier_inputs_shapes_values_and_pooled_unchanged():
    config = BertConfig.from_dict(CONFIG4)
    rng = np.random.RandomState(0)
    ids = rng.randint(1, 100, size=[3, 10]).astype(np.int32)
    mask = np.ones([3, 10], np.int32)
    mask[0, 6:] = 0
    mask[2, 3:] = 0
    ids = ids * mask
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
             "label_ids": np.zeros([3, 1], np.int32)}
    tf.random.set_seed(1)
    reference = BertClassifier(config, 3)
    weights = {k: v.numpy() for k, v in reference.named_variables().items()}
    out = reference.bert(ids, mask, batch["segment_ids"])
    layers = [t.numpy() for t in out.all_encoder_layers]
    # pooled: Google's head on the same weights, computed here in numpy.
    logits = out.pooled_output.numpy() @ weights["output_weights"].T + weights["output_bias"]
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(reference.predict(batch)["probabilities"], expected, atol=1e-6)
    assert weights["output_weights"].shape == (3, 32)
    m = mask[:, :, None].astype(np.float32)
    wanted = {
        "pooled": out.pooled_output.numpy(),
        "cls": layers[-1][:, 0],
        "mean": (layers[-1] * m).sum(1) / m.sum(1),
        "cls_last4": np.concatenate([layers[-1][:, 0], layers[-2][:, 0], layers[-3][:, 0],
                                     layers[-4][:, 0]], -1),
    }
    for kind, value in wanted.items():
        got = heads.classifier_features(out, mask, kind).numpy()
        np.testing.assert_allclose(got, value, atol=1e-6, err_msg=kind)
        width = heads.classifier_input_width(config, kind)
        assert got.shape == (3, width) == (3, 128 if kind == "cls_last4" else 32)
        for task in (BertClassifier(config, 3, classifier_input=kind),
                     BertMultiLabelClassifier(config, 3, classifier_input=kind),
                     BertRegressor(config, classifier_input=kind)):
            assert isinstance(task, JobTask)
            variables = task.named_variables()
            n = task.classifier.num_labels
            assert variables["output_weights"].shape == (n, width), (kind, type(task))
            assert set(variables) == set(weights)  # Google's names, whatever the input
            # The same encoder weights: the head reads exactly `value`.
            for name, v in variables.items():
                if name.startswith("bert/"):
                    v.assign(weights[name])
            head_logits = task.classifier.logits(tf.constant(value)).numpy()
            predicted = task.predict(batch)
            first = next(iter(predicted.values())).numpy()
            if isinstance(task, BertRegressor):
                np.testing.assert_allclose(first, head_logits[:, 0], atol=1e-5)
            elif isinstance(task, BertMultiLabelClassifier):
                np.testing.assert_allclose(first, 1 / (1 + np.exp(-head_logits)), atol=1e-6)
            else:
                softmax = np.exp(head_logits - head_logits.max(-1, keepdims=True))
                np.testing.assert_allclose(first, softmax / softmax.sum(-1, keepdims=True),
                                           atol=1e-6)


# -- towers == one device, dropout on -------------------------------------------------------

def label_values_records(path, task_type, n=48, seq=12):
    rng = np.random.RandomState(7)
    with tf.io.TFRecordWriter(str(path)) as w:
        for _ in range(n):
            length = rng.randint(3, seq + 1)
            ids = np.zeros(seq, int)
            ids[:length] = rng.randint(1, 100, size=length)
            labels = [float(ids[1]) / 25] if task_type == "regression" else \
                [float(ids[1] > 50), float(ids[2] > 30), 0.0]
            w.write(tfrecord.encode_example({
                "input_ids": ids, "input_mask": (ids > 0).astype(int), "segment_ids": [0] * seq,
                "label_values": labels, "is_real_example": [1]}))
    return features.label_values_shapes(seq, len(labels))


@pytest.mark.parametrize("task_type", ["regression", "multilabel"])
def test_towers_equal_one_device_with_dropout(tmp_path, task_type):
    config = BertConfig.from_dict(dict(TINY_CONFIG, hidden_dropout_prob=0.1,
                                       attention_probs_dropout_prob=0.1))

    def make():
        if task_type == "regression":
            return BertRegressor(config, classifier_input="mean")
        return BertMultiLabelClassifier(config, 3, classifier_input="cls")

    shapes = label_values_records(tmp_path / "train.tf_record", task_type)
    tf.random.set_seed(5)
    init_path = str(tmp_path / "init")
    checkpoint.write_bundle(init_path, make().named_variables())
    results, losses = [], []
    for n_gpus, batch in ((1, 8), (2, 4)):
        task = make()
        trainer = trainer_for(task, tmp_path / f"out{n_gpus}", n_gpus, batch, steps=2,
                              learning_rate=1e-3, init_checkpoint=init_path)
        metrics = trainer.train(input_pipeline.record_dataset(
            [str(tmp_path / "train.tf_record")], shapes, 8, True, seed=1, shuffle_buffer=0))
        losses.append(metrics["loss"])
        results.append({k: v.numpy() for k, v in task.named_variables().items()})
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
    for k in results[0]:
        np.testing.assert_allclose(results[0][k], results[1][k], atol=1e-5, err_msg=k)


# -- the script, end to end -----------------------------------------------------------------

@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    rng = np.random.RandomState(2)
    root = tmp_path_factory.mktemp("task_types")
    words = {"a": "good", "b": "bad", "c": "fun"}

    def regression_rows(n, labelled=True):
        rows = [["sentence", "label"] if labelled else ["sentence"]]
        for _ in range(n):
            k = rng.randint(4)
            text = " ".join(["the", "movie"] + ["good"] * k + ["bad"] * (3 - k))
            rows.append([text, f"{1.5 * k:.2f}"] if labelled else [text])
        return rows

    def multilabel_rows(n, labelled=True):
        rows = [["text", "label"] if labelled else ["text"]]
        for i in range(n):
            names = [x for x in "abc" if rng.rand() < 0.4] if i % 4 else []  # empty rows
            text = " ".join(["the"] + [words[x] for x in names] + ["movie"])
            rows.append([text, ",".join(names)] if labelled else [text])
        return rows

    for kind, rows in (("regression", regression_rows), ("multilabel", multilabel_rows)):
        (root / kind).mkdir()
        for split, n in (("train", 48), ("dev", 13), ("test", 11)):
            write(root / kind / f"{split}.tsv", rows(n, split != "test"))
    (root / "bert_config.json").write_text(json.dumps(dict(CONFIG4, vocab_size=30522)))
    return root


def run_script(root, out, *extra):
    cmd = [sys.executable, SCRIPT, "--task_name=tsv", f"--vocab_file={VOCAB}",
           f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={out}",
           "--do_train", "--do_eval", "--do_predict", "--max_seq_length=12",
           "--train_batch_size=4", "--n_gpus=2", "--num_train_epochs=1", "--learning_rate=1e-3",
           "--eval_batch_size=5", "--predict_batch_size=4", *extra]
    return run_command(cmd)


def read_results(out):
    return dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())


def write_stsb(d):
    """GLUE's STS-B layout: 4 train, 7 dev and 5 test pairs."""
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2"]
    rng = np.random.RandomState(4)
    for split, n in (("train", 4), ("dev", 7), ("test", 5)):
        rows = [header + ([] if split == "test" else ["score"])]
        for i in range(n):
            row = [str(i), "main-news", "headlines", "2015", str(i), "none", "none",
                   "a man is " + rng.choice(["good", "bad"]), "a movie is fun"]
            rows.append(row + ([] if split == "test" else [f"{rng.uniform(0, 5):.3f}"]))
        write(d / f"{split}.tsv", rows)


def stsb_command(data_root, d, out):
    # No training (random weights on purpose): the task type, the keys and the prediction
    # files come from --task_name=stsb alone.
    return [sys.executable, SCRIPT, "--task_name=stsb", f"--data_dir={d}",
            f"--vocab_file={VOCAB}", f"--bert_config_file={data_root / 'bert_config.json'}",
            f"--output_dir={out}", "--do_eval", "--do_predict", "--allow_random_weights",
            "--max_seq_length=16", "--eval_batch_size=3", "--predict_batch_size=2"]


_scripts_with_the_module = with_the_module("scripts")


@pytest.fixture(scope="module")
def scripts(data_root, tmp_path_factory):
    """The script runs of the tests below, independent of each other: started together, with
    the module (they go on while the tests above run).

    Yields: {key: Future of (CompletedProcess, --output_dir)}.
    """
    d = tmp_path_factory.mktemp("runs")
    (d / "stsb_data").mkdir()
    write_stsb(d / "stsb_data")
    with started_in(d, {
        "regression": lambda out: run_script(
            data_root, out, "--task_type=regression", f"--data_dir={data_root / 'regression'}",
            "--classifier_input=cls_last4", "--eval_every_n_steps=3"),
        "multilabel": lambda out: run_script(
            data_root, out, "--task_type=multilabel", f"--data_dir={data_root / 'multilabel'}",
            "--classifier_input=mean", "--multilabel_threshold=0.45"),
        "stsb": lambda out: run_command(stsb_command(data_root, d / "stsb_data", out)),
        "stsb_multilabel": lambda out: run_command(stsb_command(data_root, d / "stsb_data", out)
                                                   + ["--task_type=multilabel"]),
        "mrpc_regression": lambda out: run_script(
            data_root, out, "--task_type=regression", f"--data_dir={data_root / 'regression'}",
            "--task_name=mrpc"),
    }) as runs:
        yield runs


def test_script_regression(scripts):
    proc, out = scripts["regression"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_results(out)
    assert {"eval_pearson", "eval_spearman", "eval_mse", "eval_loss", "loss",
            "global_step"} <= set(result) and result["eval_examples"] == "13"
    assert float(result["eval_mse"]) == float(result["eval_loss"])
    history = (out / "eval_history.tsv").read_text().splitlines()
    assert "eval_spearman" in history[0].split("\t") and len(history) == 1 + 2  # steps 3, 6
    # The default --best_metric of a regression is eval_pearson (README).
    assert json.loads((out / "run_config.json").read_text())["best_metric"] == "eval_pearson"
    assert "Evaluation at step 6: eval_pearson = " in proc.stderr
    scores = [float(x) for x in (out / "predict.txt").read_text().splitlines()]
    assert len(scores) == 11
    assert (out / "test_results.tsv").read_text() == (out / "predict.txt").read_text()
    reader = tf.train.load_checkpoint(str(out))
    assert reader.get_variable_to_shape_map()["output_weights"] == [1, 4 * 32]


def test_script_multilabel(scripts):
    proc, out = scripts["multilabel"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_results(out)
    assert {"eval_f1_micro", "eval_f1_macro", "eval_exact_match", "eval_loss", "loss",
            "eval_f1_a", "eval_f1_b", "eval_f1_c"} <= set(result)
    probabilities = [[float(v) for v in line.split("\t")]
                     for line in (out / "test_results.tsv").read_text().splitlines()]
    predicted = (out / "predict.txt").read_text().split("\n")[:-1]
    assert len(probabilities) == len(predicted) == 11
    assert all(len(p) == 3 for p in probabilities)
    assert predicted == [",".join(n for n, p in zip("abc", row) if p > 0.45)
                         for row in probabilities]
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["labels"] == ["a", "b", "c"]
    # The default --best_metric of a multilabel task is eval_f1_micro (README).
    assert run_config["best_metric"] == "eval_f1_micro"


def test_task_type_needs_a_task_that_has_it(scripts):
    proc, _ = scripts["mrpc_regression"].result()
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "--task_type=regression: --task_name=mrpc is a classification task" in last, last


def test_script_stsb_is_a_regression(scripts):
    proc, out = scripts["stsb"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_results(out)
    assert {"eval_pearson", "eval_spearman", "eval_mse"} <= set(result)
    assert result["eval_examples"] == "7"
    assert len((out / "predict.txt").read_text().splitlines()) == 5
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["task_type"] == "regression" and run_config["labels"] == []
    bad, _ = scripts["stsb_multilabel"].result()
    assert bad.returncode == 1
    assert "--task_name=stsb is a regression task" in bad.stderr.strip().splitlines()[-1]
