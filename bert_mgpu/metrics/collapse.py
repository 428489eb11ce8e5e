"""Signs that fine-tuning collapsed, in numpy only: the model gives every dev example the same
answer, or the training loss never moved.

A collapsed fine-tuning run (the failure Mosbach et al. and Zhang et al., ICLR 2021, trace to
Adam without bias correction on small data sets) ends with a model that predicts one class for
the whole dev set, its loss flat at the prior's entropy (ln 2 for two balanced classes), and
exits like a good run. The evaluation results carry what shows it, so that it is never silent
(keys of eval_results.txt; collapsed when):

- classification: `eval_predicted_classes`, the classes predicted for at least one dev example
  (collapsed: 1, over several examples);
- multi-label: `eval_predicted_labels`, the labels predicted for at least one example, and
  `eval_constant_predictions`, 1 if every example got the same label set (collapsed: 1);
- regression: `eval_prediction_std` and `eval_label_std`, standard deviations over the dev set
  (collapsed: the predictions' below 1% of the labels');
- tagging (NER): `eval_predicted_tags`, the tags predicted for at least one labelled word
  (collapsed: 1, every word the same tag: all `O`, as a rule);
- training, any task: `train_loss_change`, (mean of the last 10% of this process's batch losses
  - mean of the first 10%) / the latter (collapsed: within +-1%; judged after >= 20 updates and
  past the warm-up).

Every statistic comes from additive counts (the confusion matrix, per-label and per-tag
prediction counts, the moments), so evaluation stays one pass.
"""

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

# The training loss "has not moved" when its smoothed end is within this fraction of its start.
LOSS_TOLERANCE = 0.01
# Fewer updates than this (in one process) are too few to call the loss flat.
MIN_UPDATES_FOR_LOSS = 20
# A regressor is constant when its predictions' spread is below this fraction of the labels'.
REGRESSION_STD_FRACTION = 0.01

PREDICTED_CLASSES = "eval_predicted_classes"
PREDICTED_LABELS = "eval_predicted_labels"
CONSTANT_PREDICTIONS = "eval_constant_predictions"
PREDICTION_STD = "eval_prediction_std"
LABEL_STD = "eval_label_std"
PREDICTED_TAGS = "eval_predicted_tags"
LOSS_CHANGE = "train_loss_change"


def classification_keys(confusion) -> Dict[str, int]:
    """`eval_predicted_classes` from a confusion matrix [true, predicted]."""
    predicted = np.asarray(confusion, np.float64).sum(axis=0)
    return {PREDICTED_CLASSES: int(np.count_nonzero(predicted))}


def multilabel_keys(predicted_positives, num_examples) -> Dict[str, int]:
    """`eval_predicted_labels` and `eval_constant_predictions` from each label's number of
    examples predicted positive [num_labels] (true + false positives): every example has the
    same label set exactly when each label is predicted for none or for all of them (a single
    example is never called constant)."""
    counts = np.asarray(predicted_positives, np.float64)
    n = float(num_examples)
    constant = n >= 2 and bool(np.all((counts == 0) | (counts == n)))
    return {PREDICTED_LABELS: int(np.count_nonzero(counts)),
            CONSTANT_PREDICTIONS: int(constant)}


def _std(n, total, total_sq) -> float:
    n = float(n)
    if n <= 0:
        return 0.0
    mean = float(total) / n
    return float(np.sqrt(max(float(total_sq) / n - mean * mean, 0.0)))


def regression_keys(n, sum_x, sum_xx, sum_y, sum_yy) -> Dict[str, float]:
    """`eval_prediction_std` (x: predictions) and `eval_label_std` (y: labels), population
    standard deviations from the float64 moments."""
    return {PREDICTION_STD: _std(n, sum_x, sum_xx), LABEL_STD: _std(n, sum_y, sum_yy)}


def tagging_keys(predicted_tag_counts) -> Dict[str, int]:
    """`eval_predicted_tags` from the number of labelled words predicted as each tag."""
    return {PREDICTED_TAGS: int(np.count_nonzero(np.asarray(predicted_tag_counts)))}


def loss_change(losses: Sequence[float]) -> Optional[float]:
    """The relative change of the training loss over `losses` (one per update, in order): the
    mean of the last 10% (at least 5) minus the mean of the first 10%, over the latter; None
    with fewer than `MIN_UPDATES_FOR_LOSS` losses or a start that is not positive."""
    if len(losses) < MIN_UPDATES_FOR_LOSS:
        return None
    k = max(5, len(losses) // 10)
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    if not first > 0 or not np.isfinite(last):
        return None
    return (last - first) / first


def _base(key: str) -> str:
    """`key` without a multi-task run's `<label>/` prefix."""
    return key.rsplit("/", 1)[-1]


def _task_of(key: str) -> str:
    return f" of task {key.rsplit('/', 1)[0]}" if "/" in key else ""


def findings(result: Mapping[str, float], num_updates: int = 0) -> List[str]:
    """What in `result` (evaluation results, a multi-task run's `<label>/` keys included) says
    the model collapsed, one sentence each; [] for a healthy run.

    Args:
      result: eval_results keys (see the module's table).
      num_updates: the updates `train_loss_change` was measured over (for the sentence).
    """
    out = []
    for key, value in result.items():
        name, task = _base(key), _task_of(key)
        prefix = key[:-len(name)]
        examples = result.get(prefix + "eval_examples")
        if examples is not None and int(examples) < 2:
            continue  # one example: one answer, whatever the model
        if name == PREDICTED_CLASSES and value == 1:
            over = f"all {int(examples)} dev examples" if examples else "every dev example"
            out.append(f"the model{task} predicts one class for {over} "
                       f"({PREDICTED_CLASSES} = 1)")
        elif name == CONSTANT_PREDICTIONS and value == 1:
            labels = int(result.get(prefix + PREDICTED_LABELS, 0))
            what = "no label" if labels == 0 else f"the same {labels} label(s)"
            out.append(f"the model{task} predicts {what} for every dev example "
                       f"({CONSTANT_PREDICTIONS} = 1)")
        elif name == PREDICTION_STD:
            label_std = float(result.get(prefix + LABEL_STD, 0.0))
            if float(value) <= REGRESSION_STD_FRACTION * label_std:
                out.append(f"the model{task} predicts a constant: its predictions' standard "
                           f"deviation on the dev set is {float(value):.3g}, the labels' "
                           f"{label_std:.3g} ({PREDICTION_STD} < 1% of {LABEL_STD})")
        elif name == PREDICTED_TAGS and value == 1:
            out.append(f"the model{task} predicts one tag (as a rule 'O') for every dev word "
                       f"({PREDICTED_TAGS} = 1)")
        elif name == LOSS_CHANGE and abs(float(value)) < LOSS_TOLERANCE:
            over = f" over {num_updates} updates" if num_updates else ""
            out.append(f"the training loss{task} has stayed within 1% of its start{over} "
                       f"({LOSS_CHANGE} = {float(value):+.4f})")
    return out
