"""Plots bench/time_to_quality.py's results.json: held-out masked-LM loss and accuracy against
training time, one line per arm. Needs matplotlib (run by an interpreter that has it, e.g. the
oracle venv after `pip install matplotlib`; never the project's venv).

    python bench/time_to_quality_plot.py RESULTS.json OUTPUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results_path, output_path):
    with open(results_path) as f:
        results = json.load(f)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, arm in results["arms"].items():
        curve = arm["curve"]
        minutes = [p["seconds"] / 60 for p in curve]
        label = arm["arm"]["label"]
        ax_loss.plot(minutes, [p["masked_lm_loss"] for p in curve], marker=".", label=label)
        ax_acc.plot(minutes, [100 * p["masked_lm_accuracy"] for p in curve], marker=".",
                    label=label)
    ax_loss.set_ylabel("held-out masked-LM loss")
    ax_acc.set_ylabel("held-out masked-LM accuracy (%)")
    # The first evaluations (random weights, loss ~10) would flatten the interesting part.
    finals = [p["masked_lm_loss"] for a in results["arms"].values() for p in a["curve"]]
    ax_loss.set_ylim(min(finals) - 0.2, min(max(finals), min(finals) + 5))
    for ax in (ax_loss, ax_acc):
        ax.set_xlabel("training time (minutes; evaluation excluded)")
        ax.grid(alpha=0.3)
        ax.set_xlim(0, results["budget_minutes"] * 1.02)
    ax_acc.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Masked-LM pretraining on the KJV, {results['budget_minutes']:g} minutes per "
                 f"arm on {results['machine'].split(',')[0]} ({results['started'][:10]}); "
                 f"held-out chapters", fontsize=10)
    fig.tight_layout()
    fig.savefig(output_path, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
