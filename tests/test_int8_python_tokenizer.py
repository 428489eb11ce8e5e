"""The int8 runner's Python tokenizer (serving/int8_runner.PythonTokenizer): the same ids as the
export's `tokenize` / `tokenize_pair` signatures it replaces, on Google's tokenization fixtures
(../shared/material, skipped without), real pairs and truncation's edges; and the fall back to
the signatures when an export has no options file."""

import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, require_material

from bert_mgpu.serving import int8
from bert_mgpu.serving.classifier import ClassifierServing
from bert_mgpu.serving.int8_runner import PYTHON_TOKENIZER_FILE, PythonTokenizer
from bert_mgpu.serving.tokenizer import ServingTokenizer

pytest.importorskip("tensorflow_text")

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
NAMES = ("input_ids", "input_mask", "segment_ids")


def _export(directory, **options):
    """The int8 export's tokenizer SavedModel (and its options file) of a ServingTokenizer."""
    # What int8.write_int8 saves beside the LiteRT model, for a classifier's tokenizer alone.
    model = types.SimpleNamespace(tokenizer=ServingTokenizer(VOCAB, **options),
                                  task_module=None, labels=tf.constant(["0", "1"]),
                                  head=types.SimpleNamespace(multi_label=False))
    side = int8.SideModule(model)
    tf.saved_model.save(side, str(directory),
                        signatures=ClassifierServing().int8_signatures(side, model))
    int8.write_python_tokenizer_options(model.tokenizer, str(directory))
    return str(directory)


@pytest.fixture(scope="module")
def texts():
    """Real text and edge cases: Google's fixture lines when the material is there, and a few
    texts long enough to be cut at every max_seq_length below."""
    own = ["Hello, WORLD! naïve café", "", "\u200b", "ｆｕｌｌ　ｗｉｄｔｈ", "don't stop",
           " ".join(f"word{i} and, more" for i in range(40)), "a " * 30, "b"]
    try:
        path = require_material("fixtures", "tokenization",
                                "google_fulltokenizer_en_uncased.jsonl")
    except pytest.skip.Exception:
        return own
    with open(path, encoding="utf-8") as f:
        return own + [json.loads(line)["text"] for line in f]


def _signature(directory, text_a, text_b=None):
    signatures = tf.saved_model.load(directory).signatures
    if text_b is None:
        out = signatures["tokenize"](text_a=tf.constant(text_a))
    else:
        out = signatures["tokenize_pair"](text_a=tf.constant(text_a),
                                          text_b=tf.constant(text_b))
    return [out[name].numpy() for name in NAMES]


@pytest.mark.parametrize("options", [
    dict(max_seq_length=128), dict(max_seq_length=12),
    dict(max_seq_length=12, truncation="head_tail", head_tokens=4),
    dict(max_seq_length=9, truncation="head_tail", head_tokens=20),
    dict(max_seq_length=16, do_lower_case=False)])
def test_python_ids_equal_the_signatures(tmp_path, texts, options):
    directory = _export(tmp_path / "tok", **options)
    python = PythonTokenizer.load(directory)
    assert python is not None
    # Pairs of every kind: both texts, an empty second text, texts of unequal lengths.
    text_b = ["" if i % 4 == 0 else texts[(7 * i + 3) % len(texts)]
              for i in range(len(texts))]
    for args in ((texts,), (texts, text_b), (texts[::-1], texts)):
        want = _signature(directory, *args)
        got = python(*args)
        for name, w, g in zip(NAMES, want, got):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} {options} {len(args)}")
    # Truncation ran: some rows are full.
    assert (got[1].sum(axis=1) == options["max_seq_length"]).any()


def test_without_options_file_the_runner_keeps_the_signatures(tmp_path):
    directory = _export(tmp_path / "tok", max_seq_length=32)
    os.remove(os.path.join(directory, "assets", PYTHON_TOKENIZER_FILE))
    assert PythonTokenizer.load(directory) is None


def test_a_copy_next_to_the_runner_needs_no_package(tmp_path):
    """The runner and tokenization.py copied into a folder, loaded by a Python that cannot
    import bert_mgpu: the Python tokenizer is used and gives the signatures' ids."""
    import subprocess
    import sys

    from _oracle import REPO
    from _serving import ENV

    directory = _export(tmp_path / "tok", max_seq_length=24)
    server = tmp_path / "server"
    server.mkdir()
    for path in ("bert_mgpu/serving/int8_runner.py", "bert_mgpu/tokenization.py"):
        shutil.copy(os.path.join(REPO, path), server)
    code = f"""
import json, sys
sys.modules["bert_mgpu"] = None  # the package cannot be imported (a server without it)
sys.path.insert(0, {str(server)!r})
import int8_runner
assert int8_runner._tokenization_module().__file__.startswith({str(server)!r})
tok = int8_runner.PythonTokenizer.load({directory!r})
print(json.dumps([x.tolist() for x in tok(["a copied runner", "tokenizes alone"])]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    want = _signature(directory, ["a copied runner", "tokenizes alone"])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
