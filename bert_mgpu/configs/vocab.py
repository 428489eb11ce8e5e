"""The config of create_vocab.py and its flags."""

import dataclasses
from typing import Optional

from bert_mgpu.configs.base import (
    INPUT_FILE,
    NUM_WORKERS,
    OUTPUT_FILE,
    PROGRESS_INTERVAL,
    RANDOM_SEED,
    Flag,
    FromFlags,
    ModelFiles,
    check_at_least,
)

VOCAB_ALGORITHMS = ("bpe", "unigram", "wordpiece")


_VOCAB_HEAD = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _tokens(value) -> tuple:
    """--reserved_tokens -> its tokens, stripped, empty ones left out."""
    return tuple(t.strip() for t in value if t.strip())


@dataclasses.dataclass(frozen=True)
class CreateVocabConfig(FromFlags):
    """create_vocab.py (flags of the same names)."""
    required_flags = ("input_file", "output_file")
    input_file: str = INPUT_FILE.field(
        required=True, help="Input raw text file (or comma-separated list of files; globs "
                            "allowed), in create_pretraining_data.py's format; '.gz' files are "
                            "read decompressed.")
    output_file: str = OUTPUT_FILE.field(
        required=True, help="The vocab.txt to write (written to a temporary file and renamed: "
                            "no partial file on failure).")
    vocab_size: int = Flag("integer", 30522, "Entries of the vocabulary, exactly (special "
                                             "tokens and [unused] slots included).").field()
    do_lower_case: bool = ModelFiles.flag("do_lower_case").field(
        help="Lower-case and strip accents, as BasicTokenizer with do_lower_case; use the same "
             "value with the other scripts.")
    algorithm: str = Flag("enum", "bpe", "How pieces are learned from the word counts: bpe "
                                         "(SentencePiece BPE, the lowest fertility measured), "
                                         "unigram (SentencePiece unigram LM) or wordpiece "
                                         "(likelihood-scored merges, pure Python, slower).",
                          VOCAB_ALGORITHMS).field()
    num_unused: int = Flag("integer", 99, "[unusedN] slots. The first 99 come before [UNK], so "
                                          "[UNK], [CLS], [SEP], [MASK] get ids 100-103 as in "
                                          "Google's English vocabularies; the rest follow "
                                          "[MASK] (Google's uncased has 994).").field()
    reserved_tokens: tuple = Flag("list", (), "Comma-separated extra special tokens placed "
                                              "right after [MASK] (where Google's Chinese "
                                              "vocabulary has <S>,<T>).",
                                  convert=_tokens).field()
    spm_model_prefix: Optional[str] = Flag(
        "string", None, "Also keep the SentencePiece model the pieces come from (PREFIX.model, "
                        "PREFIX.vocab; --algorithm=bpe or unigram), for --spm_model_file users: "
                        "ALBERT's ids (<pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4); its size "
                        "is SentencePiece's, above --vocab_size.").field()
    min_char_count: int = Flag("integer", 1, "Characters seen fewer times are left out of the "
                                             "alphabet (their words become [UNK]); raise it on "
                                             "web-scale corpora.").field()
    max_sentences: int = Flag("integer", 0, "0: count every line. N: a seeded uniform sample of "
                                            "N lines (SentencePiece's "
                                            "input_sentence_size).").field()
    num_workers: int = NUM_WORKERS.field(
        help="Processes counting words and SentencePiece threads (0: one per core, but inputs "
             "under 256 MB are counted in one process, which is faster there).")
    random_seed: int = RANDOM_SEED.field(help="Seed of the --max_sentences sample.")
    progress_interval: float = PROGRESS_INTERVAL.field()

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
