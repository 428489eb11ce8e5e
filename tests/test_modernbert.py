"""ModernBERT as options of the model: equal to Hugging Face's own `ModernBertModel` /
`ModernBertForMaskedLM` (transformers in the oracle venv) on the same weights, converted by
convert_hf_checkpoint.py and back by convert_to_hf.py; its local attention computes only the band.

Hugging Face runs its eager and its sdpa attention (no flash-attn, so no unpadding: padded
positions are computed and their keys masked); both are compared at the real positions only.
"""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, run_json_request

from bert_mgpu.engine import checkpoint
from bert_mgpu.interop import hf_folders, hf_modernbert
from bert_mgpu.interop.hf_checkpoint import read_safetensors
from bert_mgpu.model import execution, heads, modeling, rotary_attention
from bert_mgpu.model.bert_config import BertConfig, BertConfigError

_SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1,
            "sep_token_id": 2}
# Several shapes: sequences longer than the window, global/local mixes, biases on and off.
SHAPES = {
    "every_3rd_global": dict(vocab_size=99, hidden_size=32, num_hidden_layers=4,
                             num_attention_heads=4, intermediate_size=24,
                             max_position_embeddings=128, local_attention=8,
                             global_attn_every_n_layers=3),
    "every_2nd_global_biases": dict(vocab_size=77, hidden_size=24, num_hidden_layers=3,
                                    num_attention_heads=2, intermediate_size=40,
                                    max_position_embeddings=128, local_attention=16,
                                    global_attn_every_n_layers=2, norm_bias=True,
                                    attention_bias=True, mlp_bias=True, classifier_bias=True,
                                    hidden_activation="gelu_pytorch_tanh",
                                    classifier_activation="gelu_pytorch_tanh",
                                    global_rope_theta=5000.0, local_rope_theta=300.0),
    "all_global": dict(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=16,
                       max_position_embeddings=64, local_attention=4,
                       global_attn_every_n_layers=1),
}


def _batch(vocab_size, lengths, seed):
    """Token ids [B, S] (first [CLS]=1, last real [SEP]=2, padding 0) and the mask."""
    rng = np.random.default_rng(seed)
    width = max(lengths)
    ids = np.zeros([len(lengths), width], np.int32)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(3, vocab_size, n)
        ids[row, 0], ids[row, n - 1] = 1, 2
        mask[row, :n] = 1
    return ids, mask


# The models transformers builds, saves and runs (one oracle process for all of them):
# name -> (config keys, lengths of the batch, seed, classifier?).
CASES = {
    "every_3rd_global": (SHAPES["every_3rd_global"], [21, 8, 37], 0, False),  # padding, B=3,
    "every_2nd_global_biases": (SHAPES["every_2nd_global_biases"], [45, 45], 0, False),  # > w
    "all_global": (SHAPES["all_global"], [12, 5], 0, False),
    "round_trip": (SHAPES["every_2nd_global_biases"], [30, 19], 4, False),
    "classifier_cls": (dict(SHAPES["every_3rd_global"], classifier_pooling="cls", num_labels=3,
                            classifier_bias=True), [21, 9], 2, True),
    "classifier_mean": (dict(SHAPES["every_3rd_global"], classifier_pooling="mean",
                             num_labels=3, classifier_bias=True), [21, 9], 2, True),
}


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory):
    """name -> (Hugging Face folder, its outputs (.npz as a dict), ids, mask)."""
    root = tmp_path_factory.mktemp("hf_modernbert")
    requests, batches = [], {}
    for name, (config, lengths, seed, classifier) in CASES.items():
        ids, mask = _batch(config["vocab_size"], lengths, seed=len(name))
        batches[name] = ids, mask
        requests.append({"save_dir": str(root / name), "new": True, "seed": seed,
                         "classifier": classifier, "out": str(root / f"{name}.npz"),
                         "config": dict(config, **_SPECIAL), "input_ids": ids.tolist(),
                         "attention_mask": mask.tolist()})
    run_json_request("hf_modernbert.py", requests, root)
    return {name: (str(root / name), dict(np.load(root / f"{name}.npz")), *batches[name])
            for name in CASES}


def _convert(hf_folder, out_dir, script=False):
    """convert_hf_checkpoint.py's work: the script itself, or its one call in this process."""
    if not script:
        hf_folders.convert_hf_folder(hf_folder, out_dir)
        return
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "convert_hf_checkpoint.py"),
         f"--hf_model_dir={hf_folder}", f"--output_dir={out_dir}"],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _ours(out_dir, ids, mask, attention_chunk=0):
    """Our model's outputs and masked-LM logits; `attention_chunk` > 0: the global layers in
    chunks of that many query rows (`rotary_attention.chunked_attention`)."""
    config = BertConfig.from_json_file(os.path.join(out_dir, "bert_config.json"))
    model, head = modeling.BertModel(config), heads.MaskedLMHead(config)
    named = modeling.merge_named_variables(model, head)
    checkpoint.init_from_checkpoint(os.path.join(out_dir, "bert_model.ckpt"), named,
                                    required_prefixes=("bert/", "cls/"))
    with execution.entered(attention_chunk=attention_chunk):
        out = model(tf.constant(ids), tf.constant(mask), training=False)
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), [ids.shape[0], 1])
    logits = head(out.sequence_output, out.embedding_table, tf.constant(positions))["logits"]
    return config, out, tf.reshape(logits, [ids.shape[0], ids.shape[1], -1]).numpy()


@pytest.mark.parametrize("attention_chunk", [0, 5])
@pytest.mark.parametrize("case", ["every_3rd_global", "every_2nd_global_biases", "all_global"])
def test_hidden_states_and_logits_equal_transformers(hf_models, tmp_path, case,
                                                     attention_chunk):
    """Sequences longer than the window (8, 16), global every 3rd / 2nd / every layer, padding,
    batch 2-3, with and without biases, erf and tanh GELU, own RoPE thetas; the global layers'
    full probabilities (chunk 0) and in chunks of 5 query rows (shorter than every sequence)."""
    hf_folder, ref, ids, mask = hf_models[case]
    for attn in ("eager", "sdpa"):
        assert str(ref[f"{attn}_implementation"]) == attn
    out_dir = str(tmp_path / "ours")
    _convert(hf_folder, out_dir, script=case == "every_3rd_global" and not attention_chunk)
    config, out, logits = _ours(out_dir, ids, mask, attention_chunk)
    assert config.position_embedding_type == "rope" and config.type_vocab_size == 0
    real = mask.astype(bool)
    ours_layers = [x.numpy() for x in out.all_encoder_layers]
    for attn in ("eager", "sdpa"):
        # Hugging Face's per-layer states are before the final norm; ours too but the last.
        for layer, (a, b) in enumerate(zip(ours_layers[:-1], ref[f"{attn}_layers"][:-1])):
            np.testing.assert_allclose(a[real], b[real], atol=1e-4, rtol=0,
                                       err_msg=f"{attn} layer {layer}")
        np.testing.assert_allclose(ours_layers[-1][real], ref[f"{attn}_last"][real], atol=1e-4,
                                   rtol=0)
        np.testing.assert_allclose(logits[real], ref[f"{attn}_logits"][real], atol=1e-4, rtol=0)


def test_round_trip_to_transformers_is_bit_exact(hf_models, tmp_path):
    """convert_hf_checkpoint.py then convert_to_hf.py gives back every tensor bit for bit and a
    config transformers loads to the same outputs."""
    hf_folder, ref, ids, mask = hf_models["round_trip"]
    with open(os.path.join(hf_folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write('{"version": "1.0"}\n')  # copied both ways as it is
    ours = str(tmp_path / "ours")
    _convert(hf_folder, ours, script=True)
    back = str(tmp_path / "back")
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "convert_to_hf.py"),
         f"--bert_config_file={ours}/bert_config.json", f"--init_checkpoint={ours}/bert_model.ckpt",
         f"--vocab_file={ours}/tokenizer.json", "--do_lower_case=false", f"--output_dir={back}"],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    original = read_safetensors(os.path.join(hf_folder, "model.safetensors"))
    written = read_safetensors(os.path.join(back, "model.safetensors"))
    assert sorted(written) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    with open(os.path.join(back, "tokenizer.json"), encoding="utf-8") as f:
        assert json.load(f) == {"version": "1.0"}
    request = {"save_dir": back, "out": str(tmp_path / "back.npz"), "input_ids": ids.tolist(),
               "attention_mask": mask.tolist()}
    run_json_request("hf_modernbert.py", request, tmp_path)
    again = np.load(tmp_path / "back.npz")
    np.testing.assert_array_equal(again["eager_logits"], ref["eager_logits"])


def test_pooler_of_a_masked_lm_folder_is_its_head():
    """A masked-LM folder's pooler = its head's transform, as transformers' classifier loads it."""
    weights = {"model.embeddings.tok_embeddings.weight": np.ones([5, 4], np.float32),
               "head.dense.weight": np.arange(16, dtype=np.float32).reshape(4, 4),
               "head.norm.weight": np.full([4], 2.0, np.float32),
               "decoder.bias": np.zeros([5], np.float32)}
    out = hf_modernbert.convert_weights(weights)
    np.testing.assert_array_equal(out["bert/pooler/dense/kernel"], weights["head.dense.weight"].T)
    np.testing.assert_array_equal(out["bert/pooler/LayerNorm/gamma"], weights["head.norm.weight"])
    assert hf_modernbert.export_weights(out).keys() == weights.keys()


def test_unknown_tensor_and_bad_pattern_are_named():
    with pytest.raises(ValueError, match="model.layers.0.attn.extra"):
        hf_modernbert.convert_weights({"model.layers.0.attn.extra": np.zeros([2], np.float32)})
    config = dict(SHAPES["every_3rd_global"], model_type="modernbert",
                  layer_types=["full_attention", "sliding_attention", "full_attention",
                               "sliding_attention"])
    config["layer_types"][3] = "full_attention"
    with pytest.raises(ValueError, match="layer_types"):
        hf_modernbert.convert_config(config)


def _band_inputs(seq_length, batch=2, heads_=2, size=8, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (tf.constant(rng.standard_normal([batch, heads_, seq_length, size]), tf.float32)
               for _ in range(3))
    key_mask = np.ones([batch, seq_length], np.float32)
    key_mask[1, seq_length * 2 // 3:] = 0.0
    return q, k, v, tf.constant(key_mask)


@pytest.mark.parametrize("seq_length,half_window", [(37, 4), (8, 4), (3, 4), (64, 16), (17, 1)])
def test_band_attention_equals_masked_full_attention(seq_length, half_window):
    q, k, v, key_mask = _band_inputs(seq_length)
    positions = tf.range(seq_length)
    mask = key_mask[:, None, :] * rotary_attention.band_mask(positions, positions, half_window)
    expected = rotary_attention.masked_attention(q, k, v, mask, 0.35, lambda p: p)
    got = rotary_attention.band_attention(q, k, v, key_mask, half_window, 0.35, lambda p: p)
    # Rows with a key to attend to (a padded query with only padding in its window has none;
    # both give it some average of the values, which nothing reads).
    rows = tf.reduce_max(mask, axis=-1).numpy() > 0  # [B, F]
    assert rows.sum() > 0
    np.testing.assert_allclose(got.numpy()[rows[:, None, :].repeat(2, 1)],
                               expected.numpy()[rows[:, None, :].repeat(2, 1)], atol=1e-6)


def _packed_inputs(seq_length, seed=1):
    """Band inputs with 3 documents packed in row 0 and padding closing row 1 (a document of
    its own, as the packed records' padding): (q, k, v, key_mask, document_ids, [B, F, T] mask
    of `masked_attention`)."""
    q, k, v, key_mask = _band_inputs(seq_length, seed=seed)
    documents = np.zeros([2, seq_length], np.int32)
    documents[0, seq_length // 4:] = 1
    documents[0, seq_length // 2:] = 2
    documents[1, seq_length * 2 // 3:] = 5
    same = (documents[:, :, None] == documents[:, None, :]).astype(np.float32)
    return q, k, v, key_mask, tf.constant(documents), key_mask[:, None, :] * same


@pytest.mark.parametrize("chunk", [1, 4, 7, 37, 64])
@pytest.mark.parametrize("packed", [False, True])
def test_chunked_attention_equals_masked_attention(chunk, packed):
    """Outputs and query/key/value gradients of `chunked_attention` equal `masked_attention`'s
    (padding; packed documents), chunks dividing the length or not, one chunk, a chunk longer
    than the sequence; eagerly and traced with a dynamic length."""
    q, k, v, key_mask, documents, mask = _packed_inputs(37)
    if not packed:
        documents, mask = None, key_mask[:, None, :]
    upstream = tf.constant(np.random.default_rng(3).standard_normal(q.shape), tf.float32)

    def gradients(attend, *args):
        with tf.GradientTape() as tape:
            tape.watch(args[:3])
            out = attend(*args)
            loss = tf.reduce_sum(out * upstream)
        return [out] + tape.gradient(loss, list(args[:3]))

    expected = gradients(lambda *a: rotary_attention.masked_attention(
        *a, mask, 0.35, lambda p: p), q, k, v)
    spec = tf.TensorSpec([2, 2, None, 8], tf.float32)
    docs_spec = tf.TensorSpec([2, None], tf.int32)
    traced = tf.function(lambda q, k, v, m, d: gradients(
        lambda *a: rotary_attention.chunked_attention(*a, m, 0.35, chunk, d), q, k, v),
        input_signature=[spec] * 3 + [tf.TensorSpec([2, None]), docs_spec])
    for got in (gradients(lambda *a: rotary_attention.chunked_attention(
            *a, key_mask, 0.35, chunk, documents), q, k, v),
            traced(q, k, v, key_mask, documents if packed else tf.zeros([2, 37], tf.int32))):
        for name, a, b in zip(("out", "d_query", "d_key", "d_value"), got, expected):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=name)


def _global_attention_graph(config, training, chunk, seq_length=24, **context):
    """The op types (with their counts) and the output shapes of a traced forward and backward
    pass of `config`'s model on [2, seq_length] tokens under `attention_chunk` = chunk and
    the execution context's `context`."""
    model = modeling.BertModel(config)
    ids, mask = _batch(config.vocab_size, [seq_length, 9], seed=2)

    @tf.function(autograph=False)
    def step():
        with execution.entered(attention_chunk=chunk, **context), tf.GradientTape() as tape:
            out = model(tf.constant(ids), tf.constant(mask), training=training)
            loss = tf.reduce_sum(out.sequence_output ** 2)
        return tape.gradient(loss, list(model.named_variables().values()))

    graph = step.get_concrete_function().graph
    ops = list(graph.get_operations())
    for function in graph._functions.values():  # the custom gradient's and loops' bodies
        ops += list(function.graph.get_operations())
    shapes = {tuple(t.shape.as_list()) for op in ops for t in op.outputs
              if t.shape.rank is not None}
    return collections.Counter(op.type for op in ops), shapes


def test_global_layers_take_the_chunked_path_only_without_attention_dropout():
    """Chunked global layers keep no [B, N, S, S] Tensor, in training (attention dropout 0) and
    evaluation; with attention dropout in training, or a sequence no longer than the chunk,
    or chunk 0, the full probabilities are computed (their dropout masks are keyed over the
    [N, S, S] layout)."""
    full = (2, 2, 24, 24)
    no_dropout = _tiny_rope_config(hidden_dropout_prob=0.1)
    dropout = _tiny_rope_config(attention_probs_dropout_prob=0.1)
    for config, training, chunk, chunked in ((no_dropout, True, 8, True),
                                             (dropout, False, 8, True),
                                             (dropout, True, 8, False),
                                             (no_dropout, True, 24, False),
                                             (no_dropout, True, 0, False)):
        types, shapes = _global_attention_graph(config, training, chunk)
        assert (full not in shapes) == chunked, (training, chunk, config)
        assert ("While" in types or "StatelessWhile" in types) == chunked
    # Training computes the local bands' softmax again in the backward pass (recompute_band,
    # the default), unless whole layers are recomputed already.
    softmaxes = [_global_attention_graph(no_dropout, True, 0, **context)[0]["Softmax"]
                 for context in ({}, {"recompute_band": False}, {"recompute_layers": True},
                                 {"recompute_layers": True, "recompute_band": False})]
    assert softmaxes[0] > softmaxes[1] and softmaxes[2] == softmaxes[3]


def test_chunked_and_recomputed_attention_keep_outputs_and_gradients():
    """In the trainer's dropout stream (hidden dropout 0.1; attention dropout 0.1 for the
    band), chunked global layers and recomputed local bands give the outputs and gradients of
    the full probabilities kept for the backward pass, packed documents and padding included;
    and the band's recomputation draws the forward pass's masks."""
    ids, mask = _batch(60, [30, 11], seed=9)
    documents = np.zeros_like(ids)
    documents[0, 13:] = 1
    documents[1, 11:] = 2  # the padding: a document of its own
    for config in (_tiny_rope_config(hidden_dropout_prob=0.1),
                   _tiny_rope_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)):
        model = modeling.BertModel(config)
        variables = list(model.named_variables().values())

        def run(**context):
            stream = execution.DropoutStream(5, 7, 0, 2, seq_length=ids.shape[1])
            with execution.entered(stream=stream, **context), tf.GradientTape() as tape:
                out = model(tf.constant(ids), tf.constant(mask), training=True,
                            document_ids=tf.constant(documents))
                loss = tf.reduce_sum(out.sequence_output ** 2)
            grads = tape.gradient(loss, variables)
            return [out.sequence_output] + [tf.convert_to_tensor(g) for g in grads if
                                            g is not None]

        kept = run(attention_chunk=0, recompute_band=False)
        for got in (run(attention_chunk=4), run(attention_chunk=4, recompute_band=False),
                    run(attention_chunk=0)):
            assert len(got) == len(kept)
            for a, b in zip(got, kept):
                np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def _traced_attention_flops(seq_length, local):
    """Multiply-adds of the matmuls in the traced graph of one attention, from their shapes."""
    q, k, v, key_mask = _band_inputs(seq_length)

    @tf.function(input_signature=[tf.TensorSpec(q.shape, tf.float32)] * 3 +
                 [tf.TensorSpec(key_mask.shape, tf.float32)])
    def attend(q, k, v, key_mask):
        if local:
            return rotary_attention.band_attention(q, k, v, key_mask, 16, 0.35, lambda p: p)
        return rotary_attention.masked_attention(q, k, v, key_mask[:, None, :], 0.35,
                                                 lambda p: p)

    graph = attend.get_concrete_function().graph
    total = 0
    for op in graph.get_operations():
        if op.type in ("BatchMatMulV2", "BatchMatMulV3", "MatMul"):
            a, b = (t.shape.as_list() for t in op.inputs)
            out = op.outputs[0].shape.as_list()
            inner = a[-1] if not op.get_attr("adj_x") else a[-2]
            total += int(np.prod(out)) * inner
    return total


def test_local_attention_cost_is_linear_in_the_length():
    local = [_traced_attention_flops(n, True) for n in (256, 512, 1024)]
    full = [_traced_attention_flops(n, False) for n in (256, 512, 1024)]
    assert local[1] == 2 * local[0] and local[2] == 2 * local[1]  # O(n * w)
    assert full[1] == 4 * full[0]  # the O(n^2) reference
    assert local[2] < full[2] / 10


def test_local_layers_and_options_in_the_model():
    """The config keys reach the model: local layers by index, no token types, no biases."""
    config = BertConfig.from_dict(dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
        intermediate_size=32, hidden_act="gelu_exact", max_position_embeddings=64,
        type_vocab_size=0, pre_layer_norm=True, use_bias=False, gated_ffn=True,
        position_embedding_type="rope", local_attention_window=8,
        global_attention_every_n_layers=3, layer_norm_bias=False,
        first_layer_attention_norm=False, head_bias=False, classifier_pooling="mean"))
    assert [config.is_local_layer(i) for i in range(4)] == [False, True, True, False]
    model = modeling.BertModel(config)
    names = set(model.named_variables())
    assert not any(n.endswith(("/bias", "/beta")) or "token_type" in n or "position" in n
                   for n in names)
    assert "bert/encoder/layer_0/attention/output/LayerNorm/gamma" not in names
    assert "bert/encoder/layer_1/attention/output/LayerNorm/gamma" in names
    # An input change at position 30 reaches position 0 through a global layer (0), not
    # through a local one (1: keys within 4 positions).
    x = np.random.default_rng(0).standard_normal([40, 16]).astype(np.float32)
    other = x.copy()
    other[30] += 1.0
    mask = modeling.create_attention_mask_from_input_mask(tf.zeros([1, 40]),
                                                          tf.ones([1, 40], tf.int32))
    layer = modeling._EncoderLayer(config, False, 1, 40, mask)
    for index, local in ((0, False), (1, True)):
        a, b = (layer(*model.layers[index], tf.constant(t)).numpy() for t in (x, other))
        assert np.array_equal(a[:26], b[:26]) == local, index
        assert not np.array_equal(a[30], b[30])


def test_config_errors_name_the_key():
    base = dict(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=8)
    for extra, key in ((dict(local_attention_window=7), "local_attention_window"),
                       (dict(classifier_pooling="max"), "classifier_pooling"),
                       (dict(first_layer_attention_norm=False), "first_layer_attention_norm"),
                       (dict(rope_theta=0), "rope_theta")):
        with pytest.raises(BertConfigError, match=key):
            BertConfig.from_dict(dict(base, **extra))


def _tiny_rope_config(**changes):
    return BertConfig.from_dict(dict(dict(
        vocab_size=60, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=32, hidden_act="gelu_exact", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=64, type_vocab_size=0,
        pre_layer_norm=True, use_bias=False, gated_ffn=True, position_embedding_type="rope",
        local_attention_window=4, global_attention_every_n_layers=2, layer_norm_bias=False,
        first_layer_attention_norm=False, head_bias=False, classifier_pooling="cls"),
        **changes))


def test_packed_documents_compute_what_each_document_alone_computes():
    """Padding-free packing: documents of 9, 13 and 5 tokens in one row (and a padded tail)
    give, per document, the outputs of that document run alone (positions restart, no
    attention across documents, local band included)."""
    model = modeling.BertModel(_tiny_rope_config())
    rng = np.random.default_rng(5)
    lengths = [9, 13, 5]
    docs = [rng.integers(3, 60, n).astype(np.int32) for n in lengths]
    row = np.zeros([1, 32], np.int32)
    document_ids = np.zeros([1, 32], np.int32)
    mask = np.zeros([1, 32], np.int32)
    start = 0
    for number, doc in enumerate(docs):
        row[0, start:start + len(doc)] = doc
        document_ids[0, start:start + len(doc)] = number
        mask[0, start:start + len(doc)] = 1
        start += len(doc)
    document_ids[0, start:] = len(docs)  # the padding: a document of its own
    packed = model(tf.constant(row), tf.constant(mask), document_ids=tf.constant(document_ids))
    packed = [x.numpy()[0] for x in packed.all_encoder_layers]
    start = 0
    for doc in docs:
        alone = model(tf.constant(doc[None]))
        for layer, x in enumerate(alone.all_encoder_layers):
            np.testing.assert_allclose(packed[layer][start:start + len(doc)], x.numpy()[0],
                                       atol=1e-5, err_msg=f"layer {layer}")
        start += len(doc)
    positions = rotary_attention.Packing.of(tf.constant(document_ids)).positions.numpy()[0]
    assert list(positions[:24]) == list(range(9)) + list(range(13)) + [0, 1]


def test_first_token_only_and_drop_padding_keep_the_values():
    """The serving shortcuts on a RoPE model with local layers: the last layer from [CLS] only
    and the dense layers on real rows only give the full computation's values."""
    model = modeling.BertModel(_tiny_rope_config(num_hidden_layers=2))  # last layer local
    ids, mask = _batch(60, [30, 11], seed=7)
    full = model(tf.constant(ids), tf.constant(mask))
    first = model(tf.constant(ids), tf.constant(mask), first_token_only=True)
    np.testing.assert_allclose(first.sequence_output.numpy()[:, 0],
                               full.sequence_output.numpy()[:, 0], atol=1e-5)
    np.testing.assert_allclose(first.pooled_output.numpy(), full.pooled_output.numpy(),
                               atol=1e-5)
    dropped = model(tf.constant(ids), tf.constant(mask), drop_padding=True)
    real = mask.astype(bool)
    np.testing.assert_allclose(dropped.sequence_output.numpy()[real],
                               full.sequence_output.numpy()[real], atol=1e-5)


def test_dropout_is_keyed_by_position_and_recomputation_keeps_the_gradients():
    """Dropout 0.1 in the trainer's position-keyed stream (band probabilities included): the
    batch split in two gives the same outputs as one batch (what towers need), and recomputed
    layers (--gradient_checkpointing) give the same gradients."""
    from bert_mgpu.model import execution

    config = _tiny_rope_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = modeling.BertModel(config)
    ids, mask = _batch(60, [30, 11], seed=8)
    variables = [v for n, v in model.named_variables().items() if "pooler" not in n]

    def run(rows, offset, recompute=False):
        stream = execution.DropoutStream(5, 7, offset, len(rows), seq_length=ids.shape[1])
        with execution.entered(stream=stream, recompute_layers=recompute):
            with tf.GradientTape() as tape:
                out = model(tf.constant(ids[rows]), tf.constant(mask[rows]), training=True)
                loss = tf.reduce_sum(out.sequence_output ** 2)
        grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables)]
        return out.sequence_output.numpy(), grads

    whole, grads = run([0, 1], 0)
    halves = np.concatenate([run([0], 0)[0], run([1], 1)[0]])
    np.testing.assert_allclose(halves, whole, atol=1e-5)
    evaluation = model(tf.constant(ids), tf.constant(mask)).sequence_output.numpy()
    assert not np.allclose(whole, evaluation, atol=1e-3)  # dropout did apply
    for a, b in zip(grads, run([0, 1], 0, recompute=True)[1]):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_classifier_folder_pooled_output_and_logits_equal_transformers(hf_models, tmp_path,
                                                                       pooling):
    """A ModernBertForSequenceClassification folder: its `head` becomes `bert/pooler`, its
    `classifier` Google's root-level `output_weights`/`output_bias`; our pooled output and
    logits equal transformers' ([CLS] and mean pooling, with padding)."""
    folder, ref, ids, mask = hf_models[f"classifier_{pooling}"]
    out_dir = str(tmp_path / "ours")
    _convert(folder, out_dir)
    bert_config = BertConfig.from_json_file(os.path.join(out_dir, "bert_config.json"))
    assert bert_config.classifier_pooling == pooling
    model = modeling.BertModel(bert_config)
    classifier = heads.ClassifierHead(bert_config, 3)
    named = modeling.merge_named_variables(model, classifier)
    checkpoint.init_from_checkpoint(os.path.join(out_dir, "bert_model.ckpt"), named,
                                    required_prefixes=("bert/", "output_"))
    pooled = model(tf.constant(ids), tf.constant(mask)).pooled_output
    logits = tf.matmul(pooled, classifier.output_weights, transpose_b=True) + \
        classifier.output_bias
    for attn in ("eager", "sdpa"):
        np.testing.assert_allclose(pooled.numpy(), ref[f"{attn}_pooled"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(logits.numpy(), ref[f"{attn}_logits"], atol=1e-4, rtol=0)


def test_hub_style_config_keys_convert():
    """The keys ModernBERT-base's published config.json uses (the older spelling: no
    layer_types or rope_parameters, `global_attn_every_n_layers`, `global_rope_theta`)."""
    hub_style = {"model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768,
                 "num_hidden_layers": 22, "num_attention_heads": 12, "intermediate_size": 1152,
                 "hidden_activation": "gelu", "max_position_embeddings": 8192,
                 "norm_eps": 1e-05, "norm_bias": False, "global_rope_theta": 160000.0,
                 "local_rope_theta": 10000.0, "global_attn_every_n_layers": 3,
                 "local_attention": 128, "attention_bias": False, "mlp_bias": False,
                 "classifier_pooling": "mean", "pad_token_id": 50283, "cls_token_id": 50281,
                 "sep_token_id": 50282}
    config = BertConfig.from_dict(hf_modernbert.convert_config(hub_style))
    assert (config.intermediate_size, config.rope_theta, config.local_rope_theta) == \
        (2304, 160000.0, 10000.0)
    assert [config.is_local_layer(i) for i in range(7)] == [False, True, True, False, True,
                                                            True, False]
    assert (config.local_attention_window, config.hidden_act, config.classifier_pooling) == \
        (128, "gelu_exact", "mean")
    assert config.pad_token_id == 50283  # carried for the way back
    assert len(hf_modernbert.expected_names(config)) == 2 + 22 * 8 - 1 + 3


def test_unsupported_folder_is_one_line_naming_the_file(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(
        SHAPES["all_global"], model_type="modernbert",
        rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 1.0}})))
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "convert_hf_checkpoint.py"),
         f"--hf_model_dir={folder}", f"--output_dir={tmp_path / 'out'}"],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "config.json" in last and "rope_type 'yarn'" in last and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_mixed_precision_follows_float32(dtype):
    """Half-precision activations through RoPE and the band (masks in float32 before the cast)."""
    config = _tiny_rope_config()
    full = modeling.BertModel(config)
    half = modeling.BertModel(config, compute_dtype=dtype)
    for a, b in zip(half.named_variables().values(), full.named_variables().values()):
        a.assign(b)
    ids, mask = _batch(60, [30, 11], seed=9)
    expected = full(tf.constant(ids), tf.constant(mask)).sequence_output.numpy()
    got = half(tf.constant(ids), tf.constant(mask)).sequence_output
    assert got.dtype == dtype
    real = mask.astype(bool)
    np.testing.assert_allclose(tf.cast(got, tf.float32).numpy()[real], expected[real],
                               atol=0.1 if dtype == tf.bfloat16 else 0.02)
