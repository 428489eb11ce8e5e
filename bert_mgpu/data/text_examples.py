"""extract_features.py's input, as Google's `read_examples`: one example per line, a pair
written `text_a ||| text_b`."""

import re
from typing import Iterator, NamedTuple, Optional

from bert_mgpu import tokenization

_PAIR_RE = re.compile(r"^(.*) \|\|\| (.*)$")


class InputExample(NamedTuple):
    unique_id: int
    text_a: str
    text_b: Optional[str]


def read_examples(lines) -> Iterator[InputExample]:
    """Google's `read_examples`: strip each line, split pairs on ' ||| '."""
    for unique_id, line in enumerate(lines):
        line = tokenization.convert_to_unicode(line).strip()
        m = _PAIR_RE.match(line)
        if m is None:
            yield InputExample(unique_id, line, None)
        else:
            yield InputExample(unique_id, m.group(1), m.group(2))
