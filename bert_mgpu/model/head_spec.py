"""Which classifier head of a fine-tuning run an export or a conversion reads: its scope, type,
labels and input (from the run's run_config.json and the checkpoint's variable names).
No TensorFlow import."""

import dataclasses
from typing import Any, Mapping, Optional


def head_scope(label: str) -> str:
    """The variable scope of task `label`'s head in a multi-task run (`task_<label>/`)."""
    return f"task_{label}"


@dataclasses.dataclass(frozen=True)
class ClassifierHeadSpec:
    """Which classifier head of a run an export serves, and how (see `classifier_head_of_run`).

    Attributes:
      scope: "" (Google's root-level `output_weights`/`output_bias`) or `task_<label>`.
      task_type: one of TASK_TYPES.
      labels: the head's label names in id order, or None when the run did not record them.
      multilabel_threshold: --multilabel_threshold of the run.
      classifier_input: --classifier_input of the run.
    """
    scope: str = ""
    task_type: str = "classification"
    labels: Optional[tuple] = None
    multilabel_threshold: float = 0.5
    classifier_input: str = "pooled"


def classifier_head_of_run(run: Mapping[str, Any], variable_names, task_label: Optional[str],
                           source: str) -> ClassifierHeadSpec:
    """The classifier head an export takes from a run of run_classifier_mgpu.py.

    Args:
      run: the run's run_config.json ({} when there is none).
      variable_names: the checkpoint's variable names (a multi-task run's heads are its
        `task_<label>/output_bias`, also without run_config.json).
      task_label: --task_label (None or "": not given).
      source: what to name in errors (the run directory or checkpoint).

    Raises:
      ValueError: a multi-task run without --task_label or with an unknown one, or --task_label
        for a single-task run; one line naming the flag and the run's task labels.
    """
    in_checkpoint = sorted(n[len(head_scope("")):-len("/output_bias")] for n in variable_names
                           if n.startswith(head_scope("")) and n.endswith("/output_bias")
                           and n.count("/") == 1)
    tasks = {t["label"]: t for t in run.get("tasks", ())}
    task_labels_of_run = list(tasks) or in_checkpoint
    shared = dict(multilabel_threshold=float(run.get("multilabel_threshold", 0.5)),
                  classifier_input=run.get("classifier_input", "pooled"))
    if not task_labels_of_run:
        if task_label:
            raise ValueError(f"--task_label={task_label}: {source} is not a multi-task run (its "
                             f"head is the root-level output_weights/output_bias)")
        labels = run.get("labels")
        return ClassifierHeadSpec(task_type=run.get("task_type", "classification"),
                                  labels=tuple(labels) if labels else None, **shared)
    if not task_label:
        raise ValueError(f"{source} is a multi-task run: choose the task to export with "
                         f"--task_label (one of {', '.join(task_labels_of_run)})")
    if task_label not in task_labels_of_run:
        raise ValueError(f"--task_label={task_label} is not a task of {source} (its tasks: "
                         f"{', '.join(task_labels_of_run)})")
    task = tasks.get(task_label, {})
    labels = task.get("labels")
    return ClassifierHeadSpec(scope=head_scope(task_label),
                              task_type=task.get("task_type", "classification"),
                              labels=tuple(labels) if labels else None, **shared)
