"""Runs Google's original `FullTokenizer` (PyPI bert-tensorflow==1.0.4) on texts: a test oracle.

Runs in the oracle virtualenv (.venv-oracle), never in the project's. Usage:

    python google_tokenize.py REQUEST.json OUTPUT.json

REQUEST.json holds a list of jobs, each a dict with
    name: str, echoed in the output;
    texts_file: str, a JSON-lines file, one JSON string (the text) per line;
    vocab_file: str;
    do_lower_case: bool;
    preserve_unused_tokens: bool, optional (Google's flag, default False);
    tokenizer: "full" (default) for `FullTokenizer`, or "basic" for `BasicTokenizer` (ids None);
    output: "hash" (default) for a short digest per text, or "tokens" for tokens and ids;
    dump_vocab: bool, optional: also return Google's `load_vocab` result as a token list.

OUTPUT.json maps each job name to {"lines": [...], "num_tokens": int, "seconds": float, and
"vocab": [...] if asked}; `seconds` is the time of the tokenize loop alone.
The digest of a text is `line_digest(tokens, ids)`; tests compute the same function on their side.
"""

import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402  (environment first)
from absl import flags  # noqa: E402

# Google's module was written for TF 1.x; it needs these names and parsed flags.
tf.gfile = tf.compat.v1.gfile
flags.FLAGS.mark_as_parsed()

from bert import tokenization  # noqa: E402


def line_digest(tokens, ids):
    """16 hex digits identifying one text's tokens and ids (ASCII JSON, so surrogates are safe)."""
    return hashlib.sha1(json.dumps([tokens, ids]).encode("ascii")).hexdigest()[:16]


def run_job(job):
    flags.FLAGS.preserve_unused_tokens = bool(job.get("preserve_unused_tokens", False))
    tokenizer = tokenization.FullTokenizer(job["vocab_file"], do_lower_case=job["do_lower_case"])
    basic = job.get("tokenizer", "full") == "basic"
    if basic:
        tokenizer = tokenizer.basic_tokenizer
    with open(job["texts_file"], encoding="ascii") as f:
        texts = [json.loads(line) for line in f]
    start = time.perf_counter()
    all_tokens = [tokenizer.tokenize(text) for text in texts]
    seconds = time.perf_counter() - start
    lines = []
    for tokens in all_tokens:
        ids = None if basic else tokenizer.convert_tokens_to_ids(tokens)
        if job.get("output", "hash") == "tokens":
            lines.append([tokens, ids])
        else:
            lines.append(line_digest(tokens, ids))
    result = {"lines": lines, "num_tokens": sum(map(len, all_tokens)), "seconds": seconds}
    if job.get("dump_vocab"):
        result["vocab"] = list(tokenization.load_vocab(job["vocab_file"]))
    return result


def main(argv):
    with open(argv[1]) as f:
        jobs = json.load(f)
    results = {job["name"]: run_job(job) for job in jobs}
    with open(argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv)
