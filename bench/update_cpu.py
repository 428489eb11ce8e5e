"""CPU time per fine-tuning update, arms alternating: a load-tolerant A/B and op profile.

Run by hand with the project's venv (a few minutes per arm and round on 2 cores):

    .venv/bin/python bench/update_cpu.py --max_isa avx2 \\
        --arm "opts off=TF_ENABLE_ONEDNN_OPTS=0" --arm "opts on=TF_ENABLE_ONEDNN_OPTS=1"
    .venv/bin/python bench/update_cpu.py --max_isa avx2 \\
        --arm "multiple 16=--pad_to_multiple_of=16" --arm "multiple 1=--pad_to_multiple_of=1"
    .venv/bin/python bench/update_cpu.py --arm "base=@78d6755" --arm "tree=" --profile 5

Each arm is `NAME=SETTINGS`, SETTINGS space-separated: `VAR=VALUE` environment variables,
`--flag=value` flags of run_classifier_mgpu.py, and `@COMMIT` to run that commit's code (checked
out with `git worktree` into a temporary directory) instead of the working tree. One run of an
arm: all-MiniLM-L6-v2 (converted once with `convert_hf_checkpoint.py --gelu=exact`) fine-tuned
on Pang & Lee's sentence polarity (seq 64, 2 towers x 16, dropout 0.1, as bench/finetune_minilm.py)
for `--skip + --steps` updates; the process's own CPU time (user + system, `os.times`) and wall
time over updates [skip, skip + steps) are taken inside it (a wrapper around the trainer's
`_run_step`). CPU time per update moves much less than wall time when other work shares the
machine, so this can compare settings on a busy host; it is not a throughput figure (the
fine-tuning benches measure those on an idle machine). Arms alternate within each round;
medians over `--rounds`.

With `--profile N`, each arm's last round also records N updates with TensorFlow's profiler and
prints the op types with the most time per update (wall time of the op events, summed over the
threads that ran them: shares, not CPU seconds). Prints Markdown; nothing is written.
"""

import argparse
import collections
import contextlib
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from _common import add_max_isa_flag, cap_isa, convert_minilm, machine  # noqa: E402

DEFAULT_DATA = os.path.normpath(os.path.join(
    REPO, "..", "shared", "material", "classification", "en_panglee_sentence_polarity"))
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")
# Events of the executors' own bookkeeping, which enclose or follow the ops' events.
_NOT_OPS = {"Process", "Start", "Execute", "ExecuteAsyncOnStream", "BlockUntilReady", "Done",
            "ExecutorDoneCallback", "ParallelFor", "RunBackend", "Compile", "Codegen"}

# Runs in the arm's process: times updates [skip, skip + steps) of the script it then runs.
_WRAPPER = r"""
import json, os, runpy, sys, time
sys.path.insert(0, os.getcwd())
from bert_mgpu.engine import training
skip, steps, profile, out = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
run_step, seen, mark = training.Trainer._run_step, [0], {}

def timed(self, *args, **kwargs):
    i = seen[0]
    seen[0] += 1
    if i == skip:
        mark["wall"], mark["cpu"] = time.perf_counter(), os.times()
    if i == skip + steps:
        cpu = os.times()
        mark["result"] = {
            "wall": (time.perf_counter() - mark["wall"]) / steps,
            "cpu": (cpu.user - mark["cpu"].user + cpu.system - mark["cpu"].system) / steps}
    if profile and i == skip + steps:
        import tensorflow as tf
        tf.profiler.experimental.start(out + ".trace")
    if profile and i == skip + steps + profile:
        import tensorflow as tf
        tf.profiler.experimental.stop()
    return run_step(self, *args, **kwargs)

training.Trainer._run_step = timed
sys.argv = sys.argv[5:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    with open(out, "w") as f:
        json.dump(mark.get("result"), f)
"""


@contextlib.contextmanager
def arm_checkouts(arms, work):
    """{commit: a detached worktree of the repository under `work`} for the arms that name a
    commit (`parse_arm`'s fourth field), removed when the block ends."""
    repos = {}
    try:
        for arm in arms:
            if arm[3] and arm[3] not in repos:
                repos[arm[3]] = os.path.join(work, f"code_{len(repos)}")
                subprocess.run(["git", "worktree", "add", "--detach", repos[arm[3]], arm[3]],
                               cwd=REPO, check=True, capture_output=True)
        yield repos
    finally:
        for path in repos.values():
            subprocess.run(["git", "worktree", "remove", "--force", path], cwd=REPO,
                           capture_output=True)


def parse_arm(text):
    """`NAME=SETTINGS` -> (name, environment, flags, commit or None)."""
    name, _, settings = text.partition("=")
    env, flags, commit = {}, [], None
    for item in shlex.split(settings):
        if item.startswith("@"):
            commit = item[1:]
        elif item.startswith("--"):
            flags.append(item)
        elif "=" in item:
            key, _, value = item.partition("=")
            env[key] = value
        else:
            raise ValueError(f"--arm {text!r}: {item!r} is neither VAR=VALUE, --flag nor @COMMIT")
    return name, env, flags, commit


def run_arm(repo, arm, converted, args, out, profile):
    """{"wall", "cpu"} seconds per update of one run of `arm` from the code in `repo`."""
    _, env, flags, _ = arm
    total = args.skip + args.steps + profile + 1
    cmd = [sys.executable, "-c", _WRAPPER, str(args.skip), str(args.steps), str(profile),
           out + ".json", "run_classifier_mgpu.py", "--task_name=tsv", "--do_train=true",
           f"--data_dir={args.data_dir}", f"--vocab_file={converted}/vocab.txt",
           f"--bert_config_file={converted}/bert_config.json",
           f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
           "--max_seq_length=64", "--n_gpus=2", "--train_batch_size=16", "--learning_rate=5e-5",
           f"--num_train_epochs={total * 32 / 3200:.4f}", "--warmup_proportion=0.1",
           "--random_seed=12345", "--log_every_n_steps=1000", "--save_checkpoints_steps=100000",
           f"--output_dir={out}", *flags]
    proc = subprocess.run(cmd, cwd=repo, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env),
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"arm {arm[0]}: run_classifier_mgpu.py failed:\n{proc.stderr[-3000:]}")
    with open(out + ".json") as f:
        return json.load(f)


def op_table(trace_dir, steps, top):
    """[(ms per update, op type)] of the busiest op types in the profiler's trace."""
    sys.path.insert(0, REPO)
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True))[-1], "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.Counter()
    for plane in space.planes:
        if "host" not in plane.name:
            continue
        for line in plane.lines:
            if not line.name.startswith(("tf_Compute", "tf_numa")):
                continue  # op events of the executors' and XLA's threads only
            for event in line.events:
                op = plane.event_metadata[event.metadata_id].name.split(":")[-1]
                if op not in _NOT_OPS:
                    totals[op] += event.duration_ps / 1e9 / steps
    return [(ms, op) for op, ms in totals.most_common(top)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=SETTINGS")
    parser.add_argument("--data_dir", default=DEFAULT_DATA)
    parser.add_argument("--skip", type=int, default=15, help="updates before the timed ones")
    parser.add_argument("--steps", type=int, default=20, help="updates timed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", type=int, default=0, help="updates profiled (last round)")
    parser.add_argument("--top", type=int, default=25)
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    arms = [parse_arm(text) for text in args.arm]
    work = tempfile.mkdtemp(prefix="update_cpu_")
    with arm_checkouts(arms, work) as repos:
        converted = convert_minilm(work, ORACLE_PYTHON)
        results = {arm[0]: [] for arm in arms}
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else arms[::-1]:
                profile = args.profile if r == args.rounds - 1 else 0
                out = os.path.join(work, f"{arm[0].replace(' ', '_')}_{r}")
                results[arm[0]].append(
                    run_arm(repos.get(arm[3], REPO), arm, converted, args, out, profile))
                print(f"round {r} {arm[0]}: {results[arm[0]][-1]} (load "
                      f"{os.getloadavg()[0]:.1f})", file=sys.stderr)
        report(args, arms, results, work)


def report(args, arms, results, work):
    first = statistics.median(r["cpu"] for r in results[arms[0][0]])
    print(f"Command: `.venv/bin/python bench/update_cpu.py "
          f"{' '.join(shlex.quote('--arm=' + a) for a in args.arm)} --rounds {args.rounds}"
          f"{' --max_isa ' + args.max_isa if args.max_isa else ''}`. Machine: {machine()}; "
          f"load average {os.getloadavg()[0]:.1f} at the end. Updates {args.skip}.."
          f"{args.skip + args.steps - 1} of each run.\n")
    print("| arm | CPU ms per update (median) | every round | vs first arm | wall ms per update |")
    print("|---|---:|---|---:|---:|")
    for name, *_ in arms:
        cpu = [r["cpu"] * 1000 for r in results[name]]
        wall = statistics.median(r["wall"] * 1000 for r in results[name])
        print(f"| {name} | {statistics.median(cpu):.0f} | {', '.join(f'{c:.0f}' for c in cpu)}"
              f" | {statistics.median(cpu) / (first * 1000):.3f}x | {wall:.0f} |")
    if args.profile:
        for name, *_ in arms:
            trace = os.path.join(work, f"{name.replace(' ', '_')}_{args.rounds - 1}.json.trace")
            print(f"\n{name}: op types, ms per update (thread time, shares only)\n")
            for ms, op in op_table(trace, args.profile, args.top):
                print(f"- {op}: {ms:.1f}")


if __name__ == "__main__":
    main()
