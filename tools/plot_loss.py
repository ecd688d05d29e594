#!/usr/bin/env python3
"""numgate-train's loss-curve plot (gate 3): curves.csv -> a PNG, with matplotlib.

    tools/plot_loss.py curves.csv loss_curves.png

curves.csv: seed,step,reference_loss,target_loss (numgate-train gate writes it). One panel
per seed, the reference and the all-target path's loss per step, and below each the
relative difference target/reference - 1. Exit 1 with one line on stderr when matplotlib
is missing or the CSV is malformed (numgate-train then reports "no plot" and why).
"""
import csv
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: plot_loss.py curves.csv out.png", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"matplotlib is not installed ({e})", file=sys.stderr)
        return 1
    curves = {}
    with open(argv[1], newline="") as f:
        for row in csv.DictReader(f):
            try:
                c = curves.setdefault(int(row["seed"]), ([], [], []))
                c[0].append(int(row["step"]))
                c[1].append(float(row["reference_loss"]))
                c[2].append(float(row["target_loss"]))
            except (KeyError, ValueError) as e:
                print(f"{argv[1]}: malformed row {row} ({e})", file=sys.stderr)
                return 1
    if not curves:
        print(f"{argv[1]}: no rows", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(2, len(curves), figsize=(6 * len(curves), 6), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex="col")
    for col, (seed, (step, ref, tgt)) in enumerate(sorted(curves.items())):
        ax = axes[0][col]
        ax.plot(step, ref, label="reference path", lw=1.2)
        ax.plot(step, tgt, label="target path (numgate kernels)", lw=1.0, ls="--")
        ax.set_title(f"seed {seed}")
        ax.set_ylabel("training loss (nats)")
        ax.legend()
        ax.grid(alpha=0.3)
        rel = [100.0 * (t / r - 1.0) for r, t in zip(ref, tgt)]
        axes[1][col].plot(step, rel, lw=0.8, color="gray")
        axes[1][col].axhline(0, color="black", lw=0.5)
        axes[1][col].set_ylabel("target / reference - 1 (%)")
        axes[1][col].set_xlabel("step")
        axes[1][col].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
