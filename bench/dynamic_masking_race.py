"""Static vs dynamic masking race: held-out masked-LM quality, same model, recipe and updates.

Run by hand (not a test; about 2 x 15 minutes on 2 quiet cores with the defaults):

    .venv/bin/python bench/dynamic_masking_race.py

Two arms, one after the other, each in a fresh process, both the BERT arm of
bench/time_to_quality.py (4 layers, hidden 256, Google's recipe: masked LM + next sentence,
AdamWeightDecay at 1e-4, 1% warm-up, linear decay, clipping 1.0, dropout 0.1, micro-batch 32):
  * static: Google-format records, `create_pretraining_data.py --dupe_factor=5`: every copy of
    the corpus has its masks drawn once, so each mask is seen again every epoch over the records;
  * dynamic: `create_pretraining_data.py --dynamic_masking --dupe_factor=5` (the same number of
    unmasked instances) and `run_pretraining.py --dynamic_masking`: masks drawn afresh each time
    a sequence is read, keyed by (seed, position in the record stream).
Both are evaluated on the same held-out records with fixed masks (Google's masking, one pass,
single segments): chapters never trained on.

Why a part of the corpus: RoBERTa's finding is about seeing the same static mask many times.
On the whole KJV a 20-minute budget reads the dupe-5 records ~1.1 times, so no mask repeats;
`--corpus_stride=5` trains on every 5th training chapter, so the same number of updates reads
the records several times (the report states how many).

Equal updates, timed: both arms run `--steps` updates (the same schedule), evaluating every
`--eval_every_steps`; each arm's training time (evaluations excluded) is recorded at every
evaluation, so the curves are compared at equal updates and at equal training time. The per-step
cost of masking in the pipeline was measured separately (dynamic-masking section: 0.2-0.7% of a
step), so equal updates is equal work; wall times are stated with the load average.

Writes workdir/results.json and the `dynamic-masking-race` section of docs/benchmarks.md.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import time_to_quality as ttq  # noqa: E402  (bench/: the race's model, recipe and corpus split)
from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

ARMS = ("static", "dynamic")


def make_records(workdir, corpus_stride, dupe_factor):
    """Static, dynamic (unmasked) and held-out records from the KJV split of the main race."""
    from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig
    from bert_mgpu.data import pretraining_data

    text, n_train, n_held = ttq.split_corpus(workdir)
    with open(text["train"], encoding="utf-8") as f:
        chapters = [c for c in f.read().split("\n\n") if c.strip()]
    subset = [c for i, c in enumerate(chapters) if i % corpus_stride == 0]
    train_text = os.path.join(workdir, f"train_stride{corpus_stride}.txt")
    with open(train_text, "w", encoding="utf-8") as f:
        f.write("\n\n".join(c.strip("\n") for c in subset) + "\n")
    jobs = {
        "static": dict(input_file=train_text, dupe_factor=dupe_factor),
        "dynamic": dict(input_file=train_text, dupe_factor=dupe_factor, dynamic_masking=True),
        "heldout": dict(input_file=text["heldout"], dupe_factor=1, no_next_sentence=True),
    }
    records = {}
    for name, flags in jobs.items():
        path = os.path.join(workdir, f"{name}.tfrecord")
        stats = pretraining_data.create_pretraining_data(CreatePretrainingDataConfig(
            output_file=path, vocab_file=ttq.VOCAB, max_seq_length=ttq.SEQ,
            max_predictions_per_seq=ttq.PREDS, random_seed=12345, progress_interval=1e9,
            **flags))
        records[name] = {"tfrecord": path, "instances": stats.instances}
    return records, {"train": len(subset), "train_all": n_train, "heldout": n_held}


def run_arm(spec):
    """One arm in this (fresh) process; writes its curve to spec['output']."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    from absl import logging
    logging.set_verbosity(logging.WARNING)
    import tensorflow as tf

    from bert_mgpu import tokenization
    from bert_mgpu.configs.base import TrainConfig
    from bert_mgpu.data import features, input_pipeline
    from bert_mgpu.engine import towers, training
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.pretraining import BertPretrainer

    start = time.monotonic()
    arm = ttq.ARMS["bert"]
    steps = spec["steps"]
    devices = towers.setup_devices(1)
    tf.random.set_seed(spec["seed"])
    cfg = TrainConfig(
        output_dir=spec["output_dir"], train_batch_size=ttq.MICRO_BATCH, n_gpus=1,
        num_train_steps=steps, num_warmup_steps=int(arm["warmup_fraction"] * steps),
        learning_rate=arm["learning_rate"], clip_norm=arm["clip_norm"],
        lr_schedule=arm["lr_schedule"], save_checkpoints_steps=10 ** 9,
        log_every_n_steps=10 ** 9, random_seed=spec["seed"])
    task = BertPretrainer(BertConfig.from_dict(arm["config"]), next_sentence=True)
    trainer = training.Trainer(task, cfg, devices)
    masking = None
    if spec["arm"] == "dynamic":
        vocab = tokenization.load_vocab(ttq.VOCAB)
        masking = input_pipeline.DynamicMasking(
            max_seq_length=ttq.SEQ, max_predictions_per_seq=ttq.PREDS, masked_lm_prob=0.15,
            vocab_size=len(vocab), mask_id=vocab["[MASK]"], cls_id=vocab["[CLS]"],
            sep_id=vocab["[SEP]"], seed=spec["seed"])
    dataset = input_pipeline.record_dataset(
        [spec["train"]], features.pretraining_shapes(ttq.SEQ, ttq.PREDS), cfg.global_batch_size,
        True, seed=spec["seed"], masking=masking)
    heldout = input_pipeline.record_dataset(
        [spec["heldout"]], features.pretraining_shapes(ttq.SEQ, ttq.PREDS), 64, False)

    paused = 0.0
    curve = []

    def record(step):
        nonlocal paused
        seconds = time.monotonic() - start - paused
        began = time.monotonic()
        result = trainer.evaluate(heldout)
        paused += time.monotonic() - began
        curve.append({"step": step, "seconds": seconds, "load": os.getloadavg()[0],
                      "masked_lm_loss": result["masked_lm_loss"],
                      "masked_lm_accuracy": result["masked_lm_accuracy"]})
        print(f"[{spec['arm']}] step {step} {seconds:7.1f}s: loss "
              f"{result['masked_lm_loss']:.4f} acc {result['masked_lm_accuracy']:.4f}",
              file=sys.stderr, flush=True)

    def on_step(step, out):
        if step % spec["eval_every_steps"] == 0 and step < steps:
            record(step)
        return False

    record(0)
    trainer.train(dataset, on_step=on_step)
    record(int(trainer.global_step.numpy()))
    with open(spec["output"], "w") as f:
        json.dump({"curve": curve, "tf": tf.__version__}, f)


def race(args):
    os.makedirs(args.workdir, exist_ok=True)
    records, chapters = make_records(args.workdir, args.corpus_stride, args.dupe_factor)
    results = {"started": datetime.datetime.now().isoformat(timespec="minutes"),
               "machine": machine(), "command": "bench/dynamic_masking_race.py "
               + " ".join(sys.argv[1:]), "steps": args.steps, "chapters": chapters,
               "corpus_stride": args.corpus_stride, "dupe_factor": args.dupe_factor,
               "records": {k: v["instances"] for k, v in records.items()}, "arms": {}}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    for name in args.arms.split(","):
        spec = {"arm": name, "steps": args.steps, "eval_every_steps": args.eval_every_steps,
                "seed": 0, "train": records[name]["tfrecord"],
                "heldout": records["heldout"]["tfrecord"],
                "output": os.path.join(args.workdir, f"{name}.json"),
                "output_dir": os.path.join(args.workdir, f"{name}-run")}
        spec_path = os.path.join(args.workdir, f"{name}-spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        load_start = wait_for_quiet(args.max_load, args.max_wait_minutes * 60)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--run_arm", spec_path],
                       env=env, check=True, cwd=REPO)
        with open(spec["output"]) as f:
            out = json.load(f)
        out.update(load_start=load_start, load_end=os.getloadavg()[0])
        results["arms"][name] = out
        with open(os.path.join(args.workdir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    return results


def build_report(results):
    arms = results["arms"]
    static, dynamic = arms["static"]["curve"], arms["dynamic"]["curve"]
    batch = ttq.MICRO_BATCH
    epochs = results["steps"] * batch / results["records"]["static"]
    lines = [
        "## Static vs dynamic masking: held-out masked-LM loss at equal updates",
        "",
        f"Measured {results['started'][:10]} with `{results['command']}`. "
        f"Machine: {results['machine']}. "
        + results.get("how_run", "Arms one after the other, each in a fresh process."),
        "",
        f"Data: the shipped KJV Bible split as in the time-to-quality race (every "
        f"{ttq.HELD_OUT_EVERY}th chapter held out); training on every "
        f"{results['corpus_stride']}th remaining chapter ({results['chapters']['train']} of "
        f"{results['chapters']['train_all']}), `--dupe_factor={results['dupe_factor']}`: "
        f"{results['records']['static']:,} static instances (masks drawn once per copy), "
        f"{results['records']['dynamic']:,} unmasked instances for dynamic masking; evaluation "
        f"on {results['records']['heldout']:,} held-out single-segment sequences with fixed "
        f"masks. Model and recipe: the BERT arm of the time-to-quality race (4 layers, hidden "
        f"256, masked LM + next sentence, lr 1e-4, batch {batch}, dropout 0.1), "
        f"{results['steps']:,} updates each: {epochs:.1f} epochs over the records, so in the "
        f"static arm each mask is seen ~{epochs:.1f} times; the dynamic arm draws a new one "
        f"every time.",
        "",
        "| update | static: loss / acc | dynamic: loss / acc | dynamic - static loss | "
        "training s (static / dynamic) |",
        "|---:|---|---|---:|---|",
    ]
    by_step = {p["step"]: p for p in dynamic}
    for p in static:
        q = by_step.get(p["step"])
        if q is None:
            continue
        lines.append(
            f"| {p['step']:,} | {p['masked_lm_loss']:.3f} / {100 * p['masked_lm_accuracy']:.1f}%"
            f" | {q['masked_lm_loss']:.3f} / {100 * q['masked_lm_accuracy']:.1f}% | "
            f"{q['masked_lm_loss'] - p['masked_lm_loss']:+.3f} | "
            f"{p['seconds']:.0f} / {q['seconds']:.0f} |")
    end_s, end_d = static[-1], dynamic[-1]
    at_equal_time = min(end_s["seconds"], end_d["seconds"])
    ls = ttq.value_at(static, at_equal_time, "masked_lm_loss")
    ld = ttq.value_at(dynamic, at_equal_time, "masked_lm_loss")
    lines += [
        "",
        f"Load average (1 min) at the arms' start / end: static {arms['static']['load_start']:.2f}"
        f" / {arms['static']['load_end']:.2f}, dynamic {arms['dynamic']['load_start']:.2f} / "
        f"{arms['dynamic']['load_end']:.2f}. Training time excludes the evaluations.",
    ]
    if "how_run" not in results:  # arms one after the other: their clocks are comparable
        lines += ["", f"At equal training time ({at_equal_time:.0f} s, the shorter arm's end; "
                      f"each arm's last evaluation at or before it): static {ls:.3f}, "
                      f"dynamic {ld:.3f}."]
    gaps = [by_step[p["step"]]["masked_lm_loss"] - p["masked_lm_loss"]
            for p in static if p["step"] in by_step and p["step"] > 0]
    ahead = sum(g < 0 for g in gaps)
    lines += ["", f"Dynamic masking has the lower held-out loss at {ahead} of {len(gaps)} "
                  f"evaluations after update 0; the gap at the end is {gaps[-1]:+.3f} "
                  f"(accuracy {100 * end_d['masked_lm_accuracy']:.1f}% vs "
                  f"{100 * end_s['masked_lm_accuracy']:.1f}%). One seed per arm. Equal updates "
                  f"are equal work up to the masking's own cost in the input pipeline, "
                  f"0.2-0.7% of a step (measured in the dynamic-masking section above)."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run_arm", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--eval_every_steps", type=int, default=250)
    parser.add_argument("--corpus_stride", type=int, default=5)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--workdir", default="/tmp/bench_dynamic_masking_race")
    parser.add_argument("--max_load", type=float, default=1.0)
    parser.add_argument("--max_wait_minutes", type=float, default=0.0)
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the report from workdir/results.json (add an arm run in "
                             "another workdir with --merge_arm, and how the arms were run, "
                             "when it was not one after the other, with --how_run)")
    parser.add_argument("--merge_arm", default="",
                        help="NAME=RESULTS_JSON: take arm NAME from another run's results.json")
    parser.add_argument("--how_run", default="")
    parser.add_argument("--no_write", action="store_true")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.run_arm:
        with open(args.run_arm) as f:
            return run_arm(json.load(f))
    if args.report_only:
        with open(os.path.join(args.workdir, "results.json")) as f:
            results = json.load(f)
        if args.merge_arm:
            name, path = args.merge_arm.split("=", 1)
            with open(path) as f:
                other = json.load(f)
            results["arms"][name] = other["arms"][name]
            results["command"] += f" (arm {name}: `{other['command']}`)"
        if args.how_run:
            results["how_run"] = args.how_run
    else:
        results = race(args)
    report = build_report(results)
    print(report)
    if not args.no_write:
        write_section("dynamic-masking-race", report)


if __name__ == "__main__":
    main()
