"""Scores SQuAD predictions with torchmetrics' `squad` (PyPI torchmetrics: its port of the
official evaluate-v1.1.py, written independently of this project).

Executed only in the oracle virtualenv, never imported by the project.

Usage: python squad_scores.py REQUEST.json
REQUEST: {"dataset": SQuAD json, "predictions": {qid: text} json, "subset": "all",
"answerable" or "unanswerable", "na_probs": null or {qid: no-answer score} json}. With
na_probs, a question whose score is above 1.0 (the official v2.0 script's default
--na-prob-thresh) counts as predicted unanswerable (its text taken as empty), as v2.0 does.
Prints JSON {"exact_match": %, "f1": %, "count": questions scored}: every question of the
dataset, or for SQuAD 2.0's HasAns_/NoAns_ scores those with answers / without (scored against
the empty answer, as the official v2.0 script does; only their exact match is the official one:
v2.0 gives F1 = exact match there).
"""

import json
import sys

from torchmetrics.functional.text import squad


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    with open(request["dataset"]) as f:
        dataset = json.load(f)["data"]
    with open(request["predictions"]) as f:
        predictions = json.load(f)
    if request.get("na_probs"):
        with open(request["na_probs"]) as f:
            na_probs = json.load(f)
        predictions = {qid: "" if na_probs[qid] > 1.0 else text
                       for qid, text in predictions.items()}
    preds, target = [], []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a for a in qa["answers"] if a["text"]]
                if request["subset"] != "all" and \
                        bool(answers) != (request["subset"] == "answerable"):
                    continue
                if not answers:
                    answers = [{"text": "", "answer_start": -1}]
                preds.append({"id": qa["id"], "prediction_text": predictions[qa["id"]]})
                target.append({"id": qa["id"], "answers": {
                    "text": [a["text"] for a in answers],
                    "answer_start": [a["answer_start"] for a in answers]}})
    scores = squad(preds, target)
    print(json.dumps({"exact_match": float(scores["exact_match"]), "f1": float(scores["f1"]),
                      "count": len(preds)}))


if __name__ == "__main__":
    main(sys.argv[1])
