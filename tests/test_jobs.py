"""The job skeleton: the task protocol, the shared start-up, configs built from flags."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_mgpu.configs.base import ModelFiles, TrainConfig, TrainOptions
from bert_mgpu.configs.classifier import ClassifierConfig
from bert_mgpu.configs.pretraining import PretrainingConfig
from bert_mgpu.engine.job import start_job
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.base import JobTask
from bert_mgpu.tasks.classifier import BertClassifier
from bert_mgpu.tasks.pretraining import BertPretrainer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = {"vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 32, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": 32, "type_vocab_size": 2}


def _classifier_batch(n=6, seq=8, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, 50, size=[n, seq]).astype(np.int32)
    return {"input_ids": tf.constant(ids), "input_mask": tf.ones([n, seq], tf.int32),
            "segment_ids": tf.zeros([n, seq], tf.int32),
            "label_ids": tf.constant(rng.randint(0, 3, size=[n, 1]).astype(np.int32)),
            "is_real_example": tf.ones([n, 1], tf.int32)}


def _pretraining_batch(n=6, seq=8, preds=3, seed=0):
    rng = np.random.RandomState(seed)
    weights = (rng.rand(n, preds) < 0.7).astype(np.float32)
    return {"input_ids": tf.constant(rng.randint(1, 50, size=[n, seq]).astype(np.int32)),
            "input_mask": tf.ones([n, seq], tf.int32),
            "segment_ids": tf.zeros([n, seq], tf.int32),
            "masked_lm_positions": tf.constant(rng.randint(1, seq, size=[n, preds])
                                               .astype(np.int32)),
            "masked_lm_ids": tf.constant(rng.randint(1, 50, size=[n, preds]).astype(np.int32)),
            "masked_lm_weights": tf.constant(weights),
            "next_sentence_labels": tf.constant(rng.randint(0, 2, size=[n, 1])
                                                .astype(np.int32))}


def _slices(features, n):
    size = int(features["input_ids"].shape[0]) // n
    return [{k: v[i * size:(i + 1) * size] for k, v in features.items()} for i in range(n)]


@pytest.mark.parametrize("make_task,batch", [
    (lambda c: BertClassifier(c, 3), _classifier_batch),
    (lambda c: BertPretrainer(c), _pretraining_batch),
    (lambda c: BertPretrainer(c, next_sentence=False), _pretraining_batch),
])
def test_tasks_follow_the_protocol_and_shares_add_up(make_task, batch):
    task = make_task(BertConfig.from_dict(TINY))
    assert isinstance(task, JobTask)
    features = batch()
    context = task.context(features)
    whole = task.tower_loss(features, context, training=False)
    # The global batch's loss, from the task's own logged metrics of the whole batch.
    expected = float(task.metrics(whole["sums"], context)["loss"])
    assert float(whole["loss"]) == pytest.approx(expected, rel=1e-6)
    for n in (2, 3):
        shares = [task.tower_loss(s, context, training=False) for s in _slices(features, n)]
        # Each slice returns its share: the shares add up to the global loss (no rescaling).
        assert sum(float(s["loss"]) for s in shares) == pytest.approx(expected, rel=1e-5)
    outputs = task.predict(features)
    assert outputs and all(int(v.shape[0]) == 6 for v in outputs.values())


def test_classifier_loss_is_the_mean_cross_entropy_and_predict_is_a_dict():
    task = BertClassifier(BertConfig.from_dict(TINY), 3, label_names=["a", "b", "c"])
    features = _classifier_batch()
    probabilities = task.predict(features)["probabilities"].numpy()
    labels = features["label_ids"].numpy()[:, 0]
    mean_ce = float(np.mean(-np.log(probabilities[np.arange(6), labels])))
    context = task.context(features)
    assert float(task.tower_loss(features, context, training=False)["loss"]) == \
        pytest.approx(mean_ce, rel=1e-5)
    sums = {k: v.numpy() for k, v in task.eval_sums(features).items()}
    result = task.eval_metrics(sums)
    accuracy = float(np.mean(np.argmax(probabilities, -1) == labels))
    assert result["eval_accuracy"] == pytest.approx(accuracy)
    assert {"eval_f1_a", "eval_f1_b", "eval_f1_c", "eval_f1_macro"} <= set(result)
    with pytest.raises(ValueError, match="2 label names for 3 labels"):
        BertClassifier(BertConfig.from_dict(TINY), 3, label_names=["a", "b"])


def _config_file(tmp_path, **changes):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(TINY, **changes)))
    return str(path)


def test_start_job_is_the_shared_start_up(tmp_path):
    model = ModelFiles(bert_config_file=_config_file(tmp_path), max_seq_length=16)
    cfg = PretrainingConfig(model=model, train=TrainOptions(n_gpus=3, random_seed=7),
                            output_dir=str(tmp_path / "out" / "nested"), input_file="unused",
                            do_train=True, flags={"n_gpus": 3})
    job = start_job(cfg)
    assert len(job.devices) == 3 and job.chief and job.num_workers == 1
    assert job.bert_config.hidden_size == 16
    assert os.path.isdir(cfg.output_dir)
    job.save_effective_config(labels=["x"])
    saved = json.loads((tmp_path / "out" / "nested" / "run_config.json").read_text())
    assert saved == {"n_gpus": 3, "labels": ["x"]}
    assert (tmp_path / "out" / "nested" / "bert_config.json").exists()
    # The seed is set: the same draws as a fresh tf.random.set_seed(7).
    first = tf.random.uniform([3]).numpy()
    tf.random.set_seed(7)
    np.testing.assert_array_equal(first, tf.random.uniform([3]).numpy())
    too_long = PretrainingConfig(model=ModelFiles(bert_config_file=model.bert_config_file,
                                                  max_seq_length=33),
                                 train=TrainOptions(), output_dir=str(tmp_path / "o2"),
                                 input_file="unused", do_train=True)
    with pytest.raises(ValueError, match=r"--max_seq_length=33 is longer than "
                                         r"max_position_embeddings \(32\)"):
        start_job(too_long)


@pytest.mark.parametrize("precision,dtype", [("fp32", tf.float32), ("bf16", tf.bfloat16),
                                             ("fp16", tf.float16)])
def test_the_job_computes_in_the_precision_of_its_flag(tmp_path, precision, dtype):
    """--precision reaches the model: every job builds its task with `job.compute_dtype()`,
    which must be the flag's dtype (the trainer's side, fp16's loss scale, is held by
    test_training.py's test_mixed_precision_close_to_fp32; that the model then computes in it,
    by test_modeling.py)."""
    cfg = PretrainingConfig(model=ModelFiles(bert_config_file=_config_file(tmp_path),
                                             max_seq_length=16),
                            train=TrainOptions(precision=precision), output_dir=str(tmp_path),
                            input_file="unused", do_train=True)
    assert start_job(cfg).compute_dtype() == dtype


def test_classifier_steps_are_derived_from_the_data():
    cfg = ClassifierConfig(model=ModelFiles(bert_config_file="x", vocab_file="v"),
                           train=TrainOptions(train_batch_size=4, n_gpus=2,
                                              num_accumulation_steps=2),
                           output_dir="out", data_dir="d", task_name="tsv", do_train=True,
                           num_train_epochs=3.0, warmup_proportion=0.1)
    train = cfg.train_config(num_train_examples=100, num_workers=2)
    # The fork's formula over the global batch of every worker: int(100 / 32 * 3) = 9.
    assert isinstance(train, TrainConfig)
    assert (train.num_train_steps, train.num_warmup_steps) == (9, 0)
    assert train.global_batch_size == 16 and train.output_dir == "out"
    assert cfg.train_config(1000).num_train_steps == 187
    with pytest.raises(ValueError, match="make 0 steps of 16 examples"):
        cfg.train_config(5)


# A script's config class and the checks its `main` runs (`module:name`).
_CONFIGS = {
    "classifier": ("bert_mgpu.configs.classifier:ClassifierConfig",
                   "bert_mgpu.data.user_processors:check_classifier_inputs"),
    "pretraining": ("bert_mgpu.configs.pretraining:PretrainingConfig",
                    "bert_mgpu.data.input_pipeline:check_pretraining_inputs"),
    "squad": ("bert_mgpu.configs.squad:SquadConfig",
              "bert_mgpu.data.squad_data:check_squad_inputs"),
    "ner": ("bert_mgpu.configs.ner:NerConfig", "bert_mgpu.data.ner_data:check_ner_inputs"),
}
_IMPORT_CONFIG = """
import importlib
def _named(path):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)
Config, check = (_named(p) for p in {paths!r})
"""


def _build_config_in_subprocess(script, argv, cwd):
    """Defines a script's flags, parses argv and prints the config (fresh FLAGS).

    The builders check the files the flags name (before TensorFlow starts): `cwd` holds them.
    """
    code = _IMPORT_CONFIG.format(paths=_CONFIGS[script]) + f"""
import dataclasses, json, sys
from absl import flags
from bert_mgpu import cli
cli.define_config_flags(Config)
flags.FLAGS(["prog"] + {argv!r})
cfg = cli.build_config(Config, check)
out = dataclasses.asdict(cfg)
out["defined"] = sorted(cli.flag_values_dict())
print(json.dumps(out, default=str))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, CUDA_VISIBLE_DEVICES="",
                                            PYTHONPATH=REPO), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tsv_data_dir(tmp_path):
    """`d/train.tsv`: the classifier's --data_dir=d, checked (with its columns) at start."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "train.tsv").write_text("sentence\tlabel\nfine\ta\n")


def test_flags_fill_the_configs_by_field_name(tmp_path):
    _tsv_data_dir(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps(dict(TINY, max_position_embeddings=64)))
    (tmp_path / "v.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    (tmp_path / "x").write_text("")
    out = _build_config_in_subprocess("classifier", [
        "--task_name=TSV", "--data_dir=d", "--bert_config_file=c.json", "--vocab_file=v.txt",
        "--output_dir=o", "--do_train", "--n_gpus=2", "--max_seq_length=64",
        "--do_lower_case=false", "--learning_rate=3e-5", "--label_list=b,a"], tmp_path)
    assert out["model"] == {"bert_config_file": "c.json", "init_checkpoint": None,
                            "vocab_file": "v.txt", "spm_model_file": None,
                            "do_lower_case": False, "max_seq_length": 64}
    assert out["train"]["n_gpus"] == 2 and out["train"]["learning_rate"] == 3e-5
    assert out["task_name"] == "tsv" and out["label_list"] == ["b", "a"]
    assert out["cluster"] is None and out["flags"]["n_gpus"] == 2
    # Every trainer option is a flag of the classifier script, and nothing of pretraining's.
    assert set(out["train"]) <= set(out["defined"])
    assert "max_predictions_per_seq" not in out["defined"]

    out = _build_config_in_subprocess("pretraining", [
        "--input_file=x", "--output_dir=o", "--bert_config_file=c.json", "--do_train",
        "--num_train_steps=7", "--max_seq_length=32"], tmp_path)
    assert out["num_train_steps"] == 7 and out["model"]["max_seq_length"] == 32
    # Google's run_pretraining.py has no tokenizer flags; --vocab_file is --dynamic_masking's
    # (the [MASK]/[CLS]/[SEP] ids and the random words), optional without it.
    assert "do_lower_case" not in out["defined"] and "spm_model_file" not in out["defined"]
    assert "vocab_file" in out["defined"] and out["model"]["vocab_file"] is None
    assert out["dynamic_masking"] is False


# Each script's runs of test_fine_tuning_scripts_default_to_bias_corrected_adam: (script's
# flags, argv shared by the runs).
_OPTIMIZER_RUNS = {
    "classifier": ["--task_name=tsv", "--data_dir=d", "--bert_config_file=c.json",
                   "--vocab_file=v.txt", "--output_dir=o", "--do_train", "--max_seq_length=16"],
    "squad": ["--train_file=train.json", "--bert_config_file=c.json", "--vocab_file=v.txt",
              "--output_dir=o", "--do_train", "--max_seq_length=32",
              "--max_query_length=8", "--doc_stride=8"],
    "ner": ["--data_dir=ner", "--bert_config_file=c.json", "--vocab_file=v.txt",
            "--output_dir=o", "--do_train", "--max_seq_length=16"],
    "pretraining": ["--input_file=x", "--bert_config_file=c.json", "--output_dir=o",
                    "--do_train", "--max_seq_length=16"],
}


def _optimizer_of_runs(script, extras, cwd):
    """For each `extra` flag list: the (optimizer, adam_bias_correction) of the config the
    script builds from its argv plus `extra`, or the one-line error (one process per script,
    the flags parsed again for each run)."""
    code = _IMPORT_CONFIG.format(paths=_CONFIGS[script]) + f"""
import json
from absl import flags
from bert_mgpu import cli
cli.define_config_flags(Config)
out = []
for extra in {extras!r}:
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["prog"] + {_OPTIMIZER_RUNS[script]!r} + extra)
    try:
        cfg = cli.build_config(Config, check)
        out.append([cfg.train.optimizer, cfg.train.adam_bias_correction])
    except cli.FlagError as e:
        out.append(str(e))
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, CUDA_VISIBLE_DEVICES="",
                                            PYTHONPATH=REPO), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fine_tuning_scripts_default_to_bias_corrected_adam(tmp_path):
    """README, deliberate differences: run_classifier_mgpu.py, run_squad.py and run_ner.py
    train with bias-corrected Adam unless --adam_bias_correction=false (Google's
    AdamWeightDecay); run_pretraining.py keeps Google's. LAMB corrects its moments anyway: the
    fine-tuning default does not stop --optimizer=lamb, an explicit
    --adam_bias_correction=true with it is refused naming the flag."""
    _tsv_data_dir(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps(dict(TINY, max_position_embeddings=64)))
    (tmp_path / "v.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    (tmp_path / "x").write_text("")
    (tmp_path / "train.json").write_text('{"version": "1.1", "data": []}')
    (tmp_path / "ner").mkdir()
    (tmp_path / "ner" / "train.txt").write_text("a O\n")
    extras = [[], ["--adam_bias_correction=false"], ["--optimizer=lamb"],
              ["--optimizer=lamb", "--adam_bias_correction=true"]]
    refused = "--adam_bias_correction applies to --optimizer=adamw"
    for script in ("classifier", "squad", "ner"):
        runs = _optimizer_of_runs(script, extras, tmp_path)
        assert runs[:3] == [["adamw", True], ["adamw", False], ["lamb", False]], script
        assert runs[3].startswith(refused), (script, runs[3])
    runs = _optimizer_of_runs("pretraining", extras + [["--adam_bias_correction=true"]],
                              tmp_path)
    assert runs[:3] == [["adamw", False], ["adamw", False], ["lamb", False]]
    assert runs[3].startswith(refused) and runs[4] == ["adamw", True]
