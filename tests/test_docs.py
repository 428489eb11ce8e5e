"""README.md and docs/: every command a reader may copy says how it is checked, and what it
names exists.

Each fenced block of README.md and docs/*.md is preceded by a marker line:
- `<!-- command: tested by tests/test_x.py::test_name ... -->`: the named tests run it (or the
  same script with the same kind of flags on tiny files); each named test exists, and every
  top-level script the block runs is run by at least one named test file;
- `<!-- command: needs ... -->`: it needs what this machine cannot have (a download, docker, a
  GPU, a cluster), said in the marker;
- `<!-- command: by hand (...) -->`: a benchmark or a third-party tool, with the reason.
Relative links point to files that exist, and the README stays a front page.
"""

import ast
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(
    os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
    if name.endswith(".md"))
MARKER = re.compile(r"^<!-- command: (tested by|needs|by hand) (.+) -->$")
FENCE = re.compile(r"^\s*```")
SCRIPTS = {name for name in os.listdir(REPO) if name.endswith(".py")}


def _read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read().split("\n")


def code_blocks(path):
    """(line number of the opening fence, the line before it, the block's text) of each
    fenced block of `path`."""
    lines, blocks, start = _read(path), [], None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            if start is None:
                start = i
            else:
                blocks.append((start + 1, lines[start - 1] if start else "",
                               "\n".join(lines[start + 1:i])))
                start = None
    assert start is None, f"{path}:{start + 1}: a fence that never closes"
    return blocks


def _test_functions(test_file):
    with open(os.path.join(REPO, test_file), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def _check_tested_by(where, targets, block):
    files = []
    for target in targets.split():
        test_file, _, function = target.partition("::")
        assert os.path.isfile(os.path.join(REPO, test_file)), f"{where}: no {test_file}"
        if function:
            assert function in _test_functions(test_file), f"{where}: no {target}"
        files.append(test_file)
    sources = "\n".join("\n".join(_read(f)) for f in files)
    for script in sorted(set(re.findall(r"\b(\w+\.py)\b", block)) & SCRIPTS):
        named = script in sources or re.search(rf"[\"']{script[:-3]}[\"']", sources)
        assert named, f"{where}: none of {files} runs {script}"


@pytest.mark.parametrize("path", DOCS)
def test_every_code_block_says_how_it_is_checked(path):
    for line, before, block in code_blocks(path):
        where = f"{path}:{line}"
        marker = MARKER.match(before.strip())
        assert marker, f"{where}: a code block without a '<!-- command: ... -->' line before it"
        kind, rest = marker.groups()
        if kind == "tested by":
            _check_tested_by(where, rest, block)
        for target in re.findall(r"^\s*make (\w+)", block, re.M):
            assert target in _makefile_targets(), f"{where}: the Makefile has no {target}"
        for example in re.findall(r"\bexamples/[\w.]+", block):
            assert os.path.exists(os.path.join(REPO, example)), f"{where}: no {example}"


def _makefile_targets():
    return set(re.findall(r"^([\w-]+):", "\n".join(_read("Makefile")), re.M))


def test_make_targets_exist():
    """The README's set-up commands are the Makefile's targets (`.ci/run` runs `make test`)."""
    readme = "\n".join(block for _, _, block in code_blocks("README.md"))
    named = set(re.findall(r"^\s*make (\w+)", readme, re.M))
    assert {"demo", "test", "install"} <= named
    assert named <= _makefile_targets()
    assert "make test" in "\n".join(_read(".ci/run"))


@pytest.mark.parametrize("path", DOCS)
def test_relative_links_point_to_files(path):
    lines, prose, inside = _read(path), [], False
    for line in lines:
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            prose.append(line)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", "\n".join(prose)):
        if re.match(r"^[a-z]+:", target):
            continue
        resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(path), target))
        assert os.path.exists(resolved), f"{path}: the link to {target} leads nowhere"


def test_readme_is_a_front_page():
    """At most ~250 lines, opening with the two set-up commands; the rest lives in docs/."""
    lines = _read("README.md")
    assert len(lines) <= 250, len(lines)
    first_block = code_blocks("README.md")[0][2].split("\n")
    assert [line.split()[:2] for line in first_block] == [["make", "demo"], ["make", "test"]]


def _python_block(path, first_line):
    for _, _, block in code_blocks(path):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"{path}: no python block starting {first_line!r}")


def test_the_package_example_runs(tmp_path, monkeypatch):
    """docs/migrating.md's "Using the package" runs as written on a tiny model directory, and
    its comments state what it returns."""
    import json

    import numpy as np
    from _pretraining_data import TINY_CONFIG

    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model import modeling
    from bert_mgpu.model.bert_config import BertConfig

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY_CONFIG, vocab_size=len(vocab))
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    checkpoint.write_bundle(str(tmp_path / "bert_model.ckpt"),
                            modeling.BertModel(BertConfig(**config)).named_variables())
    monkeypatch.chdir(tmp_path)
    code = _python_block("docs/migrating.md", "from bert_mgpu import tokenization")
    ids = np.array([[2, 5, 6, 7, 8, 3]], np.int32)
    scope = {"lines": ["Hello, world!", "hello world"], "input_ids": ids,
             "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    exec(compile(code, "docs/migrating.md", "exec"), scope)
    assert scope["tokenizer"].tokenize("Hello, world!") == ["hello", ",", "world", "!"]
    assert "['hello', ',', 'world', '!']" in code
    out = scope["out"]
    assert out.sequence_output.shape == (1, 6, config["hidden_size"])
    assert out.pooled_output.shape == (1, config["hidden_size"])
    assert len(out.all_encoder_layers) == config["num_hidden_layers"]
