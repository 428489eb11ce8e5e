"""bench/ scripts are run by hand, so nothing else notices when a package name they import moves:
every `from bert_mgpu... import NAME` and `import bert_mgpu...` in bench/*.py (function-local
imports included) must resolve against the package as it is now."""

import ast
import glob
import importlib
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package_imports(path):
    """(line, module, name or None) of each import of the package in the file at `path`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bert_mgpu"):
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bert_mgpu"):
                    yield node.lineno, alias.name, None


def _resolves(module, name):
    imported = importlib.import_module(module)
    if name is None or hasattr(imported, name):
        return True
    try:  # `from package import submodule`
        importlib.import_module(f"{module}.{name}")
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "bench", "*.py"))),
                         ids=os.path.basename)
def test_every_package_import_of_a_bench_resolves(path):
    missing = [f"{os.path.basename(path)}:{line}: {module}{'.' + name if name else ''}"
               for line, module, name in _package_imports(path) if not _resolves(module, name)]
    assert not missing, "bench imports that no longer exist: " + ", ".join(missing)


def test_a_moved_name_is_caught(tmp_path):
    """The check itself: a name the package does not have is reported."""
    bench = tmp_path / "old_bench.py"
    bench.write_text("def run():\n    from bert_mgpu.tasks.base import make_tokenizer\n")
    assert [(line, module, name) for line, module, name in _package_imports(str(bench))] == [
        (2, "bert_mgpu.tasks.base", "make_tokenizer")]
    assert not _resolves("bert_mgpu.tasks.base", "make_tokenizer")
