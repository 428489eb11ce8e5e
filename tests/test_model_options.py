"""ALBERT and Cramming options of `bert_config.json`: each one's defining property.

The numerics are checked against a direct numpy computation of the model written here from the
papers' definitions (not from our code): `numpy_encoder` below. The same computation without any
option equals our model, whose parity with Google's code tests/test_modeling.py holds, so the
reference is itself anchored to Google's numerics. ALBERT's variable names and shapes, and its
pretraining model's outputs on the same weights, come from Google's ALBERT code itself (PyPI
albert-tensorflow in the oracle venv: tests/oracles/albert_modeling.py).
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, run_json_request

from bert_mgpu.model import execution, heads, modeling
from bert_mgpu.model.bert_config import MODEL_OPTIONS, BertConfig, BertConfigError
from bert_mgpu.tasks.pretraining import BertPretrainer

GOLDEN = os.path.join(REPO, "tests", "golden", "google_variables_2layer.json")
TINY = {
    "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 36, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
CRAMMING = {"pre_layer_norm": True, "use_bias": False,
            "position_embedding_type": "scaled_sinusoidal", "gated_ffn": True,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
ALBERT = {"embedding_size": 16, "share_parameters": "all"}


def build(config_dict, seed=3):
    tf.random.set_seed(seed)
    config = BertConfig.from_dict(config_dict)
    return config, modeling.BertModel(config)


def randomize(named, seed=0):
    """Gives every variable (LayerNorms and biases included) a visible random value, so no
    option can hide behind a zero or one initialisation."""
    rng = np.random.RandomState(seed)
    for var in named.values():
        var.assign(rng.normal(0.0, 0.2, size=var.shape.as_list()).astype(np.float32)
                   + (1.0 if var.name.endswith("gamma:0") else 0.0))


def inputs(seed=0, batch=3, seq=12):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, 100, size=[batch, seq]).astype(np.int32)
    mask = np.ones([batch, seq], np.int32)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    segments = (np.arange(seq)[None, :] >= 4).astype(np.int32).repeat(batch, 0)
    return ids, mask, segments


# -- the numpy reference -----------------------------------------------------------------------

def np_layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def np_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def sinusoids(length, width):
    """Vaswani et al.: PE(p, 2k) = sin(p / 10000^(2k/d)), PE(p, 2k+1) = cos(p / 10000^(2k/d))."""
    table = np.zeros([length, width])
    for p in range(length):
        for k in range(width // 2):
            angle = p / 10000.0 ** (2.0 * k / width)
            table[p, 2 * k] = math.sin(angle)
            table[p, 2 * k + 1] = math.cos(angle)
    return table


def block_names(options, i):
    """The variable scopes of layer i's sub-blocks, as ALBERT's and Google's code name them."""
    bert = f"bert/encoder/layer_{i}"
    albert = "bert/encoder/transformer/group_0/inner_group_0"
    share = options.get("share_parameters", "none")
    if share in ("all", "attention"):
        attention = {"self": f"{albert}/attention_1/self",
                     "output": f"{albert}/attention_1/output/dense", "norm": f"{albert}/LayerNorm"}
    else:
        attention = {"self": f"{bert}/attention/self", "output": f"{bert}/attention/output/dense",
                     "norm": f"{bert}/attention/output/LayerNorm"}
    if share in ("all", "ffn"):
        ffn = {"in": f"{albert}/ffn_1/intermediate/dense",
               "out": f"{albert}/ffn_1/intermediate/output/dense", "norm": f"{albert}/LayerNorm_1"}
    else:
        ffn = {"in": f"{bert}/intermediate/dense", "out": f"{bert}/output/dense",
               "norm": f"{bert}/output/LayerNorm"}
    return attention, ffn


def numpy_encoder(w, options, ids, mask, segments):
    """The encoder's layers computed directly in float64 numpy; returns [B, S, H] per layer."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    h, n = options["hidden_size"], options["num_attention_heads"]
    batch, seq = ids.shape

    def dense(x, scope):
        y = x @ w[f"{scope}/kernel"]
        return y + w[f"{scope}/bias"] if f"{scope}/bias" in w else y

    def norm(x, scope):
        return np_layer_norm(x, w[f"{scope}/gamma"], w[f"{scope}/beta"])

    x = w["bert/embeddings/word_embeddings"][ids] + \
        w["bert/embeddings/token_type_embeddings"][segments]
    if options.get("position_embedding_type") == "scaled_sinusoidal":
        e = x.shape[-1]
        x = x + w["bert/embeddings/position_embedding_scale"] * sinusoids(seq, e)
    else:
        x = x + w["bert/embeddings/position_embeddings"][:seq]
    x = norm(x, "bert/embeddings/LayerNorm")
    if "bert/encoder/embedding_hidden_mapping_in/kernel" in w:
        x = dense(x, "bert/encoder/embedding_hidden_mapping_in")

    def attention(x, names):
        def heads_of(t):
            return t.reshape(batch, seq, n, h // n).transpose(0, 2, 1, 3)  # [B, N, S, d]
        q = heads_of(dense(x, f"{names['self']}/query"))
        k = heads_of(dense(x, f"{names['self']}/key"))
        v = heads_of(dense(x, f"{names['self']}/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(h // n)
        scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, h)
        return dense(context, names["output"])

    def feed_forward(x, names):
        y = dense(x, names["in"])
        if options.get("gated_ffn"):
            value, gate = np.split(y, 2, axis=-1)
            y = value * np_gelu(gate)
        else:
            y = np_gelu(y)
        return dense(y, names["out"])

    layers = []
    for i in range(options["num_hidden_layers"]):
        att, ffn = block_names(options, i)
        if options.get("pre_layer_norm"):
            x = x + attention(norm(x, att["norm"]), att)
            x = x + feed_forward(norm(x, ffn["norm"]), ffn)
        else:
            x = norm(x + attention(x, att), att["norm"])
            x = norm(x + feed_forward(x, ffn), ffn["norm"])
        layers.append(x)
    if options.get("pre_layer_norm"):
        layers[-1] = norm(layers[-1], "bert/encoder/LayerNorm")
    return layers


NUMERIC_CASES = {
    "google": {},
    "pre_layer_norm": {"pre_layer_norm": True},
    "scaled_sinusoidal": {"position_embedding_type": "scaled_sinusoidal"},
    "gated_ffn": {"gated_ffn": True},
    "no_bias": {"use_bias": False},
    "cramming": CRAMMING,
    "albert": ALBERT,
    "share_attention_factorized": {"share_parameters": "attention", "embedding_size": 24},
    "share_ffn_pre_ln": {"share_parameters": "ffn", "pre_layer_norm": True},
}


@pytest.mark.parametrize("case", sorted(NUMERIC_CASES))
def test_encoder_matches_direct_numpy_computation(case):
    options = dict(TINY, num_hidden_layers=3, **NUMERIC_CASES[case])
    _, model = build(options)
    named = model.named_variables()
    randomize(named)
    ids, mask, segments = inputs()
    out = model(ids, mask, segments, training=False)
    expected = numpy_encoder({k: v.numpy() for k, v in named.items()}, options, ids, mask,
                             segments)
    real = mask.astype(bool)
    assert len(out.all_encoder_layers) == 3
    for ours, ref in zip(out.all_encoder_layers, expected):
        np.testing.assert_allclose(ours.numpy()[real], ref[real], atol=2e-4, rtol=1e-4)
    np.testing.assert_array_equal(out.sequence_output, out.all_encoder_layers[-1])


# -- variable lists ----------------------------------------------------------------------------

def test_no_new_keys_and_explicit_defaults_give_googles_variables_and_numerics():
    with open(GOLDEN) as f:
        google = {name: shape for name, shape in json.load(f)}

    def variables(config_dict):
        config = BertConfig.from_dict(config_dict)
        named = modeling.merge_named_variables(
            modeling.BertModel(config), heads.MaskedLMHead(config),
            heads.NextSentenceHead(config), heads.ClassifierHead(config, 3))
        return modeling.variable_shapes(named)

    base = dict(TINY, intermediate_size=37)
    assert variables(base) == google
    defaults = {k: v for k, v in MODEL_OPTIONS if v is not None}
    explicit = dict(base, embedding_size=32, **defaults)
    assert variables(explicit) == google
    ids, mask, segments = inputs()
    _, plain = build(base)
    _, with_keys = build(explicit)
    a = plain(ids, mask, segments).sequence_output
    b = with_keys(ids, mask, segments).sequence_output
    np.testing.assert_array_equal(a, b)


# ALBERT's own albert_config.json keys for one shared group.
ALBERT_JSON = dict(TINY, embedding_size=16, num_hidden_groups=1, inner_group_num=1,
                   down_scale_factor=1, net_structure_type=0, gap_size=0, num_memory_blocks=0,
                   layers_to_keep=[], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def albert_oracle(tmp_path_factory):
    """Google's ALBERT code (oracle venv, PyPI albert-tensorflow: tests/oracles/albert_modeling.py)
    on ALBERT_JSON, with our pretraining model's weights (randomized) loaded by name: its
    variables ([[name, shape], ...]) and outputs; with our model, its inputs and weights."""
    d = tmp_path_factory.mktemp("albert")
    config = BertConfig.from_dict(ALBERT_JSON)
    tf.random.set_seed(4)
    task = BertPretrainer(config)
    named = task.named_variables()
    randomize(named, seed=2)
    ids, mask, segments = inputs()
    rng = np.random.RandomState(5)
    data = {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "masked_lm_positions": np.array([[1, 3, 6], [2, 4, 7], [1, 2, 3]], np.int32),
            "masked_lm_ids": rng.randint(1, 100, size=[3, 3]).astype(np.int32),
            "masked_lm_weights": np.ones([3, 3], np.float32),
            "sentence_order_labels": np.array([[0], [1], [0]], np.int32)}
    np.savez(d / "in.npz", **data)
    np.savez(d / "w.npz", **{k.replace("/", "|"): v.numpy() for k, v in named.items()})
    run_json_request("albert_modeling.py", {
        "config": ALBERT_JSON, "inputs": str(d / "in.npz"), "weights": str(d / "w.npz"),
        "output": str(d / "out.npz"), "names": str(d / "names.json")}, d, timeout=300)
    outputs = dict(np.load(d / "out.npz")) if (d / "out.npz").exists() else None
    return {"names": json.loads((d / "names.json").read_text()), "outputs": outputs,
            "task": task, "data": data}


def albert_names(albert_oracle):
    return {name: shape for name, shape in albert_oracle["names"]}


@pytest.mark.parametrize("layers", [1, 2, 12])
def test_albert_all_shared_has_albert_names_whatever_the_depth(albert_oracle, layers):
    """The variables of our pretraining model with ALBERT's sharing are those Google's ALBERT
    code creates (names and shapes), whatever the depth."""
    config = BertConfig.from_dict(dict(TINY, num_hidden_layers=layers, **ALBERT))
    task = BertPretrainer(config)
    assert modeling.variable_shapes(task.named_variables()) == albert_names(albert_oracle)


def test_albert_released_config_keys_mean_all_shared(albert_oracle):
    """ALBERT's own albert_config.json (num_hidden_groups 1, inner_group_num 1) builds the
    shared model, and writes back unchanged."""
    config = BertConfig.from_dict(ALBERT_JSON)
    assert config.share_parameters == "all" and config.embedding_size == 16
    assert json.loads(config.to_json_string()) == ALBERT_JSON
    task = BertPretrainer(config)
    assert modeling.variable_shapes(task.named_variables()) == albert_names(albert_oracle)


def test_albert_outputs_equal_googles_albert_code(albert_oracle):
    """Same weights, same inputs: the encoder's layers, the pooled output, the masked LM's and
    the sentence-order head's log-probabilities equal those of Google's ALBERT code."""
    task, data, google = albert_oracle["task"], albert_oracle["data"], albert_oracle["outputs"]
    assert google is not None, "our weights do not name every variable of ALBERT's code"
    out = task.bert(data["input_ids"], data["input_mask"], data["segment_ids"], training=False)
    real = data["input_mask"].astype(bool)
    tol = dict(atol=1e-5, rtol=1e-5)
    assert len(out.all_encoder_layers) == 2
    for i, layer in enumerate(out.all_encoder_layers):
        np.testing.assert_allclose(layer.numpy()[real], google[f"layer_{i}"][real], **tol)
    np.testing.assert_allclose(out.pooled_output, google["pooled_output"], **tol)
    mlm = task.masked_lm(out.sequence_output, out.embedding_table,
                         data["masked_lm_positions"], data["masked_lm_ids"],
                         data["masked_lm_weights"])
    np.testing.assert_allclose(mlm["log_probs"], google["masked_lm_log_probs"], **tol)
    sop = task.next_sentence(out.pooled_output, data["sentence_order_labels"])
    np.testing.assert_allclose(sop["log_probs"], google["sentence_order_log_probs"], **tol)
    assert np.ptp(google["masked_lm_log_probs"]) > 1.0  # the weights are not degenerate


def parameter_count(config_dict):
    _, model = build(config_dict)
    return sum(int(np.prod(v.shape)) for v in model.named_variables().values())


def test_shared_layers_parameter_count_independent_of_depth():
    shallow = parameter_count(dict(TINY, num_hidden_layers=1, share_parameters="all"))
    assert parameter_count(dict(TINY, num_hidden_layers=2, share_parameters="all")) == shallow
    assert parameter_count(dict(TINY, num_hidden_layers=24, share_parameters="all")) == shallow
    # Not shared: every layer adds its own sub-blocks.
    h, i = TINY["hidden_size"], TINY["intermediate_size"]
    attention = 4 * (h * h + h) + 2 * h
    ffn = h * i + i + i * h + h + 2 * h
    unshared = {n: parameter_count(dict(TINY, num_hidden_layers=n)) for n in (1, 5)}
    assert unshared[5] - unshared[1] == 4 * (attention + ffn)
    for share, per_layer in (("attention", ffn), ("ffn", attention)):
        counts = [parameter_count(dict(TINY, num_hidden_layers=n, share_parameters=share))
                  for n in (1, 5)]
        assert counts[1] - counts[0] == 4 * per_layer, share


def test_partial_sharing_names_shared_half_albert_per_layer_half_google():
    _, model = build(dict(TINY, num_hidden_layers=3, share_parameters="attention"))
    names = set(model.named_variables())
    g = "bert/encoder/transformer/group_0/inner_group_0"
    assert f"{g}/attention_1/self/query/kernel" in names and f"{g}/LayerNorm/gamma" in names
    assert not any("ffn_1" in n or "LayerNorm_1" in n for n in names)
    for i in range(3):
        assert f"bert/encoder/layer_{i}/intermediate/dense/kernel" in names
        assert f"bert/encoder/layer_{i}/output/LayerNorm/gamma" in names
        assert f"bert/encoder/layer_{i}/attention/self/query/kernel" not in names
    _, model = build(dict(TINY, num_hidden_layers=3, share_parameters="ffn"))
    names = set(model.named_variables())
    assert f"{g}/ffn_1/intermediate/output/dense/kernel" in names
    assert f"{g}/LayerNorm_1/beta" in names and f"{g}/LayerNorm/beta" not in names
    assert "bert/encoder/layer_2/attention/output/LayerNorm/beta" in names


def test_factorized_embeddings_table_and_projection():
    v, e, h = TINY["vocab_size"], 8, TINY["hidden_size"]
    config, model = build(dict(TINY, embedding_size=e))
    shapes = modeling.variable_shapes(model.named_variables())
    assert shapes["bert/embeddings/word_embeddings"] == [v, e]
    assert shapes["bert/embeddings/position_embeddings"] == [64, e]
    assert shapes["bert/embeddings/token_type_embeddings"] == [2, e]
    assert shapes["bert/embeddings/LayerNorm/gamma"] == [e]
    assert shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] == [e, h]
    assert shapes["bert/encoder/embedding_hidden_mapping_in/bias"] == [h]
    # The embedding parameters: V*E + E*H (+ the E-wide position/type/LayerNorm) vs V*H.
    full = parameter_count(TINY)
    assert full - parameter_count(dict(TINY, embedding_size=e)) == \
        (v + 64 + 2 + 2) * (h - e) - (e * h + h)
    ids, mask, segments = inputs()
    out = model(ids, mask, segments)
    assert out.embedding_output.shape == (3, 12, e)
    assert out.sequence_output.shape == (3, 12, h) and out.embedding_table.shape == (v, e)
    # The masked-LM head transforms to E and decodes with the [V, E] table.
    mlm = heads.MaskedLMHead(config)
    assert modeling.variable_shapes(mlm.named_variables())[
        "cls/predictions/transform/dense/kernel"] == [h, e]
    positions = np.array([[1, 2], [3, 4], [1, 0]], np.int32)
    result = mlm(out.sequence_output, out.embedding_table, positions, positions,
                 np.ones([3, 2], np.float32))
    assert result["log_probs"].shape == (6, v) and np.isfinite(result["loss"])


def test_scaled_sinusoidal_positions():
    e = 16
    _, model = build(dict(TINY, embedding_size=e, position_embedding_type="scaled_sinusoidal"))
    named = model.named_variables()
    assert "bert/embeddings/position_embeddings" not in named
    scale = named["bert/embeddings/position_embedding_scale"]
    assert scale.shape == () and float(scale) == pytest.approx(1.0 / math.sqrt(e))
    np.testing.assert_allclose(modeling.sinusoidal_position_table(64, e), sinusoids(64, e),
                               atol=1e-6)
    # The position signal is the only thing that differs between two positions of one token.
    scale.assign(3.0)
    for name in ("bert/embeddings/word_embeddings", "bert/embeddings/token_type_embeddings"):
        named[name].assign(tf.zeros_like(named[name]))
    ids = tf.fill([1, 10], 5)
    embedded = model.embed(ids, tf.zeros_like(ids), training=False).numpy()[0]
    expected = np_layer_norm(3.0 * sinusoids(10, e), np.ones(e), np.zeros(e))
    np.testing.assert_allclose(embedded, expected, atol=1e-5)


def test_no_bias_option_removes_encoder_biases_only():
    _, model = build(dict(TINY, use_bias=False))
    names = set(model.named_variables())
    encoder_biases = [n for n in names if n.startswith("bert/encoder/") and n.endswith("/bias")]
    assert encoder_biases == []
    assert "bert/pooler/dense/bias" in names


def test_gated_ffn_shapes_and_pre_ln_final_norm():
    _, model = build(dict(TINY, gated_ffn=True, pre_layer_norm=True))
    shapes = modeling.variable_shapes(model.named_variables())
    assert shapes["bert/encoder/layer_0/intermediate/dense/kernel"] == [32, 36]
    assert shapes["bert/encoder/layer_0/output/dense/kernel"] == [18, 32]
    assert shapes["bert/encoder/LayerNorm/gamma"] == [32]


def test_every_new_weight_is_read_through_param():
    """Under substituted `parameters` the model must read the given tensors, never a variable (what
    the XLA towers rely on): outputs with substituted values == outputs after assigning them."""
    options = dict(TINY, **CRAMMING, **ALBERT)
    config, model = build(options)
    mlm = heads.MaskedLMHead(config)
    named = modeling.merge_named_variables(model, mlm)
    variables = list(named.values())
    values = [tf.convert_to_tensor(v) + 0.05 for v in variables]
    ids, mask, segments = inputs()
    positions = np.array([[1, 2], [3, 4], [1, 0]], np.int32)

    def run():
        out = model(ids, mask, segments)
        return out.sequence_output, mlm(out.sequence_output, out.embedding_table,
                                        positions)["log_probs"]

    with execution.entered(parameters=execution.substituted(variables, values)):
        substituted = run()
    for var, value in zip(variables, values):
        var.assign(value)
    assigned = run()
    for a, b in zip(substituted, assigned):
        np.testing.assert_array_equal(a, b)


def test_pretrainer_without_next_sentence():
    config = BertConfig.from_dict(dict(TINY, **CRAMMING))
    task = BertPretrainer(config, next_sentence=False)
    assert not any(n.startswith("cls/seq_relationship") for n in task.named_variables())
    ids, mask, segments = inputs()
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                "masked_lm_positions": np.array([[1, 2], [3, 4], [1, 0]], np.int32),
                "masked_lm_ids": np.array([[5, 6], [7, 8], [9, 0]], np.int32),
                "masked_lm_weights": np.array([[1, 1], [1, 1], [1, 0]], np.float32),
                "next_sentence_labels": np.zeros([3, 1], np.int32)}
    context = task.context(features)
    out = task.tower_loss(features, context, training=False)
    metrics = task.metrics(out["sums"], context)
    assert sorted(metrics) == ["loss", "masked_lm_loss"]
    np.testing.assert_allclose(out["loss"], metrics["masked_lm_loss"], rtol=1e-6)
    result = task.eval_metrics({k: v.numpy() for k, v in task.eval_sums(features).items()})
    assert sorted(result) == ["loss", "masked_lm_accuracy", "masked_lm_loss"]


def test_layer_depth_of_new_names():
    assert modeling.layer_depth("bert/encoder/embedding_hidden_mapping_in/kernel", 12) == 0
    assert modeling.layer_depth("bert/embeddings/position_embedding_scale", 12) == 0
    assert modeling.layer_depth(
        "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel",
        12) == 12
    assert modeling.layer_depth("bert/encoder/LayerNorm/gamma", 12) == 12
    assert modeling.layer_depth("bert/encoder/layer_3/output/dense/kernel", 12) == 4


@pytest.mark.parametrize("changes,match", [
    ({"share_parameters": "some"}, "share_parameters"),
    ({"num_hidden_groups": 2}, "num_hidden_groups"),
    ({"inner_group_num": 2}, "inner_group_num"),
    ({"embedding_size": 0}, "embedding_size"),
    ({"pre_layer_norm": "yes"}, "pre_layer_norm"),
    ({"position_embedding_type": "rotary"}, "position_embedding_type"),
    ({"position_embedding_type": "scaled_sinusoidal", "embedding_size": 15}, "even"),
    ({"gated_ffn": True, "intermediate_size": 37}, "gated_ffn"),
])
def test_bad_option_values_name_the_key(tmp_path, changes, match):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(TINY, **changes)))
    with pytest.raises(BertConfigError, match=f"bert_config.json.*{match}"):
        BertConfig.from_json_file(str(path))
