"""export_saved_model.py --task=squad: raw question + context in, Google's answer out.

A tiny SQuAD model (hidden 32, 1 layer, Google's uncased vocabulary, random weights with a
wide span head so that logits differ clearly) is written as a run_squad.py run would leave it
(bert_config.json, a checkpoint, run_config.json with run_squad.py's flags), exported by the
script from --output_dir, and loaded in a process that cannot import bert_mgpu. Questions are on
paragraphs of the SQuAD v2.0 dev material (test-only; skipped without it), with windows small
enough (max_seq_length 32, doc_stride 7) that every context is read in many windows.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA, REPO, require_material
from _pretraining_data import TINY_CONFIG
from _serving import ENV, readme_rest_payloads, run_loaded

from bert_mgpu import tokenization
from bert_mgpu.configs.base import ModelFiles
from bert_mgpu.configs.serving import ExportConfig
from bert_mgpu.configs.squad import SquadAnswerOptions
from bert_mgpu.data import squad_data, squad_predictions
from bert_mgpu.engine import checkpoint
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.serving import export
from bert_mgpu.serving.squad import serve_squad
from bert_mgpu.tasks.squad import SquadTask

pytest.importorskip("tensorflow_text")

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
CONFIG = dict(TINY_CONFIG, vocab_size=30522)
# run_squad.py's flags as its run_config.json records them (small windows: many per context).
SQUAD_FLAGS = {"vocab_file": VOCAB, "do_lower_case": True, "max_seq_length": 32,
               "doc_stride": 7, "max_query_length": 8, "n_best_size": 5,
               "max_answer_length": 6, "version_2_with_negative": True}


def _questions():
    path = require_material("squad", "squad_v2_dev_normans.json")
    with open(path, encoding="utf-8") as f:
        paragraphs = json.load(f)["data"][0]["paragraphs"]
    questions, contexts = [], []
    for paragraph in paragraphs[:4]:
        for qa in paragraph["qas"][:2]:
            questions.append(qa["question"])
            contexts.append(paragraph["context"])
    # A context of one window, and one without any token.
    questions += ["Who wrote it?", "What is here?"]
    contexts += ["It was written by Ada (Countess of Lovelace), in 1843.", " \u200b "]
    return questions, contexts


def _spec(run, threshold):
    cfg = ExportConfig(model=ModelFiles(init_checkpoint=str(run / "model.ckpt")),
                       output_dir=str(run), export_dir="unused", task="squad",
                       squad=SquadAnswerOptions(null_score_diff_threshold=threshold),
                       flags_given=frozenset({"null_score_diff_threshold"}))
    return export.resolve(cfg)


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    """A run directory as run_squad.py leaves it, and the threshold that splits its questions
    into answered and unanswered ones (the median null-score difference)."""
    run = tmp_path_factory.mktemp("squad_export") / "run"
    run.mkdir()
    (run / "bert_config.json").write_text(json.dumps(CONFIG))
    tf.random.set_seed(3)
    task = SquadTask(BertConfig.from_dict(CONFIG))
    weights = {k: v.numpy() for k, v in task.named_variables().items()}
    weights["cls/squad/output_weights"] = np.random.RandomState(0).normal(
        0, 1, [2, 32]).astype(np.float32)
    checkpoint.write_bundle(str(run / "model.ckpt"), weights)
    (run / "run_config.json").write_text(json.dumps(dict(SQUAD_FLAGS,
                                                         null_score_diff_threshold=0.0)))
    questions, contexts = _questions()
    model = export.build_serving_model(_spec(run, 0.0), "squad")
    diffs = serve_squad(model, tf.constant(questions[:-1]), tf.constant(contexts[:-1]))[
        "null_score_diff"].numpy()
    threshold = float(np.median(diffs))
    run_config = dict(SQUAD_FLAGS, null_score_diff_threshold=threshold)
    (run / "run_config.json").write_text(json.dumps(run_config))
    return run, threshold


@pytest.fixture(scope="module")
def exported(squad_run):
    run, _ = squad_run
    export_dir = run.parent / "export"
    cmd = [sys.executable, os.path.join(REPO, "export_saved_model.py"), "--task=squad",
           f"--output_dir={run}", f"--init_checkpoint={run / 'model.ckpt'}",
           f"--export_dir={export_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return export_dir / "1"


LOADED = """
    sig = model.signatures
    q, c = tf.constant(request["questions"]), tf.constant(request["contexts"])
    windows = sig["tokenize"](question=q, context=c)
    ids = {k: windows[k] for k in ("input_ids", "input_mask", "segment_ids")}
    out = {"signatures": sorted(sig), "answers": plain(sig["serving_default"](question=q,
                                                                               context=c)),
           "windows": plain(windows), "logits": plain(sig["serve_ids"](**ids)),
           "rest": [rest_predict(model, p) for p in request["rest"]]}
"""


@pytest.mark.slow  # ~1 min: an export and a fresh TensorFlow process
def test_answers_equal_run_squads_post_processing(squad_run, exported, tmp_path):
    run, threshold = squad_run
    questions, contexts = _questions()
    out = run_loaded(tmp_path, exported, LOADED, {
        "questions": questions, "contexts": contexts,
        "rest": readme_rest_payloads()["squad"]})
    assert out["signatures"] == ["serve_ids", "serving_default", "tokenize"]

    # The windows are run_squad.py's features (Google's convert_examples_to_features).
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    examples = [squad_data.SquadExample(qas_id=str(i), question_text=q,
                                        doc_tokens=squad_data.split_paragraph(c)[0])
                for i, (q, c) in enumerate(zip(questions, contexts))]
    features = list(squad_data.convert_examples_to_features(
        examples[:-1], tokenizer, 32, 7, 8, is_training=False))
    windows = out["windows"]
    n = len(features)
    assert n > 60 and len(windows["input_ids"]) == n + 1  # + the empty context's one window
    for name in ("input_ids", "input_mask", "segment_ids"):
        assert windows[name][:n] == [getattr(f, name) for f in features], name
    assert windows["example_index"] == [f.example_index for f in features] + [len(examples) - 1]

    # The answers are what run_squad.py's post-processing picks on the same logits. Padding
    # positions are never candidates here (see squad_export): set them out of the ranking.
    logits = {k: np.array(v)[:n] for k, v in out["logits"].items()}
    mask = np.array(windows["input_mask"][:n]) > 0
    results = [squad_predictions.RawResult(f.unique_id, np.where(m, s, -1e30),
                                           np.where(m, e, -1e30))
               for f, s, e, m in zip(features, logits["start_logits"], logits["end_logits"], mask)]
    predictions, _, null_odds = squad_predictions.compute_predictions(
        examples[:-1], features, results, n_best_size=5, max_answer_length=6,
        do_lower_case=True, version_2_with_negative=True, null_score_diff_threshold=threshold)
    best_spans, _, _ = squad_predictions.compute_predictions(
        examples[:-1], features, results, n_best_size=5, max_answer_length=6,
        do_lower_case=True)
    got = out["answers"]
    assert got["answer"][:-1] == [predictions[str(i)] for i in range(len(examples) - 1)]
    np.testing.assert_allclose(got["null_score_diff"][:-1],
                               [null_odds[str(i)] for i in range(len(examples) - 1)], atol=1e-4)
    answered = [i for i, a in enumerate(got["answer"]) if a]
    assert 0 < len(answered) < len(examples) - 1  # the threshold splits them
    for i in range(len(examples)):
        start, end = got["answer_start"][i], got["answer_end"][i]
        if i in answered:
            assert contexts[i][start:end] == got["answer"][i] == best_spans[str(i)]
            assert got["null_score_diff"][i] <= threshold
        else:
            assert start == end == -1
    assert got["answer"][-1] == "" and got["start_logit"][-1] == 0.0  # no token, no span

    # README's REST bodies, mapped as TF Serving maps them.
    rest_default, rest_tokenize = out["rest"]
    (row,) = rest_default["predictions"]
    assert sorted(row) == ["answer", "answer_end", "answer_start", "end_logit",
                           "null_score_diff", "start_logit"]
    assert isinstance(row["answer"], str) and isinstance(row["answer_start"], int)
    assert sorted(rest_tokenize["outputs"]) == ["example_index", "input_ids", "input_mask",
                                                "segment_ids"]
    assert len(rest_tokenize["outputs"]["input_ids"][0]) == 32


def test_squad_export_errors(squad_run, tmp_path):
    run, _ = squad_run
    spec = _spec(run, 0.0)
    no_head = tmp_path / "no_head.ckpt"
    reader = tf.train.load_checkpoint(str(run / "model.ckpt"))
    checkpoint.write_bundle(str(no_head), {n: reader.get_tensor(n)
                                           for n in reader.get_variable_to_shape_map()
                                           if not n.startswith("cls/")})
    with pytest.raises(export.ExportError, match="no SQuAD head"):
        export.build_serving_model(export.ResolvedExport(**dict(
            spec.__dict__, init_checkpoint=str(no_head))), "squad")
    with pytest.raises(export.ExportError, match="--max_seq_length .* --max_query_length"):
        export.build_serving_model(export.ResolvedExport(**dict(
            spec.__dict__, squad=SquadAnswerOptions(max_query_length=29))), "squad")
    with pytest.raises(ValueError, match="--doc_stride must be >= 1"):
        ExportConfig(model=ModelFiles(), output_dir=str(run), export_dir="x",
                     squad=SquadAnswerOptions(doc_stride=0)).validate()
