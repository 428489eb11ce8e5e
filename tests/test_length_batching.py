"""Length-aware batching (--pad_to_longest, --pad_to_multiple_of, --group_by_length).

Examples of very different lengths, written sorted by label (as a user's file may be). Trimmed
evaluation/prediction equals the fully padded one to 1e-5 and keeps the file order; trimmed training
equals padded training with dropout on (the masks of the real tokens are those of the run's layout,
as long as the training file's longest example rounded up); grouping by length is a pure function of
(seed, epoch), resumes exactly and does not depend on the number of towers; the shapes (hence the
traces) are bounded by the rounding.
"""

import contextlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from _oracle import DATA
from _pretraining_data import DROPOUT, TINY_CONFIG

from bert_mgpu.configs.base import ModelFiles, TrainConfig, TrainOptions
from bert_mgpu.configs.classifier import ClassifierConfig
from bert_mgpu.configs.ner import NerConfig
from bert_mgpu.configs.squad import SquadConfig
from bert_mgpu.data import features, input_pipeline, tfrecord
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.engine.job import Job
from bert_mgpu.model import execution, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import BertClassifier, run_classifier

SEQ, MULTIPLE, N = 32, 8, 126
SHAPES = features.classifier_shapes(SEQ)
CONFIG = BertConfig.from_dict(dict(TINY_CONFIG, **DROPOUT))


def lengths_by_label(n=N, seed=0):
    """Label-sorted examples: 3/4 of label 0, short (3..8 tokens), then label 1, long
    (9..SEQ), as sentences mostly far shorter than --max_seq_length."""
    rng = np.random.RandomState(seed)
    return [(int(rng.randint(3, 9)), 0) for _ in range(3 * n // 4)] + \
        [(int(rng.randint(9, SEQ + 1)), 1) for _ in range(n - 3 * n // 4)]


def write_records(path, examples):
    """Classifier records of the given (length, label)s, random ids."""
    rng = np.random.RandomState(1)
    with tf.io.TFRecordWriter(str(path)) as w:
        for length, label in examples:
            ids = np.zeros(SEQ, int)
            ids[:length] = rng.randint(1, 100, size=length)
            w.write(tfrecord.encode_example({
                "input_ids": ids, "input_mask": (ids > 0).astype(int),
                "segment_ids": (np.arange(SEQ) >= length // 2) * (ids > 0),
                "label_ids": [label], "is_real_example": [1]}))
    return str(path)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    d = tmp_path_factory.mktemp("lengths")
    path = write_records(d / "records.tf_record", lengths_by_label())
    tf.random.set_seed(5)
    init = str(d / "init")
    checkpoint.write_bundle(init, BertClassifier(CONFIG, 2).named_variables())
    return {"path": path, "init": init, "dir": d}


def trainer(records, out, n_gpus=1, batch=8, multiple=0, steps=6, **kwargs):
    cfg = TrainConfig(output_dir=str(out), train_batch_size=batch // n_gpus, n_gpus=n_gpus,
                      num_train_steps=steps, num_warmup_steps=1, learning_rate=1e-3,
                      save_checkpoints_steps=100, log_every_n_steps=100,
                      init_checkpoint=records["init"], shuffle_buffer_size=0,
                      pad_to_multiple_of=multiple,
                      **dict(dict(dropout_layout_length=SEQ), **kwargs))
    task = BertClassifier(CONFIG, 2)
    return training.Trainer(task, cfg, towers.tower_devices(n_gpus))


def train(records, out, on_step=None, **kwargs):
    """A trainer trained on the records; `t.lengths`: the length each batch was cut to."""
    t = trainer(records, out, **kwargs)
    t.lengths, trim = [], t.trim

    def recording_trim(features):
        cut = trim(features)
        t.lengths.append(int(cut["input_ids"].shape[1]))
        return cut

    t.trim = recording_trim
    t.train(input_pipeline.record_dataset(
        [records["path"]], SHAPES, t.cfg.global_batch_size, True, seed=3, shuffle_buffer=0,
        group_by_length=t.cfg.group_by_length), on_step=on_step)
    return t


def weights(t):
    return {k: v.numpy() for k, v in t.checkpoint_tensors().items()}


def max_diff(a, b):
    a, b = weights(a), weights(b)
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


# -- evaluation and prediction --------------------------------------------------------------

def randomize(named, seed=0):
    """The same visible random value in every variable (LayerNorms and biases too): an
    initialisation's small weights leave every probability near 0.5, where a wrong computation
    of the encoder hides under the tolerance."""
    rng = np.random.RandomState(seed)
    for name in sorted(named):
        shape = named[name].shape.as_list()
        named[name].assign(rng.normal(0.0, 0.2, size=shape).astype(np.float32)
                           + (1.0 if name.endswith("gamma") else 0.0))


@contextlib.contextmanager
def fully_padded(monkeypatch):
    """Within it, `BertModel` ignores `drop_padding` and `first_token_only` (what eval and
    predict ask for, and training without XLA): every position of every layer is computed,
    Google's computation. Yields
    the list of the calls' `drop_padding` requests (to check the path was asked for)."""
    requested, call = [], modeling.BertModel.__call__

    def padded_call(self, *args, drop_padding=False, first_token_only=False, **kwargs):
        requested.append(drop_padding)
        return call(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(modeling.BertModel, "__call__", padded_call)
        yield requested


def test_trimmed_eval_and_predict_equal_the_padded_ones_in_file_order(records, tmp_path,
                                                                      monkeypatch):
    """On 2 towers (a tower's share of a trimmed batch is trimmed too). The reference keeps
    the padding end to end: batches of the records' length (32) in file order, the model run
    on every position (`fully_padded`). Equal to it, to 1e-5: the same file-order batches
    with the padding dropped inside the model (the default), and the length-sorted batches cut
    to a multiple of 8 (--pad_to_longest). The file-order batches mix real lengths (one of
    3..8 with 9..32 ones)."""
    reference, padded, trimmed = (trainer(records, tmp_path / name, n_gpus=2, multiple=m)
                                  for name, m in (("reference", 0), ("padded", 0),
                                                  ("trimmed", MULTIPLE)))
    for t in (reference, padded, trimmed):
        t.restore_or_initialize()
        randomize(t.task.named_variables())
    files = [records["path"]]
    plain = input_pipeline.record_dataset(files, SHAPES, 5, is_training=False)
    spreads = [int(np.ptp(input_pipeline.sequence_lengths(b["input_mask"]).numpy()))
               for b in plain]
    assert max(spreads) >= 10  # batches of mixed real lengths
    by_length = input_pipeline.length_sorted_dataset(files, SHAPES, 5)
    with fully_padded(monkeypatch) as requested:
        expected = reference.predict(plain)["probabilities"]
        want = reference.evaluate(plain)
    assert requested and all(requested)  # eval and predict asked to drop the padding
    for t, batches in ((padded, plain), (trimmed, by_length)):
        got = t.predict(batches)["probabilities"]
        assert got.shape == (N, 2)  # every example, the partial last batch (126 = 25 x 5 + 1)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        have = t.evaluate(batches)
        assert sorted(want) == sorted(have)
        for key in want:
            assert have[key] == pytest.approx(want[key], abs=1e-5), key
    assert np.ptp(expected[:, 1]) > 0.1  # the examples' probabilities differ
    # The sorted batches were cut to a few lengths (the padded run's one shape is 32).
    lengths = {int(input_pipeline.trim_padding(b, MULTIPLE)["input_ids"].shape[1])
               for b in by_length}
    assert lengths <= {8, 16, 24, 32} and 8 in lengths


def test_length_sorted_dataset_order_and_indexes(records):
    batches = list(input_pipeline.length_sorted_dataset([records["path"]], SHAPES, 8))
    index = np.concatenate([b[input_pipeline.EXAMPLE_INDEX].numpy() for b in batches])
    assert sorted(index.tolist()) == list(range(N))
    lengths = np.concatenate([input_pipeline.sequence_lengths(b["input_mask"]).numpy()
                              for b in batches])
    assert (np.diff(lengths) >= 0).all()
    expected = [length for length, _ in lengths_by_label()]
    assert lengths.tolist() == [expected[i] for i in index]


def test_script_files_equal_the_padded_runs(records, tmp_path, monkeypatch):
    """run_classifier's eval_results.txt, test_results.tsv and predict.txt with
    --pad_to_longest equal those of a run without it whose model keeps the padding end to end
    (`fully_padded`: no padding dropped in eval and predict), to 1e-5, with two towers, after
    training with
    dropout on; --max_seq_length is about twice the longest sentence, so dropout's layout (33
    positions: the longest sentence, the default multiple being 1 without XLA) is shorter than
    the padded batches (64) and longer than most trimmed ones."""
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.RandomState(2)
    words = "good bad great terrible fine boring fun long short and but not very".split()
    rows = [" ".join(rng.choice(words, size=length)) + f"\t{label}"
            for length, label in lengths_by_label(23, seed=3)]
    for name in ("train", "dev", "test"):
        (data / f"{name}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522, **DROPOUT)))
    # Visible random weights (encoder and head): the probabilities spread far from 0.5.
    tf.random.set_seed(6)
    init_model = BertClassifier(BertConfig.from_json_file(str(config)), 2)
    randomize(init_model.named_variables())
    init = checkpoint.write_bundle(str(tmp_path / "init" / "bert_model.ckpt"),
                                   init_model.named_variables())
    layouts, layout_length = [], input_pipeline.dropout_layout_length
    monkeypatch.setattr(input_pipeline, "dropout_layout_length",
                        lambda *args: layouts.append(layout_length(*args)) or layouts[-1])
    # The lengths of the batches the trainer ran (training, eval and predict), per run: the
    # flag must reach the trainer (both runs equal each other when it does not).
    cut_lengths, trim = {False: [], True: []}, training.Trainer._trim

    def recorded_trim(self, features, task):
        out = trim(self, features, task)
        cut_lengths[pad].append(int(out["input_ids"].shape[1]))
        return out

    monkeypatch.setattr(training.Trainer, "_trim", recorded_trim)
    outputs = {}
    for pad in (False, True):
        out = tmp_path / f"out_{pad}"
        cfg = ClassifierConfig(
            model=ModelFiles(bert_config_file=str(config), max_seq_length=2 * SEQ,
                             init_checkpoint=init,
                             vocab_file=os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")),
            train=TrainOptions(n_gpus=2, random_seed=4, train_batch_size=4,
                               learning_rate=1e-3), output_dir=str(out),
            data_dir=str(data), task_name="tsv", do_train=True, do_eval=True, do_predict=True,
            eval_batch_size=5, predict_batch_size=7, pad_to_longest=pad)
        if pad:
            run_classifier(cfg)
        else:
            with fully_padded(monkeypatch) as requested:
                run_classifier(cfg)
            assert any(requested)  # eval and predict asked to drop the padding
        results = dict(line.split(" = ") for line in
                       (out / "eval_results.txt").read_text().splitlines())
        outputs[pad] = ({k: float(v) for k, v in results.items()},
                        np.loadtxt(out / "test_results.tsv"), (out / "predict.txt").read_text())
    (results, probabilities, predict), (padded_results, padded_probabilities, padded_predict) = \
        outputs[True], outputs[False]
    assert results == pytest.approx(padded_results, abs=1e-5)
    np.testing.assert_allclose(probabilities, padded_probabilities, atol=1e-5)
    assert np.ptp(padded_probabilities[:, 1]) > 0.1
    assert predict == padded_predict and len(predict.split()) == 23
    assert layouts == [33, 33]
    assert float(padded_results["global_step"]) == 8  # int(23 / 8 * 3) updates were trained
    assert set(cut_lengths[False]) == {2 * SEQ}
    assert min(cut_lengths[True]) < SEQ and max(cut_lengths[True]) < 2 * SEQ


# -- training -------------------------------------------------------------------------------

def dropout_stream(*args, **kwargs):
    """The context of the trainer's towers: dropout from a position-keyed `DropoutStream`."""
    return execution.entered(stream=execution.DropoutStream(*args, **kwargs))


def layout_masks(layout):
    """masks(length, view, shape): dropout (rate 0.5) of ones of `shape`, a batch of 3
    examples cut or padded to `length`, masks laid out over `layout` positions."""
    def masks(length, view, shape):
        with dropout_stream(1, tf.constant(2), tf.constant(5), tf.constant(3),
                            seq_length=length, full_length=layout):
            return modeling.dropout(tf.ones(shape), 0.5, True, seq_view=view).numpy()
    return masks


def test_dropout_masks_of_a_trimmed_batch_are_the_padded_batchs_on_real_positions():
    full, short, heads, width = 8, 3, 2, 4
    masks = layout_masks(full)

    hidden = (modeling.SEQ, width)
    padded = masks(full, hidden, [3 * full, width]).reshape(3, full, width)
    trimmed = masks(short, hidden, [3 * short, width]).reshape(3, short, width)
    np.testing.assert_array_equal(trimmed, padded[:, :short])
    attention = (heads, modeling.SEQ, modeling.SEQ)
    padded = masks(full, attention, [3, heads, full, full])
    np.testing.assert_array_equal(masks(short, attention, [3, heads, short, short]),
                                  padded[:, :, :short, :short])
    # Untrimmed, the layout is the one without `seq_view` (masks of runs before this option).
    with dropout_stream(1, tf.constant(2), tf.constant(5), tf.constant(3)):
        plain = modeling.dropout(tf.ones([3, heads, full, full]), 0.5, True).numpy()
    np.testing.assert_array_equal(plain, padded)


def test_a_padded_batch_longer_than_the_layout_keeps_the_layouts_masks():
    layout, padded, heads, width = 5, 8, 2, 4
    masks = layout_masks(layout)

    hidden = masks(layout, (modeling.SEQ, width), [3 * layout, width]).reshape(3, layout, width)
    longer = masks(padded, (modeling.SEQ, width), [3 * padded, width]).reshape(3, padded, width)
    np.testing.assert_array_equal(longer[:, :layout], hidden)
    assert (longer[:, layout:] == 2.0).all()  # past the layout: kept (and scaled)
    assert 0 < (hidden == 0).mean() < 1
    view = (heads, modeling.SEQ, modeling.SEQ)
    attention = masks(layout, view, [3, heads, layout, layout])
    longer = masks(padded, view, [3, heads, padded, padded])
    np.testing.assert_array_equal(longer[:, :, :layout, :layout], attention)
    assert (longer[:, :, layout:] == 2.0).all() and (longer[:, :, :, layout:] == 2.0).all()


def test_dropout_layout_is_the_training_files_longest_rounded_up(tmp_path):
    path = write_records(tmp_path / "short.tf_record", [(n, n % 2) for n in range(3, 21)])
    assert input_pipeline.dropout_layout_length([path], SEQ, 8) == 24
    assert input_pipeline.dropout_layout_length([path], SEQ, 16) == SEQ
    assert input_pipeline.dropout_layout_length([path], 22, 8) == 22  # at most the records'
    assert input_pipeline.dropout_layout_length([path], SEQ, 1) == 20


def test_short_file_trimmed_training_equals_padded_training_in_its_layout(tmp_path, records):
    """Sentences of at most 20 tokens in records of 32: masks laid out over 24 positions;
    batches padded to 32 on one device and batches trimmed to 16 or 24 on 2 towers train
    the same weights, with dropout on."""
    short = dict(records, path=write_records(
        tmp_path / "short.tf_record",
        [(3 + i % 6, 0) for i in range(36)] + [(9 + i % 12, 1) for i in range(12)]))
    layout = input_pipeline.dropout_layout_length([short["path"]], SEQ, MULTIPLE)
    assert layout == 24
    kwargs = dict(steps=4, group_by_length=True)
    padded = train(short, tmp_path / "padded", dropout_layout_length=layout, **kwargs)
    trimmed = train(short, tmp_path / "trimmed", n_gpus=2, multiple=MULTIPLE,
                    dropout_layout_length=layout, **kwargs)
    assert set(trimmed.lengths) == {16, 24}, trimmed.lengths
    assert max_diff(trimmed, padded) <= 1e-5
    # The layout shapes the masks: laid out over the records' 32 positions, other weights.
    assert max_diff(trimmed, train(short, tmp_path / "records_layout", **kwargs)) > 1e-4


@pytest.fixture(scope="module")
def padded_run(records, tmp_path_factory):
    """Google's computation: batches padded to 32 on one device, every position of every layer
    computed (`BertModel` ignores the training path's `drop_padding`)."""
    with pytest.MonkeyPatch.context() as patch, fully_padded(patch):
        return train(records, tmp_path_factory.mktemp("padded"), steps=4, group_by_length=True)


@contextlib.contextmanager
def drop_padding_requests(monkeypatch):
    """Yields the list of `BertModel` training calls' `drop_padding` arguments."""
    requested, call = [], modeling.BertModel.__call__

    def spied(self, *args, drop_padding=False, training=False, **kwargs):
        if training:
            requested.append(drop_padding)
        return call(self, *args, drop_padding=drop_padding, training=training, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(modeling.BertModel, "__call__", spied)
        yield requested


def test_training_on_real_tokens_equals_padded_training(records, tmp_path, padded_run,
                                                        monkeypatch):
    """Without XLA the classifier trains on the real tokens' rows only (dropout 0.1, 2 towers,
    batches cut to their longest, lengths 3..32 in a batch): the weights and optimizer slots
    of the padded one-device run that computes every position."""
    with drop_padding_requests(monkeypatch) as requested:
        real = train(records, tmp_path / "real", n_gpus=2, multiple=1, steps=4,
                     group_by_length=True)
    assert requested and all(requested), requested
    assert len(set(real.lengths)) >= 2, real.lengths
    assert max_diff(real, padded_run) <= 1e-5


def test_trimmed_training_equals_padded_training_with_dropout(records, tmp_path, padded_run):
    """The same grouped batches, padded to 32 on one device or trimmed to their longest (16 or
    32) on 2 towers: the same weights and optimizer slots."""
    trimmed = train(records, tmp_path / "trimmed", n_gpus=2, multiple=16, steps=4,
                    group_by_length=True)
    assert len(set(trimmed.lengths)) >= 2, trimmed.lengths
    assert max_diff(trimmed, padded_run) <= 1e-5


@pytest.mark.parametrize("options", [dict(gradient_checkpointing=True),
                                     dict(batch=4, num_accumulation_steps=2)])
def test_training_on_real_tokens_with_checkpointing_or_accumulation(records, tmp_path,
                                                                     padded_run, options):
    """On the real tokens' rows, 2 towers, with the layers recomputed in the backward pass or
    the global batch of 8 in 2 micro-batches: the padded one-device run's weights and slots."""
    with drop_padding_requests(pytest.MonkeyPatch()) as requested:
        real = train(records, tmp_path / "real", n_gpus=2, multiple=1, steps=4,
                     group_by_length=True, **options)
    assert requested and all(requested), requested
    assert max_diff(real, padded_run) <= 1e-5


def test_trimmed_training_with_xla_layers_equals_padded_training(records, tmp_path, padded_run):
    """--xla_layers (each encoder layer one XLA computation, its dropout drawn inside it) on
    batches trimmed to 16 or 32 positions over 2 towers: the weights and slots of the padded
    one-device run without it."""
    with drop_padding_requests(pytest.MonkeyPatch()) as requested:
        trimmed = train(records, tmp_path / "trimmed", n_gpus=2, multiple=16, steps=4,
                        group_by_length=True, xla_layers=True)
    assert requested and not any(requested)  # compiled layers: every row
    assert len(set(trimmed.lengths)) >= 2, trimmed.lengths
    assert trimmed.update._train_step.experimental_get_tracing_count() == 1
    assert max_diff(trimmed, padded_run) <= 1e-5


def test_trimmed_training_equals_padded_training_with_xla(records, tmp_path):
    """XLA's Philox draws other masks, but the same for the trimmed and the padded layout."""
    kwargs = dict(steps=2, group_by_length=True, use_xla=True)
    padded = train(records, tmp_path / "padded", **kwargs)
    trimmed = train(records, tmp_path / "trimmed", multiple=16, **kwargs)
    assert set(trimmed.lengths) == {16, 32}, trimmed.lengths
    # One trace for both lengths; XLA compiles each tower's pass once per length.
    assert trimmed.update._train_step.experimental_get_tracing_count() == 1
    assert max_diff(trimmed, padded) <= 1e-5


def test_group_by_length_batches_are_a_function_of_seed_and_epoch(tmp_path):
    n = 250  # mega-batches of 7 batches of 8 (at least 4 mega-batches, as Hugging Face)
    examples = lengths_by_label(n)
    path = write_records(tmp_path / "many.tf_record", examples)

    def stream(seed, batches=64, group=True):  # 512 records: 2 epochs and 12 more
        d = input_pipeline.record_dataset([path], SHAPES, 8, True, seed=seed,
                                          shuffle_buffer=0, group_by_length=group)
        return [b["input_mask"].numpy().sum(1).tolist() for b in d.take(batches)]

    grouped = stream(3)
    assert grouped == stream(3) and grouped != stream(4)
    flat = sum(grouped, [])
    expected = sorted(length for length, _ in examples)
    assert sorted(flat[:n]) == expected and sorted(flat[n:2 * n]) == expected
    assert flat[:n] != flat[n:2 * n]  # each epoch grouped anew
    # Grouped batches need far less padding than random ones: the sum of their longest.
    assert sum(map(max, grouped)) < 0.7 * sum(map(max, stream(3, group=False)))


def test_the_classifier_job_reads_grouped_batches_as_its_flags_say(tmp_path):
    """--group_by_length through the job's own path (the config's TrainConfig, then
    `Job.training_input`): the batches are the grouped stream of the same seed, with far less
    padding than the flag-off job's; --random_seed is the grouping's seed."""
    path = write_records(tmp_path / "many.tf_record", lengths_by_label(250))

    def job_stream(group_by_length, seed=3):
        cfg = ClassifierConfig(
            model=ModelFiles(bert_config_file="unused", max_seq_length=SEQ, vocab_file="v"),
            train=TrainOptions(train_batch_size=8, random_seed=seed, shuffle_buffer_size=0),
            output_dir="unused", data_dir="unused", task_name="tsv", do_train=True,
            group_by_length=group_by_length)
        job = Job(cfg=cfg, devices=["/CPU:0"], cluster=None, bert_config=None)
        dataset = job.training_input([path], SHAPES, cfg.train_config(250))
        return [b["input_mask"].numpy().sum(1).tolist() for b in dataset.take(40)]

    grouped = job_stream(True)
    direct = input_pipeline.record_dataset([path], SHAPES, 8, True, seed=3, shuffle_buffer=0,
                                           group_by_length=True)
    assert grouped == [b["input_mask"].numpy().sum(1).tolist() for b in direct.take(40)]
    assert grouped != job_stream(True, seed=4)
    assert sum(map(max, grouped)) < 0.7 * sum(map(max, job_stream(False)))


def test_group_by_length_resumes_exactly_and_ignores_the_towers(records, tmp_path):
    # 144 records: into epoch 1; multiples of 16: two shapes (fewer traces, a faster test).
    kwargs = dict(multiple=16, group_by_length=True, steps=18)
    whole = train(records, tmp_path / "whole", **kwargs)
    stopped = train(records, tmp_path / "stopped", on_step=lambda step, out: step == 12, **kwargs)
    assert int(stopped.global_step.numpy()) == 12
    resumed = train(records, tmp_path / "stopped", **kwargs)
    assert max_diff(resumed, whole) <= 1e-6
    towers2 = train(records, tmp_path / "towers", n_gpus=2, **kwargs)
    assert max_diff(towers2, whole) <= 1e-5


def test_cut_batches_give_the_uncut_batchs_sparse_gradient_rows(records, tmp_path):
    """In the one trace of every cut length, the word embeddings' IndexedSlices gradient has
    the rows of the uncut batch (so the XLA-compiled update compiles once), and densifies to
    the same gradient as without the padding rows."""
    t = trainer(records, tmp_path / "rows", n_gpus=2, multiple=MULTIPLE)
    batch = next(iter(input_pipeline.record_dataset([records["path"]], SHAPES, 8, True,
                                                    seed=3, shuffle_buffer=0)))
    cut = t.trim(batch)
    assert cut["input_ids"].shape[1] < SEQ

    def sparse_grads(features):
        grads, _ = t.update.towers(features, t.update._global_context_impl(features))
        return [g for g in grads if isinstance(g, tf.IndexedSlices)]

    spec = training._relaxed_spec(cut, int(cut["input_ids"].shape[1]))
    grads = tf.function(sparse_grads, autograph=False).get_concrete_function(spec)(cut)
    assert grads and all(g.values.shape[0] == 8 * SEQ for g in grads)
    unpadded = sparse_grads(cut)  # eagerly: the static cut length, no padding rows
    assert all(g.values.shape[0] < 8 * SEQ for g in unpadded)
    for padded, plain in zip(grads, unpadded):
        np.testing.assert_allclose(tf.convert_to_tensor(padded).numpy(),
                                   tf.convert_to_tensor(plain).numpy(), rtol=0, atol=1e-6)


def test_traces_are_bounded_by_the_rounding(records, tmp_path):
    """Batches cut to several lengths share one trace of each step function, the update
    (clipping and the optimizer, XLA-compiled) included; that it also compiles once is the
    test above (the sparse gradient's rows do not depend on the cut)."""
    t = trainer(records, tmp_path / "traces", multiple=MULTIPLE, steps=10, group_by_length=True)
    dataset = input_pipeline.record_dataset([records["path"]], SHAPES, 8, True, seed=3,
                                            shuffle_buffer=0, group_by_length=True)
    lengths = [int(input_pipeline.trim_padding(f, MULTIPLE)["input_ids"].shape[1])
               for f in dataset.take(10)]
    assert len(set(lengths)) >= 2, lengths
    t.train(dataset)
    assert t.update._train_step.experimental_get_tracing_count() == 1
    assert t.update._apply_clipped.experimental_get_tracing_count() == 1
    sorted_batches = input_pipeline.length_sorted_dataset([records["path"]], SHAPES, 5)
    shapes = {tuple(input_pipeline.trim_padding(dict(f), MULTIPLE)["input_ids"].shape)
              for f in sorted_batches}
    assert len(shapes) >= 3, shapes
    t.predict(sorted_batches)
    # Every length and the last partial batch: one trace.
    assert t._predict_step.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("changes,message", [
    (dict(group_by_length=True, pad_to_longest=False), "--group_by_length needs --pad_to_long"),
    (dict(group_by_length=True, train=TrainOptions(shuffle_buffer_size=100)),
     "--group_by_length needs --shuffle_buffer_size=0"),
    (dict(pad_to_multiple_of=-1), "--pad_to_multiple_of must be >= 0"),
])
@pytest.mark.parametrize("job", ["classifier", "ner", "squad"])
def test_bad_length_flags_are_one_line(changes, message, job):
    """The same flags and errors for the three fine-tuning jobs (configs/base.LengthBatching);
    run_squad.py's --pad_to_longest is off by default, so its cases turn it on."""
    base = dict(model=ModelFiles(bert_config_file="c", vocab_file="v"),
                train=TrainOptions(shuffle_buffer_size=0), output_dir="o", do_train=True)
    config = {"classifier": lambda **kw: ClassifierConfig(data_dir="d", task_name="tsv", **kw),
              "ner": lambda **kw: NerConfig(data_dir="d", **kw),
              "squad": lambda **kw: SquadConfig(train_file="t", **kw)}[job]
    if job == "squad":
        base["pad_to_longest"] = True
    with pytest.raises(ValueError, match=message) as raised:
        config(**dict(base, **changes)).validate()
    assert "\n" not in str(raised.value)
