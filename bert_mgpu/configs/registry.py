"""The one registry of tasks: what the scripts, the SavedModel export and the Hugging Face
conversion find a task by, registered once by the job's config module (configs/<job>.py).

A job adds its entry with `register(RegisteredTask(...))` in its own config module; `tasks()`
finds every entry by importing each module of this package once (no list of jobs is kept
anywhere), so a new job is found without an edit to a shared file. An entry is plain data, read
before TensorFlow loads (export_saved_model.py's --task values and help come from it); what
needs TensorFlow is named by module (`serving`), which the layer that uses it imports.
No TensorFlow import.
"""

import dataclasses
import importlib
import pkgutil
from typing import Any, Dict, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class RegisteredTask:
    """A task as every layer finds it.

    Attributes:
      name: its name (export_saved_model.py --task).
      returns: what its SavedModel returns, for --task's help (e.g. "'squad' (a run_squad.py
        model: ...)").
      serving: the module of bert_mgpu.serving that serves it: its `SERVING` (a
        serving/export.py `TaskServing`) builds the head and the signatures.
      options: the config subtree of the run's own flags that its export reads back (e.g.
        run_squad.py's `SquadAnswerOptions`), or None.
      types: the task's head types by name (e.g. the classifier's --task_type: `TaskType`s),
        which its runs record (run_config.json "task_type") and the Hugging Face conversion
        reads.
      int8: its export has --quantize=int8 (serving/int8.py: its `TaskServing` declares the
        `int8_outputs` and `int8_signatures`).
    """
    name: str
    returns: str
    serving: str
    options: Optional[type] = None
    types: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    int8: bool = False


_REGISTERED: Dict[str, RegisteredTask] = {}


def register(task: RegisteredTask) -> RegisteredTask:
    """Adds `task` (once: a second entry of the same name is an error)."""
    if _REGISTERED.get(task.name, task) != task:
        raise ValueError(f"task {task.name!r} is registered twice")
    _REGISTERED[task.name] = task
    return task


def tasks() -> Dict[str, RegisteredTask]:
    """Every registered task by name, in name order (each config module imported once)."""
    for module in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
        importlib.import_module(f"{__package__}.{module.name}")
    return {name: _REGISTERED[name] for name in sorted(_REGISTERED)}


def task(name: str) -> RegisteredTask:
    """The registered task `name`.

    Raises:
      ValueError: naming the known tasks.
    """
    known = tasks()
    if name not in known:
        raise ValueError(f"--task must be one of {', '.join(known)}, got {name!r}")
    return known[name]


def task_type(name: str):
    """The head type `name` of any registered task (e.g. the classifier's "regression").

    Raises:
      ValueError: no task has that type.
    """
    for registered in tasks().values():
        if name in registered.types:
            return registered.types[name]
    raise ValueError(f"unknown task type {name!r}")
