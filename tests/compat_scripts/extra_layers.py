"""A TF1-era file that builds its own layers with Google's layer functions on top of BERT,
written for tests/test_compat.py (not a user's file): `modeling.transformer_model` (one more
encoder layer on `get_sequence_output()`), `modeling.attention_layer`,
`modeling.embedding_lookup` + `modeling.embedding_postprocessor`, `modeling.layer_norm`. BERT
comes from a checkpoint by Google's name map; every other variable gets values drawn from its
name (the same on any implementation). It saves the outputs and the variable list to --output
(.npz). Run by the runner and with Google's modules; the tests compare the two files.
"""

import zlib

import modeling
import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json")
flags.DEFINE_string("init_checkpoint", None, "BERT checkpoint")
flags.DEFINE_string("output", None, ".npz to write")


def build(config, ids, mask):
    model = modeling.BertModel(config=config, is_training=False, input_ids=ids,
                               input_mask=mask)
    sequence = model.get_sequence_output()
    attention_mask = modeling.create_attention_mask_from_input_mask(ids, mask)
    with tf.variable_scope("extra"):
        layers = modeling.transformer_model(
            sequence, attention_mask, hidden_size=config.hidden_size, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=24, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, do_return_all_layers=True)
    with tf.variable_scope("cross"):
        attended = modeling.attention_layer(layers[-1], sequence, attention_mask,
                                            num_attention_heads=2, size_per_head=8)
    with tf.variable_scope("second_embeddings"):
        embedded, table = modeling.embedding_lookup(ids, config.vocab_size, embedding_size=16)
        embedded = modeling.embedding_postprocessor(
            embedded, use_token_type=True, token_type_ids=tf.zeros_like(ids),
            token_type_vocab_size=2, max_position_embeddings=64, dropout_prob=0.0)
        normed = modeling.layer_norm(embedded, name="final_norm")
    return {"layer_0": layers[0], "layer_1": layers[1], "attended": attended,
            "embedded": embedded, "normed": normed}


def main(_):
    config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
    rng = np.random.RandomState(2)
    ids_value = rng.randint(1, config.vocab_size, size=(3, 10)).astype(np.int32)
    mask_value = np.ones_like(ids_value)
    mask_value[1, 6:] = 0
    ids = tf.placeholder(tf.int32, [None, None], name="input_ids")
    mask = tf.placeholder(tf.int32, [None, None], name="input_mask")
    outputs = build(config, ids, mask)
    tvars = tf.trainable_variables()
    assignment_map, loaded = modeling.get_assignment_map_from_checkpoint(
        tvars, FLAGS.init_checkpoint)
    tf.train.init_from_checkpoint(FLAGS.init_checkpoint, assignment_map)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        names = []
        for var in tvars:
            name = var.name[:-2]
            names.append(name)
            if name not in loaded:
                value = np.random.RandomState(zlib.crc32(name.encode())).normal(
                    0, 0.3, var.shape.as_list())
                var.load(value.astype(np.float32), sess)
        values = sess.run(outputs, {ids: ids_value, mask: mask_value})
    np.savez(FLAGS.output, names=np.array(names), **values)


if __name__ == "__main__":
    tf.app.run()
