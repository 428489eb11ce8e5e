"""A/B of bert_mgpu/model/modeling.py between a commit and the working tree, in one process.

Run by hand on an idle machine (about 3 minutes on 2 cores):

    .venv/bin/python bench/ab_modeling.py --base main

Both versions of modeling.py are imported side by side (the base's text comes from `git show
BASE:bert_mgpu/model/modeling.py`; the rest of the package is the working tree's), built with the
same config and the same weights, and timed alternately call by call, so a slow phase of the host
hits both alike. Two workloads:

  train:   bench/pretraining.py's encoder (L=4 H=256 A=4 I=1024), batch 32 x 128, dropout 0.1,
           forward + backward of a loss on the sequence output and the pooled output;
  serve:   all-MiniLM-L6-v2's shape (L=6 H=384 A=12 I=1536, erf GELU), batch 32 of real
           lengths (Pang & Lee-like: 8..60 tokens, mean ~27) padded to the longest,
           inference as the exported classifier runs it (drop_padding, first_token_only).

Prints per workload the median wall and CPU (process_time) milliseconds per call of each side
and new / base; the outputs of both sides are compared first (they must agree to 1e-5; with
--masks_differ, for a change that draws other dropout masks, only serve's are).
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def load_modeling(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workloads(tf, config_cls, modules):
    """{name: {side: callable}} with identical weights on both sides."""
    rng = tf.random.Generator.from_seed(0)
    out = {}
    train_cfg = config_cls(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                           num_attention_heads=4, intermediate_size=1024,
                           max_position_embeddings=512)
    serve_cfg = config_cls(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                           num_attention_heads=12, intermediate_size=1536,
                           max_position_embeddings=512, hidden_act="gelu_exact")
    for name, cfg, batch, seq in (("train", train_cfg, 32, 128), ("serve", serve_cfg, 32, 64)):
        models = {side: m.BertModel(cfg) for side, m in modules.items()}
        base_vars = models["base"].named_variables()
        for var_name, var in models["new"].named_variables().items():
            var.assign(base_vars[var_name])
        ids = rng.uniform([batch, seq], 1, cfg.vocab_size, dtype=tf.int32)
        if name == "train":
            mask = tf.ones([batch, seq], tf.int32)
        else:
            lengths = tf.cast(8 + tf.round(tf.abs(rng.normal([batch], 19.0, 12.0))), tf.int32)
            lengths = tf.minimum(lengths, seq)
            mask = tf.sequence_mask(lengths, seq, dtype=tf.int32)
            longest = int(tf.reduce_max(lengths))
            ids, mask = ids[:, :longest], mask[:, :longest]
        segments = tf.zeros_like(ids)
        out[name] = {side: make_call(tf, modules[side], model, name, ids, mask, segments)
                     for side, model in models.items()}
    return out


def dropout_stream(module, *args):
    """The towers' position-keyed dropout for `module` (a modeling.py of either side)."""
    if hasattr(module, "dropout_stream"):  # a side from before model/execution.py
        return module.dropout_stream(*args)
    from bert_mgpu.model import execution
    return execution.entered(stream=execution.DropoutStream(*args))


def make_call(tf, module, model, name, ids, mask, segments):
    if name == "train":
        variables = list(model.named_variables().values())

        @tf.function
        def step(seed):
            with dropout_stream(module, 1, seed, tf.constant(0, tf.int64),
                                tf.constant(32, tf.int64)):
                with tf.GradientTape() as tape:
                    out = model(ids, mask, segments, training=True)
                    loss = (tf.reduce_mean(tf.square(out.sequence_output))
                            + tf.reduce_mean(out.pooled_output))
            grads = tape.gradient(loss, variables)
            return loss, tf.add_n([tf.reduce_sum(g) for g in grads])

        return lambda i: step(tf.constant(i, tf.int64))

    @tf.function
    def serve():
        out = model(ids, mask, segments, training=False, first_token_only=True,
                    drop_padding=True)
        return out.pooled_output, tf.constant(0.0)

    return lambda i: serve()


def base_modeling(base):
    """The text of modeling.py at commit `base` (bert_mgpu/model/ since the package layout of
    issue 29, bert_mgpu/ before it)."""
    for path in ("bert_mgpu/model/modeling.py", "bert_mgpu/modeling.py"):
        shown = subprocess.run(["git", "show", f"{base}:{path}"], cwd=REPO,
                               capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout
    raise SystemExit(f"no modeling.py at {base}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=3, help="calls per side per round")
    parser.add_argument("--masks_differ", action="store_true",
                        help="the change draws other dropout masks: compare only the serve "
                             "workload's outputs (train's differ by design)")
    args = parser.parse_args()

    base_text = base_modeling(args.base)
    tmp = tempfile.NamedTemporaryFile("w", suffix="_modeling_base.py", delete=False)
    tmp.write(base_text)
    tmp.close()
    import tensorflow as tf

    from bert_mgpu.model.bert_config import BertConfig
    modules = {"base": load_modeling(tmp.name, "modeling_base"),
               "new": load_modeling(os.path.join(REPO, "bert_mgpu", "model", "modeling.py"),
                                    "modeling_new")}
    for name, calls in workloads(tf, BertConfig, modules).items():
        first = {side: [x.numpy() for x in call(0)] for side, call in calls.items()}
        if not (args.masks_differ and name == "train"):
            for a, b in zip(first["base"], first["new"]):
                diff = float(abs(a - b).max())
                scale = max(1.0, float(abs(a).max()))
                if diff > 1e-5 * scale:
                    raise SystemExit(f"{name}: base and new disagree (max abs diff {diff})")
        times = {side: {"wall": [], "cpu": []} for side in calls}
        for r in range(args.rounds):
            order = list(calls) if r % 2 == 0 else list(calls)[::-1]
            for side in order:
                w0, c0 = time.perf_counter(), time.process_time()
                for i in range(args.calls):
                    res = calls[side](r * args.calls + i + 1)
                res[1].numpy()
                times[side]["wall"].append((time.perf_counter() - w0) / args.calls * 1e3)
                times[side]["cpu"].append((time.process_time() - c0) / args.calls * 1e3)
        med = {side: {k: statistics.median(v) for k, v in t.items()}
               for side, t in times.items()}
        print(f"{name}: wall ms base {med['base']['wall']:.2f} new {med['new']['wall']:.2f} "
              f"(new/base {med['new']['wall'] / med['base']['wall']:.3f}); cpu ms base "
              f"{med['base']['cpu']:.2f} new {med['new']['cpu']:.2f} "
              f"(new/base {med['new']['cpu'] / med['base']['cpu']:.3f})", flush=True)
    os.unlink(tmp.name)


if __name__ == "__main__":
    main()
