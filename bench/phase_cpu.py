"""CPU seconds per phase of a whole fine-tuning process: where the time beside the updates goes.

Run by hand with the project's venv (a few minutes per arm and round on 2 cores):

    .venv/bin/python bench/phase_cpu.py --max_isa avx2 --arm "tree="
    .venv/bin/python bench/phase_cpu.py --max_isa avx2 --arm "base=@e954d05" --arm "tree=" \\
        --rounds 2

One run of an arm is bench/finetune_minilm.py's command of ours (all-MiniLM-L6-v2 converted
once with `convert_hf_checkpoint.py --gelu=exact`, Pang & Lee polarity, seq 64, 2 towers x 16,
`--pad_to_longest`, train, evaluate the dev set, predict the test set, batches of 64) for
`--updates` updates, with a wrapper in the process that charges its own CPU time (user + system
of every thread, `os.times`) and wall time to the phase running: the interpreter, importing
TensorFlow, importing the package, the script's flags and checks, `start_job` (devices), the
features (tokenizing, writing the TFRecords), the dropout layout (a read of the train file),
building the trainer (model, optimizer), restoring the checkpoint and building the input
pipeline, update 1 split into its trace (`get_concrete_function`: the Python of the towers,
clipping and optimizer) and its first run (Grappler's optimisation, the optimizer's XLA
compilation, the update itself), updates 2..N, reading the input batches, the checkpoint
written at the end, evaluation and prediction (each split into its trace, its first batch and
the other batches), and what is left (logging, summaries, exit). Each phase's time is its own
(nested phases are subtracted). It also counts the traces of each step function (retracing
would show there). Arms are `NAME=SETTINGS` as in bench/update_cpu.py (`VAR=VALUE`,
`--flag=value`, `@COMMIT`); medians over `--rounds`. Prints Markdown; nothing is written.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from _common import add_max_isa_flag, cap_isa, convert_minilm, machine  # noqa: E402
from update_cpu import DEFAULT_DATA, ORACLE_PYTHON, arm_checkouts, parse_arm  # noqa: E402

# Runs in the arm's process: phases charged by wrapping the job's functions, then the script.
_WRAPPER = r"""
import json, os, runpy, sys, time
sys.path.insert(0, os.getcwd())
out = sys.argv[1]
sys.argv = sys.argv[2:]
spent, stack = {}, ["interpreter"]
last = [os.times(), time.perf_counter()]

def charge():
    t, w = os.times(), time.perf_counter()
    cpu = t.user - last[0].user + t.system - last[0].system
    old = spent.setdefault(stack[-1], [0.0, 0.0])
    old[0] += cpu
    old[1] += w - last[1]
    last[0], last[1] = t, w

def enter(name):
    charge()
    stack.append(name)

def leave():
    charge()
    stack.pop()

def phased(owner, attr, name):
    fn = getattr(owner, attr)
    calls = [0]
    def wrapped(*a, **k):
        calls[0] += 1
        enter(name(calls[0]) if callable(name) else name)
        try:
            return fn(*a, **k)
        finally:
            leave()
    setattr(owner, attr, wrapped)

from bert_mgpu import scripts
scripts.tensorflow_cpu_defaults()
scripts.quiet_tensorflow_start()
enter("import TensorFlow")
import tensorflow as tf
leave()
enter("import the package")
from bert_mgpu.engine import training
from bert_mgpu.tasks import classifier, multitask
leave()
stack[-1] = "script: flags, checks, summary, exit"
phased(classifier, "start_classifier_job", "start_job (devices)")
phased(classifier, "classifier_inputs", "features (tokenize, write)")
phased(classifier, "with_dropout_layout", "dropout layout (train file)")
phased(training.Trainer, "__init__", "trainer built (model, optimizer)")
phased(training.Trainer, "train", "training loop: other (logs, summaries, syncs)")
phased(classifier, "eval_input", "eval/predict input (sorted by length)")
phased(training.ResumeState, "resume", "checkpoint restore, input pipeline")
phased(training.ResumeState, "save", "checkpoint write")
phased(training.MicroBatches, "next_batch", "input batches")
phased(training.Trainer, "_run_step",
       lambda n: "update 1" if n == 1 else "updates 2..N")
phased(training.Trainer, "evaluate", "evaluation: other batches")
phased(training.Trainer, "predict", "prediction: other batches")
first = {}
call = training._LengthPolymorphic.call

def first_calls(self, fn, task, features, *args, **kwargs):
    if id(fn) in first:
        return call(self, fn, task, features, *args, **kwargs)
    where = stack[-1].split(":")[0]
    first[id(fn)] = (where, fn)
    length = task.sequence_length(features) if self.enabled else None
    if length is not None:
        enter(f"{where}: trace")
        fn.get_concrete_function(training._relaxed_spec(features, length, **kwargs), *args)
        leave()
    enter(f"{where}: first run")
    try:
        return fn(features, *args)
    finally:
        leave()

training._LengthPolymorphic.call = first_calls
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
finally:
    charge()
    traces = {f"{where}: {getattr(fn, '__name__', '?')}": fn.experimental_get_tracing_count()
              for where, fn in first.values()}
    with open(out, "w") as f:
        json.dump({"phases": spent, "traces": traces}, f)
"""


def run_arm(repo, arm, converted, args, out):
    """{"phases": {name: [cpu s, wall s]}, "traces": {function: count}} of one run."""
    _, env, flags, _ = arm
    cmd = [sys.executable, "-c", _WRAPPER, out + ".json", "run_classifier_mgpu.py",
           "--task_name=tsv", "--do_train=true", "--do_eval=true", "--do_predict=true",
           f"--data_dir={args.data_dir}", f"--vocab_file={converted}/vocab.txt",
           f"--bert_config_file={converted}/bert_config.json",
           f"--init_checkpoint={converted}/bert_model.ckpt", "--do_lower_case=true",
           "--max_seq_length=64", "--n_gpus=2", "--train_batch_size=16", "--learning_rate=5e-5",
           f"--num_train_epochs={args.updates * 32 / 3200:.4f}", "--warmup_proportion=0.1",
           "--eval_batch_size=64", "--predict_batch_size=64", "--random_seed=12345",
           "--log_every_n_steps=10", "--save_checkpoints_steps=100000",
           f"--output_dir={out}", "--pad_to_longest=true", "--group_by_length=false",
           "--precision=fp32", *flags]
    with open(out + ".log", "w") as log:  # kept: e.g. TF_CPP_VMODULE's lines of an arm
        proc = subprocess.run(cmd, cwd=repo, stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, **dict({"TF_CPP_MIN_LOG_LEVEL": "2"}, **env)))
    if proc.returncode or not os.path.exists(out + ".json"):
        with open(out + ".log") as log:
            raise RuntimeError(f"arm {arm[0]}: run_classifier_mgpu.py failed:\n"
                               f"{log.read()[-3000:]}")
    with open(out + ".json") as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=SETTINGS")
    parser.add_argument("--data_dir", default=DEFAULT_DATA)
    parser.add_argument("--updates", type=int, default=30, help="updates of each run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--converted", help="a folder of an earlier conversion to reuse")
    add_max_isa_flag(parser)
    args = parser.parse_args()
    cap_isa(args.max_isa)
    arms = [parse_arm(text) for text in args.arm]
    work = tempfile.mkdtemp(prefix="phase_cpu_")
    with arm_checkouts(arms, work) as repos:
        converted = args.converted or convert_minilm(work, ORACLE_PYTHON)
        results = {arm[0]: [] for arm in arms}
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else arms[::-1]:
                out = os.path.join(work, f"{arm[0].replace(' ', '_')}_{r}")
                results[arm[0]].append(run_arm(repos.get(arm[3], REPO), arm, converted, args,
                                               out))
                total = sum(c for c, _ in results[arm[0]][-1]["phases"].values())
                print(f"round {r} {arm[0]}: {total:.1f} CPU s (load "
                      f"{os.getloadavg()[0]:.1f}; log {out}.log)", file=sys.stderr)
        report(args, arms, results)


def report(args, arms, results):
    """Markdown: CPU (and wall) seconds per phase, medians over the rounds, one column per arm."""
    print(f"Command: `.venv/bin/python bench/phase_cpu.py "
          f"{' '.join(repr('--arm=' + a) for a in args.arm)} --updates {args.updates} "
          f"--rounds {args.rounds}{' --max_isa ' + args.max_isa if args.max_isa else ''}`. "
          f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end.\n")
    names = []
    for name, *_ in arms:
        for run in results[name]:
            names += [p for p in run["phases"] if p not in names]

    def cell(name, phase, i):
        values = [run["phases"].get(phase, [0.0, 0.0])[i] for run in results[name]]
        return statistics.median(values)

    print("| phase | " + " | ".join(f"{n} CPU s (wall s)" for n, *_ in arms) + " |")
    print("|---|" + "---:|" * len(arms))
    for phase in names + ["total"]:
        cells = []
        for name, *_ in arms:
            if phase == "total":
                cpu = statistics.median(sum(c for c, _ in r["phases"].values())
                                        for r in results[name])
                wall = statistics.median(sum(w for _, w in r["phases"].values())
                                         for r in results[name])
            else:
                cpu, wall = cell(name, phase, 0), cell(name, phase, 1)
            cells.append(f"{cpu:.2f} ({wall:.2f})")
        print(f"| {phase} | " + " | ".join(cells) + " |")
    for name, *_ in arms:
        print(f"\n{name}: traces per step function: {results[name][-1]['traces']}")


if __name__ == "__main__":
    main()
