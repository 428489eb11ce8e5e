"""The summary every script ends with, in one format: the result, the files written, the
checkpoint a predict or export would use, and the next command. Each job supplies its facts
(engine/job.py `Job.print_summary` for the training jobs, which reads them from the run's
directory); this module only lays them out. Printed to stderr, where the log goes, after it:
stdout stays what a script prints for other programs (export_saved_model.py: the SavedModel's
path).

Example:
  == run_classifier.py finished in 4m10s
    result:     eval_accuracy = 0.8417 at step 1736 (eval_results.txt)
    best:       eval_accuracy = 0.8461 at step 1400 (eval_history.tsv)
    written:    demo_output/classifier_output/: eval_results.txt, predict.txt, ...
    checkpoint: best/model.ckpt-1400: the best checkpoint (--keep_best_checkpoint), used by ...
    next:       python export_saved_model.py --output_dir=... --export_dir=...
"""

import os
import re
import shlex
import sys
import time
from typing import List, Optional, Sequence, Tuple

from bert_mgpu.progress import format_duration

# A checkpoint's files: `model.ckpt-STEP.index`, `model.ckpt-STEP.data-00000-of-00001`.
_CHECKPOINT_FILE = re.compile(r"^(.*\.ckpt-(\d+))\.(index|data-\d+-of-\d+)$")


def shown_path(path: str) -> str:
    """`path` relative to the working directory when it is under it, else as given."""
    relative = os.path.relpath(path) if not path.startswith(("gs://", "s3://")) else path
    return path if relative.startswith("..") else relative


def command(script: str, *args: str, **flags) -> str:
    """`python SCRIPT --flag=value ...` (values quoted for a POSIX shell; paths shown relative
    to the working directory when under it); `args` are put as given (e.g. a placeholder)."""
    parts = [f"--{name}={shlex.quote(str(value))}" for name, value in flags.items()]
    return " ".join(["python", script, *parts, *args])


def files_written(directory: str, since: float) -> List[str]:
    """The entries of `directory` (not recursive; a directory's name ends with '/') changed at or
    after `since` (a time.time()), sorted, a checkpoint's files as one `model.ckpt-STEP`."""
    if not os.path.isdir(directory):
        return []
    names, steps = set(), {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.startswith(".") or os.path.getmtime(path) < since - 1.0:
            continue
        match = _CHECKPOINT_FILE.match(name)
        if match:
            steps[match.group(1)] = int(match.group(2))
        else:
            names.add(name + ("/" if os.path.isdir(path) else ""))
    return sorted(names) + sorted(steps, key=steps.get)


def print_summary(started: float, result: Sequence[Tuple[str, str]] = (),
                  written: Optional[Tuple[str, Sequence[str]]] = None,
                  checkpoint: Optional[str] = None, next_command: Optional[str] = None,
                  stream=None) -> None:
    """Prints the summary block.

    Args:
      started: time.time() when the script started its work.
      result: (label, text) lines of the result, e.g. ("result", "eval_accuracy = 0.84 ...").
      written: (directory, names in it) of the files written, or None.
      checkpoint: the checkpoint a predict or export would use, in words, or None.
      next_command: the command to run next, or None.
      stream: where to print (stderr).
    """
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "bert_mgpu"
    lines = [f"== {script} finished in {format_duration(time.time() - started)}"]
    rows = list(result)
    if written is not None:
        directory, names = written
        rows.append(("written", f"{shown_path(directory)}{'' if directory.endswith('/') else '/'}"
                                f": {', '.join(names) if names else 'nothing new'}"))
    if checkpoint:
        rows.append(("checkpoint", checkpoint))
    if next_command:
        rows.append(("next", next_command))
    lines += [f"  {label + ':':<11} {text}" for label, text in rows]
    stream = stream or sys.stderr
    stream.write("\n".join(lines) + "\n")
    stream.flush()
