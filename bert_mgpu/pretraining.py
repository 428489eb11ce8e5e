"""run_pretraining.py's job: masked-LM + next-sentence pretraining with towers, then eval."""

import os

import tensorflow as tf
from absl import logging

from bert_mgpu import heads, towers, training
from bert_mgpu.cluster import Cluster
from bert_mgpu.config import BertConfig
from bert_mgpu.data import features, input_pipeline


def run_pretraining(cfg) -> dict:
    """Runs run_pretraining.py with a `cli.PretrainingConfig`; returns the eval results (if any).
    """
    # First TensorFlow work of the process: the CPU can only be split into logical tower
    # devices before the runtime starts.
    devices = towers.setup_devices(cfg.train.n_gpus)
    cluster = Cluster(cfg.cluster) if cfg.cluster is not None else None
    chief = cluster is None or cluster.is_chief
    bert_config = BertConfig.from_json_file(cfg.bert_config_file)
    if cfg.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={cfg.max_seq_length} is longer than "
                         f"max_position_embeddings ({bert_config.max_position_embeddings}) in "
                         f"{cfg.bert_config_file}")
    input_files = input_pipeline.expand_input_files(cfg.input_file)
    shapes = features.pretraining_shapes(cfg.max_seq_length, cfg.max_predictions_per_seq)
    input_pipeline.check_record_lengths(
        input_files, shapes, f"--max_seq_length={cfg.max_seq_length} / "
                             f"--max_predictions_per_seq={cfg.max_predictions_per_seq}")
    logging.info("Input files: %d (%s%s)", len(input_files), ", ".join(input_files[:3]),
                 ", ..." if len(input_files) > 3 else "")

    tf.io.gfile.makedirs(cfg.output_dir)
    if chief:
        training.save_effective_config(cfg.output_dir, cfg.flags, bert_config)
    tf.random.set_seed(cfg.train.random_seed)
    task = heads.BertPretrainer(bert_config,
                                compute_dtype=training.compute_dtype(cfg.train.precision),
                                next_sentence=not cfg.no_next_sentence)
    trainer = training.Trainer(task, cfg.train, devices, cluster)

    if cfg.do_train:
        dataset = input_pipeline.record_dataset(
            input_files, shapes, cfg.train.global_batch_size, is_training=True,
            seed=cfg.train.random_seed, shuffle_buffer=cfg.train.shuffle_buffer_size,
            num_shards=trainer.num_workers,
            shard_index=cluster.task_index if cluster is not None else 0)
        trainer.train(dataset)
    result = {}
    if cfg.do_eval and chief:
        if not cfg.do_train:
            trainer.restore_or_initialize()
        dataset = input_pipeline.record_dataset(input_files, shapes, cfg.eval_batch_size,
                                                is_training=False)
        result = trainer.evaluate(dataset, cfg.max_eval_steps)
        training.write_eval_results(os.path.join(cfg.output_dir, "eval_results.txt"), result)
    return result
