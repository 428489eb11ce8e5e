"""Google's `tokenization.py` API (google-research/bert): the project's tokenizer, which gives
Google's tokens and ids (`bert_mgpu/tokenization.py`), under Google's names."""

from bert_mgpu.tokenization import (
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    _is_control,
    _is_punctuation,
    _is_whitespace,
    convert_by_vocab,
    convert_ids_to_tokens,
    convert_to_unicode,
    convert_tokens_to_ids,
    load_vocab,
    printable_text,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

__all__ = ["BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "_is_control",
           "_is_punctuation", "_is_whitespace", "convert_by_vocab", "convert_ids_to_tokens",
           "convert_to_unicode", "convert_tokens_to_ids", "load_vocab", "printable_text",
           "validate_case_matches_checkpoint", "whitespace_tokenize"]
