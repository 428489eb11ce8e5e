"""ModernBERT at long context: local (sliding-window) layers against every layer global.

Usage (an idle machine; each arm runs in its own process so peak memory is its own):
  python bench/modernbert_long_context.py --lengths=1024,4096,8192 [--layers=22 --hidden=768
    --heads=12 --intermediate=2304 --steps=3] [--write]

For each length and arm ("local": ModernBERT's window 128, global every 3rd layer; "global":
the same model with every layer global) it runs forward + backward of a classification-style
loss (batch 1, dropout 0.1, ModernBERT-base shape by default) and reports the median step time and
the peak resident memory above the process's memory after the model is built (activations and
gradients: the weights are the same in both arms). --write puts the table into
docs/benchmarks.md ("ModernBERT at long context"). The Hugging Face peer
(ModernBertForSequenceClassification, same weights and batch, issue 50 section 4) is not part of
this script yet.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (bench/)

sys.path.insert(1, _common.REPO)


def _config(args, every):
    return {"vocab_size": 50368, "hidden_size": args.hidden, "num_hidden_layers": args.layers,
            "num_attention_heads": args.heads, "intermediate_size": 2 * args.intermediate,
            "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 8192,
            "type_vocab_size": 0, "pre_layer_norm": True, "use_bias": False, "gated_ffn": True,
            "position_embedding_type": "rope", "rope_theta": 160000.0,
            "local_rope_theta": 10000.0, "local_attention_window": 128,
            "global_attention_every_n_layers": every, "layer_norm_eps": 1e-5,
            "layer_norm_bias": False, "first_layer_attention_norm": False, "head_bias": False,
            "classifier_pooling": "cls"}


def arm(args):
    """One arm in this process: prints {"seconds": median step, "peak_mib": above baseline}."""
    import numpy as np
    import tensorflow as tf

    from bert_mgpu.model import modeling
    from bert_mgpu.model.bert_config import BertConfig

    config = BertConfig.from_dict(_config(args, 3 if args.arm == "local" else 1))
    model = modeling.BertModel(config)
    variables = list(model.named_variables().values())
    ids = tf.constant(np.random.default_rng(0).integers(5, 50000, [1, args.length]), tf.int32)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(ids, training=True).pooled_output)
        return tape.gradient(loss, variables)

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(args.steps + 1):  # the first run traces
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": statistics.median(times[1:]),
                      "peak_mib": (peak - baseline) / 1024}))


def main():
    parser = argparse.ArgumentParser()
    for name, default in (("lengths", "1024,4096,8192"), ("layers", 22), ("hidden", 768),
                          ("heads", 12), ("intermediate", 1152), ("steps", 3)):
        parser.add_argument(f"--{name}", default=default, type=type(default))
    parser.add_argument("--arm", choices=("local", "global"))
    parser.add_argument("--length", type=int)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.arm:
        return arm(args)
    rows = ["| length | local s/step | global s/step | local MiB | global MiB | memory ratio |",
            "|---|---|---|---|---|---|"]
    for length in map(int, args.lengths.split(",")):
        result = {}
        for name in ("local", "global"):
            cmd = [sys.executable, __file__, f"--arm={name}", f"--length={length}"] + [
                f"--{k}={getattr(args, k)}" for k in ("layers", "hidden", "heads",
                                                      "intermediate", "steps")]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            result[name] = json.loads(out.strip().splitlines()[-1])
        local, full = result["local"], result["global"]
        rows.append(f"| {length} | {local['seconds']:.2f} | {full['seconds']:.2f} | "
                    f"{local['peak_mib']:.0f} | {full['peak_mib']:.0f} | "
                    f"{local['peak_mib'] / max(full['peak_mib'], 1e-9):.2f} |")
    text = f"Machine: {_common.machine()}\n\n" + "\n".join(rows) + "\n"
    print(text)
    if args.write:
        _common.write_section("ModernBERT at long context", text)


if __name__ == "__main__":
    main()
