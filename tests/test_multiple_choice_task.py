"""The multiple-choice task (bert_mgpu/tasks/multiple_choice.py): Google's variable
names, and with dropout on, 2 towers (and 2 accumulated micro-batches) give the update of one
device on the same global batch; the features are the [B, C, L] records the data module
writes."""

import os

import numpy as np
import pytest
import tensorflow as tf
from _pretraining_data import TINY_CONFIG

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import multiple_choice_data as mc
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.base import JobTask
from bert_mgpu.tasks.multiple_choice import BertMultipleChoice
from bert_mgpu.tokenization import FullTokenizer

CHOICES, SEQ = 4, 16
WORDS = ["it", "rains", "she", "opens", "an", "umbrella", "runs", "home", "sings", "the", "dog",
         "barks", "a", "man", "cooks", "dinner", "."]
CONFIG = dict(TINY_CONFIG, vocab_size=5 + len(WORDS))
DROPOUT_CONFIG = dict(CONFIG, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """24 questions written by the data module: [C, L] records, L = SEQ."""
    folder = tmp_path_factory.mktemp("mc_records")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    rng = np.random.RandomState(0)
    examples = []
    for i in range(24):
        def sentence(n):
            return " ".join(rng.choice(WORDS, size=n))
        choices = tuple(f"she {sentence(rng.randint(1, 8))}" for _ in range(CHOICES))
        examples.append(mc.MultipleChoiceExample(f"train-{i}", sentence(rng.randint(3, 12)),
                                                 choices, int(rng.randint(CHOICES))))
    path = str(folder / "train.tf_record")
    mc.write_features(examples, SEQ, FullTokenizer(str(vocab), True), path)
    return path


def dataset(path, batch):
    return tf.data.TFRecordDataset(path).batch(batch).map(
        lambda s: mc.parse_multiple_choice(s, CHOICES, SEQ))


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    tf.random.set_seed(11)
    task = BertMultipleChoice(BertConfig.from_dict(CONFIG), CHOICES)
    return checkpoint.write_bundle(str(tmp_path_factory.mktemp("mc") / "init" / "model.ckpt"),
                                   task.named_variables())


def train(tmp_path, init, records, name, n_gpus, accum=1, config=DROPOUT_CONFIG):
    cfg = TrainConfig(output_dir=str(tmp_path / name), train_batch_size=8 // (n_gpus * accum),
                      n_gpus=n_gpus, num_accumulation_steps=accum, num_train_steps=3,
                      num_warmup_steps=1, learning_rate=1e-3, save_checkpoints_steps=100,
                      log_every_n_steps=1, init_checkpoint=init)
    task = BertMultipleChoice(BertConfig.from_dict(config), CHOICES)
    assert isinstance(task, JobTask)
    trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
    trainer.train(dataset(records, 8))
    return trainer


def weights(trainer):
    return {k: v.numpy() for k, v in trainer.checkpoint_tensors().items()}


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


def test_variables_are_googles_with_a_one_output_classifier():
    task = BertMultipleChoice(BertConfig.from_dict(CONFIG), CHOICES)
    shapes = {name: v.shape.as_list() for name, v in task.named_variables().items()}
    assert shapes["output_weights"] == [1, CONFIG["hidden_size"]]
    assert shapes["output_bias"] == [1]
    assert {n for n in shapes if not n.startswith("bert/")} == {"output_weights",
                                                                  "output_bias"}


def test_with_dropout_on_towers_and_accumulation_equal_one_device(tmp_path, init, records):
    one = weights(train(tmp_path, init, records, "one", n_gpus=1))
    assert max_diff(weights(train(tmp_path, init, records, "two", n_gpus=2)), one) <= 1e-5
    assert max_diff(weights(train(tmp_path, init, records, "acc", n_gpus=1, accum=2)),
                    one) <= 1e-5
    # Dropout did act: the run differs from the dropout-off one.
    off = weights(train(tmp_path, init, records, "off", n_gpus=1, config=CONFIG))
    assert max_diff(one, off) > 1e-4


def test_evaluation_and_predictions(tmp_path, init, records):
    trainer = train(tmp_path, init, records, "eval", n_gpus=2)
    result = trainer.evaluate(dataset(records, 5))
    assert sorted(k for k in result if k.startswith("eval_")) == ["eval_accuracy", "eval_loss"]
    assert 0.0 <= result["eval_accuracy"] <= 1.0 and result["global_step"] == 3
    task = trainer.task
    batch = next(iter(dataset(records, 5)))
    probabilities = task.predict(batch)["probabilities"].numpy()
    assert probabilities.shape == (5, CHOICES)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    task.write_predictions(str(tmp_path), {"probabilities": probabilities})
    lines = open(os.path.join(tmp_path, "predict.txt")).read().split()
    assert lines == [str(i) for i in probabilities.argmax(-1)]
