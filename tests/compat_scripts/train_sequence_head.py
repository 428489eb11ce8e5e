"""A TF1-era training file in the style of users' NER code, written for tests/test_compat.py
(not a user's file; users' notebooks with such heads: tests/PROVENANCE.md). It puts its own
head on `model.get_sequence_output()`, initialises BERT from a checkpoint by Google's name
map, trains with `optimization.create_optimizer` in a `tf.Session`, and saves every variable
with a `tf.train.Saver`. Run by the runner (`python -m bert_mgpu.compat`) and with Google's modules
(tests/oracles/google_user_file.py); the tests compare the two checkpoints.

Dropout is off (`is_training=False`): its masks come from TensorFlow's random ops, which two
different graphs cannot share. The rate is constant (no warmup, decay over 10**9 steps): Google's
`create_optimizer` leaves it to the executor whether an update reads the rate of step t or t + 1.
"""

import modeling
import numpy as np
import optimization
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json")
flags.DEFINE_string("init_checkpoint", None, "BERT checkpoint")
flags.DEFINE_string("output", None, "checkpoint prefix to write")
flags.DEFINE_integer("steps", 3, "updates")
NUM_LABELS = 3


def build(config):
    input_ids = tf.placeholder(tf.int32, [None, None], name="input_ids")
    input_mask = tf.placeholder(tf.int32, [None, None], name="input_mask")
    labels = tf.placeholder(tf.int32, [None, None], name="labels")
    model = modeling.BertModel(config=config, is_training=False, input_ids=input_ids,
                               input_mask=input_mask, use_one_hot_embeddings=False)
    sequence = model.get_sequence_output()
    hidden = sequence.shape[-1].value
    rng = np.random.RandomState(5)
    weights = tf.get_variable(
        "ner/output_weights", [hidden, NUM_LABELS],
        initializer=tf.constant_initializer(rng.normal(0, 0.5, [hidden, NUM_LABELS])))
    bias = tf.get_variable("ner/output_bias", [NUM_LABELS],
                           initializer=tf.zeros_initializer())
    logits = tf.einsum("bsh,hl->bsl", sequence, weights) + bias
    mask = tf.cast(input_mask, tf.float32)
    per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)
    return (input_ids, input_mask, labels), loss


def main(_):
    config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
    rng = np.random.RandomState(9)
    ids = rng.randint(1, config.vocab_size, size=(4, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[2, 7:] = 0
    tags = rng.randint(0, NUM_LABELS, size=ids.shape).astype(np.int32)
    placeholders, loss = build(config)
    tvars = tf.trainable_variables()
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(tvars, FLAGS.init_checkpoint)
    tf.train.init_from_checkpoint(FLAGS.init_checkpoint, assignment_map)
    train_op = optimization.create_optimizer(loss, 1e-3, 10 ** 9, 0, False)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(FLAGS.steps):
            _, value = sess.run([train_op, loss], dict(zip(placeholders, (ids, mask, tags))))
            print("step %d loss %.6f" % (step, value))
        saver.save(sess, FLAGS.output)


if __name__ == "__main__":
    tf.app.run()
