"""The tower trainer: towers == one device, accumulation == one big batch, precision, errors.

Towers run on logical CPU devices (tests/conftest.py), the code path GPUs take. Dropout is off
and every run starts from the same init checkpoint, so runs that see the same global batches
must end with the same weights up to float rounding.
"""

import numpy as np
import pytest
import tensorflow as tf
from _pretraining_data import DROPOUT, PREDS, SEQ, TINY_CONFIG, write_records

from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import features, input_pipeline
from bert_mgpu.engine import checkpoint, optimization, towers, training
from bert_mgpu.model import execution, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.pretraining import BertPretrainer

# One layer (TINY_CONFIG's); ALBERT's cross-layer sharing keeps two.
CONFIG = TINY_CONFIG


def dropout_stream(*args, **kwargs):
    """The context of the trainer's towers: dropout from a position-keyed `DropoutStream`."""
    return execution.entered(stream=execution.DropoutStream(*args, **kwargs))

# -- towers.py ------------------------------------------------------------------------------

def test_tower_devices_wrap_around_more_towers_than_devices():
    n = len(tf.config.list_logical_devices("CPU"))
    devices = towers.tower_devices(n + 2)
    assert devices[:n] == [f"/CPU:{i}" for i in range(n)]
    assert devices[n:] == ["/CPU:0", "/CPU:1"]


def test_split_batch_consecutive_slices_and_error():
    x = {"a": tf.reshape(tf.range(12), [6, 2]), "b": tf.range(6)}
    parts = towers.split_batch(x, 3)
    assert [p["b"].numpy().tolist() for p in parts] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="batch of 6 .*feature a.* 4 equal parts"):
        towers.split_batch(x, 4)


def test_sum_gradients_dense_sparse_none():
    rng = np.random.RandomState(0)
    dense = [tf.constant(rng.normal(size=[3, 2]).astype(np.float32)) for _ in range(2)]
    sparse = [tf.IndexedSlices(tf.constant(rng.normal(size=[2, 2]).astype(np.float32)),
                               tf.constant(idx), tf.constant([5, 2]))
              for idx in ([1, 3], [3, 4])]
    out = towers.sum_gradients([[dense[0], sparse[0], None, None],
                                [dense[1], sparse[1], None, dense[0]]])
    np.testing.assert_allclose(out[0], dense[0] + dense[1], rtol=1e-6)
    assert isinstance(out[1], tf.IndexedSlices)
    expected = np.zeros([5, 2], np.float32)  # row 3 is in both towers: applying sums it
    for s in sparse:
        np.add.at(expected, s.indices.numpy(), s.values.numpy())
    np.testing.assert_allclose(tf.convert_to_tensor(out[1]), expected, rtol=1e-6)
    assert out[2] is None
    np.testing.assert_allclose(out[3], dense[0], rtol=1e-6)


def _random_ops(graph):
    """Generator ops of a traced graph: ([per XLA-compiled tower function], elsewhere)."""
    graph_def = graph.as_graph_def()
    inside, outside = [], 0
    for f in graph_def.library.function:
        n = sum(node.op == "StatelessRandomUniformFullIntV2" for node in f.node_def)
        if f.attr.get("_XlaMustCompile") is not None and f.attr["_XlaMustCompile"].b:
            if "_gelu_" not in f.signature.name:  # the towers' fused GELU (no draws)
                inside.append(n)
        else:
            outside += n
    return inside, outside + sum(n.op == "StatelessRandomUniformFullIntV2"
                                 for n in graph_def.node)


@pytest.mark.parametrize("draw_outside", [False, True])
def test_compiled_towers_draw_dropout_outside_and_equal_uncompiled_towers(draw_outside):
    """Compiled towers (--use_xla) with dropout 0.1: drawing outside (`execution.OutsideDraws`,
    what the trainer gives CPU towers) the XLA computation has no generator op and the caller's
    graph has one per dropout call; either way the losses and gradients equal the uncompiled
    towers' to 1e-5."""
    tf.random.set_seed(1)  # the weights (the suite's other tests leave the global seed anywhere)
    model = modeling.BertModel(BertConfig.from_dict(DROPOUT_CONFIG))
    variables = list(model.named_variables().values())
    ids = tf.constant(np.random.RandomState(0).randint(1, 50, [4, 8]), tf.int32)
    calls_per_tower = 1 + 3 * DROPOUT_CONFIG["num_hidden_layers"]  # embeddings; 3 per layer

    def tower_fn(shard, position, step):
        with dropout_stream(3, step, position, 2):
            out = model(shard["ids"], training=True)
        return {"loss": tf.reduce_sum(tf.square(out.sequence_output))
                + tf.reduce_sum(out.pooled_output)}

    def run(jit_compile, draw_outside):
        grad_fn = towers.make_tower_grad_fn(tower_fn, variables, jit_compile=jit_compile,
                                            draw_outside=draw_outside)

        @tf.function(autograph=False)
        def step(ids):
            outs, grads = towers.run_towers(
                grad_fn, towers.split_batch({"ids": ids}, 2), towers.tower_devices(2), 1.0,
                [tf.constant(0, tf.int64), tf.constant(2, tf.int64)], tf.constant(7, tf.int64))
            return [o["loss"] for o in outs], [tf.convert_to_tensor(g)
                                               for g in towers.sum_gradients(grads)]
        return step(ids), _random_ops(step.get_concrete_function(ids).graph)

    (want_losses, want_grads), _ = run(False, False)
    (losses, grads), (inside, outside) = run(True, draw_outside)
    assert inside  # the towers did run as XLA computations (one traced for both)
    if not draw_outside:
        assert (inside, outside) == ([calls_per_tower] * len(inside), 0)
    else:
        assert (inside, outside) == ([0] * len(inside), 2 * calls_per_tower)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for v, g, w in zip(variables, grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max())),
                                   err_msg=v.name)


def test_drawn_outside_refuses_a_different_number_of_draws():
    stream_args = (3, tf.constant(1, tf.int64), tf.constant(0, tf.int64), 2)
    x = tf.ones([2, 6])
    recording = execution.OutsideDraws.recording()
    with execution.entered(drawn_outside=recording), dropout_stream(*stream_args):
        want = modeling.dropout(x, 0.5, True)
    drawn = recording.drawn
    assert len(drawn) == 1
    supplied = execution.OutsideDraws.supplied(drawn)
    with execution.entered(drawn_outside=supplied), dropout_stream(*stream_args):
        np.testing.assert_array_equal(modeling.dropout(x, 0.5, True), want)
    supplied.check_all_taken()
    with pytest.raises(ValueError, match="drew 0 dropout masks, 1 were drawn outside it"):
        execution.OutsideDraws.supplied(drawn).check_all_taken()
    with pytest.raises(ValueError, match="draws more than the 1 dropout masks drawn outside"):
        with execution.entered(drawn_outside=execution.OutsideDraws.supplied(drawn)), \
                dropout_stream(*stream_args):
            modeling.dropout(x, 0.5, True)
            modeling.dropout(x, 0.5, True)


# -- the trainer ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("pretrain")
    files = [write_records(d / "a.tfrecord", 96, seed=1), write_records(d / "b.tfrecord", 64,
                                                                        seed=2)]
    tf.random.set_seed(7)
    init = BertPretrainer(BertConfig.from_dict(CONFIG))
    init_ckpt = checkpoint.write_bundle(str(d / "init" / "bert_model.ckpt"),
                                        init.named_variables())
    return {"files": files, "init": init_ckpt, "dir": d}


def train(data, tmp_path, name, n_gpus, batch, accum=1, steps=4, precision="fp32", xla=False,
          lr=1e-3, config=None, init=None, next_sentence=True, **kwargs):
    cfg = TrainConfig(output_dir=str(tmp_path / name), train_batch_size=batch, n_gpus=n_gpus,
                      num_accumulation_steps=accum, num_train_steps=steps, num_warmup_steps=1,
                      learning_rate=lr, save_checkpoints_steps=100, log_every_n_steps=1,
                      precision=precision, use_xla=xla, init_checkpoint=init or data["init"],
                      **kwargs)
    task = BertPretrainer(BertConfig.from_dict(config or CONFIG),
                                compute_dtype=training.compute_dtype(precision),
                                next_sentence=next_sentence)
    trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
    dataset = input_pipeline.record_dataset(data["files"], features.pretraining_shapes(SEQ, PREDS),
                                            cfg.global_batch_size, True, seed=3,
                                            shuffle_buffer=cfg.shuffle_buffer_size)
    metrics = trainer.train(dataset)
    return trainer, metrics


def weights(trainer):
    return {k: v.numpy() for k, v in trainer.checkpoint_tensors().items()}


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


@pytest.fixture(scope="module")
def one_device(data, tmp_path_factory):
    return train(data, tmp_path_factory.mktemp("ref"), "ref", n_gpus=1, batch=8)


def test_three_towers_equal_one_device(data, tmp_path):
    """A global batch of 6 over 3 towers (an odd tower count) equals its own one-device run:
    same weights and slots after 4 updates. The splits of 8 (2 x 4, 1 x 4 x 2 micro-batches,
    4 x 1 x 2) are checked with dropout on below, which is the stronger claim."""
    reference, _ = train(data, tmp_path, "ref6", n_gpus=1, batch=6)
    trainer, metrics = train(data, tmp_path, "towers", 3, 2)
    assert int(trainer.global_step.numpy()) == 4
    assert max_diff(weights(trainer), weights(reference)) <= 1e-5
    assert np.isfinite(metrics["loss"])


def test_summed_tower_gradients_norm_and_loss_equal_one_device(data, tmp_path):
    """The trainer's sum of the towers' gradients (each tower differentiates its share of the
    global loss) is the one-device gradient: per variable, and as the logged global norm and
    loss of the first update, to 1e-6. Adam barely sees a constant factor on the gradients, so
    the weight comparisons above would not notice a mean taken in place of the sum."""
    batch = next(iter(input_pipeline.record_dataset(
        data["files"], features.pretraining_shapes(SEQ, PREDS), 8, True, seed=3)))

    def update_step(n_gpus):
        cfg = TrainConfig(output_dir=str(tmp_path / str(n_gpus)), train_batch_size=8 // n_gpus,
                          n_gpus=n_gpus, num_train_steps=4, num_warmup_steps=1,
                          learning_rate=1e-3)
        task = BertPretrainer(BertConfig.from_dict(CONFIG))
        checkpoint.init_from_checkpoint(data["init"], task.named_variables())
        return training.UpdateStep(task, cfg, towers.tower_devices(n_gpus))

    results = {}
    for n_gpus in (1, 2):
        step = update_step(n_gpus)
        grads, _ = step.towers(batch, step.global_context(batch))
        results[n_gpus] = ([tf.convert_to_tensor(g).numpy() for g in grads], step(batch))
    (one, one_metrics), (two, two_metrics) = results[1], results[2]
    assert max(float(np.abs(a - b).max()) for a, b in zip(one, two)) <= 1e-6
    norm = float(one_metrics["global_norm"])
    assert norm > 1e-2  # the tolerance below is far smaller than the norm
    assert abs(float(two_metrics["global_norm"]) - norm) <= 1e-6 * max(1.0, norm)
    assert abs(float(two_metrics["loss"]) - float(one_metrics["loss"])) <= 1e-6


def test_the_towers_share_one_trace_each_called_on_its_device(data, tmp_path):
    """Start-up: a 4-tower update traces the model's forward and backward pass once, not once
    per tower (calls of the task's tower_loss while tracing), and the train step's graph calls
    that trace once on each tower's device."""
    batch = next(iter(input_pipeline.record_dataset(
        data["files"], features.pretraining_shapes(SEQ, PREDS), 8, True, seed=3)))
    cfg = TrainConfig(output_dir=str(tmp_path), train_batch_size=2, n_gpus=4,
                      num_train_steps=2, num_warmup_steps=0)
    task = BertPretrainer(BertConfig.from_dict(CONFIG))
    step = training.UpdateStep(task, cfg, towers.tower_devices(4))
    traced = []
    tower_loss = task.tower_loss
    task.tower_loss = lambda *args, **kwargs: traced.append(1) or tower_loss(*args, **kwargs)
    step(batch)
    step(batch)
    assert len(traced) == 1
    graph = step._train_step.get_concrete_function(batch, tf.constant(0.0), None).graph
    calls = [op.device for op in graph.get_operations()
             if op.type in ("PartitionedCall", "StatefulPartitionedCall")
             and "traced" in op.get_attr("f").name]
    assert sorted(calls) == [f"/device:CPU:{i}" for i in range(4)]


# -- dropout on: masks keyed by (seed, step, global example position) -----------------------

DROPOUT_CONFIG = dict(CONFIG, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def one_device_dropout(data, tmp_path_factory):
    return train(data, tmp_path_factory.mktemp("ref_dropout"), "ref", n_gpus=1, batch=8,
                 config=DROPOUT_CONFIG)


def test_another_random_seed_draws_other_dropout_masks(data, tmp_path, one_device_dropout):
    """--random_seed reaches dropout: the same run (same init, same batches: the input's seed
    is the helper's own) with another seed ends with other weights, by far more than the
    rounding the exactness tests allow. Every exactness test compares runs of equal seeds, so
    a seed ignored by the masks would pass them all."""
    assert one_device_dropout[0].cfg.random_seed == TrainConfig.random_seed
    reseeded, _ = train(data, tmp_path, "reseeded", n_gpus=1, batch=8, config=DROPOUT_CONFIG,
                        random_seed=TrainConfig.random_seed + 1)
    assert max_diff(weights(reseeded), weights(one_device_dropout[0])) > 1e-4


@pytest.mark.parametrize("n_gpus,batch,accum", [(2, 4, 1), (1, 4, 2), (4, 1, 2)])
def test_with_dropout_on_towers_and_accumulation_equal_one_device(
        data, tmp_path, one_device, one_device_dropout, n_gpus, batch, accum):
    """Dropout 0.1 everywhere (every real run): the split of the global batch over towers and
    micro-batches does not change the masks, so the weights are the same."""
    trainer, _ = train(data, tmp_path, "towers", n_gpus, batch, accum, config=DROPOUT_CONFIG)
    reference = weights(one_device_dropout[0])
    assert max_diff(weights(trainer), reference) <= 1e-5
    # Dropout did act: the run differs from the dropout-off one.
    assert max_diff(reference, weights(one_device[0])) > 1e-4


@pytest.mark.parametrize("n_gpus,batch,accum,precision,xla", [
    (1, 8, 1, "fp32", False), (2, 4, 1, "fp32", False), (1, 4, 2, "fp32", False),
    (2, 4, 1, "fp16", False), (2, 4, 1, "bf16", False), (2, 4, 1, "fp32", True)])
def test_gradient_checkpointing_gives_the_same_weights(data, tmp_path, one_device_dropout,
                                                       n_gpus, batch, accum, precision, xla):
    """--gradient_checkpointing recomputes each layer in the backward pass: with dropout 0.1
    the recomputed masks are the forward pass's (position-keyed), so 4 updates end with the
    weights of the same run without it, whatever the towers, accumulation, precision or XLA."""
    checkpointed, _ = train(data, tmp_path, "gc", n_gpus, batch, accum, precision=precision,
                            xla=xla, config=DROPOUT_CONFIG, gradient_checkpointing=True)
    if precision == "fp32":  # towers, accumulation and XLA equal one device (tests above)
        reference = one_device_dropout[0]
    else:
        reference, _ = train(data, tmp_path, "plain", n_gpus, batch, accum, precision=precision,
                             xla=xla, config=DROPOUT_CONFIG)
    # fp16's gradients carry 11-bit mantissas: the recomputed graph's rounding moves a weight by
    # up to 1.1e-5 here (deterministically; two runs without checkpointing are bit-identical,
    # bf16 is exact, fp32 2.6e-8), while masks other than the forward pass's move them by far
    # more than 1e-4 (test_with_dropout_on_towers_and_accumulation_equal_one_device).
    tolerance = 5e-5 if precision == "fp16" else 1e-5
    assert max_diff(weights(checkpointed), weights(reference)) <= tolerance


def test_xla_layers_give_the_same_weights(data, tmp_path, one_device_dropout):
    """--xla_layers (each encoder layer's forward and backward pass one XLA computation, its
    dropout masks drawn inside it): with dropout 0.1, 2 towers and 2 accumulated micro-batches,
    4 updates end with the weights and slots of the one-device run without it."""
    trainer, _ = train(data, tmp_path, "xla_layers", n_gpus=2, batch=2, accum=2,
                       config=DROPOUT_CONFIG, xla_layers=True)
    assert max_diff(weights(trainer), weights(one_device_dropout[0])) <= 1e-5


def test_gradient_checkpointing_recomputes_the_layers():
    """The backward pass of a checkpointed encoder runs each layer's forward ops again: its
    gradient graph holds more matmuls than without (and the same gradients, above)."""
    config = BertConfig.from_dict(DROPOUT_CONFIG)
    ids = tf.constant(np.random.RandomState(0).randint(1, 50, [2, SEQ]), tf.int32)

    def matmuls(checkpointing):
        model = modeling.BertModel(config)

        @tf.function
        def grads():
            with tf.GradientTape() as tape, execution.entered(recompute_layers=checkpointing):
                loss = tf.reduce_sum(model(ids, training=True).sequence_output)
            return tape.gradient(loss, list(model.named_variables().values()))

        graph = grads.get_concrete_function().graph
        return sum(op.type in ("MatMul", "BatchMatMulV2") for op in graph.get_operations())

    assert matmuls(True) > matmuls(False)


def _update_graph_ops(**train_options):
    """(matmuls, compiled functions other than the towers' fused GELU and masked-LM loss and
    the update) of the graph `UpdateStep` traces for one update of a dropout-on pretrainer,
    its TrainConfig given `train_options`."""
    rng = np.random.RandomState(0)
    batch = {"input_ids": tf.constant(rng.randint(1, 50, [2, SEQ]), tf.int32),
             "input_mask": tf.ones([2, SEQ], tf.int32), "segment_ids": tf.zeros([2, SEQ], tf.int32),
             "masked_lm_positions": tf.constant(rng.randint(1, SEQ, [2, PREDS]), tf.int32),
             "masked_lm_ids": tf.constant(rng.randint(1, 50, [2, PREDS]), tf.int32),
             "masked_lm_weights": tf.ones([2, PREDS]),
             "next_sentence_labels": tf.constant([[0], [1]], tf.int32)}
    cfg = TrainConfig(output_dir="unused", train_batch_size=2, num_train_steps=1,
                      **train_options)
    update = training.UpdateStep(BertPretrainer(BertConfig.from_dict(DROPOUT_CONFIG)), cfg,
                                 towers.tower_devices(1))
    graph_def = update._train_step.get_concrete_function(batch, tf.constant(0.0)).graph \
        .as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    compiled = [f.signature.name for f in graph_def.library.function
                if f.attr.get("_XlaMustCompile") is not None and f.attr["_XlaMustCompile"].b
                and not any(part in f.signature.name
                            for part in ("_gelu_", "_xent_", "_apply_clipped"))]
    return sum(n.op in ("MatMul", "BatchMatMulV2") for n in nodes), compiled


def test_the_trainer_runs_the_layers_as_its_config_says():
    """--gradient_checkpointing, --xla_layers and --use_xla are the trainer's to apply (no job
    sets them on the model): the update `UpdateStep` traces from a TrainConfig with
    `gradient_checkpointing` recomputes the layers in its backward pass (more matmuls), with
    `xla_layers` calls the compiled layer, with `use_xla` compiles the towers, and without
    any has none of these (the exactness tests compare weights only, which an ignored option
    would pass too)."""
    plain_matmuls, plain_compiled = _update_graph_ops()
    recomputed_matmuls, recomputed_compiled = _update_graph_ops(gradient_checkpointing=True)
    _, compiled = _update_graph_ops(xla_layers=True)
    _, compiled_towers = _update_graph_ops(use_xla=True)
    assert plain_compiled == [] and recomputed_compiled == []
    assert recomputed_matmuls > plain_matmuls
    assert compiled  # the encoder layer's XLA computation
    assert compiled_towers  # the towers' forward and backward pass


def test_dropout_stream_is_a_function_of_seed_step_and_position():
    x = tf.ones([6, 5, 3])

    def masks(seed, step, offset, rows, calls=1):
        with dropout_stream(seed, tf.constant(step), tf.constant(offset), tf.constant(rows)):
            return [modeling.dropout(x[offset:offset + rows], 0.25, True).numpy()
                    for _ in range(calls)]

    whole = masks(1, 3, 0, 6)[0]
    # A slice computed alone (another tower) gets exactly its rows of the whole batch's mask.
    np.testing.assert_array_equal(np.concatenate([masks(1, 3, 0, 2)[0], masks(1, 3, 2, 4)[0]]),
                                  whole)
    # Kept values are scaled by 1 / (1 - rate), as tf.nn.dropout.
    assert set(np.unique(whole).tolist()) <= {0.0, float(np.float32(1.0 / 0.75))}
    # Another step, seed or dropout call (layer) draws another mask.
    assert not np.array_equal(masks(1, 4, 0, 6)[0], whole)
    assert not np.array_equal(masks(2, 3, 0, 6)[0], whole)
    first, second = masks(1, 3, 0, 6, calls=2)
    np.testing.assert_array_equal(first, whole)
    assert not np.array_equal(second, whole)
    # The keep rate over many values is 1 - rate (binomial s.d. ~0.4% at 10k values).
    big = tf.ones([100, 100])
    with dropout_stream(5, tf.constant(0), tf.constant(0), tf.constant(100)):
        kept = float(np.mean(modeling.dropout(big, 0.25, True).numpy() > 0))
    assert abs(kept - 0.75) < 0.02
    # 16-bit draws: rate 0.1 drops with probability 6554 / 2**16 (binomial s.d. 3e-4 at 1M).
    huge = tf.ones([1000, 1000])
    with dropout_stream(6, tf.constant(0), tf.constant(0), tf.constant(1000)):
        dropped = float(np.mean(modeling.dropout(huge, 0.1, True).numpy() == 0))
    assert abs(dropped - 6554 / 65536) < 1.5e-3
    with pytest.raises(ValueError, match=r"dropout rate must be in \[0, 1\), got 1.0"):
        with dropout_stream(6, tf.constant(0), tf.constant(0), tf.constant(1000)):
            modeling.dropout(huge, 1.0, True)


# -- ALBERT/Cramming model options and Cramming's trainer options ----------------------------

OPTION_CONFIGS = {
    # ALBERT with BERT's dropout (Cramming has none): the exactness holds with dropout on.
    "albert": dict(TINY_CONFIG, embedding_size=16, share_parameters="all", **DROPOUT),
    "albert_ffn": dict(TINY_CONFIG, share_parameters="ffn", **DROPOUT),
    "albert_attention": dict(TINY_CONFIG, share_parameters="attention", **DROPOUT),
    "cramming": dict(CONFIG, intermediate_size=36, pre_layer_norm=True, use_bias=False,
                     position_embedding_type="scaled_sinusoidal", gated_ffn=True),
}
CRAMMING_TRAINING = {"lr_schedule": "one_cycle", "clip_norm": 0.5}


@pytest.fixture(scope="module")
def option_inits(data):
    """An init checkpoint per option config (the variables differ from Google's)."""
    inits = {}
    for name, config in OPTION_CONFIGS.items():
        tf.random.set_seed(7)
        task = BertPretrainer(BertConfig.from_dict(config),
                                    next_sentence=name != "cramming")
        inits[name] = checkpoint.write_bundle(str(data["dir"] / f"init-{name}" / "model.ckpt"),
                                              task.named_variables())
    return inits


# (options, n_gpus, batch, accum, xla, trainer options) vs the same on one device, no XLA.
OPTION_CASES = [
    ("albert", 2, 4, 1, False, {}),
    ("cramming", 2, 4, 1, False, CRAMMING_TRAINING),
    ("cramming", 2, 4, 1, True, CRAMMING_TRAINING),
    ("cramming", 2, 2, 2, False, dict(CRAMMING_TRAINING, batch_ramp_steps=3)),
    ("albert", 4, 1, 4, False, {"batch_ramp_steps": 4}),
    ("albert_ffn", 2, 2, 2, False, {}),
    ("albert_attention", 2, 4, 1, False, {}),
]


@pytest.fixture(scope="module")
def option_reference(data, tmp_path_factory):
    """The one-device run of an OPTION_CASES case, made once for the cases that share it (the
    XLA case and the non-XLA one of the same split)."""
    runs = {}

    def reference(global_batch, accum, **common):
        key = repr((global_batch, accum, sorted(common.items())))
        if key not in runs:
            runs[key], _ = train(data, tmp_path_factory.mktemp("ref"), "ref", n_gpus=1,
                                 batch=global_batch, accum=accum, **common)
        return runs[key]

    return reference


@pytest.mark.parametrize("options,n_gpus,batch,accum,xla,extra", OPTION_CASES)
def test_towers_equal_one_device_with_model_and_trainer_options(
        data, tmp_path, option_inits, option_reference, options, n_gpus, batch, accum, xla,
        extra):
    common = dict(config=OPTION_CONFIGS[options], init=option_inits[options], steps=5,
                  next_sentence=options != "cramming", **extra)
    reference = option_reference(n_gpus * batch, accum, **common)
    trainer, metrics = train(data, tmp_path, "towers", n_gpus, batch, accum, xla=xla, **common)
    assert int(trainer.global_step.numpy()) == 5
    assert max_diff(weights(trainer), weights(reference)) <= 1e-5
    assert ("next_sentence_loss" in metrics) == (options != "cramming")
    assert np.isfinite(metrics["loss"])


def test_xla_towers_equal_one_device_with_dropout(data, tmp_path, option_inits):
    """With dropout on, XLA-compiled towers give the update of one device without XLA: XLA's
    Philox draws TensorFlow's CPU kernel's values (the masks are the same; only
    float rounding differs; dropout itself moves the weights by ~7e-3 here)."""
    common = dict(config=OPTION_CONFIGS["albert"], init=option_inits["albert"], steps=3)
    plain, _ = train(data, tmp_path, "plain", 1, 8, **common)
    two, _ = train(data, tmp_path, "two", 2, 4, xla=True, **common)
    assert max_diff(weights(two), weights(plain)) <= 1e-5


def test_xla_philox_draws_equal_the_cpu_kernels():
    def draw(key, counter):
        return tf.raw_ops.StatelessRandomUniformFullIntV2(
            shape=tf.constant([4, 1000], tf.int64), key=key, counter=counter, alg=1,
            dtype=tf.uint32)
    key, counter = tf.constant([123456789], tf.uint64), tf.constant([17, 5], tf.uint64)
    eager = draw(key, counter).numpy()
    np.testing.assert_array_equal(tf.function(draw, jit_compile=True)(key, counter).numpy(),
                                  eager)
    assert len(np.unique(eager)) > 3990  # not a constant or a short cycle


@pytest.mark.parametrize("optimizer,bias_correction", [("lamb", False), ("adamw", True)])
def test_other_optimizers_through_the_trainer_with_towers(data, tmp_path, one_device,
                                                          optimizer, bias_correction):
    """--optimizer=lamb and --adam_bias_correction reach the trainer: 2 towers equal one
    device, with Google's slot names, and the weights differ from Google's AdamWeightDecay."""
    options = dict(optimizer=optimizer, adam_bias_correction=bias_correction)
    two, _ = train(data, tmp_path, "two", n_gpus=2, batch=4, **options)
    one, _ = train(data, tmp_path, "one", n_gpus=1, batch=8, **options)
    kind = optimization.LAMB if optimizer == "lamb" else optimization.AdamWeightDecay
    assert type(two.update.optimizer) is kind
    assert getattr(two.update.optimizer, "bias_correction", False) == bias_correction
    assert max_diff(weights(two), weights(one)) <= 1e-5
    assert "bert/encoder/layer_0/output/dense/kernel/adam_v" in weights(two)
    assert max_diff(weights(two), weights(one_device[0])) > 1e-4  # not plain AdamWeightDecay


def test_batch_ramp_schedule_and_first_update():
    """The ramp accumulates 1 micro-batch at step 0, growing linearly to num_accumulation_steps
    at batch_ramp_steps; its first update is a plain one-micro-batch update."""
    cfg = TrainConfig(output_dir="unused", train_batch_size=2, num_accumulation_steps=4,
                      batch_ramp_steps=6)
    task = BertPretrainer(BertConfig.from_dict(CONFIG))
    trainer = training.Trainer(task, cfg, towers.tower_devices(1))
    assert [trainer.micro.at(s) for s in range(9)] == [1, 1, 2, 2, 3, 3, 4, 4, 4]
    assert trainer.micro.between(0, 9) == 24
    assert trainer.micro.between(5, 8) == 11
    with pytest.raises(ValueError, match="--num_accumulation_steps, which must then be >= 2"):
        TrainConfig(output_dir="unused", batch_ramp_steps=3).validate()


def test_batch_ramp_first_step_is_one_micro_batch(data, tmp_path):
    ramped, _ = train(data, tmp_path, "ramped", n_gpus=1, batch=4, accum=2, steps=1,
                      batch_ramp_steps=10)
    plain, _ = train(data, tmp_path, "plain", n_gpus=1, batch=4, steps=1)
    assert max_diff(weights(ramped), weights(plain)) <= 1e-6


def test_batch_ramp_stop_and_resume_equals_uninterrupted(data, tmp_path):
    """Stopped mid-ramp by `on_step` (as by a signal) and resumed from the checkpoint and the
    saved input position: the same weights as one uninterrupted run."""
    full, _ = train(data, tmp_path, "full", n_gpus=1, batch=2, accum=3, steps=6,
                    batch_ramp_steps=4)

    def run(stop_at):
        cfg = TrainConfig(output_dir=str(tmp_path / "stopped"), train_batch_size=2,
                          num_accumulation_steps=3, batch_ramp_steps=4, num_train_steps=6,
                          num_warmup_steps=1, learning_rate=1e-3, save_checkpoints_steps=100,
                          log_every_n_steps=1, init_checkpoint=data["init"])
        trainer = training.Trainer(BertPretrainer(BertConfig.from_dict(CONFIG)),
                                   cfg, towers.tower_devices(1))
        dataset = input_pipeline.record_dataset(
            data["files"], features.pretraining_shapes(SEQ, PREDS), cfg.global_batch_size,
            True, seed=3)
        trainer.train(dataset, on_step=lambda step, out: step == stop_at)
        return trainer

    assert int(run(stop_at=3).global_step.numpy()) == 3
    resumed = run(stop_at=None)
    assert int(resumed.global_step.numpy()) == 6
    assert max_diff(weights(resumed), weights(full)) <= 1e-6


def test_training_reduces_the_loss_and_logs_metrics(data, tmp_path):
    trainer, metrics = train(data, tmp_path, "long", n_gpus=2, batch=4, steps=30, lr=5e-3)
    events = tf.io.gfile.glob(str(tmp_path / "long" / "events.out.tfevents.*"))
    assert events
    tags, losses = set(), []
    for path in events:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.add(value.tag)
                if value.tag == "loss":
                    losses.append(float(tf.make_ndarray(value.tensor)))
    assert {"loss", "masked_lm_loss", "next_sentence_loss", "learning_rate",
            "examples_per_sec"} <= tags
    assert losses[-1] < losses[0] - 0.5


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_close_to_fp32(data, tmp_path, one_device, precision):
    trainer, metrics = train(data, tmp_path, precision, n_gpus=2, batch=4, precision=precision)
    assert int(trainer.global_step.numpy()) == 4
    ref = one_device[1]
    assert abs(metrics["loss"] - ref["loss"]) < 0.05
    # Master weights stay float32 and the checkpoint has Google's names (+ the loss scale).
    tensors = trainer.checkpoint_tensors()
    assert tensors["bert/embeddings/word_embeddings"].dtype == tf.float32
    assert ("loss_scale" in tensors) == (precision == "fp16")


def test_fp16_overflow_skips_the_step_and_halves_the_scale(data, tmp_path):
    trainer, _ = train(data, tmp_path, "fp16", n_gpus=1, batch=8, steps=1, precision="fp16")
    before = weights(trainer)
    trainer.loss_scale.assign(3e38)  # the scaled loss overflows float16 and float32
    batch = next(iter(input_pipeline.record_dataset(
        data["files"], features.pretraining_shapes(SEQ, PREDS), 8, False)))
    out = trainer.step(batch)
    assert not bool(out["finite"])
    assert int(trainer.global_step.numpy()) == 1
    assert float(trainer.loss_scale.numpy()) == pytest.approx(1.5e38)
    after = weights(trainer)
    for name in before:
        if name not in ("loss_scale", "loss_scale_good_steps"):
            np.testing.assert_array_equal(before[name], after[name])


def test_fp16_loss_scale_resumes(data, tmp_path):
    """README: a resumed run continues with the checkpoint's loss scale and good-step count,
    not from 2^15."""
    trainer, _ = train(data, tmp_path, "fp16", n_gpus=1, batch=8, steps=1, precision="fp16")
    trainer.loss_scale.assign(1024.0)
    trainer.update.good_steps.assign(7)
    trainer.save()
    resumed, _ = train(data, tmp_path, "fp16", n_gpus=1, batch=8, steps=3, precision="fp16")
    assert int(resumed.global_step.numpy()) == 3
    assert float(resumed.loss_scale.numpy()) == 1024.0  # 2 finite steps: no change of scale
    assert int(resumed.update.good_steps.numpy()) == 7 + 2


def test_xla_towers_equal_one_device(data, tmp_path, one_device):
    trainer, _ = train(data, tmp_path, "xla", n_gpus=2, batch=4, xla=True)
    assert max_diff(weights(trainer), weights(one_device[0])) <= 1e-5


def test_non_finite_loss_in_fp32_stops_naming_the_step(data, tmp_path):
    with pytest.raises(training.NonFiniteLossError, match=r"at step \d+ .*no checkpoint was "
                                                         r"written after step 0"):
        train(data, tmp_path, "nan", n_gpus=1, batch=8, steps=50, lr=1e30,
              config=dict(CONFIG, initializer_range=1e18))
    assert checkpoint.latest_checkpoint(str(tmp_path / "nan")) is None


def test_non_finite_gradients_in_fp32_are_not_applied(data, tmp_path):
    """The update of a step whose loss is not finite is skipped in fp32 too (the loop then
    stops with NonFiniteLossError, above): no weight, Adam slot or global_step moves."""
    trainer, _ = train(data, tmp_path, "fp32", n_gpus=2, batch=4, steps=1)
    poisoned = "bert/encoder/layer_0/output/dense/bias"
    value = trainer.variables[poisoned].numpy()
    value[0] = np.inf
    trainer.variables[poisoned].assign(value)
    before = weights(trainer)
    batch = next(iter(input_pipeline.record_dataset(
        data["files"], features.pretraining_shapes(SEQ, PREDS), 8, False)))
    out = trainer.step(batch)
    assert not bool(out["finite"]) and not np.isfinite(float(out["loss"]))
    after = weights(trainer)
    assert int(after["global_step"]) == 1
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_eval_results_have_googles_keys(data, tmp_path, one_device):
    trainer = one_device[0]
    dataset = input_pipeline.record_dataset(data["files"], features.pretraining_shapes(SEQ, PREDS),
                                            7, False)
    result = trainer.evaluate(dataset, max_steps=3)
    assert sorted(result) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                              "next_sentence_accuracy", "next_sentence_loss"]
    assert result["global_step"] == 4 and 0 <= result["masked_lm_accuracy"] <= 1
    path = tmp_path / "eval_results.txt"
    training.write_eval_results(str(path), result)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("global_step = 4") and lines == sorted(lines)


def test_prune_input_states_keeps_listed_and_newer_steps_and_clears_a_killed_write(tmp_path):
    # What a SIGKILL during `Checkpoint.write` leaves: the `ckpt-N_temp/` shard directory.
    # CI once crashed on resume because pruning tried to delete it as a file.
    state = tf.train.Checkpoint(v=tf.Variable(1.0))
    for step in (5, 10, 15, 20):
        state.write(str(tmp_path / f"ckpt-{step}"))
    (tmp_path / "ckpt-25_temp").mkdir()
    (tmp_path / "ckpt-25_temp" / "part-00000-of-00001.index").write_bytes(b"partial")
    training.prune_input_states(str(tmp_path), kept_steps={10, 15})
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not any(n.startswith(("ckpt-5.", "ckpt-25")) for n in left), left
    for step in (10, 15, 20):  # 20: written before the chief published its checkpoint
        assert f"ckpt-{step}.index" in left
        tf.train.Checkpoint(v=tf.Variable(0.0)).read(str(tmp_path / f"ckpt-{step}"))


@pytest.mark.parametrize("norm", ["dense", "values"])
def test_indexed_slices_norm_is_what_tf_clip_by_global_norm_sees(data, tmp_path, norm):
    """--indexed_slices_norm: "values" is the norm TF's own tf.clip_by_global_norm computes on
    the raw gradients (Google's TF1 clipping: a repeated token's rows counted apart), "dense"
    the one it computes on the densified gradients; the tiny vocabulary repeats tokens, so
    the two differ."""
    cfg = TrainConfig(output_dir=str(tmp_path / norm), train_batch_size=8, num_train_steps=1,
                      num_warmup_steps=0, init_checkpoint=data["init"],
                      indexed_slices_norm=norm)
    trainer = training.Trainer(BertPretrainer(BertConfig.from_dict(CONFIG)), cfg,
                               towers.tower_devices(1))
    trainer.restore_or_initialize()
    batch = next(iter(input_pipeline.record_dataset(
        data["files"], features.pretraining_shapes(SEQ, PREDS), 8, True, seed=3)))
    grads, _ = trainer.update.towers(batch, trainer.update.global_context(batch))
    present = [g for g in grads if g is not None]
    assert any(isinstance(g, tf.IndexedSlices) for g in present)
    _, raw_norm = tf.clip_by_global_norm(present, 1.0)
    _, dense_norm = tf.clip_by_global_norm([tf.convert_to_tensor(g) for g in present], 1.0)
    assert abs(float(raw_norm) - float(dense_norm)) > 1e-3 * float(dense_norm)
    out = trainer.step(batch)
    want = raw_norm if norm == "values" else dense_norm
    np.testing.assert_allclose(float(out["global_norm"]), float(want), rtol=1e-5)


@pytest.mark.parametrize("shuffle_buffer", [100, 0])
def test_resume_with_another_global_batch_continues_at_the_next_example(data, tmp_path,
                                                                        shuffle_buffer):
    """5 updates of 8 examples, then the same output_dir with 4 per update (what a user does
    after running out of memory): the rerun starts at example 40 of the same record stream (no
    example repeated or skipped) at global_step 40 / 4 = 10. Pretraining's record stream
    (buffer 100) and fine-tuning's epoch permutations (buffer 0, run_classifier's default)."""
    out = "changed"
    first, _ = train(data, tmp_path, out, n_gpus=2, batch=4, steps=5, config=DROPOUT_CONFIG,
                     shuffle_buffer_size=shuffle_buffer)
    assert int(first.global_step.numpy()) == 5
    cfg = TrainConfig(output_dir=str(tmp_path / out), train_batch_size=4, n_gpus=1,
                      num_train_steps=12, num_warmup_steps=1, learning_rate=1e-3,
                      save_checkpoints_steps=100, log_every_n_steps=1, init_checkpoint=data["init"],
                      shuffle_buffer_size=shuffle_buffer)
    trainer = training.Trainer(BertPretrainer(BertConfig.from_dict(DROPOUT_CONFIG)), cfg,
                               towers.tower_devices(1))
    seen, step = [], trainer.step

    def recording_step(features, **kwargs):
        seen.append((int(trainer.global_step.numpy()), features["input_ids"].numpy()))
        return step(features, **kwargs)

    trainer.step = recording_step
    shapes = features.pretraining_shapes(SEQ, PREDS)
    trainer.train(input_pipeline.record_dataset(data["files"], shapes, 4, True, seed=3,
                                                shuffle_buffer=shuffle_buffer))
    stream = iter(input_pipeline.record_dataset(data["files"], shapes, 4, True, seed=3,
                                                shuffle_buffer=shuffle_buffer))
    batches = [next(stream)["input_ids"].numpy() for _ in range(12)]
    assert [s for s, _ in seen] == [10, 11]
    np.testing.assert_array_equal(seen[0][1], batches[10])  # examples 40..43
    np.testing.assert_array_equal(seen[1][1], batches[11])
    assert int(trainer.global_step.numpy()) == 12
    # A rerun of the finished run (same batch) resumes from its own checkpoint and recipe.
    again = training.Trainer(BertPretrainer(BertConfig.from_dict(DROPOUT_CONFIG)),
                             cfg, towers.tower_devices(1))
    assert again.restore_or_initialize() == 12


def test_an_input_position_of_another_pipeline_is_skipped_to(data, tmp_path, caplog):
    """A checkpoint whose input position was written by another input pipeline (e.g. before
    an upgrade changed it): the rerun says so and reaches the step by reading batches."""
    from absl import logging as absl_logging

    out = "upgraded"
    train(data, tmp_path, out, n_gpus=1, batch=8, steps=3)
    cfg = TrainConfig(output_dir=str(tmp_path / out), train_batch_size=8, num_train_steps=5,
                      num_warmup_steps=1, learning_rate=1e-3, save_checkpoints_steps=100,
                      log_every_n_steps=1, init_checkpoint=data["init"])
    trainer = training.Trainer(BertPretrainer(BertConfig.from_dict(CONFIG)), cfg,
                               towers.tower_devices(1))
    shapes = features.pretraining_shapes(SEQ, PREDS)
    other = input_pipeline.record_dataset(data["files"], shapes, 8, True, seed=3,
                                          shuffle_buffer=0)  # another dataset definition
    with caplog.at_level("WARNING", logger=absl_logging.get_absl_logger().name):
        trainer.train(other)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "does not fit this input pipeline" in messages
    assert "Skipping 3 input batches to reach step 3" in messages
    assert int(trainer.global_step.numpy()) == 5
