#!/usr/bin/env python3
"""Writes a validation scenario for every row of scenarios/data/validation/nemo-megatron-bridge-performance.csv
that ET can express (software stack megatron-core), its published step time into
scenarios/validation/published.csv (shown, not judged), and every other row with why into
scenarios/validation/not-expressed.csv. A developer's tool, run by hand when the data or the scenario format
changes; its outputs are committed (nothing in the build or the tests runs it).

Usage: tests/tools/nemo_validation.py [SOURCE_DIR]
"""
import csv
import json
import os
import re
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(SRC, "scenarios/data/validation/nemo-megatron-bridge-performance.csv")
OUT = os.path.join(SRC, "scenarios/validation")
PRESETS = {"llama3_8b": "llama3-8b", "llama3_70b": "llama3-70b", "llama31_405b": "llama3-405b",
           "qwen3_30b_a3b": "qwen3-30b-a3b", "qwen3_235b_a22b": "qwen3-235b-a22b", "deepseek_v3": "deepseek-v3",
           "gpt_oss_120b": "gpt-oss-120b"}
LAYERS = {"llama3_8b": 32, "llama3_70b": 80, "llama31_405b": 126, "qwen3_30b_a3b": 48, "qwen3_235b_a22b": 94,
          "deepseek_v3": 61, "gpt_oss_120b": 36}
DEVICES = {"H100": "h100-sxm", "B200": "b200", "GB200": "gb200", "B300": "b300", "GB300": "gb300"}
# the published precision column: ET's units and quantization recipe (model/quantization.h)
PRECISIONS = {"BF16": ("bf16", None), "FP8": ("fp8", "delayed"), "FP8-CS": ("fp8", "current"),
              "MXFP8": ("fp8", "mxfp8"), "FP8-MX": ("fp8", "mxfp8"), "NVFP4": ("fp4", "nvfp4")}
# Megatron-Bridge's LoRA defaults (src/megatron/bridge/peft/lora.py, as NeMo 2's nemo/collections/llm/peft/
# lora.py: dim 32, alpha 32, target_modules linear_qkv, linear_proj, linear_fc1, linear_fc2): the rows name
# no other
LORA = {"kind": "lora", "lora": {"rank": 32, "alpha": 32}}
# Fine-tuning rows (SFT and LoRA) train on packed sequences whose samples' lengths the sources do not give:
# each packed row's attention is taken over the whole row (an upper bound: attention within each sample
# costs less), and the loss mask on the prompts costs nothing apart (docs/cost-model.md)
PACKED = ("each packed %s-token row's attention taken whole (its samples' lengths are not in the sources: an "
          "upper bound)")
MODEL_WHY = {
    "deepseek_v4_flash": "its dimensions are not published in the cited sources",
    "kimi_k2": "multi-head latent attention and the Muon optimizer (issue 37)",
}


def why_not(r):
    """Why ET cannot express a row, or None."""
    if r["task"] not in ("pretrain", "lora", "sft"):
        return "task %s" % r["task"]
    if r["model_key"].startswith("nemotron"):
        return "Nemotron 3's hybrid Mamba layers"
    if r["model_key"] not in PRESETS:
        return MODEL_WHY.get(r["model_key"], "no preset for %s" % r["model_key"])
    if r["gpu"] not in DEVICES:
        return "no %s device profile" % r["gpu"]
    if r["precision"] not in PRECISIONS:
        return "the %s recipe" % r["precision"]
    if r["recipe_offload"] not in ("", "none"):
        return "%s (not modelled)" % r["recipe_offload"]
    if r["recipe_recompute"].startswith("full (") and not re.fullmatch(r"full \(block, \d+ layers\)",
                                                                        r["recipe_recompute"]):
        return "recomputation %s" % r["recipe_recompute"]
    layers, pp, vp = LAYERS[r["model_key"]], int(r["pp"]), int(r["vp"] or 1)
    if pp > 1 and layers % pp and vp > 1 and r["model_key"] != "deepseek_v3" and (layers + 2) // pp - 1 < vp - 1:
        return ("fewer layers on the first and last stages than virtual chunks less the embedding's and the loss's "
                "(Megatron counts them as layers, one chunk each)")
    ep, tp = int(r["ep"] or 1), int(r["tp"])
    dp = int(r["gpus"]) // (tp * int(r["pp"]) * int(r["cp"]))
    if ep > 1 and r["etp"] and int(r["etp"]) not in (1, tp):
        return "expert tensor parallelism %s: ET models 1 or the tensor degree" % r["etp"]
    if ep > 1 and dp % ep and (ep % tp or (tp * dp) % ep):
        return "expert parallelism %d over data %d and tensor %d ranks" % (ep, dp, tp)
    return None


def folded(r):
    """Megatron's MoE parallel folding: expert parallelism beyond the data ranks spans tensor ranks too, which
    leaves each expert whole (expert tensor parallelism x expert parallelism must divide tensor x data ranks;
    the rows' etp column is blank)."""
    ep, tp = int(r["ep"] or 1), int(r["tp"])
    dp = int(r["gpus"]) // (tp * int(r["pp"]) * int(r["cp"]))
    return ep > 1 and (r["etp"] == "1" and tp > 1 or dp % ep != 0)


def scaling_of(r):
    """The recipe's scaling: a row published as "FP8" whose recipe at the commit is an fp8cs config ran
    current scaling (Megatron-Bridge's perf recipes name their FP8 recipe so), else the precision's."""
    if r["precision"] == "FP8" and "fp8cs" in r["recipe_at_commit"]:
        return "current"
    return PRECISIONS[r["precision"]][1]


def model_of(r):
    """The preset; DeepSeek-V3 rows labelled "w/o MTP" without the prediction module the preset has."""
    model = {"preset": PRESETS[r["model_key"]]}
    if r["model_key"] == "deepseek_v3" and "w/o MTP" in r["model"]:
        model["mtp_layers"] = 0
    return model


TASKS = {"pretrain": "pretraining%.0s",
         "lora": "LoRA fine-tuning (rank 32, alpha 32, Megatron-Bridge's default targets; " + PACKED + ")",
         "sft": "supervised fine-tuning (every parameter trained; " + PACKED + ")"}


def layout_key(r):
    return tuple(r[k] for k in ("model_key", "gpu", "tp", "pp", "cp", "vp", "ep", "mbs", "seq"))


def scenario(r, name, overlap_of):
    tp, pp, cp, vp = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["vp"])
    gpus, fsdp = int(r["gpus"]), int(r["fsdp"] or 0)
    # GB200: the NVL72 rack is one NVLink domain; a run of 64 or more GPUs uses 64 of each rack's 72
    per_node = 8 if r["gpu"] not in ("GB200", "GB300") else min(gpus, 64)
    recipe = r["recipe_layout_match"] == "yes"
    recompute = "full" if r["recipe_recompute"].startswith("full") else "none"
    modules = r["recipe_recompute"].split(": ", 1)[1].split(",") if r["recipe_recompute"].startswith("selective: ") else []
    if modules:
        recompute = "selective"
    block = re.fullmatch(r"full \(block, (\d+) layers\)", r["recipe_recompute"])
    graphs = "full_iteration" in r["recipe_cuda_graph"]
    par = {"tensor": tp, "pipeline": pp, "virtual_pipeline": vp, "context": cp, "attention": "flash",
           "recompute": recompute, "sequence_parallel": tp > 1}
    if modules:
        par["recompute_modules"] = modules  # Megatron's recompute_modules, as the recipe lists them
    if block:  # Megatron's --recompute-method block --recompute-num-layers N
        par["recompute_layers"] = int(block.group(1))
    layers = LAYERS[r["model_key"]]
    if r["model_key"] == "deepseek_v3" and pp > 1:
        # Megatron-Bridge's DeepSeek-V3 layouts (its pipeline_model_parallel_layout tables): the pp x vp model
        # chunks hold ceil(61 / chunks) layers each, the last chunk the rest with the prediction module and
        # the loss; where that leaves the last chunk nothing (32 chunks), as even a split as can be, the
        # shorter chunks last; stage k holds chunks k, k + pp, ...
        chunks = pp * vp
        per = -(-layers // chunks)
        if per * (chunks - 1) < layers:
            sizes = [per] * (chunks - 1) + [layers - per * (chunks - 1)]
        else:
            q, rem = divmod(layers, chunks)
            sizes = [q + 1] * rem + [q] * (chunks - rem)
        par["layers_per_stage"] = [sum(sizes[k::pp]) for k in range(pp)]
        assert sizes[-1] >= 1 and sum(par["layers_per_stage"]) == layers, r
    elif pp > 1 and layers % pp:
        # Megatron's split that counts the embedding and the loss as layers (the 405B recipes' account_for_*
        # flags, which 126 layers on 8 or 16 stages need): the first and the last stage hold one layer fewer
        per = (layers + 2) // pp
        par["layers_per_stage"] = [per - 1] + [per] * (pp - 2) + [per - 1]
        assert sum(par["layers_per_stage"]) == layers, r
    if fsdp > 0:
        par["zero_stage"] = 3  # Megatron FSDP: parameters, gradients and states sharded
    else:
        par["distributed_optimizer"] = True
    if tp > 1 and r["recipe_tp_comm_overlap"] == "True":
        par["tp_overlap"] = True
    # a row whose layout differs from its recipe's in the global batch alone (25.11's smaller batches): the TP
    # overlap of the recipe's layout, as another container's row on it published (a property of the layout,
    # not of the batch)
    borrowed = (not recipe and tp > 1 and re.fullmatch(r"no: recipe has gbs \d+", r["recipe_layout_match"])
                and overlap_of.get(layout_key(r)) == "True")
    if borrowed:
        par["tp_overlap"] = True
    if int(r["ep"] or 1) > 1:
        par["expert"] = int(r["ep"])
    if folded(r):
        par["expert_tensor"] = 1
    desc = ("NeMo Megatron Bridge %s, %s %s on %d %s (%s), %s, tensor %d, pipeline %d (virtual %d), context %d, "
            "%s, micro-batch %s, global batch %s, sequence %s; published %s tokens/s/GPU = %.4f s a step (row of "
            "scenarios/data/validation/nemo-megatron-bridge-performance.csv: %s). %s"
            % (r["container"], r["model"], TASKS[r["task"]] % r["seq"], gpus, r["gpu"], r["system"], r["precision"], tp, pp, vp, cp,
               "Megatron FSDP" if fsdp > 0 else "distributed optimizer", r["mbs"], r["gbs"], r["seq"],
               r["tokens_per_s_per_gpu"], float(r["step_s"]), r["source"] + (
                   "; expert parallelism %s over tensor and data ranks, each expert whole (Megatron's MoE "
                   "parallel folding: %s x %s expert ranks must divide the %d tensor x data ranks)"
                   % (r["ep"], r["etp"] or 1, r["ep"], tp * gpus // (tp * pp * cp)) if folded(r) else ""),
               ("The recipe at the same commit: recomputation %s, CUDA graphs %s, TP communication overlap %s."
                % (r["recipe_recompute"], r["recipe_cuda_graph"], r["recipe_tp_comm_overlap"])) if recipe else
               "No recipe at the commit matches this layout: recomputation none and no CUDA graphs assumed%s."
               % ("; TP communication overlap as the recipe of the same layout with another global batch "
                  "(another container's row on that layout)" if borrowed else "")))
    doc = {
        "name": name,
        "description": desc,
        "model": model_of(r),
        "data": {"seq_len": int(r["seq"])},
        "batch": {"global": int(r["gbs"]), "local": int(r["mbs"])},
        "optimizer": {"name": "adamw", "clip": "after_allreduce"},
        **({"method": LORA} if r["task"] == "lora" else {}),
        "precision": PRECISIONS[r["precision"]][0],
        "parallelism": par,
        "software": {"stack": "megatron-core"},
        "cluster": {"device": DEVICES[r["gpu"]], "nodes": gpus // per_node, "gpus_per_node": per_node,
                    "nics_per_node": per_node, "nic_Gbps": 400},
        "target": {"steps": 100},
        "simulation": {"steps": 1},
    }
    if PRECISIONS[r["precision"]][1]:
        doc["scaling"] = scaling_of(r)
    if graphs:
        doc["host"] = {"launch": "cuda_graphs"}
    return doc


def main():
    rows = list(csv.DictReader(open(DATA)))
    overlap_of = {layout_key(r): r["recipe_tp_comm_overlap"] for r in rows if r["recipe_layout_match"] == "yes"}
    published = [l for l in open(os.path.join(OUT, "published.csv")).read().splitlines() if "nemo-megatron" not in l]
    refused = ["row,container,task,model_key,gpu,precision,why"]
    names = set()
    for i, r in enumerate(rows, start=2):  # the CSV's line numbers
        why = why_not(r)
        if why:
            refused.append('%d,%s,%s,%s,%s,%s,"%s"' % (i, r["container"], r["task"], r["model_key"], r["gpu"],
                                                       r["precision"], why))
            continue
        name = "nemo-%s-%s%s-%s-%dgpu-%s" % (r["container"].replace(".", ""), r["model_key"].replace("_", ""),
                                              "" if r["task"] == "pretrain" else "-" + r["task"], r["gpu"].lower(),
                                              int(r["gpus"]), r["precision"].lower())
        if name in names:  # another row of the same container, model, system and precision: its batch
            name += "-gbs%s" % r["gbs"]
        assert name not in names, name
        names.add(name)
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(scenario(r, name, overlap_of), f, indent=2)
            f.write("\n")
        published.append("%s,step_s,%s,nemo-megatron-bridge-performance.csv line %d,no" % (name, r["step_s"], i))
    with open(os.path.join(OUT, "published.csv"), "w") as f:
        f.write("\n".join(published) + "\n")
    with open(os.path.join(OUT, "not-expressed.csv"), "w") as f:
        f.write("\n".join(refused) + "\n")
    print("%d rows: %d scenarios, %d not expressed" % (len(rows), len(rows) - (len(refused) - 1), len(refused) - 1))


if __name__ == "__main__":
    main()
