"""SQuAD data and post-processing vs Google's run_squad.py; the official EM/F1 by hand.

Parity runs Google's latest `run_squad.py` (oracles/google_bert_eedf571 through
run_google_latest.py) in the oracle venv, every job in one process, on the first article of the
official SQuAD v2.0 dev set and its v1.1 view (../shared/material/squad, test-only): examples and
features for v1.1 and v2.0, with 384/128/64 and 128/64/32 windows, for training and prediction;
the train/eval records; `write_predictions` on identical logits (random, rounded to force ties,
and crafted: projection, "empty", answers across windows, the v2.0 null answer at several
thresholds), compared byte for byte. The metric tests use hand-computed values.
"""

import collections
import json
import logging
import os

import numpy as np
import pytest
from _oracle import DATA, MATERIAL, require_material, require_oracle, run_json_request

from bert_mgpu import tokenization
from bert_mgpu.data import squad_data, squad_predictions, tfrecord
from bert_mgpu.data.processors import DataError
from bert_mgpu.metrics import squad as squad_metrics

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SQUAD = os.path.join(MATERIAL, "squad")
V11 = os.path.join(SQUAD, "squad_v11_dev_normans_answerable.json")
V2 = os.path.join(SQUAD, "squad_v2_dev_normans.json")
GOOGLE_DIR = os.path.join(MATERIAL, "oracles")
WINDOWS = {"long": (384, 128, 64), "short": (128, 64, 32)}
CRAFTED_WINDOW = (64, 16, 32)


@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


def training_form(src, dst):
    """A dev file in training form: one answer per answerable question (the first), and one
    answer that is not in the document (Google skips it with a warning)."""
    with open(src, encoding="utf-8") as f:
        data = json.load(f)
    broken = False
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
                if qa["answers"] and not broken:
                    qa["answers"][0]["text"] = "Frxnce"  # was "France", same offset
                    broken = True
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return str(dst)


def crafted_dataset(path, with_empty=True):
    """Small hand-made SQuAD v2.0 file for the crafted post-processing cases ("c-empty", whose
    spans are all invalid, makes Google's code fail in v2.0 mode: `with_empty=False` drops it)."""
    long_context = " ".join(f"The king number {i} ruled for {i + 3} long years." for i in range(30))
    data = {"version": "v2.0", "data": [{"title": "crafted", "paragraphs": [
        {"context": "Steve Smith's car was built in (1895-1943). by the Café Company.",
         "qas": [{"id": "c-final", "question": "Who built it?", "answers": [],
                  "is_impossible": True},
                 {"id": "c-ties", "question": "Which year?", "answers": [],
                  "is_impossible": True},
                 {"id": "c-empty", "question": " ".join(["what"] * 22), "answers": [],
                  "is_impossible": True}][:3 if with_empty else 2]},
        {"context": long_context,
         "qas": [{"id": "c-across", "question": "How long did king 17 rule?", "answers": [],
                  "is_impossible": True},
                 {"id": "c-null-neg", "question": "Who ruled?", "answers": [],
                  "is_impossible": True},
                 {"id": "c-null-pos", "question": "Who ruled last?", "answers": [],
                  "is_impossible": True}]}]}]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return str(path)


def features_json(features):
    """Our features in the oracle's JSON form."""
    return json.loads(json.dumps([{
        "unique_id": f.unique_id, "example_index": f.example_index,
        "doc_span_index": f.doc_span_index, "tokens": f.tokens,
        "token_to_orig_map": sorted(f.token_to_orig_map.items()),
        "token_is_max_context": sorted(f.token_is_max_context.items()),
        "input_ids": f.input_ids, "input_mask": f.input_mask, "segment_ids": f.segment_ids,
        "start_position": f.start_position, "end_position": f.end_position,
        "is_impossible": bool(f.is_impossible)} for f in features]))


def examples_json(examples):
    return [{"qas_id": e.qas_id, "question_text": e.question_text, "doc_tokens": e.doc_tokens,
             "orig_answer_text": e.orig_answer_text, "start_position": e.start_position,
             "end_position": e.end_position, "is_impossible": bool(e.is_impossible)}
            for e in examples]


def our_features(path, is_training, version_2, window, tokenizer, shuffle=False):
    examples = squad_data.read_squad_examples(path, is_training, version_2)
    if shuffle:
        squad_data.shuffle_like_google(examples)
    return examples, list(squad_data.convert_examples_to_features(
        examples, tokenizer, *window, is_training))


def random_results(features, seed, max_seq_length, decimals=None):
    """Identical logits for both sides: float32, rounded to `decimals` to force ties; padding
    lower by 4 (as a trained model's), so that most questions have valid spans."""
    rng = np.random.RandomState(seed)
    results = []
    for f in features:
        start, end = (rng.normal(size=(2, max_seq_length))
                      - 4.0 * (1 - np.asarray(f.input_mask))).astype(np.float32)
        if decimals is not None:
            start, end = np.round(start, decimals), np.round(end, decimals)
        results.append(squad_predictions.RawResult(f.unique_id, start, end))
    return results


def token_index(feature, word_index):
    """Position in `feature.tokens` of the first WordPiece of paragraph word `word_index`."""
    for position, orig in sorted(feature.token_to_orig_map.items()):
        if orig == word_index:
            return position
    return None


def crafted_results(examples, features, max_seq_length):
    """Hand-made logits for the crafted file (expected outcomes: test_crafted_predictions)."""
    results = []
    for f in features:
        qas_id = examples[f.example_index].qas_id
        doc_tokens = examples[f.example_index].doc_tokens
        start = np.full(max_seq_length, -10.0, np.float32)
        end = np.full(max_seq_length, -10.0, np.float32)
        if qas_id == "c-final":
            # "steve smith" -> "Steve Smith" (the "'s" of the original word is dropped).
            start[token_index(f, 0)] = 5.0
            end[token_index(f, 1)] = 5.0  # "smith"
            end[token_index(f, 1) + 1] = 4.0  # "'" of "smith ' s": a lower alternative
        elif qas_id == "c-ties":
            start[:] = 0.0
            end[:] = 0.0
        elif qas_id == "c-empty":
            n_question = f.tokens.index("[SEP]")
            start[1:n_question] = 3.0
            end[1:n_question] = 3.0
        elif qas_id == "c-across":
            # Word "20" (the years of king 17) is in several windows: only the window where it
            # has the most context may start an answer, even with higher logits elsewhere.
            word = doc_tokens.index("20")
            position = token_index(f, word)
            if position is not None:
                bonus = 0.0 if f.token_is_max_context[position] else 2.0
                start[position] = 4.0 + bonus
                end[position] = 4.0 + bonus
        elif qas_id in ("c-null-neg", "c-null-pos"):
            # Null score: min over windows of [CLS] start + end = 0.75 (window 1). Best non-null:
            # 1.5 (diff -0.75) or 0.25 (diff +0.5), in window 0.
            start[0], end[0] = (2.0, 1.0) if f.doc_span_index == 0 else (0.5, 0.25)
            if f.doc_span_index == 0:
                p = token_index(f, 0)
                start[p], end[p] = (1.0, 0.5) if qas_id == "c-null-neg" else (0.125, 0.125)
        results.append(squad_predictions.RawResult(f.unique_id, start, end))
    return results


@pytest.fixture(scope="module")
def google(tmp_path_factory, tokenizer):
    """Runs every Google job once; returns the job outputs and the inputs given to them."""
    require_oracle()
    require_material("squad", "squad_v2_dev_normans.json")
    require_material("squad", "squad_v11_dev_normans_answerable.json")
    require_material("oracles", "run_google_latest.py")
    tmp = tmp_path_factory.mktemp("google_squad")
    train_files = {"v1": training_form(V11, tmp / "train_v11.json"),
                   "v2": training_form(V2, tmp / "train_v2.json")}
    eval_files = {"v1": V11, "v2": V2}
    jobs, state = [], {"features": {}, "predictions": {}, "tmp": tmp, "train_files": train_files}
    for version in ("v1", "v2"):
        for window_name, window in WINDOWS.items():
            for is_training in (True, False):
                name = (version, window_name, is_training)
                out = str(tmp / ("features_%s_%s_%s.json" % name))
                jobs.append({"op": "features", "is_training": is_training,
                             "input_file": (train_files if is_training else eval_files)[version],
                             "version_2_with_negative": version == "v2",
                             "max_seq_length": window[0], "doc_stride": window[1],
                             "max_query_length": window[2], "output": out})
                state["features"][name] = out
    # Records: Google's main pre-shuffles training examples; eval records are not shuffled.
    for split, is_training in (("train", True), ("eval", False)):
        jobs.append({"op": "features", "is_training": is_training, "shuffle": is_training,
                     "input_file": train_files["v2"] if is_training else V2,
                     "version_2_with_negative": True, "max_seq_length": 128, "doc_stride": 64,
                     "max_query_length": 32, "tf_record": str(tmp / f"{split}.tf_record"),
                     "output": str(tmp / f"records_{split}.json")})

    crafted = crafted_dataset(tmp / "crafted.json")
    crafted_v2 = crafted_dataset(tmp / "crafted_v2.json", with_empty=False)
    cases = []  # (name, input_file, version_2, window, n_best, max_answer_length, thresholds,
    #              results)
    _, feats = our_features(V11, False, False, WINDOWS["long"], tokenizer)
    cases.append(("random_v1_long", V11, False, WINDOWS["long"], 20, 30, [0.0],
                  random_results(feats, 0, 384)))
    _, feats = our_features(V2, False, True, WINDOWS["short"], tokenizer)
    cases.append(("random_v2_short", V2, True, WINDOWS["short"], 20, 30, [-6.0, -3.0, 0.0],
                  random_results(feats, 1, 128)))
    _, feats = our_features(V2, False, True, WINDOWS["long"], tokenizer)
    cases.append(("ties_v2_long", V2, True, WINDOWS["long"], 20, 30, [-2.0, 0.0],
                  random_results(feats, 2, 384, decimals=0)))
    _, feats = our_features(V11, False, False, WINDOWS["short"], tokenizer)
    cases.append(("ties_v1_short_nbest5_len3", V11, False, WINDOWS["short"], 5, 3, [0.0],
                  random_results(feats, 3, 128, decimals=1)))
    for name, path, version_2, thresholds in (
            ("crafted_v1", crafted, False, [0.0]),
            ("crafted_v2", crafted_v2, True, [-1.0, -0.75, 0.0, 0.5, 1.0])):
        examples, feats = our_features(path, False, False, CRAFTED_WINDOW, tokenizer)
        cases.append((name, path, version_2, CRAFTED_WINDOW, 20, 30, thresholds,
                      crafted_results(examples, feats, CRAFTED_WINDOW[0])))
    for name, input_file, version_2, window, n_best, max_len, thresholds, results in cases:
        results_file = tmp / f"results_{name}.json"
        results_file.write_text(json.dumps([[r.unique_id, np.asarray(r.start_logits).tolist(),
                                             np.asarray(r.end_logits).tolist()]
                                            for r in results]))
        for threshold in thresholds:
            out = str(tmp / f"predictions_{name}_{threshold}")
            jobs.append({"op": "predictions", "input_file": input_file,
                         "version_2_with_negative": version_2, "max_seq_length": window[0],
                         "doc_stride": window[1], "max_query_length": window[2],
                         "results_file": str(results_file), "n_best_size": n_best,
                         "max_answer_length": max_len, "null_score_diff_threshold": threshold,
                         "output_dir": out})
            state["predictions"][(name, threshold)] = (
                out, input_file, version_2, window, n_best, max_len, results)
    jobs.append({"op": "final_text", "cases": FINAL_TEXT_CASES,
                 "output": str(tmp / "final_text.json")})
    run_json_request("google_squad.py", {"google_dir": GOOGLE_DIR, "vocab_file": VOCAB,
                                         "do_lower_case": True, "jobs": jobs}, tmp, timeout=600)
    return state


# ---------------------------------------------------------------------------------------------
# Examples and features vs Google

@pytest.mark.oracle
@pytest.mark.parametrize("is_training", [True, False], ids=["train", "predict"])
@pytest.mark.parametrize("window_name", list(WINDOWS))
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_examples_and_features_equal_googles(google, tokenizer, version, window_name,
                                             is_training, caplog):
    with open(google["features"][(version, window_name, is_training)]) as f:
        expected = json.load(f)
    path = google["train_files"][version] if is_training else {"v1": V11, "v2": V2}[version]
    with caplog.at_level(logging.WARNING):
        examples, features = our_features(path, is_training, version == "v2",
                                          WINDOWS[window_name], tokenizer)
    assert examples_json(examples) == expected["examples"]
    ours = features_json(features)
    assert len(ours) == len(expected["features"])
    mismatches = [(a["unique_id"], name) for a, b in zip(ours, expected["features"])
                  for name in a if a[name] != b[name]]
    assert not mismatches, f"{len(mismatches)} mismatches, first {mismatches[:5]}"
    if is_training:
        # The answer that is not in the document: skipped with Google's warning.
        warnings = [r.getMessage() for r in caplog.records
                    if r.getMessage().startswith("Could not find answer")]
        assert warnings == expected["warnings"] == ["Could not find answer: 'France.' vs. "
                                                    "'Frxnce'"]
        assert len(examples) == (95 if version == "v1" else 207)
        impossible = sum(f.is_impossible for f in features)
        assert (impossible > 0) == (version == "v2")
        # Windows without the whole answer point at [CLS] (one paragraph of the article has
        # 279 words: two windows even at 384).
        assert any(f.start_position == 0 and not f.is_impossible for f in features)
    else:
        assert len(examples) == (96 if version == "v1" else 208)
    if window_name == "short":
        assert max(f.doc_span_index for f in features) >= 2


@pytest.mark.oracle
@pytest.mark.parametrize("split", ["train", "eval"])
def test_records_equal_googles(google, tokenizer, split, tmp_path):
    tmp = google["tmp"]
    google_records = [tfrecord.decode_example(r)
                      for r in tfrecord.read_records(str(tmp / f"{split}.tf_record"))]
    args = dict(vocab_file=VOCAB, spm_model_file=None, do_lower_case=True, max_seq_length=128,
                doc_stride=64, max_query_length=32, version_2_with_negative=True)
    if split == "train":
        input_file = google["train_files"]["v2"]
        key = squad_data.cache_key("train", input_file, **args)
        cached = squad_data.cached_train_features(input_file, str(tmp_path), key, tokenizer,
                                                  128, 64, 32, True)
        names, shapes = squad_data.SQUAD_TRAIN_FEATURES, squad_data.squad_train_shapes(128)
    else:
        key = squad_data.cache_key("eval", V2, **args)
        _, features, cached = squad_data.eval_features(V2, str(tmp_path), key, tokenizer, 128,
                                                       64, 32)
        assert len(features) == cached.num_features
        names, shapes = squad_data.SQUAD_EVAL_FEATURES, squad_data.squad_eval_shapes(128)
    assert os.path.basename(cached.path) == f"{split}.{key}.tf_record"
    ours = [tfrecord.decode_example(r) for r in tfrecord.read_records(cached.path)]
    assert cached.num_features == len(ours) == len(google_records) > 208
    assert ours == google_records
    assert list(shapes) == list(names) and set(ours[0]) == set(names)
    assert all(len(r[n]) == shapes[n] for r in ours for n in names)
    if split == "train":
        assert sum(r["is_impossible"][0] for r in ours) > 0


# ---------------------------------------------------------------------------------------------
# Post-processing vs Google

@pytest.mark.oracle
def test_predictions_equal_googles(google, tokenizer, tmp_path):
    compared = collections.Counter()
    answer_kinds = collections.Counter()
    for (name, threshold), case in sorted(google["predictions"].items()):
        out, input_file, version_2, window, n_best, max_len, results = case
        examples, features = our_features(input_file, False, False, window, tokenizer)
        ours = tmp_path / f"{name}_{threshold}"
        ours.mkdir()
        files = ["predictions.json", "nbest_predictions.json"] + (
            ["null_odds.json"] if version_2 else [])
        squad_predictions.write_predictions(
            examples, features, results, n_best, max_len, True, str(ours / files[0]),
            str(ours / files[1]), str(ours / "null_odds.json"), version_2, threshold)
        for file_name in files:
            with open(os.path.join(out, file_name), encoding="utf-8") as f:
                expected_text = f.read()
            assert (ours / file_name).read_text(encoding="utf-8") == expected_text, (
                f"{name} threshold {threshold}: {file_name} differs")
            compared[file_name] += 1
        assert not os.path.exists(ours / "null_odds.json") or version_2
        assert sorted(os.listdir(ours)) == sorted(files)  # no temporary files left
        predictions = json.loads((ours / "predictions.json").read_text())
        assert len(predictions) == len(examples)
        for text in predictions.values():
            answer_kinds["null" if text == "" else "empty" if text == "empty" else "span"] += 1
    assert compared == {"predictions.json": 13, "nbest_predictions.json": 13,
                        "null_odds.json": 10}
    assert answer_kinds["null"] > 0 and answer_kinds["span"] > 0 and answer_kinds["empty"] > 0


@pytest.mark.oracle
def test_crafted_predictions(google, tokenizer):
    """What the crafted logits must give (and gave Google: see test_predictions_equal_googles)."""
    def load(name, threshold):
        out = google["predictions"][(name, threshold)][0]
        with open(os.path.join(out, "predictions.json")) as f:
            predictions = json.load(f)
        with open(os.path.join(out, "nbest_predictions.json")) as f:
            nbest = json.load(f)
        odds = None
        if os.path.exists(os.path.join(out, "null_odds.json")):
            with open(os.path.join(out, "null_odds.json")) as f:
                odds = json.load(f)
        return predictions, nbest, odds

    predictions, nbest, _ = load("crafted_v1", 0.0)
    assert predictions["c-final"] == "Steve Smith"
    assert predictions["c-ties"] == "Steve"  # all logits 0: the first valid span wins
    assert predictions["c-empty"] == "empty"
    assert nbest["c-empty"] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                                 "end_logit": 0.0}]
    assert predictions["c-across"] == "20"
    assert nbest["c-across"][0]["start_logit"] == 4.0  # not the 6.0 of other windows
    for threshold, neg, pos in ((-1.0, "", ""), (-0.75, "The", ""), (0.0, "The", ""),
                                (0.5, "The", "The"), (1.0, "The", "The")):
        predictions, nbest, odds = load("crafted_v2", threshold)
        assert odds["c-null-neg"] == -0.75 and odds["c-null-pos"] == 0.5
        assert (predictions["c-null-neg"], predictions["c-null-pos"]) == (neg, pos), threshold
        assert [e["text"] for e in nbest["c-null-neg"]][:2] == ["The", ""]


def test_v2_without_any_valid_span_predicts_null(tokenizer, tmp_path):
    """Google's code fails here (no non-null candidate); ours adds the nonce "empty" first."""
    path = crafted_dataset(tmp_path / "crafted.json")
    examples, features = our_features(path, False, False, CRAFTED_WINDOW, tokenizer)
    keep = [i for i, e in enumerate(examples) if e.qas_id == "c-empty"]
    features = [f for f in features if f.example_index == keep[0]]
    results = crafted_results(examples, features, CRAFTED_WINDOW[0])
    for f in features:
        f.example_index = 0
    predictions, nbest, odds = squad_predictions.compute_predictions(
        [examples[keep[0]]], features, results, 20, 30, True, True, 0.0)
    # Null: [CLS] logits -10 + -10; the nonce scores 0: diff = -20 - 0.
    assert odds == {"c-empty": -20.0}
    assert predictions == {"c-empty": "empty"}
    assert [e["text"] for e in nbest["c-empty"]] == ["empty", ""]
    predictions, _, _ = squad_predictions.compute_predictions(
        [examples[keep[0]]], features, results, 20, 30, True, True, -25.0)
    assert predictions == {"c-empty": ""}


def test_missing_result_names_the_feature(tokenizer, tmp_path):
    path = crafted_dataset(tmp_path / "crafted.json")
    examples, features = our_features(path, False, False, CRAFTED_WINDOW, tokenizer)
    results = crafted_results(examples, features, CRAFTED_WINDOW[0])[1:]
    with pytest.raises(squad_predictions.PredictionError, match="unique_id 1000000000 "
                                                            r"\(question c-final\)"):
        squad_predictions.compute_predictions(examples, features, results, 20, 30, True)


# ---------------------------------------------------------------------------------------------
# get_final_text

FINAL_TEXT_CASES = [
    ["steve smith", "Steve Smith's", True],
    ["1895", "(1895-1943).", True],
    ["cafe company", "Café Company.", True],
    ["Steve", "Steve Smith's", False],
    ["steve", "Steve Smith's", False],  # case differs: not found
    ["xyz", "abc def", True],
    ["ab", "a\u200bb", True],  # the zero-width space is removed by tokenization: lengths differ
    ["中 国", "在中国的", True],
    ["istanbul", "İstanbul", True],
]
FINAL_TEXT_EXPECTED = ["Steve Smith", "1895", "Café Company", "Steve", "Steve Smith's",
                       "abc def", "a\u200bb", "中国", "İstanbul"]


def test_get_final_text_by_hand():
    got = [squad_predictions.get_final_text(p, o, lc) for p, o, lc in FINAL_TEXT_CASES]
    assert got == FINAL_TEXT_EXPECTED


@pytest.mark.oracle
def test_get_final_text_equals_googles(google):
    with open(google["tmp"] / "final_text.json") as f:
        assert json.load(f) == FINAL_TEXT_EXPECTED


def test_softmax_and_best_indexes_by_hand():
    assert squad_predictions.get_best_indexes([0.5, 2.0, 2.0, -1.0, 2.0], 3) == [1, 2, 4]
    assert squad_predictions.get_best_indexes([1.0, 3.0], 5) == [1, 0]
    probs = squad_predictions.compute_softmax([0.0, np.log(3.0)])
    assert probs == pytest.approx([0.25, 0.75], abs=1e-15)
    assert squad_predictions.compute_softmax([]) == []
    assert squad_predictions.compute_softmax([1000.0, 1000.0]) == [0.5, 0.5]  # no overflow


# ---------------------------------------------------------------------------------------------
# Feature pieces by hand

def test_max_context_rule_googles_docstring_example():
    # "the man went to the store and bought a gallon of milk", windows of 5 words, stride 2
    # (Google's comment uses A = 0-4, B = 3-7, C = 6-10; this is windows 0-4, 2-6, 4-8, 6-10,
    # 8-11): "bought" (7) has context min(1, 1) in 6-10 ... the window where it is most central.
    spans = squad_data.doc_spans_of(12, 5, 2)
    assert spans == [(0, 5), (2, 5), (4, 5), (6, 5), (8, 4)]
    best = squad_data.max_context_span_indexes(spans, 12)
    # Token 3: left/right context 3/1 in span 0, 1/3 in span 1, out of span 2: tie 1 vs 1, the
    # first wins. Token 4: 4/0, 2/2, 0/4 -> span 1. Token 10: 4/0 in span 3, 2/1 in span 4.
    assert best == [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # Google's own example: A = 0-4, B = 3-7, C = 6-10 (stride 3): "bought" (7) -> C.
    abc = [squad_data.DocSpan(0, 5), squad_data.DocSpan(3, 5), squad_data.DocSpan(6, 5)]
    assert squad_data.max_context_span_indexes(abc, 11)[7] == 2


def test_improve_answer_span_by_hand(tokenizer):
    doc = tokenizer.tokenize("The leader was John Smith (1895-1943).")
    # Words 4.. of the original: "(1895-1943)." is tokens ( 1895 - 1943 ) .
    start = doc.index("(")
    assert squad_data.improve_answer_span(doc, start, len(doc) - 1, tokenizer, "1895") == (
        start + 1, start + 1)
    # "Japan" inside "Japanese": no better span, the whole word stays.
    doc = tokenizer.tokenize("The Japanese electronics industry")
    assert squad_data.improve_answer_span(doc, 1, 1, tokenizer, "Japan") == (1, 1)


def test_doc_spans_cover_the_document_and_end_at_its_end():
    assert squad_data.doc_spans_of(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad_data.doc_spans_of(10, 20, 3) == [(0, 10)]
    assert squad_data.doc_spans_of(11, 4, 5) == [(0, 4), (4, 4), (8, 3)]  # stride > window
    assert squad_data.doc_spans_of(0, 4, 3) == []


def test_shapes_and_feature_names():
    assert squad_data.squad_train_shapes(384) == collections.OrderedDict([
        ("unique_ids", 1), ("input_ids", 384), ("input_mask", 384), ("segment_ids", 384),
        ("start_positions", 1), ("end_positions", 1), ("is_impossible", 1)])
    assert list(squad_data.squad_eval_shapes(64).items()) == [
        ("unique_ids", 1), ("input_ids", 64), ("input_mask", 64), ("segment_ids", 64)]


def _write(path, data):
    path.write_text(json.dumps(data))
    return str(path)


def _one_question(**qa_changes):
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Bob", "answer_start": 0}]}
    qa.update(qa_changes)
    return {"version": "1.1", "data": [{"paragraphs": [{"context": "Bob ran.", "qas": [qa]}]}]}


@pytest.mark.parametrize("data,is_training,version_2,message", [
    (_one_question(answers=[]), True, False, r"question q1: for training, each question should "
                                             r"have exactly 1 answer \(it has 0\)"),
    (_one_question(), True, True, 'question q1: no "is_impossible" field'),
    ({"version": "1.1"}, False, False, r'not a SQuAD json file \(no "data" list\)'),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, False, False, 'article 0: no "context" field'),
])
def test_malformed_files_name_file_and_question(tmp_path, data, is_training, version_2,
                                                message):
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(DataError, match="bad.json: " + message):
        squad_data.read_squad_examples(path, is_training, version_2)


def test_missing_file_and_bad_flags(tmp_path, tokenizer):
    with pytest.raises(DataError, match="nope.json: not found"):
        squad_data.read_squad_examples(str(tmp_path / "nope.json"), False)
    examples = squad_data.read_squad_examples(_write(tmp_path / "a.json", _one_question()), True)
    assert (examples[0].start_position, examples[0].end_position) == (0, 0)
    with pytest.raises(ValueError, match=r"--max_seq_length \(67\) must be greater than "
                                         r"--max_query_length \(64\) \+ 3"):
        list(squad_data.convert_examples_to_features(examples, tokenizer, 67, 128, 64, True))
    with pytest.raises(ValueError, match="--doc_stride must be positive"):
        list(squad_data.convert_examples_to_features(examples, tokenizer, 128, 0, 64, True))


def test_cache_key_and_reuse(tmp_path, tokenizer, caplog):
    data = _write(tmp_path / "train.json", _one_question())
    args = dict(split="train", input_file=data, vocab_file=VOCAB, spm_model_file=None,
                do_lower_case=True, max_seq_length=32, doc_stride=8, max_query_length=8,
                version_2_with_negative=False)
    key = squad_data.cache_key(**args)
    assert key == squad_data.cache_key(**args)
    for change in (dict(split="eval"), dict(do_lower_case=False), dict(max_seq_length=64),
                   dict(doc_stride=16), dict(max_query_length=16),
                   dict(version_2_with_negative=True)):
        assert squad_data.cache_key(**dict(args, **change)) != key, change
    # Eval features do not read is_impossible: the v2 flag does not change them.
    eval_args = dict(args, split="eval")
    assert (squad_data.cache_key(**eval_args)
            == squad_data.cache_key(**dict(eval_args, version_2_with_negative=True)))
    out = tmp_path / "out"
    first = squad_data.cached_train_features(data, str(out), key, tokenizer, 32, 8, 8, False)
    assert first.num_examples == first.num_features == 1
    # On the absl logger itself: another test may have left its level above INFO.
    with caplog.at_level(logging.INFO, logger="absl"):
        again = squad_data.cached_train_features(data, str(out), key, tokenizer, 32, 8, 8, False)
    assert again == first and "Reusing SQuAD train features" in caplog.text
    assert sorted(os.listdir(out)) == [f"train.{key}.tf_record", f"train.{key}.tf_record.json"]
    # The input file changed (size/mtime): another key.
    _write(tmp_path / "train.json", _one_question(question="Who ran?"))
    assert squad_data.cache_key(**args) != key


def test_paragraph_whitespace_rules():
    tokens, offsets = squad_data.split_paragraph(" a\u202fb\u00a0c  d")
    # U+202F splits (Google's reader); U+00A0 does not (the WordPiece tokenizer does later).
    assert tokens == ["a", "b\u00a0c", "d"]
    assert offsets == [-1, 0, 0, 1, 1, 1, 1, 1, 2]


# ---------------------------------------------------------------------------------------------
# Official evaluation, hand-computed

def test_normalize_answer_by_hand():
    n = squad_metrics.normalize_answer
    assert n("The  Quick, brown-fox!") == "quick brownfox"
    assert n("an apple a day") == "apple day"
    assert n("Theater of the absurd") == "theater of absurd"
    assert n("  A.  ") == ""  # "a." -> "a" -> article
    assert n("Ça va, l'été") == "ça va lété"  # only ASCII punctuation goes


def test_f1_and_exact_by_hand():
    # gold words cat sat on mat (4), predicted cat on mat (3): P 1, R 3/4, F1 6/7.
    assert squad_metrics.f1_score_v2("the cat sat on the mat", "cat on mat") == pytest.approx(
        6 / 7, abs=1e-15)
    assert squad_metrics.f1_score_v1("cat on mat", "the cat sat on the mat") == pytest.approx(
        6 / 7, abs=1e-15)
    # Counts clip: x x y vs x y y share x once and y once: P = R = 2/3.
    assert squad_metrics.f1_score_v2("x x y", "x y y") == pytest.approx(2 / 3, abs=1e-15)
    # Empty answers: v2 scores agreement 1, v1 has no overlap 0.
    assert squad_metrics.f1_score_v2("", "") == 1 and squad_metrics.f1_score_v2("the", "") == 1
    assert squad_metrics.f1_score_v2("", "x") == 0
    assert squad_metrics.f1_score_v1("", "") == 0
    assert squad_metrics.exact_score("The Normans.", "normans") == 1
    assert squad_metrics.exact_score("Normans", "Normandy") == 0


def _dataset(questions):
    """[(id, [gold texts])] -> a SQuAD "data" list."""
    return [{"paragraphs": [{"context": "x", "qas": [
        {"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
        for qid, golds in questions]}]}]


def test_evaluate_v1_by_hand():
    dataset = _dataset([("a", ["Denmark, Iceland and Norway", "Norway"]),
                        ("b", ["10th century", "in the 10th century"]),
                        ("c", ["Rollo"]), ("d", ["Normandy"])])
    predictions = {"a": "norway", "b": "the 10th", "c": "Rollo the Viking"}  # d unanswered
    # a: EM 1 (gold 2), F1 1. b: EM 0; F1 max(10th/"10th century": P 1 R 1/2 -> 2/3,
    # vs "in 10th century": P 1 R 1/3 -> 1/2) = 2/3. c: EM 0, F1: rollo of 2 pred words
    # ("rollo viking"): P 1/2 R 1 -> 2/3. d: 0.
    result = squad_metrics.evaluate_v1(dataset, predictions)
    assert result["exact_match"] == pytest.approx(100.0 * 1 / 4, abs=1e-12)
    assert result["f1"] == pytest.approx(100.0 * (1 + 2 / 3 + 2 / 3) / 4, abs=1e-12)
    with pytest.raises(squad_metrics.EvaluationError, match="question e has no answer"):
        squad_metrics.evaluate_v1(_dataset([("e", [])]), {"e": ""})


def test_evaluate_v2_by_hand():
    dataset = _dataset([("h1", ["Rollo", "Rollo of Normandy"]), ("h2", ["1066"]),
                        ("n1", []), ("n2", []), ("h3", ["the"])])
    predictions = {"h1": "Rollo", "h2": "in 1067", "n1": "", "n2": "William", "h3": ""}
    # Raw: h1 EM 1 F1 1; h2 EM 0 F1 0; n1 EM 1 F1 1; n2 EM 0 F1 0; h3: gold "the" normalises
    # to "" so the gold is [""]: the empty prediction gets EM 1 F1 1 (it is still HasAns).
    result = squad_metrics.evaluate_v2(dataset, predictions)
    assert dict(result) == pytest.approx({
        "exact": 60.0, "f1": 60.0, "total": 5, "HasAns_exact": 200 / 3, "HasAns_f1": 200 / 3,
        "HasAns_total": 3, "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"]
    # No-answer scores: above the threshold 1.0 counts as predicting no answer (n2, h2).
    na = {"h1": -2.0, "h2": 3.0, "n1": 0.5, "n2": 1.5, "h3": 0.0}
    result = squad_metrics.evaluate_v2(dataset, predictions, na, 1.0)
    # h2 -> 0 (HasAns), n2 -> 1 (NoAns): EM h1 1, h2 0, n1 1, n2 1, h3 1 = 4/5.
    assert result["exact"] == pytest.approx(80.0) and result["NoAns_exact"] == 100.0
    # Best threshold: start with all "" (NoAns 2 right); in na order h1(-2) +1 -> 3 (best,
    # thresh -2), h3(0) +1 -> 4 (thresh 0), n1(.5) +0 -> 4, n2(1.5) -1 -> 3, h2(3) +0 -> 3.
    assert result["best_exact"] == pytest.approx(80.0) and result["best_exact_thresh"] == 0.0
    assert result["best_f1"] == pytest.approx(80.0) and result["best_f1_thresh"] == 0.0
    assert list(result)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    # A partial F1 moves the best threshold differently from EM.
    preds2 = dict(predictions, h2="1066 AD")  # EM 0, F1 2/3
    na2 = dict(na, h2=-1.0)
    result = squad_metrics.evaluate_v2(dataset, preds2, na2, 1.0)
    # Order h1(-2) +1 -> 3, h2(-1) EM +0 -> 3 / F1 +2/3 -> 11/3, h3(0) +1, n1 +0, n2 -1.
    assert result["best_exact"] == pytest.approx(80.0) and result["best_exact_thresh"] == 0.0
    assert result["best_f1"] == pytest.approx(100.0 * (14 / 3) / 5)
    assert result["best_f1_thresh"] == 0.0
    with pytest.raises(squad_metrics.EvaluationError, match="no prediction for question n2"):
        squad_metrics.evaluate_v2(dataset, {k: v for k, v in predictions.items() if k != "n2"})
    with pytest.raises(squad_metrics.EvaluationError, match="no no-answer score for question"):
        squad_metrics.evaluate_v2(dataset, predictions, {"h1": 0.0})


def test_evaluate_real_article_perfect_and_null_predictions():
    v11 = os.path.join(SQUAD, "squad_v11_dev_normans_answerable.json")
    v2 = os.path.join(SQUAD, "squad_v2_dev_normans.json")
    if not (os.path.exists(v11) and os.path.exists(v2)):
        pytest.skip("test material not available")
    data11 = squad_data.load_squad_json(v11)["data"]
    first_gold = {qa["id"]: qa["answers"][0]["text"] for a in data11 for p in a["paragraphs"]
                  for qa in p["qas"]}
    assert squad_metrics.evaluate_v1(data11, first_gold) == {"exact_match": 100.0, "f1": 100.0}
    data2 = squad_data.load_squad_json(v2)["data"]
    all_null = {qa["id"]: "" for a in data2 for p in a["paragraphs"] for qa in p["qas"]}
    result = squad_metrics.evaluate_v2(data2, all_null)
    # 112 of the 208 questions are unanswerable: "" is right exactly on those.
    assert result["total"] == 208 and result["NoAns_total"] == 112
    assert result["exact"] == pytest.approx(100.0 * 112 / 208)
    assert result["HasAns_exact"] == 0.0 and result["NoAns_f1"] == 100.0


def test_evaluate_dispatches_like_googles_readme(caplog):
    data = {"version": "v2.0", "data": _dataset([("h", ["Rollo"]), ("n", [])])}
    predictions = {"h": "Rollo", "n": "Rollo"}
    # v2.0 with null_odds: n's odds 2.0 > the script's default threshold 1.0 -> counted as "".
    result = squad_metrics.evaluate(data, predictions, True, {"h": -1.0, "n": 2.0})
    assert result["exact"] == 100.0 and result["best_exact"] == 100.0
    assert squad_metrics.evaluate(data, predictions, True)["exact"] == 50.0
    with caplog.at_level(logging.WARNING):
        result = squad_metrics.evaluate({"version": "v2.0", "data": _dataset([("h", ["x y"])])},
                                        {"h": "x"}, False)
    assert result == pytest.approx({"exact_match": 0.0, "f1": 100.0 * 2 / 3})
    assert "Evaluation expects v-1.1, but got dataset with v-v2.0" in caplog.text
