"""The benchmark peer of bench/vocab.py: Hugging Face `tokenizers`' WordPieceTrainer (Rust).

Run by bench/vocab.py with the oracle virtualenv's interpreter (`tokenizers` lives there, never in
the project's venv), as a whole process. It is set up as Hugging Face's `BertWordPieceTokenizer`
trains: BERT's normaliser (clean text, CJK padding, lower-casing and accent stripping when
`--lowercase`) and pre-tokenizer (whitespace and punctuation), `WordPieceTrainer` with `##`
continuations, the five special tokens first, no minimum frequency and no alphabet limit. The
file is read by the Rust trainer itself (its own threads). The vocabulary is written one token per
line in id order, as `BertWordPieceTokenizer.save_model` writes vocab.txt.
"""

import argparse

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True, help="text file, one sentence per line")
    p.add_argument("--output", required=True, help="vocab.txt to write")
    p.add_argument("--vocab_size", type=int, required=True)
    p.add_argument("--lowercase", action="store_true")
    args = p.parse_args()

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None,
        lowercase=args.lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=args.vocab_size, min_frequency=0, special_tokens=specials,
        continuing_subword_prefix="##", show_progress=False)
    tokenizer.train([args.input], trainer)
    vocab = tokenizer.get_vocab()
    with open(args.output, "w", encoding="utf-8") as f:
        for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            f.write(token + "\n")


if __name__ == "__main__":
    main()
