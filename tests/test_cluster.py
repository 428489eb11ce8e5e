"""Multi-worker training on TensorFlow's collectives, with real worker processes on 127.0.0.1.

2 workers x 1 tower x 4 == 1 worker x 2 towers x 4 == 1 worker x 1 tower x 8 (same init, dropout
0.1: masks are keyed by the example's position in the global batch, and the workers together read
exactly one process's global batches: one file and Google's shuffle buffer for pretraining, the
classifier's default epoch permutations); input shards are disjoint; only the chief writes; a dead
worker stops the others within the timeout and a relaunch resumes exactly; SIGTERM on a worker
(launched by TF_CONFIG) checkpoints and ends every worker cleanly.
"""

import json
import os
import signal
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, final_tensors, finish_killed, script_env, signal_at_checkpoint
from _oracle import REPO, free_ports
from _pretraining_data import DROPOUT, write_config, write_records

from bert_mgpu.data import input_pipeline
from bert_mgpu.engine.cluster import ClusterConfig, resolve_cluster

SCRIPT = os.path.join(REPO, "run_pretraining.py")
STEPS = 40


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    return {"config": write_config(d / "bert_config.json", **DROPOUT),
            "data": write_records(d / "train.tfrecord", 240, seed=9), "dir": d}


def command(files, output_dir, n_gpus, batch, extra=()):
    return [sys.executable, SCRIPT, f"--bert_config_file={files['config']}",
            f"--input_file={files['data']}", f"--output_dir={output_dir}",
            "--max_seq_length=16", "--max_predictions_per_seq=4", "--do_train=true",
            f"--train_batch_size={batch}", f"--n_gpus={n_gpus}", f"--num_train_steps={STEPS}",
            "--num_warmup_steps=3", "--learning_rate=1e-3", "--save_checkpoints_steps=10",
            "--log_every_n_steps=10", "--random_seed=11", "--shuffle_buffer_size=100", *extra]


def env():
    return script_env(CUDA_VISIBLE_DEVICES="")


def start_workers(files, output_dir, extra=(), tf_config=False):
    """Two workers of 1 tower x 4 on 127.0.0.1, told the cluster by --worker_hosts and
    --task_index, or (`tf_config`) by TensorFlow's TF_CONFIG alone."""
    hosts = [f"127.0.0.1:{port}" for port in free_ports(2)]
    if not tf_config:
        return [Launched(command(files, output_dir, 1, 4, [f"--worker_hosts={','.join(hosts)}",
                                                           f"--task_index={i}", *extra]), env())
                for i in range(2)]
    return [Launched(command(files, output_dir, 1, 4, extra), dict(env(), TF_CONFIG=json.dumps(
        {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}})))
            for i in range(2)]


def wait_all(launched, timeout=240):
    return [(proc.returncode, proc.stderr) for proc in (run.finish(timeout) for run in launched)]


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=1e-5, rtol=0, err_msg=name)


@pytest.fixture(scope="module")
def trained(files):
    """The 2-worker run and the single-process ones (1 worker x 2 towers x 4, 1 worker x 1
    tower x 8), side by side: (output_dir by (n_gpus, batch), (2-worker output_dir, its
    (returncode, stderr) per worker)). One file (fewer than the workers) and Google's shuffle
    buffer of 100 records (`command`): the workers take turns with the batches of one record
    stream, which a worker shuffling with a seed of its own would break."""
    singles = {(n_gpus, batch): str(files["dir"] / f"single_{n_gpus}x{batch}")
               for n_gpus, batch in ((2, 4), (1, 8))}
    runs = [Launched(command(files, path, *key), env()) for key, path in singles.items()]
    path = str(files["dir"] / "two_workers")
    results = wait_all(start_workers(files, path))
    for run in runs:
        proc = run.finish()
        assert proc.returncode == 0, proc.stderr[-3000:]
    for code, err in results:
        assert code == 0, err[-3000:]
    return singles, (path, results)


@pytest.fixture(scope="module")
def reference(trained):
    return trained[0]


@pytest.fixture(scope="module")
def two_workers(trained):
    return trained[1]


def test_two_workers_equal_towers_equal_one_device(reference, two_workers):
    one_device = final_tensors(reference[(1, 8)])
    assert_same(final_tensors(reference[(2, 4)]), one_device)
    assert_same(final_tensors(two_workers[0]), one_device)
    assert int(final_tensors(two_workers[0])["global_step"]) == STEPS


def test_global_batch_logged_and_only_the_chief_writes(two_workers):
    path, ((_, chief_log), (_, worker_log)) = two_workers
    for log in (chief_log, worker_log):
        assert "Global batch = 8 (train_batch_size 4 x n_gpus 1 x accumulation 1 x " \
               "workers 2)" in log
    assert "Saved checkpoint" in chief_log and "Saved checkpoint" not in worker_log
    assert "Worker 0 of 2" in chief_log and "- chief" in chief_log
    assert len(tf.io.gfile.glob(os.path.join(path, "events.out.tfevents.*"))) == 1
    assert os.path.exists(os.path.join(path, "run_config.json"))
    for w in (0, 1):
        assert tf.io.gfile.glob(os.path.join(path, "input_state", f"worker-{w}", "ckpt-*"))


def test_input_shards_are_disjoint_and_cover_everything(tmp_path):
    files = [f"f{i}" for i in range(5)]
    shards = [input_pipeline.shard_files(files, 2, i) for i in range(2)]
    assert shards == [["f0", "f2", "f4"], ["f1", "f3"]]
    assert input_pipeline.shard_files(files[:1], 2, 0) is None  # too few files: by record
    # By record: the workers' first epochs (read without the record shuffle, whose buffer
    # would mix epochs) are disjoint and together the whole file.
    path = write_records(tmp_path / "r.tfrecord", 30, seed=3)
    from bert_mgpu.data import features
    shapes = features.pretraining_shapes(16, 4)
    seen = []
    for w in range(3):
        d = input_pipeline.record_dataset([path], shapes, 5, True, seed=4, shuffle_buffer=1,
                                          num_shards=3, shard_index=w)
        rows = [tuple(r) for b in d.take(2) for r in b["input_ids"].numpy().tolist()]
        seen.append(set(rows))
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])
    everything = {tuple(r["input_ids"].numpy().tolist()) for r in
                  tf.data.TFRecordDataset(path).map(lambda s: features.parse_example(s, shapes))}
    assert set.union(*seen) == everything


@pytest.fixture(scope="module")
def stopped_runs(files, tmp_path_factory):
    """Two 2-worker runs side by side, each stopped after its checkpoint at step 10: "killed"
    by a SIGKILL of worker 1 (then relaunched), "sigterm" (launched through TF_CONFIG) by a
    SIGTERM to worker 1, not the chief: the signal reaches every worker."""
    killed, sigterm = (str(tmp_path_factory.mktemp(name)) for name in ("killed", "sigterm"))
    timeout = "--collective_timeout_seconds=10"
    dying = start_workers(files, killed, [timeout])
    stopping = start_workers(files, sigterm, ["--num_train_steps=100000"], tf_config=True)
    seen = signal_at_checkpoint([(dying[0], killed, 10, None, 0),
                                 (dying[1], killed, 10, signal.SIGKILL, 0),
                                 (stopping[1], sigterm, 10, signal.SIGTERM, 0)])
    chief = dying[0].finish(120)
    chief_ended = time.time()
    _, not_killed = finish_killed(dying[1], killed, STEPS)
    return {"killed": killed, "seen": seen, "chief": chief, "chief_ended": chief_ended,
            "not_killed": not_killed,
            "sigterm": sigterm, "stopped": wait_all(stopping, timeout=120),
            "relaunched": wait_all(start_workers(files, killed, [timeout]))}


def test_dead_worker_stops_the_others_and_relaunch_resumes(stopped_runs, reference):
    chief_seen, killed_at, _ = stopped_runs["seen"]
    assert chief_seen is not None and killed_at is not None  # both ran until the kill
    assert stopped_runs["not_killed"] is None, stopped_runs["not_killed"]
    assert stopped_runs["chief_ended"] - killed_at < 60
    chief = stopped_runs["chief"]
    assert chief.returncode == 1
    last = chief.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining.py: ERROR: worker 0: the all-reduce of step ")
    assert "a worker died or is unreachable" in last
    for code, err in stopped_runs["relaunched"]:
        assert code == 0, err[-3000:]
        assert "Resumed from" in err
    assert_same(final_tensors(stopped_runs["killed"]), final_tensors(reference[(1, 8)]))


def test_sigterm_on_a_worker_ends_every_worker_cleanly(stopped_runs):
    """Workers launched with TF_CONFIG; SIGTERM to worker 1: both stop at the same step, the
    chief writes that step's checkpoint, both exit 0."""
    assert stopped_runs["seen"][2] is not None
    (code0, err0), (code1, err1) = stopped_runs["stopped"]
    assert code0 == 0 and code1 == 0, (err0[-2000:], err1[-2000:])
    assert "Stopped by SIGTERM at global_step" in err1
    assert "Stopped by a signal to another worker at global_step" in err0
    step1 = int(err1.split("Stopped by SIGTERM at global_step ")[1].split(";")[0])
    step0 = int(err0.split("at global_step ")[-1].split(";")[0])
    assert step0 == step1 >= 10
    assert tf.train.latest_checkpoint(stopped_runs["sigterm"]).endswith(f"model.ckpt-{step0}")
    assert tf.train.latest_checkpoint(stopped_runs["sigterm"]).endswith(f"model.ckpt-{step0}")


def test_cluster_from_flags_and_tf_config():
    c = resolve_cluster("h0:1,h1:2", 1)
    assert c == ClusterConfig(("h0:1", "h1:2"), 1) and not c.is_chief and c.num_workers == 2
    tf_config = json.dumps({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                            "task": {"type": "worker", "index": 0}})
    c = resolve_cluster(environ={"TF_CONFIG": tf_config})
    assert c.num_workers == 3 and c.is_chief
    assert resolve_cluster(environ={}) is None
    assert resolve_cluster("h0:1", 0) is None  # one worker: a plain single process
    with pytest.raises(ValueError, match="--task_index must be in"):
        resolve_cluster("h0:1,h1:2", 2)
    with pytest.raises(ValueError, match="not host:port"):
        resolve_cluster("h0,h1:2", 0)
    with pytest.raises(ValueError, match="TF_CONFIG: only a 'worker' job"):
        resolve_cluster(environ={"TF_CONFIG": json.dumps(
            {"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker",
                                                                    "index": 0}})})


def test_classifier_across_two_workers(tmp_path):
    """run_classifier_mgpu.py on 2 workers: the chief alone evaluates and predicts, every
    example once; the global batch counts both workers; with dropout 0.1 and the script's
    default --shuffle_buffer_size=0 (a seeded permutation of the whole training set each
    epoch) the workers train on one process's global batches: the same weights as one process
    with 2 towers of 4 (a worker shuffling with a seed of its own would not)."""
    data = tmp_path / "data"
    data.mkdir()
    rows = ["sentence\tlabel"] + [f"{'good fun' if i % 2 else 'bad dull'} {i}\t{i % 2}"
                                  for i in range(40)]
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("\n".join(rows[:1 + (40 if split == 'train' else 11)])
                                           + "\n")
    config = write_config(tmp_path / "bert_config.json", vocab_size=30522, **DROPOUT)
    ports = free_ports(2)
    out = tmp_path / "out"
    vocab = os.path.join(REPO, "data", "vocab", "bert_uncased_vocab.txt")

    def classifier(output_dir, *extra):
        return [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
                f"--data_dir={data}", f"--vocab_file={vocab}",
                f"--bert_config_file={config}", f"--output_dir={output_dir}", "--do_train=true",
                "--do_eval=true", "--do_predict=true", "--max_seq_length=16",
                "--train_batch_size=4", "--num_train_epochs=1", "--eval_batch_size=4",
                "--predict_batch_size=3", *extra]

    one_process = Launched(classifier(tmp_path / "one", "--n_gpus=2"), env())
    procs = [Launched(classifier(out, f"--worker_hosts=127.0.0.1:{ports[0]},127.0.0.1:"
                                      f"{ports[1]}", f"--task_index={i}"), env())
             for i in range(2)]
    (code0, err0), (code1, err1) = wait_all(procs)
    assert code0 == 0 and code1 == 0, (err0[-2000:], err1[-2000:])
    single = one_process.finish(240)
    assert single.returncode == 0, single.stderr[-2000:]
    assert_same(final_tensors(str(out)), final_tensors(str(tmp_path / "one")))
    assert "5 steps" in err0  # int(40 / (4 x 1 x 1 x 2 workers) x 1)
    assert "Running evaluation" in err0 and "Running evaluation" not in err1
    assert len((out / "predict.txt").read_text().splitlines()) == 11
    assert "eval_examples = 11" in (out / "eval_results.txt").read_text()
