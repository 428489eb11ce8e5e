"""The fine-tuning tasks on ModernBERT against Hugging Face's own heads, one batch each: a
`ModernBertForSequenceClassification` (cls and mean pooling), `ModernBertForTokenClassification`
and `ModernBertForQuestionAnswering` built, saved and run by transformers (oracle venv), converted
by our converter (its names and its output-layer scopes); our `BertClassifier`, `TaggingTask`
and `SquadTask` on the same weights and inputs give the same logits (training and evaluation
paths), loss and gradient of every weight.

Dropout is 0 here (the oracle runs in eval mode); the scripts with dropout 0.1, towers and a
resume after kill -9 are tests/test_modernbert_jobs.py's.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from _oracle import run_json_request

from bert_mgpu.interop import hf_folders, hf_modernbert
from bert_mgpu.interop.hf_checkpoint import read_safetensors
from bert_mgpu.model import execution
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import BertClassifier
from bert_mgpu.tasks.ner import TaggingTask
from bert_mgpu.tasks.squad import SquadTask

# Sequences longer than the window (8), layers 0 and 3 global, 1 and 2 local.
ENCODER = dict(vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
               intermediate_size=24, max_position_embeddings=128, local_attention=8,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
               classifier_dropout=0.0)
LENGTHS = [27, 9, 16]  # padding, batch 3
# Hugging Face's span loss takes the softmax over every position, padding included, and its
# padded positions compute other (meaningless) values than ours: the qa batch has no padding.
QA_LENGTHS = [27, 27, 27]
NUM_TAGS = 5
# name -> (kind, config keys beyond ENCODER)
CASES = {
    "classifier_mean": ("classifier", dict(classifier_pooling="mean", num_labels=3)),
    "classifier_cls_biases": ("classifier", dict(classifier_pooling="cls", num_labels=2,
                                                 classifier_bias=True, norm_bias=True)),
    "token": ("token", dict(num_labels=NUM_TAGS)),
    "qa": ("qa", dict(num_labels=2)),
}


def _batch(seed, lengths):
    rng = np.random.default_rng(seed)
    width = max(lengths)
    ids = np.zeros([len(lengths), width], np.int32)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(3, ENCODER["vocab_size"], n)
        ids[row, 0], ids[row, n - 1] = 1, 2
        mask[row, :n] = 1
    return ids, mask


def _targets(kind, mask, seed):
    """Hugging Face's label arguments for the batch: a class per example, a tag at some real
    positions (-100 elsewhere), an answer span inside each example."""
    rng = np.random.default_rng(seed + 100)
    lengths = mask.sum(axis=1)
    if kind == "classifier":
        return {"labels": rng.integers(0, CASES["classifier_mean"][1]["num_labels"],
                                       len(lengths)).tolist()}
    if kind == "token":
        labels = np.where((rng.random(mask.shape) < 0.6) & (mask > 0),
                          rng.integers(0, NUM_TAGS, mask.shape), -100)
        labels[:, 0] = -100  # [CLS] is never labelled
        return {"labels": labels.tolist()}
    starts = [int(rng.integers(1, n - 1)) for n in lengths]
    return {"start_positions": starts,
            "end_positions": [int(rng.integers(s, n - 1)) for s, n in zip(starts, lengths)]}


@pytest.fixture(scope="module")
def hf_heads(tmp_path_factory):
    """name -> (Hugging Face folder, its outputs, ids, mask, targets); one oracle process."""
    root = tmp_path_factory.mktemp("hf_modernbert_heads")
    requests, batches = [], {}
    for seed, (name, (kind, config)) in enumerate(CASES.items()):
        ids, mask = _batch(seed, QA_LENGTHS if kind == "qa" else LENGTHS)
        targets = _targets(kind, mask, seed)
        if name == "classifier_cls_biases":
            targets["labels"] = [t % 2 for t in targets["labels"]]
        batches[name] = ids, mask, targets
        requests.append({"save_dir": str(root / name), "new": True, "seed": seed, "kind": kind,
                         "out": str(root / f"{name}.npz"), "config": dict(ENCODER, **config),
                         "input_ids": ids.tolist(), "attention_mask": mask.tolist(),
                         **targets})
    run_json_request("hf_modernbert.py", requests, root)
    return {name: (root / name, dict(np.load(root / f"{name}.npz")), *batches[name])
            for name in CASES}


def _ours(name, folder, weights_by_hf_name, **config_changes):
    """Our task on the folder's config (with `config_changes` to its bert_config.json keys),
    and `weights_by_hf_name` (a state dict, or gradients by parameter name) converted to our
    task's variable names."""
    kind, keys = CASES[name]
    with open(folder / "config.json", encoding="utf-8") as f:
        hf_config = json.load(f)
    config = BertConfig.from_dict(dict(hf_modernbert.convert_config(hf_config),
                                       **config_changes))
    if kind == "classifier":
        task = BertClassifier(config, keys["num_labels"])
    elif kind == "token":
        task = TaggingTask(config, NUM_TAGS)
    else:
        task = SquadTask(config)
    converted = hf_modernbert.convert_weights(weights_by_hf_name)
    hf_modernbert.place_output_layer(converted, hf_config)  # as convert_hf_checkpoint.py
    return task, converted


def _features(kind, ids, mask, targets):
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "segment_ids": tf.zeros_like(tf.constant(ids))}
    if kind == "classifier":
        features["label_ids"] = tf.constant(targets["labels"], tf.int32)
    elif kind == "token":
        labels = np.array(targets["labels"])
        features["label_ids"] = tf.constant(np.maximum(labels, 0), tf.int32)
        features["label_weights"] = tf.constant((labels >= 0).astype(np.float32))
    else:
        for key in ("start_positions", "end_positions"):
            features[key] = tf.constant(targets[key], tf.int32)
    return features


def _forward(kind, task, features, training):
    """(logits by Hugging Face's output name, loss) of our task."""
    if kind == "classifier":
        out = task._forward(features, training)
        return {"logits": out["logits"]}, tf.reduce_mean(out["per_example_loss"])
    if kind == "token":
        out = task._forward(features, training)
        return {"logits": out["logits"]}, out["numerator"] / out["denominator"]
    out = task._forward(features, training)
    return ({"start_logits": out["start_logits"], "end_logits": out["end_logits"]},
            tf.reduce_mean(out["per_example_loss"]))


@pytest.mark.parametrize("attention_chunk", [0, 5])
@pytest.mark.parametrize("name", list(CASES))
def test_logits_loss_and_gradients_equal_transformers(hf_heads, name, attention_chunk):
    """Logits (at real positions) and loss equal Hugging Face's eager and sdpa runs to 1e-4;
    every weight's gradient of the loss equals the eager run's (so one SGD step would too).
    The global layers keep their full probabilities (chunk 0) or take 5 query rows at a time
    (`rotary_attention.chunked_attention`, their gradients computed again per chunk)."""
    kind = CASES[name][0]
    folder, ref, ids, mask, targets = hf_heads[name]
    hf_weights = read_safetensors(str(folder / "model.safetensors"))
    task, weights = _ours(name, folder, hf_weights)
    variables = task.named_variables()
    assert sorted(variables) == sorted(weights)  # every variable has Hugging Face's value
    for var_name, var in variables.items():
        var.assign(weights[var_name])
    features = _features(kind, ids, mask, targets)
    real = mask.astype(bool)
    with execution.entered(attention_chunk=attention_chunk):
        with tf.GradientTape() as tape:
            logits, loss = _forward(kind, task, features, training=True)
        grads = dict(zip(variables, tape.gradient(loss, list(variables.values()))))
        eval_logits, eval_loss = _forward(kind, task, features, training=False)
    for attn in ("eager", "sdpa"):
        assert str(ref[f"{attn}_implementation"]) == attn
        for ours in (logits, eval_logits):
            for key, value in ours.items():
                value = value.numpy()
                expected = ref[f"{attn}_{key}"]
                if kind != "classifier":  # per position: the real ones
                    value, expected = value[real], expected[real]
                np.testing.assert_allclose(value, expected, atol=1e-4, rtol=0,
                                           err_msg=f"{attn} {key}")
        for value in (loss, eval_loss):
            np.testing.assert_allclose(value.numpy(), ref[f"{attn}_loss"], atol=1e-4, rtol=0)
    hf_grads = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    _, expected_grads = _ours(name, folder, hf_grads)
    assert sorted(expected_grads) == sorted(grads)
    for var_name, grad in grads.items():
        grad = tf.convert_to_tensor(grad).numpy()
        scale = max(1.0, float(np.abs(expected_grads[var_name]).max()))
        np.testing.assert_allclose(grad, expected_grads[var_name], atol=1e-5 * scale, rtol=0,
                                   err_msg=var_name)


@pytest.mark.parametrize("name", ["classifier_mean", "token", "qa"])
def test_classifier_dropout_drops_before_the_output_layer(hf_heads, name):
    """bert_config.json's `classifier_dropout` (every other dropout 0) is the head's: training
    logits differ from evaluation's with 0.3, equal them with 0.0."""
    kind = CASES[name][0]
    folder, _, ids, mask, targets = hf_heads[name]
    features = _features(kind, ids, mask, targets)
    hf_weights = read_safetensors(str(folder / "model.safetensors"))
    moved = {}
    for rate in (0.0, 0.3):
        task, weights = _ours(name, folder, hf_weights, classifier_dropout=rate)
        for var_name, var in task.named_variables().items():
            var.assign(weights[var_name])
        train, _ = _forward(kind, task, features, training=True)
        evaluated, _ = _forward(kind, task, features, training=False)
        moved[rate] = max(float(np.abs(train[k].numpy() - evaluated[k].numpy())[
            slice(None) if kind == "classifier" else mask.astype(bool)].max()) for k in train)
    assert moved[0.0] < 1e-5 and moved[0.3] > 1e-2, moved


@pytest.mark.parametrize("name,scope", [("token", "cls/ner/"), ("qa", "cls/squad/"),
                                        ("classifier_mean", "")],
                         ids=["token", "qa", "classifier_mean"])
def test_converter_puts_the_output_layer_where_the_job_reads_it(hf_heads, tmp_path, name, scope):
    """convert_hf_checkpoint.py's work on a fine-tuned folder: its `classifier` is the output
    layer of run_ner.py (cls/ner/), run_squad.py (cls/squad/) or run_classifier.py (root)."""
    folder = hf_heads[name][0]
    paths = hf_folders.convert_hf_folder(str(folder), str(tmp_path / "ours"))
    reader = tf.train.load_checkpoint(paths["checkpoint"])
    hf_weights = read_safetensors(str(folder / "model.safetensors"))
    np.testing.assert_array_equal(reader.get_tensor(f"{scope}output_weights"),
                                  hf_weights["classifier.weight"])
    np.testing.assert_array_equal(reader.get_tensor(f"{scope}output_bias"),
                                  hf_weights["classifier.bias"])


@pytest.mark.parametrize("name", list(CASES))
def test_fine_tuned_folder_converts_back_bit_exact(hf_heads, tmp_path, name):
    """convert_hf_checkpoint.py then convert_to_hf.py's work on a fine-tuned folder: the same
    model class, label count and head options, and every tensor bit for bit (so transformers
    computes the logits the parity test above compares ours with)."""
    folder = hf_heads[name][0]
    paths = hf_folders.convert_hf_folder(str(folder), str(tmp_path / "ours"))
    back = tmp_path / "back"
    hf_folders.convert_to_hf(paths["bert_config"], paths["checkpoint"],
                             str(tmp_path / "ours" / "tokenizer.json"), False, str(back))
    original = read_safetensors(str(folder / "model.safetensors"))
    written = read_safetensors(str(back / "model.safetensors"))
    assert sorted(written) == sorted(original)
    for tensor, value in original.items():
        np.testing.assert_array_equal(written[tensor], value, err_msg=tensor)
    expected, ours = (json.loads((f / "config.json").read_text(encoding="utf-8"))
                      for f in (folder, back))
    assert ours["architectures"] == expected["architectures"]
    # (save_pretrained leaves out what equals the defaults: two labels, LABEL_0 and LABEL_1.)
    assert ours["id2label"] == expected.get("id2label", {"0": "LABEL_0", "1": "LABEL_1"})
    for key in ("classifier_pooling", "classifier_bias", "norm_bias", "pad_token_id",
                "cls_token_id", "sep_token_id"):
        if key in expected:
            assert ours[key] == expected[key], key
