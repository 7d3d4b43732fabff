#!/usr/bin/env python3
"""The NeMo Megatron Bridge rows' errors by model and device, as docs/validation.md's table shows them: the
signed analytic errors of scenarios/data/validation/errors.csv (bench/validation.sh --errors writes it),
grouped by the model and device in each row's scenario name, their count, mean and range, as Markdown.

usage: tests/tools/nemo_table.py [scenarios/data/validation/errors.csv]"""
import collections
import csv
import sys

MODELS = [("llama38b", "Llama 3 8B"), ("llama370b-lora", "Llama 3 70B LoRA"), ("llama370b-sft", "Llama 3 70B SFT"),
          ("llama370b", "Llama 3 70B"), ("llama31405b", "Llama 3.1 405B"), ("qwen330ba3b", "Qwen3 30B-A3B"),
          ("qwen3235ba22b", "Qwen3 235B-A22B"), ("deepseekv3", "DeepSeek-V3"), ("gptoss120b", "gpt-oss 120B")]
ORDER = ["Llama 3 8B", "Llama 3 70B", "Llama 3.1 405B", "Llama 3 70B LoRA", "Llama 3 70B SFT", "Qwen3 30B-A3B",
         "Qwen3 235B-A22B", "DeepSeek-V3", "gpt-oss 120B"]
DEVICES = ["B200", "B300", "GB200", "GB300", "H100"]

path = sys.argv[1] if len(sys.argv) > 1 else "scenarios/data/validation/errors.csv"
groups = collections.defaultdict(list)
with open(path, newline="") as f:
    for r in csv.DictReader(f):
        name = r["scenario"]
        if not name.startswith("nemo-"):
            continue
        rest = name.split("-", 2)[2]  # after nemo-<container>-
        for key, label in MODELS:
            if rest.startswith(key + "-"):
                groups[(label, rest[len(key) + 1:].split("-")[0].upper())].append(float(r["error"]))
                break
        else:
            sys.exit("nemo_table: no model known for %s" % name)
print("| model | device | rows | mean error | range |\n| --- | --- | --- | --- | --- |")
for label in ORDER:
    for device in DEVICES:
        e = groups.get((label, device))
        if e:
            span = "" if len(e) == 1 else "%+.1f%% to %+.1f%%" % (100 * min(e), 100 * max(e))
            print("| %s | %s | %d | %+.1f%% | %s |" % (label, device, len(e), 100 * sum(e) / len(e), span))
