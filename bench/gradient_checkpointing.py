"""--gradient_checkpointing: peak memory and update time at seq 512, ours vs Hugging Face.

Run by hand with the project's venv (about 10 minutes on 2 cores; the peer runs in the oracle
venv):

    .venv/bin/python bench/gradient_checkpointing.py

Both sides train the same BERT-Base-shaped layer stack (H=768, A=12, I=3072, dropout 0.1, fp32;
--layers of them, 4 by default) on random token ids of length 512, batch --batch_size, with a
loss on the encoder's output (the sum of the sequence output times a fixed random tensor, so no
head's memory enters the comparison) and plain SGD updates. Ours: `modeling.BertModel` in a
traced update with position-keyed dropout (the trainer's stream), with and without
`gradient_checkpointing`; the peer: `transformers.BertModel` with and without
`gradient_checkpointing_enable()`. Every arm runs in its own fresh process, arms alternate within
each round (a burst of load from elsewhere hits all of them).

Memory: "activations" = the process's peak resident set (VmHWM) over all the updates minus its
resident set just before the first one (framework, weights and inputs built): what the updates add
(activations kept for the backward pass, gradients, the traced graph). Resetting the peak after
warm-up would not do: the allocators keep freed activation memory, so the resident set after a
warm-up update already holds them. GPU memory would be measured the same way with the framework's
peak allocator statistics (tf.config.experimental.get_memory_info(...)["peak"] after
reset_memory_stats; torch.cuda.max_memory_allocated after reset_peak_memory_stats): not measured
here (no GPU). The results go to the "gradient-checkpointing" section of docs/benchmarks.md.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402  (bench/)
    REPO,
    add_max_isa_flag,
    cap_isa,
    machine,
    wait_for_quiet,
    write_section,
)

SEQ, HIDDEN, HEADS, INTERMEDIATE = 512, 768, 12, 3072
PEER = os.path.join(REPO, ".venv-oracle", "bin", "python")


def config(layers):
    return {"vocab_size": 30522, "hidden_size": HIDDEN, "num_hidden_layers": layers,
            "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
            "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
            "type_vocab_size": 2, "initializer_range": 0.02}


def memory_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def worker_ours(args):
    import numpy as np
    import tensorflow as tf

    from bert_mgpu.model import execution, modeling
    from bert_mgpu.model.bert_config import BertConfig

    model = modeling.BertModel(BertConfig.from_dict(config(args.layers)))
    variables = list(model.named_variables().values())
    rng = np.random.RandomState(0)
    ids = tf.constant(rng.randint(1, 30522, [args.batch_size, SEQ]), tf.int32)
    projection = tf.constant(rng.randn(args.batch_size, SEQ, HIDDEN) / SEQ, tf.float32)

    @tf.function
    def update(step):
        with execution.entered(stream=execution.DropoutStream(12345, step, 0, args.batch_size),
                               recompute_layers=args.checkpointing):
            with tf.GradientTape() as tape:
                out = model(ids, training=True).sequence_output
                loss = tf.reduce_sum(out * projection)
            grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            if g is not None:  # the pooler: not in the loss
                v.assign_sub(1e-5 * tf.convert_to_tensor(g))
        return loss

    return run_updates(lambda i: float(update(tf.constant(i, tf.int64))), args)


def run_updates(update, args):
    """Warm-up updates, then the timed ones; the resident set before the first update and the
    peak over all of them."""
    base = memory_kib("VmRSS")
    for i in range(args.warmup):
        update(i)
    times = []
    for i in range(args.warmup, args.warmup + args.timed):
        start = time.perf_counter()
        update(i)
        times.append(time.perf_counter() - start)
    peak = memory_kib("VmHWM")
    return {"update_s": statistics.median(times), "base_mb": base / 1024,
            "peak_mb": peak / 1024, "activations_mb": (peak - base) / 1024}


def run_arm(side, checkpointing, args):
    argv = [os.path.abspath(__file__), "--worker", side, "--layers", str(args.layers),
            "--batch_size", str(args.batch_size), "--warmup", str(args.warmup),
            "--timed", str(args.timed)] + (["--checkpointing"] if checkpointing else [])
    python = PEER if side == "peer" else sys.executable
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    proc = subprocess.run([python] + argv, env=env, check=True, stdout=subprocess.PIPE,
                          cwd=REPO)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


ARMS = [("ours", False), ("ours", True), ("peer", False), ("peer", True)]


def report(args, rounds, started, load):
    def med(side, ckpt, key):
        return statistics.median(r[(side, ckpt)][key] for r in rounds)

    lines = [
        f"## Gradient checkpointing at seq 512, {args.layers} layers "
        "(--gradient_checkpointing, issue 31)", "",
        f"Command: `.venv/bin/python bench/gradient_checkpointing.py --layers {args.layers} "
        f"--batch_size {args.batch_size} --warmup {args.warmup} --timed {args.timed} "
        f"--rounds {args.rounds}`; "
        f"{started:%Y-%m-%d %H:%M} UTC; load average at start {load:.2f}.",
        f"Machine: {machine()}.", "",
        f"Model: {args.layers} BERT-Base-shaped layers (H={HIDDEN}, A={HEADS}, "
        f"I={INTERMEDIATE}), dropout 0.1, fp32, seq {SEQ}, batch {args.batch_size}; loss on "
        f"the sequence output, SGD. Each arm a fresh process, {args.warmup} warm-up and "
        f"{args.timed} timed updates; medians over {args.rounds} alternating rounds. "
        "Activations: the peak resident memory over the updates minus the resident memory "
        "before the first (bench/gradient_checkpointing.py's docstring).", "",
        "| arm | update (s) | activations (MB) | peak RSS (MB) | activations vs without | "
        "time vs without |", "|---|---|---|---|---|---|"]
    for side, name in (("ours", "ours"), ("peer", "Hugging Face")):
        for ckpt in (False, True):
            act, t = med(side, ckpt, "activations_mb"), med(side, ckpt, "update_s")
            act0, t0 = med(side, False, "activations_mb"), med(side, False, "update_s")
            lines.append(
                f"| {name}{', checkpointing' if ckpt else ''} | {t:.2f} | {act:.0f} | "
                f"{med(side, ckpt, 'peak_mb'):.0f} | "
                f"{act0 / act:.2f}x less | {t / t0:.2f}x |" if ckpt else
                f"| {name} | {t:.2f} | {act:.0f} | {med(side, ckpt, 'peak_mb'):.0f} | 1 | 1 |")
    time_ratio = med("ours", True, "update_s") / med("peer", True, "update_s")
    memory_ratio = med("ours", True, "activations_mb") / med("peer", True, "activations_mb")
    every = [{f"{side}{int(ckpt)}": r[(side, ckpt)] for side, ckpt in ARMS} for r in rounds]
    if load > 2:
        lines += ["", f"The load average was {load:.2f} at the start (other jobs on the 2 "
                  "cores): the update times are not a measurement of the recomputation's cost; "
                  "the memory figures are each process's own."]
    lines += ["", f"Ours vs the peer, both checkpointing: update time {time_ratio:.2f}x, "
              f"activations {memory_ratio:.2f}x. All rounds: {json.dumps(every)}"]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["ours", "peer"], help=argparse.SUPPRESS)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timed", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max_load", type=float, default=1.5,
                        help="wait (up to 10 minutes) for the load average to fall below this")
    parser.add_argument("--no_write", action="store_true")
    parser.add_argument("--section", default=None,
                        help="docs/benchmarks.md section to write (default: gradient-checkpointing "
                             "for 4 layers, gradient-checkpointing-<layers>L otherwise)")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.worker == "ours":
        print(json.dumps(worker_ours(args)))
        return
    if args.worker == "peer":
        from gradient_checkpointing_hf_peer import worker_peer
        print(json.dumps(worker_peer(args, config(args.layers), run_updates)))
        return
    started = datetime.datetime.utcnow()
    load = wait_for_quiet(max_load=args.max_load, max_wait_seconds=600,
                          label="gradient_checkpointing")
    rounds = []
    for i in range(args.rounds):
        rounds.append({(side, ckpt): run_arm(side, ckpt, args) for side, ckpt in ARMS})
        print(f"round {i + 1}: {rounds[-1]}", file=sys.stderr, flush=True)
    text = report(args, rounds, started, load)
    print(text)
    if not args.no_write:
        write_section(args.section or ("gradient-checkpointing" if args.layers == 4
                                       else f"gradient-checkpointing-{args.layers}L"), text)


if __name__ == "__main__":
    main()
