"""Scores CoNLL-format cases with the PyPI package `conlleval` (0.2, MIT, Kang Min Yoo): a Python
port of conlleval.pl written independently of this project, IOBES chunk rules included.

Executed only in the oracle virtualenv, never imported by the project.

Usage: python conlleval_port.py REQUEST.json
REQUEST: {"cases": [[line, ...], ...]}: each case is conlleval input lines ("word gold guess",
"" between sentences). Prints JSON: one object per case with the chunk counts
{"overall": [correct, guessed, gold], "per_type": {type: [correct, guessed, gold]}} (types with a
gold or guessed chunk) and the tag counts {"tags_correct": n, "tokens": n}.
"""

import json
import sys

import conlleval


def score(lines):
    summary = conlleval.evaluate(lines)
    chunks = summary["overall"]["chunks"]["stats"]
    tags = summary["overall"]["tags"]["stats"]
    per_type = {name: [s["stats"]["correct"], s["stats"]["pred"], s["stats"]["gold"]]
                for name, s in summary["slots"]["chunks"].items()
                if s["stats"]["pred"] or s["stats"]["gold"]}
    return {"overall": [chunks["correct"], chunks["pred"], chunks["gold"]],
            "per_type": per_type, "tags_correct": tags["correct"], "tokens": tags["gold"]}


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    print(json.dumps([score(case) for case in request["cases"]]))


if __name__ == "__main__":
    main(sys.argv[1])
