"""run_classifier_mgpu.py --doc_stride: whole-document classification over windows (issue 31).

The windows cover every piece of a long text (the text is rebuilt from them), start
--doc_stride pieces apart, keep text_b in each; off by default nothing changes (records and
cache keys). Training weights each window by 1 / its document's windows, with towers equal to
one device (dropout on). A script run (2 towers) writes one line per document, whose pooled
probabilities (mean, and max in a second run) equal a hand computation from the per-window
probabilities of the run's checkpoint, as do its per-document eval metrics. Its SavedModel
export cuts raw texts into the same windows in the graph (tokenize = the script's records) and
pools them as the script (serving_default = test_results.tsv, mean and max).
"""

import concurrent.futures
import dataclasses
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, REPO
from _pretraining_data import TINY_CONFIG
from _together import run_command, started_in, with_the_module

from bert_mgpu import tokenization
from bert_mgpu.configs.base import ModelFiles, TrainConfig
from bert_mgpu.configs.serving import ExportConfig
from bert_mgpu.data import classifier_data, features, input_pipeline
from bert_mgpu.data.processors import InputExample
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import BertClassifier, BertMultiLabelClassifier, BertRegressor

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SCRIPT = os.path.join(REPO, "run_classifier_mgpu.py")
WORDS = ("the movie was good bad great terrible fine boring fun long short and but not very "
         "really quite story actors plot music ending").split()
SEQ, STRIDE = 16, 5


@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


def text(rng, n):
    return " ".join(rng.choice(WORDS, size=n))


def pieces_of(record, tokenizer):
    """The record's tokens of segment 0 and 1, without [CLS]/[SEP] and padding."""
    n = sum(record["input_mask"])
    tokens = tokenizer.convert_ids_to_tokens(record["input_ids"][:n])
    segments = record["segment_ids"][:n]
    a = [t for t, s in zip(tokens, segments) if s == 0][1:-1]
    b = [t for t, s in zip(tokens, segments) if s == 1][:-1]
    return a, b


# -- windows ---------------------------------------------------------------------------------

def test_windows_cover_every_piece_and_start_doc_stride_apart(tokenizer):
    rng = np.random.RandomState(0)
    for n in (1, 14, 15, 23, 40):
        example = InputExample("x", text(rng, n), None, "1")
        want = tokenizer.tokenize(example.text_a)
        records = classifier_data.convert_document(example, {"0": 0, "1": 1}, SEQ, tokenizer,
                                                   STRIDE, 7)
        budget = SEQ - 2
        expected = 1 if len(want) <= budget else -(-(len(want) - budget) // STRIDE) + 1
        assert len(records) == expected, n
        rebuilt = []
        for i, record in enumerate(records):
            a, b = pieces_of(record, tokenizer)
            assert not b
            start = i * STRIDE
            assert a == want[start:start + budget]  # starts doc_stride apart, full windows
            rebuilt[start:] = a  # overlapping pieces are the same pieces
            assert record["doc_index"] == [7] and record["label_ids"] == [1]
            assert record["window_weight"] == [1.0 / len(records)]
        assert rebuilt == want  # every piece, the last window ending at the text's end


def test_text_b_in_every_window(tokenizer):
    rng = np.random.RandomState(1)
    b_text = text(rng, 20)
    example = InputExample("x", text(rng, 30), b_text, "0")
    want_a, want_b = tokenizer.tokenize(example.text_a), tokenizer.tokenize(b_text)
    records = classifier_data.convert_document(example, {"0": 0}, SEQ, tokenizer, 3, 0)
    kept_b = (SEQ - 3) // 2
    budget = SEQ - 3 - kept_b
    rebuilt = []
    for i, record in enumerate(records):
        a, b = pieces_of(record, tokenizer)
        assert b == want_b[:kept_b]
        assert a == want_a[i * 3:i * 3 + budget]
        rebuilt[i * 3:] = a
    assert rebuilt == want_a
    # A pair that fits is Google's one record, whatever the lengths of its two texts.
    short = InputExample("y", "the movie", text(rng, 9), "0")
    (record,) = classifier_data.convert_document(short, {"0": 0}, SEQ, tokenizer, 3, 4)
    google = classifier_data.convert_single_example(short, {"0": 0}, SEQ, tokenizer)
    assert {k: v for k, v in record.items() if k not in ("doc_index", "window_weight")} == google


def test_off_by_default_records_and_cache_keys_unchanged(tokenizer, tmp_path):
    rng = np.random.RandomState(2)
    examples = [InputExample(str(i), text(rng, 5 + 6 * i), None, str(i % 2)) for i in range(5)]
    path = str(tmp_path / "off.tf_record")
    assert classifier_data.write_features(examples, ["0", "1"], SEQ, tokenizer, path) == 5
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    for example, record in zip(examples, records):
        google = classifier_data.convert_single_example(example, {"0": 0, "1": 1}, SEQ,
                                                        tokenizer)
        assert set(record.features.feature) == set(features.CLASSIFIER_FEATURES)
        assert {k: list(record.features.feature[k].int64_list.value) for k in google} == google
    args = dict(task_name="tsv", split="train", input_files=[], vocab_file=VOCAB,
                spm_model_file=None, do_lower_case=True, max_seq_length=SEQ,
                label_list=["0", "1"], truncation="head", head_tokens=128)
    key = classifier_data.cache_key(**args)
    assert classifier_data.cache_key(**args, doc_stride=0) == key
    assert classifier_data.cache_key(**args, doc_stride=STRIDE) != key
    # Windows on: more records, the meta counts documents beside them.
    path, n = classifier_data.cached_features(lambda: examples, "train", str(tmp_path), "k",
                                              ["0", "1"], SEQ, tokenizer, "head", 128,
                                              doc_stride=STRIDE)
    meta = classifier_data.feature_meta(path)
    assert n == meta["num_examples"] > 5 and meta["num_documents"] == 5


def test_pooling_by_hand():
    values = np.array([[0.2, 0.8], [0.6, 0.4], [0.9, 0.1], [0.3, 0.7], [0.5, 0.5]])
    docs = np.array([0, 0, 1, 2, 2])
    mean = classifier_data.pool_windows(values, docs, 3, "mean")
    np.testing.assert_allclose(mean, [[0.4, 0.6], [0.9, 0.1], [0.4, 0.6]])
    high = classifier_data.pool_windows(values, docs, 3, "max")
    np.testing.assert_allclose(high, [[0.6, 0.8], [0.9, 0.1], [0.5, 0.7]])
    with pytest.raises(RuntimeError, match="windows of 3 documents, expected 4"):
        classifier_data.pool_windows(values, docs, 4, "mean")


def test_regression_and_multilabel_documents_by_hand():
    config = BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522))
    docs = np.array([0, 0, 1, 2, 2, 2])
    regressor = BertRegressor(config)
    pooled, labels = regressor.pool_documents(
        {"predictions": np.array([1.0, 3.0, 0.5, 4.0, 5.0, 6.0]), "doc_index": docs,
         "document_label": np.array([[2.0], [2.0], [1.0], [4.0], [4.0], [4.0]])}, 3, "mean")
    np.testing.assert_allclose(pooled, [2.0, 0.5, 5.0])
    result = regressor.document_metrics(pooled, labels)
    assert result["eval_mse"] == pytest.approx((0 + 0.25 + 1) / 3)
    assert result["eval_spearman"] == pytest.approx(1.0)
    tagger = BertMultiLabelClassifier(config, 2, threshold=0.5)
    pooled, labels = tagger.pool_documents(
        {"probabilities": np.array([[0.9, 0.2], [0.7, 0.6], [0.1, 0.3], [0.4, 0.8],
                                    [0.2, 0.9], [0.3, 0.1]]), "doc_index": docs,
         "document_label": np.array([[1.0, 1.0]] * 2 + [[0.0, 0.0]] + [[0.0, 1.0]] * 3)},
        3, "max")
    np.testing.assert_allclose(pooled, [[0.9, 0.6], [0.1, 0.3], [0.4, 0.9]])
    result = tagger.document_metrics(pooled, labels)
    assert result["eval_exact_match"] == pytest.approx(1.0)
    loss = -np.mean([(np.log(0.9) + np.log(0.6)) / 2, (np.log(0.9) + np.log(0.7)) / 2,
                     (np.log(0.6) + np.log(0.9)) / 2])
    assert result["eval_loss"] == pytest.approx(loss)


# -- training: each document once, towers == one device ------------------------------------

def windowed_file(tmp_path, tokenizer):
    rng = np.random.RandomState(3)
    examples = [InputExample(str(i), text(rng, rng.randint(3, 40)), None, str(i % 2))
                for i in range(12)]
    path = str(tmp_path / "train.tf_record")
    n = classifier_data.write_features(examples, ["0", "1"], SEQ, tokenizer, path,
                                       doc_stride=STRIDE)
    shapes = features.with_windows(features.classifier_shapes(SEQ))
    return path, n, shapes


def test_loss_weights_each_document_once(tmp_path, tokenizer):
    path, n, shapes = windowed_file(tmp_path, tokenizer)
    task = BertClassifier(BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522)), 2)
    batch = next(iter(input_pipeline.record_dataset([path], shapes, n, is_training=False)))
    per_window = task.per_example_loss(batch, training=False).numpy()
    weights = batch["window_weight"].numpy()[:, 0]
    assert weights.sum() == pytest.approx(12, abs=1e-4)  # one per document
    loss = task.tower_loss(batch, task.context(batch), training=False)["loss"].numpy()
    assert loss == pytest.approx((weights * per_window).sum() / weights.sum(), rel=1e-5)
    plain = {k: v for k, v in batch.items() if k not in ("window_weight", "doc_index")}
    assert task.context(plain).keys() == {"num_examples"}  # the path without windows
    assert task.tower_loss(plain, task.context(plain), training=False)["loss"].numpy() == \
        pytest.approx(per_window.mean(), rel=1e-5)


def test_windowed_towers_equal_one_device_with_dropout(tmp_path, tokenizer):
    path, _, shapes = windowed_file(tmp_path, tokenizer)
    config = BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522,
                                       hidden_dropout_prob=0.1,
                                       attention_probs_dropout_prob=0.1))
    tf.random.set_seed(5)
    init = checkpoint.write_bundle(str(tmp_path / "init"),
                                   BertClassifier(config, 2).named_variables())
    results, losses = [], []
    for n_gpus, batch in ((1, 8), (2, 4)):
        task = BertClassifier(config, 2)
        cfg = TrainConfig(output_dir=str(tmp_path / f"out{n_gpus}"), train_batch_size=batch,
                          n_gpus=n_gpus, num_train_steps=2, num_warmup_steps=0,
                          learning_rate=1e-3, init_checkpoint=init)
        trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
        metrics = trainer.train(input_pipeline.record_dataset([path], shapes, 8, True, seed=1,
                                                              shuffle_buffer=0))
        losses.append(metrics["loss"])
        results.append({k: v.numpy() for k, v in task.named_variables().items()})
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
    for k in results[0]:
        np.testing.assert_allclose(results[0][k], results[1][k], atol=1e-5, err_msg=k)


# -- the script: one line per document, pooling and metrics by hand ------------------------

def write_tsv(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    rng = np.random.RandomState(4)
    root = tmp_path_factory.mktemp("long_documents")
    for split, n in (("train", 24), ("dev", 9), ("test", 7)):
        rows = [["text", "label"] if split != "test" else ["text"]]
        for i in range(n):
            body = text(rng, rng.randint(4, 45)) + (" good" if i % 2 else " bad")
            rows.append([body, str(i % 2)] if split != "test" else [body])
        write_tsv(root / f"{split}.tsv", rows)
    # Weights drawn 10x wider than Google's 0.02: the windows of a document differ enough
    # that mean and max pooling give rows the tests tell apart.
    (root / "bert_config.json").write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522,
                                                           initializer_range=0.2)))
    return root


def command(root, out, *extra):
    return [sys.executable, SCRIPT, "--task_name=tsv", f"--data_dir={root}",
            f"--vocab_file={VOCAB}", f"--bert_config_file={root / 'bert_config.json'}",
            f"--output_dir={out}", f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}",
            "--train_batch_size=4", "--n_gpus=2", "--num_train_epochs=1",
            "--learning_rate=1e-3", "--eval_batch_size=5", "--predict_batch_size=3", *extra]


_runs_with_the_module = with_the_module("runs")


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory):
    """The trained run (mean pooling), then a prediction with its checkpoint and max: started
    with the module (they go on while the in-process tests run).

    Yields: {"mean" | "max": Future of (CompletedProcess, --output_dir)}.
    """
    d = tmp_path_factory.mktemp("runs")
    trained = concurrent.futures.Future()  # the "mean" run's future, once started

    def predict_with_max(out):
        _, trained_out = trained.result().result()
        return run_command(command(data_root, out, "--do_predict", "--window_pooling=max",
                                   f"--init_checkpoint={trained_out}"))

    with started_in(d, {
        "mean": lambda out: run_command(command(data_root, out, "--do_train", "--do_eval",
                                                "--do_predict", "--eval_every_n_steps=4")),
        "max": predict_with_max,
    }) as futures:
        trained.set_result(futures["mean"])
        yield futures


def window_probabilities(out, stem):
    """Each window's probabilities (in file order) and document index, by the run's model."""
    (path,) = [os.path.join(out, n) for n in os.listdir(out)
               if n.startswith(stem + ".") and n.endswith(".tf_record")]
    task = BertClassifier(BertConfig.from_dict(json.load(open(out / "bert_config.json"))), 2)
    checkpoint.init_from_checkpoint(str(out), task.named_variables())
    shapes = features.with_windows(features.classifier_shapes(SEQ))
    probabilities, docs, labels = [], [], []
    for batch in input_pipeline.record_dataset([path], shapes, 16, is_training=False):
        probabilities.append(task.predict(batch)["probabilities"].numpy())
        docs.append(batch["doc_index"].numpy()[:, 0])
        labels.append(batch["label_ids"].numpy()[:, 0])
    return np.concatenate(probabilities), np.concatenate(docs), np.concatenate(labels)


def by_hand(probabilities, docs, pooling):
    rows = []
    for d in range(docs.max() + 1):
        windows = probabilities[docs == d]
        row = windows.mean(0) if pooling == "mean" else windows.max(0)
        rows.append(row / row.sum())
    return np.array(rows)


def read_rows(path):
    return np.array([[float(x) for x in line.split("\t")]
                     for line in path.read_text().splitlines()])


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_one_line_per_document_pooled_by_hand(runs, pooling, data_root, tokenizer):
    """test_results.tsv: each document's windows pooled as --window_pooling says; the script's
    windows start --doc_stride pieces apart (each document has the windows
    test_windows_cover_every_piece_and_start_doc_stride_apart counts for its length)."""
    proc, out = runs[pooling].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    probabilities, docs, _ = window_probabilities(runs["mean"].result()[1], "predict")
    assert len(docs) > 7 and sorted(set(docs)) == list(range(7))  # long documents: windows
    texts = [line.split("\t")[0] for line in
             (data_root / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    lengths = [len(tokenizer.tokenize(t)) for t in texts]
    assert [int((docs == d).sum()) for d in range(7)] == [
        1 if n <= SEQ - 2 else -(-(n - SEQ + 2) // STRIDE) + 1 for n in lengths]
    rows = read_rows(out / "test_results.tsv")
    assert rows.shape == (7, 2)
    np.testing.assert_allclose(rows, by_hand(probabilities, docs, pooling), atol=1e-5)
    other = by_hand(probabilities, docs, "max" if pooling == "mean" else "mean")
    assert np.abs(rows - other).max() > 1e-4  # the other pooling would not pass the line above
    predicted = [int(x) for x in (out / "predict.txt").read_text().split()]
    assert predicted == list(np.argmax(rows, axis=1))


def test_eval_metrics_per_document(runs):
    proc, out = runs["mean"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text()
                  .splitlines())
    probabilities, docs, labels = window_probabilities(out, "eval")
    pooled = by_hand(probabilities, docs, "mean")
    truth = np.array([labels[docs == d][0] for d in range(9)])
    assert int(result["eval_examples"]) == 9 and int(result["eval_windows"]) == len(docs) > 9
    assert float(result["eval_accuracy"]) == pytest.approx(
        np.mean(np.argmax(pooled, 1) == truth), abs=1e-6)
    loss = -np.mean(np.log(pooled[np.arange(9), truth]))
    assert float(result["eval_loss"]) == pytest.approx(loss, abs=1e-5)
    # Max pooling's loss would be further off than float rounding, though not by much: the
    # windows of a barely trained model pool alike.
    max_pooled = by_hand(probabilities, docs, "max")
    assert float(result["eval_loss"]) == pytest.approx(loss, abs=3e-6)
    assert abs(-np.mean(np.log(max_pooled[np.arange(9), truth])) - loss) > 1e-5
    assert float(result["loss"]) == pytest.approx(loss, abs=1e-5)
    assert "windows of 24 documents" in proc.stderr
    # Evaluations during training are the documents' too (the last one is the final model's).
    history = (out / "eval_history.tsv").read_text().splitlines()
    last = dict(zip(history[0].split("\t"), history[-1].split("\t")))
    assert len(history) >= 3 and float(last["eval_accuracy"]) == float(result["eval_accuracy"])
    assert json.load(open(out / "run_config.json"))["doc_stride"] == STRIDE


# -- the SavedModel export: windows and pooling in the graph -------------------------------

def served_texts():
    """Texts of 0 to ~8 windows (SEQ, STRIDE), with pairs: text_b long, short, empty (no
    second text), and one without tokens (no second text either, as Google's)."""
    rng = np.random.RandomState(5)
    texts_a = ["", "good", text(rng, 13), text(rng, 14), text(rng, 30), text(rng, 47),
               text(rng, 3), text(rng, 25)]
    texts_b = [text(rng, 4), "", text(rng, 20), "\u200b", text(rng, 2), text(rng, 9), "",
               text(rng, 40)]
    return texts_a, texts_b


def script_windows(texts_a, texts_b, tokenizer):
    """The records run_classifier_mgpu.py --doc_stride writes for the texts (doc_index =
    the text's index in the batch)."""
    records = []
    for i, (a, b) in enumerate(zip(texts_a, texts_b or [None] * len(texts_a))):
        records += classifier_data.convert_document(InputExample(str(i), a, b, None), {}, SEQ,
                                                    tokenizer, STRIDE, i)
    return {"input_ids": [r["input_ids"] for r in records],
            "input_mask": [r["input_mask"] for r in records],
            "segment_ids": [r["segment_ids"] for r in records],
            "example_index": [r["doc_index"][0] for r in records]}


def test_graph_windows_equal_the_scripts_records(tokenizer):
    pytest.importorskip("tensorflow_text")
    from bert_mgpu.serving.tokenizer import ServingTokenizer
    from bert_mgpu.serving.windows import document_windows

    graph = ServingTokenizer(VOCAB, do_lower_case=True, max_seq_length=SEQ)
    texts_a, texts_b = served_texts()
    for b in (None, texts_b):
        want = script_windows(texts_a, b, tokenizer)
        got = document_windows(graph, tf.constant(texts_a),
                               None if b is None else tf.constant(b), STRIDE, SEQ)
        assert {k: got[k].numpy().tolist() for k in want} == want
        counts = np.bincount(want["example_index"])
        assert counts.min() == 1 and counts.max() >= 6  # one window to many, in one batch


@pytest.mark.parametrize("task_type", ["classification", "regression", "multilabel"])
@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_served_pooling_equals_the_scripts(task_type, pooling):
    """The export's pooling of windows' outputs (in the graph) is the script's
    (`pool_documents`), the label ids and predicted labels read off the pooled values."""
    from bert_mgpu.model.head_spec import ClassifierHeadSpec
    from bert_mgpu.serving.classifier import ServedClassifier
    from bert_mgpu.tasks.classifier import TASK_CLASSES

    config = BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522))
    num_labels = 1 if task_type == "regression" else 3
    head = ServedClassifier(config, num_labels, ClassifierHeadSpec(task_type=task_type,
                                                                   multilabel_threshold=0.4))
    docs = np.array([0, 1, 1, 1, 2, 2, 3])
    pooled_output = tf.random.stateless_normal([len(docs), config.hidden_size], [1, 2])
    windows = head(pooled_output)
    served = head.pool(windows, tf.constant(docs, tf.int32), 4, pooling)
    kind = TASK_CLASSES[task_type]
    task = kind.for_run(ClassifierConfigStub, config, [str(i) for i in range(num_labels)])
    name = task.pooled_output
    outputs = {name: windows[name].numpy(), "doc_index": docs,
               "document_label": np.zeros([len(docs), 1])}
    want, _ = task.pool_documents(outputs, 4, pooling)
    np.testing.assert_allclose(served[name].numpy(), want, atol=1e-6)
    if task_type == "classification":
        assert served["label_id"].numpy().tolist() == np.argmax(want, axis=1).tolist()
    if task_type == "multilabel":
        assert (served["predicted"].numpy() == (want > 0.4)).all()


class ClassifierConfigStub:
    """What `for_run` reads of a run's config."""
    multilabel_threshold = 0.4


def run_test_texts(data_root):
    return [line.split("\t")[0] for line in
            (data_root / "test.tsv").read_text().splitlines()[1:]]


@pytest.fixture(scope="module")
def served(runs, tmp_path_factory):
    """The --doc_stride run exported from its --output_dir alone and loaded back."""
    tf_text = pytest.importorskip("tensorflow_text")
    del tf_text  # registers the tokenizer's ops for the loaded graph
    from bert_mgpu.serving import export

    proc, out = runs["mean"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = export.export_saved_model(ExportConfig(
        model=ModelFiles(), output_dir=str(out),
        export_dir=str(tmp_path_factory.mktemp("export") / "export")))
    return tf.saved_model.load(path)


def test_export_reads_the_runs_windows_and_pools_them(runs, data_root, served):
    """serving_default on the run's test texts gives its test_results.tsv (one row per text,
    texts of one to many windows in one call); tokenize gives its predict records."""
    texts = tf.constant(run_test_texts(data_root))
    _, out = runs["mean"].result()
    got = served.signatures["serving_default"](text_a=texts)
    want = read_rows(out / "test_results.tsv")
    np.testing.assert_allclose(got["probabilities"].numpy(), want, atol=1e-5)
    predicted = [int(x) for x in (out / "predict.txt").read_text().split()]
    assert got["label_id"].numpy().tolist() == predicted
    assert got["label"].numpy().astype(str).tolist() == [str(i) for i in predicted]

    windows = served.signatures["tokenize"](text_a=texts)
    (path,) = [os.path.join(out, n) for n in os.listdir(out)
               if n.startswith("predict.") and n.endswith(".tf_record")]
    shapes = features.with_windows(features.classifier_shapes(SEQ))
    (records,) = input_pipeline.record_dataset([path], shapes, 1000, is_training=False)
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(windows[name].numpy(), records[name].numpy(), name)
    np.testing.assert_array_equal(windows["example_index"].numpy(),
                                  records["doc_index"].numpy()[:, 0])
    assert np.bincount(windows["example_index"].numpy()).max() > 1

    # A pair whose text_b is empty is the text alone; each text alone is its row.
    pair = served.signatures["serving_pair"](text_a=texts, text_b=tf.fill(texts.shape, ""))
    np.testing.assert_allclose(pair["probabilities"].numpy(), want, atol=1e-5)
    for i in (0, 3):
        alone = served.signatures["serving_default"](text_a=texts[i:i + 1])
        np.testing.assert_allclose(alone["probabilities"].numpy(), want[i:i + 1], atol=1e-5)


def test_export_window_pooling_flag_gives_the_max_run(runs, data_root):
    """--window_pooling=max given to the export (the run's was mean) gives the max run's
    test_results.tsv."""
    pytest.importorskip("tensorflow_text")
    from bert_mgpu.serving import export

    _, trained = runs["mean"].result()
    proc, out = runs["max"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(trained),
                                       export_dir="unused", window_pooling="max",
                                       flags_given=frozenset({"window_pooling"})))
    assert (spec.doc_stride, spec.window_pooling) == (STRIDE, "max")
    model = export.build_serving_model(spec, "classifier")
    got = model.serve_text(tf.constant(run_test_texts(data_root)))
    np.testing.assert_allclose(got["probabilities"].numpy(), read_rows(out / "test_results.tsv"),
                               atol=1e-5)
    # --doc_stride=0 exports the first window only (Google's truncation), as before.
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(trained),
                                       export_dir="unused", doc_stride=0))
    assert spec.doc_stride == 0
    with pytest.raises(export.ExportError, match="--doc_stride=15 must be in"):
        export.build_serving_model(dataclasses.replace(spec, doc_stride=SEQ - 1), "classifier")
