"""The package's layout holds (../shared/DESIGN.md, "Module map"): each folder imports only the
layers below it, no module imports itself back through others (no cycles, function-local imports
included), and the modules cli.py loads to check flags import no TensorFlow."""

import ast
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "bert_mgpu")

# Component (first name under bert_mgpu) -> the components it may import. DESIGN.md's table, plus
# the departures README's "Architecture" names: the trainer reads batches through
# data/input_pipeline.py and judges evaluation results for collapse (metrics/collapse.py), the
# NER data module writes conlleval's tags (metrics/ner.py), the data module's checks of a run's
# files read its bert_config.json (model/bert_config.py, before TensorFlow loads), and the
# serving export and the converters read checkpoints (engine/checkpoint.py).
ALLOWED = {
    "progress": set(),
    "configs": set(),
    "tokenization": set(),
    "metrics": {"tokenization"},
    "model": {"configs"},
    "data": {"configs", "tokenization", "model", "metrics", "progress"},
    "engine": {"configs", "model", "data", "metrics", "progress"},
    "tasks": {"configs", "tokenization", "model", "data", "metrics", "engine", "progress"},
    "serving": {"configs", "tokenization", "model", "engine"},
    "interop": {"configs", "model", "engine", "serving"},
    "cli": {"configs"},
    "scripts": {"cli"},
}


def _modules():
    """bert_mgpu.* module name -> its file."""
    found = {}
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                found[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return found


def _imports(path, modules):
    """The bert_mgpu modules a file imports anywhere in it (function-local imports too)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("bert_mgpu"))
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("bert_mgpu"):
            for alias in node.names:  # `from bert_mgpu.tasks import classifier` is a module
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in modules else node.module)
    return {m for m in out if m in modules and m != "bert_mgpu"}


def _component(module):
    return module.split(".")[1]


def test_each_component_imports_only_the_layers_below_it():
    modules = _modules()
    wrong = []
    for module, path in sorted(modules.items()):
        if module == "bert_mgpu":
            continue
        own = _component(module)
        for imported in sorted(_imports(path, modules)):
            other = _component(imported)
            if other != own and other not in ALLOWED[own]:
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)
    assert set(ALLOWED) == {_component(m) for m in modules if m != "bert_mgpu"}


def test_no_import_cycles():
    modules = _modules()
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("module", [
    "bert_mgpu.cli", "bert_mgpu.configs.base", "bert_mgpu.configs.classifier",
    "bert_mgpu.configs.pretraining", "bert_mgpu.configs.squad", "bert_mgpu.configs.ner",
    "bert_mgpu.configs.serving", "bert_mgpu.configs.vocab", "bert_mgpu.configs.features",
    "bert_mgpu.model.bert_config", "bert_mgpu.model.head_spec",
    # The jobs' checks of their files, run by the scripts before TensorFlow loads.
    "bert_mgpu.data.checks", "bert_mgpu.data.input_pipeline", "bert_mgpu.data.user_processors",
    "bert_mgpu.data.squad_data", "bert_mgpu.data.ner_data"])
def test_flag_checking_modules_load_no_tensorflow(module):
    code = f"import sys, {module}; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False", module


def test_every_traced_function_skips_autograph():
    """Every `tf.function` of the package passes `autograph=False`: its code branches and loops
    over tensors with tf.cond / tf.while_loop itself, and AutoGraph's conversion of every
    function a trace calls (parsing and rewriting its source) was a third of a small
    fine-tuning run's CPU (README, Architecture). A Python `if` on a tensor then fails at the
    trace, loudly."""
    missing = []
    for module, path in sorted(_modules().items()):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            call = node if isinstance(node, ast.Call) else None
            if call is None or ast.unparse(call.func) != "tf.function":
                continue
            if not any(k.arg == "autograph" and isinstance(k.value, ast.Constant)
                       and k.value.value is False for k in call.keywords):
                missing.append(f"{module}:{call.lineno}")
        for node in ast.walk(tree):  # a bare `@tf.function` decorator
            for deco in getattr(node, "decorator_list", []):
                if ast.unparse(deco) == "tf.function":
                    missing.append(f"{module}:{deco.lineno}")
    assert not missing, "tf.function without autograph=False: " + ", ".join(missing)
