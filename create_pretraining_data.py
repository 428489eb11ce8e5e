#!/usr/bin/env python
r"""Creates masked-LM / next-sentence pretraining TFRecords (Google's create_pretraining_data.py).

Usage (Google's flags; the same input, vocabulary, flags and seed give Google's records):
  python create_pretraining_data.py \
    --input_file=./sample_text.txt --output_file=/tmp/tf_examples.tfrecord \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True \
    --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \
    --random_seed=12345 --dupe_factor=5

Input: one sentence per line, a blank line between documents. Large corpora: add
--num_workers=N (sharded mode, memory bounded by --shard_size_mb). Options Google's script does not
have: --sentence_order_prediction, --no_next_sentence, --span_masking [--span_length],
--word_segmented_input, --dynamic_masking (unmasked records with word_starts, masked anew every
epoch by run_pretraining.py --dynamic_masking), --pack_sequences [--document_ids]. A ModernBERT
tokenizer.json as --vocab_file makes masked-LM-only records (docs/modernbert.md). TensorFlow is
not imported.
"""

import os
import time

from bert_mgpu import cli, summary
from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig
from bert_mgpu.scripts import run

cli.define_config_flags(CreatePretrainingDataConfig)


def main(_):
    from bert_mgpu.data.pretraining_data import create_pretraining_data
    from bert_mgpu.tokenization import is_tokenizer_json
    started = time.time()
    cfg = cli.build_config(CreatePretrainingDataConfig)
    stats = create_pretraining_data(cfg)
    outputs = [path.strip() for path in cfg.output_file.split(",") if path.strip()]
    # A tokenizer.json (ModernBERT) trains masked-LM only; its records are masked by
    # run_pretraining.py when they were written unmasked.
    modernbert = {"no_next_sentence": "true"} if is_tokenizer_json(cfg.vocab_file) else {}
    if modernbert and cfg.dynamic_masking:
        modernbert.update(dynamic_masking="true", vocab_file=cfg.vocab_file)
    summary.print_summary(
        started, [("result", f"{stats.instances:,} instances from {stats.documents:,} "
                             f"documents")],
        (os.path.dirname(os.path.abspath(outputs[0])), [os.path.basename(p) for p in outputs]),
        None, summary.command(
            "run_pretraining.py", "--bert_config_file=BERT_CONFIG --output_dir=OUTPUT_DIR",
            input_file=summary.shown_path(cfg.output_file), do_train="true",
            max_seq_length=cfg.max_seq_length,
            max_predictions_per_seq=cfg.max_predictions_per_seq, **modernbert))


if __name__ == "__main__":
    run(main)
