"""The parts of issue 50's benches (bench/modernbert_*.py) that decide their figures without
timing anything: the CPU seconds of a child process and the budget that stops it
(bench/_common.run_measured), the parameter counts the time-to-quality race matches, and the
long-document set's labels (the canon's sections laid over the shipped KJV chapters)."""

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)

import _common  # noqa: E402
import modernbert_long_documents as long_documents  # noqa: E402
import modernbert_time_to_quality as race  # noqa: E402

_BURN = ("import sys, time\n"
         "print('start', file=sys.stderr, flush=True)\n"
         "end = time.process_time() + float(sys.argv[1])\n"
         "while time.process_time() < end:\n"
         "    pass\n"
         "print('end', file=sys.stderr, flush=True)\n")


def test_marks_measure_the_cpu_between_two_log_lines():
    result = _common.run_measured([sys.executable, "-c", _BURN, "0.4"],
                                  marks=[("start", "^start"), ("end", "^end")])
    assert result["returncode"] == 0 and not result["stopped"]
    assert result["marks"]["end"] - result["marks"]["start"] == pytest.approx(0.4, abs=0.15)
    assert result["cpu_seconds"] >= result["marks"]["end"]
    assert result["stderr"].split() == ["start", "end"]


def test_a_cpu_budget_stops_the_process_with_sigterm():
    result = _common.run_measured([sys.executable, "-c", _BURN, "30"], cpu_budget=0.5,
                                  poll_seconds=0.05)
    assert result["stopped"]
    assert result["returncode"] == -15  # SIGTERM (the burner does not catch it)
    assert 0.5 <= result["cpu_seconds"] < 2.0
    assert "end" not in result["stderr"].split()


@pytest.mark.parametrize("glu", [24, 48])
def test_parameter_counts_equal_the_models_variables(glu):
    """The race matches ModernBERT's GeGLU width to BERT's parameter count by formula: the
    formulas must count what BertPretrainer builds (masked-LM model; pooler and next-sentence
    head left out, as the race's count)."""
    from bert_mgpu.model.bert_config import BertConfig
    from bert_mgpu.tasks.pretraining import BertPretrainer

    bert = {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 4,
            "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}

    def counted(config):
        task = BertPretrainer(BertConfig.from_dict(config), next_sentence=False)
        return sum(int(v.shape.num_elements()) for n, v in task.named_variables().items()
                   if not n.startswith("bert/pooler"))

    assert counted(bert) == race.bert_mlm_params(bert)
    modern = race.modernbert_config(bert, glu)
    assert counted(modern) == race.modernbert_mlm_params(modern)


def test_matched_width_is_the_nearest_parameter_count():
    bert = race.BERT
    width = race.matched_glu_width(bert)
    target = race.bert_mlm_params(bert)
    gap = abs(race.modernbert_mlm_params(race.modernbert_config(bert, width)) - target)
    for other in (width - 1, width + 1):
        assert gap <= abs(race.modernbert_mlm_params(race.modernbert_config(bert, other))
                          - target)
    assert gap / target < 1e-3


def test_every_section_starts_where_its_first_book_starts_in_the_shipped_kjv():
    texts, labels = long_documents.chapters(), long_documents.chapter_labels()
    assert len(texts) == len(labels) == 1189
    firsts = {labels[i]: texts[i] for i in range(len(labels))
              if i == 0 or labels[i] != labels[i - 1]}
    assert list(firsts) == [name for name, _ in long_documents.SECTIONS]
    assert [firsts[name][:30] for name in firsts] == [
        "In the beginning God created t",   # Genesis 1
        "Now after the death of Moses t",   # Joshua 1
        "There was a man in the land of",   # Job 1
        "The vision of Isaiah the son o",   # Isaiah 1
        "The word of the LORD that came",   # Hosea 1
        "The book of the generation of ",   # Matthew 1
        "Paul, a servant of Jesus Chris",   # Romans 1
    ]
