"""conlleval-equivalent entity scores on crafted cases.

Every expected number below is worked out by hand from conlleval's rules (see the module
docstring of bert_mgpu/metrics/ner.py): which tokens start/end a chunk, which guessed chunks are
correct (same start, same end, same type throughout), P = correct/guessed, R = correct/gold,
F1 = 2PR/(P+R), accuracy = tokens with the whole tag right / tokens (boundaries not counted).

In the oracle venv, the PyPI package `conlleval` (an independent Python port of conlleval.pl,
IOBES rules included) scores the BIO and BIOES cases and 5 seeded random corpora of each (300
sentences, every tag transition): the same chunk and tag counts, overall and per type.
With BERT_MGPU_CONLLEVAL_PL=/path/to/conlleval.pl (the CoNLL script itself, not shipped here)
and perl installed, the BIO cases and random BIO corpora are also run through the Perl script
and the report text must be identical.
"""

import json
import os
import random
import shutil
import subprocess
import sys

import pytest
from _oracle import run_json_request

from bert_mgpu.metrics import ner as ner_metrics
from bert_mgpu.metrics.ner import ChunkScores, evaluate


def _scores(result, name=None):
    s = result.overall if name is None else result.per_type[name]
    return (s.correct, s.found_guessed, s.found_correct)


# (gold sentences, predicted sentences) used by several tests (and by the Perl cross-check).
MIXED_BIO = (
    [["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"],
     ["B-ORG", "O", "B-MISC", "O"]],
    [["B-PER", "O", "O", "O", "B-ORG", "I-ORG", "O"],
     ["I-ORG", "O", "B-MISC", "O"]],
)


def test_partial_span_type_mismatch_and_i_without_b():
    result = evaluate(*MIXED_BIO)
    # gold chunks: PER(0-1) LOC(4-5) | ORG(0) MISC(2)                       -> 4
    # guessed:     PER(0) (partial)  ORG(4-5) (type mismatch) | ORG(0) from "I-ORG" after the
    #              boundary (I- without B- opens a chunk) MISC(2)           -> 4
    # correct: ORG(0) and MISC(2) of sentence 2                            -> 2
    assert _scores(result) == (2, 4, 4)
    assert result.overall.precision == pytest.approx(0.5)
    assert result.overall.recall == pytest.approx(0.5)
    assert result.overall.f1 == pytest.approx(0.5)
    assert _scores(result, "PER") == (0, 1, 1)
    assert _scores(result, "LOC") == (0, 0, 1)
    assert _scores(result, "ORG") == (1, 2, 1)
    assert _scores(result, "MISC") == (1, 1, 1)
    # ORG: P = 1/2, R = 1/1, F1 = 2 * 0.5 * 1 / 1.5 = 2/3.
    assert result.per_type["ORG"].f1 == pytest.approx(2 / 3)
    assert result.per_type["LOC"].precision == 0.0 and result.per_type["LOC"].f1 == 0.0
    # 11 tokens; wrong whole tags: I-PER/O, B-LOC/B-ORG, I-LOC/I-ORG, B-ORG/I-ORG -> 7 right.
    assert (result.tokens, result.correct_tags) == (11, 7)
    assert result.accuracy == pytest.approx(7 / 11)
    assert list(result.per_type) == ["LOC", "MISC", "ORG", "PER"]


def test_i_without_b_in_gold_is_a_chunk():
    # IOB1-style gold: "I-PER I-PER" after O is one chunk; B-PER I-PER guesses it exactly.
    result = evaluate([["O", "I-PER", "I-PER", "O"]], [["O", "B-PER", "I-PER", "O"]])
    assert _scores(result) == (1, 1, 1)
    assert result.accuracy == pytest.approx(3 / 4)


def test_type_change_splits_a_chunk():
    # "B-PER I-LOC": the type changes, so I-LOC ends PER and starts LOC: two chunks each side.
    result = evaluate([["B-PER", "I-LOC"]], [["B-PER", "B-LOC"]])
    assert _scores(result) == (2, 2, 2)
    assert result.accuracy == pytest.approx(1 / 2)
    # A type change inside a guessed span: guessed PER(0) LOC(1) vs gold PER(0-1): none right.
    result = evaluate([["B-PER", "I-PER"]], [["B-PER", "I-LOC"]])
    assert _scores(result) == (0, 2, 1)
    assert result.overall.f1 == 0.0


def test_chunks_at_sentence_ends():
    gold = [["O", "B-LOC", "I-LOC"], ["I-LOC", "O", "B-PER"]]
    # The boundary ends LOC(1-2) of sentence 1; "I-LOC" opening sentence 2 is a new chunk, and
    # B-PER closing the input is a chunk ended by the end of the input: 3 chunks, all guessed.
    result = evaluate(gold, gold)
    assert _scores(result) == (3, 3, 3)
    assert result.overall.f1 == 1.0
    # Without the boundary the two LOC pieces would be one chunk:
    joined = [gold[0] + gold[1]]
    assert _scores(evaluate(joined, joined)) == (2, 2, 2)
    # A guessed chunk that is too long at the end of the input is not correct.
    result = evaluate([["O", "B-PER"]], [["B-PER", "I-PER"]])
    assert _scores(result) == (0, 1, 1)
    # Split at the end of the input: gold PER(0-1), guessed PER(0) PER(1).
    result = evaluate([["B-PER", "I-PER"]], [["B-PER", "B-PER"]])
    assert _scores(result) == (0, 2, 1)


def test_empty_predictions_and_no_entities():
    result = evaluate([["B-PER", "I-PER", "O", "B-LOC"]], [["O", "O", "O", "O"]])
    # 2 gold chunks, none guessed: P = 0 (empty denominator), R = 0/2, F1 = 0.
    assert _scores(result) == (0, 0, 2)
    assert (result.overall.precision, result.overall.recall, result.overall.f1) == (0, 0, 0)
    assert result.accuracy == pytest.approx(1 / 4)
    assert _scores(result, "PER") == (0, 0, 1)
    # No entities on either side: conlleval reports 0 (not 100) for P, R and F1.
    result = evaluate([["O", "O"]], [["O", "O"]])
    assert _scores(result) == (0, 0, 0)
    assert result.overall.f1 == 0.0 and result.accuracy == 1.0
    assert result.per_type == {}
    result = evaluate([], [])
    assert result.tokens == 0 and result.accuracy == 0.0
    assert result.report() == "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"


def test_bioes():
    gold = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "S-ORG", "S-ORG"]]
    pred = [["S-PER", "O", "B-LOC", "E-LOC", "O", "S-ORG", "B-ORG"]]
    result = evaluate(gold, pred)
    # gold: PER(0) LOC(2-4) ORG(5) ORG(6) (S always starts and ends a chunk: 2 ORG chunks).
    # guessed: PER(0) LOC(2-3) ORG(5) ORG(6) (B-ORG ended by the end of the input).
    # correct: PER(0), ORG(5), and ORG(6): conlleval only compares starts, ends and types, so a
    # one-token B- at the end of the input equals an S-.  LOC(2-3) ends early (E after B).
    assert _scores(result) == (3, 4, 4)
    assert result.overall.f1 == pytest.approx(0.75)
    assert _scores(result, "LOC") == (0, 1, 1)
    assert _scores(result, "ORG") == (2, 2, 2)
    # whole tags right: S-PER O B-LOC S-ORG -> 4 of 7.
    assert result.accuracy == pytest.approx(4 / 7)
    # B-X I-X E-X B-X E-X: E ends a chunk, the next B starts one -> two chunks.
    seq = [["B-X", "I-X", "E-X", "B-X", "E-X"]]
    assert _scores(evaluate(seq, seq)) == (2, 2, 2)


def test_chunk_rules():
    start, end = ner_metrics.start_of_chunk, ner_metrics.end_of_chunk
    assert start("O", "I", "", "PER") and start("O", "B", "", "PER")
    assert not start("B", "I", "PER", "PER") and start("B", "I", "PER", "LOC")
    assert start("E", "I", "PER", "PER") and start("S", "E", "PER", "PER")
    assert not start("B", "E", "PER", "PER") and not start("I", "O", "PER", "")
    assert end("B", "O", "PER", "") and end("I", "B", "PER", "PER") and end("S", "S", "X", "X")
    assert not end("B", "I", "PER", "PER") and not end("I", "E", "PER", "PER")
    assert not end("O", "B", "", "PER")
    assert ner_metrics.split_tag("B-MISC-X") == ("B", "MISC-X")
    assert ner_metrics.split_tag("O") == ("O", "")


def test_metrics_dict_and_report():
    result = evaluate(*MIXED_BIO)
    metrics = result.as_metrics()
    assert metrics["eval_f1"] == pytest.approx(0.5)
    assert metrics["eval_accuracy"] == pytest.approx(7 / 11)
    assert metrics["eval_f1_MISC"] == 1.0
    lines = result.report().splitlines()
    assert lines[0] == "processed 11 tokens with 4 phrases; found: 4 phrases; correct: 2."
    assert lines[1] == "accuracy:  63.64%; precision:  50.00%; recall:  50.00%; FB1:  50.00"
    assert lines[4] == "              ORG: precision:  50.00%; recall: 100.00%; FB1:  66.67  2"


def _as_conll_lines(gold, pred):
    lines = []
    for i, (g_sent, p_sent) in enumerate(zip(gold, pred)):
        if i:
            lines.append("")
        lines += [f"w{j} {g} {p}" for j, (g, p) in enumerate(zip(g_sent, p_sent))]
    return lines


def test_evaluate_lines_matches_evaluate():
    lines = _as_conll_lines(*MIXED_BIO)
    assert ner_metrics.evaluate_lines(lines) == evaluate(*MIXED_BIO)
    # conlleval's -X- boundary lines and CRLF endings are breaks/whitespace too.
    with_boundary = [line if line else "-X- O O" for line in lines]
    assert ner_metrics.evaluate_lines(
        [line + "\r\n" for line in with_boundary]) == evaluate(*MIXED_BIO)
    with pytest.raises(ner_metrics.ConllevalFormatError, match=r"f\.txt:2: unexpected number"):
        ner_metrics.evaluate_lines(["a B-PER B-PER", "b O"], source="f.txt")
    with pytest.raises(ner_metrics.ConllevalFormatError, match=r"f\.txt:1: expected at least 3"):
        ner_metrics.evaluate_lines(["a O"], source="f.txt")


def test_chunk_scores_zero_denominators():
    assert ChunkScores(0, 0, 0).f1 == 0.0
    assert ChunkScores(1, 2, 4).f1 == pytest.approx(2 * 0.5 * 0.25 / 0.75)


BIO_CASES = [
    MIXED_BIO,
    ([["O", "I-PER", "I-PER", "O"]], [["O", "B-PER", "I-PER", "O"]]),
    ([["B-PER", "I-LOC"]], [["B-PER", "B-LOC"]]),
    ([["B-PER", "I-PER"]], [["B-PER", "I-LOC"]]),
    ([["O", "B-LOC", "I-LOC"], ["I-LOC", "O", "B-PER"]],
     [["O", "B-LOC", "I-LOC"], ["I-LOC", "O", "B-PER"]]),
    ([["O", "B-PER"]], [["B-PER", "I-PER"]]),
    ([["B-PER", "I-PER"]], [["B-PER", "B-PER"]]),
    ([["B-PER", "I-PER", "O", "B-LOC"]], [["O", "O", "O", "O"]]),
    ([["O", "O"]], [["O", "O"]]),
]



def _random_corpus(seed, n_sentences=300):
    """Random BIO tags (any order, so every transition occurs), gold and guessed."""
    rng = random.Random(seed)

    def tag():
        return "O" if rng.random() < 0.4 else f"{rng.choice('BI')}-{rng.choice(['PER', 'LOC'])}"
    sentences = [[(tag(), tag()) for _ in range(rng.randint(1, 12))] for _ in range(n_sentences)]
    return ([[g for g, _ in s] for s in sentences], [[p for _, p in s] for s in sentences])


@pytest.mark.parametrize("gold,pred", BIO_CASES + [_random_corpus(seed) for seed in range(5)])
def test_same_report_as_conlleval_pl(gold, pred):
    script = os.environ.get("BERT_MGPU_CONLLEVAL_PL")
    if not script or not os.path.exists(script) or shutil.which("perl") is None:
        pytest.skip("set BERT_MGPU_CONLLEVAL_PL to conlleval.pl (and install perl) to compare")
    text = "\n".join(_as_conll_lines(gold, pred)) + "\n"
    perl = subprocess.run(["perl", script], input=text, capture_output=True, text=True,
                          check=True).stdout
    assert evaluate(gold, pred).report() == perl


BIOES_CASES = [
    ([["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "S-ORG", "S-ORG"]],
     [["S-PER", "O", "B-LOC", "E-LOC", "O", "S-ORG", "B-ORG"]]),
    ([["B-X", "I-X", "E-X", "B-X", "E-X"]], [["B-X", "I-X", "E-X", "B-X", "E-X"]]),
    ([["B-X", "E-X", "E-X", "I-X", "S-X", "I-X"]], [["S-X", "I-X", "E-X", "E-X", "B-X", "O"]]),
    ([["O", "E-PER", "S-LOC", "E-LOC"]], [["O", "E-PER", "B-LOC", "E-LOC"]]),
]


def _random_bioes_corpus(seed, n_sentences=300):
    """Random BIOES tags (any order: every transition, the ill-formed ones too)."""
    rng = random.Random(seed)

    def tag():
        return "O" if rng.random() < 0.3 else \
            f"{rng.choice('BIES')}-{rng.choice(['PER', 'LOC', 'ORG'])}"
    sentences = [[(tag(), tag()) for _ in range(rng.randint(1, 12))] for _ in range(n_sentences)]
    return ([[g for g, _ in s] for s in sentences], [[p for _, p in s] for s in sentences])


PORT_CASES = (BIO_CASES + [_random_corpus(seed) for seed in range(5)] + BIOES_CASES
              + [_random_bioes_corpus(seed) for seed in range(5)])


@pytest.fixture(scope="module")
def conlleval_port(tmp_path_factory):
    """Every case of PORT_CASES scored by the PyPI `conlleval` port in the oracle venv
    (tests/oracles/conlleval_port.py), in one process."""
    request = {"cases": [_as_conll_lines(gold, pred) for gold, pred in PORT_CASES]}
    return json.loads(run_json_request("conlleval_port.py", request,
                                       tmp_path_factory.mktemp("conlleval"), timeout=120))


@pytest.mark.parametrize("case", range(len(PORT_CASES)))
def test_same_counts_as_the_conlleval_port(conlleval_port, case):
    """BIO and BIOES (crafted cases and 5 random corpora of each, every tag transition): the
    same chunks found, guessed and correct, overall and per type, and the same tag accuracy as
    an independent Python port of conlleval.pl."""
    gold, pred = PORT_CASES[case]
    want = conlleval_port[case]
    result = evaluate(gold, pred)
    assert list(_scores(result)) == want["overall"]
    ours = {name: list(_scores(result, name)) for name in result.per_type
            if result.per_type[name].found_guessed or result.per_type[name].found_correct}
    assert ours == want["per_type"]
    assert (result.correct_tags, result.tokens) == (want["tags_correct"], want["tokens"])
    if case >= len(PORT_CASES) - 5:  # a random corpus: every kind of chunk was scored
        assert len(want["per_type"]) == 3 and want["overall"][0] > 50


def test_command_line_prints_the_report_of_a_file_or_stdin(tmp_path):
    """README: `python -m bert_mgpu.metrics.ner predictions.txt` prints conlleval's report."""
    text = "\n".join(_as_conll_lines(*MIXED_BIO)) + "\n"
    path = tmp_path / "predictions.txt"
    path.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "bert_mgpu.metrics.ner"]
    by_file = subprocess.run(command + [str(path)], capture_output=True, text=True, timeout=60)
    by_stdin = subprocess.run(command, input=text, capture_output=True, text=True, timeout=60)
    expected = evaluate(*MIXED_BIO).report()
    assert "accuracy:" in expected
    for proc in (by_file, by_stdin):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected
    path.write_text(text + "w9 B-PER\n", encoding="utf-8")
    bad = subprocess.run(command + [str(path)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stdout == ""
    line = len(text.splitlines()) + 1
    assert bad.stderr.strip() == f"{path}:{line}: unexpected number of fields: 2 (3)"
    usage = subprocess.run(command + ["a", "b"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage: python -m bert_mgpu.metrics.ner" in usage.stderr
