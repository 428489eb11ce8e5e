"""The execution context's `inference_kernels` (model/execution.py), entered by the serving
export: the attention's head transposes run on the activations' bits as integers and its batched
products as `BatchMatMulV3` (ops TensorFlow's oneDNN rewrite leaves alone), with the outputs of
the plain model. Dropout is off (inference only: a bitcast has no gradient)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_mgpu.model import execution, modeling
from bert_mgpu.model.bert_config import BertConfig

CONFIG = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.1,
              attention_probs_dropout_prob=0.1)


def _ops(function, *args):
    """Op types of the traced graph of `function`, nested functions included."""
    graph = function.get_concrete_function(*args).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return [(n.op, n.attr["T"].type if "T" in n.attr else None) for n in nodes]


@pytest.mark.parametrize("compute_dtype", [tf.float32, tf.bfloat16])
def test_same_outputs_without_float_transposes(compute_dtype):
    model = modeling.BertModel(BertConfig(**CONFIG), compute_dtype=compute_dtype)
    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(1, 50, size=(3, 11)), tf.int32)
    mask = tf.constant((np.arange(11)[None] < np.array([[11], [6], [1]])).astype(np.int32))
    segments = tf.constant((np.arange(11)[None] >= 4).repeat(3, 0).astype(np.int32))

    def run(kernels, first_token_only):
        def call(ids, mask, segments):
            with execution.entered(inference_kernels=kernels):
                out = model(ids, mask, segments, training=False,
                            first_token_only=first_token_only)
            return out.sequence_output, out.pooled_output
        return tf.function(call, autograph=False)

    for first_token_only in (False, True):
        plain, fast = run(False, first_token_only), run(True, first_token_only)
        for got, want in zip(fast(ids, mask, segments), plain(ids, mask, segments)):
            np.testing.assert_allclose(tf.cast(got, tf.float32), tf.cast(want, tf.float32),
                                       rtol=1e-5 if compute_dtype == tf.float32 else 1e-2,
                                       atol=1e-6 if compute_dtype == tf.float32 else 1e-2)
        ops = _ops(fast, ids, mask, segments)
        float_types = {tf.float32.as_datatype_enum, tf.bfloat16.as_datatype_enum}
        assert not [op for op in ops if op[0] == "Transpose" and op[1] in float_types]
        assert ("Bitcast", None) in [(op, None) for op, _ in ops]
        products = {op for op, _ in ops if op.startswith("BatchMatMul")}
        want_products = {"BatchMatMulV3"} if compute_dtype == tf.float32 else {"BatchMatMulV2"}
        assert products == want_products, products
        plain_ops = {op for op, _ in _ops(plain, ids, mask, segments)}
        assert "Bitcast" not in plain_ops and "BatchMatMulV3" not in plain_ops
