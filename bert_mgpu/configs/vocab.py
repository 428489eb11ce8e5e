"""The config of create_vocab.py."""

import dataclasses
from typing import Optional

from bert_mgpu.configs.base import check_at_least

VOCAB_ALGORITHMS = ("bpe", "unigram", "wordpiece")


_VOCAB_HEAD = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class CreateVocabConfig:
    """create_vocab.py (flags of the same names)."""
    input_file: str
    output_file: str
    vocab_size: int = 30522
    do_lower_case: bool = True
    algorithm: str = "bpe"
    num_unused: int = 99
    reserved_tokens: tuple = ()
    spm_model_prefix: Optional[str] = None
    min_char_count: int = 1
    max_sentences: int = 0
    num_workers: int = 0
    random_seed: int = 12345
    progress_interval: float = 10.0

    def validate(self) -> None:
        check_at_least(self, 1, "vocab_size", "min_char_count")
        check_at_least(self, 0, "num_unused", "max_sentences", "num_workers")
        if self.algorithm not in VOCAB_ALGORITHMS:
            raise ValueError(f"--algorithm must be one of {', '.join(VOCAB_ALGORITHMS)}, got "
                             f"{self.algorithm!r}")
        if self.spm_model_prefix and self.algorithm == "wordpiece":
            raise ValueError("--spm_model_prefix needs --algorithm=bpe or unigram (wordpiece "
                             "trains no SentencePiece model)")
        unused = {f"[unused{i}]" for i in range(self.num_unused)}
        for token in self.reserved_tokens:
            if token.split() != [token]:
                raise ValueError(f"--reserved_tokens: {token!r} contains whitespace")
            if token in _VOCAB_HEAD or token in unused:
                raise ValueError(f"--reserved_tokens: {token} is already in the vocabulary's "
                                 f"head")
        if len(set(self.reserved_tokens)) != len(self.reserved_tokens):
            raise ValueError("--reserved_tokens: a token is repeated")
