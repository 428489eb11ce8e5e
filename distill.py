#!/usr/bin/env python
r"""Distils a fine-tuned classifier, run_ner.py or run_squad.py run (the teacher) into a smaller
student run.

Usage:
  python distill.py --teacher_dir=$TEACHER_RUN --output_dir=$STUDENT_RUN \
    --do_train=true --do_eval=true --do_predict=true --student_num_layers=6 \
    --temperature=2 --alpha=0.5 --train_batch_size=32 --learning_rate=5e-5 \
    --num_train_epochs=3 --n_gpus=2

The teacher is a run_classifier_mgpu.py --output_dir of one classification task: its
run_config.json gives the task, --data_dir, vocabulary, casing, --max_seq_length and labels
(each unless given here), its bert_config.json and latest checkpoint the teacher. The student
has --student_num_layers layers (default half the teacher's) started from the teacher's
layers (--student_layers=spread: 0, 2, 4, ...; first: 0..k-1), or is a smaller pretrained
model (--student_config with --init_checkpoint). Loss: T^2 * KL(teacher_T || student_T) +
alpha * cross-entropy(labels). --output_dir becomes a normal classifier run (checkpoints with
Google's names, bert_config.json, run_config.json, eval_results.txt, test_results.tsv,
predict.txt) that export_saved_model.py --output_dir and run_classifier.py read.

A run_ner.py --output_dir as --teacher_dir: the student learns the teacher's tag
distributions at each labelled word (and the tags), with run_ner.py's data flags (the
teacher's by default, --tag_scheme included), and --output_dir becomes a run_ner.py run that
run_ner.py --do_predict reads. A run_squad.py --output_dir as --teacher_dir: the student
learns the teacher's start and end distributions over each window (and the answers), with
run_squad.py's flags (the teacher's files, windows and answer flags by default), and
--output_dir becomes a run_squad.py run (predictions.json; export_saved_model.py --task=squad
reads it). --tinybert_* and --minilm_* add TinyBERT's and MiniLM's losses
on hidden states and attention (docs/distill.md).
"""

from bert_mgpu import cli
from bert_mgpu.configs.distill import (
    DistillConfig,
    DistillNerConfig,
    DistillSquadConfig,
    teacher_kind,
)
from bert_mgpu.scripts import run

cli.define_config_flags(DistillConfig, DistillNerConfig, DistillSquadConfig)


def main(_):
    # Every flag and file checked before TensorFlow is loaded.
    kind = teacher_kind(cli.flag_values_dict()["teacher_dir"])
    if kind == "squad":
        from bert_mgpu.data.squad_data import check_squad_inputs
        cfg = cli.build_config(DistillSquadConfig, check_squad_inputs)
        from bert_mgpu.tasks.distill import run_distill_squad
        run_distill_squad(cfg)
        return
    if kind == "ner":
        from bert_mgpu.data.ner_data import check_ner_inputs
        cfg = cli.build_config(DistillNerConfig, check_ner_inputs)
        from bert_mgpu.tasks.distill import run_distill_ner
        run_distill_ner(cfg)
        return
    from bert_mgpu.data.user_processors import check_classifier_inputs
    cfg = cli.build_config(DistillConfig, check_classifier_inputs)
    from bert_mgpu.tasks.distill import run_distill
    run_distill(cfg)


if __name__ == "__main__":
    run(main)
