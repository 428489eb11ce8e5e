"""Hugging Face `tokenizers` on pre-split words: ids and word index of every piece.

This is the alignment Hugging Face's token-classification examples label with (the first piece
of each word gets the word's label, the others -100). Oracle venv only. Usage:

    python hf_word_ids.py REQUEST.json

REQUEST: {"vocab_file": ..., "lowercase": true, "sentences": [[word, ...], ...]}.
Prints JSON: per sentence {"ids": [...], "word_ids": [int or null, ...]} with [CLS]/[SEP].
"""

import json
import sys

from tokenizers import BertWordPieceTokenizer


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    tokenizer = BertWordPieceTokenizer(request["vocab_file"], lowercase=request["lowercase"])
    encodings = tokenizer.encode_batch(request["sentences"], is_pretokenized=True)
    print(json.dumps([{"ids": e.ids, "word_ids": e.word_ids} for e in encodings]))


if __name__ == "__main__":
    main(sys.argv[1])
