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

from bert_mgpu import cli
from bert_mgpu.configs.vocab import CreateVocabConfig
from bert_mgpu.scripts import run

cli.define_config_flags(CreateVocabConfig)


def main(_):
    from bert_mgpu.data.vocab_builder import create_vocab
    create_vocab(cli.build_config(CreateVocabConfig))


if __name__ == "__main__":
    run(main)
