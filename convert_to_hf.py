#!/usr/bin/env python
"""Converts a Google-layout BERT checkpoint (ours or Google's released ones) into a Hugging Face
folder, the other direction of convert_hf_checkpoint.py.

Usage:
  python convert_to_hf.py --bert_config_file=bert_config.json --init_checkpoint=model.ckpt-1000 \
    --vocab_file=vocab.txt --do_lower_case=true --output_dir=path/to/hf_bert [--label_list=neg,pos]
  python convert_to_hf.py ... --init_checkpoint=path/to/multitask_run --task_label=sentiment

Writes config.json (Google's tanh "gelu" as Hugging Face's "gelu_new", "gelu_exact" as "gelu"),
model.safetensors (written without PyTorch), vocab.txt, tokenizer_config.json and
special_tokens_map.json. The masked-LM/next-sentence heads and a classifier head are written when
the checkpoint has them, so transformers loads the folder with BertModel, BertForPreTraining or
BertForSequenceClassification (num_labels and id2label from --label_list, else from the
run_config.json next to the checkpoint). A multi-task run of run_classifier_mgpu.py has one head
per task: --task_label chooses the one written (its labels and task type: regression and
multilabel become Hugging Face's problem_type).

A ModernBERT-shaped config (position_embedding_type "rope") is written with the tokenizer files
next to --vocab_file (its tokenizer.json) as the model of its fine-tuned head:
ModernBertForSequenceClassification (run_classifier.py), ModernBertForTokenClassification
(run_ner.py, its tags as id2label), ModernBertForQuestionAnswering (run_squad.py),
ModernBertForMultipleChoice (run_multiple_choice.py); without one as ModernBertForMaskedLM.
"""

import time

from absl import logging

from bert_mgpu import cli, summary
from bert_mgpu.configs.serving import ConvertToHfConfig
from bert_mgpu.scripts import run

cli.define_config_flags(ConvertToHfConfig)


def main(_):
    from bert_mgpu.interop.hf_folders import convert_to_hf
    started = time.time()
    cfg = cli.build_config(ConvertToHfConfig)
    model = cfg.model
    paths = convert_to_hf(model.bert_config_file, model.init_checkpoint, model.vocab_file,
                          model.do_lower_case, cfg.output_dir, cfg.label_list, cfg.task_label)
    for name, path in paths.items():
        logging.info("wrote %s: %s", name, path)
    summary.print_summary(started, [], (cfg.output_dir, summary.files_written(cfg.output_dir,
                                                                             started)),
                          None, "transformers: AutoModel.from_pretrained("
                                f"{summary.shown_path(cfg.output_dir)!r})")


if __name__ == "__main__":
    run(main)
