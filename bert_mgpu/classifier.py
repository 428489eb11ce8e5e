"""run_classifier_mgpu.py's job: multi-tower fine-tuning, evaluation and prediction.

Follows Google's `run_classifier.py` and the multi-GPU fork: `train_batch_size` is per tower,
`num_train_steps = int(num_train_examples / (train_batch_size * n_gpus *
num_accumulation_steps) * num_train_epochs)`, warmup is `warmup_proportion` of it, gradients are
clipped to global norm 1.0 (Google does; the fork dropped it). Evaluation and prediction run on the
first tower's device and count every example: `eval_results.txt` (Google's keys plus macro-F1 and
per-class precision/recall/F1), `test_results.tsv` (Google: one row of class probabilities per
test example) and `predict.txt` (the fork: one predicted label index per line), in input order.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu import heads, modeling, tokenization, towers, training
from bert_mgpu.cluster import Cluster
from bert_mgpu.config import BertConfig
from bert_mgpu.data import classifier_data, features, input_pipeline, processors


def num_train_steps_for(num_examples: int, global_batch_size: int, epochs: float) -> int:
    """The fork's formula: int(examples / global batch * epochs)."""
    return int(num_examples / global_batch_size * epochs)


def _write_lines_atomically(path: str, lines) -> None:
    tmp = path + ".incomplete"
    with tf.io.gfile.GFile(tmp, "w") as f:
        for line in lines:
            f.write(line)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_predictions(output_dir: str, probabilities: np.ndarray) -> None:
    """test_results.tsv (Google) and predict.txt (the fork), one line per example."""
    _write_lines_atomically(
        os.path.join(output_dir, "test_results.tsv"),
        ("\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    _write_lines_atomically(
        os.path.join(output_dir, "predict.txt"),
        (f"{int(i)}\n" for i in np.argmax(probabilities, axis=-1)))


def run_classifier(cfg) -> dict:
    """Runs run_classifier_mgpu.py with a `cli.ClassifierConfig`; returns the eval results."""
    devices = towers.setup_devices(cfg.train.n_gpus)  # first TF work: may split the CPU
    cluster = Cluster(cfg.cluster) if cfg.cluster is not None else None
    chief = cluster is None or cluster.is_chief
    num_workers = cluster.num_workers if cluster is not None else 1
    tokenization.validate_case_matches_checkpoint(cfg.do_lower_case, cfg.init_checkpoint)
    bert_config = BertConfig.from_json_file(cfg.bert_config_file)
    if cfg.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={cfg.max_seq_length} is longer than "
                         f"max_position_embeddings ({bert_config.max_position_embeddings}) in "
                         f"{cfg.bert_config_file}")
    processor = processors.get_processor(cfg.task_name, cfg.label_list)
    tokenizer = tokenization.FullTokenizer(cfg.vocab_file, cfg.do_lower_case,
                                           spm_model_file=cfg.spm_model_file)
    label_list = processor.get_labels(cfg.data_dir)
    tf.io.gfile.makedirs(cfg.output_dir)

    def features_for(split, stem, read):
        key = classifier_data.cache_key(
            cfg.task_name, split, processor.input_files(cfg.data_dir, split), cfg.vocab_file,
            cfg.spm_model_file, cfg.do_lower_case, cfg.max_seq_length, label_list,
            cfg.truncation, cfg.head_tokens)
        return classifier_data.cached_features(
            lambda: read(cfg.data_dir), stem, cfg.output_dir, key, label_list,
            cfg.max_seq_length, tokenizer, cfg.truncation, cfg.head_tokens)

    shapes = features.classifier_shapes(cfg.max_seq_length)
    train_cfg = cfg.train
    train_file = None
    if cfg.do_train:
        train_file, num_train = features_for("train", "train", processor.get_train_examples)
        global_batch = train_cfg.global_batch_size * num_workers
        steps = num_train_steps_for(num_train, global_batch, cfg.num_train_epochs)
        if steps < 1:
            raise ValueError(f"{num_train} training examples and --num_train_epochs="
                             f"{cfg.num_train_epochs} make 0 steps of {global_batch} examples "
                             f"(train_batch_size x n_gpus x num_accumulation_steps x workers)")
        train_cfg = dataclasses.replace(train_cfg, num_train_steps=steps,
                                        num_warmup_steps=int(steps * cfg.warmup_proportion))
        logging.info("***** Running training: %d examples, %g epochs, %d steps *****",
                     num_train, cfg.num_train_epochs, steps)
    if chief:
        training.save_effective_config(cfg.output_dir, dict(cfg.flags, labels=label_list),
                                       bert_config)

    tf.random.set_seed(train_cfg.random_seed)
    task = heads.BertClassifier(bert_config, len(label_list),
                                compute_dtype=training.compute_dtype(train_cfg.precision))
    trainer = training.Trainer(task, train_cfg, devices, cluster)
    if cfg.layerwise_lr_decay != 1.0:
        trainer.optimizer.set_lr_multipliers(modeling.layerwise_lr_multipliers(
            trainer.variables, bert_config.num_hidden_layers, cfg.layerwise_lr_decay))

    if cfg.do_train:
        trainer.train(input_pipeline.record_dataset(
            [train_file], shapes, train_cfg.global_batch_size, is_training=True,
            seed=train_cfg.random_seed, shuffle_buffer=train_cfg.shuffle_buffer_size,
            num_shards=num_workers, shard_index=cluster.task_index if cluster else 0))
    else:
        trainer.restore_or_initialize()

    result = {}
    if not chief:
        return result  # evaluation, prediction and their files are the chief's
    if cfg.do_eval:
        eval_file, num_eval = features_for("dev", "eval", processor.get_dev_examples)
        logging.info("***** Running evaluation: %d examples, batch size %d *****", num_eval,
                     cfg.eval_batch_size)
        result = trainer.evaluate(input_pipeline.record_dataset(
            [eval_file], shapes, cfg.eval_batch_size, is_training=False),
            label_names=label_list)
        result["eval_examples"] = num_eval
        training.write_eval_results(os.path.join(cfg.output_dir, "eval_results.txt"), result)
    if cfg.do_predict:
        predict_file, num_predict = features_for("test", "predict",
                                                 processor.get_test_examples)
        logging.info("***** Running prediction: %d examples, batch size %d *****", num_predict,
                     cfg.predict_batch_size)
        probabilities = trainer.predict(input_pipeline.record_dataset(
            [predict_file], shapes, cfg.predict_batch_size, is_training=False))
        if len(probabilities) != num_predict:
            raise RuntimeError(f"predicted {len(probabilities)} of {num_predict} examples")
        write_predictions(cfg.output_dir, probabilities)
        logging.info("Wrote %d predictions to %s (test_results.tsv, predict.txt)", num_predict,
                     cfg.output_dir)
    return result
