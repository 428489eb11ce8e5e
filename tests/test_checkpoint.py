"""Tests of bert_mgpu.engine.checkpoint: Google-layout bundles, state file, crash safety,
init/restore."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_mgpu.engine import checkpoint

WORD = "bert/embeddings/word_embeddings"
KERNEL = "bert/encoder/layer_0/attention/self/query/kernel"
LN_BETA = "bert/encoder/layer_0/output/LayerNorm/beta"


def _model_values(seed=0):
    rng = np.random.RandomState(seed)
    return {
        WORD: rng.normal(size=(10, 4)).astype(np.float32),
        KERNEL: rng.normal(size=(4, 4)).astype(np.float32),
        LN_BETA: rng.normal(size=(4,)).astype(np.float32),
    }


def _training_state(step, seed=0):
    """Model weights, Adam slots and global_step as a trainer saves them."""
    named = {n: tf.Variable(v) for n, v in _model_values(seed).items()}
    for name, var in list(named.items()):
        named[f"{name}/adam_m"] = tf.Variable(tf.fill(var.shape, 0.5))
        named[f"{name}/adam_v"] = tf.Variable(tf.fill(var.shape, 0.25))
    named["global_step"] = tf.Variable(step, dtype=tf.int64)
    return named


def _files(directory):
    return sorted(os.listdir(directory))


# -- save: layout, state file, keep-last-N ---------------------------------------------------

def test_round_trip_names_values_and_state_file(tmp_path):
    out = str(tmp_path)
    named = _training_state(7)
    prefix = checkpoint.save_checkpoint(out, 7, named)

    assert prefix == os.path.join(out, "model.ckpt-7")
    assert _files(out) == ["checkpoint", "model.ckpt-7.data-00000-of-00001", "model.ckpt-7.index"]
    assert [n for n, _ in tf.train.list_variables(prefix)] == sorted(named)
    reader = tf.train.load_checkpoint(prefix)
    assert reader.get_variable_to_dtype_map()["global_step"] == tf.int64
    assert reader.get_tensor("global_step") == 7
    for name, var in named.items():
        np.testing.assert_array_equal(reader.get_tensor(name), var.numpy(), err_msg=name)
    # The state file as TF writes it, relative paths, readable by TF itself.
    with open(os.path.join(out, "checkpoint")) as f:
        assert f.read() == ('model_checkpoint_path: "model.ckpt-7"\n'
                            'all_model_checkpoint_paths: "model.ckpt-7"\n')
    assert tf.train.latest_checkpoint(out) == prefix
    assert checkpoint.latest_checkpoint(out) == prefix

    # Restore into fresh variables (a resumed run).
    fresh = {n: tf.Variable(tf.zeros_like(v)) for n, v in named.items()}
    report = checkpoint.restore_checkpoint(out, fresh)
    assert report.checkpoint == prefix and report.restored == list(named) and not report.missing
    for name, var in named.items():
        np.testing.assert_array_equal(fresh[name].numpy(), var.numpy(), err_msg=name)


def test_keep_last_n(tmp_path):
    out = str(tmp_path)
    for step in range(1, 6):
        checkpoint.save_checkpoint(out, step, _training_state(step), keep_checkpoint_max=3)
    steps = sorted({f.split(".")[1] for f in _files(out) if f.startswith("model.ckpt-")})
    assert steps == ["ckpt-3", "ckpt-4", "ckpt-5"]
    state = tf.train.get_checkpoint_state(out)
    assert state.model_checkpoint_path == os.path.join(out, "model.ckpt-5")
    assert list(state.all_model_checkpoint_paths) == [
        os.path.join(out, f"model.ckpt-{s}") for s in (3, 4, 5)]
    assert tf.train.latest_checkpoint(out) == os.path.join(out, "model.ckpt-5")


def test_keep_zero_keeps_all_and_resaving_a_step_replaces_it(tmp_path):
    out = str(tmp_path)
    for step in (1, 2, 3):
        checkpoint.save_checkpoint(out, step, _training_state(step), keep_checkpoint_max=0)
    checkpoint.save_checkpoint(out, 2, _training_state(2, seed=9), keep_checkpoint_max=0)
    state = tf.train.get_checkpoint_state(out)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "model.ckpt-1", "model.ckpt-3", "model.ckpt-2"]
    assert checkpoint.latest_checkpoint(out) == os.path.join(out, "model.ckpt-2")
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(os.path.join(out, "model.ckpt-2")).get_tensor(WORD),
        _model_values(seed=9)[WORD])


def test_continues_a_state_file_written_by_tf1_saver(tmp_path):
    # An output dir of Google's TF1 scripts: the Saver wrote absolute paths and a .meta.
    out = str(tmp_path)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.get_variable(WORD, initializer=_model_values()[WORD])
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            tf1_prefix = saver.save(sess, os.path.join(out, "model.ckpt"), global_step=1)
    # Newer TF savers also write timestamp fields; they must not get in the way.
    with open(tmp_path / "checkpoint", "a") as f:
        f.write("all_model_checkpoint_timestamps: 1700000000.5\n"
                "last_preserved_timestamp: 1699999999.25\n")
    assert tf.train.latest_checkpoint(out) == tf1_prefix
    assert checkpoint.latest_checkpoint(out) == tf1_prefix

    checkpoint.save_checkpoint(out, 2, _training_state(2), keep_checkpoint_max=1)
    assert not [f for f in _files(out) if f.startswith("model.ckpt-1")]     # .meta included
    assert tf.train.latest_checkpoint(out) == os.path.join(out, "model.ckpt-2")
    assert [os.path.basename(p) for p in
            tf.train.get_checkpoint_state(out).all_model_checkpoint_paths] == ["model.ckpt-2"]


def test_write_bundle_google_release_layout(tmp_path):
    prefix = checkpoint.write_bundle(str(tmp_path / "bert_model.ckpt"), _model_values())
    assert _files(tmp_path) == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    assert dict(tf.train.list_variables(prefix)) == {WORD: [10, 4], KERNEL: [4, 4], LN_BETA: [4]}


# -- crash safety ----------------------------------------------------------------------------

class _CrashError(Exception):
    pass


def test_crash_after_data_before_index_keeps_previous(tmp_path, monkeypatch):
    out = str(tmp_path)
    first = checkpoint.save_checkpoint(out, 1, _training_state(1))
    real_rename = checkpoint._rename

    def crash_on_index(src, dst):
        if dst.endswith(".index"):
            raise _CrashError("killed")
        real_rename(src, dst)

    real_rmtree = checkpoint._rmtree
    monkeypatch.setattr(checkpoint, "_rename", crash_on_index)
    # A killed process runs no `finally`: leave the temporary directory behind.
    monkeypatch.setattr(checkpoint, "_rmtree", lambda path: None)
    with pytest.raises(_CrashError):
        checkpoint.save_checkpoint(out, 2, _training_state(2))
    monkeypatch.setattr(checkpoint, "_rename", real_rename)
    monkeypatch.setattr(checkpoint, "_rmtree", real_rmtree)

    # The data file reached its final name, the index did not, the state file is untouched.
    assert os.path.exists(os.path.join(out, "model.ckpt-2.data-00000-of-00001"))
    assert not os.path.exists(os.path.join(out, "model.ckpt-2.index"))
    assert [f for f in _files(out) if f.startswith(".tmp-ckpt-")]      # the temporary leftover
    assert checkpoint.latest_checkpoint(out) == first
    assert tf.train.latest_checkpoint(out) == first

    # The restarted run saves step 2 again over the orphan.
    second = checkpoint.save_checkpoint(out, 2, _training_state(2))
    assert checkpoint.latest_checkpoint(out) == second
    assert not [f for f in _files(out) if f.startswith(".tmp")]


def test_crash_while_resaving_a_listed_step_never_lists_a_broken_one(tmp_path, monkeypatch):
    # Saving step 2 again replaces its files: the state file must stop naming it first.
    out = str(tmp_path)
    first = checkpoint.save_checkpoint(out, 1, _training_state(1))
    checkpoint.save_checkpoint(out, 2, _training_state(2))
    real_rename = checkpoint._rename

    def crash_on_checkpoint_index(src, dst):
        if dst.endswith("model.ckpt-2.index"):
            raise _CrashError("killed")
        real_rename(src, dst)

    monkeypatch.setattr(checkpoint, "_rename", crash_on_checkpoint_index)
    with pytest.raises(_CrashError):
        checkpoint.save_checkpoint(out, 2, _training_state(2, seed=5))
    assert checkpoint.latest_checkpoint(out) == first
    assert tf.train.latest_checkpoint(out) == first


def test_crash_before_state_file_update_keeps_previous(tmp_path, monkeypatch):
    out = str(tmp_path)
    first = checkpoint.save_checkpoint(out, 1, _training_state(1))

    def crash(*args):
        raise _CrashError("killed")

    monkeypatch.setattr(checkpoint, "_write_state", crash)
    with pytest.raises(_CrashError):
        checkpoint.save_checkpoint(out, 2, _training_state(2))
    assert checkpoint.latest_checkpoint(out) == first
    assert tf.train.latest_checkpoint(out) == first


def test_temporary_leftovers_are_ignored_then_removed(tmp_path):
    out = str(tmp_path)
    first = checkpoint.save_checkpoint(out, 1, _training_state(1))
    leftover = tmp_path / ".tmp-ckpt-deadbeef"
    leftover.mkdir()
    (leftover / "model.ckpt-2.index").write_bytes(b"partial")
    assert checkpoint.latest_checkpoint(out) == first
    assert checkpoint.resolve_checkpoint_path(out) == first
    checkpoint.save_checkpoint(out, 2, _training_state(2))
    assert not leftover.exists()


@pytest.mark.parametrize("damage", ["truncate_index", "truncate_data", "delete_data",
                                    "delete_index"])
def test_unreadable_newest_falls_back_to_previous(tmp_path, damage, caplog):
    out = str(tmp_path)
    first = checkpoint.save_checkpoint(out, 1, _training_state(1))
    second = checkpoint.save_checkpoint(out, 2, _training_state(2))
    index, data = second + ".index", second + ".data-00000-of-00001"
    if damage == "truncate_index":
        with open(index, "r+b") as f:
            f.truncate(os.path.getsize(index) // 2)
    elif damage == "truncate_data":
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) - 4)
    else:
        os.remove(index if damage == "delete_index" else data)

    with caplog.at_level(logging.WARNING):
        assert checkpoint.latest_checkpoint(out) == first
    assert "model.ckpt-2" in caplog.text and "unreadable" in caplog.text
    assert checkpoint.resolve_checkpoint_path(out) == first


def test_nothing_readable_gives_none(tmp_path):
    out = str(tmp_path)
    only = checkpoint.save_checkpoint(out, 1, _training_state(1))
    os.remove(only + ".index")
    assert checkpoint.latest_checkpoint(out) is None
    assert checkpoint.latest_checkpoint(str(tmp_path / "no_such_dir")) is None
    with pytest.raises(checkpoint.CheckpointNotFoundError, match=str(tmp_path)):
        checkpoint.resolve_checkpoint_path(out)


# -- restore ---------------------------------------------------------------------------------

def test_strict_restore_names_every_bad_variable_and_assigns_nothing(tmp_path):
    prefix = checkpoint.save_checkpoint(str(tmp_path), 3, _training_state(3))
    model = {
        WORD: tf.Variable(tf.zeros([10, 4])),
        KERNEL: tf.Variable(tf.zeros([4, 5])),                      # wrong shape
        "bert/pooler/dense/kernel": tf.Variable(tf.zeros([4, 4])),  # missing
        "global_step": tf.Variable(0, dtype=tf.int64),
    }
    with pytest.raises(checkpoint.CheckpointError) as info:
        checkpoint.restore_checkpoint(prefix, model)
    lines = str(info.value).splitlines()
    assert lines[0] == f"2 variable(s) cannot be restored from {prefix}:"
    assert lines[1:] == [f"  {KERNEL}: shape [4, 4] in the checkpoint, [4, 5] in the model",
                         "  bert/pooler/dense/kernel: not in the checkpoint"]
    assert not model[WORD].numpy().any() and int(model["global_step"].numpy()) == 0


def test_non_strict_restore_reports_missing(tmp_path):
    prefix = checkpoint.save_checkpoint(str(tmp_path), 3, _training_state(3))
    model = {WORD: tf.Variable(tf.zeros([10, 4])), "extra": tf.Variable([1.0])}
    report = checkpoint.restore_checkpoint(prefix, model, strict=False)
    assert report.restored == [WORD] and report.missing == ["extra"]
    np.testing.assert_array_equal(model[WORD].numpy(), _model_values()[WORD])
    np.testing.assert_array_equal(model["extra"].numpy(), [1.0])


def test_restore_rejects_incompatible_dtype(tmp_path):
    prefix = checkpoint.save_checkpoint(str(tmp_path), 3, _training_state(3))
    with pytest.raises(checkpoint.CheckpointError, match="global_step: dtype int64"):
        checkpoint.restore_checkpoint(prefix, {"global_step": tf.Variable(0.0)})


# -- init from Google's released layout (TF1 Saver, with .meta) ------------------------------

@pytest.fixture(scope="module")
def google_checkpoint_dir(tmp_path_factory):
    """A `bert_model.ckpt` written the way Google's files were: TF1 graph mode + Saver."""
    directory = tmp_path_factory.mktemp("uncased_L-1_H-4_A-1")
    values = dict(_model_values())
    values["cls/predictions/output_bias"] = np.arange(10, dtype=np.float32)
    values[f"{WORD}/adam_m"] = np.ones((10, 4), np.float32)
    graph = tf.Graph()
    with graph.as_default():
        for name, value in values.items():
            tf.compat.v1.get_variable(name, initializer=value)
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(directory / "bert_model.ckpt"))
    # Google's released folders have no `checkpoint` state file.
    os.remove(directory / "checkpoint")
    assert _files(directory) == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
                                 "bert_model.ckpt.meta"]
    return str(directory)


class _ListLogger:
    def __init__(self):
        self.lines = []

    def info(self, fmt, *args):
        self.lines.append(fmt % args)

    warning = debug = info


def _classifier_model():
    """The classifier's variables: Google's `bert/...` plus root-level `output_*`."""
    model = {n: tf.Variable(tf.zeros(v.shape)) for n, v in _model_values().items()}
    model["output_weights"] = tf.Variable(tf.fill([2, 4], 0.02))
    model["output_bias"] = tf.Variable(tf.zeros([2]))
    return model


def test_init_from_tf1_checkpoint_with_meta(google_checkpoint_dir):
    model = _classifier_model()
    logger = _ListLogger()
    report = checkpoint.init_from_checkpoint(
        os.path.join(google_checkpoint_dir, "bert_model.ckpt"), model, logger=logger)

    assert report.checkpoint == os.path.join(google_checkpoint_dir, "bert_model.ckpt")
    assert report.initialized == [WORD, KERNEL, LN_BETA]
    assert report.not_in_checkpoint == ["output_weights", "output_bias"]
    assert report.ignored == ["bert/embeddings/word_embeddings/adam_m",
                              "cls/predictions/output_bias", "global_step"]
    for name, value in _model_values().items():
        np.testing.assert_array_equal(model[name].numpy(), value, err_msg=name)
    np.testing.assert_array_equal(model["output_weights"].numpy(),
                                  np.full([2, 4], 0.02, np.float32))
    # Google's log lines.
    assert f"  name = {WORD}:0, shape = (10, 4), *INIT_FROM_CKPT*" in logger.lines
    assert f"  name = {LN_BETA}:0, shape = (4,), *INIT_FROM_CKPT*" in logger.lines
    assert "  name = output_weights:0, shape = (2, 4)" in logger.lines


@pytest.mark.parametrize("suffix", ["", ".index", ".meta", ".data-00000-of-00001"])
def test_resolve_bundle_paths(google_checkpoint_dir, suffix):
    prefix = os.path.join(google_checkpoint_dir, "bert_model.ckpt")
    assert checkpoint.resolve_checkpoint_path(prefix + suffix) == prefix


def test_resolve_directory_without_state_file(google_checkpoint_dir, tmp_path):
    # Google's released folder: its only bundle.
    assert checkpoint.resolve_checkpoint_path(google_checkpoint_dir) == os.path.join(
        google_checkpoint_dir, "bert_model.ckpt")
    # Several model.ckpt-N and no state file: the highest step.
    for step in (5, 20, 10):
        checkpoint.save_checkpoint(str(tmp_path), step, _training_state(step))
    os.remove(tmp_path / "checkpoint")
    assert checkpoint.resolve_checkpoint_path(str(tmp_path)) == str(tmp_path / "model.ckpt-20")


def test_resolve_errors_name_the_path(tmp_path):
    missing = str(tmp_path / "nope" / "bert_model.ckpt")
    with pytest.raises(checkpoint.CheckpointNotFoundError) as info:
        checkpoint.resolve_checkpoint_path(missing)
    assert missing in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(checkpoint.CheckpointNotFoundError, match=str(tmp_path)):
        checkpoint.resolve_checkpoint_path(str(tmp_path))
    with pytest.raises(checkpoint.CheckpointNotFoundError, match="nope"):
        checkpoint.init_from_checkpoint(missing, _classifier_model())


def test_init_errors_list_missing_and_misshaped_bert_variables(google_checkpoint_dir):
    model = _classifier_model()
    model[KERNEL] = tf.Variable(tf.zeros([4, 8]))
    model["bert/pooler/dense/kernel"] = tf.Variable(tf.zeros([4, 4]))
    prefix = os.path.join(google_checkpoint_dir, "bert_model.ckpt")
    with pytest.raises(checkpoint.CheckpointError) as info:
        checkpoint.init_from_checkpoint(google_checkpoint_dir, model)
    lines = str(info.value).splitlines()
    assert lines[0] == (f"2 variable(s) required from the checkpoint are missing or mis-shaped "
                        f"in {prefix}:")
    assert lines[1:] == [f"  {KERNEL}: shape [4, 4] in the checkpoint, [4, 8] in the model",
                         "  bert/pooler/dense/kernel: not in the checkpoint"]
    assert not model[WORD].numpy().any()          # nothing assigned


def test_init_skips_misshaped_variable_outside_required_prefixes(google_checkpoint_dir):
    model = _classifier_model()
    model["cls/predictions/output_bias"] = tf.Variable(tf.zeros([7]))   # 10 in the checkpoint
    logger = _ListLogger()
    report = checkpoint.init_from_checkpoint(google_checkpoint_dir, model, logger=logger)
    assert report.shape_mismatch == ["cls/predictions/output_bias"]
    assert not model["cls/predictions/output_bias"].numpy().any()
    assert any("cls/predictions/output_bias has shape [10]" in line for line in logger.lines)


def test_init_with_no_required_prefix_accepts_partial_checkpoint(tmp_path):
    prefix = checkpoint.write_bundle(str(tmp_path / "part.ckpt"), {WORD: _model_values()[WORD]})
    model = _classifier_model()
    report = checkpoint.init_from_checkpoint(prefix, model, required_prefixes=())
    assert report.initialized == [WORD]
    assert report.not_in_checkpoint == [KERNEL, LN_BETA, "output_weights", "output_bias"]
