"""TF1 session inference through `python -m bert_mgpu.compat` vs Google's own modules.

Run by hand on an idle machine (the figures go into docs/benchmarks.md by hand):

    .venv/bin/python bench/compat_session.py --rounds=3
    .venv/bin/python bench/compat_session.py --config='{"hidden_size": 128, ...}' --seq_length=64

Each round runs bench/compat_session_user.py twice, in fresh processes, one after the other:
with the runner (the project's model in the user's TF1 graph) and with Google's modules in the
oracle venv (tests/oracles/google_user_file.py: Google's repository at eedf571, tf-keras behind
`tf.layers.dense`). Both build the same BERT (BERT-Base by default, random weights) on
placeholders and time `sess.run` of the pooled output on one batch; each prints the median
milliseconds per call. Prints one line per arm and round, and the ratio of the medians.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from _common import REPO, machine, wait_for_quiet

USER = os.path.join(REPO, "bench", "compat_session_user.py")
ORACLE_RUNNER = os.path.join(REPO, "tests", "oracles", "google_user_file.py")
BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
             "num_attention_heads": 12, "intermediate_size": 3072}


def _google_dir():
    """material/oracles/google_bert_eedf571 next to the checkout, else the workplace's copy."""
    for material in (os.environ.get("BERT_MGPU_MATERIAL"),
                     os.path.join(os.path.dirname(REPO), "shared", "material"),
                     "/work/shared/material"):
        path = os.path.join(material or "", "oracles", "google_bert_eedf571")
        if material and os.path.isdir(path):
            return path
    return None


def _arm_command(arm, args):
    user_args = [f"--config_json={args.config}", f"--batch_size={args.batch_size}",
                 f"--seq_length={args.seq_length}", f"--calls={args.calls}"]
    if arm == "compat":
        return [sys.executable, "-m", "bert_mgpu.compat", USER] + user_args
    return [args.oracle_python, ORACLE_RUNNER, args.google_dir, USER] + user_args


def _run(arm, args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=REPO)
    proc = subprocess.run(_arm_command(arm, args), capture_output=True, text=True, env=env,
                          cwd=REPO)
    found = re.search(r"ms_per_call=([\d.]+)", proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"compat_session: the {arm} arm failed:\n{proc.stderr[-3000:]}")
    return float(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=json.dumps(BERT_BASE), help="bert_config (JSON)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--oracle_python", default=os.path.join(REPO, ".venv-oracle", "bin",
                                                                "python"))
    parser.add_argument("--google_dir", default=_google_dir(),
                        help="Google's repository (material/oracles/google_bert_eedf571)")
    parser.add_argument("--max_load", type=float, default=1.0,
                        help="wait until the 1-minute load average is below this")
    args = parser.parse_args()
    if not args.google_dir or not os.path.isdir(args.google_dir):
        sys.exit("compat_session: --google_dir: Google's repository not found")
    print(machine())
    times = {"compat": [], "google": []}
    for round_index in range(args.rounds):
        for arm in times:
            wait_for_quiet(args.max_load, 600, label="compat_session")
            times[arm].append(_run(arm, args))
            print(f"round {round_index} {arm}: {times[arm][-1]:.2f} ms per call")
    ratio = statistics.median(times["google"]) / statistics.median(times["compat"])
    print(f"median ms per call: compat {statistics.median(times['compat']):.2f}, Google's "
          f"modules {statistics.median(times['google']):.2f}; compat is {ratio:.3f}x as fast")


if __name__ == "__main__":
    main()
