"""run_pretraining.py as users run it (dropout 0.1): resume after SIGKILL, signals, eval, errors,
two phases."""

import json
import os
import shutil
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, final_tensors, finish_killed, run_all, signal_at_checkpoint
from _oracle import REPO
from _pretraining_data import DROPOUT, write_config, write_records

SCRIPT = os.path.join(REPO, "run_pretraining.py")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rp")
    return {
        "config": write_config(d / "bert_config.json", **DROPOUT),
        "data": write_records(d / "train.tfrecord", 200, seed=5),
        "data32": write_records(d / "train32.tfrecord", 50, seed=6, seq=32, preds=5),
    }


def args(files, output_dir, steps=60, save_every=5, extra=()):
    return [sys.executable, SCRIPT, f"--bert_config_file={files['config']}",
            f"--input_file={files['data']}", f"--output_dir={output_dir}",
            "--max_seq_length=16", "--max_predictions_per_seq=4", "--do_train=true",
            "--train_batch_size=4", "--n_gpus=2", f"--num_train_steps={steps}",
            "--num_warmup_steps=3", "--learning_rate=1e-3",
            f"--save_checkpoints_steps={save_every}",
            "--log_every_n_steps=10", "--random_seed=11", *extra]


def run(cmd):
    return run_all([cmd])[0]


def assert_same_weights(ours, reference, step):
    assert sorted(ours) == sorted(reference)
    assert int(ours["global_step"]) == step
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=1e-5, rtol=0,
                                   err_msg=name)


@pytest.fixture(scope="module")
def uninterrupted(files, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("uninterrupted"))
    proc = run(args(files, out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_log_lines_and_saved_config(uninterrupted):
    out, proc = uninterrupted
    assert "Global batch = 8 (train_batch_size 4 x n_gpus 2 x accumulation 1 x workers 1)" \
        in proc.stderr
    step_lines = [line for line in proc.stderr.splitlines() if "step 60/60:" in line]
    assert step_lines and "masked_lm_loss = " in step_lines[0]
    assert "next_sentence_loss = " in step_lines[0] and "examples/s (global)" in step_lines[0]
    assert "lr = " in step_lines[0] and "ETA" in step_lines[0]
    saved = json.load(open(os.path.join(out, "run_config.json")))
    assert saved["n_gpus"] == 2 and saved["train_batch_size"] == 4
    assert json.load(open(os.path.join(out, "bert_config.json")))["hidden_size"] == 32
    names = set(final_tensors(out))
    assert {"global_step", "bert/embeddings/word_embeddings/adam_m",
            "cls/predictions/output_bias/adam_v"} <= names


TOPOLOGIES = [(), ("--n_gpus=1", "--train_batch_size=8"),
              ("--n_gpus=1", "--num_accumulation_steps=2")]


def rerun_topology(topology):
    """The split a run killed with `topology` is rerun with: the next one (2 towers -> 1 tower
    x 8 -> 1 tower x 4 x 2 micro-batches -> 2 towers), the same global batch of 8."""
    return TOPOLOGIES[(TOPOLOGIES.index(topology) + 1) % len(TOPOLOGIES)]


@pytest.fixture(scope="module")
def killed_and_resumed(files, tmp_path_factory):
    """Per topology: (when it was killed, or None if it ended first; None if the kill landed
    (`finish_killed`), else what went wrong; the rerun with rerun_topology; its output_dir).
    The three runs are killed, then rerun, side by side."""
    outs = [str(tmp_path_factory.mktemp("killed")) for _ in TOPOLOGIES]
    killed = [Launched(args(files, out, extra=t)) for out, t in zip(outs, TOPOLOGIES)]
    # Somewhere after step 20: maybe mid-step, maybe mid-save.
    killed_at = signal_at_checkpoint([(k, out, 20, signal.SIGKILL, 0.05)
                                      for k, out in zip(killed, outs)])
    not_killed = [finish_killed(k, out, 60)[1] for k, out in zip(killed, outs)]
    resumed = run_all([args(files, out, extra=rerun_topology(t))
                       for out, t in zip(outs, TOPOLOGIES)])
    return list(zip(killed_at, not_killed, resumed, outs))


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_sigkill_then_rerun_ends_with_the_same_weights(killed_and_resumed, uninterrupted,
                                                        topology):
    """Killed with dropout on, then rerun on another split of the same global batch of 8: the
    same weights as the uninterrupted run (2 towers x 4). Killed and rerun runs split it as 2
    towers x 4, 1 tower x 8 and 1 tower x 4 x 2 micro-batches (a kill, then a rerun with 1 tower
    instead of 2, among them): dropout masks follow the example's position, so that changes
    nothing."""
    killed_at, not_killed, resumed, out = killed_and_resumed[TOPOLOGIES.index(topology)]
    assert killed_at is not None, "the run ended before it could be killed"
    assert not_killed is None, not_killed
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from" in resumed.stderr and "Input position restored" in resumed.stderr
    assert_same_weights(final_tensors(out), final_tensors(uninterrupted[0]), 60)


SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.fixture(scope="module")
def signalled(files, tmp_path_factory):
    """Per signal: (when it was sent, or None if the run ended first; the run; its
    output_dir). The runs run side by side."""
    outs = [str(tmp_path_factory.mktemp("signalled")) for _ in SIGNALS]
    runs = [Launched(args(files, out, steps=400, save_every=10)) for out in outs]
    signalled_at = signal_at_checkpoint([(r, out, 10, sig, 0)
                                         for r, out, sig in zip(runs, outs, SIGNALS)])
    return list(zip(signalled_at, (r.finish(120) for r in runs), outs))


@pytest.mark.parametrize("sig", SIGNALS)
def test_signal_checkpoints_and_exits_cleanly(signalled, sig):
    signalled_at, proc, out = signalled[SIGNALS.index(sig)]
    assert signalled_at is not None, "the run ended before the signal"
    stderr = proc.stderr
    assert proc.returncode == 0, stderr[-3000:]
    name = signal.Signals(sig).name
    assert f"Received {name}" in stderr and f"Stopped by {name} at global_step" in stderr
    stopped_at = int(stderr.split(f"Stopped by {name} at global_step ")[1].split(";")[0])
    assert 10 <= stopped_at < 400
    assert tf.train.latest_checkpoint(out).endswith(f"model.ckpt-{stopped_at}")


@pytest.fixture(scope="module")
def side_runs(files, uninterrupted, tmp_path_factory):
    """Three runs side by side (none writes what another reads), by name: "eval" (eval only, on
    the uninterrupted run's output_dir), "phase2" (from its checkpoint, at length 32) and
    "cramming" (Cramming's model and trainer options); each (run, output_dir)."""
    d = tmp_path_factory.mktemp("side")
    eval_cmd = [a for a in args(files, uninterrupted[0]) if not a.startswith("--do_train")] + [
        "--do_eval=true", "--eval_batch_size=16", "--max_eval_steps=3", "--use_tpu=false"]
    phase2 = str(d / "phase2")
    phase2_cmd = args(files, phase2, steps=3, extra=[f"--init_checkpoint={uninterrupted[0]}"])
    phase2_cmd = [a.replace(files["data"], files["data32"]) for a in phase2_cmd]
    phase2_cmd = [a for a in phase2_cmd
                  if not a.startswith(("--max_seq_length", "--max_predictions"))]
    # --verbose: Google's variable list, which the test reads.
    phase2_cmd += ["--max_seq_length=32", "--max_predictions_per_seq=5", "--verbose"]
    cramming = str(d / "cramming")
    config = write_config(d / "cramming_config.json", pre_layer_norm=True,
                          use_bias=False, position_embedding_type="scaled_sinusoidal",
                          gated_ffn=True, intermediate_size=36)
    cramming_flags = [
        "--no_next_sentence", "--lr_schedule=one_cycle", "--num_accumulation_steps=2",
        "--batch_ramp_steps=3", "--clip_norm=0.5", "--indexed_slices_norm=values",
        "--do_eval=true", "--max_eval_steps=2"]
    cramming_cmd = [a.replace(files["config"], config)
                    for a in args(files, cramming, steps=6, extra=cramming_flags)]
    runs = run_all([eval_cmd, phase2_cmd, cramming_cmd])
    return dict(zip(("eval", "phase2", "cramming"),
                    zip(runs, (uninterrupted[0], phase2, cramming))))


def test_eval_only_writes_googles_eval_results(side_runs):
    proc, out = side_runs["eval"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--use_tpu is accepted for compatibility" in proc.stderr
    lines = open(os.path.join(out, "eval_results.txt")).read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss"]
    assert lines[0] == "global_step = 60"


def test_two_phase_128_then_512_style(side_runs, uninterrupted):
    """Phase 2 at a longer length starts from phase 1's checkpoint (Google's recipe)."""
    proc, out = side_runs["phase2"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "*INIT_FROM_CKPT*" in proc.stderr
    phase1, phase2 = final_tensors(uninterrupted[0]), final_tensors(out)
    assert int(phase2["global_step"]) == 3
    # Warmup step 0 has LR 0, so after 3 steps the weights moved from phase 1's, not from random.
    diff = np.abs(phase2["bert/encoder/layer_0/output/dense/kernel"]
                  - phase1["bert/encoder/layer_0/output/dense/kernel"]).max()
    assert 0 < diff < 0.05
    # A fresh optimizer (README): Adam's second moments start from 0, so after 3 updates they
    # hold ~1 - 0.999^3 of a gradient's square, where phase 1's 60 updates hold ~1 - 0.999^60
    # (20 times as much); continued slots would keep phase 1's sum (ratio ~1).
    second_moments = [n for n in phase1 if n.endswith("/adam_v")]
    assert second_moments and sorted(second_moments) == sorted(
        n for n in phase2 if n.endswith("/adam_v"))
    ratio = sum(float(phase2[n].sum()) for n in second_moments) / \
        sum(float(phase1[n].sum()) for n in second_moments)
    assert ratio < 0.3, ratio


def test_cramming_trainer_flags_and_masked_lm_only(side_runs):
    """--no_next_sentence (no NSP head), --lr_schedule=one_cycle, --batch_ramp_steps with
    accumulation, --clip_norm and --indexed_slices_norm through the script, with a Cramming
    bert_config.json."""
    proc, out = side_runs["cramming"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Batch ramp: accumulation grows from 1 to 2 over 3 steps" in proc.stderr
    names = set(final_tensors(out))
    assert not any(n.startswith("cls/seq_relationship") for n in names)
    assert "bert/embeddings/position_embedding_scale" in names
    assert "bert/encoder/LayerNorm/gamma" in names
    lines = open(os.path.join(out, "eval_results.txt")).read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    saved = json.load(open(os.path.join(out, "run_config.json")))
    assert saved["lr_schedule"] == "one_cycle" and saved["clip_norm"] == 0.5
    assert saved["batch_ramp_steps"] == 3 and saved["no_next_sentence"] is True
    assert saved["indexed_slices_norm"] == "values"


def test_rerun_with_another_batch_under_a_batch_ramp_is_one_line(side_runs, tmp_path):
    """README: another global batch resumes only without --batch_ramp_steps (and on one
    worker); with the ramp a one-line error asks for the old batch, and the run is untouched."""
    proc, out = side_runs["cramming"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = str(tmp_path / "cramming")
    shutil.copytree(out, copy)
    cmd = [{f"--output_dir={out}": f"--output_dir={copy}",
            "--train_batch_size=4": "--train_batch_size=2",
            "--num_train_steps=6": "--num_train_steps=8"}.get(a, a) for a in proc.args]
    assert {f"--output_dir={copy}", "--train_batch_size=2", "--num_train_steps=8"} <= set(cmd)
    before = sorted(os.listdir(copy))
    rerun = run(cmd)
    assert rerun.returncode == 1, rerun.stderr[-3000:]
    last = rerun.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining.py: ERROR: ") and \
        "the checkpoint at step 6 was trained with input batches of 8" in last and \
        "without --batch_ramp_steps and with one --task_name: rerun with the same " \
        "--train_batch_size" in last, last
    assert sorted(os.listdir(copy)) == before
    assert tf.train.latest_checkpoint(copy).endswith("model.ckpt-6")


BAD_INPUTS = [
    ({"--max_seq_length": "128"}, "--max_seq_length=128 is longer than max_position_embeddings"),
    ({"--max_seq_length": "32"}, "'input_ids' has length 16 but --max_seq_length=32"),
    ({"--input_file": "/nonexistent/*.tfrecord"}, "--input_file: no file matches"),
    ({"--do_train": "false"}, "At least one of `do_train` or `do_eval` must be True."),
    ({"--n_gpus": "0"}, "--n_gpus must be >= 1"),
]


@pytest.fixture(scope="module")
def bad_runs(files, tmp_path_factory):
    """Every BAD_INPUTS case run, side by side."""
    cmds = []
    for change, _ in BAD_INPUTS:
        cmd = args(files, str(tmp_path_factory.mktemp("bad")))
        for flag, value in change.items():
            cmd = [f"{flag}={value}" if a.startswith(flag + "=") else a for a in cmd]
        cmds.append(cmd)
    return run_all(cmds)


@pytest.mark.parametrize("change,message", BAD_INPUTS)
def test_bad_input_is_one_line(bad_runs, change, message):
    proc = bad_runs[BAD_INPUTS.index((change, message))]
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining.py: ERROR: ") and message in last, last


def test_rerun_with_another_global_batch(files, tmp_path):
    """10 steps of 8 examples, then reruns with 4 per step (--n_gpus=1): the run continues at
    example 80 as global_step 20. Going on from there in one run or in two (killed after the
    checkpoint at 25, then rerun) ends with the same weights: the repositioned input resumes
    exactly. (The 10 steps run once; "two" starts from a copy of their output_dir.)"""
    smaller = ("--n_gpus=1", "--train_batch_size=4")
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    first = run(args(files, one, steps=10))
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.copytree(one, two)
    one_run = Launched(args(files, one, steps=30, extra=smaller))
    half = Launched(args(files, two, steps=30, extra=smaller))
    # Published: the rerun must resume from step 25's own input position, not reposition again.
    killed_at = signal_at_checkpoint([(half, two, 25, signal.SIGKILL, 0)], published=True)[0]
    assert killed_at is not None, "the run ended before it could be killed"
    _, not_killed = finish_killed(half, two, 30)
    assert not_killed is None, not_killed
    rest = run(args(files, two, steps=30, extra=smaller))
    one_run = one_run.finish()
    assert one_run.returncode == 0, one_run.stderr[-3000:]
    assert "continuing at example 80 of the input" in one_run.stderr
    assert "global_step 10 -> 20" in one_run.stderr
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert "Input position restored" in rest.stderr
    reference = final_tensors(one)
    assert int(reference["global_step"]) == 30
    assert_same_weights(final_tensors(two), reference, 30)
