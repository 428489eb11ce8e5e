"""distill.py with a run_ner.py teacher, end to end on a tiny crafted CoNLL set (the sentences of
tests/test_run_ner.py; no real CoNLL file is shipped): a 4-layer teacher (dropout 0.1, BIOES,
long sentences in windows) trained here, a 2-layer student written as a run_ner.py run that
run_ner.py --do_predict reads; 2 towers == 1 device with dropout on; the token loss is the soft
targets' KL plus alpha times the cross-entropy over the labelled words, computed by hand; the
inner losses act through the script; bad input in one line."""

import json
import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, final_tensors, finish_killed, signal_at_checkpoint
from _oracle import REPO
from _pretraining_data import TINY_CONFIG
from _together import bad_input_jobs, run_command, started
from test_run_ner import VOCAB, conll, random_sentence

from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import distill

SCRIPT = os.path.join(REPO, "distill.py")
RUN_NER = os.path.join(REPO, "run_ner.py")
SEQ = 16
TRAIN, DEV = 48, 12


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """root/teacher: run_ner.py's run (4 layers, dropout 0.1, --tag_scheme=bioes,
    --doc_stride=5) on crafted sentences; returns root."""
    root = tmp_path_factory.mktemp("distill_ner")
    rng = np.random.RandomState(1)
    data = root / "data"
    data.mkdir()
    train = [random_sentence(rng, rng.randint(3, 10)) for _ in range(TRAIN)]
    dev = [random_sentence(rng, rng.randint(3, 10)) for _ in range(DEV - 1)]
    dev.append(random_sentence(rng, 30))  # several windows
    (data / "train.txt").write_text(conll(train), encoding="utf-8")
    (data / "dev.txt").write_text(conll(dev), encoding="utf-8")
    (data / "test.txt").write_text(conll(dev), encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (root / "bert_config.json").write_text(json.dumps(dict(
        TINY_CONFIG, vocab_size=len(VOCAB), num_hidden_layers=4, hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1)))
    proc = run_command([
        sys.executable, RUN_NER, f"--data_dir={data}", f"--vocab_file={root / 'vocab.txt'}",
        f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={root / 'teacher'}",
        "--do_train=true", f"--max_seq_length={SEQ}", "--doc_stride=5", "--tag_scheme=bioes",
        "--train_batch_size=8", "--num_train_epochs=3", "--learning_rate=3e-3",
        "--allow_random_weights=true", "--random_seed=4"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def _command(root, out, n_gpus, batch, **changes):
    flags = {"--teacher_dir": root / "teacher", "--output_dir": out, "--do_train": "true",
             "--do_eval": "false", "--do_predict": "false", "--student_num_layers": 2,
             "--train_batch_size": batch, "--n_gpus": n_gpus, "--num_train_epochs": 2,
             "--learning_rate": "1e-3", "--random_seed": 3, **changes}
    return [sys.executable, SCRIPT] + [f"{k}={v}" for k, v in flags.items()]


BAD_INPUT = [
    ({"--unlabeled_file": "{root}/data/train.txt"},
     "--unlabeled_file is for a classifier teacher"),
    ({"--label_list": "O,B-PER"}, "the teacher's labels are O,"),
    ({"--minilm_value_weight": 1, "--minilm_relation_heads": 5},
     "--minilm_relation_heads=5 does not divide the hidden sizes 32 (student) and 32"),
]


@pytest.fixture(scope="module")
def runs(teacher):
    root = teacher
    jobs = {
        "good": _command(root, root / "good", 2, 4, **{
            "--do_eval": "true", "--do_predict": "true", "--eval_batch_size": 5,
            "--predict_batch_size": 3}),
        "one": _command(root, root / "one", 1, 8),
        "alpha0": _command(root, root / "alpha0", 1, 8, **{"--alpha": 0.0}),
        "inner": _command(root, root / "inner", 1, 8, **{
            "--tinybert_hidden_weight": 1.0, "--minilm_attention_weight": 1.0}),
    }
    jobs = {key: lambda cmd=cmd: run_command(cmd, timeout=600) for key, cmd in jobs.items()}
    bad = [({k: str(v).format(root=root) for k, v in change.items()}, message)
           for change, message in BAD_INPUT]
    jobs.update(bad_input_jobs(_command(root, root / "bad", 1, 8), bad, root))
    with started(jobs) as futures:
        yield futures


def test_writes_a_run_ner_run_that_run_ner_predicts_with(runs, teacher, tmp_path):
    """The student's directory is a run_ner.py run (2 layers, the teacher's tags, conlleval's
    eval_results.txt, predictions.txt); run_ner.py --do_predict from its checkpoint and
    bert_config.json writes the same predictions.txt."""
    proc = runs["good"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = teacher / "good"
    run = json.loads((out / "run_config.json").read_text())
    teacher_run = json.loads((teacher / "teacher" / "run_config.json").read_text())
    assert run["labels"] == teacher_run["labels"] and run["tag_scheme"] == "bioes"
    assert run["doc_stride"] == 5 and run["student_layer_map"] == [0, 2]
    assert json.loads((out / "bert_config.json").read_text())["num_hidden_layers"] == 2
    result = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text()
                  .splitlines())
    assert {"eval_f1", "eval_precision", "eval_recall", "eval_accuracy"} <= set(result)
    names = set(final_tensors(str(out)))
    assert "cls/ner/output_weights" in names and not any(
        n.startswith("bert/encoder/layer_2/") for n in names)
    predictions = (out / "predictions.txt").read_text()
    proc = run_command([sys.executable, RUN_NER, f"--data_dir={teacher / 'data'}",
                        f"--vocab_file={teacher / 'vocab.txt'}",
                        f"--bert_config_file={out / 'bert_config.json'}",
                        f"--init_checkpoint={out}", f"--output_dir={tmp_path / 'predicted'}",
                        "--do_predict=true", f"--max_seq_length={SEQ}", "--doc_stride=5",
                        "--tag_scheme=bioes", f"--label_list={','.join(run['labels'])}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "predicted" / "predictions.txt").read_text() == predictions


def test_two_towers_equal_one_device_with_dropout_on(runs, teacher):
    for key in ("good", "one"):
        assert runs[key].result().returncode == 0, runs[key].result().stderr[-3000:]
    two, one = final_tensors(str(teacher / "good")), final_tensors(str(teacher / "one"))
    assert sorted(two) == sorted(one)
    for name in one:
        np.testing.assert_allclose(two[name], one[name], atol=1e-5, err_msg=name)


@pytest.mark.parametrize("key", ["alpha0", "inner"])
def test_flags_act_through_the_script(runs, teacher, key):
    """--alpha=0, and the inner losses, each the only change from the "one" run, end
    elsewhere."""
    for run in (key, "one"):
        assert runs[run].result().returncode == 0, runs[run].result().stderr[-3000:]
    ours, one = final_tensors(str(teacher / key)), final_tensors(str(teacher / "one"))
    assert max(float(np.abs(ours[n] - one[n]).max()) for n in one) > 1e-4


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_is_one_line_and_writes_nothing(runs, teacher, case):
    proc = runs[f"bad{case}"].result()
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ERROR" in lines[0] and BAD_INPUT[case][1] in lines[0], \
        proc.stderr
    assert not (teacher / f"bad{case}").exists()


def test_token_loss_by_hand_on_one_batch():
    """DistillTagger's loss of a batch = sum over labelled positions of T^2 * KL(teacher_T ||
    student_T) + alpha * cross-entropy, over their number (numpy, from the two models'
    logits); unlabelled positions (weight 0) count for nothing."""
    temperature, alpha = 2.0, 0.3
    config = dict(TINY_CONFIG, vocab_size=40, initializer_range=1.0)
    tf.random.set_seed(6)
    task = distill.DistillTagger(BertConfig.from_dict(dict(config, num_hidden_layers=1)),
                                 BertConfig.from_dict(dict(config, num_hidden_layers=2)), 5,
                                 temperature, alpha)
    rng = np.random.RandomState(2)
    weights = (rng.rand(3, 8) < 0.5).astype(np.float32)
    features = {"input_ids": tf.constant(rng.randint(1, 40, size=(3, 8)), tf.int32),
                "input_mask": tf.ones((3, 8), tf.int32), "segment_ids": tf.zeros((3, 8), tf.int32),
                "label_ids": tf.constant(rng.randint(0, 5, size=(3, 8)), tf.int32),
                "label_weights": tf.constant(weights)}
    loss = task.tower_loss(features, task.context(features), training=False)["loss"].numpy()

    def logits(model):
        out = model.bert(features["input_ids"], features["input_mask"],
                         features["segment_ids"], training=False)
        return model.tagger(out.sequence_output)["logits"].numpy().astype(np.float64)

    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    s, t = logits(task), logits(task.teacher)
    log_t, log_s = log_softmax(t / temperature), log_softmax(s / temperature)
    kl = (np.exp(log_t) * (log_t - log_s)).sum(-1)  # [B, S]
    labels = features["label_ids"].numpy()
    ce = -np.take_along_axis(log_softmax(s), labels[..., None], -1)[..., 0]
    assert (kl * weights).sum() > 1e-3
    expected = (weights * (temperature ** 2 * kl + alpha * ce)).sum() / weights.sum()
    assert loss == pytest.approx(expected, rel=1e-5)


def test_sigkill_then_rerun_ends_with_the_same_weights(runs, teacher):
    """A 2 x 4 NER student with the inner losses off, killed with SIGKILL after its checkpoint
    at step 4 and rerun as 1 x 8 (dropout 0.1): the final weights of the uninterrupted 2 x 4
    run ("good"), to 1e-5."""
    assert runs["good"].result().returncode == 0, runs["good"].result().stderr[-3000:]
    expected = final_tensors(str(teacher / "good"))
    steps = int(expected["global_step"])
    assert steps > 4
    killed = teacher / "killed"
    cmd = _command(teacher, killed, 2, 4, **{"--save_checkpoints_steps": 4})
    dying = Launched(cmd)
    assert signal_at_checkpoint([(dying, str(killed), 4, signal.SIGKILL, 0.05)])[0] is not None
    _, not_killed = finish_killed(dying, str(killed), steps)
    assert not_killed is None, not_killed
    rerun = run_command(_command(teacher, killed, 1, 8, **{"--save_checkpoints_steps": 4}),
                        timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resumed from" in rerun.stderr
    ours = final_tensors(str(killed))
    assert sorted(ours) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(ours[name], expected[name], atol=1e-5, rtol=0, err_msg=name)
