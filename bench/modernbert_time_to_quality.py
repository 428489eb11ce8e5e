"""Time to quality, ModernBERT against BERT: the held-out masked-LM loss each reaches within the
same budget of CPU seconds, through run_pretraining.py itself (issue 50, Cramming's setting).

Usage (CPU seconds, not wall seconds, are the budget: a fair measure on a shared host):
  .venv/bin/python bench/modernbert_time_to_quality.py [--budget_cpu_seconds=2400] [--write]

Data: the split of bench/time_to_quality.py (the shipped KJV Bible, one document a chapter,
every 20th chapter held out), Google's uncased WordPiece vocabulary for both arms (one
vocabulary, so that the two losses are over the same words), sequences of 128 tokens. The
held-out records are made once (`--no_next_sentence`, Google's 15 % masking, 20 positions, one
pass) and every arm is evaluated on them, at the same masked positions.

Arms, each the architecture with its authors' pretraining recipe, of the same parameter count
(the embeddings, encoder and masked-LM head; the next-sentence head is left out of BERT's
count):
- "bert": Google's BERT (post-LN, learned positions, biases, GELU, dropout 0.1), 4 layers,
  hidden 256, 4 heads, intermediate 1024 (bench/time_to_quality.py's BERT arm); Google's
  recipe: masked LM + next sentence on Google-format pairs (create_pretraining_data.py,
  dupe_factor 5, static 15 % masks), learning rate `--bert_learning_rate` (1e-4), linear decay,
  warm-up 1 %;
- "modernbert": ModernBERT's keys (pre-LN with final norm, no biases, GeGLU, RoPE θ 160,000 /
  10,000, window 128 with global every 3rd layer, ModernBERT's head), the same depth, width and
  heads, GeGLU width chosen so that the parameter count equals BERT's to 0.1 %; its recipe:
  masked LM only on packed records that keep documents apart (`--pack_sequences
  --document_ids`), 30 % dynamic masking, dropout 0, warmup-stable-decay at
  `--modernbert_learning_rate` (8e-4; warm-up 6 %, the last 20 % decayed).
Both: micro-batch 32, one tower, clipping at 1.0, Google's AdamWeightDecay, seed 12345.

Budget: each arm first runs `--calibrate_steps` updates (not counted) to learn its start-up
and its CPU seconds per update, sets its number of updates so that its schedule ends within
`--margin` of the budget, then trains in a fresh run_pretraining.py process that is stopped
with SIGTERM (a checkpoint written) if it reaches `--budget_cpu_seconds` of its own CPU time
(user + system, start-up and tracing included) first. Then `run_pretraining.py --do_eval` on the
held-out records gives the masked-LM loss and accuracy of the final checkpoint. The arms run
one after the other. `--write` puts the table into docs/benchmarks.md ("ModernBERT time to
quality").
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)
from time_to_quality import BERT, PREDS, SEQ, VOCAB, split_corpus  # noqa: E402

REPO = _common.REPO
MICRO_BATCH = 32
MODERNBERT_MASKING = 0.3


def bert_mlm_params(c):
    """Parameters of Google's BERT with its masked-LM head (no pooler, no next sentence)."""
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    embeddings = v * h + c["max_position_embeddings"] * h + c["type_vocab_size"] * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + c["num_hidden_layers"] * layer + (h * h + h) + 2 * h + v


def modernbert_mlm_params(c):
    """Parameters of a ModernBERT (keys of modernbert_config) with its masked-LM head: no biases,
    LayerNorms without beta, layer 0 without its attention norm, GeGLU (`intermediate_size` is
    the doubled input projection), a final norm, the head's dense + norm, the decoder's bias."""
    h, i2, v, n = c["hidden_size"], c["intermediate_size"], c["vocab_size"], \
        c["num_hidden_layers"]
    layers = n * (4 * h * h + h * i2 + (i2 // 2) * h + 2 * h) - h
    return v * h + h + layers + h + (h * h + h) + v


def modernbert_config(bert, glu_width):
    """ModernBERT's keys at BERT's depth, width and heads, GeGLU `glu_width` wide."""
    return {"vocab_size": bert["vocab_size"], "hidden_size": bert["hidden_size"],
            "num_hidden_layers": bert["num_hidden_layers"],
            "num_attention_heads": bert["num_attention_heads"],
            "intermediate_size": 2 * glu_width, "hidden_act": "gelu_exact",
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
            "max_position_embeddings": 8192, "type_vocab_size": 0,
            "initializer_range": bert["initializer_range"], "pre_layer_norm": True,
            "use_bias": False, "gated_ffn": True, "position_embedding_type": "rope",
            "rope_theta": 160000.0, "local_rope_theta": 10000.0,
            "local_attention_window": 128, "global_attention_every_n_layers": 3,
            "layer_norm_eps": 1e-5, "layer_norm_bias": False,
            "first_layer_attention_norm": False, "head_bias": False,
            "classifier_pooling": "cls"}


def matched_glu_width(bert):
    """The GeGLU width whose ModernBERT has the parameter count nearest BERT's."""
    target = bert_mlm_params(bert)
    return min(range(1, 4 * bert["intermediate_size"]),
               key=lambda w: abs(modernbert_mlm_params(modernbert_config(bert, w)) - target))


def _check(result, what):
    if result["returncode"] and not result["stopped"]:
        sys.exit(f"{what} failed:\n{result['stderr'][-3000:]}")
    return result


def make_records(work):
    """{"bert", "modernbert", "heldout"}: TFRecord paths, made by create_pretraining_data.py."""
    text, n_train, n_held = split_corpus(work)
    common = [f"--vocab_file={VOCAB}", "--do_lower_case=true", f"--max_seq_length={SEQ}",
              "--random_seed=12345"]
    jobs = {
        "bert": [f"--input_file={text['train']}", f"--max_predictions_per_seq={PREDS}",
                 "--dupe_factor=5"],
        "modernbert": [f"--input_file={text['train']}", "--pack_sequences", "--document_ids",
                       "--dynamic_masking", "--dupe_factor=1"],
        "heldout": [f"--input_file={text['heldout']}", f"--max_predictions_per_seq={PREDS}",
                    "--no_next_sentence", "--dupe_factor=1"],
    }
    records = {}
    for name, flags in jobs.items():
        records[name] = os.path.join(work, f"{name}.tfrecord")
        _check(_common.run_measured(
            [sys.executable, "create_pretraining_data.py", f"--output_file={records[name]}",
             *common, *flags]), f"create_pretraining_data.py ({name})")
    return records, {"train": n_train, "heldout": n_held}


def arm_flags(name, args, config, records, steps):
    """run_pretraining.py's flags for arm `name` training `steps` updates."""
    flags = [f"--bert_config_file={config}", f"--max_seq_length={SEQ}",
             f"--train_batch_size={MICRO_BATCH}", "--n_gpus=1", "--random_seed=12345",
             f"--num_train_steps={steps}", "--log_every_n_steps=1",
             f"--save_checkpoints_steps={10 ** 9}", "--clip_norm=1.0"]
    if name == "bert":
        return flags + [f"--input_file={records['bert']}", f"--max_predictions_per_seq={PREDS}",
                        f"--learning_rate={args.bert_learning_rate}", "--lr_schedule=linear",
                        f"--num_warmup_steps={max(1, round(0.01 * steps))}"]
    return flags + [f"--input_file={records['modernbert']}", "--no_next_sentence",
                    f"--max_predictions_per_seq={round(MODERNBERT_MASKING * SEQ) + 1}",
                    "--dynamic_masking", f"--masked_lm_prob={MODERNBERT_MASKING}",
                    f"--vocab_file={VOCAB}", f"--learning_rate={args.modernbert_learning_rate}",
                    "--lr_schedule=wsd", f"--num_warmup_steps={max(1, round(0.06 * steps))}",
                    f"--num_decay_steps={max(1, round(0.2 * steps))}"]


def calibrate(name, args, config, records, work):
    """(start-up CPU seconds, CPU seconds per update) from a short run of the arm."""
    n = args.calibrate_steps
    out = os.path.join(work, f"{name}_calibrate")
    result = _check(_common.run_measured(
        [sys.executable, "run_pretraining.py", "--do_train", f"--output_dir={out}",
         *arm_flags(name, args, config, records, n)],
        marks=[(i, rf"step {i}/{n}:") for i in (1, 2, n)]), f"{name} calibration")
    shutil.rmtree(out, ignore_errors=True)
    marks = result["marks"]
    if len(marks) < 3:
        sys.exit(f"{name} calibration: no step lines in\n{result['stderr'][-2000:]}")
    per_step = (marks[n] - marks[2]) / (n - 2)
    return marks[1] - per_step, per_step


def race_arm(name, args, config, records, work):
    """Trains arm `name` within the budget, evaluates it; its figures."""
    startup, per_step = calibrate(name, args, config, records, work)
    steps = max(1, int((args.margin * args.budget_cpu_seconds - startup) / per_step))
    print(f"[{name}] start-up {startup:.1f} CPU s, {per_step:.3f} CPU s per update: "
          f"{steps} updates", file=sys.stderr, flush=True)
    out = os.path.join(work, name)
    trained = _check(_common.run_measured(
        [sys.executable, "run_pretraining.py", "--do_train", f"--output_dir={out}",
         *arm_flags(name, args, config, records, steps)],
        cpu_budget=args.budget_cpu_seconds), f"{name} training")
    _check(_common.run_measured(
        [sys.executable, "run_pretraining.py", "--do_eval", f"--output_dir={out}",
         f"--bert_config_file={config}", f"--input_file={records['heldout']}",
         f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}",
         "--eval_batch_size=64", f"--max_eval_steps={10 ** 6}"]
        + (["--no_next_sentence"] if name == "modernbert" else [])), f"{name} evaluation")
    with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
        result = dict(line.strip().split(" = ") for line in f if " = " in line)
    return {"planned_steps": steps, "steps": int(result["global_step"]),
            "cpu_seconds": trained["cpu_seconds"], "stopped_by_budget": trained["stopped"],
            "startup_cpu": startup, "cpu_per_step": per_step,
            "masked_lm_loss": float(result["masked_lm_loss"]),
            "masked_lm_accuracy": float(result["masked_lm_accuracy"])}


def report(results, args, counts, chapters, started):
    command = "python bench/modernbert_time_to_quality.py " + " ".join(sys.argv[1:])
    rows = ["| arm | parameters | updates (planned) | sequences | CPU s (training process) | "
            "stopped by the budget | held-out masked-LM loss | accuracy |",
            "|---|---:|---:|---:|---:|---|---:|---:|"]
    for name, r in results.items():
        rows.append(f"| {name} | {counts[name]:,} | {r['steps']:,} ({r['planned_steps']:,}) | "
                    f"{r['steps'] * MICRO_BATCH:,} | {r['cpu_seconds']:.0f} | "
                    f"{'yes' if r['stopped_by_budget'] else 'no'} | "
                    f"{r['masked_lm_loss']:.3f} | {100 * r['masked_lm_accuracy']:.1f}% |")
    lines = ["## ModernBERT time to quality: held-out masked-LM loss within a CPU budget", "",
             f"{started}, `{command}`. Machine: {_common.machine()}.", "",
             f"Budget: {args.budget_cpu_seconds:g} CPU seconds (user + system) of each arm's "
             f"run_pretraining.py process, start-up and tracing included. Data: the KJV "
             f"split of the time-to-quality race ({chapters['train']} chapters for training, "
             f"{chapters['heldout']} held out), uncased WordPiece for both, sequences of {SEQ}; "
             f"held-out masked-LM loss over the same 15 % masks. Recipes (micro-batch "
             f"{MICRO_BATCH}, clipping 1.0, Google's AdamWeightDecay): BERT post-LN, dropout "
             f"0.1, masked LM + next sentence on Google-format pairs, static 15 % masks, lr "
             f"{args.bert_learning_rate:g} linear (warm-up 1 %); ModernBERT pre-LN, RoPE, "
             f"GeGLU, window 128 / global every 3rd layer, dropout 0, masked LM only on packed "
             f"records keeping documents apart, 30 % dynamic masks, lr "
             f"{args.modernbert_learning_rate:g} warmup-stable-decay (warm-up 6 %, the last 20 "
             f"% decayed); the same depth (4), width (256) and heads (4), ModernBERT's GeGLU "
             f"width set to equal BERT's parameter count.", "", *rows, ""]
    if len(results) == 2:
        b, m = results["bert"]["masked_lm_loss"], results["modernbert"]["masked_lm_loss"]
        winner = "ModernBERT" if m < b else "BERT"
        lines.append(f"{winner} wins by {abs(b - m):.3f} nats of held-out masked-LM loss "
                     f"({m:.3f} vs {b:.3f}, perplexity {math.exp(m):.0f} vs "
                     f"{math.exp(b):.0f}).")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget_cpu_seconds", type=float, default=2400.0)
    parser.add_argument("--calibrate_steps", type=int, default=8)
    parser.add_argument("--margin", type=float, default=0.97,
                        help="the planned updates fill this fraction of the budget")
    parser.add_argument("--bert_learning_rate", type=float, default=1e-4)
    parser.add_argument("--modernbert_learning_rate", type=float, default=8e-4)
    parser.add_argument("--arms", default="bert,modernbert")
    parser.add_argument("--write", action="store_true")
    _common.add_max_isa_flag(parser)
    args = parser.parse_args()
    if args.calibrate_steps < 3:
        parser.error("--calibrate_steps must be at least 3 (the first update traces)")
    _common.cap_isa(args.max_isa)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    glu = matched_glu_width(BERT)
    configs = {"bert": BERT, "modernbert": modernbert_config(BERT, glu)}
    counts = {"bert": bert_mlm_params(BERT),
              "modernbert": modernbert_mlm_params(configs["modernbert"])}
    results = {}
    with tempfile.TemporaryDirectory(prefix="mb_ttq_") as work:
        records, chapters = make_records(work)
        for name in args.arms.split(","):
            config = os.path.join(work, f"{name}_config.json")
            with open(config, "w", encoding="utf-8") as f:
                json.dump(configs[name], f)
            results[name] = race_arm(name, args, config, records, work)
            print(f"[{name}] {json.dumps(results[name])}", file=sys.stderr, flush=True)
            counts[name] = checkpoint_params(os.path.join(work, name), counts[name])
    text = report(results, args, counts, chapters, started)
    print(text)
    if args.write:
        _common.write_section("ModernBERT time to quality", text)


def checkpoint_params(run_dir, expected):
    """The masked-LM model's parameter count read from the run's checkpoint (slots, step,
    pooler and next-sentence head left out); warns if it is not the count planned."""
    code = ("import sys, tensorflow as tf; print(sum(int(tf.TensorShape(s).num_elements()) "
            "for n, s in tf.train.list_variables(sys.argv[1]) if not (n.endswith(('adam_m', "
            "'adam_v')) or n == 'global_step' or n.startswith(('bert/pooler', "
            "'cls/seq_relationship')))))")
    out = subprocess.run([sys.executable, "-c", code, run_dir], check=True, text=True,
                         capture_output=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    counted = int(out.stdout.strip().splitlines()[-1])
    if counted != expected:
        print(f"WARNING: {run_dir}: {counted:,} parameters in the checkpoint, {expected:,} "
              f"planned", file=sys.stderr)
    return counted


if __name__ == "__main__":
    main()
