"""Exporting one task of a multi-task run (run_classifier_mgpu.py with several --task_name):
export_saved_model.py and convert_to_hf.py with --task_label.

One tiny run (TINY_CONFIG, 12 steps) of three tasks: tsv_0 classification, tsv_1 regression,
tsv_2 multi-label. Each task's SavedModel, loaded in a process that cannot import bert_mgpu,
gives that task's test_results.tsv / predict.txt from raw text; each task's Hugging Face folder
gives the same through transformers (oracle venv).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _oracle import REPO, run_json_request
from _pretraining_data import TINY_CONFIG
from _serving import ENV, run_loaded
from _together import started
from test_multitask import SEQ, VOCAB, run_script, write_tsv

from bert_mgpu import tokenization
from bert_mgpu.configs.base import ModelFiles
from bert_mgpu.configs.serving import ExportConfig
from bert_mgpu.data.classifier_data import convert_single_example
from bert_mgpu.data.processors import InputExample
from bert_mgpu.interop import hf_checkpoint, hf_export
from bert_mgpu.model.head_spec import ClassifierHeadSpec, classifier_head_of_run
from bert_mgpu.serving import export

pytest.importorskip("tensorflow_text")

LABELS = ("tsv_0", "tsv_1", "tsv_2")
TYPES = ("classification", "regression", "multilabel")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """--task_name=tsv,tsv,tsv: sentiment (classification), score (regression), topics
    (multi-label: fun, good, possibly none); 16 training and 6 test texts each."""
    rng = np.random.RandomState(5)
    root = tmp_path_factory.mktemp("export_multitask")
    texts = {}
    for name in ("sentiment", "score", "topics"):
        (root / name).mkdir()
        for split, n in (("train", 16), ("test", 6)):
            rows = [["text", "label"] if split == "train" else ["text"]]
            for _ in range(n):
                k, fun = rng.randint(4), rng.randint(2)
                text = " ".join(["the", "movie"] + ["good"] * k + ["bad"] * (3 - k)
                                + ["fun"] * fun)
                label = {"sentiment": str(int(k >= 2)), "score": f"{1.5 * k:.2f}",
                         "topics": ",".join(t for t, on in (("fun", fun), ("good", k >= 2))
                                            if on)}[name]
                rows.append([text, label] if split == "train" else [text])
            write_tsv(root / name / f"{split}.tsv", rows)
            texts[name, split] = [r[0] for r in rows[1:]]
    (root / "bert_config.json").write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522)))
    out = root / "out"
    proc = run_script(root, out, "--task_name=tsv,tsv,tsv",
                      "--data_dir=" + ",".join(str(root / n) for n in ("sentiment", "score",
                                                                        "topics")),
                      f"--task_type={','.join(TYPES)}", "--num_train_epochs=1", "--do_train",
                      "--do_predict")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "out": out,
            "texts": dict(zip(LABELS, (texts[n, "test"] for n in ("sentiment", "score",
                                                                   "topics"))))}


def export_config(run, **kw):
    return ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                        export_dir=str(run["root"] / "export" / kw.get("task_label", "x")),
                        **kw)


LOADED = """
    import tensorflow as tf
    out = {}
    for label, path in request["dirs"].items():
        signature = tf.saved_model.load(path).signatures["serving_default"]
        out[label] = plain(signature(text_a=tf.constant(request["texts"][label])))
"""


def export_script(run, label):
    """export_saved_model.py --task_label=label; returns the SavedModel's directory."""
    proc = subprocess.run([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                           f"--output_dir={run['out']}",
                           f"--export_dir={run['root'] / 'export' / label}",
                           f"--task_label={label}"],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # a training run, three exports, a fresh TensorFlow process
def test_each_task_exports_its_predictions(run, tmp_path):
    # The exports are independent: the last by the script (its own process) while the others
    # run in this process, through export_saved_model, the one call the script makes with the
    # flags' ExportConfig (one script run proves the flags reach it; a second one would repeat
    # that path and pay for its own TensorFlow start).
    with started({label: lambda label=label: export_script(run, label)
                  for label in LABELS[2:]}) as scripts:
        dirs = {label: export.export_saved_model(export_config(run, task_label=label))
                for label in LABELS[:2]}
        dirs.update({label: future.result() for label, future in scripts.items()})
    out = run_loaded(tmp_path, dirs["tsv_0"], LOADED, {"dirs": dirs, "texts": run["texts"]})
    results = {label: np.loadtxt(run["out"] / label / "test_results.tsv", ndmin=2)
               for label in LABELS}
    predicted = {label: (run["out"] / label / "predict.txt").read_text().split("\n")[:-1]
                 for label in LABELS}
    assert sorted(out["tsv_0"]) == ["label", "label_id", "probabilities"]
    np.testing.assert_allclose(out["tsv_0"]["probabilities"], results["tsv_0"], atol=1e-5,
                               rtol=0)
    assert out["tsv_0"]["label"] == predicted["tsv_0"]
    assert sorted(out["tsv_1"]) == ["predictions"]  # regression: the score
    np.testing.assert_allclose(out["tsv_1"]["predictions"], results["tsv_1"][:, 0], atol=1e-5,
                               rtol=0)
    assert sorted(out["tsv_2"]) == ["label", "predicted", "probabilities"]
    np.testing.assert_allclose(out["tsv_2"]["probabilities"], results["tsv_2"], atol=1e-5,
                               rtol=0)
    assert results["tsv_2"].shape == (6, 2)  # labels fun, good
    assert out["tsv_2"]["label"] == predicted["tsv_2"]  # names joined by commas, as predict.txt
    assert out["tsv_2"]["predicted"] == (results["tsv_2"] > 0.5).tolist()
    # The trained heads differ: each export serves its own task's head.
    assert np.abs(results["tsv_0"] - 0.5).max() > 1e-3


def test_a_multitask_run_needs_a_known_task_label(run):
    """The errors in process, as one line each: export_saved_model.py prints an ExportError
    as its one line `export_saved_model.py: ERROR: <message>` (through the script in
    test_export's test_a_head_not_on_the_pooled_output_is_refused), so the script's own run
    would prove nothing more here."""
    with pytest.raises(export.ExportError, match=r"is a multi-task run: choose the task to "
                       r"export with --task_label \(one of tsv_0, tsv_1, tsv_2\)$") as e:
        export.resolve(export_config(run))
    assert "\n" not in str(e.value) and str(e.value).startswith(str(run["out"]))
    with pytest.raises(export.ExportError, match=r"--task_label=nope is not a task of .*out "
                       r"\(its tasks: tsv_0, tsv_1, tsv_2\)"):
        export.resolve(export_config(run, task_label="nope"))
    with pytest.raises(ValueError, match="--task_label chooses a classifier head; "
                                         "--task=features has none"):
        export_config(run, task_label="tsv_0", task="features").validate()
    spec = export.resolve(export_config(run, task_label="tsv_2"))
    assert spec.head == ClassifierHeadSpec(scope="task_tsv_2", task_type="multilabel",
                                           labels=("fun", "good"))
    assert spec.labels == ["fun", "good"]


def test_head_of_run_without_run_config():
    """A bare multi-task checkpoint still lists its tasks (from the heads' names); a single
    task refuses --task_label; a single task's run_config gives its type and labels."""
    names = ["bert/pooler/dense/kernel", "task_a/output_weights", "task_a/output_bias",
             "task_b_1/output_bias", "task_b_1/output_bias/adam_m"]
    with pytest.raises(ValueError, match=r"ckpt is a multi-task run: .* \(one of a, b_1\)"):
        classifier_head_of_run({}, names, None, "ckpt")
    assert classifier_head_of_run({}, names, "b_1", "ckpt") == ClassifierHeadSpec(
        scope="task_b_1")
    single = ["bert/pooler/dense/kernel", "output_weights", "output_bias"]
    with pytest.raises(ValueError, match="--task_label=a: ckpt is not a multi-task run"):
        classifier_head_of_run({}, single, "a", "ckpt")
    assert classifier_head_of_run(
        {"task_type": "regression", "classifier_input": "mean"}, single, None, "ckpt") == \
        ClassifierHeadSpec(task_type="regression", classifier_input="mean")


def test_hf_export_of_a_multitask_run_needs_a_task_label(run, tmp_path):
    with pytest.raises(hf_checkpoint.ConversionError, match=r"--task_label \(one of tsv_0, "
                                                            r"tsv_1, tsv_2\)"):
        hf_export.convert_checkpoint(str(run["out"] / "bert_config.json"), str(run["out"]),
                                     VOCAB, True, str(tmp_path / "hf"))


@pytest.mark.oracle
def test_hf_export_per_task_equals_test_results(run, tmp_path):
    """convert_to_hf.py --task_label=<label>: BertForSequenceClassification with that task's
    head ([num_labels, H]), labels and problem_type; transformers' logits give the task's
    test_results.tsv (softmax / the score / sigmoids) to 1e-5."""
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    folders = {label: str(tmp_path / label) for label in LABELS}
    # The script once (its own process, meanwhile), the others in process.
    with started({"script": lambda: subprocess.run([
            sys.executable, os.path.join(REPO, "convert_to_hf.py"),
            f"--bert_config_file={run['out'] / 'bert_config.json'}",
            f"--init_checkpoint={run['out']}", f"--vocab_file={VOCAB}",
            "--do_lower_case=true", f"--output_dir={folders['tsv_2']}", "--task_label=tsv_2"],
            capture_output=True, text=True, timeout=300, env=ENV)}) as script:
        for label in LABELS[:2]:
            hf_export.convert_checkpoint(str(run["out"] / "bert_config.json"), str(run["out"]),
                                         VOCAB, True, folders[label], task_label=label)
        proc = script["script"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = []
    for label in LABELS:
        features = [convert_single_example(InputExample(str(i), text, None, None), {}, SEQ,
                                           tokenizer)
                    for i, text in enumerate(run["texts"][label])]
        runs.append({"class": "BertForSequenceClassification", "dir": folders[label],
                     **{hf: [f[ours] for f in features] for hf, ours in (
                         ("input_ids", "input_ids"), ("attention_mask", "input_mask"),
                         ("token_type_ids", "segment_ids"))}})
    outputs = json.loads(run_json_request("hf_bert_models.py", {"run": runs}, tmp_path))
    for label, kind, theirs in zip(LABELS, TYPES, outputs):
        config = json.load(open(os.path.join(folders[label], "config.json")))
        state = hf_checkpoint.read_safetensors(os.path.join(folders[label], "model.safetensors"))
        reference = np.loadtxt(run["out"] / label / "test_results.tsv", ndmin=2)
        logits = np.array(theirs["logits"])
        num_labels = reference.shape[1]
        assert state["classifier.weight"].shape == (num_labels, 32), label
        assert not any(name.startswith("task_") for name in state)
        assert logits.shape == reference.shape, label
        if kind == "classification":
            got = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            assert theirs["id2label"] == {"0": "0", "1": "1"}
            assert "problem_type" not in config
        elif kind == "regression":
            got = logits
            assert config["problem_type"] == "regression"
        else:
            got = 1 / (1 + np.exp(-logits))
            assert theirs["id2label"] == {"0": "fun", "1": "good"}
            assert config["problem_type"] == "multi_label_classification"
        np.testing.assert_allclose(got, reference, atol=1e-5, rtol=0, err_msg=label)
