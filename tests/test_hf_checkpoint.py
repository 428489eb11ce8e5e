"""convert_hf_checkpoint.py: Hugging Face BERT folder -> Google layout, checked on real weights."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from _oracle import REPO, minilm_model_dir, run_oracle_script

from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.interop.hf_checkpoint import ConversionError


@pytest.fixture(scope="module")
def minilm():
    return minilm_model_dir()


def test_safetensors_to_google_names_and_transposes(minilm, tmp_path):
    written = hf_checkpoint.convert_folder(minilm, str(tmp_path / "out"), gelu="tanh")
    reader = tf.train.load_checkpoint(written["checkpoint"])
    shapes = reader.get_variable_to_shape_map()
    assert len(shapes) == 5 + 6 * 16 + 2
    assert shapes["bert/encoder/layer_5/intermediate/dense/kernel"] == [384, 1536]
    hf = hf_checkpoint.read_safetensors(os.path.join(minilm, "model.safetensors"))
    np.testing.assert_array_equal(
        reader.get_tensor("bert/encoder/layer_2/attention/self/query/kernel"),
        hf["encoder.layer.2.attention.self.query.weight"].T)
    np.testing.assert_array_equal(reader.get_tensor("bert/embeddings/LayerNorm/gamma"),
                                  hf["embeddings.LayerNorm.weight"])
    config = json.loads(open(written["bert_config"]).read())
    assert config["hidden_act"] == "gelu" and config["num_hidden_layers"] == 6
    exact = hf_checkpoint.convert_folder(minilm, str(tmp_path / "exact"))
    assert json.loads(open(exact["bert_config"]).read())["hidden_act"] == "gelu_exact"
    assert open(written["vocab"], "rb").read() == open(os.path.join(minilm, "vocab.txt"),
                                                       "rb").read()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_pytorch_bin_read_without_torch_equals_safetensors(minilm, tmp_path, dtype):
    """PyTorch itself (oracle venv) writes the .bin; we read it without PyTorch."""
    bin_path = tmp_path / "pytorch_model.bin"
    run_oracle_script("torch_save_bin.py", os.path.join(minilm, "model.safetensors"), bin_path,
                      dtype, "view")
    ours = hf_checkpoint.read_pytorch_bin(str(bin_path))
    reference = hf_checkpoint.read_safetensors(os.path.join(minilm, "model.safetensors"))
    np.testing.assert_array_equal(ours.pop("extra.strided_view"),
                                  np.arange(12, dtype=np.float32).reshape(3, 4).T)
    assert sorted(ours) == sorted(reference)
    for name, value in reference.items():
        if dtype == "bf16" and value.dtype == np.float32:
            # bfloat16 keeps 8 bits of mantissa: relative error <= 2^-8.
            np.testing.assert_allclose(ours[name], value, rtol=2 ** -8, atol=1e-30)
        else:
            np.testing.assert_array_equal(ours[name], value)
    # The extra tensor is not part of BERT: the conversion names it instead of dropping it.
    with pytest.raises(ConversionError, match="extra.strided_view"):
        hf_checkpoint.convert_weights(hf_checkpoint.read_pytorch_bin(str(bin_path)), "x")


def test_bin_folder_converts_like_safetensors_folder(minilm, tmp_path):
    folder = tmp_path / "hf_bin"
    folder.mkdir()
    for name in ("config.json", "vocab.txt"):
        shutil.copy(os.path.join(minilm, name), folder / name)
    run_oracle_script("torch_save_bin.py", os.path.join(minilm, "model.safetensors"),
                      folder / "pytorch_model.bin")
    a = hf_checkpoint.convert_folder(str(folder), str(tmp_path / "a"))
    b = hf_checkpoint.convert_folder(minilm, str(tmp_path / "b"))
    ra, rb = tf.train.load_checkpoint(a["checkpoint"]), tf.train.load_checkpoint(b["checkpoint"])
    assert ra.get_variable_to_shape_map() == rb.get_variable_to_shape_map()
    for name in ra.get_variable_to_shape_map():
        np.testing.assert_array_equal(ra.get_tensor(name), rb.get_tensor(name))


def test_heads_and_classifier_names():
    cases = {
        "bert.encoder.layer.11.output.LayerNorm.gamma":
            ("bert/encoder/layer_11/output/LayerNorm/gamma", False),
        "cls.predictions.transform.dense.weight": ("cls/predictions/transform/dense/kernel", True),
        "cls.predictions.bias": ("cls/predictions/output_bias", False),
        "cls.seq_relationship.weight": ("cls/seq_relationship/output_weights", False),
        "classifier.weight": ("output_weights", False),
        "bert.pooler.dense.bias": ("bert/pooler/dense/bias", False),
    }
    for hf_name, expected in cases.items():
        assert hf_checkpoint.hf_to_google_name(hf_name) == expected
    with pytest.raises(KeyError):
        hf_checkpoint.hf_to_google_name("roberta.embeddings.word_embeddings.weight")


def test_config_errors():
    base = {"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
            "type_vocab_size": 2, "initializer_range": 0.02, "hidden_act": "gelu"}
    assert hf_checkpoint.convert_config(dict(base, hidden_act="gelu_new"))["hidden_act"] == "gelu"
    with pytest.raises(ConversionError, match="config.json: hidden_act 'silu'"):
        hf_checkpoint.convert_config(dict(base, hidden_act="silu"))
    with pytest.raises(ConversionError, match="layer_norm_eps"):
        hf_checkpoint.convert_config(dict(base, layer_norm_eps=1e-5))
    with pytest.raises(ConversionError, match="missing keys vocab_size"):
        hf_checkpoint.convert_config({k: v for k, v in base.items() if k != "vocab_size"})


def test_missing_weights_file_is_named(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConversionError, match="neither model.safetensors nor pytorch_model.bin"):
        hf_checkpoint.read_hf_weights(str(tmp_path))


def test_script_one_line_error(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, os.path.join(REPO, "convert_hf_checkpoint.py"),
                           f"--hf_model_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"convert_hf_checkpoint.py: ERROR: {tmp_path}/config.json: not found")
