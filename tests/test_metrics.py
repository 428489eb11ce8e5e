"""Regression and multi-label metrics against values worked out by hand (no scipy/sklearn)."""

import math

import numpy as np
import pytest

from bert_mgpu.metrics import classification as metrics


def test_pearson_by_hand():
    # x = 1..4, y = 2 4 5 9: deviations (-1.5 -.5 .5 1.5), (-3 -1 0 4);
    # sum dx*dy = 11, sum dx^2 = 5, sum dy^2 = 26 -> r = 11 / sqrt(130).
    assert metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    assert metrics.pearson([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)
    # numpy's own estimator on random data (an independent formula).
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)


def test_spearman_with_ties_by_hand():
    x = [10, 20, 20, 5, 30]
    y = [1, 3, 2, 0, 2]
    # average ranks: x -> 2 3.5 3.5 1 5, y -> 2 5 3.5 1 3.5 (mean 3 each);
    # deviations (-1 .5 .5 -2 2), (-1 2 .5 -2 .5): sum products 7.25, sums of squares 9.5, 9.5.
    np.testing.assert_array_equal(metrics.average_ranks(x), [2, 3.5, 3.5, 1, 5])
    np.testing.assert_array_equal(metrics.average_ranks(y), [2, 5, 3.5, 1, 3.5])
    assert metrics.spearman(x, y) == pytest.approx(7.25 / 9.5)
    # Monotone but not linear: rho = 1 (or -1) while Pearson is below 1.
    assert metrics.spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)
    assert metrics.spearman([1, 2, 3, 4], [64, 27, 8, 1]) == pytest.approx(-1.0)
    assert metrics.pearson([1, 2, 3, 4], [1, 8, 27, 64]) < 0.99
    np.testing.assert_array_equal(metrics.average_ranks([7, 7, 7]), [2, 2, 2])
    assert metrics.average_ranks([]).shape == (0,)


def test_mse_and_undefined_cases():
    assert metrics.mse([1, 2, 3], [1, 4, 0]) == pytest.approx(13 / 3)
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(metrics.spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(metrics.pearson([1], [2]))
    with pytest.raises(ValueError, match="differ in length"):
        metrics.pearson([1, 2], [1, 2, 3])
    result = metrics.regression_metrics([1, 2, 3, 4], [2, 4, 5, 9])
    assert set(result) == {"eval_pearson", "eval_spearman", "eval_mse"}
    assert result["eval_spearman"] == pytest.approx(1.0)
    assert result["eval_mse"] == pytest.approx((1 + 4 + 4 + 25) / 4)


PROBABILITIES = [[.9, .2, .6],
                 [.4, .7, .1],
                 [.5, .8, .3],
                 [.1, .1, .1]]
TRUTH = [[1, 0, 1],
         [1, 1, 0],
         [1, 1, 0],
         [0, 0, 0]]


def test_multilabel_by_hand():
    # threshold .5 (strict): predicted [1 0 1] [0 1 0] [0 1 0] [0 0 0] (.5 is not > .5).
    # label 0: TP 1, FN 2 -> F1 2/4; label 1: TP 2 -> 1; label 2: TP 1 -> 1.
    # micro: TP 4, FP 0, FN 2 -> 8/10; macro (.5 + 1 + 1)/3; exact rows 1 and 4 -> 2/4.
    result = metrics.multilabel_metrics(PROBABILITIES, TRUTH, 0.5)
    assert result["eval_f1_micro"] == pytest.approx(0.8)
    assert result["eval_f1_macro"] == pytest.approx(2.5 / 3)
    assert result["eval_exact_match"] == pytest.approx(0.5)
    # threshold .45: row 3 label 0 (.5) is now predicted: label 0 TP 2, FN 1 -> 4/5;
    # micro TP 5, FN 1 -> 10/11; macro (.8 + 1 + 1)/3; exact 3/4.
    result = metrics.multilabel_metrics(PROBABILITIES, TRUTH, 0.45)
    assert result["eval_f1_micro"] == pytest.approx(10 / 11)
    assert result["eval_f1_macro"] == pytest.approx(2.8 / 3)
    assert result["eval_exact_match"] == pytest.approx(0.75)


def test_multilabel_absent_label_and_errors():
    # A 4th label nobody has and nobody predicts: F1 0 (sklearn's zero_division default), so
    # macro = (.5 + 1 + 1 + 0)/4; micro and exact match do not change.
    probabilities = np.concatenate([PROBABILITIES, np.full((4, 1), .1)], axis=1)
    truth = np.concatenate([TRUTH, np.zeros((4, 1), int)], axis=1)
    result = metrics.multilabel_metrics(probabilities, truth)
    assert result["eval_f1_macro"] == pytest.approx(2.5 / 4)
    assert result["eval_f1_micro"] == pytest.approx(0.8)
    assert result["eval_exact_match"] == pytest.approx(0.5)
    # False positives count: TRUTH has 6 positives in 12 cells; predicting all 12 gives
    # TP 6, FP 6, FN 0 -> micro 2*6/(2*6 + 6) = 2/3; exact match only for no row (row 4 is empty).
    result = metrics.multilabel_metrics(np.ones((4, 3)), TRUTH)
    assert result["eval_f1_micro"] == pytest.approx(2 / 3)
    assert result["eval_exact_match"] == 0.0
    with pytest.raises(ValueError, match="same"):
        metrics.multilabel_metrics(PROBABILITIES, TRUTH[:3])
    with pytest.raises(ValueError, match="0 or 1"):
        metrics.multilabel_metrics(PROBABILITIES, np.full((4, 3), 2))
