"""Users' real files written against Google's modules run unchanged through
`python -m bert_mgpu.compat` (issue 48, section 1), on a tiny model.

The files are kept verbatim under tests/compat_users (PROVENANCE.md: repository, commit, path,
licence). Each runs once through the runner (ours) and once with Google's own modules in the
oracle venv (tests/oracles/google_user_file.py: Google's repository at eedf571 on the path, the
bert-tensorflow package for `bert.*`); their outputs must be equal, and equal to what the
project's own scripts give on the same checkpoint:

* gobert `export_embedding.py` (a feature server's exporter: the second-to-last layer, masked,
  as a SavedModel a Go server loads): == `extract_features.py --layers=-2`;
* gobert `export_classifier.py` (`run_classifier.create_model` restored from the fine-tuned
  `run_classifier.py` output dir by `tf.train.Saver`, exported as a SavedModel) and
  brightmart's `run_classifier_predict_online.py` (a session-based online predictor: TF1
  `tf.flags` read at import, placeholders, `Saver.restore(latest_checkpoint)`): ==
  `test_results.tsv` of the `run_classifier.py` run that fine-tuned the checkpoint.

Dropout is on in the fine-tuning (the model's config: 0.1) and in the config the files read; the
users' files predict (`is_training=False`).
"""

import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import script_env
from _oracle import ORACLES, REPO, require_material, require_oracle
from _pretraining_data import TINY_CONFIG
from _tiny_bert import VOCAB, WORDS
from _together import WORKERS

from bert_mgpu import tokenization
from bert_mgpu.data.processors import MrpcProcessor
from bert_mgpu.data.sequence import pack_tokens
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig

USERS = os.path.join(REPO, "tests", "compat_users")
GOBERT = os.path.join(USERS, "gobert")
PREDICTOR = os.path.join(USERS, "text_classification", "run_classifier_predict_online.py")
SEQ = 32
LINES = ["the movie was good", "bad plot and very long music but great actors .",
         "fun story"]


def _predictor_pair():
    """The text pair hard-coded in the predictor's `__main__` (`example=[label, a, b]`), read
    from the file. Its trailing "\\r\\n" is whitespace, which the tokenizer drops; a TSV row
    cannot hold it."""
    tree = ast.parse(open(PREDICTOR, encoding="utf-8").read())
    (example,) = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", None) == "example"
                  and isinstance(node.value, ast.List)]
    _, text_a, text_b = ast.literal_eval(example)
    return text_a.strip(), text_b


def _model_dir(path):
    """A Google model directory: 2 layers (the exporter reads layer -2), dropout 0.1, weights
    far from the initializers' (so the outputs are not LayerNorm's alone)."""
    path.mkdir()
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = dict(TINY_CONFIG, vocab_size=len(VOCAB), num_hidden_layers=2,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    (path / "bert_config.json").write_text(json.dumps(config))
    rng = np.random.RandomState(0)
    named = modeling.BertModel(BertConfig(**config)).named_variables()
    checkpoint.write_bundle(str(path / "bert_model.ckpt"), {
        n: rng.normal(0, 0.3, v.shape).astype(np.float32) for n, v in named.items()})
    return path


def _mrpc(path):
    """GLUE MRPC files; test row 0 is the predictor's own pair."""
    path.mkdir()
    rng = np.random.RandomState(1)

    def text():
        return " ".join(rng.choice(WORDS, size=rng.randint(3, 9)))

    for split, n in (("train", 24), ("dev", 4), ("test", 3)):
        rows = [["index" if split == "test" else "Quality", "#1 ID", "#2 ID", "#1 String",
                 "#2 String"]]
        for i in range(n):
            a, b = _predictor_pair() if split == "test" and i == 0 else (text(), text())
            rows.append([str(i if split == "test" else rng.randint(2)), str(i), str(i + 1), a, b])
        (path / f"{split}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows),
                                           encoding="utf-8")
    return path


def _run(cmd, cwd, timeout=600, **env):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=script_env(CUDA_VISIBLE_DEVICES="", **env))


def _script(cmd, cwd):
    """A top-level script of the repository (its folder is first on sys.path, so the
    checkout's package is the one imported; forked from the tests' zygote)."""
    return _run(cmd, cwd)


def _ours(script, args, cwd):
    return _run([sys.executable, "-m", "bert_mgpu.compat", script, *args], cwd, PYTHONPATH=REPO)


def _google(google_dir, script, args, cwd):
    return _run([require_oracle(), os.path.join(ORACLES, "google_user_file.py"), google_dir,
                 script, *args], cwd, PYTHONPATH=REPO)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    require_oracle()
    google_dir = require_material("oracles", "google_bert_eedf571")
    root = tmp_path_factory.mktemp("compat_users")
    model = _model_dir(root / "model")
    glue = _mrpc(root / "glue")
    (root / "lines.txt").write_text("\n".join(LINES) + "\n")
    finetune = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC",
                "--do_train=true", "--do_predict=true", f"--data_dir={glue}",
                f"--vocab_file={model}/vocab.txt", f"--bert_config_file={model}/bert_config.json",
                f"--init_checkpoint={model}/bert_model.ckpt", f"--max_seq_length={SEQ}",
                "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=1.0",
                "--output_dir=ft/"]
    features = [sys.executable, os.path.join(REPO, "extract_features.py"),
                "--input_file=lines.txt", "--output_file=features.jsonl",
                f"--vocab_file={model}/vocab.txt", f"--bert_config_file={model}/bert_config.json",
                f"--init_checkpoint={model}/bert_model.ckpt", "--layers=-2",
                f"--max_seq_length={SEQ}", "--batch_size=2"]
    embedding = os.path.join(GOBERT, "export_embedding.py")
    classifier = os.path.join(GOBERT, "export_classifier.py")
    cls_args = ["ft", "2", f"--max_seq_length={SEQ}"]
    predictor_args = [f"--bert_config_file={model}/bert_config.json",
                      f"--vocab_file={model}/vocab.txt", "--init_checkpoint=ft/",
                      f"--max_seq_length={SEQ}"]
    # The fine-tuned run's readers start as soon as it ends, the other runs still going: one
    # pool, no wave waiting for its slowest run.
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {key: pool.submit(fn) for key, fn in {
            "finetune": lambda: _script(finetune, root),
            "embedding_ours": lambda: _ours(embedding, ["model", "emb_ours"], root),
            "embedding_google": lambda: _google(google_dir, embedding, ["model", "emb_google"],
                                                root),
            "features": lambda: _script(features, root)}.items()}
        finetuned = futures["finetune"].result()
        assert finetuned.returncode == 0, finetuned.stderr[-3000:]
        # gobert's exporter copies vocab.txt from the model directory it exports (its README's
        # layout); the fine-tuned run's directory has bert_config.json already.
        shutil.copy(model / "vocab.txt", root / "ft" / "vocab.txt")
        futures.update({key: pool.submit(fn) for key, fn in {
            "classifier_ours": lambda: _ours(classifier, cls_args[:1] + ["cls_ours"]
                                             + cls_args[1:], root),
            "classifier_google": lambda: _google(google_dir, classifier, cls_args[:1]
                                                 + ["cls_google"] + cls_args[1:], root),
            "predictor_ours": lambda: _ours(PREDICTOR, predictor_args, root),
            "predictor_google": lambda: _google(google_dir, PREDICTOR, predictor_args,
                                                root)}.items()})
        done = {key: future.result() for key, future in futures.items()}
    return root, done


def _ok(proc):
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]


def _signature(path, tags, name):
    return tf.saved_model.load(str(path), tags=tags).signatures[name]


def test_feature_exporter_equals_googles_and_extract_features(runs):
    root, done = runs
    for key in ("embedding_ours", "embedding_google", "features"):
        _ok(done[key])
    lines = [json.loads(line) for line in open(root / "features.jsonl", encoding="utf-8")]
    vocab = tokenization.load_vocab(str(root / "model" / "vocab.txt"))
    ids = np.zeros((len(lines), SEQ), np.int32)
    mask = np.zeros_like(ids)
    for i, line in enumerate(lines):
        tokens = [f["token"] for f in line["features"]]
        ids[i, :len(tokens)] = [vocab[t] for t in tokens]
        mask[i, :len(tokens)] = 1
    feeds = dict(input_ids=tf.constant(ids), input_mask=tf.constant(mask),
                 input_type_ids=tf.zeros_like(tf.constant(ids)))
    ours = _signature(root / "emb_ours", ["bert-pretrained"], "embedding")(**feeds)["embedding"]
    google = _signature(root / "emb_google", ["bert-pretrained"], "embedding")(
        **feeds)["embedding"]
    np.testing.assert_allclose(ours.numpy(), google.numpy(), atol=1e-5, rtol=0)
    for i, line in enumerate(lines):
        n = len(line["features"])
        values = [f["layers"][0]["values"] for f in line["features"]]
        assert [f["layers"][0]["index"] for f in line["features"]] == [-2] * n
        # extract_features.py rounds to 6 decimals, as Google's.
        np.testing.assert_allclose(ours.numpy()[i, :n], values, atol=2e-6, rtol=0)
        assert not ours.numpy()[i, n:].any()
    assert (root / "emb_ours" / "vocab.txt").read_text() == (root / "emb_google" /
                                                             "vocab.txt").read_text()


def _test_features(root):
    """The MRPC test rows as the classifier's inputs ([SEQ] each)."""
    tokenizer = tokenization.FullTokenizer(str(root / "model" / "vocab.txt"))
    packed = [pack_tokens(tokenizer.tokenize(e.text_a), tokenizer.tokenize(e.text_b), SEQ,
                          tokenizer.convert_tokens_to_ids)
              for e in MrpcProcessor().get_test_examples(str(root / "glue"))]
    return {"input_ids": tf.constant([p.input_ids for p in packed]),
            "input_mask": tf.constant([p.input_mask for p in packed]),
            "input_type_ids": tf.constant([p.segment_ids for p in packed])}


def test_classifier_exporter_restores_the_fine_tuned_run(runs):
    root, done = runs
    _ok(done["classifier_ours"])
    _ok(done["classifier_google"])
    expected = np.loadtxt(root / "ft" / "test_results.tsv")
    feeds = _test_features(root)
    for path in ("cls_ours", "cls_google"):
        out = _signature(root / path, ["bert-tuned"], "classifier")(**feeds)["probabilities"]
        np.testing.assert_allclose(out.numpy(), expected, atol=1e-6, rtol=0, err_msg=path)


def _predicted(stdout):
    """('label', [probabilities]) from the predictor's `result: ('0', array([...]))` line."""
    m = re.search(r"result: \('(\w+)', array\(\[([^\]]*)\]", stdout)
    assert m, stdout[-2000:]
    return m.group(1), [float(x) for x in m.group(2).split(",")]


def test_session_predictor_restores_the_fine_tuned_run(runs):
    root, done = runs
    _ok(done["predictor_ours"])
    _ok(done["predictor_google"])
    expected = np.loadtxt(root / "ft" / "test_results.tsv")[0]
    label, ours = _predicted(done["predictor_ours"].stdout)
    assert (label, ours) == _predicted(done["predictor_google"].stdout)
    assert label == str(int(np.argmax(expected)))
    # numpy prints 8 significant digits.
    np.testing.assert_allclose(ours, expected, atol=1e-7, rtol=0)
