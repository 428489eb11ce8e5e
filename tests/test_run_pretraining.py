"""run_pretraining.py as users run it (dropout 0.1): resume after SIGKILL, signals, eval, errors,
two phases."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

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
            "--num_warmup_steps=3", "--learning_rate=1e-3", f"--save_checkpoints_steps={save_every}",
            "--log_every_n_steps=10", "--random_seed=11", *extra]


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def start_and_wait_for_checkpoint(cmd, output_dir, step, timeout=120):
    """Starts the script and returns (process, True) once model.ckpt-STEP exists."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    deadline = time.time() + timeout
    target = os.path.join(output_dir, f"model.ckpt-{step}.index")
    while time.time() < deadline and proc.poll() is None and not os.path.exists(target):
        time.sleep(0.02)
    return proc


def final_tensors(output_dir):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


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


@pytest.mark.parametrize("topology", [
    (), ("--n_gpus=1", "--train_batch_size=8"),
    ("--n_gpus=1", "--num_accumulation_steps=2")])
def test_sigkill_then_rerun_ends_with_the_same_weights(files, tmp_path, uninterrupted, topology):
    """Killed with dropout on, then rerun: the same weights as the uninterrupted run (2 towers x
    4). The killed run also splits the global batch of 8 otherwise (1 tower x 8, 1 tower x 4 x 2
    micro-batches): dropout masks follow the example's position, so that changes nothing."""
    out = str(tmp_path / "killed")
    proc = start_and_wait_for_checkpoint(args(files, out, extra=topology), out, 20)
    assert proc.poll() is None, "the run ended before it could be killed"
    time.sleep(0.05)  # somewhere after step 20: maybe mid-step, maybe mid-save
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = run(args(files, out, extra=topology))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from" in resumed.stderr and "Input position restored" in resumed.stderr
    ours, reference = final_tensors(out), final_tensors(uninterrupted[0])
    assert sorted(ours) == sorted(reference)
    assert int(ours["global_step"]) == 60
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=1e-5, rtol=0,
                                   err_msg=name)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_checkpoints_and_exits_cleanly(files, tmp_path, sig):
    out = str(tmp_path / "signalled")
    proc = start_and_wait_for_checkpoint(args(files, out, steps=400, save_every=10), out, 10)
    assert proc.poll() is None
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    name = signal.Signals(sig).name
    assert f"Received {name}" in stderr and f"Stopped by {name} at global_step" in stderr
    stopped_at = int(stderr.split(f"Stopped by {name} at global_step ")[1].split(";")[0])
    assert 10 <= stopped_at < 400
    assert tf.train.latest_checkpoint(out).endswith(f"model.ckpt-{stopped_at}")


def test_eval_only_writes_googles_eval_results(files, uninterrupted, tmp_path):
    out = uninterrupted[0]
    cmd = [a for a in args(files, out) if not a.startswith("--do_train")] + [
        "--do_eval=true", "--eval_batch_size=16", "--max_eval_steps=3", "--use_tpu=false"]
    proc = run(cmd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--use_tpu is accepted for compatibility" in proc.stderr
    lines = open(os.path.join(out, "eval_results.txt")).read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss"]
    assert lines[0] == "global_step = 60"


def test_two_phase_128_then_512_style(files, tmp_path, uninterrupted):
    """Phase 2 at a longer length starts from phase 1's checkpoint (Google's recipe)."""
    out = str(tmp_path / "phase2")
    cmd = args(files, out, steps=3, extra=[f"--init_checkpoint={uninterrupted[0]}"])
    cmd = [a.replace(files["data"], files["data32"]) for a in cmd]
    cmd = [a for a in cmd if not a.startswith(("--max_seq_length", "--max_predictions"))]
    proc = run(cmd + ["--max_seq_length=32", "--max_predictions_per_seq=5"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "*INIT_FROM_CKPT*" in proc.stderr
    phase1, phase2 = final_tensors(uninterrupted[0]), final_tensors(out)
    assert int(phase2["global_step"]) == 3
    # Warmup step 0 has LR 0, so after 3 steps the weights moved from phase 1's, not from random.
    diff = np.abs(phase2["bert/encoder/layer_0/output/dense/kernel"]
                  - phase1["bert/encoder/layer_0/output/dense/kernel"]).max()
    assert 0 < diff < 0.05


def test_cramming_trainer_flags_and_masked_lm_only(files, tmp_path):
    """--no_next_sentence (no NSP head), --lr_schedule=one_cycle, --batch_ramp_steps with
    accumulation, --clip_norm and --indexed_slices_norm through the script, with a Cramming bert_config.json."""
    out = str(tmp_path / "cramming")
    config = write_config(tmp_path / "cramming_config.json", pre_layer_norm=True,
                          use_bias=False, position_embedding_type="scaled_sinusoidal",
                          gated_ffn=True, intermediate_size=36)
    cmd = [a.replace(files["config"], config) for a in args(files, out, steps=6, extra=[
        "--no_next_sentence", "--lr_schedule=one_cycle", "--num_accumulation_steps=2",
        "--batch_ramp_steps=3", "--clip_norm=0.5", "--indexed_slices_norm=values",
        "--do_eval=true", "--max_eval_steps=2"])]
    proc = run(cmd)
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


@pytest.mark.parametrize("change,message", [
    ({"--max_seq_length": "128"}, "--max_seq_length=128 is longer than max_position_embeddings"),
    ({"--max_seq_length": "32"}, "'input_ids' has length 16 but --max_seq_length=32"),
    ({"--input_file": "/nonexistent/*.tfrecord"}, "--input_file: no file matches"),
    ({"--do_train": "false"}, "At least one of `do_train` or `do_eval` must be True."),
    ({"--n_gpus": "0"}, "--n_gpus must be >= 1"),
])
def test_bad_input_is_one_line(files, tmp_path, change, message):
    cmd = args(files, str(tmp_path / "bad"))
    for flag, value in change.items():
        cmd = [f"{flag}={value}" if a.startswith(flag + "=") else a for a in cmd]
    proc = run(cmd)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining.py: ERROR: ") and message in last, last


def test_rerun_with_another_global_batch(files, tmp_path):
    """10 steps of 8 examples, then reruns with 4 per step (--n_gpus=1): the run continues at
    example 80 as global_step 20. Going on from there in one run or in two (killed after the
    checkpoint at 25, then rerun) ends with the same weights: the repositioned input resumes
    exactly."""
    smaller = ("--n_gpus=1", "--train_batch_size=4")
    for name in ("one", "two"):
        first = run(args(files, str(tmp_path / name), steps=10))
        assert first.returncode == 0, first.stderr[-3000:]
    one = run(args(files, str(tmp_path / "one"), steps=30, extra=smaller))
    assert one.returncode == 0, one.stderr[-3000:]
    assert "continuing at example 80 of the input" in one.stderr
    assert "global_step 10 -> 20" in one.stderr
    two = str(tmp_path / "two")
    half = start_and_wait_for_checkpoint(args(files, two, steps=30, extra=smaller), two, 25)
    assert half.poll() is None, "the run ended before it could be killed"
    half.send_signal(signal.SIGKILL)
    half.wait()
    rest = run(args(files, two, steps=30, extra=smaller))
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert "Input position restored" in rest.stderr
    ours, reference = final_tensors(str(tmp_path / "two")), final_tensors(str(tmp_path / "one"))
    assert int(ours["global_step"]) == int(reference["global_step"]) == 30
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=1e-5, rtol=0,
                                   err_msg=name)
