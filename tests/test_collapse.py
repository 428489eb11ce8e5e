"""Collapse is never silent (metrics/collapse.py, evaluation.CollapseWatch): the keys that show
it in the evaluation results of every task type, computed through the tasks' own evaluation
path on crafted model outputs (collapsed and healthy), the training-loss rule on real training
runs (one that cannot move, one that learns), and the warning each logs (or does not)."""

import math

import numpy as np
import pytest
import tensorflow as tf
from _pretraining_data import TINY_CONFIG
from absl import logging

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.engine import evaluation, towers, training
from bert_mgpu.metrics import collapse
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import (
    BertClassifier,
    BertMultiLabelClassifier,
    BertRegressor,
    FullEvaluation,
)
from bert_mgpu.tasks.ner import TaggingTask

# Two layers: the learning case's 30 updates were set at this depth (one layer learns less).
CONFIG = BertConfig.from_dict(dict(TINY_CONFIG, num_hidden_layers=2))
WARNING = "Fine-tuning looks collapsed"


def trainer_for(task, tmp_path, steps=1, **kw):
    cfg = TrainConfig(output_dir=str(tmp_path), train_batch_size=8, num_train_steps=steps,
                      num_warmup_steps=kw.pop("num_warmup_steps", 0), **kw)
    return training.Trainer(task, cfg, towers.tower_devices(1))


def crafted(task, name):
    """The task's output layer returns `features[name]` (as tests/test_task_types.py)."""
    task._logits = lambda features, training: tf.cast(features[name], tf.float32)
    return task


class Watched:
    """A trainer watched as the fine-tuning jobs watch theirs: its evaluation (FullEvaluation)
    checked by a CollapseWatch, its training recorded by the watch's on_step and judged at the
    end."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.watch = evaluation.CollapseWatch(trainer.cfg, trainer.global_step)

    def evaluate(self, dataset):
        return self.watch.check(FullEvaluation(self.trainer).evaluate(dataset))

    def train(self, dataset):
        self.trainer.train(dataset, on_step=self.watch.on_step())
        self.watch.after_training()

    def predict(self, dataset):
        return self.trainer.predict(dataset)

    def check(self, result):
        return self.watch.check(result)


def batches(values, batch_size=3):
    return tf.data.Dataset.from_tensor_slices(values).batch(batch_size)


@pytest.fixture
def warnings(monkeypatch):
    """The messages logging.warning is called with, in order."""
    logged = []
    real = logging.warning

    def record(msg, *args, **kwargs):
        logged.append(msg % args if args else msg)
        real(msg, *args, **kwargs)

    monkeypatch.setattr(logging, "warning", record)
    return logged


class ClassifierFromLogits(BertClassifier):
    """A BertClassifier whose logits are `features["logits"]` (its head's output replaced), so
    its own eval_sums / eval_metrics run on known predictions."""

    def _forward(self, features, training):
        logits = tf.cast(features["logits"], tf.float32)
        labels = tf.reshape(features["label_ids"], [-1])
        log_probs = tf.nn.log_softmax(logits)
        per_example = -tf.reduce_sum(tf.one_hot(labels, self.num_labels) * log_probs, -1)
        return {"logits": logits, "per_example_loss": per_example,
                "probabilities": tf.exp(log_probs)}


def classifier_data(logits):
    n = len(logits)
    return {"logits": np.array(logits, np.float32),
            "label_ids": np.array([[i % 2] for i in range(n)], np.int32),
            "input_ids": np.zeros([n, 4], np.int32)}


def test_classifier_predicting_one_class_warns_and_says_so_in_its_results(tmp_path, warnings):
    """A model whose every dev prediction is class 0 (of 2; the dev labels alternate):
    eval_predicted_classes = 1, accuracy at the majority rate, and a warning naming it and
    what to try (with Google's optimizer: --adam_bias_correction first)."""
    watch = Watched(
        trainer_for(ClassifierFromLogits(CONFIG, 2), tmp_path, adam_bias_correction=False,
                    learning_rate=5e-5))
    result = watch.evaluate(batches(classifier_data([[2.0, -1.0]] * 7)))
    assert result[collapse.PREDICTED_CLASSES] == 1
    assert result["eval_accuracy"] == pytest.approx(4 / 7)
    assert collapse.LOSS_CHANGE not in result  # no training in this process: not judged
    assert len(warnings) == 1 and warnings[0].startswith(WARNING), warnings
    message = warnings[0]
    assert "predicts one class for every dev example (eval_predicted_classes = 1)" in message
    assert "--adam_bias_correction=true" in message
    assert "a lower --learning_rate (this run: 5e-05)" in message
    assert "more --num_train_epochs" in message
    # The same evaluation again (periodic at the last step, then the final one): logged once.
    watch.evaluate(batches(classifier_data([[2.0, -1.0]] * 7)))
    assert len(warnings) == 1


def test_healthy_classifier_does_not_warn(tmp_path, warnings):
    watch = Watched(trainer_for(ClassifierFromLogits(CONFIG, 2), tmp_path))
    logits = [[2.0, -1.0], [-1.0, 2.0]] * 3 + [[-1.0, 2.0]]
    result = watch.evaluate(batches(classifier_data(logits)))
    assert result[collapse.PREDICTED_CLASSES] == 2 and warnings == []


def test_advice_leaves_out_what_the_run_already_did(tmp_path, warnings):
    """With bias-corrected Adam (the fine-tuning default, whose first steps are small) the
    advice is more epochs or another learning rate, either way."""
    watch = Watched(
        trainer_for(ClassifierFromLogits(CONFIG, 2), tmp_path, adam_bias_correction=True,
                    learning_rate=2e-5))
    watch.evaluate(batches(classifier_data([[-3.0, 1.0]] * 5)))
    assert len(warnings) == 1 and "--adam_bias_correction" not in warnings[0]
    assert warnings[0].endswith("Try more --num_train_epochs or another --learning_rate (this "
                                "run: 2e-05; lower if the loss jumped, higher if it never "
                                "moved).")


def test_regression_constant_predictions(tmp_path, warnings):
    task = crafted(BertRegressor(CONFIG), "scores")
    labels = np.array([[1], [3], [2], [4], [5]], np.float32)
    # The label std: mean 3, squares 4+0+1+1+4 = 10 over 5 -> sqrt(2).
    # The first predictions spread 0.00063 (< 1% of sqrt(2)), the second 3.1.
    for scores, collapsed in (([3.0, 3.0, 3.001, 3.0, 2.9995], True), ([1, 2, 2, 4, 10], False)):
        warnings.clear()
        data = {"scores": np.array(scores, np.float32)[:, None], "label_values": labels,
                "input_ids": np.zeros([5, 4], np.int32)}
        watch = Watched(trainer_for(task, tmp_path))
        result = watch.evaluate(batches(data, 2))
        assert result[collapse.LABEL_STD] == pytest.approx(math.sqrt(2), rel=1e-9)
        assert result[collapse.PREDICTION_STD] == pytest.approx(np.std(scores), abs=1e-6)
        assert (len(warnings) == 1) == collapsed, warnings
        if collapsed:
            assert "predicts a constant: its predictions' standard deviation on the dev set " \
                "is 0.000" in warnings[0] and "the labels' 1.41" in warnings[0], warnings


def test_multilabel_same_label_set_for_every_example(tmp_path, warnings):
    task = crafted(BertMultiLabelClassifier(CONFIG, 3), "logits")
    truth = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0], [1, 1, 0]], np.float32)
    cases = [  # (predicted sets as logit signs, eval_predicted_labels, constant)
        (np.full([4, 3], -2.0), 0, 1),                                       # nothing, ever
        (np.tile([2.0, -2.0, 2.0], [4, 1]), 2, 1),                           # {a, c} always
        (np.where(truth > 0, 2.0, -2.0), 3, 0),                              # the truth
    ]
    for logits, labels, constant in cases:
        warnings.clear()
        data = {"logits": logits.astype(np.float32), "label_values": truth,
                "input_ids": np.zeros([4, 4], np.int32)}
        result = Watched(trainer_for(task, tmp_path)).evaluate(batches(data))
        assert result[collapse.PREDICTED_LABELS] == labels
        assert result[collapse.CONSTANT_PREDICTIONS] == constant
        assert len(warnings) == constant, warnings
    assert "predicts the same 2 label(s) for every dev example" in collapse.findings(
        {collapse.CONSTANT_PREDICTIONS: 1, collapse.PREDICTED_LABELS: 2})[0]


def test_tagger_predicting_only_o(tmp_path, warnings):
    """NER: every labelled word predicted 'O' (the output bias decides) -> eval_predicted_tags
    = 1 and a warning; a bias that favours a tag on half the words -> 2, no warning. Only the
    labelled positions count (weight 0 positions predicted otherwise change nothing)."""
    task = TaggingTask(CONFIG, 3, tag_names=["O", "B-X", "I-X"])
    rng = np.random.RandomState(0)
    n, seq = 6, 5
    weights = (rng.rand(n, seq) < 0.6).astype(np.float32)
    data = {"input_ids": rng.randint(1, 50, [n, seq]).astype(np.int32),
            "input_mask": np.ones([n, seq], np.int32), "segment_ids": np.zeros([n, seq], np.int32),
            "label_ids": rng.randint(0, 3, [n, seq]).astype(np.int32), "label_weights": weights}
    watch = Watched(trainer_for(task, tmp_path))
    task.tagger.output_bias.assign([100.0, 0.0, 0.0])
    result = watch.evaluate(batches(data))
    assert result[collapse.PREDICTED_TAGS] == 1
    assert len(warnings) == 1 and "predicts one tag (as a rule 'O') for every dev word" \
        in warnings[0]
    warnings.clear()
    task.tagger.output_bias.assign([0.0, 0.0, 0.0])
    counts = np.zeros(3)
    for predicted, w in zip(watch.predict(batches(data))["tag_ids"], weights):
        counts += np.bincount(predicted[w > 0], minlength=3)
    result = watch.evaluate(batches(data))
    assert result[collapse.PREDICTED_TAGS] == np.count_nonzero(counts) > 1
    assert warnings == []


def test_loss_change_rule():
    assert collapse.loss_change([0.7] * 19) is None  # too few updates to judge
    # 40 updates: windows of 5; 0.70 -> 0.69 is -1.4%, 0.693 -> 0.6931 is +0.01%.
    assert collapse.loss_change([0.7] * 35 + [0.69] * 5) == pytest.approx(-0.01 / 0.7)
    flat = collapse.loss_change([0.693] * 35 + [0.6931] * 5)
    assert abs(flat) < collapse.LOSS_TOLERANCE
    assert collapse.findings({collapse.LOSS_CHANGE: flat}, 40)[0].startswith(
        "the training loss has stayed within 1% of its start over 40 updates")
    assert collapse.findings({collapse.LOSS_CHANGE: -0.02}) == []
    # A multi-task run's keys name the task.
    assert collapse.findings({"tsv_1/eval_predicted_classes": 1})[0].startswith(
        "the model of task tsv_1 predicts one class")


def classifier_records(path, n=64, seq=8, seed=3):
    """Class 1 = words from one half of the vocabulary, class 0 from the other: learnable by a
    tiny model in a few dozen updates."""
    from bert_mgpu.data import features, tfrecord
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(n):
            label = i % 2
            ids = rng.randint(10, 25, seq) if label else rng.randint(25, 40, seq)
            ids[0] = 2
            w.write(tfrecord.encode_example({
                "input_ids": ids, "input_mask": [1] * seq, "segment_ids": [0] * seq,
                "label_ids": [label], "is_real_example": [1]}))
    return features.classifier_shapes(seq)


@pytest.mark.parametrize("learning_rate,flat", [(1e-12, True), (3e-3, False)])
def test_flat_training_loss_is_reported(tmp_path, warnings, learning_rate, flat):
    """30 real updates of a tiny classifier: at learning rate 1e-12 nothing moves (the batch
    losses differ only by their examples: |train_loss_change| < 1%, a warning at the end of
    training and in the results); at 3e-3 it learns (the loss falls well over 1%, both
    classes predicted: no warning)."""
    from bert_mgpu.data import input_pipeline
    shapes = classifier_records(tmp_path / "train.tf_record")
    config = CONFIG.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    task = BertClassifier(config, 2)
    task.classifier.dropout_prob = 0.0
    watch = Watched(trainer_for(
        task, tmp_path / "out", steps=30, num_warmup_steps=3,
        learning_rate=learning_rate, adam_bias_correction=True, log_every_n_steps=100))
    watch.train(input_pipeline.record_dataset([str(tmp_path / "train.tf_record")], shapes, 8,
                                              True, seed=1, shuffle_buffer=0))
    result = watch.evaluate(input_pipeline.record_dataset(
        [str(tmp_path / "train.tf_record")], shapes, 16, is_training=False))
    change = result[collapse.LOSS_CHANGE]
    loss_warnings = [w for w in warnings if "the training loss has stayed within 1%" in w]
    if flat:
        assert abs(change) < collapse.LOSS_TOLERANCE, change
        # At the end of training (the loss alone), then in the evaluation (with its results).
        assert len(loss_warnings) == 2 and all("over 30 updates" in w for w in loss_warnings)
        assert loss_warnings[0].startswith(f"{WARNING} at the end of training at global_step "
                                           f"30: the training loss has stayed")
        assert loss_warnings[1].startswith(f"{WARNING} in the evaluation at global_step 30")
    else:
        assert change < -0.1, change
        assert loss_warnings == [] and result[collapse.PREDICTED_CLASSES] == 2


class LossOnlyTrainer:
    """What a watched training uses of a Trainer: `train(dataset, on_step)` calling on_step
    with each update's loss from the step after its checkpoint, `cfg`, `is_chief`,
    `global_step`."""

    def __init__(self, output_dir, losses, resume_at=0, stop_at=None):
        self.cfg = TrainConfig(output_dir=str(output_dir), num_train_steps=len(losses),
                               num_warmup_steps=2)
        self.is_chief = True
        self.global_step = tf.Variable(resume_at, dtype=tf.int64)
        self.losses, self.stop_at = losses, stop_at

    def train(self, dataset, on_step=None):
        for step in range(int(self.global_step.numpy()) + 1, len(self.losses) + 1):
            self.global_step.assign(step)
            if on_step(step, {"loss": tf.constant(self.losses[step - 1])}) or \
                    step == self.stop_at:
                return {}
        return {}


def test_the_loss_record_resumes_exactly(tmp_path, warnings):
    """Killed after update 17 (checkpoint at 12: the file has lines 13-17 and a line cut
    mid-write), rerun from 12: the record keeps 1-12, recomputes 13-30, and judges the loss as
    the uninterrupted run does (30 updates, not the rerun's 18); so does an evaluation alone."""
    losses = [0.7 - 0.001 * i for i in range(30)]
    (tmp_path / "whole").mkdir()
    (tmp_path / "killed").mkdir()
    whole = Watched(LossOnlyTrainer(tmp_path / "whole", losses))
    whole.train(None)
    want = whole.check({})[collapse.LOSS_CHANGE]
    assert want == pytest.approx((np.mean(losses[-5:]) - np.mean(losses[:5]))
                                 / np.mean(losses[:5]))
    out = tmp_path / "killed"
    Watched(LossOnlyTrainer(out, losses, stop_at=17)).train(None)
    with open(out / evaluation.LOSS_FILE, "a") as f:
        f.write("18\t0.6")  # cut by the kill
    rerun = Watched(LossOnlyTrainer(out, losses, resume_at=12))
    rerun.train(None)
    assert rerun.check({})[collapse.LOSS_CHANGE] == want
    lines = (out / evaluation.LOSS_FILE).read_text().splitlines()
    assert [int(line.split("\t")[0]) for line in lines] == list(range(1, 31))
    assert [w for w in warnings if "over 30 updates" in w] == [w for w in warnings
                                                               if "updates" in w]
    # --do_eval alone on the finished run (no training in that process): the file's record.
    evaluate_only = Watched(LossOnlyTrainer(out, losses, resume_at=30))
    assert evaluate_only.check({})[collapse.LOSS_CHANGE] == want
