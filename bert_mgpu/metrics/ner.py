"""Entity-level precision, recall and F1 as `conlleval` computes them, plus its token accuracy.

`conlleval` is the CoNLL-2000 shared task's Perl evaluation script (Erik Tjong Kim Sang), the one
every CoNLL NER result is reported with; several Python ports reproduce it. Its numbers are not
those of "extract the entity spans of gold and prediction and intersect the sets" in every case,
so this module follows the script's own procedure, token by token:

- A tag is split at its first hyphen into a chunk tag and a type ("B-PER" -> "B", "PER";
  "O" -> "O", ""). Sentence boundaries are handled as an "O" token that is not counted.
- `start_of_chunk(prev_tag, tag, prev_type, type)` / `end_of_chunk(...)` decide whether a chunk
  starts at / ended before the current token. The BIO rules are the Perl script's: a chunk starts
  at every B, at an I after O (an I- without B- opens a chunk) and wherever the type changes; it
  ends before B or O after B/I and wherever the type changes. For BIOES the rules are those of
  the IOBES-extended ports (also used by seqeval's `get_entities`): a chunk also starts at S,
  at E or I after E or S, at E after O, and always ends after E or S. On BIO and IOE input the
  extended rules decide exactly as the Perl script; the Perl script itself does not know S
  (it would join "S-PER S-PER" into one chunk), which is why the ports extended it.
- A guessed chunk is correct when it starts where a gold chunk starts, with the same type, the
  types agree on every token inside, and both end at the same token ("in_correct" state).
- precision = correct / found_guessed, recall = correct / found_correct (each 0 when its
  denominator is 0), F1 = 2PR / (P + R) (0 when P + R = 0); per type likewise.
- accuracy = tokens whose whole tag (chunk tag and type) equals the gold tag / all tokens.

Values are fractions in [0, 1]; `ConllevalResult.report()` prints conlleval's percentage text.
"""

import dataclasses
import functools
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

BOUNDARY = "-X-"  # conlleval's sentence-boundary token (a line starting with it is a break)

class ConllevalFormatError(ValueError):
    """Input that conlleval would reject; the message names the line."""


@functools.lru_cache(maxsize=4096)
def split_tag(tag: str) -> Tuple[str, str]:
    """Splits a tag at its first hyphen: "B-PER" -> ("B", "PER"), "O" -> ("O", "").

    Types may contain hyphens ("B-MISC-X" -> ("B", "MISC-X")), as in conlleval since 2004.
    """
    # Equal to conlleval's /^([^-]*)-(.*)$/ (first hyphen), without the regex cost.
    prefix, sep, type_ = tag.partition("-")
    return (prefix, type_) if sep else (tag, "")


def end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """Whether a chunk ended between the previous token and this one."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    if prev_tag not in ("O", ".") and prev_type != type_:
        return True
    # conlleval's bracket representation: "[" and "]" chunks have length 1.
    return prev_tag in ("[", "]")


def start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """Whether a chunk started between the previous token and this one."""
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S") and tag in ("E", "I"):
        return True
    if prev_tag == "O" and tag in ("E", "I"):
        return True
    if tag not in ("O", ".") and prev_type != type_:
        return True
    return tag in ("[", "]")


@functools.lru_cache(maxsize=65536)
def _boundaries(prev_tag: str, tag: str, prev_type: str, type_: str) -> Tuple[bool, bool]:
    """(end_of_chunk, start_of_chunk), memoized: tag sets are small, corpora are not."""
    return (end_of_chunk(prev_tag, tag, prev_type, type_),
            start_of_chunk(prev_tag, tag, prev_type, type_))


@dataclasses.dataclass(frozen=True)
class ChunkScores:
    """Chunk counts and scores (fractions) of one type or of all types.

    Attributes:
      correct: chunks guessed exactly (start, end, type).
      found_guessed: chunks in the prediction.
      found_correct: chunks in the gold data.
    """
    correct: int
    found_guessed: int
    found_correct: int

    @property
    def precision(self) -> float:
        return self.correct / self.found_guessed if self.found_guessed else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.found_correct if self.found_correct else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class ConllevalResult:
    """What conlleval reports.

    Attributes:
      overall: ChunkScores over all types.
      per_type: type -> ChunkScores, for every type found in gold or prediction (sorted).
      tokens: tokens counted (sentence boundaries excluded).
      correct_tags: tokens whose predicted tag equals the gold tag.
    """
    overall: ChunkScores
    per_type: Dict[str, ChunkScores]
    tokens: int
    correct_tags: int

    @property
    def accuracy(self) -> float:
        return self.correct_tags / self.tokens if self.tokens else 0.0

    def as_metrics(self, prefix: str = "eval_") -> Dict[str, float]:
        """Flat metrics: precision/recall/f1/accuracy overall, and precision/recall/f1 per type
        (`eval_f1_PER`, ...), as fractions."""
        out = {f"{prefix}precision": self.overall.precision,
               f"{prefix}recall": self.overall.recall,
               f"{prefix}f1": self.overall.f1,
               f"{prefix}accuracy": self.accuracy}
        for name, scores in self.per_type.items():
            if name:
                out[f"{prefix}precision_{name}"] = scores.precision
                out[f"{prefix}recall_{name}"] = scores.recall
                out[f"{prefix}f1_{name}"] = scores.f1
        return out

    def report(self) -> str:
        """conlleval's text output (percentages, two decimals)."""
        o = self.overall
        lines = [f"processed {self.tokens} tokens with {o.found_correct} phrases; "
                 f"found: {o.found_guessed} phrases; correct: {o.correct}."]
        if self.tokens > 0:
            lines.append(f"accuracy: {100 * self.accuracy:6.2f}%; "
                         f"precision: {100 * o.precision:6.2f}%; "
                         f"recall: {100 * o.recall:6.2f}%; FB1: {100 * o.f1:6.2f}")
        for name, s in self.per_type.items():
            lines.append(f"{name:>17}: precision: {100 * s.precision:6.2f}%; "
                         f"recall: {100 * s.recall:6.2f}%; FB1: {100 * s.f1:6.2f}  "
                         f"{s.found_guessed}")
        return "\n".join(lines) + "\n"


class _Counter:
    """conlleval's state machine over (gold tag, guessed tag) pairs."""

    def __init__(self):
        self.correct_chunk: Dict[str, int] = {}
        self.found_correct: Dict[str, int] = {}
        self.found_guessed: Dict[str, int] = {}
        self.tokens = 0
        self.correct_tags = 0
        self.in_correct = False
        self.last_correct, self.last_correct_type = "O", ""
        self.last_guessed, self.last_guessed_type = "O", ""

    def add(self, gold: str, guess: str, boundary: bool = False) -> None:
        if boundary:
            # conlleval: sentence breaks are always out of chunk, and not tokens.
            correct, correct_type, guessed, guessed_type = "O", "", "O", ""
        else:
            correct, correct_type = split_tag(gold)
            guessed, guessed_type = split_tag(guess)
        end_correct, start_correct = _boundaries(self.last_correct, correct,
                                                 self.last_correct_type, correct_type)
        end_guessed, start_guessed = _boundaries(self.last_guessed, guessed,
                                                 self.last_guessed_type, guessed_type)
        if self.in_correct:
            if end_correct and end_guessed and self.last_guessed_type == self.last_correct_type:
                self.in_correct = False
                _bump(self.correct_chunk, self.last_correct_type)
            elif end_correct != end_guessed or guessed_type != correct_type:
                self.in_correct = False
        if start_correct and start_guessed and guessed_type == correct_type:
            self.in_correct = True
        if start_correct:
            _bump(self.found_correct, correct_type)
        if start_guessed:
            _bump(self.found_guessed, guessed_type)
        if not boundary:
            if correct == guessed and guessed_type == correct_type:
                self.correct_tags += 1
            self.tokens += 1
        self.last_correct, self.last_correct_type = correct, correct_type
        self.last_guessed, self.last_guessed_type = guessed, guessed_type

    def result(self) -> ConllevalResult:
        correct_chunk = dict(self.correct_chunk)
        if self.in_correct:  # a chunk still open at the end of the input
            _bump(correct_chunk, self.last_correct_type)
        types = sorted(set(self.found_correct) | set(self.found_guessed))
        per_type = {t: ChunkScores(correct_chunk.get(t, 0), self.found_guessed.get(t, 0),
                                   self.found_correct.get(t, 0)) for t in types}
        overall = ChunkScores(sum(correct_chunk.values()), sum(self.found_guessed.values()),
                              sum(self.found_correct.values()))
        return ConllevalResult(overall, per_type, self.tokens, self.correct_tags)


def _bump(counts: Dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def evaluate(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
             ) -> ConllevalResult:
    """conlleval on sentences of tags (a boundary between sentences, as a blank line).

    Args:
      gold: list (sentences) of lists of gold tags ("B-PER", "I-LOC", "O", ...).
      predicted: the predicted tags, same shape.

    Returns:
      ConllevalResult.

    Raises:
      ValueError: the number of sentences or of tokens in a sentence differs.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    counter = _Counter()
    for i, (gold_tags, pred_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(pred_tags):
            raise ValueError(f"sentence {i}: {len(gold_tags)} gold tags but "
                             f"{len(pred_tags)} predicted")
        if i:
            counter.add("O", "O", boundary=True)
        for g, p in zip(gold_tags, pred_tags):
            counter.add(g, p)
    return counter.result()


def evaluate_lines(lines: Iterable[str], boundary: str = BOUNDARY,
                   source: str = "<input>") -> ConllevalResult:
    """conlleval on its own input format: `token ... gold guessed` per line, any whitespace.

    An empty line or one whose first field is `boundary` is a sentence break. Every non-empty line
    has the same number of fields (at least 3), as conlleval requires.

    Raises:
      ConllevalFormatError: naming `source` and the line.
    """
    counter = _Counter()
    num_fields: Optional[int] = None
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if fields and num_fields is None:
            num_fields = len(fields)
        elif fields and len(fields) != num_fields:
            raise ConllevalFormatError(f"{source}:{number}: unexpected number of fields: "
                                       f"{len(fields)} ({num_fields})")
        if not fields or fields[0] == boundary:
            counter.add("O", "O", boundary=True)
            continue
        if len(fields) < 3:
            raise ConllevalFormatError(f"{source}:{number}: expected at least 3 fields "
                                       f"(token, gold tag, guessed tag), got {len(fields)}")
        counter.add(fields[-2], fields[-1])
    return counter.result()


def main(argv: List[str]) -> int:
    """`python -m bert_mgpu.metrics.ner [FILE]`: conlleval's report of a file (or stdin)."""
    if len(argv) > 2:
        sys.stderr.write("usage: python -m bert_mgpu.metrics.ner [FILE]\n")
        return 2
    try:
        if len(argv) == 2:
            with open(argv[1], encoding="utf-8") as f:
                result = evaluate_lines(f, source=argv[1])
        else:
            result = evaluate_lines(sys.stdin, source="<stdin>")
    except (OSError, ConllevalFormatError) as e:
        sys.stderr.write(f"{e}\n")
        return 1
    sys.stdout.write(result.report())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
