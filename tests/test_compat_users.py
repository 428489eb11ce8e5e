"""Users' real files written against Google's modules run unchanged through
`python -m bert_mgpu.compat` (issue 48, section 1), on a tiny model.

The files are read, unchanged, from their repositories' snapshots when the tests run
(tests/_third_party.py; tests/PROVENANCE.md: repository, commit, path, licence). Each runs once
through the runner (ours) and once with Google's own modules in the oracle venv
(tests/oracles/google_user_file.py: Google's repository at eedf571 on the path, the
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

The third kind, a user's notebook that trains its own head with `create_optimizer` in a session
(two of huseinzol05/NLP-Models-Tensorflow's, read the same way: a head on `get_pooled_output()`
and one on `get_sequence_output()`), runs through the runner's notebook mode and with Google's
modules under tests/oracles/session_probe.py; each test says what is compared.
"""

import ast
import json
import os
import pickle
import re
import shutil
import subprocess
import sys

import _third_party
import numpy as np
import pytest
import tensorflow as tf
from _launch import script_env
from _oracle import ORACLES, REPO, require_material, require_oracle
from _pretraining_data import TINY_CONFIG
from _tiny_bert import VOCAB, WORDS
from _together import started

from bert_mgpu import tokenization
from bert_mgpu.data.processors import MrpcProcessor
from bert_mgpu.data.sequence import pack_tokens
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig

GOBERT = ["gobert/export_embedding.py", "gobert/export_classifier.py", "gobert/util.py",
          "gobert/download_pretrained.py"]  # the exporters import util and download_pretrained
PREDICTOR = "text_classification/run_classifier_predict_online.py"
SEQ = 32
LINES = ["the movie was good", "bad plot and very long music but great actors .",
         "fun story"]


def _predictor_pair(predictor):
    """The text pair hard-coded in the predictor's `__main__` (`example=[label, a, b]`), read
    from the file. Its trailing "\\r\\n" is whitespace, which the tokenizer drops; a TSV row
    cannot hold it."""
    tree = ast.parse(open(predictor, encoding="utf-8").read())
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


def _mrpc(path, predictor):
    """GLUE MRPC files; test row 0 is the pair of the predictor file `predictor`."""
    path.mkdir()
    rng = np.random.RandomState(1)

    def text():
        return " ".join(rng.choice(WORDS, size=rng.randint(3, 9)))

    for split, n in (("train", 24), ("dev", 4), ("test", 3)):
        rows = [["index" if split == "test" else "Quality", "#1 ID", "#2 ID", "#1 String",
                 "#2 String"]]
        for i in range(n):
            a, b = _predictor_pair(predictor) if split == "test" and i == 0 else (text(), text())
            rows.append([str(i if split == "test" else rng.randint(2)), str(i), str(i + 1), a, b])
        (path / f"{split}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows),
                                           encoding="utf-8")
    return path


def _run(cmd, cwd, timeout=600):
    """`cmd` in `cwd`, the checkout's package first on the path (`python -m bert_mgpu.compat`
    and the probe run from a temporary folder)."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=script_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))


def _script(cmd, cwd):
    """A top-level script of the checkout in `cwd` (the script's folder is first on its path):
    the tests' environment, so that it is forked from their zygote (tests/_zygote.py) instead
    of importing TensorFlow afresh."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=script_env(CUDA_VISIBLE_DEVICES=""))


def _ours(script, args, cwd):
    return _run([sys.executable, "-m", "bert_mgpu.compat", script, *args], cwd)


def _google(google_dir, script, args, cwd):
    return _run([require_oracle(), os.path.join(ORACLES, "google_user_file.py"), google_dir,
                 script, *args], cwd)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    require_oracle()
    google_dir = require_material("oracles", "google_bert_eedf571")
    root = tmp_path_factory.mktemp("compat_users")
    gobert = os.path.join(root, "gobert")
    for key in GOBERT:
        _third_party.write(key, gobert)
    predictor = _third_party.write(PREDICTOR, root / "text_classification")
    model = _model_dir(root / "model")
    glue = _mrpc(root / "glue", predictor)
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
    embedding = os.path.join(gobert, "export_embedding.py")
    with started({"finetune": lambda: _script(finetune, root),
                  "embedding_ours": lambda: _ours(embedding, ["model", "emb_ours"], root),
                  "embedding_google": lambda: _google(google_dir, embedding,
                                                      ["model", "emb_google"], root),
                  "features": lambda: _script(features, root)}) as first:
        done = {key: future.result() for key, future in first.items()}
    assert done["finetune"].returncode == 0, done["finetune"].stderr[-3000:]
    # gobert's exporter copies vocab.txt from the model directory it exports (its README's
    # layout); the fine-tuned run's directory has bert_config.json already.
    shutil.copy(model / "vocab.txt", root / "ft" / "vocab.txt")
    classifier = os.path.join(gobert, "export_classifier.py")
    cls_args = ["ft", "2", f"--max_seq_length={SEQ}"]
    predictor_args = [f"--bert_config_file={model}/bert_config.json",
                      f"--vocab_file={model}/vocab.txt", "--init_checkpoint=ft/",
                      f"--max_seq_length={SEQ}"]
    with started({"classifier_ours": lambda: _ours(classifier, cls_args[:1] + ["cls_ours"]
                                                   + cls_args[1:], root),
                  "classifier_google": lambda: _google(google_dir, classifier, cls_args[:1]
                                                       + ["cls_google"] + cls_args[1:], root),
                  "predictor_ours": lambda: _ours(predictor, predictor_args, root),
                  "predictor_google": lambda: _google(google_dir, predictor, predictor_args,
                                                      root)}) as second:
        done.update({key: future.result() for key, future in second.items()})
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


# -- the third kind: a notebook that trains its own head with create_optimizer in a session ----

# The file as published (tests/PROVENANCE.md; its SHA-256 is checked where it is read): the
# test runs only that file, unchanged.
NOTEBOOK = "nlp_models/5.bert-base-cross-entropy.ipynb"
PROBE = os.path.join(ORACLES, "session_probe.py")


def _similarity_world(root, notebook, dropout):
    """What the notebook reads, where it reads it (relative paths): a tiny Google model in
    `cased_L-12_H-768_A-12/` (the real uncased vocabulary; 2 layers, hidden 32, its
    MAX_SEQ_LENGTH of 120 fits) and `text.json` as its prepare-dataset notebook writes it
    ("sentence1 <> sentence2", 'contradiction'/'entailment'): MultiNLI is not available here, so
    the pairs are consecutive Pang & Lee sentences, 'entailment' when both have the same
    polarity. 120 training pairs (2 updates an epoch at its batch of 60), 60 test pairs (its
    num_train_steps = int(60 / 60 * 10) = 10, num_warmup_steps = 1)."""
    root.mkdir()
    shutil.copy(notebook, root)
    model = root / "cased_L-12_H-768_A-12"
    model.mkdir()
    shutil.copy(require_material("vocab", "bert_uncased_vocab.txt"), model / "vocab.txt")
    config = dict(TINY_CONFIG, vocab_size=30522, num_hidden_layers=2,
                  max_position_embeddings=128, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout)
    (model / "bert_config.json").write_text(json.dumps(config))
    rng = np.random.RandomState(0)
    named = modeling.BertModel(BertConfig(**config)).named_variables()
    checkpoint.write_bundle(str(model / "bert_model.ckpt"), {
        n: rng.normal(0, 0.3, v.shape).astype(np.float32) for n, v in named.items()})
    polarity = require_material("classification", "en_panglee_sentence_polarity", "train.tsv")
    rows = [line.rstrip("\n").split("\t") for line in open(polarity, encoding="utf-8")][1:361]

    def pairs(part):
        return ([f"{a[0]} <> {b[0]}" for a, b in zip(part[0::2], part[1::2])],
                ["entailment" if a[1] == b[1] else "contradiction"
                 for a, b in zip(part[0::2], part[1::2])])

    (train_x, train_y), (test_x, test_y) = pairs(rows[:240]), pairs(rows[240:])
    (root / "text.json").write_text(json.dumps(
        {"train_X": train_x, "train_Y": train_y, "test_X": test_x, "test_Y": test_y}))
    return root


def _probed(who, root, head, name=os.path.basename(NOTEBOOK)):
    """The notebook `name` in `root` run by tests/oracles/session_probe.py: ours through the
    runner, Google's with Google's modules; returns (CompletedProcess, {variable: value} at the
    end)."""
    python, mode = ((sys.executable, ["ours"]) if who == "ours" else
                    (require_oracle(), ["google", require_material("oracles",
                                                                   "google_bert_eedf571")]))
    proc = _run([python, PROBE, str(head), str(root / "probe.npz"), *mode, name], root)
    _ok(proc)
    return proc, dict(np.load(root / "probe.npz"))


def _epoch_numbers(stdout):
    """The floats of the notebook's `epoch: N, training loss: ..., valid acc: ...` lines."""
    lines = [line for line in stdout.splitlines() if line.startswith("epoch:")]
    assert lines, stdout[-2000:]
    return [float(x) for line in lines for x in re.findall(r"\d+\.\d+", line)]


def test_notebook_training_its_own_head_equals_googles_modules(tmp_path):
    """huseinzol05/NLP-Models-Tensorflow `text-similarity/5.bert-base-cross-entropy.ipynb`
    (tests/PROVENANCE.md): a pair classifier built as `tf.layers.dense` on `get_pooled_output()`,
    `is_training=True`, trained with `optimization.create_optimizer` (warmup 1 step, decay to 0 at
    step 10) in a `tf.InteractiveSession` until its test accuracy stops improving; BERT restored
    by `tf.train.Saver` over the `bert` scope. Run unchanged through the runner and with
    Google's modules, each under tests/oracles/session_probe.py, which changes no line of it.

    What is compared, and why that much: the head's kernel is drawn by an unseeded initializer
    and two different TF1 graphs cannot draw the same values, so the probe saves the head as
    our run drew it (after the notebook's `saver.restore`) and assigns it in Google's run at the
    same point. Dropout masks come from TensorFlow's random ops too, so the exact comparison
    reads a config with dropout 0; a second run of ours with dropout 0.1 (same head, same
    batches) shows `is_training=True` reaches the dropout: its first loss differs. With the same
    head, the printed epoch lines (train/valid loss and accuracy), the loss and accuracy fetched
    with every update, and every variable when the notebook ends (BERT's and the head's weights,
    their adam_m/adam_v slots, global_step) are equal. Google's learning rate is the one of
    step t for update t (session_probe.py: Google leaves that order to the executor). A fourth
    run, `python -m bert_mgpu.compat` without the probe (its own head), runs to the end."""
    notebook = _third_party.write(NOTEBOOK, tmp_path / "published")  # its SHA-256 checked
    head = tmp_path / "head.npz"
    runs = {"ours": _probed("ours", _similarity_world(tmp_path / "ours", notebook, 0.0), head)}
    assert head.exists()
    with started({"google": lambda: _probed(
                      "google", _similarity_world(tmp_path / "google", notebook, 0.0), head),
                  "dropout": lambda: _probed(
                      "ours", _similarity_world(tmp_path / "dropout", notebook, 0.1), head),
                  "plain": lambda: _ours(os.path.basename(NOTEBOOK), [], _similarity_world(
                      tmp_path / "plain", notebook, 0.0))},
                 workers=2) as later:
        runs.update({key: future.result() for key, future in later.items()})
    # As a user runs it (`python -m bert_mgpu.compat NOTEBOOK.ipynb`, no probe): to the end.
    _ok(runs["plain"])
    assert "break epoch:" in runs["plain"].stdout and _epoch_numbers(runs["plain"].stdout)
    (ours_proc, ours), (google_proc, google) = runs["ours"], runs["google"]
    np.testing.assert_allclose(_epoch_numbers(ours_proc.stdout),
                               _epoch_numbers(google_proc.stdout), atol=1.5e-6, rtol=0)
    updates = ours["probe|updates"]
    assert updates.shape[0] >= 2 and updates.shape[0] % 2 == 0, updates
    assert set(ours) == set(google)
    assert {"global_step", "dense|kernel|adam_m", "bert|embeddings|word_embeddings|adam_v",
            "bert|pooler|dense|kernel"} <= set(ours)
    assert int(ours["global_step"]) == updates.shape[0]
    for name in sorted(ours):
        np.testing.assert_allclose(ours[name], google[name], atol=2e-6, rtol=0, err_msg=name)
    # Not vacuous: the updates moved the head and BERT.
    start = dict(np.load(head))
    assert np.abs(ours["dense|kernel"] - start["dense|kernel"]).max() > 1e-5
    restored = tf.train.load_checkpoint(
        str(tmp_path / "ours" / "cased_L-12_H-768_A-12" / "bert_model.ckpt"))
    layer = "bert/encoder/layer_1/output/dense/kernel"
    assert np.abs(ours[layer.replace("/", "|")] - restored.get_tensor(layer)).max() > 1e-5
    dropout = runs["dropout"][1]["probe|updates"]
    assert abs(dropout[0, 1] - updates[0, 1]) > 1e-4, (dropout[0], updates[0])


# -- the third kind with a head on get_sequence_output(): extractive summarization ------------

SUMMARIZER = "nlp_models/4.bert-base.ipynb"


def _document(tokenizer, sentences):
    """One document in the layout of the notebook's `dataset-bert.pkl` (what its folder's
    preprocessing-data-bert.ipynb writes, BertSum's): `[CLS] s1 [SEP] [CLS] s2 [SEP] ...` as ids,
    the positions of the [CLS]s, segment ids alternating 0/1 per sentence (its [CLS] and [SEP]
    included). Sentences of at most 5 words are dropped and each keeps its first 30 words, as
    that notebook does.

    Args:
      tokenizer: `tokenization.FullTokenizer`, the uncased vocabulary.
      sentences: list of (text str, label int) pairs.

    Returns:
      (ids, clss, labels, segments): lists of int; `ids` and `segments` of the same length,
      `clss` and `labels` one per kept sentence.
    """
    ids, clss, labels, segments = [], [], [], []
    for text, label in sentences:
        words = text.split()
        if len(words) <= 5:
            continue
        pieces = ["[CLS]"] + tokenizer.tokenize(" ".join(words[:30])) + ["[SEP]"]
        clss.append(len(ids))
        labels.append(label)
        segments += [len(clss) % 2 == 0] * len(pieces)
        ids += tokenizer.convert_tokens_to_ids(pieces)
    return ids, clss, labels, [int(s) for s in segments]


def _summarization_world(root, notebook, dropout):
    """What the notebook reads, at its relative paths: a tiny Google model in
    `uncased_L-12_H-768_A-12/` (the real uncased vocabulary; 2 layers, hidden 32, 256
    positions) and `dataset-bert.pkl` with its eight keys. The CNN stories it was made from are
    not here: a document is 3 consecutive Pang & Lee sentences (real text), a sentence's label
    (1: extract it) its polarity, kept only when at least one is positive (the notebook's
    accuracy is the mean over the 1s of each batch). 16 training documents (2 updates an epoch
    at its batch of 8; its num_train_steps = int(16 / 8 * 20) = 40, num_warmup_steps = 4), 8
    test documents. Its folder's `modeling.py` (a copy of Google's with the position embeddings
    switched off) is not written: `import modeling` is Google's module in both runs."""
    root.mkdir()
    shutil.copy(notebook, root)
    model = root / "uncased_L-12_H-768_A-12"
    model.mkdir()
    shutil.copy(require_material("vocab", "bert_uncased_vocab.txt"), model / "vocab.txt")
    config = dict(TINY_CONFIG, vocab_size=30522, num_hidden_layers=2,
                  max_position_embeddings=256, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout)
    (model / "bert_config.json").write_text(json.dumps(config))
    rng = np.random.RandomState(0)
    named = modeling.BertModel(BertConfig(**config)).named_variables()
    checkpoint.write_bundle(str(model / "bert_model.ckpt"), {
        n: rng.normal(0, 0.3, v.shape).astype(np.float32) for n, v in named.items()})
    polarity = require_material("classification", "en_panglee_sentence_polarity", "train.tsv")
    rows = [line.rstrip("\n").split("\t") for line in open(polarity, encoding="utf-8")][1:]
    tokenizer = tokenization.FullTokenizer(str(model / "vocab.txt"))
    documents = []
    for start in range(0, len(rows), 3):
        document = _document(tokenizer, [(text, int(label))
                                         for text, label in rows[start:start + 3]])
        if len(document[1]) == 3 and any(document[2]):
            documents.append(document)
        if len(documents) == 24:
            break
    data = {}
    for split, part in (("train", documents[:16]), ("test", documents[16:])):
        for index, key in enumerate(("texts", "clss", "labels", "segments")):
            data[f"{split}_{key}"] = [document[index] for document in part]
    with open(root / "dataset-bert.pkl", "wb") as f:
        pickle.dump(data, f)
    return root


def _summary_epochs(stdout):
    """The numbers of the notebook's `epoch N, training avg loss X, training avg acc Y` and
    `epoch N, testing avg ...` lines, in order (its testing loss and accuracy are the means of
    lists it never fills: nan, as published)."""
    lines = [line for line in stdout.splitlines() if line.startswith("epoch ")]
    assert len(lines) == 40, stdout[-2000:]
    return [float(x) for line in lines for x in re.findall(r"(?:\d+\.\d+|nan)", line)]


def test_notebook_head_on_sequence_output_equals_googles_modules(tmp_path):
    """huseinzol05/NLP-Models-Tensorflow `extractive-summarization/4.bert-base.ipynb`
    (tests/PROVENANCE.md): BertSum-style extractive summarization: `get_sequence_output()`
    gathered at each document's sentence positions (`tf.gather(..., batch_dims=1)`), its own
    `tf.layers.dense(outputs, 1)` scoring each sentence, a masked sigmoid cross-entropy,
    `optimization.create_optimizer` (learning rate 1e-5, 40 steps, warmup 4) in a
    `tf.InteractiveSession`, BERT restored by `tf.train.Saver` over the `bert` scope; 20 epochs
    at batches of 8, a tqdm bar per loop. It imports both layouts (`from bert import
    optimization, tokenization, run_classifier` and `import modeling`). Run unchanged through
    the runner and with Google's modules, each under tests/oracles/session_probe.py.

    Compared, as for the pooled-output notebook (see its test for why the head and dropout are
    handled so): Google's run gets the head (`dense/kernel`, `dense/bias`) our run drew, the
    exact runs read a config with dropout 0, Google's update t uses the learning rate of step
    t. Equal: the 40 printed epoch lines (training loss and accuracy per epoch; the testing
    ones are nan in both, as published), the accuracy and loss fetched with each of the 40
    updates, and every global variable at the end (BERT's and the head's weights, adam_m and
    adam_v, global_step). A run of ours with dropout 0.1 (same head and batches) has another
    first loss: `is_training=True` reaches the dropout. A fourth run, `python -m
    bert_mgpu.compat 4.bert-base.ipynb` without the probe (its own head), runs to the end."""
    notebook = _third_party.write(SUMMARIZER, tmp_path / "published")  # its SHA-256 checked
    name = os.path.basename(notebook)
    head = tmp_path / "head.npz"
    runs = {"ours": _probed("ours", _summarization_world(tmp_path / "ours", notebook, 0.0),
                            head, name)}
    assert head.exists()
    with started({"google": lambda: _probed(
                      "google", _summarization_world(tmp_path / "google", notebook, 0.0), head,
                      name),
                  "dropout": lambda: _probed(
                      "ours", _summarization_world(tmp_path / "dropout", notebook, 0.1), head,
                      name),
                  "plain": lambda: _ours(name, [], _summarization_world(
                      tmp_path / "plain", notebook, 0.0))},
                 workers=2) as later:
        runs.update({key: future.result() for key, future in later.items()})
    _ok(runs["plain"])
    assert len(_summary_epochs(runs["plain"].stdout)) == 40 * 2
    (ours_proc, ours), (google_proc, google) = runs["ours"], runs["google"]
    np.testing.assert_allclose(_summary_epochs(ours_proc.stdout),
                               _summary_epochs(google_proc.stdout), atol=1.5e-6, rtol=0)
    updates = ours["probe|updates"]
    assert updates.shape == (40, 2), updates.shape
    assert set(ours) == set(google)
    assert {"global_step", "dense|kernel|adam_m", "dense|bias|adam_v",
            "bert|encoder|layer_1|output|dense|kernel|adam_m"} <= set(ours)
    assert int(ours["global_step"]) == 40
    for key in sorted(ours):
        np.testing.assert_allclose(ours[key], google[key], atol=2e-6, rtol=0, err_msg=key)
    start = dict(np.load(head))
    assert set(start) == {"dense|kernel", "dense|bias"}
    assert np.abs(ours["dense|kernel"] - start["dense|kernel"]).max() > 1e-6
    restored = tf.train.load_checkpoint(
        str(tmp_path / "ours" / "uncased_L-12_H-768_A-12" / "bert_model.ckpt"))
    layer = "bert/encoder/layer_1/output/dense/kernel"
    assert np.abs(ours[layer.replace("/", "|")] - restored.get_tensor(layer)).max() > 1e-6
    dropout = runs["dropout"][1]["probe|updates"]
    assert abs(dropout[0, 1] - updates[0, 1]) > 1e-4, (dropout[0], updates[0])
