"""Real-data check of run_squad.py's model: ours vs Hugging Face `BertForQuestionAnswering`.

Run by hand with the project's venv (the oracle venv must exist; about 2-4 minutes on 2 cores):

    BERT_MGPU_ORACLE_PYTHON=.venv-oracle/bin/python .venv/bin/python bench/squad_hf.py

On the whole first article of the official SQuAD v2.0 dev set (208 questions) and its v1.1 view
(96), with Google's windows (384/128/64) and short ones (128/64/32, most questions in several
windows): all-MiniLM-L6-v2 converted by our converter (--gelu=exact), a SQuAD head from Google's
initializer written into our checkpoint as `cls/squad/*` and given to Hugging Face as
`qa_outputs` (tests/_squad_hf.py). Reports the largest start/end logit difference, and whether
Google's `write_predictions` on Hugging Face's logits gives our predictions.json and n-best
texts (v2.0: at a threshold that makes some answers null; null_odds difference), then writes the
squad-hf section of docs/benchmarks.md. The test suite runs the same comparison on 12
paragraphs (tests/test_run_squad.py).
"""

import datetime
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests"), REPO]
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _squad_hf  # noqa: E402  (tests/)
from _common import machine, write_section  # noqa: E402  (bench/)
from _oracle import MATERIAL  # noqa: E402

FILES = {"v2.0": ("squad_v2_dev_normans.json", ("v1.1", "v2.0")),
         "v1.1": ("squad_v11_dev_normans_answerable.json", ("v1.1",))}
WINDOWS = ((384, 128, 64), (128, 64, 32))


def main():
    rows = []
    for name, (filename, modes) in FILES.items():
        path = os.path.join(MATERIAL, "squad", filename)
        for window in WINDOWS:
            with tempfile.TemporaryDirectory() as workdir:
                run = _squad_hf.compare(path, workdir, *window, modes=modes)
            for mode in modes:
                got = run[mode]
                same = got["predictions"] == got["google_predictions"]
                same_nbest = got["nbest_texts"] == got["google_nbest_texts"]
                extra = ""
                if mode == "v2.0":
                    nulls = sum(p == "" for p in got["predictions"].values())
                    extra = (f"threshold {got['threshold']:.4f} (gap {got['threshold_gap']:.1e}), "
                             f"{nulls} null; null_odds max diff "
                             f"{got['null_odds_max_diff']:.1e}")
                rows.append(f"| {filename} | {'/'.join(map(str, window))} | "
                            f"{len(run['examples'])} | {len(run['features'])} | "
                            f"{run['max_abs_diff_tokens']:.1e} | {run['max_abs_diff']:.1e} | "
                            f"{mode} | "
                            f"{'equal' if same else 'DIFFERENT'} | "
                            f"{'equal' if same_nbest else 'DIFFERENT'} | {extra} |")
                print(rows[-1], flush=True)
    text = "\n".join([
        "## run_squad.py's model vs Hugging Face BertForQuestionAnswering (bench/squad_hf.py)",
        "",
        f"{datetime.date.today()}. Machine: {machine()}.",
        "",
        "all-MiniLM-L6-v2 converted with our converter (`--gelu=exact`), a SQuAD head from "
        "Google's initializer (stddev 0.02, seeded) written into our checkpoint as "
        "`cls/squad/*` and given to Hugging Face as `qa_outputs`; the same windows (ours, equal "
        "to Google's). Logits: largest |ours - Hugging Face| over every start and end logit "
        "(logits spread over about +-0.3 with this head), on the windows' tokens and with the "
        "padding positions too (their logits enter Google's n-best index selection, then are "
        "discarded). Predictions: ours "
        "(squad_metrics) on our logits vs Google's `write_predictions` on Hugging Face's "
        "(Hugging Face's library has no SQuAD post-processing since transformers 5).",
        "",
        "| file | window | questions | windows | max logit diff, tokens | incl. padding | mode |"
        " predictions.json | n-best texts | v2.0 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows])
    write_section("squad-hf", text)


if __name__ == "__main__":
    main()
