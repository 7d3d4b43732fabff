#!/usr/bin/env python3
"""ET's analytic step beside Table 1 of Narayanan et al. 2021 (SC21, "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM", arXiv 2104.04473): GPT models of 1.7B to 1T parameters on 32 to
3,072 A100 80GB GPUs (Selene: 8 GPUs and 8 HDR InfiniBand NICs a node), fp16, sequence 2048, vocabulary
51200, full recomputation, the `megatron-lm-2021` stack.

NOT a validation source: the table's figures below are recalled from the paper, not read from
../shared/data, so nothing here is judged, fitted or shipped as a validation row. The table gives each
model's heads, hidden size, layers, tensor and pipeline degrees, GPUs, global batch and achieved TFLOP/s a
GPU (counted with the paper's formula, recomputation included: 96 B s l h^2 (1 + s / 6h + V / 16 l h));
it does not give the micro-batch or whether the interleaved schedule ran, so each row is estimated at
micro-batches 1, 2, 4 and 8 (the plain 1F1B schedule) and the published step is the formula's FLOPs over
the TFLOP/s. A developer's check of how the 2021 rows the issue names stand, run by hand:

Usage: tests/tools/sc21_recalled.py [BUILD_DIR]
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build")
ETSIM = os.path.join(BUILD, "sim", "etsim")
V, S = 51200, 2048
# billions of parameters, heads, hidden, layers, tensor, pipeline, GPUs, global batch, TFLOP/s a GPU
ROWS = [(1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
        (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
        (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
        (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
        (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163)]


def scenario(params, heads, hidden, layers, tensor, pipeline, gpus, batch, micro):
    return {"name": f"sc21-{params}b-mbs{micro}",
            "model": {"layers": layers, "hidden": hidden, "heads": heads, "ffn": 4 * hidden, "vocab": V,
                      "max_positions": S, "architecture": "decoder", "dropout": 0.1},
            "data": {"seq_len": S}, "batch": {"global": batch, "local": micro},
            "optimizer": {"name": "adamw", "clip": "after_allreduce"}, "precision": "fp16",
            "software": {"stack": "megatron-lm-2021"},
            "parallelism": {"tensor": tensor, "pipeline": pipeline, "recompute": "full",
                            "sequence_parallel": False},
            "cluster": {"device": "a100-sxm4-80gb", "nodes": gpus // 8, "gpus_per_node": 8, "nvlink_GBps": 600,
                        "nics_per_node": 8, "nic_Gbps": 200},
            "target": {"steps": 1}}


def main():
    if not os.access(ETSIM, os.X_OK):
        sys.exit(f"sc21_recalled: {ETSIM} missing: build ET first")
    print(f"{'model':>8} {'GPUs':>5} {'published[s]':>12}  ET analytic at micro-batch 1 / 2 / 4 / 8 (error)")
    with tempfile.TemporaryDirectory() as work:
        for p, a, h, l, t, pp, g, b, tf in ROWS:
            flops = 96 * b * S * l * h * h * (1 + S / (6 * h) + V / (16 * l * h))
            published = flops / (tf * 1e12 * g)
            cells = []
            for micro in (1, 2, 4, 8):
                path, out = os.path.join(work, "s.json"), os.path.join(work, "o.json")
                with open(path, "w") as f:
                    json.dump(scenario(p, a, h, l, t, pp, g, b, micro), f)
                run = subprocess.run([ETSIM, "--analytic", "--quiet", "--json", out, path], capture_output=True)
                if run.returncode not in (0, 3):  # 3: does not fit, its estimate still written
                    cells.append("-")
                    continue
                with open(out) as f:
                    step = json.load(f)["estimate"]["step"]["step_s"]
                cells.append(f"{step:.2f} ({100 * (step / published - 1):+.1f}%)"
                             + ("*" if run.returncode == 3 else ""))
            print(f"{p:>7}B {g:>5} {published:>12.2f}  " + " / ".join(cells))
    print("(* ET finds the plan too large for the GPU's memory)")


if __name__ == "__main__":
    main()
