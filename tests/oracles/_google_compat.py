"""Shims that let Google's TF1 BERT code (bert-tensorflow 1.0.4) import under TF 2.21.

`tensorflow.contrib` is gone since TF 2.0; Google's modeling.py only uses
`contrib.layers.layer_norm`, replaced here by a function with the same contract (variables
`<scope>/beta`, `<scope>/gamma`, normalization over the last axis, variance epsilon 1e-12, as
contrib's implementation). Oracle venv only.
"""

import sys
import types

import tensorflow as tf

tf1 = tf.compat.v1


def _contrib_layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    """tf.contrib.layers.layer_norm for the arguments Google's modeling.py passes."""
    assert begin_norm_axis == -1 and begin_params_axis == -1
    with tf1.variable_scope(scope, default_name="LayerNorm"):
        depth = inputs.shape[-1]
        beta = tf1.get_variable("beta", [depth], initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", [depth], initializer=tf1.ones_initializer())
        mean, variance = tf.nn.moments(inputs, [-1], keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                         variance_epsilon=1e-12)


def install_contrib_shim():
    layers = types.ModuleType("tensorflow.contrib.layers")
    layers.layer_norm = _contrib_layer_norm
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = layers
    sys.modules["tensorflow.contrib"] = contrib
    sys.modules["tensorflow.contrib.layers"] = layers
