"""Export start-up: export_saved_model.py's time and the export's serving speed, per checkout.

Run by hand with the project's venv, e.g. to compare the code before and after a change of the
exporter (about 1 minute a round for all-MiniLM-L6-v2):

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/export_startup.py --run_dir=RUN --checkouts=/tmp/before,. --rounds=3

RUN is the --output_dir of a run_classifier_mgpu.py run (its bert_config.json, vocabulary and
checkpoint are what the export reads). Each round runs, for every checkout in turn, one at a
time: `python CHECKOUT/export_saved_model.py --output_dir=RUN --export_dir=TMP` in a fresh
process (wall time and the process's CPU time: imports, building the model, tracing the
signatures, writing the SavedModel), then a second fresh process that loads the export with
TensorFlow and tensorflow-text only and times `serving_default` on `--texts` texts in one batch
(milliseconds per call: the median of 5 rounds of 10 calls after a warm-up call), so a change
that makes the export quicker to build can be seen not to make it slower to serve. Prints one
line per checkout and round; nothing is written (the figures of a comparison go into
docs/benchmarks.md by hand, with the commits compared).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SERVE = r"""
import statistics, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops)
signature = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
texts = tf.constant([line.rstrip("\n") for line in open(sys.argv[2], encoding="utf-8")])
signature(text_a=texts)
rounds = []
for _ in range(5):
    start = time.perf_counter()
    for _ in range(10):
        signature(text_a=texts)
    rounds.append((time.perf_counter() - start) / 10 * 1000)
print(statistics.median(rounds))
"""

# Sentences of varied length and script (accents, CJK, punctuation), as users send them.
WORDS = ("the film is a good and thoughtful piece of work , but its second half drags ; "
         "naïve café résumé 電影 很 好看 ! what a waste of time . an utterly charming , "
         "funny and moving story").split()


def texts_file(directory, count):
    path = os.path.join(directory, "texts.txt")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            n = 4 + (i * 7) % 40
            f.write(" ".join(WORDS[(i + k * 3) % len(WORDS)] for k in range(n)) + "\n")
    return path


def timed(cmd):
    """(wall s, CPU s of the process, stdout) of one command run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{cmd[1]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--checkouts", default=".", help="comma-separated repository folders")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=64)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="export_startup_")
    texts = texts_file(work, args.texts)
    results = {}
    for r in range(args.rounds):
        for i, checkout in enumerate(args.checkouts.split(",")):
            target = os.path.join(work, f"export_{i}_{r}")
            wall, cpu, out = timed([sys.executable,
                                    os.path.join(checkout, "export_saved_model.py"),
                                    f"--output_dir={args.run_dir}", f"--export_dir={target}"])
            version = out.strip().splitlines()[-1]
            _, _, served = timed([sys.executable, "-c", SERVE, version, texts])
            ms = float(served.strip().splitlines()[-1])
            results.setdefault(checkout, []).append((wall, cpu, ms))
            print(f"round {r + 1}, {checkout}: export {wall:.1f} s wall, {cpu:.1f} s CPU; "
                  f"serving_default on {args.texts} texts {ms:.1f} ms", flush=True)
    for checkout, rows in results.items():
        print(f"median, {checkout}: export {statistics.median(w for w, _, _ in rows):.1f} s "
              f"wall, {statistics.median(c for _, c, _ in rows):.1f} s CPU; serving "
              f"{statistics.median(m for _, _, m in rows):.1f} ms")


if __name__ == "__main__":
    main()
