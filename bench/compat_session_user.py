"""A session-based BERT predictor in TF1 style (bench/compat_session.py runs it): placeholders,
`modeling.BertModel` with Google's signature, a random-weight model of the given shape, then
`--calls` timed `sess.run` of the pooled output on one batch after a warm-up call. Prints one
line `ms_per_call=<median over 5 rounds>` on stdout. Written for the benchmark (not a user's
file); it runs unchanged with `python -m bert_mgpu.compat` and with Google's modules."""

import json
import statistics
import time

import modeling
import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("config_json", "{}", "bert_config keys (JSON)")
flags.DEFINE_integer("batch_size", 32, "examples per call")
flags.DEFINE_integer("seq_length", 128, "tokens per example")
flags.DEFINE_integer("calls", 10, "calls per round")


def main(_):
    config = modeling.BertConfig.from_dict(json.loads(FLAGS.config_json))
    ids = tf.placeholder(tf.int32, [None, None], name="input_ids")
    mask = tf.placeholder(tf.int32, [None, None], name="input_mask")
    model = modeling.BertModel(config=config, is_training=False, input_ids=ids,
                               input_mask=mask, use_one_hot_embeddings=False)
    pooled = model.get_pooled_output()
    rng = np.random.RandomState(0)
    feed = {ids: rng.randint(1, config.vocab_size, (FLAGS.batch_size, FLAGS.seq_length)),
            mask: np.ones((FLAGS.batch_size, FLAGS.seq_length), np.int32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(pooled, feed)
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(FLAGS.calls):
                sess.run(pooled, feed)
            rounds.append((time.perf_counter() - start) * 1000.0 / FLAGS.calls)
    print(f"ms_per_call={statistics.median(rounds):.2f}")


if __name__ == "__main__":
    tf.app.run()
