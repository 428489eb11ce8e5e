"""A task the engine was not written for: multiple choice, whose features are [B, C, L].

The engine knows no feature name (engine/contract.py): the task says where a batch's sequence
axis is and how its padding is cut. Here a SWAG-style toy task defined in this file trains on
the unchanged engine: 2 towers equal one device on the same global batch, and --pad_to_longest
cuts the padding along L, never the C choices.
"""

import numpy as np
import pytest
import tensorflow as tf
from _pretraining_data import TINY_CONFIG

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.model import heads, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.base import JobTask, MeanOverExamples, ratio

CHOICES, SEQ, MULTIPLE = 3, 12, 4
CONFIG = TINY_CONFIG
SEQUENCES = ("input_ids", "input_mask", "segment_ids")


class MultipleChoice(MeanOverExamples, tf.Module):
    """Each example is C (context, choice) sequences: `input_ids`, `input_mask`, `segment_ids`
    int32 [B, C, L], `label_ids` int32 [B] (the right choice). The encoder reads the B * C
    sequences, a one-output classifier layer scores each, and the loss is the cross-entropy
    over an example's C scores, averaged over the global batch (MeanOverExamples)."""

    def __init__(self, config):
        super().__init__(name=None)
        self.bert = modeling.BertModel(config)
        self.scorer = heads.ClassifierHead(config, 1, dropout_prob=0.0)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.scorer)

    def sequence_length(self, features):
        """None: the encoder reads [B * C, L], so dropout (off here) has no [B, L] layout."""
        del features
        return None

    def _logits(self, features, training):
        """float32 [B, C]."""
        shape = tf.shape(features["input_ids"])
        flat = [tf.reshape(features[name], [-1, shape[-1]]) for name in SEQUENCES]
        out = self.bert(*flat, training=training)
        return tf.reshape(self.scorer.logits(out.pooled_output, training=training), shape[:2])

    def per_example_loss(self, features, training):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=features["label_ids"], logits=self._logits(features, training))

    def eval_sums(self, features):
        logits = self._logits(features, training=False)
        correct = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), features["label_ids"])
        return {"correct": tf.reduce_sum(tf.cast(correct, tf.float32)),
                "num_examples": tf.cast(tf.shape(logits)[0], tf.float32)}

    @staticmethod
    def eval_metrics(sums):
        return {"eval_accuracy": ratio(sums["correct"], sums["num_examples"])}

    def predict(self, features):
        return {"probabilities": tf.nn.softmax(self._logits(features, training=False))}


def examples(n, seed=0):
    """n examples of C choices padded to SEQ; the longest choice has 6 tokens."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(2, 7, size=[n, CHOICES])
    lengths[0, 1] = 6
    mask = (np.arange(SEQ)[None, None, :] < lengths[:, :, None]).astype(np.int32)
    return {"input_ids": rng.randint(1, CONFIG["vocab_size"], size=[n, CHOICES, SEQ])
            .astype(np.int32) * mask,
            "input_mask": mask,
            "segment_ids": (np.arange(SEQ)[None, None, :] >= 2).astype(np.int32) * mask,
            "label_ids": rng.randint(0, CHOICES, size=[n]).astype(np.int32)}


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    tf.random.set_seed(11)
    task = MultipleChoice(BertConfig.from_dict(CONFIG))
    return checkpoint.write_bundle(str(tmp_path_factory.mktemp("mc") / "init" / "model.ckpt"),
                                   task.named_variables())


def train(tmp_path, init, n_gpus, trim):
    cfg = TrainConfig(output_dir=str(tmp_path / f"run{n_gpus}{trim}"),
                      train_batch_size=8 // n_gpus, n_gpus=n_gpus, num_train_steps=3,
                      num_warmup_steps=1, learning_rate=1e-3, save_checkpoints_steps=100,
                      log_every_n_steps=1, init_checkpoint=init,
                      pad_to_multiple_of=MULTIPLE if trim else 0,
                      dropout_layout_length=SEQ if trim else 0)
    task = MultipleChoice(BertConfig.from_dict(CONFIG))
    assert isinstance(task, JobTask)
    trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
    trainer.train(tf.data.Dataset.from_tensor_slices(examples(24)).batch(8))
    return trainer


def weights(trainer):
    return {k: v.numpy() for k, v in trainer.checkpoint_tensors().items()}


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


def test_padding_is_cut_along_the_sequence_axis_not_the_choices(tmp_path, init):
    trainer = train(tmp_path, init, n_gpus=1, trim=True)
    batch = {k: tf.constant(v) for k, v in examples(4).items()}
    trimmed = trainer.trim(batch)
    # The longest choice has 6 tokens: L is cut to 8 (a multiple of 4), the 3 choices stay.
    for name in SEQUENCES:
        assert trimmed[name].shape == (4, CHOICES, 8), name
        np.testing.assert_array_equal(trimmed[name], batch[name][:, :, :8])
    np.testing.assert_array_equal(trimmed["label_ids"], batch["label_ids"])
    result = trainer.evaluate(tf.data.Dataset.from_tensor_slices(examples(10)).batch(4))
    assert 0.0 <= result["eval_accuracy"] <= 1.0 and result["global_step"] == 3


def test_towers_equal_one_device_and_trimmed_equals_padded(tmp_path, init):
    one = weights(train(tmp_path, init, n_gpus=1, trim=False))
    two = weights(train(tmp_path, init, n_gpus=2, trim=False))
    assert max_diff(two, one) <= 1e-5
    # Trimmed batches: the padding is masked out of attention, so the same update.
    assert max_diff(weights(train(tmp_path, init, n_gpus=2, trim=True)), one) <= 1e-5
