"""The scripts with a ModernBERT model: Hugging Face folders (built by transformers, with a
ModernBERT-shaped byte-level BPE tokenizer.json trained by `tokenizers`) converted by
convert_hf_checkpoint.py and run by the scripts.

extract_features.py equals transformers' own outputs. run_classifier.py / run_classifier_mgpu.py
fine-tune a converted `ModernBertForSequenceClassification` with dropout 0.1 (embeddings, MLP,
attention, classifier_dropout): 2 towers x 2 x 2 accumulated, gradient checkpointing, killed by
SIGKILL and rerun end with the weights of 1 tower x 8 run through. run_ner.py and run_squad.py
fine-tune a converted masked-LM folder end to end (its head initialises the token head, as
transformers' from_pretrained does), with the words and answers cut into BPE pieces in running
text; run_multiple_choice.py on real SWAG-format data. The heads' numbers against transformers:
tests/test_modernbert_finetune.py. Each fine-tuned run back to transformers by convert_to_hf.py
(its ModernBertFor* model, logits equal to ours); the SQuAD and NER runs exported with the
tokenizer.json in the graph give their own predictions from raw text.
"""

import csv
import gzip
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from _launch import Launched, final_tensors, finish_killed, signal_at_checkpoint
from _oracle import DATA, REPO, require_material, run_json_request, run_oracle_script
from _together import run_command, started, with_the_module

from bert_mgpu import tokenization
from bert_mgpu.data import ner_data, squad_data

TEXTS = ["In the beginning God created the heaven and the earth.",
         "And the earth was without form ||| and void;   and darkness was upon the face."]
# The tiny encoder of every folder here (sequences longer than the window of 8; layers 0 and 3
# global); the token ids come from the tokenizer.
ENCODER = {"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
           "intermediate_size": 24, "max_position_embeddings": 512, "local_attention": 8}
# Hugging Face's dropouts, converted to hidden_dropout_prob, attention_probs_dropout_prob and
# classifier_dropout: every dropout of the fine-tuning runs on.
DROPOUT = {"embedding_dropout": 0.1, "mlp_dropout": 0.1, "attention_dropout": 0.1,
           "classifier_dropout": 0.1}


def _script(name, *flags):
    proc = subprocess.run([sys.executable, os.path.join(REPO, name), *flags],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """(tokenizer.json trained on the first 3,000 KJV verses, its special tokens -> ids,
    its vocabulary size)."""
    root = tmp_path_factory.mktemp("bpe")
    corpus = root / "corpus.txt"
    with gzip.open(os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8") as f:
        corpus.write_text("".join(f.readline() for _ in range(3000)), encoding="utf-8")
    path = root / "tokenizer.json"
    run_oracle_script("hf_bpe_tokenizer.py", "train", path, 1000, corpus)
    vocab = json.loads(path.read_text(encoding="utf-8"))
    special = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    return path, special, len(vocab["model"]["vocab"]) + len(special)


def _hf_config(bpe, **keys):
    _, special, vocab_size = bpe
    return dict(ENCODER, vocab_size=vocab_size, pad_token_id=special["[PAD]"],
                bos_token_id=special["[CLS]"], eos_token_id=special["[SEP]"],
                cls_token_id=special["[CLS]"], sep_token_id=special["[SEP]"], **keys)


def test_extract_features_equals_transformers(folders, tmp_path):
    """extract_features.py on the converted masked-LM folder: the tokens of `tokenizers` and
    the last layer of transformers' `ModernBertModel` (sdpa) for single texts and a pair."""
    ours, (sequences, reference) = folders["masked_lm"], folders["masked_lm_reference"]
    (tmp_path / "input.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    _script("extract_features.py", f"--input_file={tmp_path / 'input.txt'}",
            f"--output_file={tmp_path / 'out.jsonl'}", *_model_flags(ours),
            "--layers=-1", "--max_seq_length=64")
    vocab = json.loads((ours / "tokenizer.json").read_text(encoding="utf-8"))
    inverse = {i: t for t, i in vocab["model"]["vocab"].items()}
    inverse.update({t["id"]: t["content"] for t in vocab["added_tokens"]})
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(sequences)
    for row, (line, sequence) in enumerate(zip(lines, sequences)):
        features = json.loads(line)["features"]
        assert [f["token"] for f in features] == [inverse[i] for i in sequence]
        values = np.array([f["layers"][0]["values"] for f in features])
        # extract_features.py writes 6 decimals, as Google's.
        np.testing.assert_allclose(values, reference[row, :len(sequence)], atol=2e-6)


@pytest.fixture(scope="module")
def folders(bpe, tmp_path_factory):
    """Converted folders (convert_hf_checkpoint.py) of a 2-label
    `ModernBertForSequenceClassification` (mean pooling) and of a `ModernBertForMaskedLM`,
    dropout 0.1 everywhere: {"classifier": dir, "masked_lm": dir}, each with bert_config.json,
    bert_model.ckpt and tokenizer.json, and "masked_lm_reference": (the ids of TEXTS by
    `tokenizers`, [CLS]/[SEP] included; transformers' last hidden state of them (sdpa, eval
    mode), float [B, S, H])."""
    root = tmp_path_factory.mktemp("mb_folders")
    tokenizer_json, special, _ = bpe
    request = root / "texts.json"
    request.write_text(json.dumps({"texts": [t for t in TEXTS if " ||| " not in t],
                                   "pairs": [t.split(" ||| ") for t in TEXTS if " ||| " in t]}),
                       encoding="utf-8")
    run_oracle_script("hf_bpe_tokenizer.py", "encode", tokenizer_json, request,
                      root / "ids.json")
    encoded = json.loads((root / "ids.json").read_text(encoding="utf-8"))
    sequences = encoded["single"] + encoded["pairs"]
    width = max(map(len, sequences))
    requests = []
    for name, kind, keys in (("classifier", "classifier", {"classifier_pooling": "mean"}),
                             ("masked_lm", None, {})):
        (root / f"hf_{name}").mkdir()
        (root / f"hf_{name}" / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
        requests.append({"save_dir": str(root / f"hf_{name}"), "new": True, "seed": 7,
                         "kind": kind, "config": _hf_config(bpe, **DROPOUT, **keys),
                         "input_ids": [s + [special["[PAD]"]] * (width - len(s))
                                       for s in sequences],
                         "attention_mask": [[1] * len(s) + [0] * (width - len(s))
                                            for s in sequences],
                         "out": str(root / f"{name}.npz")})
    run_json_request("hf_modernbert.py", requests, root)
    out = {name: root / name for name in ("classifier", "masked_lm")}
    with started({name: lambda name=name: _script(
            "convert_hf_checkpoint.py", f"--hf_model_dir={root / f'hf_{name}'}",
            f"--output_dir={out[name]}") for name in out}) as runs:
        for name, proc in runs.items():
            assert "tokenizer.json" in proc.result().stderr  # the next command names it
    for name in out:
        config = json.loads((out[name] / "bert_config.json").read_text())
        assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == 0.1
        assert config["classifier_dropout"] == 0.1
    out["masked_lm_reference"] = (sequences, np.load(root / "masked_lm.npz")["sdpa_last"])
    return out


def _model_flags(folder):
    return [f"--vocab_file={folder / 'tokenizer.json'}",
            f"--bert_config_file={folder / 'bert_config.json'}",
            f"--init_checkpoint={folder / 'bert_model.ckpt'}", "--do_lower_case=false"]


WORDS = ("the earth was without form and void darkness upon face of deep spirit god moved "
         "waters light day night evening morning").split()


def _write_tsv(path, rng, n, with_label=True):
    rows = []
    for _ in range(n):
        label = int(rng.integers(2))
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 14))))
        text += " light good" if label else " dark evil"
        rows.append(f"{text}\t{label}" if with_label else text)
    path.write_text(("sentence\tlabel\n" if with_label else "sentence\n") + "\n".join(rows) +
                    "\n", encoding="utf-8")


def _without_attention_dropout(folder, out):
    """A copy of a converted folder with attention_probs_dropout_prob 0 (its other dropouts
    kept): the global layers can then run in chunks in training."""
    out.mkdir()
    for path in folder.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    config = json.loads((folder / "bert_config.json").read_text())
    config["attention_probs_dropout_prob"] = 0.0
    (out / "bert_config.json").write_text(json.dumps(config, indent=2))
    return out


@pytest.mark.parametrize("attention", ["full", "chunked"])
def test_classifier_towers_and_kill_resume_equal_one_device(folders, tmp_path, attention):
    """run_classifier_mgpu.py, 2 towers x 2 examples x 2 accumulated micro-batches with
    gradient checkpointing, killed (SIGKILL) after its checkpoint at step 8 of 16 and rerun,
    ends with the weights (and Adam slots) of run_classifier.py on 1 tower x 8 run through, to
    1e-5, with every dropout 0.1; the uninterrupted run evaluates and predicts every example.
    "chunked": attention dropout 0 (the others 0.1) and --attention_chunk=4, shorter than
    every sequence, so the global layers run in chunks (and the one-tower run's local bands
    are recomputed in the backward pass; the towers' are in their recomputed layers)."""
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    _write_tsv(data / "train.tsv", rng, 64)
    _write_tsv(data / "dev.tsv", rng, 11)
    _write_tsv(data / "test.tsv", rng, 7, with_label=False)
    folder, chunk = folders["classifier"], []
    if attention == "chunked":
        folder = _without_attention_dropout(folder, tmp_path / "folder")
        chunk = ["--attention_chunk=4"]
    common = ["--task_name=tsv", f"--data_dir={data}", *_model_flags(folder),
              "--do_train=true", "--max_seq_length=32", "--num_train_epochs=2",
              "--learning_rate=1e-3", "--save_checkpoints_steps=4", *chunk]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    one = [sys.executable, os.path.join(REPO, "run_classifier.py"), *common,
           f"--output_dir={whole}", "--n_gpus=1", "--train_batch_size=8", "--do_eval=true",
           "--do_predict=true", "--eval_batch_size=4"]
    two = [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), *common,
           f"--output_dir={killed}", "--n_gpus=2", "--train_batch_size=2",
           "--num_accumulation_steps=2", "--gradient_checkpointing=true"]
    uninterrupted, dying = Launched(one), Launched(two)
    assert signal_at_checkpoint([(dying, str(killed), 8, signal.SIGKILL, 0.05)])[0] is not None
    _, not_killed = finish_killed(dying, str(killed), 16)
    assert not_killed is None, not_killed
    rerun = run_command(two)
    done = uninterrupted.finish()
    assert done.returncode == 0, done.stderr[-3000:]
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resumed from" in rerun.stderr and "Input position restored" in rerun.stderr
    ours, reference = final_tensors(str(killed)), final_tensors(str(whole))
    assert int(reference["global_step"]) == 16 and sorted(ours) == sorted(reference)
    assert "bert/pooler/LayerNorm/gamma" in reference and "output_weights/adam_m" in reference
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=1e-5, rtol=0,
                                   err_msg=name)
    result = _results(whole / "eval_results.txt")
    assert result["eval_examples"] == "11" and result["global_step"] == "16"
    assert len((whole / "predict.txt").read_text().splitlines()) == 7


PERSONS, PLACES = ["Moses", "Aaron", "Abraham", "Jacob"], ["Egypt", "Jerusalem", "Bethel"]
OTHERS = ["and", "the", "went", "to", "in", "spake", "unto", "land", "of", "."]


def _sentence(rng, n):
    words, tags = [], []
    while len(words) < n:
        r = rng.random()
        if r < 0.25:
            words.append(str(rng.choice(PERSONS)))
            tags.append("B-PER")
        elif r < 0.4:
            words += ["land", "of", str(rng.choice(PLACES))]
            tags += ["O", "O", "B-LOC"]
        else:
            words.append(str(rng.choice(OTHERS)))
            tags.append("O")
    return words, tags


def test_ner_pieces_are_the_sentences_bpe_pieces(bpe, tmp_path):
    """Each sentence's window holds the ids `tokenizers` gives its words joined by spaces
    ([CLS] ... [SEP]), and the labelled positions are the words' first pieces: one per word,
    each decoding to the start of its word."""
    tokenizer_json, special, _ = bpe
    rng = np.random.default_rng(1)
    sentences = [ner_data.Sentence(f"s{i}", *_sentence(rng, int(rng.integers(2, 9))), [], "")
                 for i in range(12)]
    sentences.append(ner_data.Sentence("odd", ["Zürich", "(1895-1943).", "\u200b", "x"],
                                       ["B-LOC", "O", "O", "O"], [], ""))
    labels = ner_data.get_labels(sentences)
    tokenizer = tokenization.BpeTokenizer(str(tokenizer_json))
    windows = ner_data.convert_sentences(sentences, labels, 64, tokenizer)
    assert len(windows) == len(sentences)
    request = tmp_path / "texts.json"
    request.write_text(json.dumps({"texts": [" ".join(s.words) for s in sentences],
                                   "pairs": []}), encoding="utf-8")
    run_oracle_script("hf_bpe_tokenizer.py", "encode", tokenizer_json, request,
                      tmp_path / "ids.json")
    expected = json.loads((tmp_path / "ids.json").read_text(encoding="utf-8"))["single"]
    for sentence, window, ids in zip(sentences, windows, expected):
        values, n = window.values, len(ids)
        assert values["input_ids"][:n] == ids and not any(values["input_ids"][n:])
        assert ids[0] == special["[CLS]"] and ids[-1] == special["[SEP]"]
        first = [i for i, w in enumerate(values["label_weights"]) if w]
        assert first == window.positions and len(first) == len(sentence.words)
        for word, tag, position in zip(sentence.words, sentence.tags, first):
            assert word.startswith(tokenizer.decode([values["input_ids"][position]]).lstrip())
            assert labels[values["label_ids"][position]] == tag


def _conll(sentences):
    return "\n".join("".join(f"{w} {t}\n" for w, t in zip(*s)) for s in sentences)


def test_run_ner_end_to_end(token_runs):
    """run_ner.py on a converted masked-LM folder: trains (2 towers, dropout 0.1), evaluates
    and writes a tag for every word of test.txt, long sentences in several windows."""
    proc, out = token_runs["ner"].result()
    dev = token_runs["ner_dev"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Initialised" in proc.stderr
    result = _results(out / "eval_results.txt")
    assert {"eval_f1", "eval_precision", "eval_recall", "eval_loss"} <= set(result)
    lines = [line.split() for line in
             (out / "predictions.txt").read_text(encoding="utf-8").splitlines() if line]
    words = [(w, t) for s in dev for w, t in zip(*s)]
    assert [tuple(line[:2]) for line in lines] == words
    assert {line[2] for line in lines} <= {"O", "B-PER", "B-LOC"}


def _squad_training_file(dst, paragraphs=None):
    """The real SQuAD v1.1 article (../shared/material) in training form (the first answer of
    each question), cut to its first `paragraphs`; returns (path, the data)."""
    path = require_material("squad", "squad_v11_dev_normans_answerable.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["data"] = data["data"][:1]
    data["data"][0]["paragraphs"] = data["data"][0]["paragraphs"][:paragraphs]
    for paragraph in data["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"] = qa["answers"][:1]
    dst.write_text(json.dumps(data), encoding="utf-8")
    return str(dst), data


def test_squad_answer_spans_are_bpe_pieces_of_the_answer(bpe, tmp_path):
    """Training features of the real SQuAD v1.1 article with 64-token windows (doc_stride 16):
    the labelled span of every window that holds the answer decodes to the answer text."""
    path, _ = _squad_training_file(tmp_path / "train.json")
    tokenizer = tokenization.BpeTokenizer(str(bpe[0]))
    examples = squad_data.read_squad_examples(path, is_training=True)[:60]
    features = list(squad_data.convert_examples_to_features(
        examples, tokenizer, 64, 16, 16, is_training=True))
    answered = [f for f in features if f.start_position > 0]
    assert len(features) > 3 * len(examples) and len(answered) >= len(examples)
    for feature in answered:
        example = examples[feature.example_index]
        text = tokenizer.convert_tokens_to_string(
            feature.tokens[feature.start_position:feature.end_position + 1])
        assert text == " ".join(example.orig_answer_text.split()), example.qas_id


def test_run_squad_end_to_end(token_runs):
    """run_squad.py on a converted masked-LM folder and two paragraphs of the real SQuAD v1.1
    article: trains (dropout 0.1), predicts an answer taken from its paragraph for every
    question, and scores it."""
    proc, out = token_runs["squad"].result()
    data = token_runs["squad_data"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    contexts = {qa["id"]: p["context"] for p in data["data"][0]["paragraphs"]
                for qa in p["qas"]}
    assert sorted(predictions) == sorted(contexts)
    for qas_id, answer in predictions.items():
        assert answer and answer in contexts[qas_id], (qas_id, answer)
    result = _results(out / "eval_results.txt")
    assert {"exact_match", "f1"} <= set(result)


@pytest.fixture(scope="module")
def token_runs(folders, tmp_path_factory):
    """run_ner.py and run_squad.py on the masked-LM folder, started in the background with the
    module (their tests wait for them): {"ner": Future of (CompletedProcess, --output_dir),
    "ner_dev": the dev sentences, "squad": Future, "squad_data": the SQuAD file's data}."""
    root = tmp_path_factory.mktemp("mb_token_runs")
    rng = np.random.default_rng(2)
    data = root / "conll"
    data.mkdir()
    (data / "train.txt").write_text(_conll([_sentence(rng, int(rng.integers(3, 10)))
                                            for _ in range(40)]), encoding="utf-8")
    dev = [_sentence(rng, int(rng.integers(3, 10))) for _ in range(8)] + [_sentence(rng, 30)]
    (data / "dev.txt").write_text(_conll(dev), encoding="utf-8")
    (data / "test.txt").write_text(_conll(dev), encoding="utf-8")
    model = _model_flags(folders["masked_lm"])
    ner = [sys.executable, os.path.join(REPO, "run_ner.py"), f"--data_dir={data}", *model,
           f"--output_dir={root / 'ner'}", "--do_train=true", "--do_eval=true",
           "--do_predict=true", "--max_seq_length=24", "--train_batch_size=4", "--n_gpus=2",
           "--num_train_epochs=2", "--learning_rate=1e-3"]
    squad, squad_data_ = _squad_training_file(root / "squad.json", paragraphs=2)
    squad_cmd = [sys.executable, os.path.join(REPO, "run_squad.py"), *model,
                 f"--output_dir={root / 'squad'}", "--do_train=true", f"--train_file={squad}",
                 "--do_predict=true", "--do_eval=true", f"--predict_file={squad}",
                 "--max_seq_length=64", "--doc_stride=24", "--max_query_length=16",
                 "--train_batch_size=8", "--num_train_epochs=1", "--learning_rate=1e-3"]
    tsv = root / "tsv"
    tsv.mkdir()
    _write_tsv(tsv / "train.tsv", rng, 16)
    _write_tsv(tsv / "dev.tsv", rng, 4)
    classifier = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=tsv",
                  f"--data_dir={tsv}", *_model_flags(folders["classifier"]),
                  f"--output_dir={root / 'classifier'}", "--do_train=true",
                  "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
                  "--learning_rate=1e-3"]
    with started({"ner": lambda: (run_command(ner), root / "ner"),
                  "squad": lambda: (run_command(squad_cmd), root / "squad"),
                  "classifier": lambda: (run_command(classifier), root / "classifier"),
                  "multiple_choice": lambda: _multiple_choice_run(model, root)}) as runs:
        yield dict(runs, ner_dev=dev, squad_data=squad_data_, squad_file=squad)


MC_SHIPPED = os.path.join(DATA, "multiple_choice", "hellaswag_activitynet")


def _multiple_choice_run(model, root):
    """run_multiple_choice.py on the masked-LM folder and a slice of the shipped SWAG-format
    data (16 training examples of 4 choices; 6 dev ones, and the same unlabelled as test.csv):
    (CompletedProcess, --output_dir)."""
    data = root / "swag"
    data.mkdir()
    rows = {}
    for name, n in (("train.csv", 16), ("dev.csv", 6)):
        with open(os.path.join(MC_SHIPPED, name), encoding="utf-8", newline="") as f:
            table = list(csv.reader(f))
        rows[name] = table[0], table[1:n + 1]
    header, dev = rows["dev.csv"]
    label = header.index("label")
    for name, table in (("train.csv", rows["train.csv"][1]), ("val.csv", dev),
                        ("test.csv", [r[:label] + [""] + r[label + 1:] for r in dev])):
        with open(data / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([header] + table)
    out = root / "multiple_choice"
    return run_command([sys.executable, os.path.join(REPO, "run_multiple_choice.py"),
                        f"--data_dir={data}", *model, f"--output_dir={out}", "--do_train=true",
                        "--do_eval=true", "--do_predict=true", "--max_seq_length=48",
                        "--train_batch_size=4", "--n_gpus=2", "--num_train_epochs=1",
                        "--learning_rate=1e-3"]), out


def test_run_multiple_choice_end_to_end(token_runs):
    """run_multiple_choice.py on a converted masked-LM folder (its head initialises the
    pooler, as transformers' ModernBertForMultipleChoice.from_pretrained does): trains (2
    towers, dropout 0.1), evaluates, and predicts every test example (test_results.tsv: 4
    probabilities a row; their equality with transformers:
    test_fine_tuned_runs_convert_to_transformers)."""
    proc, out = token_runs["multiple_choice"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = _results(out / "eval_results.txt")
    assert {"eval_accuracy", "eval_loss"} <= set(result)
    rows = [list(map(float, line.split("\t")))
            for line in (out / "test_results.tsv").read_text().splitlines()]
    assert len(rows) == 6 and all(len(r) == 4 and abs(sum(r) - 1) < 1e-5 for r in rows)
    assert len((out / "predict.txt").read_text().splitlines()) == 6


_token_runs_with_the_module = with_the_module("token_runs")


# run -> (Hugging Face model written by convert_to_hf.py, the oracle's kind).
HF_MODELS = {"classifier": ("ModernBertForSequenceClassification", "classifier"),
             "ner": ("ModernBertForTokenClassification", "token"),
             "squad": ("ModernBertForQuestionAnswering", "qa"),
             "multiple_choice": ("ModernBertForMultipleChoice", "multiple_choice")}


def _our_logits(run, out, ids, mask):
    """Logits of the run's final checkpoint by our task on `ids`/`mask` (evaluation mode), by
    Hugging Face's output name (real positions only for the token-level heads)."""
    import tensorflow as tf

    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.classifier import BertClassifier
    from bert_mgpu.tasks.multiple_choice import BertMultipleChoice
    from bert_mgpu.tasks.ner import TaggingTask
    from bert_mgpu.tasks.squad import SquadTask

    config = BertConfig.from_json_file(str(out / "bert_config.json"))
    prefix = checkpoint.resolve_checkpoint_path(str(out))
    shapes = dict(tf.train.list_variables(prefix))
    task = {"classifier": lambda: BertClassifier(config, shapes["output_bias"][0]),
            "ner": lambda: TaggingTask(config, shapes["cls/ner/output_bias"][0]),
            "squad": lambda: SquadTask(config),
            "multiple_choice": lambda: BertMultipleChoice(config, ids.shape[1])}[run]()
    checkpoint.restore_checkpoint(prefix, task.named_variables())
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "segment_ids": tf.zeros_like(tf.constant(ids))}
    if run == "multiple_choice":
        features["label_ids"] = tf.zeros([ids.shape[0]], tf.int32)
        return {"logits": task._scored(features, False)["logits"].numpy()}
    if run == "squad":
        found = task._forward(features, False, with_positions=False)
        return {k: found[k].numpy()[mask > 0] for k in ("start_logits", "end_logits")}
    found = task._forward(features, False)["logits"].numpy()
    return {"logits": found if run == "classifier" else found[mask > 0]}


def _swag_test_inputs(bpe, data):
    """ids and mask [6, 4, 48] of the multiple-choice run's test.csv, as the run builds them."""
    from bert_mgpu.data import multiple_choice_data as mc_data

    tokenizer = tokenization.BpeTokenizer(str(bpe[0]))
    values = [mc_data.convert_example(e, 48, tokenizer)
              for e in mc_data.read_swag_csv(str(data / "test.csv"), "test")]
    return (np.array([v["input_ids"] for v in values], np.int32),
            np.array([v["input_mask"] for v in values], np.int32))


def test_fine_tuned_runs_convert_to_transformers(bpe, token_runs, tmp_path):
    """convert_to_hf.py on each fine-tuned run (its --output_dir: the final checkpoint, the
    run's labels): transformers loads the folder as the job's ModernBertFor* model and its
    logits (eager and sdpa) equal ours on the same weights to 1e-4, texts of several lengths
    padded in one batch; the multiple-choice model's probabilities equal the run's own
    test_results.tsv."""
    tokenizer = tokenization.BpeTokenizer(str(bpe[0]))
    special = bpe[1]
    sequences = [[special["[CLS]"]] + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))
                 + [special["[SEP]"]] for t in TEXTS + ["Moses went to Egypt ."]]
    width = max(map(len, sequences))
    ids = np.array([s + [special["[PAD]"]] * (width - len(s)) for s in sequences], np.int32)
    mask = np.array([[1] * len(s) + [0] * (width - len(s)) for s in sequences], np.int32)
    requests, inputs = [], {}
    for run, (model, kind) in HF_MODELS.items():
        proc, out = token_runs[run].result()
        assert proc.returncode == 0, proc.stderr[-3000:]
        inputs[run] = (_swag_test_inputs(bpe, out.parent / "swag") if run == "multiple_choice"
                       else (ids, mask))
        _script("convert_to_hf.py", f"--bert_config_file={out / 'bert_config.json'}",
                f"--init_checkpoint={out}", f"--vocab_file={bpe[0]}", "--do_lower_case=false",
                f"--output_dir={tmp_path / run}")
        config = json.loads((tmp_path / run / "config.json").read_text(encoding="utf-8"))
        assert config["architectures"] == [model]
        if run in ("ner", "classifier"):  # the run's label names, in id order
            labels = json.loads((out / "run_config.json").read_text())["labels"]
            assert list(config["id2label"].values()) == [str(x) for x in labels]
        requests.append({"save_dir": str(tmp_path / run), "kind": kind,
                         "out": str(tmp_path / f"{run}.npz"),
                         "input_ids": inputs[run][0].tolist(),
                         "attention_mask": inputs[run][1].tolist()})
    run_json_request("hf_modernbert.py", requests, tmp_path)
    for run in HF_MODELS:
        ours = _our_logits(run, token_runs[run].result()[1], *inputs[run])
        ref = np.load(tmp_path / f"{run}.npz")
        real = inputs[run][1] > 0
        for attn in ("eager", "sdpa"):
            for key, value in ours.items():
                expected = ref[f"{attn}_{key}"]
                expected = expected[real] if run in ("ner", "squad") else expected
                np.testing.assert_allclose(value, expected, atol=1e-4, rtol=0,
                                           err_msg=f"{run} {attn} {key}")
    out = token_runs["multiple_choice"].result()[1]
    predicted = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    logits = np.load(tmp_path / "multiple_choice.npz")["sdpa_logits"]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(predicted, expected / expected.sum(axis=1, keepdims=True),
                               atol=1e-5, rtol=0)


def test_squad_export_answers_equal_the_runs_predictions(bpe, token_runs, tmp_path):
    """export_saved_model.py --task=squad --output_dir=RUN of the ModernBERT SQuAD run
    (run_config.json gives the tokenizer.json and the window flags): raw questions and
    contexts in, in a process without bert_mgpu; the `tokenize` windows are the run's
    features (run_squad.py's, the words joined in running text) and every answer is the run's
    own predictions.json answer, cut from the context at the returned offsets."""
    pytest.importorskip("tensorflow_text")
    from _serving import run_loaded

    proc, out = token_runs["squad"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    _script("export_saved_model.py", "--task=squad", f"--output_dir={out}",
            f"--export_dir={tmp_path / 'export'}")
    data = token_runs["squad_data"]
    questions = [(qa["id"], qa["question"], p["context"])
                 for p in data["data"][0]["paragraphs"] for qa in p["qas"]]
    got = run_loaded(tmp_path, tmp_path / "export" / "1", """
        q, c = tf.constant(request["questions"]), tf.constant(request["contexts"])
        out = {"answers": plain(model.signatures["serving_default"](question=q, context=c)),
               "windows": plain(model.signatures["tokenize"](question=q, context=c))}
    """, {"questions": [q for _, q, _ in questions], "contexts": [c for _, _, c in questions]})
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    answers = got["answers"]
    assert answers["answer"] == [predictions[qas_id] for qas_id, _, _ in questions]
    for i, (_, _, context) in enumerate(questions):
        start, end = answers["answer_start"][i], answers["answer_end"][i]
        assert context[start:end] == answers["answer"][i]
    # The windows are the run's features (its examples, its tokenizer, its flags).
    examples = squad_data.read_squad_examples(token_runs["squad_file"], is_training=False)
    features = list(squad_data.convert_examples_to_features(
        examples, tokenization.BpeTokenizer(str(bpe[0])), 64, 24, 16, is_training=False))
    windows = got["windows"]
    assert len(features) > len(questions)  # contexts read in several windows
    for name in ("input_ids", "input_mask"):
        assert windows[name] == [getattr(f, name) for f in features], name
    assert windows["example_index"] == [f.example_index for f in features]


def test_ner_export_tags_equal_the_runs_predictions(bpe, token_runs, tmp_path):
    """export_saved_model.py --task=ner --output_dir=RUN of the ModernBERT NER run: each test
    sentence as raw text (its words joined by spaces, some by whitespace runs) in, in a
    process without bert_mgpu: its words, and the tags of the run's own predictions.txt (the
    30-word sentence read in several windows); the `tokenize` windows are the run's records."""
    pytest.importorskip("tensorflow_text")
    from _serving import run_loaded

    proc, out = token_runs["ner"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    _script("export_saved_model.py", "--task=ner", f"--output_dir={out}",
            f"--export_dir={tmp_path / 'export'}")
    sentences = token_runs["ner_dev"]
    texts = [(" " if i % 3 else " \t ").join(words) + ("\n" if i % 2 else "")
             for i, (words, _) in enumerate(sentences)]
    got = run_loaded(tmp_path, tmp_path / "export" / "1", """
        text = tf.constant(request["texts"])
        out = {"tags": plain(model.signatures["serving_default"](text=text)),
               "windows": plain(model.signatures["tokenize"](text=text))}
    """, {"texts": texts})
    lines = [line.split() for line in
             (out / "predictions.txt").read_text(encoding="utf-8").splitlines() if line]
    predicted, at = [], 0
    for words, _ in sentences:
        predicted.append([line[2] for line in lines[at:at + len(words)]])
        at += len(words)
    tags = got["tags"]
    assert tags["num_words"] == [len(words) for words, _ in sentences]
    for row, (words, _) in enumerate(sentences):
        n = len(words)
        assert tags["words"][row][:n] == words and not any(tags["words"][row][n:])
        assert tags["tags"][row][:n] == predicted[row], row
    labels = json.loads((out / "run_config.json").read_text())["labels"]
    windows = ner_data.convert_sentences(
        [ner_data.Sentence(str(i), w, t, [], "") for i, (w, t) in enumerate(sentences)],
        labels, 24, tokenization.BpeTokenizer(str(bpe[0])))
    assert len(windows) > len(sentences)  # the long sentence: several windows
    assert got["windows"]["input_ids"] == [w.values["input_ids"] for w in windows]
    assert got["windows"]["example_index"] == [w.sentence_index for w in windows]


def test_multiple_choice_export_equals_test_results(token_runs, tmp_path):
    """export_saved_model.py --task=multiple_choice of the ModernBERT run (its tokenizer.json in
    the graph): raw contexts and choices give the run's test_results.tsv and predict.txt."""
    pytest.importorskip("tensorflow_text")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from bert_mgpu.data import multiple_choice_data as mc_data

    proc, out = token_runs["multiple_choice"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    _script("export_saved_model.py", "--task=multiple_choice", f"--output_dir={out}",
            f"--export_dir={tmp_path / 'export'}")
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    examples = mc_data.read_swag_csv(str(out.parent / "swag" / "test.csv"), "test")
    served = model.signatures["serving_default"](
        context=tf.constant([e.context for e in examples]),
        choices=tf.constant([list(e.choices) for e in examples]))
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               np.loadtxt(out / "test_results.tsv", delimiter="\t"), atol=1e-5)
    np.testing.assert_array_equal(served["label_id"].numpy(),
                                  np.loadtxt(out / "predict.txt", dtype=int))
