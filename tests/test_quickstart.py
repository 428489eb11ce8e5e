"""examples/quickstart.py (`make quickstart DATA=dir/`): the layouts it reads, its refusals, and
the whole run on real English sentences nobody here wrote (Pang & Lee sentence polarity, from
../shared/material: test-only, skipped without it) on the packaged all-MiniLM-L6-v2."""

import os
import subprocess
import sys

import pytest
from _oracle import REPO, require_material

sys.path.insert(0, os.path.join(REPO, "examples"))
import quickstart  # noqa: E402


def write(folder, name, lines):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("train, expected", [
    (["sentence\tlabel", "good film\t1", "bad film\t0"], []),
    (["id\ttext_a\tlabel", "1\tgood\tpos"], []),
    (["good film\tpos", "bad film\tneg", "a dull one\tneg", "fine\tpos"],
     ["--column_names=sentence,label"]),
    (["pos\tgood film", "neg\tbad film", "neg\ta dull one", "pos\tfine"],
     ["--column_names=label,sentence"]),
    (["gj04\t1\t\tThe sailors rode the breeze clear of the rocks.",
      "gj04\t0\t*\tThe more we study verbs, the crazier they get get."],
     ["--column_names=source,label,mark,sentence", "--text_columns=sentence"]),
])
def test_layouts(tmp_path, train, expected):
    write(tmp_path, "train.tsv", train)
    write(tmp_path, "dev.tsv", train[-1:])
    assert quickstart.layout_flags(str(tmp_path)) == expected


@pytest.mark.parametrize("files, message", [
    ({"train.tsv": ["a\tb\tc"], "dev.tsv": ["a\tb\tc"]}, "train.tsv:1: 3 columns without a "
                                                         "header"),
    ({"train.tsv": ["sentence\tlabel"]}, "no dev.tsv"),
    ({}, "no train.tsv"),
])
def test_refusals_are_one_line(tmp_path, files, message):
    data = tmp_path / "data"
    data.mkdir()
    for name, lines in files.items():
        write(data, name, lines)
    proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "quickstart.py"),
                           str(data), f"--output_dir={tmp_path / 'out'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_foreign_output_dir_is_not_removed(tmp_path):
    write(tmp_path / "data", "train.tsv", ["sentence\tlabel", "good\t1"])
    write(tmp_path / "data", "dev.tsv", ["sentence\tlabel", "good\t1"])
    write(tmp_path / "mine", "notes.txt", ["keep me"])
    proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "quickstart.py"),
                           str(tmp_path / "data"), f"--output_dir={tmp_path / 'mine'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "holds files of something else" in proc.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me\n"


@pytest.mark.slow
def test_quickstart_on_real_english_sentences(tmp_path):
    """The quickstart run on Pang & Lee's headerless sentence<TAB>label lines (the header
    dropped, so the layout is found, not named), half an epoch (50 updates, a sixth of the
    default budget): a real accuracy, far from chance (0.5) and from a collapsed classifier. The
    same 50 updates from the model's config without its pretrained weights stay at chance, so
    the floor fails when --init_checkpoint is not loaded. Hugging Face with the same weights
    and the whole budget: bench/quickstart_hf.py (README quickstart)."""
    source = require_material("classification", "en_panglee_sentence_polarity")
    data = tmp_path / "data"
    for split in ("train", "dev"):
        lines = open(os.path.join(source, f"{split}.tsv"), encoding="utf-8").read().splitlines()
        assert lines[0] == "sentence\tlabel"
        write(data, f"{split}.tsv", lines[1:])
    proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "quickstart.py"),
                           str(data), f"--output_dir={tmp_path / 'out'}",
                           "--num_train_epochs=0.5"],
                          capture_output=True, text=True, timeout=3600,
                          env=dict(os.environ, BERT_MGPU_CACHE=str(tmp_path / "cache")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--column_names=sentence,label" in proc.stdout
    results = dict(line.split(" = ", 1) for line in
                   (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    accuracy = float(results["eval_accuracy"])
    assert results["eval_examples"] == "400" and accuracy >= 0.72, results
    assert f"dev accuracy {accuracy:.4f} on 400 examples" in proc.stdout
