"""Evaluation during training: history, best checkpoint (kept after pruning), early stopping,
resume of the best value and the patience counter; and the script end to end."""

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, REPO, run_oracle_script_inline
from _pretraining_data import TINY_CONFIG
from _together import started_in

from bert_mgpu.engine import evaluation

SCRIPT = os.path.join(REPO, "run_classifier_mgpu.py")
VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")


class FakeTrainer:
    """A trainer's part in evaluation during training: cfg.num_train_steps, variables and
    evaluate() (here a given accuracy per call)."""

    def __init__(self, accuracies, num_train_steps=100):
        self.cfg = type("Cfg", (), {"num_train_steps": num_train_steps})()
        self.variables = {"bert/w": tf.Variable(np.zeros([2], np.float32))}
        self.accuracies = list(accuracies)
        self.calls = 0

    def evaluate(self, _dataset):
        accuracy = self.accuracies[self.calls]
        self.calls += 1
        return {"eval_accuracy": accuracy, "eval_loss": 1.0 - accuracy, "global_step": 0}


def periodic(trainer, output_dir, every_n_steps, **kwargs):
    """The evaluator a job builds (engine/job.py: Job.periodic_evaluator) around `trainer`."""
    return evaluation.PeriodicEvaluator(lambda: trainer.evaluate(None), trainer.variables,
                                        trainer.cfg.num_train_steps, output_dir, every_n_steps,
                                        **kwargs)


def drive(evaluator, trainer, steps):
    """Calls the evaluator after updates `steps`, with weights = the step (to see which step the
    best checkpoint holds); returns the step it asked to stop at, or None."""
    for step in steps:
        trainer.variables["bert/w"].assign([step, step])
        if evaluator(step, {"loss": tf.constant(0.5)}):
            return step
    return None


def test_direction_of_metrics():
    assert evaluation.lower_is_better("eval_loss") and evaluation.lower_is_better("eval_mse")
    assert not evaluation.lower_is_better("eval_accuracy")
    assert not evaluation.lower_is_better("eval_f1_macro")


def test_best_checkpoint_history_and_early_stopping(tmp_path):
    # Evaluations every 5 steps: best 0.6 at step 10, then 3 without improvement -> stop at 25.
    trainer = FakeTrainer([0.5, 0.6, 0.55, 0.6, 0.59, 0.9])
    ev = periodic(trainer, str(tmp_path), 5, keep_best=True, patience=3)
    assert drive(ev, trainer, range(1, 40)) == 25
    history = evaluation.read_history(str(tmp_path))
    assert [r["step"] for r in history] == [5, 10, 15, 20, 25]
    assert [r["eval_accuracy"] for r in history] == [0.5, 0.6, 0.55, 0.6, 0.59]
    # The best is the first maximum of the history (a tie is not an improvement).
    best = evaluation.best_checkpoint(str(tmp_path))
    assert best.endswith(os.path.join("best", "model.ckpt-10"))
    np.testing.assert_array_equal(tf.train.load_checkpoint(best).get_tensor("bert/w"), [10, 10])
    assert "eval_accuracy = 0.6" in (tmp_path / "best_eval_results.txt").read_text()
    # TensorBoard scalars of the eval run beside the training ones: every metric of every
    # evaluation, at its step.
    events = tf.io.gfile.glob(str(tmp_path / "eval" / "events.out.tfevents.*"))
    assert events
    scalars = {}
    for path in events:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = \
                    float(tf.make_ndarray(value.tensor))
    for key in ("eval_accuracy", "eval_loss"):
        assert scalars[key] == pytest.approx({r["step"]: r[key] for r in history}), key


def test_a_lower_is_better_metric_and_no_stop_at_the_last_step(tmp_path):
    trainer = FakeTrainer([0.5, 0.7, 0.6], num_train_steps=3)
    ev = periodic(trainer, str(tmp_path), 1, best_metric="eval_loss", keep_best=True,
                  patience=1)
    assert drive(ev, trainer, [1, 2, 3]) is None  # step 3 is the last: nothing to stop
    assert evaluation.best_checkpoint(str(tmp_path)).endswith("model.ckpt-2")


def test_resume_continues_the_best_and_the_patience_exactly(tmp_path):
    """Killed at step 23 after evaluating at 5..20 (checkpoint at 20): the rerun drops nothing
    it needs, keeps best 0.6 at step 10 with 2 evaluations since, and stops at 25 as the
    uninterrupted run does."""
    first = FakeTrainer([0.5, 0.6, 0.55, 0.6, 0.7])
    ev = periodic(first, str(tmp_path), 5, keep_best=True, patience=3)
    assert drive(ev, first, range(1, 24)) is None
    # A rerun from the checkpoint at step 15: the row of step 20 is dropped, then recomputed.
    rerun = FakeTrainer([0.6, 0.59])
    ev = periodic(rerun, str(tmp_path), 5, keep_best=True, patience=3)
    assert drive(ev, rerun, range(16, 40)) == 25
    assert [r["step"] for r in evaluation.read_history(str(tmp_path))] == [5, 10, 15, 20, 25]
    assert ev.best.step == 10 and ev.best.since == 3


def test_unknown_best_metric_is_named(tmp_path):
    ev = periodic(FakeTrainer([0.5]), str(tmp_path), 1, best_metric="eval_f2")
    with pytest.raises(ValueError, match="--best_metric=eval_f2 is not an evaluation result"):
        ev(1, {"loss": 0.0})


@pytest.fixture(scope="module")
def tsv_data(tmp_path_factory):
    rng = np.random.RandomState(3)
    root = tmp_path_factory.mktemp("evaltsv")
    (root / "data").mkdir()

    def rows(n):
        out = []
        for _ in range(n):
            label = rng.randint(2)
            words = ["good", "great", "fun"] if label else ["bad", "boring", "terrible"]
            out.append(f"the movie was {' '.join(rng.choice(words, size=2))}\t{label}")
        return "sentence\tlabel\n" + "\n".join(out) + "\n"

    for name, n in (("train", 96), ("dev", 20), ("test", 20)):
        (root / "data" / f"{name}.tsv").write_text(rows(n))
    (root / "bert_config.json").write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522)))
    return root


def run_script(root, out, *extra):
    cmd = [sys.executable, SCRIPT, "--task_name=tsv", f"--data_dir={root / 'data'}",
           f"--vocab_file={VOCAB}", f"--bert_config_file={root / 'bert_config.json'}",
           f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
           "--max_seq_length=16", "--train_batch_size=4", "--n_gpus=2", "--num_train_epochs=3",
           "--eval_batch_size=8", "--log_every_n_steps=100", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def one_class_checkpoint(path):
    """An init checkpoint whose classifier gives every input the logits [0.001, 0], as a
    collapsed run ends: class 0 ("0") predicted for every example at probability 0.50025, the
    loss ln 2 whatever the label (output weights 0; the encoder's seeded initialisation)."""
    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.classifier import BertClassifier
    tf.random.set_seed(8)
    task = BertClassifier(BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=30522)), 2)
    task.classifier.output_weights.assign(tf.zeros_like(task.classifier.output_weights))
    task.classifier.output_bias.assign([0.001, 0.0])
    return checkpoint.write_bundle(str(path), task.named_variables())


@pytest.fixture(scope="module")
def scripts(tsv_data, tmp_path_factory):
    """The script runs of the tests below, independent of each other: started together.

    Yields: {key: Future of (CompletedProcess, --output_dir)}.
    """
    collapsed_init = one_class_checkpoint(tmp_path_factory.mktemp("init") / "bert_model.ckpt")
    with started_in(tmp_path_factory.mktemp("runs"), {
        "best": lambda out: run_script(tsv_data, out, "--learning_rate=1e-3",
                                       "--eval_every_n_steps=6", "--keep_best_checkpoint",
                                       "--keep_checkpoint_max=1", "--save_checkpoints_steps=6"),
        # A learning rate too small to change any prediction: no improvement after the first.
        "early": lambda out: run_script(tsv_data, out, "--learning_rate=1e-9",
                                        "--eval_every_n_steps=3", "--early_stopping_patience=2"),
        "companions": lambda out: run_script(tsv_data, out, "--keep_best_checkpoint"),
        # A run that learns (the mean of the last layer; the pooler does not learn this from
        # scratch in 36 updates), evaluated every 12 updates.
        "healthy": lambda out: run_script(tsv_data, out, "--learning_rate=5e-3",
                                          "--classifier_input=mean", "--eval_every_n_steps=12"),
        # A constructed collapse (issue 34): weights that predict one class, a learning rate
        # that cannot change that, Google's optimizer.
        "collapsed": lambda out: run_script(tsv_data, out, f"--init_checkpoint={collapsed_init}",
                                            "--learning_rate=1e-9",
                                            "--adam_bias_correction=false"),
    }) as runs:
        yield runs


def predict_only(root, out, init_checkpoint):
    """--do_predict alone, from `init_checkpoint` (a fresh --output_dir: nothing to resume)."""
    cmd = [sys.executable, SCRIPT, "--task_name=tsv", f"--data_dir={root / 'data'}",
           f"--vocab_file={VOCAB}", f"--bert_config_file={root / 'bert_config.json'}",
           f"--output_dir={out}", "--do_predict", f"--init_checkpoint={init_checkpoint}",
           "--max_seq_length=16", "--n_gpus=2"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def probabilities(out):
    return np.loadtxt(str(out / "test_results.tsv"), delimiter="\t", ndmin=2)


def test_script_keeps_the_best_checkpoint_after_pruning_and_predicts_with_it(scripts, tsv_data,
                                                                             tmp_path):
    """The best step is not the last one; test_results.tsv equals a --do_predict run from
    best/model.ckpt-N and differs from one from the final weights."""
    proc, out = scripts["best"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    history = evaluation.read_history(str(out))
    assert [r["step"] for r in history] == [6, 12, 18, 24, 30, 36]  # 36 steps, every 6
    accuracies = [r["eval_accuracy"] for r in history]
    best_step = history[int(np.argmax(accuracies))]["step"]
    assert best_step < 36  # else the best weights would be the final ones
    best = evaluation.best_checkpoint(str(out))
    assert best.endswith(f"model.ckpt-{best_step}")
    # Pruning kept one checkpoint in output_dir; the best survives in best/.
    final = tf.io.gfile.glob(str(out / "model.ckpt-*.index"))
    assert [os.path.basename(p) for p in final] == ["model.ckpt-36.index"]
    assert "Predicting with the best checkpoint" in proc.stderr
    assert len((out / "predict.txt").read_text().splitlines()) == 20
    with started_in(tmp_path, {
            "from_best": lambda o: predict_only(tsv_data, o, best),
            "from_final": lambda o: predict_only(tsv_data, o, str(out / "model.ckpt-36"))}) \
            as runs:
        (from_best, best_out), (from_final, final_out) = (runs[k].result()
                                                          for k in ("from_best", "from_final"))
    for run in (from_best, from_final):
        assert run.returncode == 0, run.stderr[-3000:]
    ours = probabilities(out)
    assert ours.shape == (20, 2)
    np.testing.assert_allclose(ours, probabilities(best_out), atol=1e-6, rtol=0)
    assert np.abs(ours - probabilities(final_out)).max() > 1e-4


def test_export_of_a_run_serves_the_checkpoint_its_predictions_came_from(scripts, tsv_data):
    """The run's closing summary (best step, checkpoint, next command) and its next command,
    run as printed: export_saved_model.py --output_dir of a --keep_best_checkpoint run exports
    the kept best model (not the latest, model.ckpt-36) and says so: raw test sentences through
    the SavedModel give the run's test_results.tsv."""
    import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)
    proc, out = scripts["best"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    best = evaluation.best_checkpoint(str(out))
    assert not best.endswith("model.ckpt-36")
    # The run's summary names that checkpoint and the export command, run here as printed.
    summary = proc.stderr[proc.stderr.index("== run_classifier_mgpu.py finished in "):]
    best_step = int(best.rsplit("-", 1)[1])
    assert re.search(rf"^  best: +eval_accuracy = [01]\.\d{{4}} at step {best_step} of 6 "
                     rf"evaluations \(eval_history\.tsv\)$", summary, re.M), summary
    assert f"  checkpoint: best/model.ckpt-{best_step}: the best checkpoint " \
           f"(--keep_best_checkpoint), used by predict and export\n" in summary, summary
    next_command = re.search(r"^  next: +(.*)$", summary, re.M).group(1)
    assert next_command == f"python export_saved_model.py --output_dir={out} " \
                           f"--export_dir={out / 'export'}", summary
    export = subprocess.run(
        [sys.executable, os.path.join(REPO, "export_saved_model.py"),
         *shlex.split(next_command)[2:]], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert export.returncode == 0, export.stderr[-3000:]
    assert f"Exporting the best checkpoint (--keep_best_checkpoint) of the run: {best} " \
           f"(--init_checkpoint chooses another)" in export.stderr, export.stderr[-3000:]
    model = tf.saved_model.load(str(out / "export" / "1"))
    sentences = [line.split("\t")[0] for line in
                 (tsv_data / "data" / "test.tsv").read_text().splitlines()[1:]]
    served = model.signatures["serving_default"](text_a=tf.constant(sentences))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities(out), atol=1e-5,
                               rtol=0)


def test_a_rerun_with_other_values_says_it_resumes_the_run_and_what_differs(scripts, tsv_data,
                                                                            tmp_path):
    """--output_dir holding a run: a rerun with another --learning_rate (and --n_gpus) gets one
    warning naming the run's checkpoint and each differing value; a rerun with the same values
    (a resume after a kill) gets none. Both on copies of the "best" run."""
    proc, out = scripts["best"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recorded with other values" not in proc.stderr  # a fresh --output_dir
    same = ["--learning_rate=1e-3", "--eval_every_n_steps=6", "--keep_best_checkpoint",
            "--keep_checkpoint_max=1", "--save_checkpoints_steps=6"]
    runs = {}
    for name, extra in (("same", same), ("other", same[1:] + ["--learning_rate=2e-3"])):
        copy = tmp_path / name
        shutil.copytree(out, copy)
        runs[name] = run_script(tsv_data, copy, *extra,
                                *(["--n_gpus=1"] if name == "other" else []))
    for run in runs.values():
        assert run.returncode == 0, run.stderr[-3000:]
    assert "recorded with other values" not in runs["same"].stderr
    warnings = [line for line in runs["other"].stderr.splitlines()
                if "recorded with other values" in line]
    assert len(warnings) == 1, runs["other"].stderr[-3000:]
    assert warnings[0].endswith(
        f"--output_dir={tmp_path / 'other'} holds a run (model.ckpt-36) recorded with other "
        f"values: this resumes that run, differing in --learning_rate 0.001 -> 0.002, --n_gpus "
        f"2 -> 1; a new run needs another --output_dir"), warnings[0]


def test_the_variable_list_is_shown_with_verbose_only(scripts):
    """A run from --init_checkpoint without --verbose: the one-line count of what the checkpoint
    initialised, not Google's `**** Trainable Variables ****` list (test_run_squad.py and
    test_run_pretraining.py read the list with --verbose)."""
    proc, _ = scripts["collapsed"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"Initialised (\d+) of \1 variables from ", proc.stderr), proc.stderr[-3000:]
    assert "Trainable Variables" not in proc.stderr and "INIT_FROM_CKPT" not in proc.stderr


PLOT = """
import json, sys
sys.path.insert(0, REPO)
from bert_mgpu.engine import evaluation
import matplotlib.image
history = evaluation.read_history(OUT)
path = evaluation.plot_curve(PLOT_DIR, history, "eval_accuracy")
pixels = matplotlib.image.imread(path)[..., :3]
def near(rgb):  # pixels of a line colour
    return int((abs(pixels - [c / 255 for c in rgb]).max(axis=-1) < 0.1).sum())
print(json.dumps({"metric": near((31, 119, 180)), "loss": near((214, 39, 40)),
                  "shape": list(pixels.shape)}))
"""


def test_eval_history_has_the_training_loss_and_the_curve_plots_both(scripts, tmp_path):
    """eval_history.tsv has `train_loss` (the update's loss) beside the metrics; eval_curve.png
    is written when matplotlib is importable (it is not a dependency: checked with the oracle
    venv's matplotlib on the run's history): the dev metric (blue) and the loss (red)."""
    proc, out = scripts["best"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    history = evaluation.read_history(str(out))
    assert all(np.isfinite(r["train_loss"]) and r["train_loss"] > 0 for r in history)
    header = (out / "eval_history.tsv").read_text().splitlines()[0].split("\t")
    assert header[:2] == ["step", "train_loss"] and "eval_accuracy" in header
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert (out / evaluation.CURVE_FILE).exists() == has_matplotlib
    code = f"REPO, OUT, PLOT_DIR = {json.dumps([REPO, str(out), str(tmp_path)])}\n{PLOT}"
    drawn = json.loads(run_oracle_script_inline(code, timeout=180) or "null")
    assert drawn is not None, "the oracle venv could not plot the curve"
    assert drawn["shape"][0] > 200 and drawn["metric"] > 100 and drawn["loss"] > 100, drawn


def test_script_stops_early_and_exits_0(scripts):
    proc, out = scripts["early"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Early stopping at step 9" in proc.stderr
    assert [r["step"] for r in evaluation.read_history(str(out))] == [3, 6, 9]
    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-9")


def test_eval_during_training_flags_need_their_companions(scripts):
    proc, _ = scripts["companions"].result()
    assert proc.returncode == 1
    assert "--keep_best_checkpoint and --early_stopping_patience need --eval_every_n_steps" \
        in proc.stderr.strip().splitlines()[-1]


def read_results(out):
    return dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())


def test_script_says_when_fine_tuning_collapsed(scripts):
    """Issue 34: a run whose model predicts one class for the whole dev set, its loss flat,
    exits 0 as before, but not silently: eval_results.txt has eval_predicted_classes = 1 and
    train_loss_change within 1%, and the log a warning naming both and what to try."""
    proc, out = scripts["collapsed"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_results(out)
    assert result["eval_predicted_classes"] == "1" and result["global_step"] == "36"
    assert abs(float(result["train_loss_change"])) < 0.01, result
    warnings = [line for line in proc.stderr.splitlines() if "Fine-tuning looks collapsed" in line]
    evaluation_warning = [w for w in warnings if "in the evaluation at global_step 36" in w]
    assert len(evaluation_warning) == 1, warnings
    for what in ("the model predicts one class for every dev example "
                 "(eval_predicted_classes = 1)", "the training loss has stayed within 1% of "
                 "its start over 36 updates", "Try --adam_bias_correction=true",
                 "a lower --learning_rate (this run: 1e-09) or more --num_train_epochs."):
        assert what in evaluation_warning[0], evaluation_warning[0]
    assert any("at the end of training at global_step 36" in w for w in warnings), warnings


def test_healthy_script_run_has_the_keys_and_no_warning(scripts):
    """A run that learns (bias-corrected Adam, the default): both classes predicted at every
    evaluation (steps 12, 24, 36), the loss fell, no collapse warning."""
    proc, out = scripts["healthy"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_results(out)
    assert float(result["eval_accuracy"]) > 0.9, result
    assert result["eval_predicted_classes"] == "2" and float(result["train_loss_change"]) < -0.1
    history = evaluation.read_history(str(out))
    assert [(r["step"], r["eval_predicted_classes"]) for r in history] == \
        [(12, 2), (24, 2), (36, 2)], history
    assert "Fine-tuning looks collapsed" not in proc.stderr
    # The run that does not learn (the pooler from scratch at 1e-3) is reported.
    proc, _ = scripts["best"].result()
    assert "Fine-tuning looks collapsed in the evaluation at global_step 36: the model " \
        "predicts one class" in proc.stderr
