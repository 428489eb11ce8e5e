"""Evaluation metrics of the regression and multi-label tasks, in numpy only.

Regression (STS-B style): Pearson and Spearman correlation and mean squared error.
Spearman is the Pearson correlation of the ranks, ties getting the average of the ranks they
span (as `scipy.stats.spearmanr`). A correlation with a constant input is undefined: NaN.

Multi-label: a label is predicted when its probability is strictly above the threshold (as
Keras' and torchmetrics' thresholded metrics). Micro F1 pools every (example, label) decision;
macro F1 averages the per-label F1 over all labels; a label with no true and no predicted positive
has F1 0 (scikit-learn's default `zero_division`), so it lowers the macro average. The
exact-match ratio is the fraction of examples whose whole label set is right (scikit-learn's
subset accuracy).
"""

from typing import Dict

import numpy as np


def _as_vector(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
    return x


def _paired(predictions, labels):
    p = _as_vector(predictions, "predictions")
    y = _as_vector(labels, "labels")
    if p.shape != y.shape:
        raise ValueError(f"predictions {p.shape} and labels {y.shape} differ in length")
    return p, y


def pearson(predictions, labels) -> float:
    """Pearson's r of two 1-D sequences; NaN when either is constant or shorter than 2."""
    x, y = _paired(predictions, labels)
    if x.size < 2:
        return float("nan")
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    if denominator == 0:
        return float("nan")
    # Clipped: rounding can put |r| a hair above 1 for (anti)collinear data.
    return float(np.clip(np.dot(dx, dy) / denominator, -1.0, 1.0))


def average_ranks(x) -> np.ndarray:
    """1-based ranks of a 1-D sequence, tied values getting the mean of their ranks.

    Example: [10, 20, 20, 5] -> [2, 3.5, 3.5, 1].
    """
    x = _as_vector(x, "values")
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Start index (in sorted order) of each run of equal values, and the run boundaries.
    new_run = np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]]) if x.size else \
        np.zeros(0, bool)
    run_id = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.concatenate([starts[1:], [x.size]])  # exclusive
    # Positions start..end-1 have 1-based ranks start+1..end; their mean is (start+1+end)/2.
    run_rank = (starts + 1 + ends) / 2.0
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = run_rank[run_id]
    return ranks


def spearman(predictions, labels) -> float:
    """Spearman's rho (Pearson of average ranks); NaN when either input is constant."""
    x, y = _paired(predictions, labels)
    return pearson(average_ranks(x), average_ranks(y))


def mse(predictions, labels) -> float:
    """Mean squared error."""
    x, y = _paired(predictions, labels)
    if x.size == 0:
        return float("nan")
    return float(np.mean((x - y) ** 2))


def regression_metrics(predictions, labels, prefix: str = "eval_") -> Dict[str, float]:
    """{eval_pearson, eval_spearman, eval_mse} of 1-D predictions and float labels."""
    return {f"{prefix}pearson": pearson(predictions, labels),
            f"{prefix}spearman": spearman(predictions, labels),
            f"{prefix}mse": mse(predictions, labels)}


def _f1(tp, fp, fn):
    """F1 = 2TP / (2TP + FP + FN), 0 where the denominator is 0 (elementwise)."""
    tp, fp, fn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def multilabel_metrics(probabilities, labels, threshold: float = 0.5,
                       prefix: str = "eval_") -> Dict[str, float]:
    """Micro/macro F1 and exact-match ratio of thresholded multi-label predictions.

    Args:
      probabilities: float array of shape [num_examples, num_labels] (sigmoid outputs).
      labels: 0/1 array of the same shape (the true label sets).
      threshold: a label is predicted when its probability is > threshold.

    Returns:
      {eval_f1_micro, eval_f1_macro, eval_exact_match}.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    truth = np.asarray(labels)
    if probabilities.ndim != 2 or probabilities.shape != truth.shape:
        raise ValueError(f"probabilities {probabilities.shape} and labels {truth.shape} must "
                         "be the same [num_examples, num_labels] shape")
    if not np.isin(truth, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    predicted = probabilities > threshold
    truth = truth.astype(bool)
    tp = np.sum(predicted & truth, axis=0)
    fp = np.sum(predicted & ~truth, axis=0)
    fn = np.sum(~predicted & truth, axis=0)
    num_examples = truth.shape[0]
    return {
        f"{prefix}f1_micro": float(_f1(tp.sum(), fp.sum(), fn.sum())),
        f"{prefix}f1_macro": float(np.mean(_f1(tp, fp, fn))) if tp.size else 0.0,
        f"{prefix}exact_match": (float(np.mean(np.all(predicted == truth, axis=1)))
                                 if num_examples else 0.0),
    }


# ---------------------------------------------------------------------------------------------
# The same metrics from additive sums (what a task's `eval_sums` adds up over eval batches).

def pearson_from_moments(n, sum_x, sum_y, sum_xx, sum_yy, sum_xy) -> float:
    """Pearson's r from the count and the sums of x, y, x², y², xy (float64 sums); NaN when
    either side is constant or n < 2, as `pearson`."""
    n, sx, sy, sxx, syy, sxy = (float(v) for v in (n, sum_x, sum_y, sum_xx, sum_yy, sum_xy))
    if n < 2:
        return float("nan")
    # n² times the covariance and the variances; max(.., 0) absorbs rounding below zero.
    cov = n * sxy - sx * sy
    var_x = max(n * sxx - sx * sx, 0.0)
    var_y = max(n * syy - sy * sy, 0.0)
    denominator = np.sqrt(var_x * var_y)
    if denominator == 0:
        return float("nan")
    return float(np.clip(cov / denominator, -1.0, 1.0))


def multilabel_metrics_from_counts(tp, fp, fn, num_exact, num_examples,
                                   prefix: str = "eval_") -> Dict[str, float]:
    """`multilabel_metrics` from per-label counts of true positives, false positives and
    false negatives (arrays [num_labels]) and the number of examples whose whole label set is
    right."""
    tp, fp, fn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, fn))
    return {
        f"{prefix}f1_micro": float(_f1(tp.sum(), fp.sum(), fn.sum())),
        f"{prefix}f1_macro": float(np.mean(_f1(tp, fp, fn))) if tp.size else 0.0,
        f"{prefix}exact_match": float(num_exact) / float(num_examples) if num_examples else 0.0,
    }


def per_label_f1(tp, fp, fn) -> np.ndarray:
    """F1 of each label from its counts (0 where it has no true and no predicted positive)."""
    return _f1(tp, fp, fn)
