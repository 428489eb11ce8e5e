"""Multi-task fine-tuning (run_classifier_mgpu.py with several --task_name): one encoder, one
head per task, one task per global batch drawn by (seed, step), outputs per task."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import error_line
from _oracle import DATA, REPO
from _pretraining_data import TINY_CONFIG
from _together import started_in, with_the_module

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import features, multitask, tfrecord
from bert_mgpu.engine import checkpoint, evaluation, towers, training
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import BertClassifier, BertMultiLabelClassifier, BertRegressor
from bert_mgpu.tasks.multitask import MultiTaskClassifier, multitask_mean_metric

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SCRIPT = os.path.join(REPO, "run_classifier_mgpu.py")
SEQ = 12


def make_model(config, kinds=("classification", "multilabel")):
    """A MultiTaskClassifier with tasks a (2 classes), b (3 labels, multi-label) [, c ...]."""
    encoder = modeling.BertModel(config)
    made = {}
    for label, kind in zip("abc", kinds):
        scope = MultiTaskClassifier.head_scope(label)
        if kind == "classification":
            made[label] = BertClassifier(config, 2, encoder=encoder, scope=scope)
        elif kind == "regression":
            made[label] = BertRegressor(config, encoder=encoder, scope=scope)
        else:
            made[label] = BertMultiLabelClassifier(config, 3, encoder=encoder, scope=scope)
    return MultiTaskClassifier(encoder, made)


def write_records(path, kind, n, first_id=1):
    """n records; input_ids[1] is the example's unique id (first_id, first_id + 1, ...)."""
    rng = np.random.RandomState(first_id)
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(n):
            ids = np.zeros(SEQ, int)
            length = rng.randint(4, SEQ + 1)
            ids[:length] = rng.randint(1, 100, size=length)
            ids[1] = first_id + i
            record = {"input_ids": ids, "input_mask": (ids > 0).astype(int),
                      "segment_ids": [0] * SEQ, "is_real_example": [1]}
            if kind == "classification":
                record["label_ids"] = [int(ids[2] > 50)]
            elif kind == "regression":
                record["label_values"] = [float(ids[2]) / 25]
            else:
                record["label_values"] = [float(ids[2] > 50), float(ids[3] > 30), 0.0]
            w.write(tfrecord.encode_example(record))
    if kind == "classification":
        return str(path), features.classifier_shapes(SEQ)
    return str(path), features.label_values_shapes(SEQ, 1 if kind == "regression" else 3)


def train_cfg(out, n_gpus=1, batch=8, steps=4, **kw):
    return TrainConfig(output_dir=str(out), train_batch_size=batch, n_gpus=n_gpus,
                       num_train_steps=steps, num_warmup_steps=1, learning_rate=1e-3, **kw)


# -- the model: separate heads, one encoder ----------------------------------------------------

def test_heads_separate_and_encoder_shared(tmp_path):
    config = BertConfig.from_dict(TINY_CONFIG)
    model = make_model(config)
    names = list(model.named_variables())
    single = BertClassifier(config, 2).named_variables()
    bert = [n for n in single if n.startswith("bert/")]
    assert [n for n in names if n.startswith("bert/")] == bert  # one encoder, Google's names
    assert [n for n in names if not n.startswith("bert/")] == [
        "task_a/output_weights", "task_a/output_bias", "task_b/output_weights",
        "task_b/output_bias"]
    assert model.tasks[0].bert is model.tasks[1].bert is model.bert
    # The single-task layout stays Google's: root-level output_weights/output_bias.
    assert [n for n in single if not n.startswith("bert/")] == ["output_weights", "output_bias"]

    a = write_records(tmp_path / "a.tf_record", "classification", 16)
    b = write_records(tmp_path / "b.tf_record", "multilabel", 16, first_id=40)
    trainer = training.Trainer(model, train_cfg(tmp_path / "out"), towers.tower_devices(1))
    batches = {}
    for index, (path, shapes) in enumerate((a, b)):
        only = np.eye(2)[index]  # this task drawn every time
        batches[index] = next(iter(multitask.training_dataset(
            [a, b], 8, seed=1, probabilities=only)))
        assert set(batches[index]["task_id"].numpy()) == {index}
    tensors = trainer.checkpoint_tensors()
    trainer.step(batches[1])  # task b first, so that its Adam slots are not zero
    before = {k: v.numpy().copy() for k, v in tensors.items()}
    assert np.abs(before["task_b/output_weights/adam_m"]).max() > 0
    trainer.step(batches[0])  # a batch of task a
    after = {k: v.numpy() for k, v in tensors.items()}
    # Task b's head and its slots are untouched: it got no gradient (None), and Google's
    # AdamWeightDecay skips such a variable (a zero gradient would move it by its momentum
    # m / (sqrt(v) + eps) and weight decay).
    for name in ("task_b/output_weights", "task_b/output_bias"):
        for suffix in ("", "/adam_m", "/adam_v"):
            np.testing.assert_array_equal(after[name + suffix], before[name + suffix])
    # Task a's head and the encoder moved.
    for name in ("task_a/output_weights", "task_a/output_bias",
                 "bert/encoder/layer_0/attention/self/query/kernel",
                 "bert/embeddings/word_embeddings"):
        assert np.abs(after[name] - before[name]).max() > 0, name
    assert int(after["global_step"]) == 2


def test_a_batch_that_mixes_tasks_is_refused():
    model = make_model(BertConfig.from_dict(TINY_CONFIG))
    with pytest.raises(ValueError, match=r"mixes tasks \[0, 1\]"):
        model.route({"task_id": tf.constant([0, 1, 1, 0])})


def test_every_contract_member_works_on_a_multitask_batch():
    """The whole model's eval_sums, eval_metrics and predict (engine/contract.py) on a batch
    in the training layout are each task's own on its rows (a task without rows: zeros, no
    results)."""
    model = make_model(BertConfig.from_dict(TINY_CONFIG))
    rng = np.random.RandomState(0)
    task_id = np.array([0, 1, 0, 1, 1, 0], np.int32)
    batch = {"input_ids": rng.randint(1, 100, size=[6, SEQ]).astype(np.int32),
             "input_mask": np.ones([6, SEQ], np.int32),
             "segment_ids": np.zeros([6, SEQ], np.int32), "task_id": task_id,
             "label_ids": rng.randint(0, 2, size=[6, 1]).astype(np.int32),
             "label_values": (rng.rand(6, 3) > 0.5).astype(np.float32)}
    sums = model.eval_sums({k: tf.constant(v) for k, v in batch.items()})
    for i, task in enumerate(model.tasks):
        feature, rows = task.task_type.label_feature, task_id == i
        own = {k: tf.constant(batch[k][rows]) for k in ("input_ids", "input_mask",
                                                         "segment_ids")}
        own[feature] = tf.constant(batch[feature][rows][:, :task.label_width])
        expected = task.eval_sums(own)
        for key, value in expected.items():
            np.testing.assert_allclose(sums[f"{i}/{key}"], value, rtol=1e-5, atol=1e-6)
        label = model.labels[i]
        metrics = model.eval_metrics({k: v.numpy() for k, v in sums.items()})
        assert {k[len(label) + 1:]: v for k, v in metrics.items()
                if k.startswith(f"{label}/")} == pytest.approx(task.eval_metrics(
                    {k: v.numpy() for k, v in expected.items()}), rel=1e-5, abs=1e-6)
    outputs = model.predict({k: tf.constant(v) for k, v in batch.items()})
    assert outputs["a/probabilities"].shape == (6, 2)
    assert outputs["b/probabilities"].shape == (6, 3)
    only_a = dict(batch, task_id=np.zeros(6, np.int32))
    sums = model.eval_sums({k: tf.constant(v) for k, v in only_a.items()})
    assert float(sums["1/num_examples"]) == 0.0 and float(sums["1/loss_sum"]) == 0.0
    metrics = model.eval_metrics({k: v.numpy() for k, v in sums.items()})
    assert metrics and not [k for k in metrics if k.startswith("b/")]


# -- the input: sampling, epochs, one task per batch -----------------------------------------------

def test_sampling_probabilities_and_proportions():
    np.testing.assert_allclose(multitask.sampling_probabilities([600, 300, 100], "proportional"),
                               [0.6, 0.3, 0.1])
    np.testing.assert_allclose(multitask.sampling_probabilities([400, 100], "sqrt"),
                               [2 / 3, 1 / 3])
    np.testing.assert_allclose(multitask.sampling_probabilities([7, 1], "uniform"), [0.5, 0.5])
    p = [0.6, 0.3, 0.1]
    draws = np.array(list(multitask.task_choices(3, p).take(6000).as_numpy_iterator()))
    # Binomial standard deviation at 6000 draws is <= 0.0065: 4 sigma.
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / len(draws), p, atol=0.026)
    # A pure function of (seed, step): the same draws again, other ones for another seed.
    again = np.array(list(multitask.task_choices(3, p).skip(5000).take(1000)
                          .as_numpy_iterator()))
    np.testing.assert_array_equal(again, draws[5000:])
    other = np.array(list(multitask.task_choices(4, p).take(6000).as_numpy_iterator()))
    assert (other != draws).mean() > 0.3


def test_every_task_sees_each_epoch_in_a_fresh_order(tmp_path):
    # Tasks of 12 (classification), 8 (regression) and 16 (multi-label) examples, batches of 4.
    inputs = [write_records(tmp_path / "a", "classification", 12, first_id=1),
              write_records(tmp_path / "b", "regression", 8, first_id=20),
              write_records(tmp_path / "c", "multilabel", 16, first_id=40)]
    d = multitask.training_dataset(inputs, 4, seed=5, probabilities=[0.4, 0.3, 0.3])
    seen = {0: [], 1: [], 2: []}
    for batch in d.take(90).as_numpy_iterator():
        task = set(batch["task_id"])
        assert len(task) == 1  # one task per batch
        task = task.pop()
        seen[task].extend(batch["input_ids"][:, 1])
        assert batch["label_values"].shape == (4, 3) and batch["label_ids"].shape == (4, 1)
        if task == 1:  # a regression's label in column 0, the rest padding
            assert not batch["label_values"][:, 1:].any()
    for task, (first, n) in enumerate(((1, 12), (20, 8), (40, 16))):
        ids = seen[task]
        epochs = [ids[i:i + n] for i in range(0, len(ids) - n + 1, n)]
        assert len(epochs) >= 3, task
        for epoch in epochs:  # every example once per epoch
            assert sorted(epoch) == list(range(first, first + n)), task
        assert len({tuple(e) for e in epochs}) == len(epochs)  # a new order every epoch


def test_workers_split_the_global_batches(tmp_path):
    inputs = [write_records(tmp_path / "a", "classification", 12),
              write_records(tmp_path / "b", "regression", 8, first_id=20)]
    whole = list(multitask.training_dataset(inputs, 8, 2, [0.5, 0.5]).take(6)
                 .as_numpy_iterator())
    parts = [list(multitask.training_dataset(inputs, 4, 2, [0.5, 0.5], num_shards=2,
                                             shard_index=i).take(6).as_numpy_iterator())
             for i in range(2)]
    for step, batch in enumerate(whole):
        for name, value in batch.items():
            np.testing.assert_array_equal(
                np.concatenate([parts[0][step][name], parts[1][step][name]]), value)


# -- training: towers, resume ------------------------------------------------------------------

def _train(tmp_path, name, inputs, n_gpus, batch, steps=4, stop_at=None, init=None,
           accumulation=1):
    config = BertConfig.from_dict(dict(TINY_CONFIG, hidden_dropout_prob=0.1,
                                       attention_probs_dropout_prob=0.1))
    model = make_model(config, ("classification", "regression"))
    if init is not None:
        checkpoint.restore_checkpoint(init, model.named_variables())
    trainer = training.Trainer(model, train_cfg(tmp_path / name, n_gpus, batch, steps,
                                                save_checkpoints_steps=2,
                                                num_accumulation_steps=accumulation),
                               towers.tower_devices(n_gpus))
    dataset = multitask.training_dataset(inputs, 8, 7, [0.5, 0.5])
    trainer.train(dataset, on_step=(lambda step, _: step == stop_at) if stop_at else None)
    return {k: v.numpy() for k, v in model.named_variables().items()}


def test_towers_and_accumulation_equal_one_device_and_resume_is_exact(tmp_path):
    inputs = [write_records(tmp_path / "a", "classification", 24),
              write_records(tmp_path / "b", "regression", 16, first_id=30)]
    tf.random.set_seed(3)
    config = BertConfig.from_dict(TINY_CONFIG)
    init = str(tmp_path / "init")
    checkpoint.write_bundle(init, make_model(config, ("classification", "regression"))
                            .named_variables())
    draws = list(multitask.task_choices(7, [0.5, 0.5]).take(4).as_numpy_iterator())
    assert set(draws) == {0, 1}  # both tasks (both traces) within the 4 steps
    # Dropout on: 1 tower; 2 towers stopped at step 2 (checkpoint) and rerun to step 4; 2
    # accumulated micro-batches. The same batches, tasks and dropout masks: the same weights.
    one = _train(tmp_path, "one", inputs, 1, 8, init=init)
    _train(tmp_path, "two", inputs, 2, 4, stop_at=2, init=init)
    resumed = _train(tmp_path, "two", inputs, 2, 4, init=init)
    accumulated = _train(tmp_path, "accumulated", inputs, 1, 4, init=init, accumulation=2)
    assert tf.train.load_checkpoint(str(tmp_path / "two")).get_tensor("global_step") == 4
    for name in one:
        np.testing.assert_allclose(resumed[name], one[name], atol=1e-5, err_msg=name)
        np.testing.assert_allclose(accumulated[name], one[name], atol=1e-5, err_msg=name)


# -- the script --------------------------------------------------------------------------------

def write_tsv(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def task_dirs(tmp_path_factory):
    """Two tsv tasks: sentiment (classification, 40 train) and a score (regression, 24)."""
    rng = np.random.RandomState(4)
    root = tmp_path_factory.mktemp("multitask")
    for name, n_train in (("sentiment", 40), ("score", 24)):
        (root / name).mkdir()
        for split, n in (("train", n_train), ("dev", 9), ("test", 7)):
            rows = [["text", "label"] if split != "test" else ["text"]]
            for _ in range(n):
                k = rng.randint(4)
                text = " ".join(["the", "movie"] + ["good"] * k + ["bad"] * (3 - k))
                label = str(int(k >= 2)) if name == "sentiment" else f"{1.5 * k:.2f}"
                rows.append([text, label] if split != "test" else [text])
            write_tsv(root / name / f"{split}.tsv", rows)
    (root / "bert_config.json").write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522)))
    return root


def run_script(root, out, *extra):
    cmd = [sys.executable, SCRIPT, f"--vocab_file={VOCAB}",
           f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={out}",
           "--max_seq_length=12", "--train_batch_size=4", "--learning_rate=1e-3",
           "--eval_batch_size=5", "--predict_batch_size=4", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


# Flag combinations refused in one line, with what the line says.
BAD_FLAGS = [
    (["--data_dir=A"], "--data_dir has 1 directories for 2 tasks (--task_name=tsv,tsv)"),
    (["--task_type=classification,regression,multilabel"],
     "--task_type has 3 values for 2 tasks (--task_name)"),
    (["--label_list=a,b;c;d"], "--label_list has 3 label lists (separated by ';') for 2 tasks"),
    (["--task_sampling=sometimes"], "--task_sampling"),
    (["--num_accumulation_steps=2", "--batch_ramp_steps=2"],
     "--batch_ramp_steps cannot be used with several --task_name"),
    (["--group_by_length"], "--group_by_length cannot be used with several --task_name"),
    (["--task_type=classification,regression", "--best_metric=eval_accuracy,eval_mse"],
     "the mean of losses (lower is better) and scores (higher is better) means nothing"),
]


def bad_flags_run(task_dirs, out, extra):
    args = ["--task_name=tsv,tsv", f"--data_dir={task_dirs / 'sentiment'},{task_dirs / 'score'}",
            "--do_train", "--do_eval"]
    args = [a for a in args if not a.startswith(tuple(e.split("=")[0] for e in extra))]
    return run_script(task_dirs, out, *args, *extra)


_scripts_with_the_module = with_the_module("scripts")


@pytest.fixture(scope="module")
def scripts(task_dirs, tmp_path_factory):
    """The multi-task run and the bad flag combinations' runs: independent, started together,
    with the module (they go on while the in-process tests above run).

    Yields: {key: Future of (CompletedProcess, --output_dir)}; "bad<i>" is BAD_FLAGS[i]'s run.
    """
    jobs = {"multitask": lambda out: run_script(
        task_dirs, out, "--task_name=tsv,tsv",
        f"--data_dir={task_dirs / 'sentiment'},{task_dirs / 'score'}",
        "--task_type=classification,regression", "--n_gpus=2", "--num_train_epochs=1",
        "--do_train", "--do_eval", "--do_predict", "--eval_every_n_steps=4",
        "--keep_best_checkpoint", "--best_metric=eval_accuracy,eval_pearson",
        "--label_list=1,0;")}  # task 0's labels in this order, task 1's default (none)
    for i, (extra, _) in enumerate(BAD_FLAGS):
        jobs[f"bad{i}"] = lambda out, extra=extra: bad_flags_run(task_dirs, out, extra)
    with started_in(tmp_path_factory.mktemp("runs"), jobs) as runs:
        yield runs


@pytest.fixture(scope="module")
def multitask_run(scripts):
    return scripts["multitask"].result()


def test_script_multitask_outputs_per_task(multitask_run):
    proc, out = multitask_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "8 steps" in proc.stderr  # (40 + 24) examples / (4 x 2) per batch, 1 epoch
    assert "task tsv_0: 40 examples, drawn for 62.5% of the batches" in proc.stderr
    sentiment, score = read_results(out / "tsv_0/eval_results.txt"), \
        read_results(out / "tsv_1/eval_results.txt")
    assert {"eval_accuracy", "eval_f1_macro"} <= set(sentiment)
    assert {"eval_pearson", "eval_spearman", "eval_mse"} <= set(score)
    assert sentiment["eval_examples"] == score["eval_examples"] == "9"
    top = read_results(out / "eval_results.txt")
    assert top["tsv_0/eval_accuracy"] == sentiment["eval_accuracy"]
    assert top["tsv_1/eval_pearson"] == score["eval_pearson"]
    mean = (float(sentiment["eval_accuracy"]) + float(score["eval_pearson"])) / 2
    assert float(top["mean_best_metric"]) == pytest.approx(mean)
    probs = (out / "tsv_0/test_results.tsv").read_text().splitlines()
    assert len(probs) == 7 and len(probs[0].split("\t")) == 2
    assert len((out / "tsv_0/predict.txt").read_text().splitlines()) == 7
    scores = (out / "tsv_1/predict.txt").read_text()
    assert len(scores.splitlines()) == 7 and scores == (out / "tsv_1/test_results.tsv").read_text()
    history = (out / "eval_history.tsv").read_text().splitlines()
    columns = history[0].split("\t")
    assert {"mean_best_metric", "tsv_0/eval_accuracy", "tsv_1/eval_spearman"} <= set(columns)
    assert len(history) == 1 + 2  # steps 4 and 8
    # The best checkpoint is the one with the best mean of the tasks' --best_metric (README).
    rows = evaluation.read_history(str(out))
    for row in rows:
        mean = (row["tsv_0/eval_accuracy"] + row["tsv_1/eval_pearson"]) / 2
        assert row["mean_best_metric"] == pytest.approx(mean, abs=1e-6)
    best_step = rows[int(np.argmax([r["mean_best_metric"] for r in rows]))]["step"]
    assert evaluation.best_checkpoint(str(out)).endswith(f"model.ckpt-{best_step}")
    # Not trivially the last model: this run's mean peaks at its first evaluation (step 4; the
    # regression's Pearson falls by step 8). If a change to training moves the peak to the
    # last evaluation, make another run here whose best is not its last.
    assert best_step != rows[-1]["step"], [(r["step"], r["mean_best_metric"]) for r in rows]
    best_results = read_results(out / "best_eval_results.txt")
    assert best_results["global_step"] == str(best_step)
    assert float(best_results["mean_best_metric"]) == pytest.approx(
        max(r["mean_best_metric"] for r in rows), abs=1e-6)
    # best/ keeps that step's weights, not the final ones under the best step's name.
    kept, final = (tf.train.load_checkpoint(p) for p in (evaluation.best_checkpoint(str(out)),
                                                         tf.train.latest_checkpoint(str(out))))
    assert final.get_tensor("global_step") == rows[-1]["step"]
    for name in ("bert/encoder/layer_0/output/dense/kernel", "bert/pooler/dense/kernel"):
        assert np.abs(kept.get_tensor(name) - final.get_tensor(name)).max() > 1e-6, name
    names = tf.train.load_checkpoint(str(out)).get_variable_to_shape_map()
    assert names["task_tsv_0/output_weights"] == [2, 32]
    assert names["task_tsv_1/output_weights"] == [1, 32]
    assert "output_weights" not in names
    run_config = json.loads((out / "run_config.json").read_text())
    assert [t["label"] for t in run_config["tasks"]] == ["tsv_0", "tsv_1"]
    assert run_config["tasks"][0]["labels"] == ["1", "0"]  # --label_list=1,0;
    assert run_config["tasks"][1]["labels"] == []
    # predict.txt: the fork's predicted label index (into --label_list's order) per line.
    rows = [[float(x) for x in line.split("\t")] for line in probs]
    assert (out / "tsv_0/predict.txt").read_text().splitlines() == [
        str(int(np.argmax(r))) for r in rows]


def test_rerun_with_another_global_batch_is_one_line(multitask_run, task_dirs, tmp_path):
    """README: a multi-task rerun with another global batch cannot re-cut one-task batches."""
    proc, out = multitask_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = sorted(os.listdir(copy))
    rerun = run_script(task_dirs, copy, "--task_name=tsv,tsv",
                       f"--data_dir={task_dirs / 'sentiment'},{task_dirs / 'score'}",
                       "--task_type=classification,regression", "--n_gpus=1",
                       "--num_train_epochs=2", "--do_train", "--label_list=1,0;")
    last = error_line(rerun, "run_classifier_mgpu.py")
    assert "the checkpoint at step 8 was trained with input batches of 8 on 1 worker(s); now 4 " \
           "on 1. Another global batch can resume only on one worker, without " \
           "--batch_ramp_steps and with one --task_name" in last, last
    assert sorted(os.listdir(copy)) == before


def test_single_task_from_a_multitask_checkpoint(multitask_run, task_dirs, tmp_path):
    proc, out = multitask_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    single = run_script(task_dirs, tmp_path / "single", "--task_name=tsv",
                        f"--data_dir={task_dirs / 'sentiment'}", f"--init_checkpoint={out}",
                        "--do_eval")
    assert single.returncode == 0, single.stderr[-3000:]
    assert "has the classifier head(s) task_tsv_0/output_weights, task_tsv_1/output_weights, " \
           "not this run's output_weights" in single.stderr
    # In process: the encoder comes from the multi-task checkpoint by name, the new head is
    # the fresh one (neither task's head is taken).
    config = BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522))
    task = BertClassifier(config, 2)
    fresh = task.classifier.output_weights.numpy().copy()
    report = checkpoint.init_from_checkpoint(str(out), task.named_variables())
    reader = tf.train.load_checkpoint(str(out))
    assert all(n.startswith("bert/") for n in report.initialized)
    assert sorted(report.not_in_checkpoint) == ["output_bias", "output_weights"]
    np.testing.assert_array_equal(task.classifier.output_weights.numpy(), fresh)
    np.testing.assert_array_equal(
        task.bert.named_variables()["bert/pooler/dense/kernel"].numpy(),
        reader.get_tensor("bert/pooler/dense/kernel"))


def test_multitask_from_a_multitask_checkpoint_takes_every_head(multitask_run, task_dirs,
                                                                 tmp_path):
    """README: a multi-task run from a multi-task checkpoint with the same labels continues
    every head by name: evaluated from it in a new --output_dir, each task's dev results are
    the run's own."""
    proc, out = multitask_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = run_script(task_dirs, tmp_path / "again", "--task_name=tsv,tsv",
                       f"--data_dir={task_dirs / 'sentiment'},{task_dirs / 'score'}",
                       "--task_type=classification,regression", "--label_list=1,0;",
                       f"--init_checkpoint={out}", "--do_eval")
    assert again.returncode == 0, again.stderr[-3000:]
    for task in ("tsv_0", "tsv_1"):
        ours = read_results(tmp_path / "again" / task / "eval_results.txt")
        theirs = read_results(out / task / "eval_results.txt")
        metrics = [k for k in theirs if k.startswith("eval_") and k != "eval_examples"]
        assert metrics and theirs["global_step"] == "8"
        for key in metrics:
            assert float(ours[key]) == pytest.approx(float(theirs[key]), abs=1e-5), (task, key)


@pytest.mark.parametrize("extra,message", BAD_FLAGS)
def test_bad_flag_combinations_are_one_line(scripts, extra, message):
    proc, _ = scripts[f"bad{BAD_FLAGS.index((extra, message))}"].result()
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_classifier_mgpu.py: ERROR: ") and message in last, last


def test_mean_metric_names():
    assert multitask_mean_metric(["eval_accuracy", "eval_accuracy"]) == \
        "mean_eval_accuracy"
    assert multitask_mean_metric(["eval_loss", "eval_mse"]) == "mean_best_loss"
    assert multitask_mean_metric(["eval_f1_micro", "eval_pearson"]) == "mean_best_metric"
