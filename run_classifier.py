#!/usr/bin/env python
r"""BERT fine-tuning for classification under Google's script name (TF2, in-graph towers).

The same job as run_classifier_mgpu.py (the multi-GPU fork's name), so the commands of Google's
README, multilingual.md and tutorials run unchanged:
  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

--n_gpus defaults to 1 (Google's single device); --train_batch_size is per tower. Tasks: cola,
mnli, mrpc, xnli, stsb, tsv, and users' own DataProcessor classes (--processors_file). Writes
eval_results.txt (--do_eval), test_results.tsv and predict.txt (--do_predict) in --output_dir.
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
