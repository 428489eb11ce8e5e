"""Tests of bert_mgpu.engine.optimization against hand-computed numbers, independent numpy code and
Google's own optimization.py (oracle venv)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_mgpu.engine import optimization

# -- learning rate -------------------------------------------------------------------------

# Tolerances are float32's: 1 - 0.99 is off by ~5e-6 relative there.
# init_lr 0.1, 100 train steps, 10 warmup steps; values computed by hand:
#   warmup (step < 10): 0.1 * step / 10;  after: 0.1 * (1 - min(step, 100) / 100).
LR_CASES = [
    (0, 0.0),      # step 0: warmup starts at 0, so Google's first update uses LR 0
    (5, 0.05),     # mid-warmup: 0.1 * 5 / 10
    (9, 0.09),     # last warmup step: 0.1 * 9 / 10
    (10, 0.09),    # end of warmup: the decayed rate 0.1 * (1 - 10/100), not the peak
    (55, 0.045),   # mid-decay: 0.1 * 0.45
    (99, 0.001),   # last training step: 0.1 * 1/100
    (100, 0.0),    # num_train_steps: 0
    (150, 0.0),    # clamped after the end
]


@pytest.mark.parametrize("step,expected", LR_CASES)
def test_learning_rate_at_hand_computed(step, expected):
    lr = optimization.learning_rate_at(step, 0.1, 100, 10)
    assert lr.dtype == tf.float32
    np.testing.assert_allclose(lr.numpy(), expected, rtol=1e-5, atol=1e-9)


def test_learning_rate_in_tf_function_on_variable_step():
    step = tf.Variable(0, dtype=tf.int64)
    schedule = optimization.learning_rate_schedule(0.1, 100, 10)

    @tf.function
    def lr_now():
        return schedule(step)

    got = []
    for s, _ in LR_CASES:
        step.assign(s)
        got.append(float(lr_now()))
    np.testing.assert_allclose(got, [e for _, e in LR_CASES], rtol=1e-5, atol=1e-9)


def test_learning_rate_without_warmup_starts_at_peak():
    np.testing.assert_allclose(optimization.learning_rate_at(0, 2e-5, 1000, 0).numpy(), 2e-5)
    np.testing.assert_allclose(optimization.learning_rate_at(500, 2e-5, 1000).numpy(), 1e-5)


def test_one_cycle_is_a_triangle_peaking_at_the_middle():
    """Cramming's one-cycle: linear 0 -> peak over the first half, peak -> 0 over the second."""
    rates = [float(optimization.one_cycle_learning_rate_at(s, 1e-3, 10)) for s in range(13)]
    expected = [1e-3 * (1 - abs(s / 5 - 1)) for s in range(11)] + [0.0, 0.0]
    np.testing.assert_allclose(rates, expected, atol=1e-9)
    schedule = optimization.one_cycle_schedule(2e-3, 7)
    step = tf.Variable(0, dtype=tf.int64)
    assert float(tf.function(schedule)(step)) == 0.0
    step.assign(3)
    assert float(tf.function(schedule)(step)) == pytest.approx(2e-3 * 6 / 7)
    with pytest.raises(ValueError, match="num_train_steps"):
        optimization.one_cycle_schedule(1e-3, 0)


def test_learning_rate_rejects_zero_train_steps():
    with pytest.raises(ValueError, match="num_train_steps"):
        optimization.learning_rate_schedule(1e-4, 0, 0)


# -- shared fixtures for the optimizers ----------------------------------------------------

INIT_LR, NUM_TRAIN_STEPS = 0.1, 10     # no warmup: LRs 0.1, 0.09, 0.08 for steps 0, 1, 2
EXCLUDED = {"layer/bias", "layer/LayerNorm/gamma"}


def _initial_values():
    rng = np.random.RandomState(1234)
    return {
        "layer/kernel": rng.normal(size=(3, 2)).astype(np.float32),
        "layer/bias": rng.normal(size=(2,)).astype(np.float32),
        "layer/LayerNorm/gamma": (1.0 + rng.normal(size=(2,)) * 0.1).astype(np.float32),
        "emb/word_embeddings": rng.normal(size=(5, 2)).astype(np.float32),
        "no_grad": rng.normal(size=(2,)).astype(np.float32),
    }


def _gradients_for_step(step):
    """Returns (tf gradients, dense numpy gradients) for one step; IndexedSlices repeat index 1."""
    rng = np.random.RandomState(100 + step)
    dense = {
        "layer/kernel": rng.normal(size=(3, 2)).astype(np.float32),
        "layer/bias": rng.normal(size=(2,)).astype(np.float32),
        "layer/LayerNorm/gamma": rng.normal(size=(2,)).astype(np.float32),
    }
    rows = rng.normal(size=(3, 2)).astype(np.float32)
    indices = np.array([1, 3, 1], np.int64)              # duplicate index: the rows add up
    emb = np.zeros((5, 2), np.float64)
    np.add.at(emb, indices, rows)
    tf_grads = {k: tf.constant(v) for k, v in dense.items()}
    tf_grads["emb/word_embeddings"] = tf.IndexedSlices(
        tf.constant(rows), tf.constant(indices), tf.constant([5, 2], tf.int64))
    tf_grads["no_grad"] = None
    np_grads = {k: v.astype(np.float64) for k, v in dense.items()}
    np_grads["emb/word_embeddings"] = emb
    return tf_grads, np_grads


def _run_optimizer(opt, num_steps=3):
    """Runs `num_steps` updates inside one traced tf.function, the caller owning global_step."""
    variables = {k: tf.Variable(v, name=k) for k, v in _initial_values().items()}
    opt.build(variables)
    global_step = optimization.create_global_step()

    @tf.function
    def train_step(grads):
        opt.apply_gradients(grads, global_step)
        # The caller increments the step, as Google's create_optimizer did.
        global_step.assign_add(1)

    for step in range(num_steps):
        train_step(_gradients_for_step(step)[0])
    return variables, global_step


def _numpy_reference(num_steps, lamb, bias_correction=False):
    """Google's AdamWeightDecay (lamb=False), NVIDIA-style LAMB (lamb=True) or PyTorch's
    AdamW as documented (bias_correction=True: p -= lr * wd * p, then
    p -= lr * m_hat / (sqrt(v_hat) + eps)), in float64."""
    beta_1, beta_2, eps, decay = 0.9, 0.999, 1e-6, 0.01
    params = {k: v.astype(np.float64) for k, v in _initial_values().items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for step in range(num_steps):
        lr = INIT_LR * (1.0 - step / NUM_TRAIN_STEPS)
        _, grads = _gradients_for_step(step)
        for name, g in grads.items():
            m[name] = beta_1 * m[name] + (1 - beta_1) * g
            v[name] = beta_2 * v[name] + (1 - beta_2) * g * g
            if lamb or bias_correction:
                t = step + 1
                update = (m[name] / (1 - beta_1 ** t)) / (
                    np.sqrt(v[name] / (1 - beta_2 ** t)) + eps)
            else:
                update = m[name] / (np.sqrt(v[name]) + eps)
            if name not in EXCLUDED:
                update = update + decay * params[name]
            if lamb and name not in EXCLUDED:
                w_norm, u_norm = np.linalg.norm(params[name]), np.linalg.norm(update)
                update = update * (w_norm / u_norm)
            params[name] = params[name] - lr * update
    return params, m, v


@pytest.mark.parametrize("opt_class,lamb,bias_correction", [
    (optimization.AdamWeightDecay, False, False), (optimization.LAMB, True, False),
    (optimization.AdamWeightDecay, False, True)])
def test_three_steps_match_numpy(opt_class, lamb, bias_correction):
    schedule = optimization.learning_rate_schedule(INIT_LR, NUM_TRAIN_STEPS, 0)
    opt = opt_class(schedule, weight_decay_rate=0.01,
                    **({"bias_correction": True} if bias_correction else {}))
    variables, global_step = _run_optimizer(opt)
    want_params, want_m, want_v = _numpy_reference(3, lamb, bias_correction)

    assert int(global_step.numpy()) == 3
    slots = opt.slot_variables()
    for name, var in variables.items():
        np.testing.assert_allclose(var.numpy(), want_params[name], rtol=2e-5, atol=1e-6,
                                   err_msg=name)
        np.testing.assert_allclose(slots[f"{name}/adam_m"].numpy(), want_m[name], rtol=1e-5,
                                   atol=1e-7, err_msg=name)
        np.testing.assert_allclose(slots[f"{name}/adam_v"].numpy(), want_v[name], rtol=1e-5,
                                   atol=1e-9, err_msg=name)
    # A None gradient leaves the variable and its (zero) slots alone.
    np.testing.assert_array_equal(variables["no_grad"].numpy(), _initial_values()["no_grad"])
    assert not slots["no_grad/adam_m"].numpy().any()


def test_weight_decay_exclusion_matters():
    # Sanity check of the fixture: the excluded variables would move differently if decayed.
    opt = optimization.AdamWeightDecay(0.1, exclude_from_weight_decay=[])
    variables, _ = _run_optimizer(opt, num_steps=1)
    want, _, _ = _numpy_reference(1, lamb=False)
    assert not np.allclose(variables["layer/bias"].numpy(), want["layer/bias"], atol=1e-6)


def test_slots_names_and_module_variables():
    opt = optimization.AdamWeightDecay(1e-3)
    variables = {"bert/a/kernel": tf.Variable(tf.ones([2, 3])), "output_bias": tf.Variable([0.])}
    opt.build(variables)
    slots = opt.slot_variables()
    assert list(slots) == ["bert/a/kernel/adam_m", "bert/a/kernel/adam_v",
                           "output_bias/adam_m", "output_bias/adam_v"]
    for name, slot in slots.items():
        assert slot.name == name + ":0"
        assert slot.dtype == tf.float32 and not slot.trainable
    assert slots["bert/a/kernel/adam_v"].shape == (2, 3)
    # The module owns only its slots, not the model's variables.
    assert {id(v) for v in opt.variables} == {id(v) for v in slots.values()}
    opt.build(variables)                                   # same mapping again: no-op
    assert opt.slot_variables()["output_bias/adam_m"] is slots["output_bias/adam_m"]
    with pytest.raises(ValueError, match="already"):
        opt.build({"other": tf.Variable([1.0])})


def test_apply_gradients_errors_name_the_problem():
    opt = optimization.AdamWeightDecay(1e-3)
    with pytest.raises(ValueError, match="build"):
        opt.apply_gradients({"a": tf.ones([1])})
    opt.build({"a": tf.Variable([1.0])})
    with pytest.raises(ValueError, match="not_built_var"):
        opt.apply_gradients({"not_built_var": tf.ones([1])})
    lamb = optimization.LAMB(1e-3)
    lamb.build({"a": tf.Variable([1.0])})
    with pytest.raises(ValueError, match="step"):
        lamb.apply_gradients({"a": tf.ones([1])})


def test_apply_gradients_does_not_touch_global_step():
    opt = optimization.AdamWeightDecay(optimization.learning_rate_schedule(0.1, 10, 0))
    var = tf.Variable([1.0, 2.0])
    opt.build({"w": var})
    global_step = optimization.create_global_step()
    assert global_step.dtype == tf.int64 and global_step.name == "global_step:0"
    lr = opt.apply_gradients({"w": tf.ones([2])}, global_step)
    assert int(global_step.numpy()) == 0
    np.testing.assert_allclose(lr.numpy(), 0.1)


# -- clipping ------------------------------------------------------------------------------

def _mixed_grads(scale):
    dense = tf.constant([[3.0, -4.0], [1.0, 2.0]]) * scale
    slices = tf.IndexedSlices(tf.constant([[1.0, 1.0], [2.0, 0.5], [1.0, -3.0]]) * scale,
                              tf.constant([0, 2, 0]), tf.constant([4, 2]))
    return [dense, None, slices]


@pytest.mark.parametrize("scale", [1.0, 0.01])     # above and below the clip norm
def test_clip_by_global_norm_matches_tf_on_densified(scale):
    grads = _mixed_grads(scale)
    clipped, norm = optimization.clip_by_global_norm(grads, clip_norm=1.0)
    densified = [tf.convert_to_tensor(g) for g in grads if g is not None]
    want, want_norm = tf.clip_by_global_norm(densified, clip_norm=1.0)

    np.testing.assert_allclose(norm.numpy(), want_norm.numpy(), rtol=1e-6)
    assert clipped[1] is None
    assert isinstance(clipped[2], tf.IndexedSlices)
    np.testing.assert_array_equal(clipped[2].indices.numpy(), [0, 2, 0])
    np.testing.assert_allclose(clipped[0].numpy(), want[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(tf.convert_to_tensor(clipped[2]).numpy(), want[1].numpy(),
                               rtol=1e-6)


def test_clip_by_global_norm_dict_and_tf_function():
    names = ["bert/dense", "classifier/none", "bert/embeddings/word_embeddings"]
    grads = dict(zip(names, _mixed_grads(1.0)))
    clipped, norm = tf.function(optimization.clip_by_global_norm)(grads, 1.0)
    assert list(clipped) == names and clipped["classifier/none"] is None
    densified = [tf.convert_to_tensor(g) for g in grads.values() if g is not None]
    _, want_norm = tf.clip_by_global_norm(densified, 1.0)
    np.testing.assert_allclose(norm.numpy(), want_norm.numpy(), rtol=1e-6)
    total = tf.linalg.global_norm([tf.convert_to_tensor(g) for g in clipped.values()
                                   if g is not None])
    np.testing.assert_allclose(total.numpy(), 1.0, rtol=1e-6)


def test_global_norm_is_tfs_and_a_given_norm_clips_the_same():
    # The trainer computes the norm before its compiled update and passes it in: the same clip.
    grads = _mixed_grads(3.0)
    densified = [tf.convert_to_tensor(g) for g in grads if g is not None]
    norm = optimization.global_norm(grads)
    assert norm.numpy() == tf.linalg.global_norm(densified).numpy()
    assert optimization.global_norm([None]).numpy() == 0.0
    given, given_norm = optimization.clip_by_global_norm(grads, 1.0, norm=norm)
    computed, _ = optimization.clip_by_global_norm(grads, 1.0)
    assert given_norm is norm
    for a, b in zip(given, computed):
        if a is None:
            assert b is None
        else:
            np.testing.assert_array_equal(tf.convert_to_tensor(a), tf.convert_to_tensor(b))
    with pytest.raises(ValueError, match="indexed_slices_norm"):
        optimization.global_norm(grads, indexed_slices_norm="rows")


def test_global_norm_over_unique_rows_is_the_densified_norm():
    # The trainer's norm sums an IndexedSlices' duplicate rows over its distinct indices only
    # (no pass over the whole table): the densified gradient's norm all the same, also when
    # a large table has a few rows touched several times.
    grads = _mixed_grads(3.0)
    densified = [tf.convert_to_tensor(g) for g in grads if g is not None]
    np.testing.assert_allclose(optimization.global_norm(grads, unique_rows=True).numpy(),
                               tf.linalg.global_norm(densified).numpy(), rtol=1e-6)
    rng = np.random.RandomState(0)
    table = tf.IndexedSlices(tf.constant(rng.normal(size=[300, 8]), tf.float32),
                             tf.constant(rng.randint(0, 40, size=300) * 1000),
                             tf.constant([40_000, 8]))
    want = tf.linalg.global_norm([tf.convert_to_tensor(table)]).numpy()
    got = tf.function(lambda g: optimization.global_norm([g], unique_rows=True))(table)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    # Summing the duplicates matters: the raw values' norm is another number.
    assert abs(tf.linalg.global_norm([table.values]).numpy() - want) > 0.5


def test_clip_by_global_norm_values_mode_is_tf1_indexed_slices_norm():
    # "values": TF's own clip_by_global_norm on IndexedSlices, which counts duplicate rows apart.
    grads = _mixed_grads(1.0)
    _, norm = optimization.clip_by_global_norm(grads, 1.0, indexed_slices_norm="values")
    _, want_norm = tf.clip_by_global_norm(grads, 1.0)
    np.testing.assert_allclose(norm.numpy(), want_norm.numpy(), rtol=1e-6)
    _, dense_norm = optimization.clip_by_global_norm(grads, 1.0)
    assert abs(float(norm) - float(dense_norm)) > 0.1


def test_googles_first_updates_are_larger_than_bias_corrected_ones():
    """README (--adam_bias_correction): without bias correction (Google's) the first updates
    are several times larger than PyTorch AdamW's: x6 at update 10, x3 at 100. With a constant
    gradient the ratio is (1 - beta1^t) / sqrt(1 - beta2^t): 6.53 and 3.24."""
    moves = {}
    for corrected in (False, True):
        opt = optimization.AdamWeightDecay(1e-3, weight_decay_rate=0.0,
                                           bias_correction=corrected)
        var = tf.Variable([0.0, 0.0])
        opt.build({"w": var})
        previous, steps = var.numpy(), []
        for t in range(100):
            opt.apply_gradients({"w": tf.constant([0.3, -2.0])}, step=t)
            steps.append(np.abs(var.numpy() - previous))
            previous = var.numpy()
        moves[corrected] = np.array(steps)
    ratio = moves[False] / moves[True]  # [update, element]
    for t, want in ((10, 6.53), (100, 3.24)):
        expected = (1 - 0.9 ** t) / np.sqrt(1 - 0.999 ** t)
        assert round(expected, 2) == want
        np.testing.assert_allclose(ratio[t - 1], expected, rtol=1e-3)
    np.testing.assert_allclose(moves[True][:, 0], 1e-3, rtol=1e-3)  # corrected: lr x sign(g)


def test_lamb_trust_ratio_is_one_for_zero_weights():
    # ||w|| = 0 (a freshly zero-initialised kernel): LAMB falls back to the plain Adam step.
    opt = optimization.LAMB(0.1, weight_decay_rate=0.01)
    var = tf.Variable(tf.zeros([3]))
    opt.build({"dense/kernel": var})
    opt.apply_gradients({"dense/kernel": tf.constant([1.0, -2.0, 0.5])}, step=0)
    # Step 1 with bias correction: m_hat = g, v_hat = g^2, so r = g / (|g| + 1e-6) = sign(g).
    np.testing.assert_allclose(var.numpy(), [-0.1, 0.1, -0.1], rtol=1e-5)


# -- against Google's own optimizer (oracle venv) -------------------------------------------

def test_schedule_clipping_and_update_match_googles_create_optimizer(tmp_path):
    """Six steps through warmup and decay, with clipping active, vs Google's TF1 code."""
    from _oracle import run_json_request

    rng = np.random.RandomState(7)
    shapes = {"bert/encoder/layer_0/output/dense/kernel": [4, 3],
              "bert/encoder/layer_0/output/dense/bias": [3],
              "bert/encoder/layer_0/output/LayerNorm/gamma": [3],
              "output_weights": [2, 4]}
    init = {n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()}
    num_steps, init_lr, train_steps, warmup = 6, 0.05, 8, 2
    # Gradient scale varies so that some steps are clipped (global norm > 1) and some not.
    grads = {f"{t}:{n}": (rng.normal(size=s) * (0.1 if t % 2 else 2.0)).astype(np.float32)
             for t in range(num_steps) for n, s in shapes.items()}
    np.savez(tmp_path / "w.npz", **{n.replace("/", "|"): v for n, v in init.items()})
    np.savez(tmp_path / "g.npz", **{k.replace("/", "|"): v for k, v in grads.items()})
    run_json_request("google_optimizer.py", {
        "weights": str(tmp_path / "w.npz"), "grads": str(tmp_path / "g.npz"),
        "num_steps": num_steps, "init_lr": init_lr, "num_train_steps": train_steps,
        "num_warmup_steps": warmup, "output": str(tmp_path / "out.npz")}, tmp_path)
    google = {k.replace("|", "/"): v for k, v in np.load(tmp_path / "out.npz").items()}

    variables = {n: tf.Variable(v, name=n) for n, v in init.items()}
    global_step = optimization.create_global_step()
    opt = optimization.AdamWeightDecay(
        optimization.learning_rate_schedule(init_lr, train_steps, warmup))
    opt.build(variables)
    lrs = []
    for t in range(num_steps):
        clipped, _ = optimization.clip_by_global_norm(
            {n: tf.constant(grads[f"{t}:{n}"]) for n in shapes}, 1.0)
        lrs.append(float(opt.apply_gradients(clipped, global_step)))
        global_step.assign_add(1)
    assert int(google["global_step"]) == int(global_step.numpy()) == num_steps
    np.testing.assert_allclose(lrs, google["learning_rates"], rtol=1e-6)
    for name, var in variables.items():
        np.testing.assert_allclose(var.numpy(), google[name], atol=1e-6, rtol=1e-5)
    for name, slot in opt.slot_variables().items():
        np.testing.assert_allclose(slot.numpy(), google[name], atol=1e-7, rtol=1e-5)


def test_bias_corrected_adam_equals_pytorch_adamw(tmp_path):
    """--adam_bias_correction (the fine-tuning scripts' default) is PyTorch's AdamW as Hugging
    Face fine-tunes with it (tests/oracles/torch_adamw.py): weight decay 0.01 except on biases
    and LayerNorm (Hugging Face's two parameter groups; Google's exclusion list), eps 1e-6
    (Google's; Hugging Face's default is 1e-8), global-norm clipping at 1.0 before each update
    (active on the even steps), and each step's learning rate from our linear schedule through
    warm-up and decay, set on the torch groups as a scheduler does (Hugging Face's
    `get_linear_schedule_with_warmup` decays over the steps after the warm-up, Google's over all
    of them: a schedule difference, not the optimizer's). Six updates in float32: the weights
    and both moments to 1e-6."""
    from _oracle import run_json_request

    rng = np.random.RandomState(11)
    shapes = {"bert/encoder/layer_0/attention/self/query/kernel": [4, 3],
              "bert/encoder/layer_0/attention/self/query/bias": [3],
              "bert/encoder/layer_0/output/LayerNorm/gamma": [3],
              "bert/encoder/layer_0/output/LayerNorm/beta": [3],
              "output_weights": [2, 4], "output_bias": [2]}
    init = {n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()}
    num_steps, init_lr, train_steps, warmup = 6, 0.05, 8, 2
    grads = {f"{t}:{n}": (rng.normal(size=s) * (0.1 if t % 2 else 2.0)).astype(np.float32)
             for t in range(num_steps) for n, s in shapes.items()}
    schedule = optimization.learning_rate_schedule(init_lr, train_steps, warmup)
    lrs = [float(schedule(tf.constant(t))) for t in range(num_steps)]
    assert lrs[0] == 0.0 and lrs[2] == pytest.approx(init_lr * (1 - 2 / 8))
    np.savez(tmp_path / "w.npz", **{n.replace("/", "|"): v for n, v in init.items()})
    np.savez(tmp_path / "g.npz", **{k.replace("/", "|"): v for k, v in grads.items()})
    run_json_request("torch_adamw.py", {
        "weights": str(tmp_path / "w.npz"), "grads": str(tmp_path / "g.npz"),
        "learning_rates": lrs, "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-6,
        "max_grad_norm": 1.0, "no_decay": ["bias", "LayerNorm"],
        "output": str(tmp_path / "out.npz")}, tmp_path)
    torch_out = {k.replace("|", "/"): v for k, v in np.load(tmp_path / "out.npz").items()}

    variables = {n: tf.Variable(v, name=n) for n, v in init.items()}
    global_step = optimization.create_global_step()
    opt = optimization.AdamWeightDecay(schedule, bias_correction=True)
    opt.build(variables)
    clipped_steps = 0
    for t in range(num_steps):
        clipped, norm = optimization.clip_by_global_norm(
            {n: tf.constant(grads[f"{t}:{n}"]) for n in shapes}, 1.0)
        clipped_steps += float(norm) > 1.0
        assert float(opt.apply_gradients(clipped, global_step)) == pytest.approx(lrs[t])
        global_step.assign_add(1)
    assert clipped_steps == 3
    for name, var in variables.items():
        moved = np.abs(var.numpy() - init[name]).max()
        assert moved > 1e-3, name  # every variable moved (the comparison is not vacuous)
        np.testing.assert_allclose(var.numpy(), torch_out[name], atol=1e-6, rtol=0,
                                   err_msg=name)
    for name, slot in opt.slot_variables().items():
        np.testing.assert_allclose(slot.numpy(), torch_out[name], atol=1e-6, rtol=1e-5,
                                   err_msg=name)
    # Google's optimizer (no correction) on the same gradients is far from torch's.
    google = {n: tf.Variable(v, name=n) for n, v in init.items()}
    plain = optimization.AdamWeightDecay(schedule)
    plain.build(google)
    for t in range(num_steps):
        plain.apply_gradients(optimization.clip_by_global_norm(
            {n: tf.constant(grads[f"{t}:{n}"]) for n in shapes}, 1.0)[0], tf.constant(t))
    assert max(np.abs(google[n].numpy() - torch_out[n]).max() for n in shapes) > 1e-2


def test_adam_bias_correction_is_refused_with_lamb():
    from bert_mgpu.configs.base import TrainOptions
    TrainOptions(adam_bias_correction=True).validate()
    with pytest.raises(ValueError, match="--adam_bias_correction applies to --optimizer=adamw"):
        TrainOptions(optimizer="lamb", adam_bias_correction=True).validate()
