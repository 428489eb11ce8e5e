"""tests/_third_party.py: users' files read from their repositories' snapshots at pinned commits
(the bytes checked by SHA-256), one-line skips without them, processors files assembled from
line ranges. On a git repository made here, so that it runs without any snapshot."""

import hashlib
import subprocess

import _third_party
import pytest

FIRST = b"class AProcessor(object):\n  pass\n\n\ndef main(_):\n  processors = {'a': AProcessor}\n"


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def snapshots(tmp_path, monkeypatch):
    """A root with owner+name/.git (a plain clone's layout): run_classifier.py committed, then
    an unrelated change on top. Returns (root, the first commit, the second commit)."""
    repo = tmp_path / "root" / "someone+bert"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "run_classifier.py").write_bytes(FIRST)
    _git(repo, "add", "run_classifier.py")
    _git(repo, "commit", "-q", "-m", "first")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "README").write_text("x\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "second")
    monkeypatch.setattr(_third_party, "ROOT", str(tmp_path / "root"))
    return tmp_path / "root", first, _git(repo, "rev-parse", "HEAD")


def _source(commit, data=FIRST):
    return _third_party.Source("someone/bert", commit, "run_classifier.py",
                               hashlib.sha256(data).hexdigest())


def test_the_file_at_the_pinned_commit_and_its_processors_file(snapshots, monkeypatch, tmp_path):
    root, first, _ = snapshots
    monkeypatch.setitem(_third_party.SOURCES, "x/run_classifier.py", _source(first))
    assert _third_party.read("x/run_classifier.py") == FIRST
    path = _third_party.write("x/run_classifier.py", tmp_path / "out")
    assert open(path, "rb").read() == FIRST
    monkeypatch.setitem(_third_party.PROCESSORS_FILES, "p.py", [
        "import os\n", ("x/run_classifier.py", 1, 2), ("x/run_classifier.py", 5, None)])
    text = open(_third_party.processors_file("p.py", tmp_path / "pasted"), "rb").read()
    assert text == (b"# Added for the test: the imports the classes below need.\nimport os\n\n"
                    b"# someone/bert@" + first[:12].encode() + b" run_classifier.py lines 1-2\n"
                    b"class AProcessor(object):\n  pass\n\n"
                    b"# someone/bert@" + first[:12].encode() + b" run_classifier.py lines 5-6\n"
                    b"def main(_):\n  processors = {'a': AProcessor}\n")


def test_a_wrong_hash_at_the_pinned_commit_fails(snapshots, monkeypatch):
    _, first, _ = snapshots
    monkeypatch.setitem(_third_party.SOURCES, "x/run_classifier.py", _source(first, b"other"))
    with pytest.raises(AssertionError, match=r"someone/bert run_classifier\.py at .*: sha256"):
        _third_party.read("x/run_classifier.py")


def test_without_the_pinned_commit_the_heads_file_is_used_only_if_it_is_the_same(
        snapshots, monkeypatch):
    root, first, second = snapshots
    absent = "0" * 40
    monkeypatch.setitem(_third_party.SOURCES, "x/run_classifier.py", _source(absent))
    assert _third_party.read("x/run_classifier.py") == FIRST  # HEAD's file has the same bytes
    monkeypatch.setitem(_third_party.SOURCES, "x/run_classifier.py",
                        _source(absent, b"changed\n"))
    with pytest.raises(pytest.skip.Exception, match=r"someone/bert run_classifier\.py: the "
                                                    r"snapshot .* has no commit 0{40} and its "
                                                    r"HEAD " + second[:12] + " has other bytes"):
        _third_party.read("x/run_classifier.py")


def test_without_a_snapshot_the_test_skips(tmp_path, monkeypatch):
    monkeypatch.setattr(_third_party, "ROOT", str(tmp_path))
    monkeypatch.setitem(_third_party.SOURCES, "x/run_classifier.py", _source("1" * 40))
    with pytest.raises(pytest.skip.Exception, match=r"^third-party file not available: "
                                                    r"someone/bert run_classifier\.py: no "
                                                    r"snapshot of someone/bert in "):
        _third_party.read("x/run_classifier.py")
