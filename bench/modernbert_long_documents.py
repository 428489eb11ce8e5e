"""Long documents with ModernBERT: the whole document in one context (up to 8,192 tokens)
against `--doc_stride` windows, with the same fine-tuned weights (issue 50, section 4).

Usage:
  .venv/bin/python bench/modernbert_long_documents.py [--layers=3 --hidden=256 --heads=4
    --glu=384 --epochs=3 --window=512 --stride=256] [--init_checkpoint=DIR] [--write]

Data: the shipped KJV Bible (data/pretraining, public domain), one document a chapter (1,189;
median ~630 words, Psalm 119 the longest at 2,423 words), labelled with the section of the
canon its book belongs to, as the tables of contents of printed Bibles group the books
(SECTIONS: law, history, poetry and wisdom, major prophets, minor prophets, gospels and Acts,
epistles and Revelation: 7 labels). The labels are real (a centuries-old human grouping, not
made for this test) and the evidence for one is spread through a chapter (names, places,
vocabulary, style), which is what makes it a fair test of reading a whole document at once
against reading it in windows: no one window is meant to decide. Every 5th chapter is
evaluated (237), the others train (952); chapters of one book fall on both sides, so the task
is "which part of the canon is this chapter from", not generalisation to unseen books.

Model: ModernBERT's keys (RoPE, window 128 with global every 3rd layer, GeGLU, pre-LN, no
biases, dropout 0, `--pooling` mean as ModernBERT-base's config.json) at a small shape, a
byte-level BPE tokenizer.json trained on the training chapters
(tests/oracles/hf_bpe_tokenizer.py), random initial weights unless `--init_checkpoint` (a
pretrained ModernBERT of that config, e.g. run_pretraining.py's output) is given. It is
fine-tuned once by run_classifier.py on whole chapters (`--max_seq_length` = the longest
chapter, at most 8,192; batches padded to their longest, grouped by length). The fine-tuned
checkpoint is then evaluated twice by run_classifier.py --do_eval (no training):
- "full context": `--max_seq_length` as in training, each chapter in one sequence;
- "windows": `--max_seq_length=--window --doc_stride=--stride`, each chapter's windows pooled
  (`--window_pooling=mean`), the project's long-document mode.
`--train_every=N` trains on every Nth training chapter only (a quicker, smaller run).
Figures: accuracy over the evaluated chapters and the CPU seconds (user + system) of the
evaluation per chapter: the process's CPU from its "***** Running evaluation" log line to its
"***** Eval results" line (start-up and loading excluded, tracing included), over the chapters.
`--write` puts the table into docs/benchmarks.md ("ModernBERT long documents").
"""

import argparse
import gzip
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)

REPO = _common.REPO
KJV = os.path.join(REPO, "data", "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
BPE = os.path.join(REPO, "tests", "oracles", "hf_bpe_tokenizer.py")
EVAL_EVERY = 5

# The 66 books' chapter counts in the KJV's order, grouped into the sections of the canon.
SECTIONS = (
    ("law", (50, 40, 27, 36, 34)),
    ("history", (24, 21, 4, 31, 24, 22, 25, 29, 36, 10, 13, 10)),
    ("poetry_wisdom", (42, 150, 31, 12, 8)),
    ("major_prophets", (66, 52, 5, 48, 12)),
    ("minor_prophets", (14, 3, 9, 1, 4, 7, 3, 3, 3, 2, 14, 4)),
    ("gospels_acts", (28, 16, 24, 21, 28)),
    ("epistles_revelation", (16, 16, 13, 6, 6, 4, 4, 5, 3, 6, 4, 3, 1, 13, 5, 5, 3, 5, 1, 1,
                             1, 22)),
)


def chapter_labels():
    """The section of every chapter, in the KJV's order (1,189 names)."""
    return [name for name, books in SECTIONS for chapters in books for _ in range(chapters)]


def chapters():
    """The KJV's chapters (blank-line separated verse lines), each as one line of text."""
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    return [" ".join(line.strip() for line in b.splitlines() if line.strip()) for b in blocks]


def write_data(work, train_every=1):
    """data/{train,dev}.tsv (every `train_every`-th training chapter) and the tokenizer's
    training text; returns (data dir, counts)."""
    texts, labels = chapters(), chapter_labels()
    if len(texts) != len(labels):
        sys.exit(f"{KJV}: {len(texts)} chapters, the canon has {len(labels)}")
    data = os.path.join(work, "data")
    os.makedirs(data)
    split = {"train": [], "dev": []}
    for i, (text, label) in enumerate(zip(texts, labels)):
        split["dev" if i % EVAL_EVERY == EVAL_EVERY - 1 else "train"].append((text, label))
    split["train"] = split["train"][::train_every]
    for name, rows in split.items():
        with open(os.path.join(data, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in rows))
    with open(os.path.join(work, "corpus.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t, _ in split["train"]))
    return data, {k: len(v) for k, v in split.items()}


def _checked(result, what):
    if result["returncode"]:
        sys.exit(f"{what} failed:\n{result['stderr'][-3000:]}")
    return result


def model_files(args, work):
    """(tokenizer.json, bert_config.json, the longest chapter in tokens)."""
    tokenizer = os.path.join(work, "tokenizer.json")
    _checked(_common.run_measured([sys.executable, BPE, "train", tokenizer, str(args.vocab),
                                   os.path.join(work, "corpus.txt")]), "tokenizer training")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer)
    longest = 0
    for name in ("train", "dev"):
        with open(os.path.join(work, "data", f"{name}.tsv"), encoding="utf-8") as f:
            texts = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
        longest = max([longest] + [len(e.ids) for e in tok.encode_batch(texts)])
    with open(tokenizer, encoding="utf-8") as f:
        vocab_size = 1 + max(t["id"] for t in json.load(f)["added_tokens"])
    config = {"vocab_size": vocab_size, "hidden_size": args.hidden,
              "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
              "intermediate_size": 2 * args.glu, "hidden_act": "gelu_exact",
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
              "max_position_embeddings": 8192, "type_vocab_size": 0, "initializer_range": 0.02,
              "pre_layer_norm": True, "use_bias": False, "gated_ffn": True,
              "position_embedding_type": "rope", "rope_theta": 160000.0,
              "local_rope_theta": 10000.0, "local_attention_window": 128,
              "global_attention_every_n_layers": 3, "layer_norm_eps": 1e-5,
              "layer_norm_bias": False, "first_layer_attention_norm": False,
              "head_bias": False, "classifier_pooling": args.pooling}
    path = os.path.join(work, "bert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return tokenizer, path, min(8192, longest)


def classifier(data, tokenizer, config, out, *flags):
    return [sys.executable, "run_classifier.py", "--task_name=tsv", f"--data_dir={data}",
            f"--vocab_file={tokenizer}", f"--bert_config_file={config}", f"--output_dir={out}",
            "--random_seed=12345", *flags]


def evaluate(args, data, tokenizer, config, trained, out, *flags):
    """{"accuracy", "cpu_per_doc", "documents"} of one evaluation of `trained`'s weights."""
    result = _checked(_common.run_measured(
        classifier(data, tokenizer, config, out, "--do_eval=true", "--do_train=false",
                   f"--init_checkpoint={trained}", f"--eval_batch_size={args.eval_batch}",
                   *flags),
        marks=[("start", r"\*\*\*\*\* Running evaluation"),
               ("end", r"\*\*\*\*\* Eval results")]), f"evaluation {flags}")
    with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
        values = dict(line.strip().split(" = ") for line in f if " = " in line)
    docs = args.dev_docs  # documents, not windows
    return {"accuracy": float(values["eval_accuracy"]), "documents": docs,
            "cpu_per_doc": (result["marks"]["end"] - result["marks"]["start"]) / docs,
            "process_cpu": result["cpu_seconds"]}


def run(args, work):
    data, counts = write_data(work, args.train_every)
    args.dev_docs = counts["dev"]
    tokenizer, config, length = model_files(args, work)
    trained = os.path.join(work, "trained")
    init = [f"--init_checkpoint={args.init_checkpoint}"] if args.init_checkpoint else []
    training = _checked(_common.run_measured(classifier(
        data, tokenizer, config, trained, "--do_train=true", f"--max_seq_length={length}",
        f"--train_batch_size={args.batch}", f"--learning_rate={args.learning_rate}",
        f"--num_train_epochs={args.epochs}", "--warmup_proportion=0.1",
        "--group_by_length=true", "--log_every_n_steps=10", *init)), "fine-tuning")
    arms = {
        "full context": evaluate(args, data, tokenizer, config, trained,
                                 os.path.join(work, "eval_full"), f"--max_seq_length={length}"),
        "windows": evaluate(args, data, tokenizer, config, trained,
                            os.path.join(work, "eval_windows"), f"--max_seq_length={args.window}",
                            f"--doc_stride={args.stride}", "--window_pooling=mean"),
    }
    return arms, {"counts": counts, "length": length, "train_cpu": training["cpu_seconds"]}


def report(args, arms, facts, started):
    command = "python bench/modernbert_long_documents.py " + " ".join(sys.argv[1:])
    c = facts["counts"]
    rows = ["| evaluation | max_seq_length | accuracy | CPU s per chapter |",
            "|---|---:|---:|---:|",
            f"| full context | {facts['length']:,} | {100 * arms['full context']['accuracy']:.1f}%"
            f" | {arms['full context']['cpu_per_doc']:.3f} |",
            f"| windows (`--doc_stride={args.stride}`, mean pooling) | {args.window} | "
            f"{100 * arms['windows']['accuracy']:.1f}% | {arms['windows']['cpu_per_doc']:.3f} |"]
    return "\n".join([
        "## ModernBERT long documents: whole chapters against windows, the same weights", "",
        f"{started}, `{command}`. Machine: {_common.machine()}.", "",
        f"Data: KJV chapters labelled with their section of the canon (7 labels; "
        f"bench/modernbert_long_documents.py says why it is a fair task): {c['train']} train, "
        f"{c['dev']} evaluated; the longest {facts['length']:,} BPE tokens. Model: ModernBERT's "
        f"keys, {args.layers} layers, hidden {args.hidden}, {args.heads} heads, GeGLU "
        f"{args.glu}, {args.pooling} pooling, "
        + (f"from `{args.init_checkpoint}`" if args.init_checkpoint else "random initial weights")
        + f"; fine-tuned once on whole chapters ({args.epochs:g} epochs, batch {args.batch}, "
          f"lr {args.learning_rate:g}; {facts['train_cpu']:.0f} CPU s), then evaluated twice. "
          f"CPU s per chapter: the evaluation phase's CPU (user + system, tracing included, "
          f"start-up excluded) over the chapters.", "", *rows])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 3), ("hidden", 256), ("heads", 4), ("glu", 384),
                          ("vocab", 8000), ("batch", 8), ("eval_batch", 8), ("window", 512),
                          ("stride", 256), ("train_every", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--pooling", default="mean", choices=("mean", "cls"),
                        help="classifier_pooling (ModernBERT-base's config.json: mean)")
    parser.add_argument("--init_checkpoint", default="")
    parser.add_argument("--write", action="store_true")
    _common.add_max_isa_flag(parser)
    args = parser.parse_args()
    _common.cap_isa(args.max_isa)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="mb_longdoc_") as work:
        arms, facts = run(args, work)
    text = report(args, arms, facts, started)
    print(text)
    if args.write:
        _common.write_section("ModernBERT long documents", text)


if __name__ == "__main__":
    main()
