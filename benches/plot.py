"""Plots the ratios of benches/perf's results (perf.json) as horizontal bars, log scale.

Usage: plot.py PERF_JSON OUT_PNG. Run by benches/run inside its own virtual environment.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    data = json.load(open(sys.argv[1]))
    rows = data["rows"]
    labels = [r["workload"].replace("`", "") for r in rows]
    medians = [sorted(r["ratio"])[len(r["ratio"]) // 2] if len(r["ratio"]) % 2 else
               sum(sorted(r["ratio"])[len(r["ratio"]) // 2 - 1:len(r["ratio"]) // 2 + 1]) / 2
               for r in rows]
    lows = [m - min(r["ratio"]) for m, r in zip(medians, rows)]
    highs = [max(r["ratio"]) - m for m, r in zip(medians, rows)]
    colors = []
    for m, r in zip(medians, rows):
        if r["target"] is None:
            colors.append("#7f8c8d")
        elif m >= r["target"]:
            colors.append("#27ae60")
        else:
            colors.append("#c0392b")

    fig, ax = plt.subplots(figsize=(12, 0.55 * len(rows) + 1.8))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, medians, xerr=[lows, highs], color=colors, capsize=3)
    for yi, m, r in zip(y, medians, rows):
        ax.text(max(r["ratio"]) * 1.12, yi, f"{m:.2f}×", va="center", fontsize=8)
        if r["target"] is not None:
            ax.plot([r["target"]] * 2, [yi - 0.4, yi + 0.4], color="black", linewidth=2)
    ax.axvline(1.0, color="black", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    # The labels take the left of the figure, so the axes are narrow: text about them is
    # kept short per line, and the title is the figure's, so that neither runs off the edge.
    ax.set_xlabel("ours ÷ reference in speed\n(log scale; > 1: fsbroker is faster)\n"
                  "black tick: target; green: met,\nred: missed, grey: no target")
    fig.suptitle("fsbroker side by side: median ratio per workload, range over rounds",
                 fontsize=10)
    lo = min(min(medians), min(r["target"] or 1 for r in rows)) / 2
    hi = max(medians) * 4
    ax.set_xlim(lo, hi)
    fig.text(0.01, 0.01, data["machine"], fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
