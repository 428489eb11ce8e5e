#!/usr/bin/env python
r"""BERT fine-tuning for classification with in-graph towers (the multi-GPU fork's script, TF2).

Usage (the fork's launch line works with only task name and paths changed):
  export CUDA_VISIBLE_DEVICES=1,2,3,4,5,6
  python -u run_classifier_mgpu.py --task_name=tsv --do_train=true --do_eval=true \
    --do_predict=true --data_dir=$DATA_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=12 --learning_rate=2e-5 --num_train_epochs=3 --output_dir=$OUT \
    --warmup_proportion=0.1 --eval_batch_size=8 --n_gpus=6

Tasks: cola, mnli, mrpc, xnli (Google's file layouts), stsb (GLUE's STS-B, a regression),
tsv (train/dev/test.tsv with a header; a `label` column, one or two text columns chosen by name
or --text_columns; with --task_type=regression a number, with --task_type=multilabel
comma-separated labels) and your own DataProcessor classes (--processors_file=FILE.py, e.g. the
fork's HighLevelProcessor for --task_name=high_level). Google's name for this script:
run_classifier.py.
--classifier_input chooses what the output layer reads (pooled, cls, mean, cls_last4).
--train_batch_size is per tower. Writes eval_results.txt (--do_eval), test_results.tsv and
predict.txt (--do_predict) in --output_dir.
"""

from bert_mgpu import cli
from bert_mgpu.configs.classifier import ClassifierConfig
from bert_mgpu.scripts import run

cli.define_config_flags(ClassifierConfig)


def processor_flags(path, taken):
    """The --processors_file's own flags (its flags.DEFINE_*), parsed with the script's."""
    from bert_mgpu.data.user_processors import declared_flags
    return declared_flags(path, taken)


cli.flags_from_file("processors_file", processor_flags)


def main(_):
    from bert_mgpu.data.user_processors import check_classifier_inputs
    # Every flag and file checked before TensorFlow is loaded.
    cfg = cli.build_config(ClassifierConfig, check_classifier_inputs)
    from bert_mgpu.tasks import classifier, multitask
    run_job = multitask.run_multitask_classifier if cfg.num_tasks > 1 else \
        classifier.run_classifier
    run_job(cfg)


if __name__ == "__main__":
    run(main)
