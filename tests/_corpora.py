"""Readers of the corpora the tests share (the shipped KJV and SST-2-style TSV files)."""

import gzip
import os

from _oracle import DATA

KJV = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")


def read_kjv():
    """The shipped King James Bible, one verse per line, blank lines between chapters."""
    with gzip.open(KJV, "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def read_tsv_sentences(paths):
    """The `sentence` column of SST-2-style TSV files (header skipped; `.gz` allowed)."""
    texts = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", newline="\n") as f:
            lines = f.read().split("\n")
        texts.extend(line.split("\t")[0] for line in lines[1:] if line)
    return texts
