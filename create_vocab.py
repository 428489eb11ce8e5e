#!/usr/bin/env python
"""Builds a WordPiece vocab.txt from your own corpus (Google released no such script).

Usage:
  python create_vocab.py \
    --input_file='corpus/*.txt.gz' --output_file=vocab.txt \
    --vocab_size=30522 --do_lower_case=True

Input: create_pretraining_data.py's format (one sentence per line; blank lines are ignored).
Words are split exactly as BasicTokenizer splits them, pieces are learned with SentencePiece BPE
(--algorithm=bpe, default; unigram and wordpiece too) and written in Google's layout ([PAD]=0,
[unused0..98], [UNK], [CLS], [SEP], [MASK], --reserved_tokens, more [unused], the characters,
the pieces, the ## characters): exactly --vocab_size lines, every character seen at least
--min_char_count times present (as `c`, and `##c` where a word can continue with it), read
unchanged by FullTokenizer here and by Google's tokenization.py. TensorFlow is not imported.
"""

import os
import time

from bert_mgpu import cli, summary
from bert_mgpu.configs.vocab import CreateVocabConfig
from bert_mgpu.scripts import run

cli.define_config_flags(CreateVocabConfig)


def main(_):
    from bert_mgpu.data.vocab_builder import create_vocab
    started = time.time()
    cfg = cli.build_config(CreateVocabConfig)
    stats = create_vocab(cfg)
    summary.print_summary(
        started, [("result", f"{stats.special + stats.learned:,} entries from "
                             f"{stats.lines:,} lines")],
        (os.path.dirname(os.path.abspath(cfg.output_file)), [os.path.basename(cfg.output_file)]),
        None, summary.command("create_pretraining_data.py", "--input_file=CORPUS "
                              "--output_file=RECORDS.tfrecord",
                              vocab_file=summary.shown_path(cfg.output_file)))


if __name__ == "__main__":
    run(main)
