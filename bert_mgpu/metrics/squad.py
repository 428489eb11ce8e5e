"""The official SQuAD EM/F1 evaluation.

`evaluate_v1` and `evaluate_v2` compute what the official `evaluate-v1.1.py` and
`evaluate-v2.0.py` print (the same normalisation, maximum over the gold answers, and for v2.0
the no-answer threshold, HasAns/NoAns splits and best thresholds), given the dataset's "data"
list and the predictions (and for v2.0 the no-answer scores, e.g. `null_odds.json`, as Google's
README runs it: `evaluate-v2.0.py dev-v2.0.json predictions.json --na-prob-file null_odds.json`).
The predictions come from Google's post-processing, data/squad_predictions.py.
"""

import collections
import re
import string
from typing import Dict, List, Mapping, Optional, Sequence

from absl import logging


class EvaluationError(ValueError):
    """Predictions or no-answer scores that do not fit the dataset; the message names why."""


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """The official normalisation: lower case, ASCII punctuation removed, articles a/an/the
    removed, whitespace collapsed (in that order)."""
    text = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(s: str) -> List[str]:
    """The official v2.0 `get_tokens`: the normalised answer's words ([] for "")."""
    return normalize_answer(s).split() if s else []


def exact_score(gold: str, prediction: str) -> int:
    """1 if the normalised texts are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def _token_f1(gold_toks: List[str], pred_toks: List[str]) -> float:
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def f1_score_v1(prediction: str, gold: str) -> float:
    """evaluate-v1.1.py's F1: word overlap of the normalised texts (0 when nothing overlaps,
    even when both are empty)."""
    return _token_f1(normalize_answer(gold).split(), normalize_answer(prediction).split())


def f1_score_v2(gold: str, prediction: str) -> float:
    """evaluate-v2.0.py's F1: as v1.1, but when either side has no words, 1 if both have none
    and 0 otherwise."""
    gold_toks = answer_tokens(gold)
    pred_toks = answer_tokens(prediction)
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)
    return _token_f1(gold_toks, pred_toks)


def _questions(dataset: Sequence[Mapping]):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> Dict[str, float]:
    """What evaluate-v1.1.py prints.

    A question without a prediction counts as 0 (the script warns on stderr; logged here).

    Args:
      dataset: the json file's "data" list.
      predictions: qas_id -> predicted text.

    Returns:
      {"exact_match": float, "f1": float}, percentages over all questions.

    Raises:
      EvaluationError: a question has no gold answer (the script fails on it).
    """
    f1 = exact_match = total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            logging.warning("Unanswered question %s will receive score 0.", qa["id"])
            continue
        ground_truths = [answer["text"] for answer in qa["answers"]]
        if not ground_truths:
            raise EvaluationError(f"question {qa['id']} has no answer: evaluate SQuAD v2.0 "
                                  f"data with --version_2_with_negative")
        prediction = predictions[qa["id"]]
        exact_match += max(int(normalize_answer(prediction) == normalize_answer(gold))
                           for gold in ground_truths)
        f1 += max(f1_score_v1(prediction, gold) for gold in ground_truths)
    if total == 0:
        raise EvaluationError("the dataset has no questions")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def _make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if not qid_list:
        total = len(exact_scores)
        return collections.OrderedDict([
            ("exact", 100.0 * sum(exact_scores.values()) / total),
            ("f1", 100.0 * sum(f1_scores.values()) / total),
            ("total", total)])
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total)])


def _find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """The no-answer threshold that maximises the score, over thresholds at the questions'
    no-answer scores (all predicted "" to begin with: the NoAns questions score 1)."""
    cur_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    best_score = cur_score
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None,
                na_prob_thresh: float = 1.0) -> Dict[str, float]:
    """What evaluate-v2.0.py prints (its `--na-prob-file` and `--na-prob-thresh`).

    Gold answers that normalise to "" are ignored; a question with none left has the single gold
    answer "". With `na_probs`, a question whose score exceeds `na_prob_thresh` counts as
    predicted unanswerable (1 on a NoAns question, 0 otherwise), and best_exact/best_f1 with
    their thresholds are added.

    Args:
      dataset: the json file's "data" list.
      predictions: qas_id -> predicted text ("" = no answer); every question needs one.
      na_probs: qas_id -> no-answer score (e.g. `null_odds.json`), or None (all 0.0).
      na_prob_thresh: the script's threshold (its default 1.0).

    Returns:
      OrderedDict: exact, f1, total, then HasAns_exact/f1/total and NoAns_exact/f1/total for the
      splits that have questions, then (with `na_probs`) best_exact, best_exact_thresh, best_f1,
      best_f1_thresh.

    Raises:
      EvaluationError: naming a question without a prediction or a no-answer score (the script
        fails on these with a KeyError).
    """
    qid_to_has_ans = collections.OrderedDict()
    exact_raw, f1_raw = {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        qid_to_has_ans[qid] = bool(qa["answers"])
        gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        if not gold_answers:
            gold_answers = [""]
        if qid not in predictions:
            raise EvaluationError(f"no prediction for question {qid}")
        prediction = predictions[qid]
        exact_raw[qid] = max(exact_score(a, prediction) for a in gold_answers)
        f1_raw[qid] = max(f1_score_v2(a, prediction) for a in gold_answers)
    if not qid_to_has_ans:
        raise EvaluationError("the dataset has no questions")
    has_na_probs = na_probs is not None
    if not has_na_probs:
        na_probs = {k: 0.0 for k in predictions}
    missing = [qid for qid in exact_raw if qid not in na_probs]
    if missing:
        raise EvaluationError(f"no no-answer score for question {missing[0]} "
                              f"({len(missing)} questions without one)")

    def apply_threshold(scores):
        return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
                for qid, s in scores.items()}

    exact_thresh = apply_threshold(exact_raw)
    f1_thresh = apply_threshold(f1_raw)
    out_eval = _make_eval_dict(exact_thresh, f1_thresh)
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    for prefix, qids in (("HasAns", has_ans_qids), ("NoAns", no_ans_qids)):
        if qids:
            for k, v in _make_eval_dict(exact_thresh, f1_thresh, qids).items():
                out_eval[f"{prefix}_{k}"] = v
    if has_na_probs:
        known = {k: v for k, v in na_probs.items() if k in qid_to_has_ans}
        best_exact, exact_t = _find_best_thresh(predictions, exact_raw, known, qid_to_has_ans)
        best_f1, f1_t = _find_best_thresh(predictions, f1_raw, known, qid_to_has_ans)
        out_eval["best_exact"] = best_exact
        out_eval["best_exact_thresh"] = exact_t
        out_eval["best_f1"] = best_f1
        out_eval["best_f1_thresh"] = f1_t
    return out_eval


def evaluate(dataset_json: Mapping, predictions: Mapping[str, str],
             version_2_with_negative: bool,
             null_odds: Optional[Mapping[str, float]] = None) -> Dict[str, float]:
    """The official evaluation of a run's predictions, as Google's README runs it.

    SQuAD v1.1: `evaluate-v1.1.py data.json predictions.json` (exact_match, f1). SQuAD v2.0:
    `evaluate-v2.0.py data.json predictions.json --na-prob-file null_odds.json` (the script's
    default --na-prob-thresh 1.0 applied to `null_odds`, plus best_exact/best_f1 and their
    thresholds; without `null_odds`, as the script without --na-prob-file).

    Args:
      dataset_json: the parsed SQuAD json file (with answers).
      predictions: qas_id -> text (`predictions.json`).
      version_2_with_negative: which script.
      null_odds: qas_id -> null score difference (`null_odds.json`), v2.0 only.
    """
    expected = "v2.0" if version_2_with_negative else "1.1"
    if dataset_json.get("version") != expected:
        # The official scripts warn (v1.1) or say nothing (v2.0); a mismatch is worth a line.
        logging.warning("Evaluation expects v-%s, but got dataset with v-%s", expected,
                        dataset_json.get("version"))
    if version_2_with_negative:
        return evaluate_v2(dataset_json["data"], predictions, null_odds)
    return evaluate_v1(dataset_json["data"], predictions)
