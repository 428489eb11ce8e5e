"""Input-pipeline cost of run_pretraining.py --dynamic_masking against static records.

Run by hand (not a test; about 10 minutes on 2 cores):

    .venv/bin/python bench/dynamic_masking.py

bench/pretraining.py's configuration (L=4, H=256, A=4, I=1024, vocab 30522, dropout 0.1, seq 128,
20 predictions, global batch 32, fp32, n_gpus=1): the same 512 synthetic token sequences written
twice, as Google-format masked records and as unmasked --dynamic_masking records (word_starts
from the uncased vocabulary's `##` pieces). Measured, each in its own fresh process, one after
the other, alternating:
  * the input pipeline alone: batches/s of `input_pipeline.record_dataset` for static records
    and for dynamic masking (token, whole-word, span), nothing else running;
  * training: `training.Trainer.train` (bench/pretraining.py's worker) on static records and on
    dynamic records (token masking), steady-state step time.
The report (printed, and the dynamic-masking section of docs/benchmarks.md) gives the pipeline's
time per batch as a share of the step time, and the measured step times of both.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import pretraining as base  # noqa: E402  (bench/pretraining.py: model, data shape, timing)
from _common import add_max_isa_flag, busy_processes, cap_isa, machine, write_section  # noqa: E402

VOCAB_FILE = os.path.join(REPO, "data", "vocab", "bert_uncased_vocab.txt")
MODES = ("static", "token", "whole_word", "span")


def _masking(mode, vocab):
    from bert_mgpu.data import input_pipeline
    return input_pipeline.DynamicMasking(
        max_seq_length=base.SEQ, max_predictions_per_seq=base.PREDS, masked_lm_prob=0.15,
        vocab_size=len(vocab), mask_id=vocab["[MASK]"], cls_id=vocab["[CLS]"],
        sep_id=vocab["[SEP]"], seed=1, whole_word=mode == "whole_word", span=mode == "span")


def _dataset(mode, records):
    from bert_mgpu import tokenization
    from bert_mgpu.data import features, input_pipeline
    if mode == "static":
        return input_pipeline.record_dataset(records["static"],
                                             features.pretraining_shapes(base.SEQ, base.PREDS),
                                             base.GLOBAL_BATCH, True, seed=1)
    m = _masking(mode, tokenization.load_vocab(VOCAB_FILE))
    return input_pipeline.record_dataset(records["dynamic"], m.shapes, base.GLOBAL_BATCH, True,
                                         seed=1, masking=m)


def worker_pipeline(args):
    """Seconds per batch of the input pipeline alone (after 20 warm-up batches)."""
    base._quiet_tf()
    records = json.loads(args.records)
    iterator = iter(_dataset(args.mode, records))
    for _ in range(20):
        next(iterator)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.batches):
        next(iterator)
    json.dump({"seconds_per_batch": (time.perf_counter() - start) / args.batches,
               "cpu_seconds_per_batch": (time.process_time() - cpu) / args.batches},
              sys.stdout)


def worker_train(args):
    """Trains with `training.Trainer` (as bench/pretraining.py) on static or dynamic records."""
    base._quiet_tf()
    from absl import logging
    logging.set_verbosity(logging.WARNING)
    import tensorflow as tf

    from bert_mgpu.configs.base import TrainConfig
    from bert_mgpu.engine import towers, training
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.pretraining import BertPretrainer

    devices = towers.setup_devices(1)
    tf.random.set_seed(0)
    steps = args.warmup_steps + args.timed_steps
    cfg = TrainConfig(
        output_dir=args.output_dir, train_batch_size=base.GLOBAL_BATCH, n_gpus=1,
        num_train_steps=steps, num_warmup_steps=max(1, steps // 10), learning_rate=1e-4,
        save_checkpoints_steps=10 ** 9, log_every_n_steps=10 ** 9)
    task = BertPretrainer(BertConfig.from_dict(base.BERT_CONFIG))
    trainer = training.Trainer(task, cfg, devices)
    times = []
    step = trainer.step
    start = time.monotonic()

    def timed_step(*a, **kw):
        out = step(*a, **kw)
        float(out["loss"])
        times.append(time.monotonic() - start)
        return out

    trainer.step = timed_step
    trainer.train(_dataset(args.mode, json.loads(args.records)))
    json.dump({"times": times}, sys.stdout)


def write_data(workdir):
    """The same 512 token sequences as masked (static) and unmasked (dynamic) records."""
    import numpy as np

    from bert_mgpu import tokenization
    from bert_mgpu.data import tfrecord
    vocab = tokenization.load_vocab(VOCAB_FILE)
    words = [i for t, i in vocab.items() if not t.startswith(("##", "[")) and i >= 1000]
    pieces = [i for t, i in vocab.items() if t.startswith("##")]
    rng = np.random.RandomState(0)
    paths = {"static": [], "dynamic": []}
    writers = {}
    for kind in paths:
        for shard in range(2):
            path = os.path.join(workdir, f"{kind}-{shard}.tfrecord")
            paths[kind].append(path)
            writers[path] = tfrecord.RecordFileWriter(path).__enter__()
    for r in range(base.NUM_RECORDS):
        length = base.SEQ if rng.rand() < 0.9 else rng.randint(base.SEQ // 2, base.SEQ)
        ids = np.zeros(base.SEQ, np.int64)
        is_piece = rng.rand(length) < 0.2  # ~1.25 pieces per word, as English WordPiece
        ids[:length] = np.where(is_piece, rng.choice(pieces, length), rng.choice(words, length))
        cut = length // 2
        ids[0], ids[cut - 1], ids[length - 1] = 101, 102, 102
        mask = (np.arange(base.SEQ) < length).astype(np.int64)
        segments = ((np.arange(base.SEQ) >= cut) & (mask == 1)).astype(np.int64)
        special = np.isin(ids, [101, 102]) | (mask == 0)
        starts = (~special & ~np.isin(ids, pieces)).astype(np.int64)
        label = [int(rng.randint(2))]
        k = min(base.PREDS, max(1, int(round(length * 0.15))))
        positions = np.zeros(base.PREDS, np.int64)
        positions[:k] = np.sort(rng.choice(np.flatnonzero(~special), size=k, replace=False))
        weights = (np.arange(base.PREDS) < k).astype(np.float32)
        masked = ids.copy()
        masked[positions[:k]] = 103
        shard = r % 2
        writers[paths["static"][shard]].write(tfrecord.encode_example({
            "input_ids": masked.tolist(), "input_mask": mask.tolist(),
            "segment_ids": segments.tolist(), "masked_lm_positions": positions.tolist(),
            "masked_lm_ids": np.where(weights > 0, ids[positions], 0).tolist(),
            "masked_lm_weights": weights.tolist(), "next_sentence_labels": label}))
        writers[paths["dynamic"][shard]].write(tfrecord.encode_example({
            "input_ids": ids.tolist(), "input_mask": mask.tolist(),
            "segment_ids": segments.tolist(), "next_sentence_labels": label,
            "word_starts": starts.tolist()}))
    for w in writers.values():
        w.__exit__(None, None, None)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=["pipeline", "train"], help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--records", help=argparse.SUPPRESS)
    parser.add_argument("--output_dir", help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, default=200, help="pipeline batches timed")
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference_step", type=float, default=0.552,
                        help="a step of this configuration on a quiet machine (s): "
                             "bench/pretraining.py's n_gpus=1 fp32 median in docs/benchmarks.md")
    parser.add_argument("--no_write", action="store_true")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.worker == "pipeline":
        return worker_pipeline(args)
    if args.worker == "train":
        return worker_train(args)
    run(args)


def run(args):
    started = datetime.datetime.now()
    load = [os.getloadavg()[0]]
    busy = busy_processes()
    me = [os.path.abspath(__file__)]
    pipeline = {m: [] for m in MODES}
    train = {"static": [], "token": []}
    with tempfile.TemporaryDirectory(prefix="bench_dynamic_masking_") as workdir:
        records = json.dumps(write_data(workdir))
        for r in range(args.rounds):
            for mode in MODES:
                out = base.run_worker(me + ["--worker", "pipeline", "--mode", mode, "--records",
                                            records, "--batches", str(args.batches)])
                pipeline[mode].append(out)
                print(f"round {r + 1}: pipeline {mode}: {1e3 * out['seconds_per_batch']:.2f} "
                      f"ms/batch ({1e3 * out['cpu_seconds_per_batch']:.2f} ms CPU)",
                      file=sys.stderr)
            for mode in train:
                out = base.run_worker(me + [
                    "--worker", "train", "--mode", mode, "--records", records,
                    "--warmup_steps", str(args.warmup_steps), "--timed_steps",
                    str(args.timed_steps), "--output_dir", tempfile.mkdtemp(dir=workdir)])
                rate = base.steady_rate(out["times"], args.warmup_steps, args.timed_steps,
                                        base.GLOBAL_BATCH)
                train[mode].append(rate)
                load.append(os.getloadavg()[0])
                print(f"round {r + 1}: train {mode}: median step {rate['step_median']:.3f} s, "
                      f"{rate['examples_per_sec']:.1f} examples/s", file=sys.stderr)
    busy += busy_processes()
    report = build_report(args, pipeline, train, started, load, busy)
    print(report)
    if not args.no_write:
        write_section("dynamic-masking-benchmark", report)


def build_report(args, pipeline, train, started, load, busy):
    step = {m: min(r["step_median"] for r in runs) for m, runs in train.items()}
    all_steps = {m: ", ".join(f"{r['step_median']:.3f}" for r in runs) for m, runs in train.items()}
    best = {m: min(o["seconds_per_batch"] for o in v) for m, v in pipeline.items()}
    cpu = {m: min(o["cpu_seconds_per_batch"] for o in v) for m, v in pipeline.items()}
    lines = [
        "## Dynamic masking: input-pipeline cost (run_pretraining.py --dynamic_masking)",
        "",
        f"Measured {started:%Y-%m-%d %H:%M} with `.venv/bin/python bench/dynamic_masking.py "
        f"--rounds {args.rounds} --batches {args.batches} --warmup_steps {args.warmup_steps} "
        f"--timed_steps {args.timed_steps}`.",
        f"Machine: {machine()}; 1-minute load average {min(load):.1f}-{max(load):.1f} during "
        f"the run" + (" (**shared: other engineers' processes were running**: "
                      + "; ".join(sorted(set(b.split(' ', 2)[2][:40] for b in busy)))[:300]
                      + ")" if busy else "") + ".",
        "",
        "bench/pretraining.py's configuration: L=4, H=256, A=4, I=1024, vocab 30522, dropout 0.1, "
        "seq 128, 20 predictions, global batch 32, fp32, n_gpus=1; the same 512 synthetic "
        "sequences (90% full length, ~20% `##` pieces) as Google-format masked records and as "
        "unmasked `--dynamic_masking` records. Each measurement is a fresh process, one at a "
        "time, alternating; best of the rounds (all rounds listed).",
        "",
        "| input | pipeline alone, wall ms per batch of 32 (best) | CPU ms per batch (best; all "
        "threads) | CPU time as a share of a static training step | wall ms, every round |",
        "|---|---:|---:|---:|---|",
    ]
    for mode in MODES:
        label = "static records (parse only)" if mode == "static" else \
            f"dynamic masking, {mode.replace('_', '-')}"
        lines.append(f"| {label} | {1e3 * best[mode]:.2f} | {1e3 * cpu[mode]:.2f} | "
                     f"{100 * cpu[mode] / step['static']:.2f}% | "
                     + ", ".join(f"{1e3 * o['seconds_per_batch']:.2f}" for o in pipeline[mode])
                     + " |")
    extra = {m: cpu[m] - cpu["static"] for m in MODES[1:]}
    static_steps = [r["step_median"] for r in train["static"]]
    spread = 100 * (max(static_steps) - min(static_steps)) / min(static_steps)
    diff = 100 * (step["token"] - step["static"]) / step["static"]
    lines += [
        "",
        f"Training step (median of {args.timed_steps} steady-state updates; best round): static "
        f"records **{step['static']:.3f} s** (rounds {all_steps['static']}), dynamic token "
        f"masking **{step['token']:.3f} s** (rounds {all_steps['token']}): {diff:+.1f}%.",
        "",
        f"- Masking's own work per batch (pipeline CPU time over static parsing): token "
        f"{1e3 * extra['token']:.2f} ms, whole-word {1e3 * extra['whole_word']:.2f} ms, span "
        f"{1e3 * extra['span']:.2f} ms: **{100 * extra['token'] / step['static']:.2f}% / "
        f"{100 * extra['whole_word'] / step['static']:.2f}% / "
        f"{100 * extra['span'] / step['static']:.2f}%** of a {step['static']:.3f} s step "
        f"(goal <= 3%); of the {args.reference_step:.3f} s step bench/pretraining.py measured "
        f"on the quiet machine: **{100 * extra['token'] / args.reference_step:.2f}% / "
        f"{100 * extra['whole_word'] / args.reference_step:.2f}% / "
        f"{100 * extra['span'] / args.reference_step:.2f}%**. "
        f"The pipeline runs ahead of the step in tf.data threads (prefetch), so "
        f"on a machine with a core to spare it is hidden; here, 2 cores busy with the step, it "
        f"costs at most its CPU time.",
        f"- Step times of the same static input varied by {spread:.1f}% between rounds on this "
        f"shared machine, so the step-time difference ({diff:+.1f}%) is read against that; the "
        f"pipeline figures above are the direct measure.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
