"""Masked-LM loss: `heads.vocabulary_cross_entropy` against TensorFlow's fused sparse op.

Run by hand on an idle machine (about 4 minutes on 2 cores):

    .venv/bin/python bench/mlm_loss.py

Two measurements, each alternating the two sides call by call in one process, so a slow phase
of the host hits both alike:

  loss:    forward + backward of the loss alone at bench/pretraining.py's masked positions
           (32 examples x 20 predictions = 640 rows of 30522 logits);
  update:  bench/pretraining.py's whole training update (L=4 H=256 A=4 I=1024, batch 32 x 128,
           dropout 0.1, fp32, `training.Trainer.step`: towers, clipping, AdamWeightDecay), two
           trainers with the same weights whose masked-LM head was traced with either loss.
           Their first updates must give the same loss (to 1e-6, printed).

Prints the median milliseconds of each side and new / old.
"""

import argparse
import glob
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU: the figures are this machine's
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "bench"))
import pretraining as bench  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_mgpu.configs.base import TrainConfig  # noqa: E402
from bert_mgpu.data import features, input_pipeline  # noqa: E402
from bert_mgpu.engine import towers, training  # noqa: E402
from bert_mgpu.model import heads  # noqa: E402
from bert_mgpu.model.bert_config import BertConfig  # noqa: E402
from bert_mgpu.tasks.pretraining import BertPretrainer  # noqa: E402

BATCH = 32
NEW = heads.vocabulary_cross_entropy


def fused(products, bias, label_ids):
    logits = tf.cast(tf.nn.bias_add(products, tf.cast(bias, products.dtype)), tf.float32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label_ids, logits=logits)


SIDES = {"old": fused, "new": NEW}


def alternate(calls, repeats):
    """{side: median seconds} of `calls[side]()`, the order rotating each repeat."""
    times = {side: [] for side in calls}
    sides = list(calls)
    for i in range(repeats):
        for side in sides[i % 2:] + sides[:i % 2]:
            start = time.perf_counter()
            calls[side]()
            times[side].append(time.perf_counter() - start)
    return {side: statistics.median(t[2:]) for side, t in times.items()}


def report(name, medians):
    print(f"{name}: old {1e3 * medians['old']:.1f} ms, new {1e3 * medians['new']:.1f} ms, "
          f"new / old {medians['new'] / medians['old']:.3f}x", flush=True)


def loss_alone(repeats):
    rows = BATCH * bench.PREDS
    vocab = bench.BERT_CONFIG["vocab_size"]
    logits = tf.random.stateless_normal([rows, vocab], seed=[1, 2]) * 3.0
    bias = tf.random.stateless_normal([vocab], seed=[5, 6])
    labels = tf.random.stateless_uniform([rows], seed=[3, 4], maxval=vocab, dtype=tf.int32)

    def make(loss_fn):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch([logits, bias])
                loss = tf.reduce_mean(loss_fn(logits, bias, labels))
            return [loss] + tape.gradient(loss, [logits, bias])
        return lambda: [t.numpy() for t in step()]

    calls = {side: make(fn) for side, fn in SIDES.items()}
    outs = {side: call() for side, call in calls.items()}
    tf.debugging.assert_near(outs["old"][1], outs["new"][1], atol=1e-7)
    tf.debugging.assert_near(outs["old"][2], outs["new"][2], atol=1e-6)
    report("loss forward + backward [640, 30522]", alternate(calls, repeats))


def whole_update(repeats, workdir):
    os.makedirs(workdir, exist_ok=True)
    if not glob.glob(os.path.join(workdir, "records-*.tfrecord")):
        bench.write_data(workdir)
    paths = sorted(glob.glob(os.path.join(workdir, "records-*.tfrecord")))
    dataset = input_pipeline.record_dataset(
        paths, features.pretraining_shapes(bench.SEQ, bench.PREDS), BATCH, True, seed=1)
    batches = [b for _, b in zip(range(8), dataset)]
    devices = towers.setup_devices(1)
    trainers, first_losses = {}, {}
    for side, loss_fn in SIDES.items():
        heads.vocabulary_cross_entropy = loss_fn  # looked up when the head is traced
        try:
            tf.random.set_seed(0)
            config = TrainConfig(output_dir=os.path.join(workdir, side), train_batch_size=BATCH,
                                 num_train_steps=1000, num_warmup_steps=10, learning_rate=1e-4,
                                 save_checkpoints_steps=10**9, log_every_n_steps=10**9)
            task = BertPretrainer(BertConfig.from_dict(bench.BERT_CONFIG),
                                        compute_dtype=tf.float32)
            trainer = training.Trainer(task, config, devices)
            if trainers:
                for name, var in trainer.variables.items():
                    var.assign(trainers["old"].variables[name])
            first_losses[side] = float(trainer.step(batches[0])["loss"])
            print(f"{side}: first update's loss {first_losses[side]:.7f}", flush=True)
            trainers[side] = trainer
        finally:
            heads.vocabulary_cross_entropy = NEW
    if abs(first_losses["new"] - first_losses["old"]) > 1e-6:
        raise SystemExit(f"the two losses disagree: {first_losses}")
    count = iter(range(10**9))

    def step(trainer):
        return lambda: float(trainer.step(batches[1 + next(count) % 7])["loss"])

    report("training update, n_gpus=1", alternate(
        {side: step(t) for side, t in trainers.items()}, repeats))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loss_repeats", type=int, default=40)
    parser.add_argument("--update_repeats", type=int, default=40)
    parser.add_argument("--workdir", default="/tmp/bert_mgpu_mlm_loss")
    args = parser.parse_args()
    loss_alone(args.loss_repeats)
    whole_update(args.update_repeats, args.workdir)


if __name__ == "__main__":
    main()
