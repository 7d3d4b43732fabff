#!/usr/bin/env python3
"""The error floor of one software stack on the NeMo rows: the same configuration (model, GPU, GPU count,
precision, global and micro batch, tensor, pipeline, context, virtual and expert parallelism) measured in
several NeMo containers runs at different speeds, and a prediction that does not know the container can at
best sit at each configuration's median. Prints the mean |step_s / median - 1| over the pretraining rows, for
all of them, the mixtures of experts and the dense models, and the widest spreads.

usage: tests/tools/nemo_floor.py [scenarios/data/validation/nemo-megatron-bridge-performance.csv]"""
import collections
import csv
import statistics
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "scenarios/data/validation/nemo-megatron-bridge-performance.csv"
PRECISION = {"FP8-MX": "MXFP8", "FP8-CS": "FP8"}  # 25.11's names for the 26.x tables' precisions
groups = collections.defaultdict(list)
with open(path, newline="") as f:
    for r in csv.DictReader(f):
        if r["task"] != "pretrain":
            continue
        p = r["precision"].upper()
        key = (r["model_key"], r["gpu"], int(r["gpus"]), PRECISION.get(p, p), r["gbs"], r["mbs"], r["tp"], r["pp"],
               r["cp"], r["vp"], r["ep"], int(r["experts"] or 0) > 0)
        groups[key].append((r["container"], float(r["step_s"])))


def floor(select):
    dev = [abs(s / statistics.median(x for _, x in v) - 1) for k, v in groups.items() if select(k) for _, s in v]
    return len(dev), sum(dev) / len(dev) if dev else 0.0


for name, sel in (("all", lambda k: True), ("mixtures of experts", lambda k: k[-1]),
                  ("dense", lambda k: not k[-1])):
    n, m = floor(sel)
    print(f"{name:20s} {n:4d} rows  mean |step / its configuration's median - 1| {100 * m:.1f}%")
spread = sorted(((max(s for _, s in v) / min(s for _, s in v), k, v) for k, v in groups.items() if len(v) > 1),
                reverse=True)
print("widest spreads (slowest / fastest container of one configuration):")
for ratio, k, v in spread[:6]:
    runs = ", ".join(f"{c} {s:.2f} s" for c, s in v)
    print(f"  {ratio:.2f}x {k[0]} {k[2]} {k[1]} {k[3]}: {runs}")
