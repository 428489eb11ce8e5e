"""A/B of fine-tuning between two commits: the same run_classifier_mgpu.py job from each.

Run by hand (about 10 minutes on 2 cores, idle machine):

    .venv/bin/python bench/ab_finetune.py --base 8b6a78f
    .venv/bin/python bench/ab_finetune.py --base HEAD --base_env TF_ENABLE_ONEDNN_OPTS=0 \
        --max_isa avx2          # one commit, a setting changed for the base arm only
    .venv/bin/python bench/ab_finetune.py --base HEAD --tree_flags=--pad_to_multiple_of=1

all-MiniLM-L6-v2 (converted once with `convert_hf_checkpoint.py --gelu=exact`) fine-tuned on the
first `--train_examples` sentences of Pang & Lee's polarity set (seq 64, 2 towers x 16, dropout
0.1, `--pad_to_longest` as by default, 1 epoch), from `--base` (checked out with `git worktree`
into a temporary directory) and from the working tree, one process at a time, the two
alternating in every round (a burst of load from elsewhere hits both). Per run: the whole
process's wall time, the time to the end of the first update (start-up and tracing), the steady
examples/s (the median of the trainer's logged rates after the first) and the dev accuracy
(which must be equal when the commits compute the same job), and the whole process's CPU
time (user + system, its children's rusage: less sensitive than wall time to other work on a
shared machine). `--base_env NAME=VALUE` (repeatable) sets a variable for the base arm only
and `--tree_flags` adds flags to the working tree's command, so one commit can be compared
with itself under two settings. Medians over `--rounds`; the ratio is working tree / base.
Written to the "finetune-ab" section of docs/benchmarks.md unless `--no_write`.
"""

import argparse
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from _common import (  # noqa: E402
    add_max_isa_flag,
    cap_isa,
    convert_minilm,
    machine,
    wait_for_quiet,
    write_section,
)
from startup import first_step_unix, subset  # noqa: E402

DEFAULT_DATA = os.path.normpath(os.path.join(
    REPO, "..", "shared", "material", "classification", "en_panglee_sentence_polarity"))
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")
_RATE = re.compile(r"\] step \d+/\d+: .*, ([0-9.]+) examples/s \(global\)")


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_arm(repo, converted, data, out, log_path, extra_env=None, extra_flags=()):
    """(wall s, first update s, steady examples/s, dev accuracy, CPU s) of one run from
    `repo`, with `extra_env` added to its environment and `extra_flags` to its command."""
    cmd = [sys.executable, os.path.join(repo, "run_classifier_mgpu.py"), "--task_name=tsv",
           "--do_train=true", "--do_eval=true", f"--data_dir={data}",
           f"--vocab_file={converted}/vocab.txt",
           f"--bert_config_file={converted}/bert_config.json",
           f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
           "--max_seq_length=64", "--n_gpus=2", "--train_batch_size=16", "--learning_rate=5e-5",
           "--num_train_epochs=1", "--log_every_n_steps=5", "--save_checkpoints_steps=100000",
           f"--output_dir={out}", *extra_flags]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=repo,
               **(extra_env or {}))
    start, cpu = time.time(), _children_cpu()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=repo)
    wall, cpu = time.time() - start, _children_cpu() - cpu
    if proc.returncode:
        with open(log_path) as f:
            raise RuntimeError(f"{repo}: run_classifier_mgpu.py failed:\n{f.read()[-3000:]}")
    with open(log_path) as f:
        rates = [float(m.group(1)) for m in map(_RATE.search, f) if m]
    with open(os.path.join(out, "eval_results.txt")) as f:
        results = dict(line.strip().split(" = ") for line in f if " = " in line)
    return (wall, first_step_unix(log_path, start) - start, statistics.median(rates),
            float(results["eval_accuracy"]), cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--data_dir", default=DEFAULT_DATA)
    parser.add_argument("--train_examples", type=int, default=1600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_wait", type=float, default=600.0)
    parser.add_argument("--no_write", action="store_true")
    parser.add_argument("--base_env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of the base arm only (repeatable)")
    parser.add_argument("--tree_flags", default="",
                        help="flags added to the working tree's command")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    if any("=" not in item for item in args.base_env):
        parser.error("--base_env takes NAME=VALUE")
    cap_isa(args.max_isa)
    work = tempfile.mkdtemp(prefix="ab_finetune_")
    base = os.path.join(work, "base")
    subprocess.run(["git", "worktree", "add", "--detach", base, args.base], cwd=REPO,
                   check=True, capture_output=True)
    try:
        converted = convert_minilm(work, ORACLE_PYTHON)
        data = os.path.join(work, "data")
        subset(args.data_dir, data, args.train_examples, 400)
        arms = {"base": (base, dict(item.split("=", 1) for item in args.base_env), ()),
                "tree": (REPO, None, shlex.split(args.tree_flags))}
        runs = {name: [] for name in arms}
        for r in range(args.rounds):
            for name in (("base", "tree") if r % 2 == 0 else ("tree", "base")):
                wait_for_quiet(0.5, args.max_wait, "ab_finetune")
                out = os.path.join(work, f"{name}_{r}")
                repo, env, flags = arms[name]
                runs[name].append(run_arm(repo, converted, data, out, out + ".log", env, flags))
                print(f"round {r} {name}: wall {runs[name][-1][0]:.1f} s, first update "
                      f"{runs[name][-1][1]:.1f} s, {runs[name][-1][2]:.1f} ex/s, accuracy "
                      f"{runs[name][-1][3]:.4f}, CPU {runs[name][-1][4]:.1f} s", file=sys.stderr)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", base], cwd=REPO,
                       capture_output=True)
    report(args, runs)


def report(args, runs):
    med = {name: [statistics.median(v[i] for v in vs) for i in (0, 1, 2, 3, 4)]
           for name, vs in runs.items()}
    accuracy = {name: sorted({v[3] for v in vs}) for name, vs in runs.items()}
    tree = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          capture_output=True, text=True).stdout.strip()
    rows = [("whole process, s", 0, False), ("to the end of update 1, s", 1, False),
            ("steady training, examples/s", 2, True), ("whole process, CPU s", 4, False)]
    options = "".join(f" --base_env {item}" for item in args.base_env) + (
        f" --tree_flags={shlex.quote(args.tree_flags)}" if args.tree_flags else "") + (
        f" --max_isa {args.max_isa}" if args.max_isa else "")
    lines = [f"Command: `.venv/bin/python bench/ab_finetune.py --base {args.base} --rounds "
             f"{args.rounds}{options}` (working tree at {tree}; load average "
             f"{os.getloadavg()[0]:.1f} at the end). Machine: {machine()}. all-MiniLM-L6-v2, "
             f"{args.train_examples} Pang & Lee sentences, seq 64, 2 towers x 16, 1 epoch; "
             f"medians of {args.rounds} runs per side, the sides alternating.", "",
             "| | base | working tree | speed, tree vs base |", "|---|---:|---:|---:|"]
    for label, i, higher in rows:
        b, t = med["base"][i], med["tree"][i]
        ratio = t / b if higher else b / t
        lines.append(f"| {label} | {b:.2f} | {t:.2f} | {ratio:.3f}x |")
    lines.append(f"| dev accuracy (every run) | {accuracy['base']} | {accuracy['tree']} | |")
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("finetune-ab", "### Fine-tuning A/B between two commits\n\n" + text)


if __name__ == "__main__":
    main()
