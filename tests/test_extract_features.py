"""extract_features.py: Google's output format, every line, and real-weights parity.

The parity reference is Hugging Face's BertModel run on all-MiniLM-L6-v2
(`../shared/material/fixtures/minilm_reference/hf_reference.npz`): `seq_gelu_new` with the tanh
GELU Google's BERT computes, `seq_gelu` with the exact erf GELU. The weights go through our
converter and our script, so the whole chain is checked against an independent implementation.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _oracle import REPO, minilm_model_dir, require_material

from bert_mgpu import tokenization
from bert_mgpu.data.sequence import pack_tokens, truncate_seq_pair
from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.tasks import features as feature_extraction


def detokenize(tokens):
    """WordPiece tokens -> a text that the uncased tokenizer maps back to the same tokens."""
    return " ".join(tokens).replace(" ##", "")


@pytest.fixture(scope="module")
def reference():
    path = require_material("fixtures", "minilm_reference", "hf_reference.npz")
    return dict(np.load(path))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    model_dir = minilm_model_dir()
    out = tmp_path_factory.mktemp("minilm")
    return {gelu: hf_checkpoint.convert_folder(model_dir, str(out / gelu), gelu=gelu)
            for gelu in ("tanh", "exact")}


def reference_lines(reference, tokenizer):
    """The fixture's 3 pairs as `a ||| b` lines, checked to tokenize back to the same ids."""
    lines = []
    for ids, types, mask in zip(reference["input_ids"], reference["token_type_ids"],
                                reference["attention_mask"]):
        n = int(mask.sum())
        tokens = tokenizer.convert_ids_to_tokens(ids[:n].tolist())
        sep = tokens.index("[SEP]")
        lines.append(f"{detokenize(tokens[1:sep])} ||| {detokenize(tokens[sep + 1:n - 1])}")
        packed = pack_tokens(*[tokenizer.tokenize(t) for t in lines[-1].split(" ||| ")],
                             len(ids), tokenizer.convert_tokens_to_ids)
        assert packed.input_ids == ids.tolist() and packed.segment_ids == types.tolist()
    return lines


def run_script(args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(REPO, "extract_features.py"), *args],
                          capture_output=True, text=True, timeout=timeout)


# Lines of Google's layout test (test_google_json_layout_and_every_line): a plain line, an
# empty one, a pair, one longer than --max_seq_length and a last line without a newline.
LAYOUT_TEXT = ("Hello world\n\nA pair ||| of texts\n" + "word " * 200 +
               "\nlast line without newline")


@pytest.fixture(scope="module")
def tanh_run(converted, tmp_path_factory):
    """One extract_features.py run on the tanh checkpoint, Google's defaults (--layers
    -1,-2,-3,-4, lower case) at --max_seq_length=32, --batch_size=3: the fixture's 3 reference
    pairs (when the material is there; the tanh parity test) followed by LAYOUT_TEXT's 5 lines
    (the layout test). Outputs do not depend on their neighbours in a batch (no dropout).

    Returns: (CompletedProcess, its directory, the output's raw lines, the number of reference
        lines first in it).
    """
    paths = converted["tanh"]
    try:
        lines = reference_lines(
            dict(np.load(require_material("fixtures", "minilm_reference", "hf_reference.npz"))),
            tokenization.FullTokenizer(paths["vocab"], do_lower_case=True))
    except pytest.skip.Exception:
        lines = []
    d = tmp_path_factory.mktemp("tanh_run")
    (d / "in.txt").write_text("".join(line + "\n" for line in lines) + LAYOUT_TEXT)
    proc = run_script([f"--input_file={d / 'in.txt'}", f"--output_file={d / 'out.jsonl'}",
                       f"--vocab_file={paths['vocab']}",
                       f"--bert_config_file={paths['bert_config']}",
                       f"--init_checkpoint={paths['checkpoint']}", "--max_seq_length=32",
                       "--batch_size=3"])
    raw = (d / "out.jsonl").read_text().splitlines() if proc.returncode == 0 else []
    return proc, d, raw, len(lines)


@pytest.mark.parametrize("gelu,key", [("tanh", "seq_gelu_new"), ("exact", "seq_gelu")])
def test_minilm_parity_through_the_script(converted, reference, tmp_path, tanh_run, gelu, key):
    """The reference lines through the script: the tanh GELU in `tanh_run` (with Google's
    default flags), the exact one in a run of its own (--layers and --do_lower_case given)."""
    paths = converted[gelu]
    if gelu == "tanh":
        proc, _, raw, n_reference = tanh_run
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert n_reference == 3
        outputs = [json.loads(line) for line in raw[:n_reference]]
    else:
        tokenizer = tokenization.FullTokenizer(paths["vocab"], do_lower_case=True)
        lines = reference_lines(reference, tokenizer)
        input_file = tmp_path / "input.txt"
        input_file.write_text("\n".join(lines) + "\n")
        output_file = tmp_path / "output.jsonl"
        proc = run_script([f"--input_file={input_file}", f"--output_file={output_file}",
                           f"--vocab_file={paths['vocab']}",
                           f"--bert_config_file={paths['bert_config']}",
                           f"--init_checkpoint={paths['checkpoint']}", "--layers=-1,-2",
                           "--max_seq_length=32", "--batch_size=2", "--do_lower_case=true"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs = [json.loads(line) for line in output_file.read_text().splitlines()]
    assert [o["linex_index"] for o in outputs] == [0, 1, 2]
    worst = 0.0
    for row, out in enumerate(outputs):
        n = int(reference["attention_mask"][row].sum())
        assert len(out["features"]) == n
        values = np.array([f["layers"][0]["values"] for f in out["features"]])
        assert [f["layers"][0]["index"] for f in out["features"]] == [-1] * n
        worst = max(worst, np.abs(values - reference[key][row, :n]).max())
    assert worst <= 1e-5, worst


def test_pooled_output_parity(converted, reference):
    from bert_mgpu.model.bert_config import BertConfig
    paths = converted["tanh"]
    extractor = feature_extraction.FeatureExtractor(
        BertConfig.from_json_file(paths["bert_config"]), paths["checkpoint"], [-1], 32)
    out = extractor.model(reference["input_ids"], reference["attention_mask"],
                          reference["token_type_ids"], training=False)
    np.testing.assert_allclose(out.pooled_output, reference["pool_gelu_new"], atol=1e-5, rtol=0)


def test_google_json_layout_and_every_line(tanh_run):
    """LAYOUT_TEXT's lines, after the `n` reference lines of the same run (`tanh_run`)."""
    proc, d, raw, n = tanh_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(raw) == n + 5
    # Key order and spacing are json.dumps of Google's OrderedDicts.
    assert raw[n].startswith(f'{{"linex_index": {n}, "features": [{{"token": "[CLS]", '
                             '"layers": [{"index": -1, "values": [')
    outputs = [json.loads(line) for line in raw[n:]]
    assert [o["linex_index"] for o in outputs] == list(range(n, n + 5))
    assert [f["token"] for f in outputs[0]["features"]] == ["[CLS]", "hello", "world", "[SEP]"]
    assert [f["token"] for f in outputs[1]["features"]] == ["[CLS]", "[SEP]"]
    assert [f["token"] for f in outputs[2]["features"]] == [
        "[CLS]", "a", "pair", "[SEP]", "of", "texts", "[SEP]"]
    assert len(outputs[3]["features"]) == 32  # truncated to max_seq_length, with a warning
    assert f"1 of {n + 5} input line(s) of" in proc.stderr and \
        f"(the first: line {n + 4})" in proc.stderr
    assert [f["token"] for f in outputs[4]["features"]] == [
        "[CLS]", "last", "line", "without", "new", "##line", "[SEP]"]  # the last line, whole
    layers = outputs[0]["features"][0]["layers"]
    assert [layer["index"] for layer in layers] == [-1, -2, -3, -4]
    assert len(layers[0]["values"]) == 384
    for value in layers[0]["values"]:
        assert value == round(value, 6)
    assert sorted(os.listdir(d)) == ["in.txt", "out.jsonl"]  # no temporary left


def test_bad_input_is_one_line_naming_the_flag(converted, tmp_path):
    paths = converted["tanh"]
    common = [f"--output_file={tmp_path / 'o.jsonl'}", f"--vocab_file={paths['vocab']}",
              f"--bert_config_file={paths['bert_config']}",
              f"--init_checkpoint={paths['checkpoint']}"]
    proc = run_script([f"--input_file={tmp_path / 'missing.txt'}"] + common)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].endswith("missing.txt not found")
    (tmp_path / "in.txt").write_text("x\n")
    proc = run_script([f"--input_file={tmp_path / 'in.txt'}", "--layers=-7"] + common)
    assert proc.returncode == 1 and "--layers: index -7" in proc.stderr.strip().splitlines()[-1]
    assert not os.path.exists(tmp_path / "o.jsonl")


def test_truncate_seq_pair_takes_from_the_longer():
    a, b = list("abcdef"), list("xyz")
    truncate_seq_pair(a, b, 6)
    assert a == list("abc") and b == list("xyz")
    a, b = list("ab"), list("xy")
    truncate_seq_pair(a, b, 3)
    assert a == list("ab") and b == list("x")  # on a tie b loses a token


def test_a_second_text_without_tokens_is_no_second_text():
    """Google's `if tokens_b:` (run_classifier.convert_single_example, extract_features): an
    empty second text leaves the single-text budget (max_seq_length - 2) and no second [SEP]."""
    ids = lambda tokens: list(range(len(tokens)))  # noqa: E731
    for empty in ([], None):
        packed = pack_tokens(list("abcdefgh"), empty, 6, ids)
        assert packed.tokens == ["[CLS]", "a", "b", "c", "d", "[SEP]"]
        assert packed.segment_ids == [0] * 6
    # A real second text: the pair budget (max_seq_length - 3), the longer text cut first.
    packed = pack_tokens(list("abcdefgh"), ["x"], 6, ids)
    assert packed.tokens == ["[CLS]", "a", "b", "[SEP]", "x", "[SEP]"]
