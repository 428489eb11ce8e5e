"""Pretraining throughput: our tower trainer vs Hugging Face `BertForPreTraining` (PyTorch CPU).

Run by hand (not a test; about 15 minutes on 2 cores):

    .venv/bin/python bench/pretraining.py --peer_python .venv-oracle/bin/python

One run measures, each in its own fresh process and one after the other (never two at once):
  * the machine's matmul rate in TensorFlow (a loop of 2048 x 2048 fp32 matmuls; bf16 too), at
    the start and at the end of the run;
  * the peer: Hugging Face `BertForPreTraining` + `torch.optim.AdamW` (bench/pretraining_hf_peer.py,
    run by the oracle virtualenv's interpreter);
  * ours: `training.Trainer.train` (the loop run_pretraining.py runs: tf.data over TFRecords,
    towers, averaging, clipping, Google's AdamWeightDecay, per-step logging checks) with
    n_gpus 1 and 2 at the same global batch, XLA off/on, fp32/bf16.
Same model (L=4, H=256, A=4, I=1024, vocab 30522, dropout 0.1, tanh GELU), same synthetic
records (seq 128, 20 predictions), same global batch (32), same optimizer recipe (AdamW with
decay 0.01 except biases/LayerNorm, global-norm clipping at 1.0, warm-up + linear decay).
Throughput counts only steady-state steps: the first `--warmup_steps` updates (tracing, XLA
compilation, allocator warm-up) and everything before them are excluded; the clock runs from
the end of the last warm-up update to the end of the last timed one.

The table is printed and written to the pretraining section of docs/benchmarks.md (other
sections of that file are left alone).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from _common import add_max_isa_flag, busy_processes, cap_isa, machine, write_section  # noqa: E402

PEER_SCRIPT = os.path.join(REPO, "bench", "pretraining_hf_peer.py")

SEQ, PREDS, GLOBAL_BATCH = 128, 20, 32
NUM_RECORDS = 512
BERT_CONFIG = {
    "vocab_size": 30522, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
    "intermediate_size": 1024, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
# (label, n_gpus, precision, use_xla)
OUR_RUNS = [
    ("ours, n_gpus=1, fp32", 1, "fp32", False),
    ("ours, n_gpus=2, fp32", 2, "fp32", False),
    ("ours, n_gpus=1, fp32, XLA", 1, "fp32", True),
    ("ours, n_gpus=2, fp32, XLA", 2, "fp32", True),
    ("ours, n_gpus=1, bf16", 1, "bf16", False),
    ("ours, n_gpus=1, bf16, XLA", 1, "bf16", True),
]


# -- FLOPs ----------------------------------------------------------------------------------

def training_flops_per_example(c, seq, mlm_positions):
    """Model FLOPs of one training example (forward + backward), matmuls only.

    Forward multiply-adds per example:
      encoder dense layers  seq * L * (4 H^2 + 2 H I)        (Q, K, V, output; FFN in and out)
      attention             L * 2 * seq^2 * H               (scores Q K^T and context P V,
                                                              summed over the heads)
      masked-LM head        mlm_positions * (H^2 + H V)     (transform; tied decoder over the
                                                              vocabulary)
      pooler + NSP          H^2 + 2 H
    Training FLOPs = 2 (FLOPs per multiply-add) x 3 (forward, input gradient, weight gradient)
    x multiply-adds. Embedding lookups, LayerNorm, softmax, GELU, dropout and the optimizer are
    not counted (no matmul), which is the usual "model FLOPs" convention.
    """
    h, i, n, v = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    macs = (seq * n * (4 * h * h + 2 * h * i) + n * 2 * seq * seq * h
            + mlm_positions * (h * h + h * v) + h * h + 2 * h)
    return 6 * macs


# -- workers (each runs in its own process) -------------------------------------------------

def _quiet_tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def worker_matmul(args):
    """FLOP/s of a chain of n x n matmuls in a tf.function (fp32 and bf16)."""
    _quiet_tf()
    import tensorflow as tf
    n, chain = 2048, 8
    out = {}
    for name, dtype, xla in (("fp32", tf.float32, False), ("bf16", tf.bfloat16, False),
                             ("fp32_xla", tf.float32, True)):
        q, _ = tf.linalg.qr(tf.random.normal([n, n], seed=1))  # orthogonal: values stay normal
        b = tf.cast(q, dtype)
        x0 = tf.cast(tf.random.normal([n, n], seed=2), dtype)

        @tf.function(jit_compile=xla)
        def loop(x):
            for _ in range(chain):  # a chain, so no matmul can be merged with another
                x = tf.matmul(x, b)
            return tf.reduce_sum(tf.cast(x[:1, :1], tf.float32))

        loop(x0).numpy()
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            loop(x0).numpy()
            rates.append(2.0 * n ** 3 * chain / (time.perf_counter() - start))
        out[name] = {"rates": rates, "best": max(rates), "median": statistics.median(rates)}
    json.dump(out, sys.stdout)


def worker_ours(args):
    """Trains with `training.Trainer` and reports the wall time at the end of every update."""
    _quiet_tf()
    from absl import logging
    logging.set_verbosity(logging.WARNING)
    import tensorflow as tf

    from bert_mgpu.configs.base import TrainConfig
    from bert_mgpu.data import features, input_pipeline
    from bert_mgpu.engine import towers, training
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.pretraining import BertPretrainer

    devices = towers.setup_devices(args.n_gpus)
    tf.random.set_seed(0)
    steps = args.warmup_steps + args.timed_steps
    cfg = TrainConfig(
        output_dir=args.output_dir, train_batch_size=GLOBAL_BATCH // args.n_gpus,
        n_gpus=args.n_gpus, num_train_steps=steps, num_warmup_steps=max(1, steps // 10),
        learning_rate=1e-4, precision=args.precision, use_xla=args.use_xla,
        save_checkpoints_steps=10 ** 9, log_every_n_steps=10 ** 9)
    task = BertPretrainer(BertConfig.from_dict(BERT_CONFIG),
                                compute_dtype=training.compute_dtype(args.precision))
    trainer = training.Trainer(task, cfg, devices)
    dataset = input_pipeline.record_dataset(args.records.split(","),
                                            features.pretraining_shapes(SEQ, PREDS),
                                            cfg.global_batch_size, True, seed=1)
    times, losses = [], []
    step = trainer.step
    start = time.monotonic()

    def timed_step(*a, **kw):
        out = step(*a, **kw)
        losses.append(float(out["loss"]))  # what the loop's per-step checks read anyway
        times.append(time.monotonic() - start)
        return out

    trainer.step = timed_step
    trainer.train(dataset)
    if len(times) != steps:
        raise RuntimeError(f"{len(times)} updates run, {steps} expected")
    params = sum(int(v.shape.num_elements()) for v in trainer.variables.values())
    json.dump({"times": times, "losses": losses, "devices": devices, "params": params,
               "tf": tf.__version__, "peak_rss_mb": peak_rss_mb()}, sys.stdout)


def peak_rss_mb():
    """This process's peak resident memory (ru_maxrss, KiB on Linux) in MiB."""
    import resource  # pylint: disable=import-outside-toplevel
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_worker(argv, python=sys.executable):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=REPO)
    proc = subprocess.run([python] + argv, env=env, check=True, stdout=subprocess.PIPE,
                          cwd=REPO)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


# -- orchestration --------------------------------------------------------------------------

def write_data(workdir):
    """NUM_RECORDS synthetic pretraining records (TFRecords for us, .npz for the peer)."""
    import numpy as np

    from bert_mgpu.data import features, tfrecord
    rng = np.random.RandomState(0)
    v = BERT_CONFIG["vocab_size"]
    arrays = {k: [] for k in features.pretraining_shapes(SEQ, PREDS)}
    for _ in range(NUM_RECORDS):
        # Google's data fills most sequences to max_seq_length; some are shorter (padded).
        length = SEQ if rng.rand() < 0.9 else rng.randint(SEQ // 2, SEQ)
        ids = np.zeros(SEQ, np.int64)
        ids[:length] = rng.randint(1000, v, size=length)
        ids[0], ids[length - 1] = 101, 102
        mask = (np.arange(SEQ) < length).astype(np.int64)
        segments = ((np.arange(SEQ) >= length // 2) & (mask == 1)).astype(np.int64)
        k = min(PREDS, max(1, int(round(length * 0.15))))
        positions = np.zeros(PREDS, np.int64)
        positions[:k] = np.sort(rng.choice(np.arange(1, length - 1), size=k, replace=False))
        weights = (np.arange(PREDS) < k).astype(np.float32)
        labels = np.where(weights > 0, ids[positions], 0)
        ids[positions[:k]] = 103  # [MASK]
        for name, value in (("input_ids", ids), ("input_mask", mask), ("segment_ids", segments),
                            ("masked_lm_positions", positions), ("masked_lm_ids", labels),
                            ("masked_lm_weights", weights),
                            ("next_sentence_labels", np.array([rng.randint(2)]))):
            arrays[name].append(value)
    arrays = {k: np.stack(v_) for k, v_ in arrays.items()}
    paths = []
    for shard in range(2):
        path = os.path.join(workdir, f"records-{shard}.tfrecord")
        import tensorflow as tf
        with tf.io.TFRecordWriter(path) as w:
            for r in range(shard, NUM_RECORDS, 2):
                w.write(tfrecord.encode_example(
                    {k: a[r].tolist() for k, a in arrays.items()}))
        paths.append(path)
    npz = os.path.join(workdir, "records.npz")
    np.savez(npz, **arrays)
    return paths, npz


def steady_rate(times, warmup, timed, batch):
    """Examples/s from the end of update `warmup` to the end of update `warmup + timed`."""
    assert len(times) == warmup + timed, (len(times), warmup, timed)
    span = times[-1] - times[warmup - 1]
    steps = [b - a for a, b in zip(times[warmup - 1:-1], times[warmup:])]
    return {"examples_per_sec": timed * batch / span, "step_median": statistics.median(steps),
            "step_min": min(steps), "step_max": max(steps), "startup": times[warmup - 1]}


def _program(command):
    """A short name for a command line: its script or module (`pytest`, `x.py`)."""
    words = command.split()
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1]
        if word.endswith(".py"):
            return os.path.basename(word)
    return os.path.basename(words[0]) if words else "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=["ours", "matmul"], help=argparse.SUPPRESS)
    parser.add_argument("--n_gpus", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--use_xla", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--records", help=argparse.SUPPRESS)
    parser.add_argument("--output_dir", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    parser.add_argument("--peer_python",
                        default=os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                                               os.path.join(REPO, ".venv-oracle", "bin",
                                                            "python")),
                        help="interpreter with torch + transformers (the oracle venv)")
    parser.add_argument("--warmup_steps", type=int, default=3,
                        help="updates excluded from the timing (trace/compile/warm-up)")
    parser.add_argument("--timed_steps", type=int, default=10, help="updates timed")
    parser.add_argument("--rounds", type=int, default=3,
                        help="every configuration runs once per round; the best round counts")
    parser.add_argument("--only", default="",
                        help="comma-separated subset of runs to do: peer, and the labels' "
                             "indices 0..5 of ours (for exploring; the doc needs all)")
    parser.add_argument("--no_write", action="store_true",
                        help="print only; do not update docs/benchmarks.md")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.worker == "matmul":
        return worker_matmul(args)
    if args.worker == "ours":
        return worker_ours(args)
    run(args)


def run(args):
    only = set(filter(None, args.only.split(",")))
    started = datetime.datetime.now()
    load = [os.getloadavg()[0]]
    busy = busy_processes()
    if busy:
        print("WARNING: other processes are using the CPU:\n  " + "\n  ".join(busy),
              file=sys.stderr)
    w, t = args.warmup_steps, args.timed_steps
    rounds = {}  # label -> list of per-round results
    matmul = []
    with tempfile.TemporaryDirectory(prefix="bench_pretraining_") as workdir:
        records, npz = write_data(workdir)
        config_path = os.path.join(workdir, "bert_config.json")
        with open(config_path, "w") as f:
            json.dump(BERT_CONFIG, f)
        me = [os.path.abspath(__file__)]
        jobs = []
        if not only or "peer" in only:
            jobs.append(("peer", [PEER_SCRIPT, "--data", npz, "--config", config_path,
                                  "--batch_size", str(GLOBAL_BATCH)], args.peer_python))
        for index, (label, n_gpus, precision, xla) in enumerate(OUR_RUNS):
            if not only or str(index) in only:
                jobs.append((label, me + ["--worker", "ours", "--n_gpus", str(n_gpus),
                                          "--precision", precision, "--records",
                                          ",".join(records)]
                             + (["--use_xla"] if xla else []), sys.executable))
        # Configurations take turns in every round, so a burst of load from elsewhere hits one
        # round of each rather than all rounds of one.
        for r in range(args.rounds):
            matmul.append(run_worker(me + ["--worker", "matmul"]))
            print(f"round {r + 1}: matmul fp32 {matmul[-1]['fp32']['best'] / 1e9:.1f} GFLOP/s, "
                  f"bf16 {matmul[-1]['bf16']['best'] / 1e9:.1f} GFLOP/s", file=sys.stderr)
            for label, argv, python in jobs:
                extra = ["--warmup_steps", str(w), "--timed_steps", str(t)]
                if label != "peer":  # a fresh output_dir: a checkpoint there would be resumed
                    extra += ["--output_dir", tempfile.mkdtemp(dir=workdir)]
                out = run_worker(argv + extra, python=python)
                out.update(steady_rate(out["times"], w, t, GLOBAL_BATCH))
                rounds.setdefault(label, []).append(out)
                load.append(os.getloadavg()[0])
                print(f"round {r + 1}: {label}: {out['examples_per_sec']:.2f} examples/s "
                      f"(median step {out['step_median']:.3f} s)", file=sys.stderr)
        matmul.append(run_worker(me + ["--worker", "matmul"]))
    busy += busy_processes()
    results = {}
    for label, outs in rounds.items():
        best = dict(max(outs, key=lambda o: o["examples_per_sec"]))
        best["all_rounds"] = [o["examples_per_sec"] for o in outs]
        results[label] = best
    json.dump({"results": results, "matmul": matmul}, sys.stderr, default=str)
    print(file=sys.stderr)
    if only:
        return
    report = build_report(args, results, matmul, started, load, busy)
    print(report)
    if not args.no_write:
        write_section("pretraining-benchmark", report)


# -- the report -----------------------------------------------------------------------------

def build_report(args, results, matmul, started, load, busy):
    w, t = args.warmup_steps, args.timed_steps
    fp32_rate = max(m["fp32"]["best"] for m in matmul)
    bf16_rate = max(m["bf16"]["best"] for m in matmul)
    ours_flops = training_flops_per_example(BERT_CONFIG, SEQ, PREDS)
    peer_flops = training_flops_per_example(BERT_CONFIG, SEQ, SEQ)
    peer = results["peer"]
    base = results[OUR_RUNS[0][0]]
    two = results[OUR_RUNS[1][0]]

    def mfu(r, flops, rate=fp32_rate):
        return r["examples_per_sec"] * flops / rate

    rounds = len(base["all_rounds"])
    if busy:
        names = sorted({_program(b.split(None, 2)[2]) for b in busy})
        load_note = (f"load average {min(load):.1f}-{max(load):.1f} during the run: other "
                     f"processes were busy at times ({', '.join(names)}), which is why every "
                     f"configuration runs {rounds} times, taking turns, and the best round "
                     f"counts.")
    else:
        load_note = f"load average {min(load):.1f}-{max(load):.1f} during the run."
    lines = [
        "## Pretraining (run_pretraining.py's trainer)",
        "",
        f"Measured {started:%Y-%m-%d %H:%M} with "
        f"`.venv/bin/python bench/pretraining.py --peer_python .venv-oracle/bin/python "
        f"--warmup_steps {w} --timed_steps {t} --rounds {rounds}`.",
        f"Machine: {machine()}; TensorFlow {base['tf']}, PyTorch {peer['torch']} "
        f"({peer['threads']} threads), transformers {peer['transformers']} "
        f"(attention: {peer['attn_implementation']}); {load_note}",
        "",
        "Same model in both: L=4, H=256, A=4, I=1024, vocab 30522, tanh GELU, dropout 0.1 "
        f"(training mode), fp32 unless stated; the same {NUM_RECORDS} synthetic records "
        f"(seq {SEQ}, up to {PREDS} masked positions, ~15% of the tokens; 90% full-length); "
        f"global batch {GLOBAL_BATCH}; AdamW with weight decay 0.01 except biases and "
        "LayerNorm, global-norm clipping at 1.0, linear warm-up and decay. Ours is "
        "`training.Trainer.train`, the loop `run_pretraining.py` runs (tf.data over TFRecords, "
        "towers, averaging, clipping, Google's `AdamWeightDecay`, the per-step finiteness "
        "check), timed from the end of update "
        f"{w} to the end of update {w + t}: {w} warm-up updates (tracing, XLA compilation, "
        f"allocator warm-up) are excluded, {t} updates are timed. Every configuration runs in its "
        "own fresh process, one at a time, once per round; each row shows the best of the "
        f"{rounds} rounds (all rounds in the last column). The peer is Hugging Face "
        "`BertForPreTraining` built from a `BertConfig` object, `torch.optim.AdamW`, "
        "`clip_grad_norm_`, batches already in memory (bench/pretraining_hf_peer.py, run by "
        "the oracle venv's Python), timed the same way. Peak RSS: the worker process's own "
        "peak resident memory (`ru_maxrss`: framework, data, model, optimizer state).",
        "",
        "| run | examples/s (global) | step, median (s) | vs peer | vs ours n_gpus=1 fp32 | "
        f"MFU | first {w} updates (s) | peak RSS (MiB) | examples/s, every round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| peer: HF `BertForPreTraining`, PyTorch CPU | {peer['examples_per_sec']:.2f} | "
        f"{peer['step_median']:.3f} | 1.00x | "
        f"{peer['examples_per_sec'] / base['examples_per_sec']:.2f}x | "
        f"{mfu(peer, peer_flops):.0%} (of its own FLOPs) | {peer['startup']:.1f} | "
        f"{peer['peak_rss_mb']:.0f} | " + ", ".join(f"{x:.2f}" for x in peer["all_rounds"]) + " |",
    ]
    for label, n_gpus, precision, xla in OUR_RUNS:
        r = results[label]
        m = f"{mfu(r, ours_flops):.0%}"
        if precision == "bf16":
            m += f" ({mfu(r, ours_flops, bf16_rate):.0%} of bf16)"
        lines.append(
            f"| {label} | {r['examples_per_sec']:.2f} | {r['step_median']:.3f} | "
            f"**{r['examples_per_sec'] / peer['examples_per_sec']:.2f}x** | "
            f"{r['examples_per_sec'] / base['examples_per_sec']:.2f}x | {m} | "
            f"{r['startup']:.1f} | {r['peak_rss_mb']:.0f} | "
            + ", ".join(f"{x:.2f}" for x in r["all_rounds"]) + " |")
    ratio = base["examples_per_sec"] / peer["examples_per_sec"]
    tower_ratio = two["examples_per_sec"] / base["examples_per_sec"]
    base_mfu = mfu(base, ours_flops)

    c = BERT_CONFIG
    h, layers = c["hidden_size"], c["num_hidden_layers"]
    dense_macs = SEQ * layers * (4 * h * h + 2 * h * c["intermediate_size"])
    attn_macs = layers * 2 * SEQ * SEQ * h

    def verdict(ok):
        return "met" if ok else "**not met**"

    lines += [
        "",
        "Goals of issue 4 (fp32, XLA off, as run_pretraining.py runs by default):",
        f"- ours / peer examples/s: **{ratio:.2f}x** (goal >= 3x: {verdict(ratio >= 3)}).",
        f"- model FLOP utilisation: **{base_mfu:.0%}** of the fp32 matmul rate "
        f"(goal >= 50%: {verdict(base_mfu >= 0.5)}).",
        f"- towers: n_gpus=2 / n_gpus=1 at the same global batch: **{tower_ratio:.2f}x** "
        f"(goal >= 0.9x: {verdict(tower_ratio >= 0.9)}).",
        "",
        "Matmul rate of this machine in TensorFlow (a chain of 8 2048 x 2048 matmuls in a "
        "`tf.function`, best of 5, at the start of every round and at the end): fp32 "
        + " / ".join(f"{m['fp32']['best'] / 1e9:.0f}" for m in matmul)
        + " GFLOP/s, bf16 " + " / ".join(f"{m['bf16']['best'] / 1e9:.0f}" for m in matmul)
        + " GFLOP/s; fp32 compiled by XLA "
        + " / ".join(f"{m['fp32_xla']['best'] / 1e9:.0f}" for m in matmul)
        + f" GFLOP/s. MFU = examples/s x model FLOPs per example / {fp32_rate / 1e9:.0f} GFLOP/s "
        "(the highest fp32 rate measured).",
        "",
        f"Model FLOPs per training example (`training_flops_per_example`): 6 x multiply-adds "
        f"(2 FLOPs each, x 3 for forward, input gradient and weight gradient), counting matmuls "
        f"only: seq x L x (4H^2 + 2HI) for the dense layers ({dense_macs / 1e6:.1f}M) + "
        f"L x 2 x seq^2 x H for the attention scores and context ({attn_macs / 1e6:.1f}M) "
        f"+ positions x (H^2 + HV) for the masked-LM "
        f"transform and tied decoder + H^2 + 2H for the pooler and next-sentence layer. Ours "
        f"(and Google's) masked-LM head runs at the {PREDS} masked positions only: "
        f"**{ours_flops / 1e9:.2f} GFLOP** per example. `BertForPreTraining`'s API computes "
        f"the vocabulary logits at all {SEQ} positions (its labels are per token, -100 where "
        f"nothing is masked): **{peer_flops / 1e9:.2f} GFLOP** per example for the same "
        f"model. So the ratio above is {peer_flops / ours_flops:.2f}x less work per example "
        f"times {base_mfu / mfu(peer, peer_flops):.2f}x more FLOP/s (MFU {base_mfu:.0%} vs the "
        f"peer's {mfu(peer, peer_flops):.0%}). Embedding lookups, LayerNorm, softmax, GELU, "
        f"dropout "
        f"and the optimizer are not counted (they have no matmul); the optimizer alone "
        f"updates {base['params'] / 1e6:.1f}M parameters and their two Adam moments every step.",
        "",
        GPU_NOTES.strip(),
    ]
    return "\n".join(lines)


GPU_NOTES = """
### What to expect on GPUs (not measured here: reasoned from the design)

Nothing in this subsection was measured: this machine has no GPU. It follows from how the trainer is
built (DESIGN.md decision 3, bert_mgpu/engine/towers.py, bert_mgpu/engine/training.py); the numbers
are order-of-magnitude arithmetic for BERT-Base (110M parameters, 440 MB in fp32), not benchmarks.

- **Where the variables live.** The weights, the Adam slots (`adam_m`, `adam_v`), `global_step`
  and the loss scale are created eagerly with no device scope, so on the default device: the first
  visible GPU (`/GPU:0`). The averaging, unscaling, clipping and the single update are traced with
  no device scope either and run there, next to the variables. Only the towers' forward and
  backward passes are placed (tower `i` on GPU `i % n_visible`).
- **What is copied per step.** Every tower reads every weight once per update: towers on other
  GPUs receive one full copy of the model (4 bytes x parameters: ~440 MB for BERT-Base) from
  GPU 0, and send back one full set of fp32 gradients of the same size (the word-embedding
  gradient is effectively dense in pretraining: the tied masked-LM decoder touches every row).
  Without XLA the embedding lookups are resource gathers, which run where the table lives (GPU 0)
  and send only the [batch, seq, hidden] rows. The input batch is split in the graph and each slice
  is sent to its tower (tens of KB).
- **How the averaging scales.** It is a reduce-to-one, not an all-reduce: GPU 0 receives N - 1
  gradient sets and sends N - 1 weight copies per update, so its link carries about
  2 x (N - 1) x 440 MB per BERT-Base step: ~6 GB with 8 towers. The sums themselves are cheap
  (memory-bound adds, milliseconds on a GPU); the link is the limit. With NVLink/NVSwitch
  (~150-300 GB/s) that is tens of milliseconds, small next to the compute of a step at a per-GPU
  batch of 32 x 128 tokens (~2.2 TFLOP per tower: ~50 ms in fp16 on a V100-class GPU, ~200 ms in
  fp32); over PCIe 3.0 x16 (~12 GB/s) it is ~0.5 s and dominates, so expect poor scaling beyond
  2-4 GPUs without peer-to-peer links. Transfers can overlap the compute only partly (the last
  layers' gradients are ready first). Larger per-tower batches amortise the copies;
  `--num_accumulation_steps` does not (each micro-batch is averaged into the accumulators on
  GPU 0, so it pays the same copies per micro-batch; it only saves memory).
- **Per-tower XLA (`--use_xla`).** Each tower's whole forward and backward pass is one XLA
  cluster compiled for its own GPU (an XLA cluster cannot span devices, nor read a variable on
  another device, so the tower gets explicit copies of the weights on its device: the same bytes
  as the implicit reads above). Compilation happens once per tower device at start-up. The
  averaging, unscaling and the global norm (which is also the finiteness check) stay plain
  TensorFlow ops on GPU 0; the clipped update is always one XLA-compiled function there (with
  or without `--use_xla`), so each variable's clip and Adam arithmetic is a few fused kernels
  instead of a dozen small ones. (On this CPU, fusing the update alone saved ~5% of a step;
  computing the norm outside it saved ~3% more.)
- **Mixed precision.** Activations and matmuls run in fp16/bf16 (tensor cores: the largest
  single-GPU gain), but the master weights, the optimizer and the gradients sent to GPU 0 stay
  fp32 (the gradient of each weight's cast is fp32), so the traffic above does not shrink. With
  `--precision=fp16` each tower multiplies its loss by the current loss scale (2^15 at start);
  the scaled gradients are averaged, unscaled once on GPU 0, checked for Inf/NaN, clipped and
  applied; a non-finite step is skipped and halves the scale, 2000 finite steps double it. bf16
  needs no scaling.
- **When to prefer multi-machine collectives (issue 6).** When the towers no longer fit one
  machine, obviously; and on one machine when GPU 0's link is the bottleneck (many GPUs, large
  models, PCIe without peer-to-peer): a ring/NCCL all-reduce (TensorFlow collectives, issue 6)
  moves about 2 x (N - 1) / N x model size per device, independent of N and with no hot device,
  where the tower average puts 2 x (N - 1) x model size on GPU 0. In-graph towers remain the
  simpler and cheaper choice on one machine with NVLink and a handful of GPUs.
"""


if __name__ == "__main__":
    main()
