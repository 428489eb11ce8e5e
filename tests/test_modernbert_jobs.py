"""The scripts with a ModernBERT model: a Hugging Face folder (built by transformers, with a
ModernBERT-shaped byte-level BPE tokenizer.json trained by `tokenizers`) converted by
convert_hf_checkpoint.py and run by the script, against transformers' own outputs.

The first job of issue 50's section 3; the others (run_classifier*.py, run_ner.py, run_squad.py,
export_saved_model.py, run_pretraining.py) are not wired yet.
"""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
from _oracle import DATA, REPO, run_json_request, run_oracle_script

TEXTS = ["In the beginning God created the heaven and the earth.",
         "And the earth was without form ||| and void;   and darkness was upon the face."]


def _script(name, *flags):
    proc = subprocess.run([sys.executable, os.path.join(REPO, name), *flags],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_extract_features_equals_transformers(tmp_path):
    corpus = tmp_path / "corpus.txt"
    with gzip.open(os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8") as f:
        corpus.write_text("".join(f.readline() for _ in range(3000)), encoding="utf-8")
    hf = tmp_path / "hf"
    hf.mkdir()
    run_oracle_script("hf_bpe_tokenizer.py", "train", hf / "tokenizer.json", 1000, corpus)
    request = tmp_path / "texts.json"
    pairs = [t.split(" ||| ") for t in TEXTS if " ||| " in t]
    request.write_text(json.dumps({"texts": [t for t in TEXTS if " ||| " not in t],
                                   "pairs": pairs}), encoding="utf-8")
    run_oracle_script("hf_bpe_tokenizer.py", "encode", hf / "tokenizer.json", request,
                      tmp_path / "ids.json")
    encoded = json.loads((tmp_path / "ids.json").read_text(encoding="utf-8"))
    sequences = encoded["single"] + encoded["pairs"]
    vocab = json.loads((hf / "tokenizer.json").read_text(encoding="utf-8"))
    special = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    width = max(map(len, sequences))
    ids = [s + [special["[PAD]"]] * (width - len(s)) for s in sequences]
    mask = [[1] * len(s) + [0] * (width - len(s)) for s in sequences]
    config = {"vocab_size": len(vocab["model"]["vocab"]) + len(special), "hidden_size": 32,
              "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 24,
              "max_position_embeddings": 512, "local_attention": 8,
              "pad_token_id": special["[PAD]"], "bos_token_id": special["[CLS]"],
              "eos_token_id": special["[SEP]"], "cls_token_id": special["[CLS]"],
              "sep_token_id": special["[SEP]"]}
    run_json_request("hf_modernbert.py", {
        "save_dir": str(hf), "new": True, "seed": 3, "config": config, "input_ids": ids,
        "attention_mask": mask, "out": str(tmp_path / "hf.npz")}, tmp_path)
    reference = np.load(tmp_path / "hf.npz")["sdpa_last"]

    ours = tmp_path / "ours"
    _script("convert_hf_checkpoint.py", f"--hf_model_dir={hf}", f"--output_dir={ours}")
    (tmp_path / "input.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    _script("extract_features.py", f"--input_file={tmp_path / 'input.txt'}",
            f"--output_file={tmp_path / 'out.jsonl'}", f"--vocab_file={ours}/tokenizer.json",
            f"--bert_config_file={ours}/bert_config.json",
            f"--init_checkpoint={ours}/bert_model.ckpt", "--layers=-1", "--max_seq_length=64",
            "--do_lower_case=false")
    inverse = {i: t for t, i in vocab["model"]["vocab"].items()}
    inverse.update({i: t for t, i in special.items()})
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(sequences)
    for row, (line, sequence) in enumerate(zip(lines, sequences)):
        features = json.loads(line)["features"]
        assert [f["token"] for f in features] == [inverse[i] for i in sequence]
        values = np.array([f["layers"][0]["values"] for f in features])
        # extract_features.py writes 6 decimals, as Google's.
        np.testing.assert_allclose(values, reference[row, :len(sequence)], atol=2e-6)
