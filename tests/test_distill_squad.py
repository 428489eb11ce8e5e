"""distill.py with a run_squad.py teacher, end to end on a tiny crafted SQuAD v2.0 file (the
paragraphs of tests/test_run_squad.py): a 4-layer teacher (dropout 0.1, contexts in several
windows) trained here, a 2-layer student written as a run_squad.py run (predictions.json,
the teacher's window and answer flags) that run_squad.py --do_predict reads; 2 towers == 1
device with dropout on; a window's loss is the soft targets' KL over starts and ends plus
alpha times Google's span loss, computed by hand; the options act through the script; resume
after SIGKILL exact; bad input in one line."""

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
from test_run_squad import VOCAB, squad_json

from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import distill

SCRIPT = os.path.join(REPO, "distill.py")
RUN_SQUAD = os.path.join(REPO, "run_squad.py")
SEQ = 32
# The teacher's windows and answers (the student takes them over).
ANSWER_FLAGS = ["--doc_stride=12", "--max_query_length=8", "--n_best_size=5",
                "--max_answer_length=6", "--version_2_with_negative=true"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """root/teacher: run_squad.py's run (4 layers, dropout 0.1, v2.0, windows of 32 with
    stride 12) on crafted paragraphs; returns root."""
    root = tmp_path_factory.mktemp("distill_squad")
    (root / "squad.json").write_text(json.dumps(squad_json()))
    (root / "bert_config.json").write_text(json.dumps(dict(
        TINY_CONFIG, vocab_size=30522, num_hidden_layers=4, hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1)))
    proc = run_command([
        sys.executable, RUN_SQUAD, f"--vocab_file={VOCAB}",
        f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={root / 'teacher'}",
        "--do_train=true", f"--train_file={root / 'squad.json'}", f"--max_seq_length={SEQ}",
        *ANSWER_FLAGS, "--train_batch_size=8", "--num_train_epochs=3",
        "--learning_rate=3e-3", "--allow_random_weights=true", "--random_seed=4"],
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def _command(root, out, n_gpus, batch, **changes):
    flags = {"--teacher_dir": root / "teacher", "--output_dir": out, "--do_train": "true",
             "--do_predict": "false", "--student_num_layers": 2,
             "--train_batch_size": batch, "--n_gpus": n_gpus, "--num_train_epochs": 2,
             "--learning_rate": "1e-3", "--random_seed": 3, **changes}
    return [sys.executable, SCRIPT] + [f"{k}={v}" for k, v in flags.items()]


BAD_INPUT = [
    ({"--unlabeled_file": "{root}/squad.json"}, "--unlabeled_file is for a classifier teacher"),
    ({"--student_num_layers": 5}, "--student_num_layers=5 is larger than the teacher's 4"),
    ({"--minilm_value_weight": 1, "--minilm_relation_heads": 5},
     "--minilm_relation_heads=5 does not divide the hidden sizes 32 (student) and 32"),
]


@pytest.fixture(scope="module")
def runs(teacher):
    root = teacher
    jobs = {
        "good": _command(root, root / "good", 2, 4, **{
            "--do_predict": "true", "--do_eval": "true",
            "--predict_file": root / "squad.json", "--predict_batch_size": 3}),
        "one": _command(root, root / "one", 1, 8),
        "alpha0": _command(root, root / "alpha0", 1, 8, **{"--alpha": 0.0}),
        "temperature": _command(root, root / "temperature", 1, 8, **{"--temperature": 5.0}),
        "inner": _command(root, root / "inner", 1, 8, **{
            "--tinybert_hidden_weight": 1.0, "--minilm_attention_weight": 1.0}),
    }
    jobs = {key: lambda cmd=cmd: run_command(cmd, timeout=600) for key, cmd in jobs.items()}
    bad = [({k: str(v).format(root=root) for k, v in change.items()}, message)
           for change, message in BAD_INPUT]
    jobs.update(bad_input_jobs(_command(root, root / "bad", 1, 8), bad, root))
    with started(jobs) as futures:
        yield futures


def test_writes_a_run_squad_run_that_run_squad_predicts_with(runs, teacher, tmp_path):
    """The student's directory is a run_squad.py run (2 layers, the teacher's windows and
    answer flags, the official scores, predictions.json); run_squad.py --do_predict from its
    checkpoint and bert_config.json writes the same predictions.json."""
    proc = runs["good"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = teacher / "good"
    run = json.loads((out / "run_config.json").read_text())
    assert (run["doc_stride"], run["max_query_length"], run["n_best_size"],
            run["max_answer_length"], run["version_2_with_negative"]) == (12, 8, 5, 6, True)
    assert run["max_seq_length"] == SEQ and run["student_layer_map"] == [0, 2]
    assert run["train_file"] == str(teacher / "squad.json")
    assert json.loads((out / "bert_config.json").read_text())["num_hidden_layers"] == 2
    result = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text()
                  .splitlines())
    assert {"exact", "f1"} <= set(result)
    names = set(final_tensors(str(out)))
    assert "cls/squad/output_weights" in names and not any(
        n.startswith("bert/encoder/layer_2/") for n in names)
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 24
    proc = run_command([sys.executable, RUN_SQUAD, f"--vocab_file={VOCAB}",
                        f"--bert_config_file={out / 'bert_config.json'}",
                        f"--init_checkpoint={out}", f"--output_dir={tmp_path / 'predicted'}",
                        "--do_predict=true", f"--predict_file={teacher / 'squad.json'}",
                        f"--max_seq_length={SEQ}", *ANSWER_FLAGS])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "predicted" / "predictions.json").read_text()) == predictions


# The span head's bias adds one constant to every position's start (end) logit, which no
# softmax sees: its gradient is exactly 0 in both the soft-target and Google's loss, so what
# it moves is float noise divided by Adam's epsilon (1e-6), which differs with the towers'
# summation order. It is compared to ZERO_GRADIENT_ATOL (it stays that close to where it
# started); every other variable to 1e-5.
ZERO_GRADIENT = "cls/squad/output_bias"
ZERO_GRADIENT_ATOL = 2e-4


def _assert_same_weights(ours, expected):
    assert sorted(ours) == sorted(expected)
    for name in expected:
        atol = ZERO_GRADIENT_ATOL if name == ZERO_GRADIENT else 1e-5
        np.testing.assert_allclose(ours[name], expected[name], atol=atol, rtol=0, err_msg=name)


def test_two_towers_equal_one_device_with_dropout_on(runs, teacher):
    for key in ("good", "one"):
        assert runs[key].result().returncode == 0, runs[key].result().stderr[-3000:]
    two, one = final_tensors(str(teacher / "good")), final_tensors(str(teacher / "one"))
    _assert_same_weights(two, one)
    start = tf.train.load_checkpoint(str(teacher / "teacher")).get_tensor(ZERO_GRADIENT)
    np.testing.assert_allclose(one[ZERO_GRADIENT], start, atol=ZERO_GRADIENT_ATOL)


@pytest.mark.parametrize("key", ["alpha0", "temperature", "inner"])
def test_flags_act_through_the_script(runs, teacher, key):
    """--alpha=0, --temperature=5 and the inner losses, each the only change from the "one"
    run, end elsewhere."""
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


@pytest.mark.parametrize("padded_length", [None, 8])
def test_span_loss_by_hand_on_one_batch(padded_length):
    """DistillSpan's loss of a window = (T^2 * KL(teacher_T || student_T) over the starts + the
    same over the ends) / 2 + alpha * Google's span loss (numpy, from the two models' logits);
    with --pad_to_longest (`padded_length`) the padding is out of both softmaxes."""
    temperature, alpha = 2.0, 0.3
    config = dict(TINY_CONFIG, vocab_size=40, initializer_range=1.0)
    tf.random.set_seed(6)
    task = distill.DistillSpan(BertConfig.from_dict(dict(config, num_hidden_layers=1)),
                               BertConfig.from_dict(dict(config, num_hidden_layers=2)),
                               temperature, alpha, padded_length=padded_length)
    rng = np.random.RandomState(2)
    mask = np.ones((3, 8), np.int32)
    mask[1, 5:] = 0
    features = {"input_ids": tf.constant(rng.randint(1, 40, size=(3, 8)) * mask, tf.int32),
                "input_mask": tf.constant(mask), "segment_ids": tf.zeros((3, 8), tf.int32),
                "start_positions": tf.constant([[1], [2], [0]], tf.int32),
                "end_positions": tf.constant([[3], [4], [0]], tf.int32)}
    loss = task.per_example_loss(features, training=False).numpy()

    def logits(model):
        out = model.bert(features["input_ids"], features["input_mask"],
                         features["segment_ids"], training=False)
        span = model.span(out.sequence_output, input_mask=features["input_mask"]
                          if padded_length else None)
        return [span[k].numpy().astype(np.float64) for k in ("start_logits", "end_logits")]

    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    expected = np.zeros(3)
    for s, t, positions in zip(logits(task), logits(task.teacher),
                               ("start_positions", "end_positions")):
        log_t, log_s = log_softmax(t / temperature), log_softmax(s / temperature)
        kl = (np.exp(log_t) * (log_t - log_s)).sum(-1)
        assert kl.min() > 1e-4
        ce = -np.take_along_axis(log_softmax(s), features[positions].numpy(), -1)[:, 0]
        expected += (temperature ** 2 * kl + alpha * ce) / 2
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_sigkill_then_rerun_ends_with_the_same_weights(runs, teacher):
    """A 2 x 4 SQuAD student, killed with SIGKILL after its checkpoint at step 4 and rerun as
    1 x 8 (dropout 0.1): the final weights of the uninterrupted 2 x 4 run ("good"), to 1e-5
    (the span head's bias as `_assert_same_weights`)."""
    assert runs["good"].result().returncode == 0, runs["good"].result().stderr[-3000:]
    expected = final_tensors(str(teacher / "good"))
    steps = int(expected["global_step"])
    assert steps > 4
    killed = teacher / "killed"
    cmd = _command(teacher, killed, 2, 4, **{"--save_checkpoints_steps": 4})
    dying = Launched(cmd)
    # (published: killed once the state file names step 4, so the rerun must resume from it.)
    assert signal_at_checkpoint([(dying, str(killed), 4, signal.SIGKILL, 0.05)],
                                published=True)[0] is not None
    _, not_killed = finish_killed(dying, str(killed), steps)
    assert not_killed is None, not_killed
    rerun = run_command(_command(teacher, killed, 1, 8, **{"--save_checkpoints_steps": 4}),
                        timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resumed from" in rerun.stderr
    _assert_same_weights(final_tensors(str(killed)), expected)
