"""Hugging Face `tokenizers`: a tokenizer.json shaped like ModernBERT's, and its ids (test oracle).

Usage:
  python hf_bpe_tokenizer.py train OUT/tokenizer.json VOCAB_SIZE TEXT_FILE...
  python hf_bpe_tokenizer.py encode tokenizer.json REQUEST.json OUT.json

`train`: ModernBERT's tokenizer is GPT-NeoX's byte-level BPE: NFC normalizer, byte-level
pre-tokenizer (GPT-2's regex, no prefix space), BPE without an unknown token, byte-level
decoder, runs of 2..24 spaces as added tokens (as GPT-NeoX's vocabulary has them), the special
tokens [UNK] [CLS] [SEP] [PAD] [MASK] ([MASK] strips the space on its left) and the
post-processor "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B [SEP]". No hub is reachable here, so it is
trained on the given text files (UTF-8, one text a line) instead of downloaded.
`encode`: REQUEST {"texts": [...], "pairs": [[a, b], ...]} -> {"single": [ids with special
tokens], "pairs": [ids], "plain": [ids without special tokens]}.
"""

import json
import sys

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

SPECIAL = ["<|padding|>", "<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def train(out, vocab_size, *files):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab_size), special_tokens=SPECIAL[:2],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train(list(files), trainer)
    tok.add_tokens([AddedToken(" " * n, normalized=True) for n in range(24, 1, -1)])
    tok.add_special_tokens([AddedToken(t, lstrip=(t == "[MASK]")) for t in SPECIAL[2:]])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(out)


def encode(path, request_path, out):
    tok = Tokenizer.from_file(path)
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    result = {"single": [e.ids for e in tok.encode_batch(request["texts"])],
              "plain": [e.ids for e in tok.encode_batch(request["texts"],
                                                        add_special_tokens=False)],
              "pairs": [tok.encode(a, b).ids for a, b in request["pairs"]]}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    {"train": train, "encode": encode}[sys.argv[1]](*sys.argv[2:])
