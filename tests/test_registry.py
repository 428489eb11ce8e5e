"""The one task registry (bert_mgpu/configs/registry.py): each job's config module registers its
task once; the export's --task and the export itself find a new task by its files alone."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from bert_mgpu.configs import registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TOY_CONFIG = '''
from bert_mgpu.configs.registry import RegisteredTask, register

register(RegisteredTask("toy", "'toy' (a toy task's outputs)", serving="bert_mgpu.serving.toy"))
'''
_TOY_SERVING = '''
from bert_mgpu.serving.task import TaskServing


class ToyServing(TaskServing):
    def outputs(self, head, bert_out, input_mask):
        return {"pooled_output": bert_out.pooled_output}


SERVING = ToyServing()
'''
_PROBE = '''
import json, sys
from absl import flags
import export_saved_model  # defines the script's flags
from bert_mgpu.serving import export
task = flags.FLAGS["task"]
print(json.dumps({"enum": task.parser.enum_values, "help": task.help,
                  "serving": type(export.task_serving("toy")).__name__}))
'''


def test_every_job_registers_its_task_once():
    tasks = registry.tasks()
    assert list(tasks) == ["classifier", "features", "multiple_choice", "ner", "squad"]
    assert tasks["squad"].options is not None and tasks["classifier"].types
    assert registry.task_type("regression").hf_problem_type == "regression"
    with pytest.raises(ValueError, match="is registered twice"):
        registry.register(registry.RegisteredTask("squad", "", serving="elsewhere"))
    with pytest.raises(ValueError, match=r"--task must be one of classifier, features, "
                                         r"multiple_choice, ner, squad"):
        registry.task("nothing")


def test_a_new_task_is_found_by_its_files_alone(tmp_path):
    """A copy of the package plus two new files (a config module that registers a task and its
    serving module), no other file edited: export_saved_model.py offers --task=toy, says what
    it returns, and the export finds its serving."""
    shutil.copytree(os.path.join(REPO, "bert_mgpu"), tmp_path / "bert_mgpu",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "export_saved_model.py"), tmp_path)
    (tmp_path / "bert_mgpu" / "configs" / "toy.py").write_text(_TOY_CONFIG)
    (tmp_path / "bert_mgpu" / "serving" / "toy.py").write_text(_TOY_SERVING)
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path), CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["enum"] == ["classifier", "features", "multiple_choice", "ner", "squad", "toy"]
    assert out["help"].endswith("or 'toy' (a toy task's outputs).")
    assert out["serving"] == "ToyServing"
