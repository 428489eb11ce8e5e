"""BertModel and heads: Google's variable names and shapes, Google's numerics.

The references are Google's own code: `tests/golden/google_variables_2layer.json` is the variable
list Google's modeling.py + run_pretraining heads + run_classifier head create for TINY_CONFIG
(written by tests/oracles/google_modeling.py), and the parity tests run Google's modeling.py in
the oracle venv on the same weights and inputs.
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, run_json_request

from bert_mgpu.model import execution, heads, modeling
from bert_mgpu.model.bert_config import BertConfig

TINY_CONFIG = {
    "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
NUM_LABELS = 3
GOLDEN = os.path.join(REPO, "tests", "golden", "google_variables_2layer.json")


def build_all(config_dict=TINY_CONFIG, seed=1):
    tf.random.set_seed(seed)
    config = BertConfig.from_dict(config_dict)
    model = modeling.BertModel(config)
    mlm = heads.MaskedLMHead(config)
    nsp = heads.NextSentenceHead(config)
    clf = heads.ClassifierHead(config, NUM_LABELS)
    return config, model, mlm, nsp, clf


def dropout_stream(*args, **kwargs):
    """The context of the trainer's towers: dropout from a position-keyed `DropoutStream`."""
    return execution.entered(stream=execution.DropoutStream(*args, **kwargs))


def make_inputs(seed=0, batch=3, seq=16, preds=4):
    rng = np.random.RandomState(seed)
    lengths = [seq, 11, 5][:batch]
    input_ids = np.zeros([batch, seq], np.int32)
    input_mask = np.zeros([batch, seq], np.int32)
    segment_ids = np.zeros([batch, seq], np.int32)
    for b, n in enumerate(lengths):
        input_ids[b, :n] = rng.randint(1, 100, size=n)
        input_mask[b, :n] = 1
        segment_ids[b, n // 2:n] = 1
    positions = np.zeros([batch, preds], np.int32)
    ids = np.zeros([batch, preds], np.int32)
    weights = np.zeros([batch, preds], np.float32)
    for b, n in enumerate(lengths):
        k = min(preds, n - 2)
        positions[b, :k] = np.sort(rng.choice(np.arange(1, n), size=k, replace=False))
        ids[b, :k] = rng.randint(1, 100, size=k)
        weights[b, :k] = 1.0
    return {
        "input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
        "masked_lm_positions": positions, "masked_lm_ids": ids, "masked_lm_weights": weights,
        "next_sentence_labels": rng.randint(0, 2, size=[batch]).astype(np.int32),
        "label_ids": rng.randint(0, NUM_LABELS, size=[batch]).astype(np.int32),
    }


def test_variable_names_and_shapes_equal_googles():
    _, model, mlm, nsp, clf = build_all()
    ours = modeling.variable_shapes(modeling.merge_named_variables(model, mlm, nsp, clf))
    with open(GOLDEN) as f:
        google = {name: shape for name, shape in json.load(f)}
    assert sorted(ours) == sorted(google)
    assert ours == google


def test_golden_list_is_what_googles_code_creates(tmp_path):
    """Regenerates the golden list with Google's code (oracle venv) and compares."""
    inputs = make_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    run_json_request("google_modeling.py", {
        "config": TINY_CONFIG, "inputs": str(tmp_path / "in.npz"), "weights": None,
        "heads": True, "num_labels": NUM_LABELS, "output": str(tmp_path / "out.npz"),
        "names": str(tmp_path / "names.json")}, tmp_path)
    with open(tmp_path / "names.json") as f:
        regenerated = json.load(f)
    with open(GOLDEN) as f:
        assert json.load(f) == regenerated


def test_outputs_match_googles_modeling_on_same_weights(tmp_path):
    config, model, mlm, nsp, clf = build_all()
    named = modeling.merge_named_variables(model, mlm, nsp, clf)
    np.savez(tmp_path / "w.npz", **{k.replace("/", "|"): v.numpy() for k, v in named.items()})
    inputs = make_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    run_json_request("google_modeling.py", {
        "config": TINY_CONFIG, "inputs": str(tmp_path / "in.npz"),
        "weights": str(tmp_path / "w.npz"), "heads": True, "num_labels": NUM_LABELS,
        "output": str(tmp_path / "out.npz"), "names": str(tmp_path / "names.json")}, tmp_path)
    google = dict(np.load(tmp_path / "out.npz"))

    out = model(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"],
                training=False)
    tol = dict(atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.sequence_output, google["sequence_output"], **tol)
    np.testing.assert_allclose(out.pooled_output, google["pooled_output"], **tol)
    np.testing.assert_allclose(out.embedding_output, google["embedding_output"], **tol)
    for i, layer in enumerate(out.all_encoder_layers):
        np.testing.assert_allclose(layer, google[f"layer_{i}"], **tol)

    m = mlm(out.sequence_output, out.embedding_table, inputs["masked_lm_positions"],
            inputs["masked_lm_ids"], inputs["masked_lm_weights"])
    np.testing.assert_allclose(m["log_probs"], google["masked_lm_log_probs"], **tol)
    np.testing.assert_allclose(m["loss"], google["masked_lm_loss"], **tol)
    n = nsp(out.pooled_output, inputs["next_sentence_labels"])
    np.testing.assert_allclose(n["log_probs"], google["next_sentence_log_probs"], **tol)
    np.testing.assert_allclose(n["loss"], google["next_sentence_loss"], **tol)
    c = clf(out.pooled_output, inputs["label_ids"], training=False)
    np.testing.assert_allclose(c["logits"], google["classifier_logits"], **tol)
    np.testing.assert_allclose(c["probabilities"], google["classifier_probabilities"], **tol)
    np.testing.assert_allclose(c["loss"], google["classifier_loss"], **tol)


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(modeling.gelu(tf.constant(x)), expected, atol=1e-6)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x], np.float32)
    np.testing.assert_allclose(modeling.gelu_exact(tf.constant(x)), exact, atol=1e-6)
    assert modeling.get_activation("linear") is None
    with pytest.raises(ValueError, match="swish"):
        modeling.get_activation("swish")


def _google_gelu(x):
    """Google's modeling.gelu, op by op."""
    return x * (0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3)))))


def test_fused_gelu_is_googles_formula_and_its_gradient():
    # The reference: Google's formula in float64, differentiated by autodiff (not by the
    # hand-written gradient of the fused version under test).
    _assert_fused_activation_is(modeling._fused_gelu, _google_gelu, seed=6)


def _assert_fused_activation_is(fused, formula, seed):
    """`fused`'s values and gradient (float32, eager and traced) equal `formula`'s in float64
    differentiated by autodiff (not by the hand-written gradient under test), to 1e-5."""
    x = np.linspace(-8, 8, 3202).astype(np.float32).reshape(1601, 2)
    dy = np.random.default_rng(seed).standard_normal(x.shape).astype(np.float32)

    def run(fn, dtype):
        xs = tf.constant(x, dtype)
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = fn(xs)
        dx = tape.gradient(y, xs, output_gradients=tf.constant(dy, dtype))
        return [y.numpy(), dx.numpy()]

    want = run(formula, tf.float64)
    for got in (run(fused, tf.float32), run(tf.function(fused), tf.float32)):
        for name, g, w in zip(["y", "dx"], got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


def test_fused_exact_gelu_is_the_erf_formula_and_its_gradient():
    _assert_fused_activation_is(modeling._fused_gelu_exact, _erf_gelu, seed=7)


def test_written_out_exact_gelu_is_the_erf_formula_and_its_gradient():
    # The towers' erf GELU where XLA does not fuse it (a trace of any batch length).
    _assert_fused_activation_is(modeling._gelu_exact_written_out, _erf_gelu, seed=8)


def _erf_gelu(x):
    """The erf GELU, op by op."""
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


@pytest.mark.parametrize("act, fused_name, plain", [
    ("gelu", "_fused_gelu", _google_gelu), ("gelu_exact", "_fused_gelu_exact", _erf_gelu)])
def test_gelu_is_fused_in_the_trainers_towers_only(act, fused_name, plain):
    """In the trainer's towers (a context with a dropout stream) the encoder's GELU runs as
    XLA computations and the model's outputs and gradients equal Google's formula's to 1e-5
    with dropout 0.1; outside it (evaluation, prediction, the export) nothing is compiled."""
    config, model, _, _, clf = build_all(dict(TINY_CONFIG, num_hidden_layers=2, hidden_act=act))
    ids = tf.constant(np.random.RandomState(3).randint(1, 100, [3, 12]), tf.int32)
    labels = tf.constant([0, 2, 1])
    variables = list(model.named_variables().values()) + list(clf.named_variables().values())

    def step(ids):
        with dropout_stream(5, tf.constant(2, tf.int64), 0, 3):
            with tf.GradientTape() as tape:
                out = model(ids, training=True)
                loss = clf(out.pooled_output, labels, training=True)["loss"] + \
                    tf.reduce_sum(tf.square(out.sequence_output)) * 1e-2
            grads = tape.gradient(loss, variables)
        return out.sequence_output, [tf.convert_to_tensor(g) for g in grads]

    def run(fused):
        original = getattr(modeling, fused_name)
        if not fused:  # the formula op by op, in the same towers' setting
            setattr(modeling, fused_name, plain)
        try:
            fn = tf.function(step, autograph=False)
            return fn(ids), _xla_compiled_calls(fn.get_concrete_function(ids).graph)
        finally:
            setattr(modeling, fused_name, original)

    (plain_out, plain_grads), plain_compiled = run(False)
    (out, grads), compiled = run(True)
    assert compiled and not plain_compiled
    np.testing.assert_allclose(out, plain_out, atol=1e-5, rtol=1e-5)
    for v, a, b in zip(variables, plain_grads, grads):
        scale = max(1.0, float(np.abs(a).max()))
        np.testing.assert_allclose(b, a, atol=1e-5 * scale, rtol=1e-5, err_msg=v.name)
    evaluation = tf.function(lambda ids: model(ids, training=False).sequence_output)
    assert not _xla_compiled_calls(evaluation.get_concrete_function(ids).graph)


def test_exact_gelu_in_a_trace_of_any_length_has_its_gradient_written_out():
    """In the towers' trace of any sequence length (where XLA would compile once per length)
    the erf GELU runs op by op with its gradient written out: the outputs and gradients of
    Google's formula to 1e-5 with dropout 0.1, nothing compiled."""
    _, model, _, _, clf = build_all(dict(TINY_CONFIG, hidden_act="gelu_exact"))
    ids = tf.constant(np.random.RandomState(3).randint(1, 100, [3, 12]), tf.int32)
    labels = tf.constant([0, 2, 1])
    variables = list(model.named_variables().values()) + list(clf.named_variables().values())
    calls = []

    def step(ids):
        with dropout_stream(5, tf.constant(2, tf.int64), 0, 3), tf.GradientTape() as tape:
            out = model(ids, training=True)
            loss = clf(out.pooled_output, labels, training=True)["loss"] + \
                tf.reduce_sum(tf.square(out.sequence_output)) * 1e-2
        return out.sequence_output, [tf.convert_to_tensor(g)
                                     for g in tape.gradient(loss, variables)]

    def run(written_out):
        original = modeling._gelu_exact_written_out
        modeling._gelu_exact_written_out = (
            lambda x: calls.append(x) or original(x)) if written_out else _erf_gelu
        try:
            fn = tf.function(step, autograph=False,
                             input_signature=[tf.TensorSpec([3, None], tf.int32)])
            return fn(ids), _xla_compiled_calls(fn.get_concrete_function().graph)
        finally:
            modeling._gelu_exact_written_out = original

    (plain_out, plain_grads), _ = run(False)
    (out, grads), compiled = run(True)
    assert len(calls) == TINY_CONFIG["num_hidden_layers"] and not compiled
    np.testing.assert_allclose(out, plain_out, atol=1e-5, rtol=1e-5)
    for v, a, b in zip(variables, plain_grads, grads):
        scale = max(1.0, float(np.abs(a).max()))
        np.testing.assert_allclose(b, a, atol=1e-5 * scale, rtol=1e-5, err_msg=v.name)


@pytest.mark.parametrize("scale, offset", [(1.0, 0.0), (40.0, 1000.0)])
def test_vocabulary_cross_entropy_is_googles_loss_and_gradient(scale, offset):
    # Reference in float64 numpy: Google's -sum(one_hot * log_softmax(products + bias)) and its
    # gradient (softmax - one_hot) * dloss for the products and (summed over rows) the bias,
    # with weights on each row's loss as the MLM head applies them; large, shifted logits check
    # the max subtraction.
    rng = np.random.default_rng(3)
    products = (rng.standard_normal((9, 523)) * scale + offset).astype(np.float32)
    bias = rng.standard_normal(523).astype(np.float32)
    labels = rng.integers(0, 523, size=9)
    weights = rng.uniform(0.0, 2.0, size=9).astype(np.float32)
    # Google's bias_add is a float32 add (the logits near 1000 keep ~1e-4 of it).
    x64 = (products + bias).astype(np.float64)
    shifted = x64 - x64.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    one_hot = np.eye(523)[labels]
    expected_loss = -(one_hot * log_softmax).sum(axis=1)
    expected_grad = (np.exp(log_softmax) - one_hot) * weights[:, None]

    x, b = tf.constant(products), tf.constant(bias)
    with tf.GradientTape() as tape:
        tape.watch([x, b])
        loss = heads.vocabulary_cross_entropy(x, b, tf.constant(labels, tf.int64))
        weighted = tf.reduce_sum(loss * weights)
    grad, bias_grad = tape.gradient(weighted, [x, b])
    np.testing.assert_allclose(loss.numpy(), expected_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad.numpy(), expected_grad, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias_grad.numpy(), expected_grad.sum(axis=0), rtol=1e-5, atol=1e-6)
    # And the TensorFlow op Google's loss is usually replaced by, to float32 rounding.
    fused = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x + b)
    np.testing.assert_allclose(loss.numpy(), fused.numpy(), rtol=1e-6, atol=1e-5)
    # A label outside the vocabulary is an error (as TensorFlow's gather gives on CPU), not a
    # clamped index.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"523 is not in \[0, 523\)"):
        heads.vocabulary_cross_entropy(x, b, tf.constant([523] + list(labels[1:])))


def test_vocabulary_cross_entropy_takes_mixed_precision_products():
    # bf16 products (--precision=bf16): the loss is computed in float32 from their values, the
    # products' gradient comes back in bf16 and the bias's in float32.
    rng = np.random.default_rng(6)
    products = tf.cast(tf.constant(rng.standard_normal((5, 97)).astype(np.float32) * 4.0),
                       tf.bfloat16)
    bias = tf.constant(rng.standard_normal(97).astype(np.float32))
    labels = tf.constant(rng.integers(0, 97, size=5))
    with tf.GradientTape() as tape:
        tape.watch([products, bias])
        loss = heads.vocabulary_cross_entropy(products, bias, labels)
    grad, bias_grad = tape.gradient(loss, [products, bias])
    assert loss.dtype == tf.float32 and grad.dtype == tf.bfloat16
    assert bias_grad.dtype == tf.float32
    as_float = tf.cast(products, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([as_float, bias])
        want = heads.vocabulary_cross_entropy(as_float, bias, labels)
    want_grad, want_bias_grad = tape.gradient(want, [as_float, bias])
    np.testing.assert_array_equal(loss, want)
    np.testing.assert_allclose(tf.cast(grad, tf.float32), want_grad, rtol=1e-2, atol=1e-3)
    np.testing.assert_array_equal(bias_grad, want_bias_grad)


def test_masked_lm_loss_in_the_towers_equals_evaluations_formula():
    # The head's loss and gradients in the trainer's towers (the XLA-computed loss) equal the
    # ones evaluation computes op by op (Google's -log_softmax at the label), and evaluation
    # compiles nothing.
    config = modeling.BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=48)
    head = heads.MaskedLMHead(config)
    rng = np.random.default_rng(5)
    sequence = tf.constant(rng.standard_normal((3, 8, 32)).astype(np.float32))
    table = tf.Variable(rng.standard_normal((97, 32)).astype(np.float32) * 0.1)
    positions = tf.constant(rng.integers(0, 8, size=(3, 4)), tf.int32)
    labels = tf.constant(rng.integers(0, 97, size=(3, 4)), tf.int32)
    weights = tf.constant([[1.0, 1.0, 1.0, 0.0]] * 3)
    variables = [table] + list(head.named_variables().values())
    head.output_bias.assign(rng.standard_normal(97).astype(np.float32))

    def run(in_towers):
        def loss_and_grads():
            with tf.GradientTape() as tape:
                out = head(sequence, table, positions, labels, weights)
            return out["loss"], out["per_example_loss"], tape.gradient(out["loss"], variables)

        def traced():
            if not in_towers:
                return loss_and_grads()
            with dropout_stream(1, tf.constant(0), tf.constant(0), tf.constant(3)):
                return loss_and_grads()

        fn = tf.function(traced)
        result = fn()
        return result, _xla_compiled_calls(fn.get_concrete_function().graph)

    (loss, per_example, grads), compiled = run(True)
    (plain_loss, plain_per_example, plain_grads), plain_compiled = run(False)
    assert compiled and not plain_compiled
    np.testing.assert_allclose(loss, plain_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per_example, plain_per_example, rtol=1e-5, atol=1e-5)
    for v, a, b in zip(variables, plain_grads, grads):
        np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a),
                                   rtol=1e-5, atol=1e-6, err_msg=v.name)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_layer_norm_values_and_gradients_equal_autodiff_in_float64(dtype):
    # The reference: Google's LayerNorm formula in float64, differentiated by TensorFlow's
    # autodiff through tf.nn.moments (not by the hand-written gradient under test); rows of
    # scale 3 around 5 so the mean subtraction matters.
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 7, 64)) * 3.0 + 5.0).astype(np.float32)
    gamma = rng.standard_normal(64).astype(np.float32)
    beta = rng.standard_normal(64).astype(np.float32)
    dy = rng.standard_normal((2, 7, 64)).astype(np.float32)

    def gradients(fn, cast):
        xs, gs, bs = (tf.constant(cast(a)) for a in (x, gamma, beta))
        with tf.GradientTape() as tape:
            tape.watch([xs, gs, bs])
            y = fn(xs, gs, bs)
            loss = tf.reduce_sum(tf.cast(y, tf.float64) * dy.astype(np.float64))
        return [tf.cast(t, tf.float64).numpy() for t in [y] + tape.gradient(loss, [xs, gs, bs])]

    def reference(xs, gs, bs):
        mean, variance = tf.nn.moments(xs, axes=[-1], keepdims=True)
        return (xs - mean) * tf.math.rsqrt(variance + 1e-12) * gs + bs

    if dtype == tf.bfloat16:  # the reference sees the activations bf16 rounds them to
        x = x.astype(tf.bfloat16.as_numpy_dtype).astype(np.float32)
    want = gradients(reference, lambda a: a.astype(np.float64))
    if dtype == tf.float32:
        got = gradients(modeling.layer_norm, lambda a: a)
        tolerances = [1e-5, 1e-5, 1e-4, 1e-5]  # y, dx, dgamma (a sum over 14 rows), dbeta
    else:  # bf16 activations, float32 statistics and gradient math inside
        got = gradients(lambda xs, gs, bs: modeling.layer_norm(tf.cast(xs, tf.bfloat16), gs, bs),
                        lambda a: a)
        # bf16's 8-bit mantissa: y is rounded on the way out and dL/dy on the way back in.
        tolerances = [2e-2, 2e-2, 2e-2, 2e-2]
    for name, g, w, tol in zip(["y", "dx", "dgamma", "dbeta"], got, want, tolerances):
        np.testing.assert_allclose(g, w, rtol=tol if dtype == tf.bfloat16 else 0,
                                   atol=tol, err_msg=name)


def test_attention_ignores_padding_and_layer_norm_epsilon():
    """Changing the ids under input_mask == 0 must not change the real positions' outputs."""
    _, model, *_ = build_all()
    inputs = make_inputs()
    out1 = model(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    ids2 = np.where(inputs["input_mask"] == 1, inputs["input_ids"], 7)
    out2 = model(ids2, inputs["input_mask"], inputs["segment_ids"])
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(out1.sequence_output.numpy()[real],
                               out2.sequence_output.numpy()[real], atol=1e-5)
    # LayerNorm of a constant row is beta (variance 0, epsilon 1e-12 keeps it finite).
    y = modeling.layer_norm(tf.fill([2, 8], 3.0), tf.ones([8]), tf.fill([8], 0.5))
    np.testing.assert_allclose(y, np.full([2, 8], 0.5), atol=1e-6)


@pytest.mark.parametrize("changes", [{}, {"pre_layer_norm": True}])
def test_first_token_only_gives_the_same_pooled_output(changes):
    """The serving classifier's shortcut: the last layer computed for [CLS] only gives the
    pooler the same input (post-LN as Google, and pre-LN with its final LayerNorm), also inside
    a tf.function with a dynamic batch and length."""
    _, model, *_ = build_all(dict(TINY_CONFIG, **changes))
    inputs = make_inputs()
    args = (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    full = model(*args)
    spec = [tf.TensorSpec([None, None], tf.int32)] * 3
    first = tf.function(lambda *a: model(*a, first_token_only=True),
                        input_signature=spec)(*args)
    assert first.sequence_output.shape == (3, 1, 32)
    np.testing.assert_allclose(first.sequence_output[:, 0], full.sequence_output[:, 0],
                               atol=1e-5)
    np.testing.assert_allclose(first.pooled_output, full.pooled_output, atol=1e-6)
    np.testing.assert_allclose(first.all_encoder_layers[0], full.all_encoder_layers[0],
                               atol=1e-6)


@pytest.mark.parametrize("changes", [
    {}, {"pre_layer_norm": True, "share_parameters": "all", "embedding_size": 16}])
@pytest.mark.parametrize("first_token_only", [False, True])
def test_drop_padding_gives_the_padded_outputs_at_real_positions(changes, first_token_only):
    """Inference on the real tokens' rows only (the serving classifier's dense layers skip the
    padding): every layer equals the padded run at real positions and is 0 at the padding;
    the pooled output is the same (Google's post-LN; pre-LN + ALBERT's shared layers and
    embedding projection), also in a tf.function with a dynamic batch and length."""
    _, model, *_ = build_all(dict(TINY_CONFIG, **changes))
    inputs = make_inputs()
    args = (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    full = model(*args, first_token_only=first_token_only)
    spec = [tf.TensorSpec([None, None], tf.int32)] * 3
    dropped = tf.function(
        lambda *a: model(*a, first_token_only=first_token_only, drop_padding=True),
        input_signature=spec)(*args)
    np.testing.assert_allclose(dropped.pooled_output, full.pooled_output, atol=1e-6)
    real = inputs["input_mask"].astype(bool)
    layers = dropped.all_encoder_layers[:-1] if first_token_only else dropped.all_encoder_layers
    for ours, padded in zip(layers, full.all_encoder_layers):
        np.testing.assert_allclose(ours.numpy()[real], padded.numpy()[real], atol=1e-5)
        assert not ours.numpy()[~real].any()
    if first_token_only:
        np.testing.assert_allclose(dropped.sequence_output, full.sequence_output, atol=1e-5)


# A ModernBERT-like model: RoPE, a local (band) layer between global ones, pre-LN, gated FFN.
_ROPE_CONFIG = dict(
    vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
    intermediate_size=32, hidden_act="gelu_exact", max_position_embeddings=64,
    type_vocab_size=0, pre_layer_norm=True, use_bias=False, gated_ffn=True,
    position_embedding_type="rope", local_attention_window=4,
    global_attention_every_n_layers=2, layer_norm_bias=False, first_layer_attention_norm=False,
    head_bias=False, classifier_pooling="mean", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1)


@pytest.mark.parametrize("config_dict,recompute", [
    (TINY_CONFIG, False), (TINY_CONFIG, True),
    (dict(TINY_CONFIG, pre_layer_norm=True, share_parameters="all", embedding_size=16), False),
    (_ROPE_CONFIG, False)])
@pytest.mark.parametrize("full_length,examples", [(None, 3), (24, 3), (None, 1)])
def test_drop_padding_in_training_equals_the_padded_run(config_dict, recompute, full_length,
                                                        examples):
    """Training on the real tokens' rows only (dropout 0.1 from the trainer's stream, in the
    batch's layout, a longer dropout layout, or the 3 rows one example's choices as multiple
    choice's [C, L] blocks): every layer at the real positions, the pooled
    output and every variable's gradient (the word embeddings' sparse one included) equal the
    padded run's; also with gradient checkpointing (Google's post-LN; pre-LN + ALBERT's shared
    layers and embedding projection; RoPE with a band-attention layer and mean pooling)."""
    _, model, *_ = build_all(config_dict)
    inputs = make_inputs()
    args = (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    real = inputs["input_mask"].astype(bool)
    rng = np.random.RandomState(3)
    probe = tf.constant(rng.normal(size=[3, 16, model.config.hidden_size]), tf.float32)
    variables = list(model.named_variables().values())

    def run(drop_padding):
        with dropout_stream(7, 5, 2, examples, seq_length=16 if full_length else None,
                            full_length=full_length), \
                execution.entered(recompute_layers=recompute), tf.GradientTape() as tape:
            out = model(*args, training=True, drop_padding=drop_padding)
            loss = tf.reduce_sum(out.pooled_output ** 2) + tf.reduce_sum(
                out.sequence_output * probe * inputs["input_mask"][..., None])
        grads = tape.gradient(loss, variables)
        return out, [tf.convert_to_tensor(g).numpy() for g in grads]

    full, full_grads = run(False)
    dropped, dropped_grads = run(True)
    assert np.abs(full.pooled_output.numpy()).max() > 0.1
    np.testing.assert_allclose(dropped.pooled_output, full.pooled_output, atol=1e-5)
    for ours, padded in zip(dropped.all_encoder_layers, full.all_encoder_layers):
        np.testing.assert_allclose(ours.numpy()[real], padded.numpy()[real], atol=1e-5)
        assert not ours.numpy()[~real].any()  # the padding was not computed
    for var, ours, padded in zip(variables, dropped_grads, full_grads):
        assert np.abs(padded).max() > 0, var.name
        np.testing.assert_allclose(ours, padded, atol=1e-5, err_msg=var.name)
    # Dropout is on: another step draws other masks, so other outputs.
    with dropout_stream(7, 6, 2, examples):
        other = model(*args, training=True, drop_padding=True).pooled_output
    assert np.abs(other.numpy() - full.pooled_output.numpy()).max() > 1e-3


@pytest.mark.parametrize("config_dict,recompute", [
    (TINY_CONFIG, False), (TINY_CONFIG, True),
    (dict(TINY_CONFIG, pre_layer_norm=True, share_parameters="all", embedding_size=16), False)])
@pytest.mark.parametrize("full_length", [None, 24])
def test_first_token_only_in_training_equals_the_padded_run(config_dict, recompute, full_length):
    """Training a loss that reads the last layer at [CLS] only, with that layer computed for
    [CLS] only (and the real tokens' rows only before it): dropout 0.1 from the trainer's
    stream (the batch's layout or a longer one) gives the first tokens the padded run's masks,
    so the pooled output, [CLS]'s last hidden state and every variable's gradient equal the
    padded run's, and another step's masks give other outputs."""
    _, model, *_ = build_all(config_dict)
    inputs = make_inputs()
    args = (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    probe = tf.constant(np.random.RandomState(3).normal(size=[3, model.config.hidden_size]),
                        tf.float32)
    variables = list(model.named_variables().values())

    def run(first_only, step=5):
        with dropout_stream(7, step, 2, 3, seq_length=16 if full_length else None,
                            full_length=full_length), \
                execution.entered(recompute_layers=recompute), tf.GradientTape() as tape:
            out = model(*args, training=True, drop_padding=first_only,
                        first_token_only=first_only)
            loss = tf.reduce_sum(out.pooled_output ** 2) + tf.reduce_sum(
                out.sequence_output[:, 0] * probe)
        grads = tape.gradient(loss, variables)
        return out, [tf.convert_to_tensor(g).numpy() for g in grads]

    full, full_grads = run(False)
    first, first_grads = run(True)
    assert first.sequence_output.shape[1] == 1  # the last layer ran for [CLS] only
    np.testing.assert_allclose(first.pooled_output, full.pooled_output, atol=1e-5)
    np.testing.assert_allclose(first.sequence_output[:, 0], full.sequence_output[:, 0],
                               atol=1e-5)
    for var, ours, padded in zip(variables, first_grads, full_grads):
        assert np.abs(padded).max() > 0, var.name
        np.testing.assert_allclose(ours, padded, rtol=1e-5, atol=1e-5, err_msg=var.name)
    other, _ = run(True, step=6)
    assert np.abs(other.pooled_output.numpy() - full.pooled_output.numpy()).max() > 1e-3


@pytest.mark.parametrize("classifier_input", ["pooled", "cls", "mean", "cls_last4"])
def test_sequence_heads_predict_as_the_padded_model(classifier_input):
    """Eval and predict of the sequence-level tasks run without the padding (and the last layer
    for [CLS] only when the head reads nothing else): the same probabilities / scores as the
    padded model's features through the same head."""
    from bert_mgpu.tasks.classifier import BertClassifier, BertRegressor

    config = BertConfig.from_dict(dict(TINY_CONFIG, num_hidden_layers=4))
    inputs = make_inputs()
    features = {k: tf.constant(inputs[k]) for k in ("input_ids", "input_mask", "segment_ids")}
    tf.random.set_seed(3)
    for task in (BertClassifier(config, NUM_LABELS, classifier_input=classifier_input),
                 BertRegressor(config, classifier_input=classifier_input)):
        out = task.bert(features["input_ids"], features["input_mask"], features["segment_ids"])
        head_input = heads.classifier_features(out, features["input_mask"], classifier_input)
        if isinstance(task, BertClassifier):
            expected = task.classifier(head_input)["probabilities"]
            got = task.predict(features)["probabilities"]
        else:
            expected = task.classifier.logits(head_input)[:, 0]
            got = task.predict(features)["predictions"]
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_dropout_only_in_training():
    _, model, *_ = build_all()
    inputs = make_inputs()
    args = (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    a = model(*args, training=False).sequence_output
    b = model(*args, training=False).sequence_output
    np.testing.assert_array_equal(a, b)
    c = model(*args, training=True).sequence_output
    assert np.abs(a.numpy() - c.numpy()).max() > 1e-3


def test_model_in_tf_function_creates_no_variables_and_is_reused():
    _, model, mlm, *_ = build_all()
    inputs = make_inputs()

    @tf.function
    def two_towers(ids, mask, seg):
        # The same model called twice in one trace, as the tower trainer does.
        a = model(ids[:2], mask[:2], seg[:2]).pooled_output
        b = model(ids[2:], mask[2:], seg[2:]).pooled_output
        return tf.concat([a, b], 0)

    n_vars = len(model.trainable_variables)
    towers = two_towers(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    assert len(model.trainable_variables) == n_vars
    whole = model(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]).pooled_output
    np.testing.assert_allclose(towers, whole, atol=1e-6)


def test_too_long_sequence_is_a_clear_error():
    _, model, *_ = build_all()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(np.ones([1, 65], np.int32))


def test_config_round_trip_keeps_unknown_keys(tmp_path):
    google_chinese = dict(TINY_CONFIG, directionality="bidi", pooler_fc_size=768,
                          pooler_num_attention_heads=12, pooler_type="first_token_transform")
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(google_chinese))
    config = BertConfig.from_json_file(str(path))
    assert config.pooler_fc_size == 768
    assert json.loads(config.to_json_string()) == google_chinese
    config.to_json_file(str(tmp_path / "copy.json"))
    assert BertConfig.from_json_file(str(tmp_path / "copy.json")) == config


def test_config_errors_name_file_and_key(tmp_path):
    from bert_mgpu.model.bert_config import BertConfigError
    bad = tmp_path / "bert_config.json"
    bad.write_text(json.dumps(dict(TINY_CONFIG, num_attention_heads=5)))
    with pytest.raises(BertConfigError, match="bert_config.json.*num_attention_heads"):
        BertConfig.from_json_file(str(bad))
    bad.write_text("{\n  \"vocab_size\": 10,\n  oops\n}")
    with pytest.raises(BertConfigError, match=r"bert_config.json:3: invalid JSON"):
        BertConfig.from_json_file(str(bad))
    with pytest.raises(BertConfigError, match="not found"):
        BertConfig.from_json_file(str(tmp_path / "missing.json"))


# -- --xla_layers: each encoder layer one XLA computation ------------------------------------

@pytest.mark.parametrize("act", ["gelu", "gelu_exact"])
def test_gelu_is_not_compiled_when_the_trace_does_not_know_the_length(act):
    """Batches cut to their longest example run through one trace whose sequence axis is
    unknown; XLA would compile the activation again for every new length, so there it runs
    op by op (the same function of the inputs: the values of the fused trace's, to 1e-5)."""
    config, model, _, _, clf = build_all(dict(TINY_CONFIG, num_hidden_layers=2, hidden_act=act))
    ids = tf.constant(np.random.RandomState(3).randint(1, 100, [3, 12]), tf.int32)

    def step(ids):
        with dropout_stream(5, tf.constant(2, tf.int64), 0, 3):
            return model(ids, training=True).sequence_output

    # Two functions: one would serve the known shape with its any-length trace.
    any_length = tf.function(step, autograph=False).get_concrete_function(
        tf.TensorSpec([3, None], tf.int32))
    known_length = tf.function(step, autograph=False).get_concrete_function(
        tf.TensorSpec([3, 12], tf.int32))
    assert not _xla_compiled_calls(any_length.graph)
    assert _xla_compiled_calls(known_length.graph)
    np.testing.assert_allclose(any_length(ids), known_length(ids), atol=1e-5, rtol=1e-5)


def _xla_compiled_calls(graph, gelu=True):
    """Names of the functions the graph calls that must be compiled by XLA (with `gelu`
    False, not counting the towers' fused GELU, `modeling._fused_gelu`)."""
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    return [name for name, f in library.items()
            if f.attr.get("_XlaMustCompile") is not None and f.attr["_XlaMustCompile"].b
            and (gelu or "_gelu_" not in name)]


@pytest.mark.parametrize("options,trimmed", [
    ({}, True), ({"pre_layer_norm": True, "share_parameters": "all", "embedding_size": 16},
                 False)])
def test_xla_layers_give_the_outputs_and_gradients_of_the_uncompiled_layers(options, trimmed):
    """Compiled layers (dropout 0.1 on, position-keyed masks drawn inside the XLA computation)
    against the same model uncompiled: every layer's output and every weight's gradient to
    1e-5: Google's post-LN stack on a batch cut below the dropout layout with its length a
    Tensor (one trace for every cut), and pre-LN with ALBERT's shared layers on a padded one."""
    config, model, _, _, clf = build_all(dict(TINY_CONFIG, num_hidden_layers=3, **options))
    rng = np.random.RandomState(4)
    batch, length, layout = 3, 12, 16
    ids = tf.constant(rng.randint(1, 100, [batch, length]), tf.int32)
    mask = tf.constant((np.arange(length)[None] < [[12], [7], [3]]).astype(np.int32))
    labels = tf.constant([0, 2, 1])
    variables = list(model.named_variables().values()) + list(clf.named_variables().values())
    length_spec = tf.TensorSpec([batch, None], tf.int32)

    def run(compiled):
        def step(ids, mask, step):
            seq_length = tf.shape(ids)[1] if trimmed else length
            stream = execution.DropoutStream(5, step, 3, batch, seq_length=seq_length,
                                             full_length=layout if trimmed else None)
            with execution.entered(stream=stream, compile_layers=compiled):
                with tf.GradientTape() as tape:
                    out = model(ids, mask, training=True)
                    loss = clf(out.pooled_output, labels, training=True)["loss"] + \
                        tf.reduce_sum(tf.square(out.sequence_output)) * 1e-2
                grads = tape.gradient(loss, variables)
            return out.all_encoder_layers, [tf.convert_to_tensor(g) for g in grads]
        signature = [length_spec, length_spec, tf.TensorSpec([], tf.int64)] if trimmed else None
        fn = tf.function(step, autograph=False, input_signature=signature)
        graph = fn.get_concrete_function(ids, mask, tf.constant(2, tf.int64)).graph
        return fn(ids, mask, tf.constant(2, tf.int64)), _xla_compiled_calls(graph, gelu=False)

    (plain_layers, plain_grads), plain_compiled = run(False)
    (layers, grads), compiled = run(True)
    assert not plain_compiled and compiled  # the layers did run as XLA computations
    for a, b in zip(plain_layers, layers):
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-5)
    for v, a, b in zip(variables, plain_grads, grads):
        scale = max(1.0, float(np.abs(a).max()))
        np.testing.assert_allclose(b, a, atol=1e-5 * scale, rtol=1e-5, err_msg=v.name)
    # Dropout acted: the same model without it gives other outputs.
    quiet = model(ids, mask, training=False).all_encoder_layers[-1]
    assert float(tf.reduce_max(tf.abs(quiet - plain_layers[-1]))) > 1e-2


def test_embedding_tables_are_gathered_from_as_tensors():
    # A ResourceGather on the word-embedding variable would put it in copy-on-read mode, and the
    # tied decoder's read would then copy the whole table on every update.
    model = modeling.BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=48))
    step = tf.function(lambda ids: model(ids, training=True).sequence_output)
    graph = step.get_concrete_function(tf.TensorSpec([2, 8], tf.int32)).graph
    types = {op.type for op in graph.get_operations()}
    assert "GatherV2" in types and "ResourceGather" not in types
