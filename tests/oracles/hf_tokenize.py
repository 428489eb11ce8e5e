"""Times Hugging Face `tokenizers` (Rust WordPiece) on texts: a benchmark peer for our tokenizer.

Runs in the oracle virtualenv (.venv-oracle), never in the project's. Usage:

    python hf_tokenize.py REQUEST.json OUTPUT.json

REQUEST.json holds a list of jobs, each a dict with
    name: str, echoed in the output;
    texts_file: str, a JSON-lines file, one JSON string (the text) per line;
    vocab_file: str;
    lowercase: bool;
    repeats: int, how many timed `encode_batch` runs (default 3).

OUTPUT.json maps each job name to {"seconds": [one per run], "num_tokens": int, "lines": [digest
per text], "version": tokenizers.__version__}. The digest is `line_digest(tokens)` as in
google_tokenize.py with ids None, so it can be compared with any tokenizer's tokens.
"""

import hashlib
import json
import sys
import time

import tokenizers
from tokenizers import BertWordPieceTokenizer


def line_digest(tokens, ids=None):
    return hashlib.sha1(json.dumps([tokens, ids]).encode("ascii")).hexdigest()[:16]


def run_job(job):
    tokenizer = BertWordPieceTokenizer(job["vocab_file"], lowercase=job["lowercase"])
    with open(job["texts_file"], encoding="ascii") as f:
        texts = [json.loads(line) for line in f]
    seconds = []
    for _ in range(job.get("repeats", 3)):
        # The previous result is freed outside the timed region.
        encodings = None
        start = time.perf_counter()
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        seconds.append(time.perf_counter() - start)
    tokens = [e.tokens for e in encodings]
    return {"seconds": seconds, "num_tokens": sum(map(len, tokens)),
            "lines": [line_digest(t) for t in tokens], "version": tokenizers.__version__}


def main(argv):
    with open(argv[1]) as f:
        jobs = json.load(f)
    results = {job["name"]: run_job(job) for job in jobs}
    with open(argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv)
