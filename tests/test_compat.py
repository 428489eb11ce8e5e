"""bert_mgpu.compat: Google's module API over the project's model (issue 48, section 1).

In-process tests build TF1 graphs (`tf.Graph().as_default()`, `tf.compat.v1.Session`) and the TF2
eager model; the references are Google's variable list (tests/golden, written by Google's
modeling.py), a checkpoint's own values, and Google's `create_optimizer` run in the oracle venv.
Users' real files through `python -m bert_mgpu.compat` are in tests/test_compat_users.py.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, run_json_request

from bert_mgpu.compat import modeling, optimization, run_classifier, tf1, tokenization
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling as project_modeling

v1 = tf.compat.v1
CONFIG = {
    "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
GOLDEN = os.path.join(REPO, "tests", "golden", "google_variables_2layer.json")


def _inputs():
    rng = np.random.RandomState(3)
    ids = rng.randint(1, 100, size=(3, 9)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    segments = np.zeros_like(ids)
    segments[:, 5:] = 1
    return ids, mask, segments


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A Google-format checkpoint of CONFIG's BERT with weights far from the initializers'."""
    rng = np.random.RandomState(0)
    named = project_modeling.BertModel(modeling.BertConfig(**CONFIG)).named_variables()
    values = {n: rng.normal(0, 0.3, v.shape).astype(np.float32) for n, v in named.items()}
    prefix = str(tmp_path_factory.mktemp("ckpt") / "bert_model.ckpt")
    checkpoint.write_bundle(prefix, values)
    return prefix, values


def _graph_model(ckpt_prefix):
    """Google's usage in a TF1 graph: placeholders, BertModel, name map, init_from_checkpoint."""
    ph = [v1.placeholder(tf.int32, [None, None], name=n)
          for n in ("input_ids", "input_mask", "segment_ids")]
    model = modeling.BertModel(config=modeling.BertConfig.from_dict(CONFIG), is_training=False,
                               input_ids=ph[0], input_mask=ph[1], token_type_ids=ph[2],
                               use_one_hot_embeddings=False)
    tvars = v1.trainable_variables()
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(tvars, ckpt_prefix)
    v1.train.init_from_checkpoint(ckpt_prefix, assignment_map)
    return ph, model, tvars, initialized


def test_graph_mode_variables_are_googles_and_load_by_name(ckpt):
    prefix, values = ckpt
    with tf.Graph().as_default():
        ph, model, tvars, initialized = _graph_model(prefix)
        google = [[n, s] for n, s in json.load(open(GOLDEN)) if n.startswith("bert/")]
        assert [[v.op.name, v.shape.as_list()] for v in tvars] == google
        assert [v.op.name for v in v1.global_variables()] == [n for n, _ in google]
        assert all(f"{n}:0" in initialized for n, _ in google)
        assert model.get_embedding_table() is tvars[0]
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for var in tvars:
                np.testing.assert_array_equal(sess.run(var), values[var.op.name])
            ids, mask, segments = _inputs()
            out = sess.run({"pooled": model.get_pooled_output(),
                            "sequence": model.get_sequence_output(),
                            "layers": model.get_all_encoder_layers(),
                            "embedding": model.get_embedding_output()},
                           dict(zip(ph, (ids, mask, segments))))
    assert out["pooled"].shape == (3, 32) and out["sequence"].shape == (3, 9, 32)
    assert len(out["layers"]) == 2
    np.testing.assert_array_equal(out["layers"][-1], out["sequence"])
    # TF2 eager, the model built first and the checkpoint loaded after, Google's way (the name
    # map and tf.compat.v1.train.init_from_checkpoint): the getters see the loaded weights.
    eager = modeling.BertModel(config=modeling.BertConfig.from_dict(CONFIG), is_training=False,
                               input_ids=tf.constant(ids), input_mask=tf.constant(mask),
                               token_type_ids=tf.constant(segments))
    tvars = list(eager.named_variables().values())
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(tvars, prefix)
    v1.train.init_from_checkpoint(prefix, assignment_map)
    np.testing.assert_allclose(eager.get_pooled_output(), out["pooled"], atol=1e-6)
    np.testing.assert_allclose(eager.all_encoder_layers[0], out["layers"][0], atol=1e-6)
    again = project_modeling.BertModel(modeling.BertConfig(**CONFIG))
    for name, var in again.named_variables().items():
        var.assign(values[name])
    reference = again(ids, mask, segments, training=False)
    np.testing.assert_allclose(out["pooled"], reference.pooled_output, atol=1e-6)
    np.testing.assert_allclose(out["embedding"], reference.embedding_output, atol=1e-6)


def test_reuse_shares_variables_and_saver_writes_googles_names(ckpt, tmp_path):
    prefix, values = ckpt
    with tf.Graph().as_default():
        ph, model, tvars, _ = _graph_model(prefix)
        with v1.variable_scope("", reuse=True):
            again = modeling.BertModel(config=modeling.BertConfig.from_dict(CONFIG),
                                       is_training=True, input_ids=ph[0])
        assert v1.trainable_variables() == tvars
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            ids, _, _ = _inputs()
            a, b = sess.run([model.get_pooled_output(), again.get_pooled_output()],
                            {ph[0]: ids, ph[1]: np.ones_like(ids), ph[2]: np.zeros_like(ids)})
            saved = saver.save(sess, str(tmp_path / "model.ckpt"))
    # Dropout is on in the second model (is_training=True): other values, same weights.
    assert a.shape == b.shape and not np.allclose(a, b)
    assert {n for n, _ in tf.train.list_variables(saved)} == set(values)


def test_google_helpers_and_tf1_layers_make_googles_variable_names():
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 4, 8])
        modeling.layer_norm(x)
        tf1.contrib_layer_norm(x, scope="bert/embeddings/LayerNorm")
        tf1.dense(x, 3)
        tf1.dense(x, 3, name="logits")
        names = [v.op.name for v in v1.global_variables()]
        facade = tf1.module()
        with pytest.raises(SystemExit, match=r"tf\.estimator\.Estimator is not available in "
                                             r"TensorFlow 2\.21; use the project's "
                                             r"run_classifier\.py"):
            facade.estimator.Estimator(model_fn=None)
        assert facade.contrib.layers.layer_norm is tf1.contrib_layer_norm
        assert facade.placeholder is v1.placeholder and facade.Session is v1.Session
    assert names == ["LayerNorm/beta", "LayerNorm/gamma", "bert/embeddings/LayerNorm/beta",
                     "bert/embeddings/LayerNorm/gamma", "dense/kernel", "dense/bias",
                     "logits/kernel", "logits/bias"]


def test_run_classifier_features_are_googles(tmp_path):
    """convert_single_example as Google's: [CLS] a [SEP] b [SEP], the longer text truncated
    first, zero padding, the label's index; a PaddingInputExample is all zeros."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nmovie\nwas\ngood\nbad\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    example = run_classifier.InputExample("t-1", "The movie was good", "bad bad bad", "1")
    f = run_classifier.convert_single_example(0, example, ["0", "1"], 8, tokenizer)
    assert f.input_ids == [2, 4, 5, 6, 3, 8, 8, 3] and f.segment_ids == [0] * 5 + [1] * 3
    assert f.input_mask == [1] * 8 and f.label_id == 1 and f.is_real_example
    pad = run_classifier.convert_single_example(1, run_classifier.PaddingInputExample(),
                                                ["0", "1"], 8, tokenizer)
    assert pad.input_ids == [0] * 8 and pad.label_id == 0 and not pad.is_real_example


def test_create_optimizer_matches_googles(tmp_path):
    """Six train ops of `optimization.create_optimizer` in a session, through warmup and decay
    with clipping active, vs Google's create_optimizer (oracle venv) fed the same gradients: the
    weights, the adam_m/adam_v slots (Google's names) and global_step."""
    rng = np.random.RandomState(7)
    shapes = {"bert/encoder/layer_0/output/dense/kernel": [4, 3],
              "bert/encoder/layer_0/output/dense/bias": [3],
              "bert/encoder/layer_0/output/LayerNorm/gamma": [3], "output_weights": [2, 4]}
    init = {n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()}
    num_steps, init_lr, train_steps, warmup = 6, 0.05, 8, 2
    grads = {f"{t}:{n}": (rng.normal(size=s) * (0.1 if t % 2 else 2.0)).astype(np.float32)
             for t in range(num_steps) for n, s in shapes.items()}
    np.savez(tmp_path / "w.npz", **{n.replace("/", "|"): v for n, v in init.items()})
    np.savez(tmp_path / "g.npz", **{k.replace("/", "|"): v for k, v in grads.items()})
    run_json_request("google_optimizer.py", {
        "weights": str(tmp_path / "w.npz"), "grads": str(tmp_path / "g.npz"),
        "num_steps": num_steps, "init_lr": init_lr, "num_train_steps": train_steps,
        "num_warmup_steps": warmup, "output": str(tmp_path / "out.npz")}, tmp_path)
    google = {k.replace("|", "/"): v for k, v in np.load(tmp_path / "out.npz").items()}
    with tf.Graph().as_default():
        variables = {n: v1.get_variable(n, initializer=v) for n, v in init.items()}
        fed = {n: v1.placeholder(tf.float32, shapes[n]) for n in shapes}
        loss = tf.add_n([tf.reduce_sum(variables[n] * fed[n]) for n in shapes])
        train_op = optimization.create_optimizer(loss, init_lr, train_steps, warmup, False)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for t in range(num_steps):
                sess.run(train_op, {fed[n]: grads[f"{t}:{n}"] for n in shapes})
            ours = {v.op.name: sess.run(v) for v in v1.global_variables()}
    assert set(ours) == set(google) - {"learning_rates"}
    assert int(ours["global_step"]) == int(google["global_step"]) == num_steps
    for name, value in ours.items():
        np.testing.assert_allclose(value, google[name], atol=1e-6, rtol=1e-5, err_msg=name)


def test_installing_adds_no_top_level_modeling_or_bert(tmp_path):
    """Only the runner maps Google's names: the package installs `bert_mgpu` alone, and outside
    the runner `import modeling` / `import bert` find nothing."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    assert setup["options"]["packages"].strip() == "find:"
    include = [p.strip() for p in setup["options.packages.find"]["include"].split(",")]
    assert include and all(p == "bert_mgpu" or p.startswith("bert_mgpu.") for p in include)
    assert "py_modules" not in setup["options"]
    # The installed environment as a user's script sees it (not the checkout, whose top-level
    # scripts include a run_classifier.py).
    code = ("import importlib.util\n"
            "print([importlib.util.find_spec(n) is None for n in "
            "('modeling', 'bert', 'tokenization', 'optimization', 'run_classifier')])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=env)
    assert proc.stdout.strip() == "[True, True, True, True, True]", proc.stderr[-2000:]


def _run_ours_and_googles(script, args, tmp_path):
    """Runs tests/compat_scripts/`script` through the runner and with Google's modules
    (oracle venv); {"ours"|"google": CompletedProcess}; `args` is a function of "ours"/"google"."""
    from _launch import script_env
    from _oracle import ORACLES, require_material, require_oracle

    oracle = require_oracle()
    google_dir = require_material("oracles", "google_bert_eedf571")
    path = os.path.join(REPO, "tests", "compat_scripts", script)
    runs = {}
    for who, cmd in (("ours", [sys.executable, "-m", "bert_mgpu.compat"]),
                     ("google", [oracle, os.path.join(ORACLES, "google_user_file.py"),
                                 google_dir])):
        runs[who] = subprocess.run(cmd + [path] + args(who), capture_output=True, text=True,
                                   timeout=600, cwd=tmp_path,
                                   env=script_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))
        assert runs[who].returncode == 0, runs[who].stderr[-3000:]
    return runs


def test_a_head_on_the_sequence_output_trains_as_with_googles_modules(ckpt, tmp_path):
    """tests/compat_scripts/train_sequence_head.py (TF1 style: its own head on
    get_sequence_output, Google's name map, create_optimizer, Session, Saver) through the
    runner and with Google's modules (oracle venv): the same losses and, after three updates,
    the same checkpoint (weights, adam_m/adam_v, global_step). The word embeddings' gradient is
    an IndexedSlices in both (TF1's clipping counts a repeated token's rows apart), the
    token types' dense in both (Google's one-hot lookup)."""
    prefix, _ = ckpt
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    runs = _run_ours_and_googles(
        "train_sequence_head.py", lambda who: [
            f"--bert_config_file={config}", f"--init_checkpoint={prefix}",
            f"--output={tmp_path / who / 'model.ckpt'}"], tmp_path)
    losses = {who: re.findall(r"step \d loss (\S+)", p.stdout) for who, p in runs.items()}
    assert len(losses["ours"]) == 3
    np.testing.assert_allclose(np.float64(losses["ours"]), np.float64(losses["google"]),
                               atol=2e-6)
    ours = tf.train.load_checkpoint(str(tmp_path / "ours" / "model.ckpt"))
    google = tf.train.load_checkpoint(str(tmp_path / "google" / "model.ckpt"))
    names = set(ours.get_variable_to_shape_map())
    assert names == set(google.get_variable_to_shape_map())
    assert {"global_step", "ner/output_weights/adam_v",
            "bert/embeddings/word_embeddings/adam_m"} <= names
    for name in sorted(names):
        np.testing.assert_allclose(ours.get_tensor(name), google.get_tensor(name), atol=2e-6,
                                   rtol=0, err_msg=name)


def test_googles_layer_functions_make_googles_variables_and_numbers(ckpt, tmp_path):
    """tests/compat_scripts/extra_layers.py: transformer_model (two more layers on the sequence
    output, all layers returned), attention_layer, embedding_lookup + embedding_postprocessor
    and layer_norm, under the file's own scopes: the same variable names in the same order as
    Google's modules create, and the same outputs for the same weights."""
    prefix, _ = ckpt
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    _run_ours_and_googles("extra_layers.py", lambda who: [
        f"--bert_config_file={config}", f"--init_checkpoint={prefix}",
        f"--output={tmp_path / who}.npz"], tmp_path)
    ours, google = np.load(tmp_path / "ours.npz"), np.load(tmp_path / "google.npz")
    assert list(ours["names"]) == list(google["names"])
    assert {"extra/layer_1/attention/output/LayerNorm/gamma", "cross/query/kernel",
            "second_embeddings/word_embeddings", "second_embeddings/LayerNorm/beta",
            "second_embeddings/final_norm/gamma"} <= set(ours["names"])
    for key in ("layer_0", "layer_1", "attended", "embedded", "normed"):
        np.testing.assert_allclose(ours[key], google[key], atol=2e-6, rtol=0, err_msg=key)


def test_a_copy_of_googles_module_next_to_the_script_is_named_not_imported(tmp_path):
    """Google's repository often sits next to a user's file: `import modeling` still gives the
    runner's module, and each copy it passes over is one note on stderr, saying whether the
    copy is one of Google's released files (the runner's module follows it) or an edited one
    (whose changes do not apply); a folder without copies gets no note."""
    from _launch import script_env

    from bert_mgpu.compat import runner

    (tmp_path / "user.py").write_text("import modeling\nprint(modeling.__name__)\n")
    google = os.path.join(os.path.dirname(REPO), "shared", "material", "oracles",
                          "google_bert_eedf571", "tokenization.py")
    (tmp_path / "modeling.py").write_text("use_position_embeddings = False  # edited\n")
    run = subprocess.run([sys.executable, "-m", "bert_mgpu.compat", "user.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600,
                         env=script_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "bert_mgpu.compat.modeling\n"
    notes = [line for line in run.stderr.splitlines() if line.startswith("bert_mgpu.compat:")]
    assert notes == [f"bert_mgpu.compat: note: {tmp_path / 'modeling.py'} is not imported: "
                     "`import modeling` gives bert_mgpu.compat.modeling (Google's API on the "
                     "project's model); it differs from Google's released files, and what was "
                     "changed in it does not apply (docs/your_own_code.md)"]
    assert runner.shadowed_copies(str(tmp_path / "elsewhere")) == []
    if os.path.isfile(google):  # Google's own file (test-only material) is recognised
        with open(google, "rb") as src:
            (tmp_path / "tokenization.py").write_bytes(src.read())
        assert "it is Google's released file" in runner.shadowed_copies(str(tmp_path))[1]
