"""The package's layout holds (../shared/DESIGN.md, "Module map"): each folder imports only the
layers below it, no module imports itself back through others (no cycles, function-local imports
included), the modules the scripts load to check flags and files import no TensorFlow, and no
function is longer than 60 lines but those that follow Google's step for step."""

import ast
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "bert_mgpu")

# Component (first name under bert_mgpu) -> what it may import: DESIGN.md's module map, edge for
# edge. An entry is a component, or one module of it where the map names one ("engine.checkpoint":
# the serving export and the converters read checkpoints, nothing else of the trainer). Two
# departures, named in the map's notes: data's file checks read a run's bert_config.json
# (model.bert_config, TensorFlow-free) before TensorFlow loads; `progress` (progress lines with
# counts, rate and ETA) is a leaf every long job uses, as is `summary` (the block every script
# ends with: result, files, checkpoint, next command), and `scripts` (what every top-level
# script shares) sits on cli and, to run every script on a Hugging Face model named by
# --init_checkpoint, on interop.pretrained (a layer below it). `test_every_allowed_edge_is_used`
# keeps this table from growing stale.
ALLOWED = {
    "progress": set(),
    "summary": {"progress"},
    "configs": set(),
    "tokenization": set(),
    "metrics": set(),
    "model": set(),  # the map allows configs; nothing of model/ needs it now
    "data": {"tokenization", "configs", "metrics", "model.bert_config", "progress"},
    "engine": {"configs", "model", "data.input_pipeline", "metrics.collapse", "progress",
               "summary"},
    "tasks": {"engine", "model", "data", "metrics", "configs", "progress"},
    "serving": {"model", "tokenization", "configs", "engine.checkpoint"},
    "interop": {"model", "engine.checkpoint", "configs"},
    "compat": {"model", "engine", "data", "tokenization"},
    "cli": {"configs"},
    "scripts": {"cli", "interop.pretrained"},
}


def _allows(own: str, imported: str) -> bool:
    """Whether component `own` may import module `imported` (bert_mgpu.x.y)."""
    rest = imported.split(".", 1)[1]
    return any(rest == entry or rest.startswith(entry + ".") for entry in ALLOWED[own])


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
            if _component(imported) != own and not _allows(own, imported):
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)
    assert set(ALLOWED) == {_component(m) for m in modules if m != "bert_mgpu"}


def test_every_allowed_edge_is_used():
    """The table holds the edges the code has, and no more: an allowance nothing uses is stale
    (the map says the layers may talk where they do not)."""
    modules = _modules()
    used = {(own, entry) for own, entries in ALLOWED.items() for entry in entries
            for module, path in modules.items()
            if module != "bert_mgpu" and _component(module) == own
            for imported in _imports(path, modules)
            if imported.split(".", 1)[1] == entry
            or imported.split(".", 1)[1].startswith(entry + ".")}
    stale = sorted(f"{own} -> {entry}" for own, entries in ALLOWED.items() for entry in entries
                   if (own, entry) not in used)
    assert not stale, ", ".join(stale)


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
    "bert_mgpu.configs.distill",
    "bert_mgpu.model.bert_config", "bert_mgpu.model.head_spec",
    # The jobs' checks of their files, run by the scripts before TensorFlow loads.
    "bert_mgpu.data.checks", "bert_mgpu.data.input_pipeline", "bert_mgpu.data.user_processors",
    "bert_mgpu.data.squad_data", "bert_mgpu.data.ner_data",
    # --init_checkpoint=hf:... is located and checked before TensorFlow loads.
    "bert_mgpu.interop.pretrained", "bert_mgpu.scripts"])
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


# Functions that follow Google's code (or the official SQuAD evaluation) step for step, kept in
# one piece so they can be read beside the original: the only ones allowed past the limit.
LONG_AS_GOOGLE = {
    "bert_mgpu.data.squad_data.read_squad_examples",  # run_squad.py read_squad_examples
    "bert_mgpu.data.squad_data.convert_examples_to_features",  # run_squad.py, same name
    "bert_mgpu.data.squad_predictions.compute_predictions",  # run_squad.py write_predictions
    "bert_mgpu.metrics.squad.evaluate_v2",  # evaluate-v2.0.py's main
}
MAX_FUNCTION_LINES = 60


def test_functions_are_at_most_60_lines():
    """Every function, from its `def` to its last line (docstring included), fits in 60 lines,
    except the ones that mirror Google's step for step (LONG_AS_GOOGLE)."""
    long = []
    for module, path in sorted(_modules().items()):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and f"{module}.{node.name}" not in LONG_AS_GOOGLE:
                    long.append(f"{module}.{node.name} ({path}:{node.lineno}): {lines} lines")
    assert not long, "\n".join(long)
    names = {f"{m}.{n.name}" for m, p in _modules().items()
             for n in ast.walk(ast.parse(open(p, encoding="utf-8").read()))
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert LONG_AS_GOOGLE <= names, sorted(LONG_AS_GOOGLE - names)
