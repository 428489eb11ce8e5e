"""Oracle: Hugging Face's multiple-choice features of SWAG CSV rows, as `run_swag.py` makes them.

Runs in the oracle virtualenv. Request JSON: `vocab_file`, `lowercase`, `csv_file` (SWAG's CSV,
read here with Python's csv module), `limit` (first rows used), `max_seq_lengths` (a list).
For each length, the rows go through the preprocessing of Hugging Face's
`examples/pytorch/multiple-choice/run_swag.py`: the first text of every choice is `sent1`, the
second `sent2 + " " + ending<i>`, and the tokenizer is called on the 4 * N pairs with
`truncation=True` (longest first) and `padding="max_length"`, then regrouped by 4.

Prints JSON: {str(length): {"input_ids", "attention_mask", "token_type_ids": [N, 4, L]}}.
"""

import csv
import json
import sys

from transformers import BertTokenizer

ENDINGS = [f"ending{i}" for i in range(4)]


def features(tokenizer, rows, max_seq_length):
    firsts = [row["sent1"] for row in rows for _ in ENDINGS]
    seconds = [f"{row['sent2']} {row[name]}" for row in rows for name in ENDINGS]
    encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_seq_length,
                        padding="max_length")
    return {key: [encoded[key][i:i + 4] for i in range(0, len(firsts), 4)]
            for key in ("input_ids", "attention_mask", "token_type_ids")}


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    tokenizer = BertTokenizer(request["vocab_file"], do_lower_case=request["lowercase"])
    with open(request["csv_file"], encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))[:request["limit"]]
    print(json.dumps({str(n): features(tokenizer, rows, n)
                      for n in request["max_seq_lengths"]}))


if __name__ == "__main__":
    main()
