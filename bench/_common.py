"""What every benchmark in bench/ shares: the machine line, the load checks, docs/benchmarks.md.

Standard library only: the peers' scripts import it too, from the oracle virtualenv (a script's
own folder, bench/, is first on its sys.path).
"""

import os
import platform
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "benchmarks.md")


def machine():
    """One line: CPUs, model, RAM, kernel and Python (the "Machine:" line of every section)."""
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
            f"Linux {platform.release()}, Python {platform.python_version()}")


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
