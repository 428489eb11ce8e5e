"""A/B of the trainer between two commits, and the cost of position-keyed dropout.

Run by hand (about 10 minutes on 2 cores, idle machine):

    .venv/bin/python bench/ab_trainer.py --base 464275a

1. Steady-state examples/s of bench/pretraining.py's configuration (L=4 H=256 A=4, seq 128,
   global batch 32, dropout 0.1, fp32) with n_gpus 1 and 2, at `--base` and at the working tree,
   each run in a fresh process, the two commits alternating in every round (a burst of load from
   elsewhere hits both). `--base` is checked out with `git worktree` into a temporary directory.
2. Dropout alone, in one process, alternating: `tf.nn.dropout` (TF's stateful generator, what
   the base used) vs `modeling.dropout` under `execution.DropoutStream` (Philox keyed by
   seed/step/position), forward and backward on the pretraining shapes of one layer.
The results go to the "trainer-ab" section of docs/benchmarks.md, or to `--section` with
`--title` (another comparison kept beside it); `--skip_dropout` leaves out part 2.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import pretraining as pretraining_bench  # noqa: E402  (its data writer and worker)
from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

WARMUP, TIMED = 3, 15


def train_rate(repo, n_gpus, records, workdir, use_xla=False, timed=TIMED):
    """Steady-state examples/s of bench/pretraining.py's worker of `repo`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=repo)
    proc = subprocess.run(
        [sys.executable, os.path.join(repo, "bench", "pretraining.py"), "--worker", "ours",
         "--n_gpus", str(n_gpus), "--precision", "fp32", "--records", ",".join(records),
         "--output_dir", tempfile.mkdtemp(dir=workdir), "--warmup_steps", str(WARMUP),
         "--timed_steps", str(timed)] + (["--use_xla"] if use_xla else []),
        env=env, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    times = json.loads(proc.stdout.decode().strip().splitlines()[-1])["times"]
    batch = pretraining_bench.GLOBAL_BATCH
    return batch * timed / (times[WARMUP + timed - 1] - times[WARMUP - 1])


def dropout_worker():
    """Prints {"stateful": [ms...], "stateless": [ms...]}: forward + backward of the dropouts of
    one encoder layer at batch 32, seq 128, hidden 256, 4 heads (3 of [4096, 256], 1 of
    [32, 4, 128, 128])."""
    import tensorflow as tf

    from bert_mgpu.model import execution, modeling

    hidden = tf.random.normal([32 * 128, 256])
    probs = tf.random.normal([32, 4, 128, 128])

    def make(stateless):
        @tf.function
        def step(h, p):
            with tf.GradientTape() as tape:
                tape.watch([h, p])
                if stateless:
                    with execution.entered(stream=execution.DropoutStream(
                            1, tf.constant(5, tf.int64), tf.constant(0, tf.int64),
                            tf.constant(32, tf.int64))):
                        outs = [modeling.dropout(h, 0.1, True) for _ in range(3)] + \
                            [modeling.dropout(p, 0.1, True)]
                else:
                    outs = [tf.nn.dropout(h, rate=0.1) for _ in range(3)] + \
                        [tf.nn.dropout(p, rate=0.1)]
                # Non-linear in the outputs, so the masks are needed in the backward pass too.
                loss = tf.add_n([tf.reduce_sum(tf.square(o)) for o in outs])
            return tape.gradient(loss, [h, p])
        return step

    fns = {"stateful": make(False), "stateless": make(True)}
    for fn in fns.values():
        fn(hidden, probs)
    out = {name: [] for name in fns}
    for _ in range(10):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(5):
                grads = fn(hidden, probs)
            grads[0].numpy()
            out[name].append((time.perf_counter() - start) / 5 * 1e3)
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="464275a", help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_load", type=float, default=0.5)
    parser.add_argument("--worker", choices=["dropout"], help=argparse.SUPPRESS)
    parser.add_argument("--no_write", action="store_true")
    parser.add_argument("--section", default="trainer-ab",
                        help="the docs/benchmarks.md section written")
    parser.add_argument("--title", default="Trainer A/B: before and after the job skeleton and "
                        "position-keyed dropout", help="the section's heading")
    parser.add_argument("--skip_dropout", action="store_true", help="no dropout-alone timing")
    parser.add_argument("--n_gpus", default="1,2", help="the tower counts compared")
    parser.add_argument("--use_xla", action="store_true", help="both sides with --use_xla")
    parser.add_argument("--timed_steps", type=int, default=TIMED, help="updates timed per run")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.worker == "dropout":
        return dropout_worker()
    tower_counts = [int(n) for n in args.n_gpus.split(",")]
    start_load = wait_for_quiet(args.max_load, 1800, "ab_trainer")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    started = datetime.datetime.now()
    rates, loads = {}, []
    with tempfile.TemporaryDirectory(prefix="ab_trainer_") as workdir:
        base_dir = os.path.join(workdir, "base")
        subprocess.run(["git", "worktree", "add", "--detach", base_dir, args.base], cwd=REPO,
                       check=True, stdout=subprocess.DEVNULL)
        try:
            records, _ = pretraining_bench.write_data(workdir)
            repos = [("base", base_dir), ("new", REPO)]
            for r in range(args.rounds):
                for n_gpus in tower_counts:
                    for name, repo in (repos if r % 2 == 0 else repos[::-1]):
                        loads.append(os.getloadavg()[0])
                        rate = train_rate(repo, n_gpus, records, workdir, args.use_xla,
                                          args.timed_steps)
                        rates.setdefault((name, n_gpus), []).append(rate)
                        print(f"round {r + 1} n_gpus={n_gpus} {name}: {rate:.1f} examples/s "
                              f"(load {loads[-1]:.2f})", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", base_dir], cwd=REPO,
                           stdout=subprocess.DEVNULL)
    drop = None
    if not args.skip_dropout:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "dropout"],
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO),
                              stdout=subprocess.PIPE, check=True)
        drop = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    end_load = os.getloadavg()[0]
    lines = [
        f"## {args.title}",
        "",
        f"Command: `.venv/bin/python bench/ab_trainer.py {' '.join(sys.argv[1:])}` "
        f"(working tree at {head}; {started:%Y-%m-%d %H:%M}).",
        f"Machine: {machine()}. Load (1-min average): {start_load:.2f} at start, "
        f"{min(loads):.2f}-{max(loads):.2f} at run starts, {end_load:.2f} at the end.",
        "",
        "bench/pretraining.py's configuration (L=4 H=256 A=4 I=1024, vocab 30522, seq 128, 20 "
        "predictions, global batch 32, dropout 0.1, fp32"
        f"{', --use_xla' if args.use_xla else ''}), steady-state examples/s over "
        f"{args.timed_steps} updates after {WARMUP}, each run a fresh process, the commits "
        "alternating in "
        f"each of {args.rounds} rounds:",
        "",
        "| n_gpus | base examples/s (runs) | new examples/s (runs) | new / base (medians) |",
        "|---|---|---|---|",
    ]
    for n_gpus in tower_counts:
        base, new = rates[("base", n_gpus)], rates[("new", n_gpus)]
        lines.append(f"| {n_gpus} | {statistics.median(base):.1f} "
                     f"({', '.join(f'{x:.1f}' for x in base)}) | {statistics.median(new):.1f} "
                     f"({', '.join(f'{x:.1f}' for x in new)}) | "
                     f"{statistics.median(new) / statistics.median(base):.3f}x |")
    if drop:
        stateful = statistics.median(drop["stateful"])
        stateless = statistics.median(drop["stateless"])
        lines += [
            "",
            "Dropout alone (one encoder layer's 4 dropouts at batch 32, forward + backward, "
            f"median of 10 alternating rounds): `tf.nn.dropout` {stateful:.2f} ms, position-keyed "
            f"Philox (`execution.DropoutStream`) {stateless:.2f} ms: "
            f"{stateless / stateful:.2f}x the time.",
        ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(args.section, text)


if __name__ == "__main__":
    main()
