"""SQuAD fine-tuning speed and F1: `run_squad.py` vs Hugging Face `BertForQuestionAnswering`
from the same initial weights, on the same windows in the same order.

Run by hand with the project's venv (the oracle venv must exist: torch, transformers and the
all-MiniLM-L6-v2 package; about 10 minutes on 2 cores):

    .venv/bin/python bench/squad_finetune.py                 # writes docs/benchmarks.md
    .venv/bin/python bench/squad_finetune.py --no_write

What one run does, one arm at a time (the machine has 2 shared cores):
  1. all-MiniLM-L6-v2 converted by our converter (--gelu=exact) and a SQuAD head from Google's
     initializer, written as one init checkpoint (tests/_squad_hf.squad_checkpoint); the peer
     loads the same encoder from the Hugging Face folder and the same head as `qa_outputs`
     (before training, its start logits on the first prediction windows are compared with ours
     at the same weights, and the bench stops if they differ by more than 1e-3);
  2. **ours**: `run_squad.py --do_train --do_eval --pad_to_longest=true --n_gpus=2` on the
     article (the only SQuAD text the project has is the first article of the official dev
     set, ../shared/material/squad: trained on with each question's first answer, as a train
     file has one, and predicted and scored with all of them), then the official v1.1 EM/F1 in
     its eval_results.txt;
  3. **the peer**: bench/squad_hf_peer.py in the oracle venv, fed our training windows (read
     back from our run's train TFRecord) in our trainer's order (the seeded per-epoch
     permutations of input_pipeline.epoch_permutations), each batch padded to its longest
     window, with the same hyper-parameters; its start/end logits on the prediction windows go
     through our post-processing (data/squad_predictions.py, equal to Google's write_predictions:
     tests/test_run_squad.py) and the same official evaluation.

Speed: training examples/s over the updates after `--skip_steps` (ours from the timestamps of the
trainer's per-update log lines, the peer from its own clock), and each arm's whole wall time.
F1 is measured on the questions trained on (the article is all there is): it says whether both
arms learned alike, not how well a model generalises.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(REPO, "tests"), REPO]
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _common import add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402  (bench/)
from _oracle import MATERIAL, oracle_python  # noqa: E402  (tests/)
from finetune_minilm import parse_step_lines  # noqa: E402  (bench/)


def run(cmd, log_path, env):
    start, load = time.time(), os.getloadavg()[0]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            raise SystemExit(f"{cmd[1]} failed:\n{f.read()[-3000:]}")
    return {"wall": time.time() - start, "load": (load, os.getloadavg()[0])}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work_dir", default="/tmp/squad_bench")
    p.add_argument("--squad_file", default=os.path.join(
        MATERIAL, "squad", "squad_v11_dev_normans_answerable.json"))
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--doc_stride", type=int, default=64)
    p.add_argument("--max_query_length", type=int, default=32)
    p.add_argument("--n_gpus", type=int, default=2)
    p.add_argument("--train_batch_size", type=int, default=8, help="per tower")
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--epochs", type=float, default=6.0)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--skip_steps", type=int, default=5)
    p.add_argument("--dropout", type=float, default=None,
                   help="hidden and attention dropout on both arms in place of the model's "
                        "(0: nothing random differs between the arms)")
    p.add_argument("--no_write", action="store_true")
    add_max_isa_flag(p)
    args = p.parse_args()
    cap_isa(args.max_isa)
    import _squad_hf  # (tests/) imports TensorFlow
    import tensorflow as tf

    from bert_mgpu import tokenization
    from bert_mgpu.data import input_pipeline, squad_data, squad_predictions
    from bert_mgpu.metrics import squad as squad_metrics

    work = args.work_dir
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    hf_dir, converted, prefix = _squad_hf.squad_checkpoint(work)
    bert_config = converted["bert_config"]
    if args.dropout is not None:
        with open(bert_config) as f:
            config = json.load(f)
        config["hidden_dropout_prob"] = config["attention_probs_dropout_prob"] = args.dropout
        bert_config = os.path.join(work, "bert_config.json")
        with open(bert_config, "w") as f:
            json.dump(config, f, indent=2)
    reader = tf.train.load_checkpoint(prefix)
    head = os.path.join(work, "head.npz")
    np.savez(head, **{k: reader.get_tensor(f"cls/squad/{k}")
                      for k in ("output_weights", "output_bias")})
    batch = args.train_batch_size * args.n_gpus
    # Training needs one answer per question (as SQuAD's train file has; the dev file lists
    # every annotator's): the first.
    with open(args.squad_file, encoding="utf-8") as f:
        dataset = json.load(f)
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    train_file = os.path.join(work, "train.json")
    with open(train_file, "w", encoding="utf-8") as f:
        json.dump(dataset, f)

    # Ours, the whole process.
    out_dir = os.path.join(work, "ours")
    ours = run([sys.executable, os.path.join(REPO, "run_squad.py"),
                f"--train_file={train_file}", f"--predict_file={args.squad_file}",
                f"--vocab_file={converted['vocab']}", "--do_lower_case=true",
                f"--bert_config_file={bert_config}", f"--init_checkpoint={prefix}",
                f"--output_dir={out_dir}", "--do_train=true", "--do_eval=true",
                f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}",
                f"--max_query_length={args.max_query_length}", f"--n_gpus={args.n_gpus}",
                f"--train_batch_size={args.train_batch_size}",
                f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.epochs}",
                f"--random_seed={args.seed}", "--pad_to_longest=true", "--predict_batch_size=32",
                "--log_every_n_steps=1", "--save_checkpoints_steps=100000"],
               os.path.join(work, "ours.log"), dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    times = {step: t for step, t, _ in parse_step_lines(os.path.join(work, "ours.log"))}
    steps = max(times)
    ours["examples_per_sec"] = ((steps - args.skip_steps) * batch /
                                (times[steps] - times[args.skip_steps]))
    with open(os.path.join(out_dir, "eval_results.txt")) as f:
        ours.update({k: float(v) for k, v in (line.strip().split(" = ") for line in f
                                               if " = " in line)})

    # The peer's inputs: our training windows in our order, the prediction windows.
    record_file, = glob.glob(os.path.join(out_dir, "train.*.tf_record"))
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(record_file)]
    index = {s: i for i, s in enumerate(serialized)}  # each record has its unique_id
    order = [index[r.numpy()] for r in
             input_pipeline.epoch_permutations([record_file], args.seed).take(steps * batch)]
    spec = {k: tf.io.FixedLenFeature([n], tf.int64)
            for k, n in squad_data.squad_train_shapes(args.max_seq_length).items()}
    parsed = [tf.io.parse_single_example(s, spec) for s in serialized]
    train = {k: np.stack([r[k].numpy().reshape(-1) for r in parsed]).squeeze()
             for k in ("input_ids", "input_mask", "segment_ids", "start_positions",
                       "end_positions")}
    tokenizer = tokenization.FullTokenizer(converted["vocab"], do_lower_case=True)
    examples = squad_data.read_squad_examples(args.squad_file, is_training=False)
    features = list(squad_data.convert_examples_to_features(
        examples, tokenizer, args.max_seq_length, args.doc_stride, args.max_query_length,
        is_training=False))
    evaluation = {k: np.array([getattr(f, k) for f in features], np.int32)
                  for k in ("input_ids", "input_mask", "segment_ids")}
    unique_ids = np.array([f.unique_id for f in features])
    check, _ = _squad_hf.our_logits(converted, prefix, {k: v[:8] for k, v in evaluation.items()},
                                    unique_ids[:8], 8)
    data = os.path.join(work, "windows.npz")
    np.savez(data, order=np.array(order), check_start_logits=check,
             **train,
             **{f"eval_{k}": v for k, v in evaluation.items()})

    warmup = int(steps * 0.1)  # --warmup_proportion's default, as ours
    peer = run([oracle_python(), os.path.join(HERE, "squad_hf_peer.py"), f"--model_dir={hf_dir}",
                f"--head={head}", f"--data={data}", f"--batch_size={batch}",
                f"--learning_rate={args.learning_rate}", f"--steps={steps}",
                f"--warmup_steps={warmup}", f"--skip_steps={args.skip_steps}",
                f"--seed={args.seed}", f"--output={os.path.join(work, 'peer_logits.npz')}"]
               + ([] if args.dropout is None else [f"--dropout={args.dropout}"]),
               os.path.join(work, "peer.log"), dict(os.environ, HF_HUB_OFFLINE="1"))
    with open(os.path.join(work, "peer.log")) as f:
        peer.update(json.loads(f.read().strip().splitlines()[-1]))
    if peer["init_logits_max_diff"] > 1e-3:
        raise SystemExit(f"the peer's logits at the initial weights differ from ours by "
                         f"{peer['init_logits_max_diff']:.2e}")
    logits = np.load(os.path.join(work, "peer_logits.npz"))
    results = [squad_predictions.RawResult(int(u), s, e) for u, s, e in
               zip(unique_ids, logits["start_logits"], logits["end_logits"])]
    predictions = squad_predictions.compute_predictions(
        examples, features, results, _squad_hf.N_BEST_SIZE, _squad_hf.MAX_ANSWER_LENGTH, True,
        False)[0]
    with open(args.squad_file, encoding="utf-8") as f:
        peer.update(squad_metrics.evaluate(json.load(f), predictions, False))

    text = report(args, ours, peer, steps, warmup, len(serialized), len(features),
                  len(examples))
    print(text)
    if not args.no_write:
        write_section("squad-finetune", text)


def report(args, ours, peer, steps, warmup, windows, eval_windows, questions):
    speed = ours["examples_per_sec"] / peer["examples_per_sec"]
    batch = args.n_gpus * args.train_batch_size
    f1_gap = ours["f1"] - peer["f1"]
    return "\n".join([
        "## SQuAD fine-tuning: run_squad.py vs Hugging Face BertForQuestionAnswering (issue 33)",
        "",
        f"Command: `.venv/bin/python bench/squad_finetune.py` ({time.strftime('%Y-%m-%d %H:%M')}"
        f"; defaults: windows {args.max_seq_length}/{args.doc_stride}/{args.max_query_length}, "
        f"{args.n_gpus} towers x {args.train_batch_size}, learning rate "
        f"{args.learning_rate:g}, {args.epochs:g} epochs, seed {args.seed}).",
        f"Machine: {machine()}; torch {peer['torch']} ({peer['threads']} threads).",
        "",
        f"{os.path.basename(args.squad_file)} ({questions} questions, {windows} training "
        f"windows, {eval_windows} prediction windows): all-MiniLM-L6-v2 and a seeded SQuAD "
        f"head, the same initial weights on both sides (the peer's start logits at them equal "
        f"ours to {peer['init_logits_max_diff']:.1e}); {steps} updates of {batch} "
        f"windows, warm-up {warmup}; ours with `--pad_to_longest=true`, "
        f"the peer padding each batch to its longest window; the peer fed our windows in our "
        f"order. EM/F1: the official v1.1 evaluation of each arm's predictions (ours: "
        f"eval_results.txt; the peer: its logits through the same post-processing) **on the "
        f"questions trained on** (the only SQuAD text here), so they say whether both learned "
        f"alike, not how well they generalise. Load (1-minute average) before / after: ours "
        f"{ours['load'][0]:.1f} / {ours['load'][1]:.1f}, the peer {peer['load'][0]:.1f} / "
        f"{peer['load'][1]:.1f}.",
        "",
        "| arm | training examples/s (after update "
        f"{args.skip_steps}) | whole process, s | exact match | F1 |",
        "|---|---:|---:|---:|---:|",
        f"| **ours** `run_squad.py` (TF 2.21, --n_gpus={args.n_gpus}) | "
        f"{ours['examples_per_sec']:.1f} | {ours['wall']:.0f} | {ours['exact_match']:.2f} | "
        f"{ours['f1']:.2f} |",
        f"| Hugging Face `BertForQuestionAnswering` (torch {peer['torch']}) | "
        f"{peer['examples_per_sec']:.1f} | {peer['wall']:.0f} | {peer['exact_match']:.2f} | "
        f"{peer['f1']:.2f} |",
        "",
        f"Ours / the peer's training examples/s: **{speed:.2f}x**; F1 ours − peer: "
        f"{f1_gap:+.2f} points. Whole process: ours includes start-up, feature writing, "
        f"tracing, training, prediction and evaluation; the peer loading, training and "
        f"prediction (no tokenization: it is given our windows).",
    ])


if __name__ == "__main__":
    main()
