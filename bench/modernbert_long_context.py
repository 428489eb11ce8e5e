"""ModernBERT at long context: local (sliding-window) layers against every layer global, and
Hugging Face's `ModernBertForSequenceClassification` on the same weights, batch and length.

Usage (speed needs an idle machine; memory does not):
  .venv/bin/python bench/modernbert_long_context.py [--lengths=1024,4096,8192 --layers=3
    --hidden=768 --heads=12 --intermediate=1152 --steps=3 --attention_chunk=256
    --arms=local,global,local_full,global_full,hf] [--memory_only] [--write]

The model: a random ModernBERT classifier (window 128, global every 3rd layer, dropouts 0 as
ModernBERT's released configs, [CLS] pooling, 2 labels) built and saved by
`transformers` itself (tests/oracles/hf_modernbert.py, the oracle virtualenv) and converted by
convert_hf_checkpoint.py, so all arms hold the same weights. ModernBERT-base's widths
(hidden 768, 12 heads, GeGLU 1152) by default, with 3 layers (one global and two local, one
period of ModernBERT's pattern) instead of 22: with full probabilities, every layer global at
8,192 tokens keeps a 12 x 8,192 x 8,192 attention matrix per layer for the backward pass, and
22 of them do not fit in 24 GiB. Arms, each in its own process (so its peak memory is its
own), one after another:
- "local": our BertModel as converted (global every 3rd layer, local layers compute only their
  band: O(n w)); its global layers take `--attention_chunk` query rows at a time and keep no
  probabilities for the backward pass (`rotary_attention.chunked_attention`), its local layers
  recompute their band in the backward pass (`recompute_band`): the defaults;
- "global": the same weights with `global_attention_every_n_layers: 1`, chunked likewise;
- "local_full", "global_full": the same two with the global layers' full [B, N, n, n]
  probabilities and the local layers' band kept for the backward pass (`attention_chunk` 0,
  `recompute_band` off: the code before either);
- "hf": `ModernBertForSequenceClassification` (sdpa attention, eager PyTorch, fp32), which on
  CPU computes its local layers as the full n^2 product under a sliding-window mask.
Each arm runs forward + backward of the classification loss (cross-entropy on the logits, one
label) on one sequence of `--length` random token ids, `--steps` times after a first run (ours
traces there). Figures: the median seconds per step after the first, and the peak resident
memory above the process's resident memory once the model is built and its weights loaded
(the kernel's high-water mark, reset by /proc/self/clear_refs just before the first step, ours
traced before it: so it is activations, gradients and the framework's workspace, the weights
excluded).
An arm whose resident memory passes `--max_rss_gib` (18) is stopped and shown as not fitting.
`--memory_only` leaves the seconds out of the table (memory does not depend on the machine's
load; time does). `--write` puts the table into docs/benchmarks.md ("ModernBERT at long
context").
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)

sys.path.insert(1, _common.REPO)

ORACLE_PYTHON = os.environ.get("BERT_MGPU_ORACLE_PYTHON") or os.path.join(
    _common.REPO, ".venv-oracle", "bin", "python")
ORACLE = os.path.join(_common.REPO, "tests", "oracles", "hf_modernbert.py")
ARMS = ("local", "global", "local_full", "global_full", "hf")
LABELS = {"local": "ours, local layers (window 128)", "global": "ours, every layer global",
          "local_full": "ours, local layers, full global probabilities",
          "global_full": "ours, every layer global, full probabilities",
          "hf": "Hugging Face ModernBertForSequenceClassification (sdpa)"}


def _resident_mib(field):
    """VmRSS or VmHWM (the peak since the last reset) of this process, MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak():
    """Resets the kernel's peak-RSS mark (VmHWM) to the current RSS; returns the current RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _resident_mib("VmRSS")


def _timed(step, steps):
    """Runs `step` 1 + `steps` times; {"seconds": median after the first, "peak_mib"}."""
    baseline = _reset_peak()
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"seconds": statistics.median(times[1:]) if steps else None,
            "peak_mib": _resident_mib("VmHWM") - baseline, "first_seconds": times[0]}


def ours(folder, arm, length, steps, chunk):
    """Our arm in this process (the TensorFlow virtualenv): the global layers chunked by
    `chunk` query rows, or (the `_full` arms) keeping their full probabilities."""
    import numpy as np
    import tensorflow as tf

    from bert_mgpu.engine import checkpoint
    from bert_mgpu.model import execution, modeling
    from bert_mgpu.model.bert_config import BertConfig

    with open(os.path.join(folder, "bert_config.json"), encoding="utf-8") as f:
        keys = json.load(f)
    if arm.startswith("global"):
        keys["global_attention_every_n_layers"] = 1
    model = modeling.BertModel(BertConfig.from_dict(keys))
    weights = tf.Variable(tf.zeros([2, keys["hidden_size"]]), name="output_weights")
    bias = tf.Variable(tf.zeros([2]), name="output_bias")
    named = dict(model.named_variables(), output_weights=weights, output_bias=bias)
    checkpoint.init_from_checkpoint(os.path.join(folder, "bert_model.ckpt"), named)
    variables = list(named.values())
    ids = tf.constant(np.random.default_rng(0).integers(5, keys["vocab_size"], [1, length]),
                      tf.int32)
    mask = tf.ones_like(ids)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            pooled = model(ids, mask, training=True).pooled_output
            logits = tf.matmul(pooled, weights, transpose_b=True) + bias
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.constant([1]), logits))
        return tape.gradient(loss, variables)

    full = arm.endswith("_full")
    with execution.entered(attention_chunk=0 if full else chunk, recompute_band=not full):
        # Traced before the memory baseline (graph optimization is not).
        step.get_concrete_function()
    return _timed(step, steps)


def peer(folder, length, steps):
    """The Hugging Face arm in this process (the oracle virtualenv)."""
    import numpy as np
    import torch
    from transformers import ModernBertForSequenceClassification

    torch.manual_seed(0)
    model = ModernBertForSequenceClassification.from_pretrained(
        folder, attn_implementation="sdpa").train()
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        vocab = json.load(f)["vocab_size"]
    ids = torch.tensor(np.random.default_rng(0).integers(5, vocab, [1, length]))
    mask = torch.ones_like(ids)
    labels = torch.tensor([1])

    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    return _timed(step, steps)


def build(args, work):
    """The Hugging Face folder (built and saved by transformers) and its conversion."""
    hf = os.path.join(work, "hf")
    config = {"vocab_size": 50368, "hidden_size": args.hidden,
              "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
              "intermediate_size": args.intermediate, "max_position_embeddings": 8192,
              "local_attention": 128, "global_attn_every_n_layers": 3, "num_labels": 2,
              "classifier_pooling": "cls", "pad_token_id": 50283, "cls_token_id": 50281,
              "sep_token_id": 50282, "bos_token_id": 50281, "eos_token_id": 50282}
    request = os.path.join(work, "build.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"save_dir": hf, "new": True, "seed": 0, "kind": "classifier",
                   "config": config, "input_ids": [[50281, 50282]],
                   "attention_mask": [[1, 1]], "out": os.path.join(work, "hf.npz")}, f)
    converted = os.path.join(work, "ours")
    for cmd in ([ORACLE_PYTHON, ORACLE, request],
                [sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={hf}",
                 f"--output_dir={converted}"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=_common.REPO)
        if proc.returncode:
            sys.exit(f"{os.path.basename(cmd[1])} failed:\n{proc.stderr[-3000:]}")
    return {"hf": hf, "ours": converted}


def _resident_gib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2 ** 20
    return 0.0


def run_arm(arm, folders, length, steps, max_rss_gib, chunk):
    """One arm in a fresh process; its figures, or {"error": why} if it failed: stopped
    (SIGKILL) once its resident memory passed `max_rss_gib`, so that an arm that cannot fit
    does not bring the kernel's out-of-memory killer onto other processes."""
    python = ORACLE_PYTHON if arm == "hf" else sys.executable
    folder = folders["hf" if arm == "hf" else "ours"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, os.path.abspath(__file__), f"--arm={arm}",
                                 f"--folder={folder}", f"--length={length}",
                                 f"--steps={steps}", f"--attention_chunk={chunk}"],
                                stdout=out, stderr=err, text=True, cwd=_common.REPO)
        over = False
        while proc.poll() is None:
            try:
                over = over or _resident_gib(proc.pid) > max_rss_gib
            except OSError:
                pass
            if over:
                proc.kill()
                proc.wait()
                return {"error": f"over {max_rss_gib:g} GiB resident: stopped"}
            time.sleep(0.2)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            lines = err.read().strip().splitlines() or [f"exit code {proc.returncode}"]
            return {"error": lines[-1][:200]}
        return json.loads(out.read().strip().splitlines()[-1])


def table(results, arms, memory_only):
    """Markdown rows: one per length, each arm's peak MiB (and seconds), and the memory ratios
    of the local arm to the others."""
    others = [a for a in arms if a != "local"] if "local" in arms else []
    head = ["length"] + [f"{a} peak MiB" for a in arms] + [f"local / {a} memory"
                                                          for a in others]
    if not memory_only:
        head += [f"{a} s/step" for a in arms]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for length, run in results.items():
        def cell(arm, key, fmt):
            return run[arm]["error"] if "error" in run[arm] else format(run[arm][key], fmt)

        def ratio(a, b):
            if "error" in run[a] or "error" in run[b]:
                return "-"
            return f"{run[a]['peak_mib'] / max(run[b]['peak_mib'], 1e-9):.3f}"

        cells = [f"{length:,}"] + [cell(a, "peak_mib", ".0f") for a in arms]
        cells += [ratio("local", a) for a in others]
        if not memory_only:
            cells += [cell(a, "seconds", ".2f") for a in arms]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 3), ("hidden", 768), ("heads", 12),
                          ("intermediate", 1152), ("steps", 3), ("length", 0),
                          ("attention_chunk", 256)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--lengths", default="1024,4096,8192")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--memory_only", action="store_true",
                        help="leave the seconds out of the table (a loaded machine)")
    parser.add_argument("--max_rss_gib", type=float, default=18.0,
                        help="stop an arm whose resident memory passes this (it does not fit)")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.arm:
        run = peer(args.folder, args.length, args.steps) if args.arm == "hf" else \
            ours(args.folder, args.arm, args.length, args.steps, args.attention_chunk)
        return print(json.dumps(run))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results, arms = {}, args.arms.split(",")
    with tempfile.TemporaryDirectory() as work:
        folders = build(args, work)
        for length in map(int, args.lengths.split(",")):
            results[length] = {a: run_arm(a, folders, length, args.steps, args.max_rss_gib,
                                          args.attention_chunk) for a in arms}
            print(length, json.dumps(results[length]), file=sys.stderr, flush=True)
    command = "python bench/modernbert_long_context.py " + " ".join(sys.argv[1:])
    text = "\n".join([
        "## ModernBERT at long context", "",
        f"{started}, `{command}`. Machine: {_common.machine()}.", "",
        f"Model: hidden {args.hidden}, {args.heads} heads, GeGLU {args.intermediate} "
        f"(ModernBERT-base's widths by default), {args.layers} layers (global every 3rd: layer 0,"
        f" 3, ...; window 128), vocabulary 50,368, 2 labels, [CLS] pooling; random "
        f"weights built by transformers and converted: the same in every arm. One sequence, "
        f"forward + backward of the classification loss, fp32, dropouts 0. Peak MiB: the peak "
        f"resident memory above the process's once its model is built and loaded (activations,"
        f" gradients, workspace)" + ("." if args.memory_only else
                                      f"; s/step: the median of {args.steps} steps after the "
                                      f"first."), "",
        table(results, arms, args.memory_only)])
    print(text)
    if args.write:
        _common.write_section("ModernBERT at long context", text)


if __name__ == "__main__":
    main()
