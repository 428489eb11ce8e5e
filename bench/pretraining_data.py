#!/usr/bin/env python
"""create_pretraining_data.py: ours vs Google's script, side by side; sharded mode scaling.

Runs, as whole processes (start-up and imports included, as a user waits for them):
  * Google's script (bert-tensorflow 1.0.4 in .venv-oracle) and ours in default mode on the
    shipped KJV Bible, alternately, `--repeats` times each; their records are compared parsed
    (record for record, in order);
  * ours in sharded mode (`--num_workers` 1 and 2) on the KJV and on the KJV repeated 10 times.

Wall time is the median of the repeats; peak memory is the process's own peak RSS (ru_maxrss);
in sharded mode, the main process's and each worker's peak RSS as they log them (nothing samples
/proc during a run: sampling costs the measured processes time).

Usage:
  BERT_MGPU_ORACLE_PYTHON=.venv-oracle/bin/python .venv/bin/python bench/pretraining_data.py \
      [--repeats 3] [--dupe_factor 5] [--write-docs]
"""

import argparse
import gzip
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

from bert_mgpu.data import tfrecord  # noqa: E402

KJV = os.path.join(REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
VOCAB = os.path.join(REPO, "data", "vocab", "bert_uncased_vocab.txt")


def run(cmd, env=None):
    """Runs cmd; returns (wall seconds, CPU seconds (user + system, its workers included), the
    process's peak RSS in MB, stderr)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    stderr_chunks = []
    reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()),
                              daemon=True)
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    reader.join()
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({code}):\n{stderr[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stderr


def compare_records(path_a, path_b):
    """(records in a, records in b, records differing), parsed one at a time (memory stays small:
    a child's ru_maxrss starts from the parent's RSS at fork)."""
    n_a = n_b = bad = 0
    missing = object()
    for a, b in itertools.zip_longest(tfrecord.read_records(path_a),
                                      tfrecord.read_records(path_b), fillvalue=missing):
        n_a += a is not missing
        n_b += b is not missing
        if a is missing or b is missing or \
                tfrecord.decode_example(a) != tfrecord.decode_example(b):
            bad += 1
    return n_a, n_b, bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    oracle = os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                            os.path.join(REPO, ".venv-oracle", "bin", "python"))
    work = args.workdir or tempfile.mkdtemp(prefix="bench-cpd-")
    os.makedirs(work, exist_ok=True)
    kjv = os.path.join(work, "kjv.txt")
    with gzip.open(KJV, "rb") as src, open(kjv, "wb") as dst:
        shutil.copyfileobj(src, dst)
    kjv10 = os.path.join(work, "kjv_x10.txt")
    with open(kjv, "rb") as f:
        text = f.read()
    with open(kjv10, "wb") as f:
        for _ in range(10):
            f.write(text + b"\n")
    mb = {kjv: os.path.getsize(kjv) / 1e6, kjv10: os.path.getsize(kjv10) / 1e6}
    common = [f"--vocab_file={VOCAB}", "--max_seq_length=128", "--max_predictions_per_seq=20",
              f"--dupe_factor={args.dupe_factor}", "--random_seed=12345"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=REPO)
    ours_cmd = [sys.executable, os.path.join(REPO, "create_pretraining_data.py")]
    # A 2-core benchmark must start alone (its own processes raise the load during the run).
    wait_for_quiet(0.3, 600, label="pretraining_data")
    load = os.getloadavg()[0]

    # 1. Side by side on the KJV, default mode (identical output).
    timings = {"google": [], "ours": []}
    outputs = {"google": os.path.join(work, "google.tfrecord"),
               "ours": os.path.join(work, "ours.tfrecord")}
    for _ in range(args.repeats):
        for who in ("google", "ours"):
            cmd = ([oracle, "-m", "bert.create_pretraining_data"] if who == "google"
                   else ours_cmd) + [f"--input_file={kjv}", f"--output_file={outputs[who]}"]
            wall, _, rss, _ = run(cmd + common, env)
            timings[who].append((wall, rss))
            print(f"{who:6s} KJV default: {wall:6.2f}s, peak RSS {rss:6.0f} MB", flush=True)
    n_ours, n_google, bad = compare_records(outputs["ours"], outputs["google"])
    print(f"records: ours {n_ours}, Google {n_google}, differing {bad}", flush=True)
    g_wall = statistics.median(w for w, _ in timings["google"])
    o_wall = statistics.median(w for w, _ in timings["ours"])
    g_rss = max(r for _, r in timings["google"])
    o_rss = max(r for _, r in timings["ours"])

    # 2. Ours, default and sharded, on the KJV and on 10x the KJV; the configurations take
    # turns within each repeat, so that load from other processes spreads over all of them.
    configs = [(corpus, name, shard_mb, workers)
               for corpus, name, shard_mb in [(kjv, "KJV", 1.0), (kjv10, "KJV x10", 8.0)]
               for workers in (0, 1, 2)]
    measured = {c: [] for c in configs}
    for _ in range(args.repeats):
        for corpus, name, shard_mb, workers in configs:
            out = os.path.join(work, f"{name.replace(' ', '')}-w{workers}.tfrecord")
            cmd = ours_cmd + [f"--input_file={corpus}", f"--output_file={out}",
                              f"--num_workers={workers}", f"--shard_size_mb={shard_mb}"]
            wall, cpu, rss, stderr = run(cmd + common, env)
            if workers:
                # The main process's peak plus each worker's, as they report them (the rusage
                # of a reaped process includes its children's peak, so rss is not used).
                main_rss = re.search(r"Peak RSS of the main process: (\d+) MB", stderr)
                worker = re.search(r"Peak RSS of a worker process: (\d+) MB", stderr)
                rss = float(main_rss.group(1)) + workers * float(worker.group(1))
            measured[(corpus, name, shard_mb, workers)].append((wall, cpu, rss))
            print(f"ours {name} workers={workers}: {wall:.2f}s wall, {cpu:.2f}s CPU, "
                  f"peak {rss:.0f} MB", flush=True)
    rows = []
    for (corpus, name, shard_mb, workers), runs in measured.items():
        out = os.path.join(work, f"{name.replace(' ', '')}-w{workers}.tfrecord")
        n = sum(1 for _ in tfrecord.read_records(out))
        rows.append((name, mb[corpus], workers, shard_mb, statistics.median(r[0] for r in runs),
                     statistics.median(r[1] for r in runs), n, max(r[2] for r in runs)))

    lines = [
        "## create_pretraining_data.py",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `bench/pretraining_data.py --repeats "
        f"{args.repeats}` (whole processes: start-up and imports included). "
        f"Machine: {machine()}; "
        f"load average at start {load:.2f}. Flags: 128/20, `--dupe_factor={args.dupe_factor}`, "
        "`--random_seed=12345`, uncased vocabulary. Wall time: median of the repeats.",
        "",
        "**Default mode vs Google's script** (shipped KJV Bible, "
        f"{mb[kjv]:.1f} MB, 1,189 documents), run alternately:",
        "",
        "| script | wall s | peak RSS MB | instances | records differing from Google's |",
        "|---|---:|---:|---:|---:|",
        f"| Google `create_pretraining_data.py` (bert-tensorflow 1.0.4, TF 2.21) | {g_wall:.2f} "
        f"| {g_rss:.0f} | {n_google:,} | — |",
        f"| **ours**, default mode | {o_wall:.2f} | {o_rss:.0f} | {n_ours:,} "
        f"| {bad} |",
        "",
        f"Speed-up {g_wall / o_wall:.1f}x; peak memory {o_rss / g_rss:.2f}x Google's. Records "
        "are compared parsed, record for record in order (protobuf map order makes bytes vary).",
        "",
        "**Ours, default vs sharded mode** (`--num_workers`; KJV x10 = the KJV file repeated "
        "10 times). Peak memory: the process's peak RSS; sharded mode: the main process's "
        "peak RSS plus `--num_workers` times the largest worker peak, as they report them "
        "(pages shared after the fork are counted in each, so this is an upper bound).",
        "",
        "| corpus | input MB | mode | shard MB | wall s | CPU s | instances | instances/s "
        "| input MB/s | peak MB | peak MB per input MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, size, workers, shard_mb, wall, cpu, n, peak in rows:
        mode = "default (1 process)" if workers == 0 else f"sharded, {workers} worker(s)"
        shard = "—" if workers == 0 else f"{shard_mb:g}"
        lines.append(f"| {name} | {size:.1f} | {mode} | {shard} | {wall:.2f} | {cpu:.2f} | "
                     f"{n:,} | {n / wall:,.0f} | {size / wall:.2f} | {peak:.0f} | "
                     f"{peak / size:.1f} |")
    load_end = os.getloadavg()[0]
    lines += [
        "",
        "In sharded mode memory depends on `--shard_size_mb`, not on the corpus: each worker "
        "holds one shard's documents and records, while the default mode (like Google's script) "
        "holds the whole corpus's. Wall time with 2 workers can only approach half of 1 "
        "worker's when both CPUs are free"
        + (f": the machine was shared (load average {load:.2f} at the start), so the CPU "
           "column shows the work itself." if load > 0.5 else
           f" (load average {load:.2f} at the start, {load_end:.2f} at the end with this "
           "run's own work).")
        + " Sharded runs make other instances than the default mode (as many, "
        "give or take the random draws): each shard has its own seed and draws its "
        "random-next documents from itself.",
    ]
    section = "\n".join(lines)
    print(section)
    if args.write_docs:
        write_section("pretraining-data-benchmark", section)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
