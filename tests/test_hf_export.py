"""convert_to_hf.py: Google-layout checkpoints -> Hugging Face folders that transformers loads.

Oracle tests (transformers + PyTorch in .venv-oracle): Hugging Face -> ours
(convert_hf_checkpoint) -> Hugging Face is bit-identical in every tensor, and transformers'
outputs on an exported folder equal this package's model to 1e-5 (both GELU forms, MLM/NSP heads,
classifier head with its label names, BertModel).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, minilm_model_dir, run_json_request

from bert_mgpu.engine import checkpoint
from bert_mgpu.interop import hf_checkpoint, hf_export
from bert_mgpu.model import heads, modeling
from bert_mgpu.model.bert_config import BertConfig

WORDS = [f"w{i}" for i in range(94)]
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TINY = {"vocab_size": len(TOKENS), "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 37, "max_position_embeddings": 64,
        "type_vocab_size": 2, "initializer_range": 0.02, "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1}


def write_vocab(folder):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(TOKENS) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# Without the oracle


def google_model(config, num_labels=None, pretraining=False, seed=0):
    """Our modules with random weights (biases and LayerNorms too, so every tensor matters)."""
    tf.random.set_seed(seed)
    bert_config = BertConfig.from_dict(config)
    model = modeling.BertModel(bert_config)
    mods = {"bert": model}
    if pretraining:
        mods["mlm"] = heads.MaskedLMHead(bert_config)
        mods["nsp"] = heads.NextSentenceHead(bert_config)
    if num_labels:
        mods["classifier"] = heads.ClassifierHead(bert_config, num_labels)
    rng = np.random.RandomState(seed)
    for var in modeling.merge_named_variables(*mods.values()).values():
        var.assign(var.numpy() + rng.normal(0, 0.05, var.shape).astype(np.float32))
    return mods


def test_names_invert_the_importer():
    mods = google_model(dict(TINY, hidden_act="gelu"), num_labels=3, pretraining=True)
    for name in modeling.merge_named_variables(*mods.values()):
        hf_name, transpose = hf_export.google_to_hf_name(name)
        if not hf_name.startswith(("cls.", "classifier.")):
            hf_name = "bert." + hf_name
        assert hf_checkpoint.hf_to_google_name(hf_name) == (name, transpose), name
    with pytest.raises(KeyError):
        hf_export.google_to_hf_name("bert/encoder/transformer/group_0/inner_group_0/x/kernel")


def test_safetensors_writer_reads_back(tmp_path):
    rng = np.random.RandomState(0)
    tensors = {"b": rng.normal(size=(3, 5)).astype(np.float32),
               "a": rng.randint(-9, 9, size=(7,)).astype(np.int64),
               "c": rng.normal(size=(2, 1, 3)).astype(np.float16), "empty": np.zeros([0, 4])}
    path = str(tmp_path / "x.safetensors")
    hf_export.write_safetensors(path, tensors, {"format": "pt"})
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = np.frombuffer(data[:8], "<u8")
    assert header_len % 8 == 0
    header = json.loads(data[8:8 + int(header_len)])
    assert header["__metadata__"] == {"format": "pt"}
    assert [k for k in header if k != "__metadata__"] == sorted(tensors)  # offsets in order
    back = hf_checkpoint.read_safetensors(path)
    for name, value in tensors.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape
        np.testing.assert_array_equal(back[name], value)


def test_config_states_the_gelu_and_refuses_what_hf_cannot_hold():
    for ours, theirs in (("gelu", "gelu_new"), ("gelu_exact", "gelu"), ("relu", "relu")):
        out = hf_export.export_config(dict(TINY, hidden_act=ours), "BertModel")
        assert out["hidden_act"] == theirs and out["layer_norm_eps"] == 1e-12
    out = hf_export.export_config(dict(TINY, hidden_act="gelu"), "x", ["neg", "pos"], 2)
    assert out["id2label"] == {"0": "neg", "1": "pos"} and out["label2id"]["pos"] == 1
    for change, message in (({"embedding_size": 16}, "embedding_size=16"),
                            ({"pre_layer_norm": True}, "pre_layer_norm"),
                            ({"hidden_act": "swish"}, "hidden_act 'swish'")):
        with pytest.raises(hf_checkpoint.ConversionError, match=message):
            hf_export.export_config(dict(dict(TINY, hidden_act="gelu"), **change), "BertModel")
    assert hf_export.export_config(dict(TINY, embedding_size=32), "BertModel")


def test_optimizer_slots_are_skipped_and_heads_pick_the_class(tmp_path):
    mods = google_model(dict(TINY, hidden_act="gelu"), pretraining=True)
    named = {k: v.numpy() for k, v in modeling.merge_named_variables(*mods.values()).items()}
    slots = {f"{k}/adam_m": v for k, v in named.items()}
    ckpt = checkpoint.write_bundle(str(tmp_path / "g" / "model.ckpt"),
                                   dict(named, **slots, global_step=np.int64(7)))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(TINY, hidden_act="gelu")))
    paths = hf_export.convert_checkpoint(str(config), ckpt, write_vocab(str(tmp_path / "v")),
                                         False, str(tmp_path / "hf"))
    state = hf_checkpoint.read_safetensors(paths["model.safetensors"])
    assert len(state) == len(named) and "cls.predictions.bias" in state
    assert json.load(open(paths["config.json"]))["architectures"] == ["BertForPreTraining"]
    tokenizer_config = json.load(open(paths["tokenizer_config.json"]))
    assert tokenizer_config["do_lower_case"] is False
    np.testing.assert_array_equal(state["bert.encoder.layer.1.intermediate.dense.weight"],
                                  named["bert/encoder/layer_1/intermediate/dense/kernel"].T)


def test_script_one_line_error(tmp_path):
    cmd = [sys.executable, os.path.join(REPO, "convert_to_hf.py"),
           f"--bert_config_file={tmp_path}/none.json", f"--init_checkpoint={tmp_path}/none",
           f"--vocab_file={tmp_path}/vocab.txt", f"--output_dir={tmp_path}/out"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 1
    assert "convert_to_hf.py: ERROR:" in proc.stderr and "none.json" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Against transformers (oracle venv)


def round_trip(hf_dir, work, labels=None):
    """HF folder -> ours (convert_hf_checkpoint) -> HF folder; returns the new folder."""
    google = os.path.join(work, "google")
    written = hf_checkpoint.convert_folder(hf_dir, google)
    back = os.path.join(work, "back")
    hf_export.convert_checkpoint(written["bert_config"], written["checkpoint"], written["vocab"],
                                 True, back, labels)
    return back


def assert_same_tensors(a_dir, b_dir):
    a = hf_checkpoint.read_safetensors(os.path.join(a_dir, "model.safetensors"))
    b = hf_checkpoint.read_safetensors(os.path.join(b_dir, "model.safetensors"))
    # Old folders carry the `position_ids` buffer (0..N-1, not a weight; transformers rebuilds
    # it): the only entry allowed to be absent from the export.
    buffers = [n for n in a if n.endswith("position_ids")]
    for name in buffers:
        np.testing.assert_array_equal(a.pop(name)[0], np.arange(a.get(
            name.replace("position_ids", "position_embeddings.weight")).shape[0]))
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].tobytes() == b[name].tobytes(), name  # bit-identical


@pytest.mark.oracle
def test_round_trip_hf_ours_hf_is_bit_identical(tmp_path):
    folders = {cls: str(tmp_path / cls) for cls in ("BertForPreTraining",
                                                   "BertForSequenceClassification")}
    configs = {"BertForPreTraining": dict(TINY, hidden_act="gelu"),
               "BertForSequenceClassification": dict(TINY, hidden_act="gelu_new", num_labels=3)}
    run_json_request("hf_bert_models.py", {"save": [
        {"class": cls, "dir": folder, "config": configs[cls], "seed": i}
        for i, (cls, folder) in enumerate(folders.items())]}, tmp_path)
    for cls, folder in folders.items():
        write_vocab(folder)
        back = round_trip(folder, str(tmp_path / f"work_{cls}"))
        assert_same_tensors(folder, back)
        original = json.load(open(os.path.join(folder, "config.json")))
        exported = json.load(open(os.path.join(back, "config.json")))
        assert exported["architectures"] == original["architectures"] == [cls]
        assert exported["hidden_act"] == original["hidden_act"]
        assert exported.get("id2label") == original.get("id2label" if "Sequence" in cls else "x")


@pytest.mark.oracle
@pytest.mark.slow  # the 90 MB MiniLM folder, twice
def test_round_trip_minilm(tmp_path):
    minilm = minilm_model_dir()
    back = round_trip(minilm, str(tmp_path))
    assert_same_tensors(minilm, back)
    assert json.load(open(os.path.join(back, "config.json")))["hidden_act"] == "gelu"


@pytest.mark.oracle
def test_transformers_outputs_equal_ours(tmp_path):
    rng = np.random.RandomState(3)
    batch, seq = 3, 12
    input_ids = rng.randint(5, len(TOKENS), size=(batch, seq)).astype(np.int32)
    input_ids[:, 0] = 2
    mask = np.ones((batch, seq), np.int32)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    input_ids[mask == 0] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[0, 6:] = 1
    cases = {"pretraining": dict(config=dict(TINY, hidden_act="gelu"), pretraining=True),
             "classifier": dict(config=dict(TINY, hidden_act="gelu_exact"), num_labels=3)}
    ours, runs = {}, []
    for name, case in cases.items():
        mods = google_model(case["config"], num_labels=case.get("num_labels"),
                            pretraining=case.get("pretraining", False), seed=len(runs))
        folder = str(tmp_path / name)
        config_file = tmp_path / f"{name}.json"
        config_file.write_text(json.dumps(case["config"]))
        ckpt = checkpoint.write_bundle(str(tmp_path / name / "ckpt" / "model.ckpt"), {
            k: v.numpy() for k, v in modeling.merge_named_variables(*mods.values()).items()})
        hf_export.convert_checkpoint(str(config_file), ckpt, write_vocab(str(tmp_path / "v")),
                                     True, folder, ["neg", "neutral", "pos"]
                                     if case.get("num_labels") else None)
        out = mods["bert"](input_ids, mask, segments, training=False)
        result = {"last_hidden_state": out.sequence_output.numpy(),
                  "pooler_output": out.pooled_output.numpy()}
        if "mlm" in mods:
            positions = np.tile(np.arange(seq, dtype=np.int32), (batch, 1))
            result["prediction_logits"] = mods["mlm"](
                out.sequence_output, out.embedding_table, positions)["log_probs"].numpy(
            ).reshape(batch, seq, -1)
            result["seq_relationship_logits"] = mods["nsp"](out.pooled_output)["log_probs"]
        if "classifier" in mods:
            result["logits"] = mods["classifier"](out.pooled_output)["log_probs"]
        ours[name] = result
        classes = ["BertModel"] + (["BertForPreTraining", "BertForMaskedLM"] if "mlm" in mods
                                   else ["BertForSequenceClassification"])
        runs += [{"class": cls, "dir": folder, "input_ids": input_ids.tolist(),
                  "attention_mask": mask.tolist(), "token_type_ids": segments.tolist(),
                  "case": name} for cls in classes]
    outputs = json.loads(run_json_request("hf_bert_models.py", {"run": runs}, tmp_path))
    real = mask.astype(bool)
    for entry, theirs in zip(runs, outputs):
        mine = ours[entry["case"]]
        for key, value in theirs.items():
            if key in ("hidden_act", "id2label"):
                continue
            value = np.array(value)
            # BertForMaskedLM's `logits` are the masked-LM head's (BertForPreTraining's
            # prediction_logits).
            mlm_logits = entry["class"] == "BertForMaskedLM" and key == "logits"
            want = np.asarray(mine["prediction_logits" if mlm_logits else key])
            if key in ("prediction_logits", "seq_relationship_logits", "logits"):
                value = value - np.log(np.exp(value).sum(axis=-1, keepdims=True))  # log-softmax
            if value.ndim == 3:  # per token: real tokens (padding is masked by both)
                value, want = value[real], want[real]
            np.testing.assert_allclose(value, want, atol=1e-5, rtol=0,
                                       err_msg=f"{entry['class']} {key}")
        expected_keys = {"BertModel": {"last_hidden_state", "pooler_output"},
                         "BertForPreTraining": {"prediction_logits", "seq_relationship_logits"},
                         "BertForMaskedLM": {"logits"},
                         "BertForSequenceClassification": {"logits"}}[entry["class"]]
        assert expected_keys <= set(theirs), (entry["class"], sorted(theirs))
        want_act = {"pretraining": "gelu_new", "classifier": "gelu"}[entry["case"]]
        assert theirs["hidden_act"] == want_act
        if entry["class"] == "BertForSequenceClassification":
            assert theirs["id2label"] == {"0": "neg", "1": "neutral", "2": "pos"}
