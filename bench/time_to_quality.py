"""Time-to-quality race: held-out masked-LM quality against training time, same CPU budget.

Run by hand (not a test; about 80 minutes on 2 cores with the default 20-minute budget):

    .venv/bin/python bench/time_to_quality.py \
        --peer_python .venv-oracle/bin/python --plot_python .venv-oracle/bin/python

Three arms, one after the other (never two at once), each in a fresh process, each with the same
wall-clock budget of training time:
  * ours, BERT: `training.Trainer` (the loop run_pretraining.py runs) with Google's recipe:
    post-LN BERT, learned positions, dropout 0.1, masked LM + next sentence on Google-format
    records, AdamWeightDecay at 1e-4 with 1% warm-up and linear decay, clipping at 1.0;
  * ours, Cramming: the same trainer with the Cramming options (bert_config.json keys:
    pre-LN + final LayerNorm, no biases, scaled sinusoidal positions, gated GELU, no dropout;
    masked-LM only on `--pack_sequences` records; trainer flags: one-cycle LR peaking at 1e-3,
    batch ramp through accumulation, clipping at 0.5);
  * Hugging Face: `transformers.BertForMaskedLM` on PyTorch (bench/time_to_quality_hf.py, run by
    the oracle venv's interpreter) with the BERT recipe on the BERT arm's records.
All three have the same size (4 layers, hidden 256, 4 heads, intermediate 1024, the uncased
30,522-word vocabulary), micro-batches of 32 sequences of 128 tokens, 20 masked positions.

Data: the shipped KJV Bible, one document per chapter; every 20th chapter is held out. The
training records are made from the other chapters by our create_pretraining_data (Google's
default mode for the BERT arms, `--pack_sequences` for Cramming; dupe_factor 5); the held-out
records by `--no_next_sentence` (single segments, Google's masking, one pass), the same file
for every arm.

Clock: each arm's clock starts once its framework is imported (model construction, tracing and
XLA compilation count); held-out evaluations pause it. An evaluation runs at time 0 and then
every `--eval_every_seconds` of training time; training stops at the budget. Learning-rate
schedules are step-based, so each arm first times a few updates (calibration, not counted) and
sets its number of steps to fill the budget (its schedule then ends at about the budget).

Writes results.json and the plot (docs/time_to_quality.png, via `--plot_python`, an interpreter
with matplotlib: `pip install matplotlib` in the oracle venv) and the time-to-quality section of
docs/benchmarks.md (other sections are left alone).
"""

import argparse
import datetime
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from _common import add_max_isa_flag, cap_isa, machine, wait_for_quiet, write_section  # noqa: E402

PLOT = os.path.join(REPO, "docs", "time_to_quality.png")
KJV = os.path.join(REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
VOCAB = os.path.join(REPO, "data", "vocab", "bert_uncased_vocab.txt")
PEER_SCRIPT = os.path.join(REPO, "bench", "time_to_quality_hf.py")
PLOT_SCRIPT = os.path.join(REPO, "bench", "time_to_quality_plot.py")

SEQ, PREDS, MICRO_BATCH, HELD_OUT_EVERY = 128, 20, 32, 20
BERT = {
    "vocab_size": 30522, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
    "intermediate_size": 1024, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
CRAMMING = dict(BERT, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                pre_layer_norm=True, use_bias=False,
                position_embedding_type="scaled_sinusoidal", gated_ffn=True)
ARMS = {
    "bert": {"label": "ours, BERT recipe", "config": BERT, "records": "bert",
             "next_sentence": True, "learning_rate": 1e-4, "lr_schedule": "linear",
             "warmup_fraction": 0.01, "clip_norm": 1.0, "accumulation": 1,
             "ramp_fraction": 0.0},
    "cramming": {"label": "ours, Cramming options", "config": CRAMMING, "records": "packed",
                 "next_sentence": False, "learning_rate": 1e-3, "lr_schedule": "one_cycle",
                 "warmup_fraction": 0.0, "clip_norm": 0.5, "accumulation": 4,
                 "ramp_fraction": 0.5},
    "hf": {"label": "Hugging Face BertForMaskedLM", "config": BERT, "records": "bert",
           "learning_rate": 1e-4, "warmup_fraction": 0.01, "clip_norm": 1.0,
           "accumulation": 1, "ramp_fraction": 0.0},
}


# -- data ---------------------------------------------------------------------------------------

def split_corpus(workdir):
    """KJV chapters (blank-line separated) -> train.txt and heldout.txt (every 20th chapter)."""
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        chapters = [c.strip("\n") for c in f.read().split("\n\n") if c.strip()]
    held = [c for i, c in enumerate(chapters) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    train = [c for i, c in enumerate(chapters) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    paths = {}
    for name, docs in (("train", train), ("heldout", held)):
        paths[name] = os.path.join(workdir, f"{name}.txt")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write("\n\n".join(docs) + "\n")
    return paths, len(train), len(held)


def make_records(workdir):
    """The race's TFRecords (and .npz copies for the PyTorch arm)."""
    from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig
    from bert_mgpu.data import pretraining_data

    text, n_train, n_held = split_corpus(workdir)
    jobs = {
        "bert": dict(input_file=text["train"], dupe_factor=5),
        "packed": dict(input_file=text["train"], dupe_factor=5, pack_sequences=True),
        "heldout": dict(input_file=text["heldout"], dupe_factor=1, no_next_sentence=True),
    }
    records = {}
    for name, flags in jobs.items():
        path = os.path.join(workdir, f"{name}.tfrecord")
        stats = pretraining_data.create_pretraining_data(CreatePretrainingDataConfig(
            output_file=path, vocab_file=VOCAB, max_seq_length=SEQ,
            max_predictions_per_seq=PREDS, random_seed=12345, progress_interval=1e9, **flags))
        records[name] = {"tfrecord": path, "instances": stats.instances}
    for name in ("bert", "heldout"):
        records[name]["npz"] = to_npz(records[name]["tfrecord"])
    return records, n_train, n_held


def to_npz(path):
    import numpy as np

    from bert_mgpu.data import features, tfrecord

    arrays = {name: [] for name in features.PRETRAINING_FEATURES}
    for serialized in tfrecord.read_records(path):
        values = tfrecord.decode_example(serialized)
        for name in arrays:
            arrays[name].append(values[name])
    out = path.replace(".tfrecord", ".npz")
    np.savez(out, **{k: np.asarray(v, np.float32 if k == "masked_lm_weights" else np.int32)
                     for k, v in arrays.items()})
    return out


# -- our arms (each in its own process) ---------------------------------------------------------

def micro_batches(step, accumulation, ramp_steps):
    """The trainer's batch ramp (training.MicroBatches.at), for planning."""
    if not ramp_steps or step >= ramp_steps:
        return accumulation
    return 1 + (step * (accumulation - 1)) // ramp_steps


def run_our_arm(spec):
    """Trains one of our arms; writes the curve (or the calibration timings) to spec['output']."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    from absl import logging
    logging.set_verbosity(logging.WARNING)
    import tensorflow as tf

    from bert_mgpu.configs.base import TrainConfig
    from bert_mgpu.data import features, input_pipeline
    from bert_mgpu.engine import towers, training
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.pretraining import BertPretrainer

    start = time.monotonic()  # the arm's clock (see the module docstring)
    arm = ARMS[spec["arm"]]
    calibrate = spec["calibrate_steps"]
    steps = calibrate or spec["num_train_steps"]
    accumulation = arm["accumulation"]
    ramp_steps = 0 if calibrate else int(arm["ramp_fraction"] * steps)
    devices = towers.setup_devices(1)
    tf.random.set_seed(spec["seed"])
    cfg = TrainConfig(
        output_dir=spec["output_dir"], train_batch_size=MICRO_BATCH, n_gpus=1,
        num_accumulation_steps=accumulation, num_train_steps=steps,
        num_warmup_steps=int(arm["warmup_fraction"] * steps),
        learning_rate=arm["learning_rate"], use_xla=spec["use_xla"],
        clip_norm=arm["clip_norm"], lr_schedule=arm["lr_schedule"],
        batch_ramp_steps=ramp_steps, save_checkpoints_steps=10 ** 9,
        log_every_n_steps=10 ** 9, random_seed=spec["seed"])
    task = BertPretrainer(BertConfig.from_dict(arm["config"]),
                                next_sentence=arm["next_sentence"])
    trainer = training.Trainer(task, cfg, devices)
    shapes = features.pretraining_shapes(SEQ, PREDS)
    dataset = input_pipeline.record_dataset([spec["train"]], shapes, cfg.global_batch_size,
                                            True, seed=spec["seed"])
    heldout = input_pipeline.record_dataset([spec["heldout"]], shapes, 64, False)

    paused = 0.0
    curve, step_times = [], []
    state = {"next_eval": spec["eval_every_seconds"], "examples": 0}

    def train_seconds():
        return time.monotonic() - start - paused

    def record(step):
        nonlocal paused
        t = train_seconds()
        began = time.monotonic()
        result = trainer.evaluate(heldout)
        paused += time.monotonic() - began
        curve.append({"seconds": t, "step": step, "examples": state["examples"],
                      "masked_lm_loss": result["masked_lm_loss"],
                      "masked_lm_accuracy": result["masked_lm_accuracy"]})
        print(f"[{spec['arm']}] {t:7.1f}s step {step}: loss {result['masked_lm_loss']:.4f} "
              f"acc {result['masked_lm_accuracy']:.4f}", file=sys.stderr, flush=True)

    def on_step(step, out):
        state["examples"] += MICRO_BATCH * micro_batches(step - 1, accumulation, ramp_steps)
        t = train_seconds()
        step_times.append(t)
        if calibrate:
            return False
        if t >= spec["budget_seconds"]:
            return True
        if t >= state["next_eval"]:
            record(step)
            state["next_eval"] += spec["eval_every_seconds"]
        return False

    if not calibrate:
        record(0)
    trainer.train(dataset, on_step=on_step)
    step = int(trainer.global_step.numpy())
    if not calibrate and curve[-1]["step"] != step:
        record(step)
    params = sum(int(v.shape.num_elements()) for v in trainer.variables.values())
    with open(spec["output"], "w") as f:
        json.dump({"curve": curve, "step_times": step_times, "steps": step, "params": params,
                   "ramp_steps": ramp_steps, "tf": tf.__version__}, f)


# -- orchestration ------------------------------------------------------------------------------

def run_process(cmd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    subprocess.run(cmd, env=env, check=True, cwd=REPO)


def run_arm(name, args, records, workdir, calibrate_steps=0, num_train_steps=0):
    """Runs one arm (calibration or race) in a fresh process; returns its JSON output."""
    arm = ARMS[name]
    tag = "calibrate" if calibrate_steps else "race"
    output = os.path.join(workdir, f"{name}-{tag}.json")
    budget = args.budget_minutes * 60.0
    if name == "hf":
        config = os.path.join(workdir, "bert_config.json")
        with open(config, "w") as f:
            json.dump(arm["config"], f)
        cmd = [args.peer_python, PEER_SCRIPT, "--train", records["bert"]["npz"],
               "--heldout", records["heldout"]["npz"], "--config", config, "--output", output,
               "--batch_size", str(MICRO_BATCH), "--learning_rate", str(arm["learning_rate"]),
               "--num_train_steps", str(num_train_steps or calibrate_steps),
               "--warmup_fraction", str(arm["warmup_fraction"]),
               "--budget_seconds", str(budget),
               "--eval_every_seconds", str(args.eval_every_seconds),
               "--calibrate_steps", str(calibrate_steps)]
    else:
        spec = {"arm": name, "calibrate_steps": calibrate_steps,
                "num_train_steps": num_train_steps, "use_xla": args.use_xla, "seed": 0,
                "train": records[arm["records"]]["tfrecord"],
                "heldout": records["heldout"]["tfrecord"], "budget_seconds": budget,
                "eval_every_seconds": args.eval_every_seconds, "output": output,
                "output_dir": os.path.join(workdir, f"{name}-{tag}-run")}
        spec_path = os.path.join(workdir, f"{name}-{tag}-spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        cmd = [sys.executable, os.path.abspath(__file__), "--run_arm", spec_path]
    run_process(cmd)
    shutil.rmtree(os.path.join(workdir, f"{name}-{tag}-run"), ignore_errors=True)
    with open(output) as f:
        return json.load(f)


def plan_steps(name, calibration, budget_seconds, margin):
    """Steps whose predicted training time is `margin` x the budget, from the calibration:
    start-up (to the end of the first update) plus the steady time per micro-batch."""
    arm = ARMS[name]
    times = calibration["step_times"]
    k = arm["accumulation"]
    per_step = statistics.median(b - a for a, b in zip(times[1:-1], times[2:]))
    per_micro = per_step / k
    startup = times[0] - per_step
    available = margin * budget_seconds - startup
    steps = 1
    while True:  # the largest T whose ramp (if any) still fits
        ramp = int(arm["ramp_fraction"] * (steps + 1))
        micro = sum(micro_batches(t, k, ramp) for t in range(steps + 1))
        if micro * per_micro > available:
            return steps, {"startup": startup, "per_step": per_step}
        steps += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run_arm", help=argparse.SUPPRESS)
    parser.add_argument("--budget_minutes", type=float, default=20.0)
    parser.add_argument("--eval_every_seconds", type=float, default=60.0)
    parser.add_argument("--calibrate_steps", type=int, default=12)
    parser.add_argument("--margin", type=float, default=0.98,
                        help="planned steps fill this fraction of the budget")
    parser.add_argument("--arms", default="bert,cramming,hf")
    parser.add_argument("--steps", default="",
                        help="ARM=N[,ARM=N]: run these arms for N updates instead of the number "
                             "planned from their calibration (e.g. when a calibration was not "
                             "representative: the report says so)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other arms of the workdir's results.json (rerun some "
                             "arms of an earlier race)")
    parser.add_argument("--use_xla", action="store_true", help="XLA for our arms")
    parser.add_argument("--workdir", default="/tmp/bench_time_to_quality")
    parser.add_argument("--max_load", type=float, default=0.8,
                        help="wait before each run until the 1-minute load average is below")
    parser.add_argument("--max_wait_minutes", type=float, default=30.0)
    parser.add_argument("--peer_python",
                        default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                               os.path.join(REPO, ".venv-oracle", "bin",
                                                            "python")))
    parser.add_argument("--plot_python", default=os.path.join(REPO, ".venv-oracle", "bin",
                                                              "python"))
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the plot and the doc section from workdir/results.json")
    parser.add_argument("--no_write", action="store_true",
                        help="do not update docs/benchmarks.md and docs/time_to_quality.png")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.run_arm:
        with open(args.run_arm) as f:
            return run_our_arm(json.load(f))
    os.makedirs(args.workdir, exist_ok=True)
    results_path = os.path.join(args.workdir, "results.json")
    if args.report_only:
        with open(results_path) as f:
            results = json.load(f)
    else:
        results = race(args)
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1)
    report = build_report(results)
    print(report)
    if not args.no_write:
        subprocess.run([args.plot_python, PLOT_SCRIPT, results_path, PLOT], check=True)
        write_section("time-to-quality", report)


def race(args):
    started = datetime.datetime.now()
    records, n_train, n_held = make_records(args.workdir)
    budget = args.budget_minutes * 60.0
    results = {"started": started.isoformat(timespec="minutes"), "machine": machine(),
               "budget_minutes": args.budget_minutes, "use_xla": args.use_xla,
               "eval_every_seconds": args.eval_every_seconds,
               "command": "bench/time_to_quality.py " + " ".join(sys.argv[1:]),
               "chapters": {"train": n_train, "heldout": n_held},
               "records": {k: v["instances"] for k, v in records.items()}, "arms": {}}
    fixed_steps = dict((k, int(v)) for k, v in (x.split("=") for x in args.steps.split(",") if x))
    results_path = os.path.join(args.workdir, "results.json")
    if args.merge and os.path.exists(results_path):
        with open(results_path) as f:
            earlier = json.load(f)
        results["arms"] = {k: v for k, v in earlier["arms"].items()
                           if k not in args.arms.split(",")}
        results["merged_from"] = earlier.get("merged_from", [earlier["command"]])
    for name in args.arms.split(","):
        wait_for_quiet(args.max_load, args.max_wait_minutes * 60)
        calibration = run_arm(name, args, records, args.workdir,
                              calibrate_steps=args.calibrate_steps)
        steps, timing = plan_steps(name, calibration, budget, args.margin)
        if name in fixed_steps:
            timing["planned_from_calibration"] = steps
            steps = fixed_steps[name]
        print(f"{name}: {timing}, planning {steps} steps", file=sys.stderr, flush=True)
        load_start = wait_for_quiet(args.max_load, args.max_wait_minutes * 60)
        out = run_arm(name, args, records, args.workdir, num_train_steps=steps)
        out.update(planned_steps=steps, calibration=timing, load_start=load_start,
                   load_end=os.getloadavg()[0], arm={k: v for k, v in ARMS[name].items()
                                                     if k != "config"},
                   config=ARMS[name]["config"])
        results["arms"][name] = out
        results["arms"] = {k: results["arms"][k] for k in ARMS if k in results["arms"]}
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1)
    return results


# -- the report ---------------------------------------------------------------------------------

def value_at(curve, seconds, key):
    """The last evaluation at or before `seconds` of training time (None before the first)."""
    points = [p for p in curve if p["seconds"] <= seconds + 1e-9]
    return points[-1][key] if points else None


def verdicts(arms, minutes):
    """One line per pair the race is about: who is ahead (lower held-out loss) at equal
    training times (`minutes`; None = each arm's last evaluation, at the end of its budget)."""
    labels = {name: out["arm"]["label"] for name, out in arms.items()}
    lines = []
    for a, b in (("bert", "hf"), ("cramming", "hf"), ("cramming", "bert")):
        if a not in arms or b not in arms:
            continue
        ahead = []
        for m in minutes:
            if m is None:
                la, lb = (arms[x]["curve"][-1]["masked_lm_loss"] for x in (a, b))
            else:
                la = value_at(arms[a]["curve"], m * 60, "masked_lm_loss")
                lb = value_at(arms[b]["curve"], m * 60, "masked_lm_loss")
            if la is not None and lb is not None:
                ahead.append((m, la, lb))
        wins = sum(la < lb for _, la, lb in ahead)
        detail = ", ".join(f"{'end' if m is None else f'{m:g} min'} {la:.3f} vs {lb:.3f}"
                           for m, la, lb in ahead)
        lines.append(f"- {labels[a]} vs {labels[b]}: lower held-out loss at {wins} of "
                     f"{len(ahead)} equal training times ({detail}).")
    return lines


def build_report(results):
    arms = results["arms"]
    budget = results["budget_minutes"]
    lines = [
        "## Time to quality: held-out masked-LM loss and accuracy within a training budget",
        "",
        f"Measured {results['started'][:10]} with "
        + " then ".join(f"`{c}`" for c in results.get("merged_from", []) + [results["command"]])
        + ".",
        f"Machine: {results['machine']}. Budget: {budget:g} minutes of training time per arm "
        f"(evaluations pause the clock), arms run one after another.",
        "",
        f"Data: the shipped KJV Bible, one document per chapter; {results['chapters']['heldout']}"
        f" chapters (every {HELD_OUT_EVERY}th) held out, {results['chapters']['train']} for "
        f"training. Records (seq {SEQ}, {PREDS} masked positions, uncased vocabulary): "
        f"{results['records']['bert']:,} Google-format pairs and {results['records']['packed']:,}"
        f" packed sequences (dupe_factor 5), {results['records']['heldout']:,} held-out "
        f"single-segment sequences (every arm is evaluated on these). Model: 4 layers, hidden "
        f"256, 4 heads, intermediate 1024; micro-batch 32."
        + (" Our arms with XLA." if results["use_xla"] else " Our arms without XLA."),
        "",
        "![held-out masked-LM loss and accuracy against training time](time_to_quality.png)",
        "",
    ]
    marks = [m for m in (2, 5, 10, 15, 20, 30, 60) if m < budget]
    columns = (["arm", "params", "updates", "sequences", "sequences/s"]
               + [f"loss / acc at {m} min" for m in marks]
               + ["at the end (loss / acc)", "load average (start → end)"])
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, out in arms.items():
        curve = out["curve"]
        last = curve[-1]
        cells = [out["arm"]["label"], f"{out['params'] / 1e6:.2f}M", f"{out['steps']:,}",
                 f"{last['examples']:,}", f"{last['examples'] / last['seconds']:.1f}"]
        for m in marks:
            loss = value_at(curve, m * 60, "masked_lm_loss")
            acc = value_at(curve, m * 60, "masked_lm_accuracy")
            cells.append("-" if loss is None else f"{loss:.3f} / {100 * acc:.1f}%")
        cells += [f"**{last['masked_lm_loss']:.3f} / {100 * last['masked_lm_accuracy']:.1f}%** "
                  f"({last['seconds'] / 60:.1f} min)",
                  f"{out['load_start']:.2f} → {out['load_end']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + verdicts(arms, marks + [None]) + ["", "Recipes:", ""]
    for name, out in arms.items():
        a = out["arm"]
        extra = {k: v for k, v in out["config"].items() if k not in BERT or BERT[k] != v}
        lines.append(
            f"- **{a['label']}**: lr {a['learning_rate']:g} "
            f"({a.get('lr_schedule', 'linear')}"
            + (f", warm-up {a['warmup_fraction']:.0%}" if a["warmup_fraction"] else "")
            + f"), clip {a['clip_norm']:g}, batch {MICRO_BATCH}"
            + (f" → {MICRO_BATCH * a['accumulation']} (ramp over the first "
               f"{out['ramp_steps']} steps)" if a["accumulation"] > 1 else "")
            + (", masked LM + next sentence" if a.get("next_sentence") else ", masked LM only")
            + (f"; config keys {json.dumps(extra)}" if extra else "")
            + plan_note(out))
    lines += ["", "Notes:", ""] + notes(arms)
    return "\n".join(lines)


def plan_note(out):
    """How the arm's number of updates (its schedule's length) was chosen."""
    c = out["calibration"]
    if "planned_from_calibration" in c:
        per_step = median_step(out)
        return (f"; {out['planned_steps']} steps set by `--steps`: its calibration "
                f"({c['per_step']:.3f}s per step) planned {c['planned_from_calibration']}, which "
                f"an earlier race showed too few: the arm ran faster than calibrated and ended "
                f"its schedule well before the budget; in this run ~{per_step:.2f}s per step.")
    return (f"; planned {out['planned_steps']} steps from a start-up of {c['startup']:.1f}s "
            f"and {c['per_step']:.3f}s per step.")


def median_step(out):
    """The arm's median seconds per update in the race (from its step end times)."""
    st = out["step_times"]
    return statistics.median(b - a for a, b in zip(st[:-1], st[1:]))


def matmul_macs_per_sequence(config, output_positions):
    """Multiply-adds of one sequence's forward pass in the matmuls (encoder, attention, the
    masked-LM transform and the vocabulary projection at `output_positions` positions)."""
    h, i, layers, v = (config["hidden_size"], config["intermediate_size"],
                       config["num_hidden_layers"], config["vocab_size"])
    ffn = h * i + (i // 2 if config.get("gated_ffn") else i) * h
    encoder = SEQ * layers * (4 * h * h + ffn) + layers * 2 * SEQ * SEQ * h
    return encoder + output_positions * (h * h + h * v)


def notes(arms):
    lines = []
    if "bert" in arms and "hf" in arms:
        ours = matmul_macs_per_sequence(BERT, PREDS)
        theirs = matmul_macs_per_sequence(BERT, SEQ)
        measured = median_step(arms["hf"]) / median_step(arms["bert"])
        lines.append(
            f"- Same model size, records and recipe (less the next-sentence head), yet an update "
            f"of Hugging Face's arm took "
            f"{measured:.1f}x as long as ours (median update in the race). `BertForMaskedLM` "
            f"projects all {SEQ} "
            f"positions onto the {BERT['vocab_size']:,}-word vocabulary and then takes the loss "
            f"at the masked ones; Google's design, which we keep, gathers the {PREDS} masked "
            f"positions first. That alone makes its matmuls {theirs / ours:.1f}x ours "
            f"({theirs / 1e9:.2f} vs {ours / 1e9:.2f} GMAC per sequence forward); the rest is "
            f"the softmax over {SEQ} x {BERT['vocab_size']:,} logits and framework overhead.")
    lines += [
        "- Ours: Google's AdamWeightDecay (no bias correction); Hugging Face: torch.optim.AdamW "
        "(bias-corrected); both epsilon 1e-6, decay 0.01 except biases and LayerNorm, clipping "
        "as listed. Initialisation: truncated normal (Google) vs normal (PyTorch), std 0.02.",
        "- The three arms are evaluated on the same held-out records, at the same masked "
        "positions, weighted by `masked_lm_weights`: the numbers compare to the letter. The "
        "BERT arms train on sentence pairs and are evaluated on single segments (so is the "
        "Cramming arm, which trains on packed single segments).",
        "- The arms run one at a time on 2 cores; each waits for the 1-minute load average to "
        "fall below `--max_load` before it starts (the load at its start and end is in the "
        "table, so a disturbed arm is visible).",
    ]
    return lines


if __name__ == "__main__":
    main()
