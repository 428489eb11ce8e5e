"""Evaluation during training: a dev-metric curve, the best checkpoint, early stopping.

Google's `run_classifier.py` trained blind and kept whatever the last step gave. With
`--eval_every_n_steps=N` the chief evaluates the dev set every N updates (and at the last one):

- the metrics are logged, written to TensorBoard under `OUTPUT_DIR/eval` (an `eval` run beside
  the training scalars) and appended to `eval_history.tsv` (`step`, `train_loss`, then every
  metric, tab-separated with a header); `eval_curve.png` plots the dev metric and the training
  loss when matplotlib is importable (it is not a dependency);
- `--keep_best_checkpoint` keeps the model at the best `--best_metric` (its direction known per
  metric: losses lower, the rest higher) in `OUTPUT_DIR/best/model.ckpt-STEP` (weights only: it
  is for prediction and export, and it survives `--keep_checkpoint_max` pruning), recorded in
  `best_checkpoint.txt` and `best_eval_results.txt`; `--do_predict` then predicts with it;
- `--early_stopping_patience=K` stops training (checkpoint written, exit 0) after K evaluations
  in a row without improvement.

Resume: the history is the state. A rerun from checkpoint step S drops the rows after S (the
rerun computes them again, identically: training is deterministic) and recomputes the best value
and the patience counter from the rest, so they continue exactly.
"""

import math
import os
from typing import Callable, Dict, List, Mapping, Optional

import tensorflow as tf
from absl import logging

from bert_mgpu.engine import checkpoint, training
from bert_mgpu.metrics import collapse

HISTORY_FILE = "eval_history.tsv"
BEST_DIR = "best"
BEST_FILE = checkpoint.BEST_FILE
BEST_RESULTS_FILE = "best_eval_results.txt"
LOSS_FILE = "train_loss.tsv"
CURVE_FILE = "eval_curve.png"


def lower_is_better(metric: str) -> bool:
    """Losses and errors improve downwards; accuracies, F1, correlations upwards."""
    name = metric.lower()
    return "loss" in name or name.endswith("mse") or "error" in name


class _Best:
    """The best value of a metric so far and the evaluations since it improved."""

    def __init__(self, metric: str):
        self.metric, self.lower = metric, lower_is_better(metric)
        self.value: Optional[float] = None
        self.step: Optional[int] = None
        self.since = 0

    def update(self, step: int, value: float) -> bool:
        """Records one evaluation; True if it is a new best."""
        improved = not math.isnan(value) and (
            self.value is None or (value < self.value if self.lower else value > self.value))
        if improved:
            self.value, self.step, self.since = value, step, 0
        else:
            self.since += 1
        return improved


class PeriodicEvaluator:
    """The `on_step` callback of `Trainer.train` that evaluates every N updates (chief)."""

    def __init__(self, evaluate: Callable[[], Dict[str, float]],
                 variables: Mapping[str, tf.Variable], num_train_steps: int,
                 output_dir: str, every_n_steps: int, best_metric: str = "eval_accuracy",
                 keep_best: bool = False, patience: int = 0, is_chief: bool = True):
        """Args:
          evaluate: () -> the dev set's results with the model's current weights (the job's
            evaluation: e.g. `Trainer.evaluate` of the dev batches plus the task's metrics of
            the predictions); `global_step` among them is not recorded.
          variables: name -> variable, what the best checkpoint keeps (`Trainer.variables`).
          num_train_steps: the last update's step, always evaluated.
          output_dir: the run's --output_dir.
          every_n_steps: evaluate when the global step is a multiple of it (and at the end).
          best_metric: the eval_results key that decides the best checkpoint and patience.
          keep_best: keep the best model in OUTPUT_DIR/best.
          patience: stop after this many evaluations without improvement (0: never).
          is_chief: only the chief evaluates and writes (the others only train).
        """
        self.evaluate, self.variables = evaluate, variables
        self.num_train_steps = num_train_steps
        self.output_dir, self.every_n_steps = output_dir, every_n_steps
        self.keep_best, self.patience, self.is_chief = keep_best, patience, is_chief
        self.best = _Best(best_metric)
        self.history: List[Dict[str, float]] = []
        self._writer = None
        self._started = False

    # -- resume ---------------------------------------------------------------------------------

    def restore(self, step: int) -> None:
        """Continues the history of a resumed run at checkpoint step `step`."""
        if not self.is_chief:
            return
        self.history = [row for row in read_history(self.output_dir) if row["step"] <= step]
        for row in self.history:
            self.best.update(int(row["step"]), row.get(self.best.metric, math.nan))
        self._rewrite_history()
        if self.history:
            logging.info("Evaluation history resumed at step %d: %d evaluations, best %s = %s at "
                         "step %s, %d without improvement", step, len(self.history),
                         self.best.metric, self.best.value, self.best.step, self.best.since)

    # -- the callback ---------------------------------------------------------------------------

    def __call__(self, step: int, outputs) -> bool:
        """Evaluates at the steps it should; True asks the trainer to stop (early stopping)."""
        if not self._started:
            # The first call follows the first update of this run: it resumed at step - 1.
            self._started = True
            self.restore(step - 1)
        last = step == self.num_train_steps
        if not self.is_chief or (step % self.every_n_steps and not last):
            return False
        result = self.evaluate()
        if self.best.metric not in result:
            raise ValueError(f"--best_metric={self.best.metric} is not an evaluation result; "
                             f"choose one of {', '.join(sorted(result))}")
        row = {"step": step, "train_loss": float(outputs["loss"])}
        row.update({k: float(v) for k, v in result.items() if k != "global_step"})
        self._record(row)
        if self.best.update(step, row[self.best.metric]):
            logging.info("Evaluation at step %d: %s = %.6g (new best)", step, self.best.metric,
                         self.best.value)
            if self.keep_best:
                self._save_best(step, result)
        else:
            logging.info("Evaluation at step %d: %s = %.6g (best %.6g at step %d, %d evaluation(s) "
                         "without improvement)", step, self.best.metric, row[self.best.metric],
                         self.best.value, self.best.step, self.best.since)
        if self.patience and self.best.since >= self.patience and not last:
            logging.warning("Early stopping at step %d: %s has not improved for %d evaluations "
                            "(best %.6g at step %d).", step, self.best.metric, self.best.since,
                            self.best.value, self.best.step)
            return True
        return False

    def _record(self, row: Dict[str, float]) -> None:
        self.history.append(row)
        path = os.path.join(self.output_dir, HISTORY_FILE)
        columns = history_columns(self.history)
        if len(columns) != len(history_columns(self.history[:-1])) and len(self.history) > 1:
            self._rewrite_history()
        else:
            new = not tf.io.gfile.exists(path)
            with tf.io.gfile.GFile(path, "a") as f:
                if new:
                    f.write("\t".join(columns) + "\n")
                f.write("\t".join(_format(row.get(c)) for c in columns) + "\n")
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "eval"))
        with self._writer.as_default():
            for name, value in row.items():
                if name != "step":
                    training.write_scalar_summary(name, value, int(row["step"]))
        self._writer.flush()
        plot_curve(self.output_dir, self.history, self.best.metric)

    def _rewrite_history(self) -> None:
        path = os.path.join(self.output_dir, HISTORY_FILE)
        if not self.history:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
            return
        columns = history_columns(self.history)
        lines = ["\t".join(columns)] + ["\t".join(_format(r.get(c)) for c in columns)
                                         for r in self.history]
        tmp = path + ".tmp"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        tf.io.gfile.rename(tmp, path, overwrite=True)

    def _save_best(self, step: int, result: Dict) -> None:
        best_dir = os.path.join(self.output_dir, BEST_DIR)
        prefix = checkpoint.save_checkpoint(best_dir, step, self.variables,
                                            keep_checkpoint_max=1)
        tmp = os.path.join(self.output_dir, BEST_FILE + ".tmp")
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(f"checkpoint = {os.path.relpath(prefix, self.output_dir)}\n"
                    f"step = {step}\n{self.best.metric} = {self.best.value}\n")
        tf.io.gfile.rename(tmp, os.path.join(self.output_dir, BEST_FILE), overwrite=True)
        # Not logged: the evaluation's line says it is a new best; the file holds its results.
        training.write_eval_results(os.path.join(self.output_dir, BEST_RESULTS_FILE), result,
                                    log=False)


class CollapseWatch:
    """Makes a collapsed fine-tuning run never silent (the signs: metrics/collapse.py).

    It records the loss of every update (`on_step`, around the job's own callback), the chief
    also in OUTPUT_DIR/train_loss.tsv (lines `step<TAB>loss`); `check` adds `train_loss_change`
    to evaluation results once the loss can be judged (>= 20 updates, past the warm-up) and
    logs a warning when results show a collapse (one class, label set, tag or value for the
    whole dev set, or a flat loss), naming what to try: what eval_results.txt and
    eval_history.tsv then get. `after_training` judges the loss alone, so a run without
    --do_eval is not silent either. Each warning is logged once.

    Resume: the loss file is the state, as eval_history.tsv is PeriodicEvaluator's: a rerun from
    checkpoint step S keeps its rows up to S and recomputes the rest (identically: training is
    deterministic), so `train_loss_change` equals the uninterrupted run's; an evaluation without
    training in this process (--do_eval alone) judges the file's record up to the evaluated
    step.
    """

    def __init__(self, cfg, global_step: tf.Variable, is_chief: bool = True):
        """Args:
          cfg: the run's `TrainConfig` (output_dir; warm-up, optimizer and learning rate for
            the advice).
          global_step: the trainer's step variable (read when judging and in the message).
          is_chief: whether this worker keeps the loss file.
        """
        self.cfg, self.global_step, self.is_chief = cfg, global_step, is_chief
        self._losses: List[float] = []
        self._loaded = False
        self._logged: set = set()

    def on_step(self, inner: Optional[Callable] = None) -> Callable:
        """The `on_step` callback of `Trainer.train`: records the update's loss, then calls
        `inner(step, outputs)` (the job's, e.g. a PeriodicEvaluator, whose evaluation then
        judges the loss up to its own step) and returns what it returns."""
        started = []

        def record(step, outputs):
            if not started:  # the first update of this process: it resumed at step - 1
                started.append(step)
                self._restore_losses(step - 1, cut_file=True)
            loss = float(outputs["loss"])
            self._losses.append(loss)
            if self.is_chief:
                with tf.io.gfile.GFile(self._loss_path(), "a") as f:
                    f.write(f"{step}\t{loss!r}\n")
            return inner(step, outputs) if inner is not None else False
        return record

    def after_training(self) -> None:
        """Warns when the training loss alone shows a collapse (call on the chief)."""
        self._warn(collapse.findings(self._loss_result(), len(self._losses)),
                   "at the end of training")

    def check(self, result: dict) -> dict:
        """`result` (evaluation results) with `train_loss_change` when judged; logs what shows
        a collapse."""
        if not self._loaded:
            self._restore_losses(self._step(), cut_file=False)
        result.update(self._loss_result())
        self._warn(collapse.findings(result, len(self._losses)), "in the evaluation")
        return result

    def _step(self) -> int:
        return int(self.global_step.numpy())

    def _loss_path(self) -> str:
        return os.path.join(self.cfg.output_dir, LOSS_FILE)

    def _restore_losses(self, step: int, cut_file: bool) -> None:
        """The losses of updates 1..`step` from the loss file (a rerun's earlier updates); with
        `cut_file`, the file is cut to them (the chief's, before training on)."""
        self._losses.clear()
        self._loaded = True
        path = self._loss_path()
        if not self.is_chief or not tf.io.gfile.exists(path):
            return
        rows = {}
        with tf.io.gfile.GFile(path) as f:
            lines = f.read().split("\n")[:-1]  # the last, unless empty, was cut by a kill
        for line in lines:
            fields = line.split("\t")
            if len(fields) == 2 and fields[0].isdigit() and int(fields[0]) <= step:
                rows[int(fields[0])] = fields[1]
        kept = [(s, rows[s]) for s in sorted(rows)]
        self._losses.extend(float(loss) for _, loss in kept)
        if not cut_file:
            return
        tmp = path + ".tmp"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write("".join(f"{s}\t{loss}\n" for s, loss in kept))
        tf.io.gfile.rename(tmp, path, overwrite=True)


    def _loss_result(self) -> dict:
        if self._step() <= self.cfg.num_warmup_steps:
            return {}
        change = collapse.loss_change(self._losses)
        return {} if change is None else {collapse.LOSS_CHANGE: change}

    def _warn(self, findings: List[str], where: str) -> None:
        if not findings:
            return
        message = (f"Fine-tuning looks collapsed {where} at global_step {self._step()}: "
                   f"{'; '.join(findings)}. {collapse_advice(self.cfg)}")
        if message not in self._logged:
            self._logged.add(message)
            logging.warning("%s", message)


def collapse_advice(cfg) -> str:
    """What to try after a collapse, for a run with trainer config `cfg` (`TrainConfig`)."""
    if cfg.optimizer == "adamw" and not cfg.adam_bias_correction:
        return ("Try --adam_bias_correction=true (this run used Google's AdamWeightDecay, "
                "without bias correction: its first updates are several times larger), a lower "
                f"--learning_rate (this run: {cfg.learning_rate:g}) or more --num_train_epochs.")
    # Bias-corrected steps start small: a short run may not have moved yet.
    return (f"Try more --num_train_epochs or another --learning_rate (this run: "
            f"{cfg.learning_rate:g}; lower if the loss jumped, higher if it never moved).")


def best_checkpoint(output_dir: str) -> Optional[str]:
    """The prefix of the kept best model of a run, or None (engine/checkpoint.py)."""
    return checkpoint.best_checkpoint(output_dir)


def history_columns(rows: List[Dict[str, float]]) -> List[str]:
    names = sorted({k for r in rows for k in r} - {"step", "train_loss"})
    return ["step", "train_loss"] + names


def _format(value) -> str:
    if value is None:
        return ""
    return str(int(value)) if isinstance(value, int) else repr(float(value))


def read_history(output_dir: str) -> List[Dict[str, float]]:
    """The rows of `eval_history.tsv` (step as int, the rest as floats); [] if absent."""
    path = os.path.join(output_dir, HISTORY_FILE)
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    columns = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        values = line.split("\t")
        if len(values) != len(columns):
            continue  # a line cut by a kill mid-write: the rerun evaluates that step again
        row = {c: float(v) for c, v in zip(columns, values) if v != ""}
        row["step"] = int(row["step"])
        rows.append(row)
    return rows


def plot_curve(output_dir: str, history: List[Dict[str, float]], metric: str) -> Optional[str]:
    """eval_curve.png: `metric` on the dev set and the training loss against the step, when
    matplotlib is importable (not a dependency); returns the path or None."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    steps = [r["step"] for r in history]
    fig, left = plt.subplots(figsize=(6, 3.5))
    left.plot(steps, [r.get(metric, math.nan) for r in history], "o-", color="tab:blue")
    left.set_xlabel("step")
    left.set_ylabel(f"dev {metric}", color="tab:blue")
    right = left.twinx()
    right.plot(steps, [r["train_loss"] for r in history], "s--", color="tab:red")
    right.set_ylabel("training loss (batch)", color="tab:red")
    fig.tight_layout()
    path = os.path.join(output_dir, CURVE_FILE)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
