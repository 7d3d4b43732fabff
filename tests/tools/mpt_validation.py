#!/usr/bin/env python3
"""Writes a validation scenario for every row of scenarios/data/validation/llm-foundry-mpt.csv (MosaicML's MPT
models trained with Composer and PyTorch FSDP on A100 and H100) and its published step time into
scenarios/validation/published.csv (shown, not judged), replacing the rows it wrote before. A developer's
tool, run by hand when the data or the scenario format changes; its outputs are committed.

What each row becomes: MPT's decoder (no biases, LayerNorm, learned positions per the row's sequence, full
multi-head attention, 4x MLP, vocabulary 50368) with FlashAttention 1 behind its unpadded interface (the `llm-foundry` stack); data parallelism only; FSDP FULL_SHARD
as ZeRO 3, SHARD_GRAD_OP as ZeRO 2; activation checkpointing as full recomputation; amp_bf16 and bf16 as
bf16, amp_fp8 as fp8; AdamW; the eager PyTorch host (Composer). Nodes of 8 GPUs; A100 nodes with 8 NICs of
200 Gb/s (the tables' 1600 Gbps RoCE), H100 nodes with 8 of 400 Gb/s (an assumption: the README does not
state the H100 clusters' network).

Usage: tests/tools/mpt_validation.py [SOURCE_DIR]
"""
import csv
import json
import os
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(SRC, "scenarios/data/validation/llm-foundry-mpt.csv")
OUT = os.path.join(SRC, "scenarios/validation")
DEVICES = {"a100_40gb": "a100-sxm4-40gb", "a100_80gb": "a100-sxm4-80gb", "h100_80gb": "h100-sxm"}
NIC = {"a100_40gb": 200, "a100_80gb": 200, "h100_80gb": 400}


def scenario(r, name, line):
    gpus = int(r["gpus"])
    per_node = min(gpus, 8)
    par = {"zero_stage": 3 if r["fsdp_sharding"] == "FULL_SHARD" else 2, "attention": "flash",
           "recompute": "full" if r["activation_checkpointing"] == "True" else "none"}
    desc = ("llm-foundry %s (%s layers, hidden %s, %s heads, vocabulary %s) on %d %s, %s, FSDP %s (%s), "
            "activation checkpointing %s, micro-batch %s, %s micro-batches, global batch %s of %s tokens; "
            "published %s tokens/s/GPU, MFU %s%% = %.4f s a step (line %d of "
            "scenarios/data/validation/llm-foundry-mpt.csv; %s). The H100 clusters' network is not stated: 8 x "
            "400 Gb/s assumed."
            % (r["model"], r["layers"], r["hidden"], r["heads"], r["vocab"], gpus, r["gpu"], r["precision"],
               r["fsdp_sharding"], r["fsdp_mixed_precision"], r["activation_checkpointing"], r["mbs"],
               r["grad_accum"], r["gbs"], r["seq"], r["tokens_per_s_per_gpu"], r["mfu_pct"], float(r["step_s"]),
               line, r["source"]))
    cluster = {"device": DEVICES[r["gpu"]], "nodes": gpus // per_node, "gpus_per_node": per_node}
    if gpus > per_node:
        cluster.update({"nics_per_node": 8, "nic_Gbps": NIC[r["gpu"]]})
    return {
        "name": name,
        "description": desc,
        "model": {"layers": int(r["layers"]), "hidden": int(r["hidden"]), "heads": int(r["heads"]),
                  "ffn": int(r["ffn"]), "vocab": int(r["vocab"]), "max_positions": int(r["seq"]),
                  "architecture": "decoder", "bias": False, "norm": "layernorm",
                  "position_embedding": "learned", "dropout": 0},
        "data": {"seq_len": int(r["seq"])},
        "batch": {"global": int(r["gbs"]), "local": int(r["mbs"])},
        "optimizer": {"name": "adamw", "clip": "after_allreduce"},
        "precision": "fp8" if r["precision"] == "amp_fp8" else "bf16",
        "parallelism": par,
        "software": {"stack": "llm-foundry"},
        "cluster": cluster,
        "target": {"steps": 100},
        "simulation": {"steps": 1},
    }


def main():
    rows = list(csv.DictReader(open(DATA)))
    published = [l for l in open(os.path.join(OUT, "published.csv")).read().splitlines() if "llm-foundry" not in l]
    for f in os.listdir(OUT):
        if f.startswith("mpt-") and f.endswith(".json"):
            os.remove(os.path.join(OUT, f))
    seen = {}
    for line, r in enumerate(rows, start=2):
        base = "mpt-%s-%s-%dgpu-seq%s-mbs%s-%s" % (r["model"][4:].lower(), r["gpu"].replace("_", "-"),
                                                  int(r["gpus"]), r["seq"], r["mbs"], r["precision"].replace("_", ""))
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else "%s-%d" % (base, seen[base])
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(scenario(r, name, line), f, indent=2)
            f.write("\n")
        published.append("%s,step_s,%s,llm-foundry-mpt.csv line %d,no" % (name, r["step_s"], line))
    with open(os.path.join(OUT, "published.csv"), "w") as f:
        f.write("\n".join(published) + "\n")
    print("%d rows: %d scenarios" % (len(rows), len(rows)))


if __name__ == "__main__":
    main()
