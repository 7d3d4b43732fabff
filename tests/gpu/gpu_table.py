"""The GPU checks' short table (tests/gpu/run.sh): reads what run.sh wrote into WORK and OUT and prints
markdown. Usage: gpu_table.py WORK OUT. Every figure is read from a file a program wrote in this run;
a missing file prints as "not run"."""
import csv
import json
import os
import re
import sys

work, out = sys.argv[1:]
PEAK = {"bf16": 989.4, "fp16": 989.4, "fp32": 67.0, "tf32": 494.7}  # scenarios/profiles/h200.json


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def log_line(pattern):
    try:
        with open(os.path.join(out, "log.txt")) as f:
            hits = [l.strip() for l in f if re.search(pattern, l)]
        return hits[-1] if hits else None
    except OSError:
        return None


rows = []
conf = log_line(r"^conformance on cuda:")
rows.append(("conformance (every family, fp32/tf32/bf16/fp16, against double)", conf.split(": ", 1)[1] if conf else "not run"))
elem = log_line(r"^elementwise math:")
rows.append(("per-element math shared with the host", elem.split(": ", 1)[1] if elem else "not run"))

def loss_gap(label, ref, got):
    """The largest relative gap between two runs' loss curves, as a table row."""
    if not (ref and got):
        return (label, "not run")
    a, b = ref["loss"], got["loss"]
    n = min(len(a), len(b))
    rel = max(abs(x - y) / max(abs(x), 1e-9) for x, y in zip(a[:n], b[:n]))
    return (label, f"{n} steps, first {a[0]:.4f} / {b[0]:.4f}, last {a[n-1]:.4f} / {b[n-1]:.4f}, largest relative gap {rel:.2e}")


cpu = load(os.path.join(work, "tiny-cpu.json"))
rows.append(loss_gap("tiny-gpt 50 steps, same weights: loss CUDA vs CPU", cpu, load(os.path.join(work, "tiny-cuda.json"))))
rows.append(loss_gap("tiny-gpt 50 steps: loss CUDA tf32 vs CPU fp32", cpu, load(os.path.join(work, "tiny-tf32.json"))))
rows.append(loss_gap("tiny-gpt-tt 20 steps (tensor-train layers): loss CUDA vs CPU", load(os.path.join(work, "tt-cpu.json")),
                     load(os.path.join(work, "tt-cuda.json"))))
rows.append(loss_gap("tiny-gpt 50 steps, fused attention: loss CUDA vs CPU", load(os.path.join(work, "flash-cpu.json")),
                     load(os.path.join(work, "flash-cuda.json"))))

op_rows, by_name = [], {}
for p in ("bf16", "fp16", "tf32", "bf16-flash"):
    m = load(os.path.join(out, f"bert-{p}.json"))
    t = load(os.path.join(work, f"torch-{p}.json"))
    if not m:
        rows.append((f"BERT-large step {p}", "not run"))
        continue
    step = m["step_time_s"]["median"]
    pred = sum(o["predicted_s"] for o in m["ops"])
    mfu = m["model_flops_per_step"] / step / (PEAK[p.split("-")[0]] * 1e12)
    torch_s = t["median_step_s"] if t else None
    cmp = (f"; PyTorch eager {torch_s*1e3:.1f} ms with cuDNN's attention kept off (etrun {torch_s/step:.2f}x its speed)"
           if torch_s else "; PyTorch eager not run")
    d = load(os.path.join(work, f"torch-{p}-default.json"))
    if d:
        cmp += f"; {d['median_step_s']*1e3:.0f} ms with its default attention dispatch"
    rows.append((f"BERT-large step {p} (etrun, CUDA)",
                 f"{step*1e3:.1f} ms measured, {pred*1e3:.1f} ms predicted (sum of ops, H200 profile), MFU {100*mfu:.1f}%{cmp}"
                 f"; waits for the device {m.get('host_waits_per_step', 'not recorded')} a step"))
    by = {}
    names = by_name.setdefault(p, {})
    for o in m["ops"]:
        n = re.sub(r"layer\.\d+\.", "layer.N.", o["id"])
        e = names.setdefault(n, [0.0, 0.0, 0])
        e[0] += sum(r["median_s"] for r in o["ranks"]) / max(len(o["ranks"]), 1)
        e[1] += o["predicted_s"]
        e[2] += 1
        meas = sum(r["median_s"] for r in o["ranks"]) / max(len(o["ranks"]), 1)
        k = by.setdefault(o["kind"], [0.0, 0.0])
        k[0] += meas
        k[1] += o["predicted_s"]
    for kind, (meas, pr) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        op_rows.append((p, kind, meas * 1e3, pr * 1e3, meas / pr if pr > 0 else float("nan")))

try:
    with open(os.path.join(out, "gemm.csv")) as f:
        g = list(csv.DictReader(f))
    for math in ("bf16", "tf32", "fp32"):
        sel = [r for r in g if r["math"] == math]
        if sel:
            sq = float(sel[0]["tflops"])
            shares = ", ".join(f"{float(r['share_of_square'])*100:.0f}%" for r in sel[1:])
            rows.append((f"linear layer {math}: square {sel[0]['m']}^3, then the step's four shapes",
                         f"{sq:.0f} TFLOP/s; step shapes at {shares} of it"))
except OSError:
    rows.append(("linear-layer rates", "not run"))

nccl = log_line(r"^verdict:")
big = log_line(r"^\s+\d{6,}\s+[\d.]+\s+[\d.]+\s+[\d.]+$")  # the largest size, printed last
rows.append(("NCCL all-reduce, one rank",
             f"{nccl or 'not run'}; largest size {float(big.split()[0]) / 2**20:.0f} MiB at {big.split()[2]} GB/s algbw"
             if big else (nccl or "not run")))
prof = load(os.path.join(out, "h200-etrun.json"))
cal = log_line(r"^calibrated")
rows.append(("etcalib bench + fit: H200 profile (h200-etrun.json)",
             ("written; " + (cal.split(": ", 1)[1] if cal else "")) if prof else "not written"))

print("| check | figure |\n| --- | --- |")
for k, v in rows:
    print(f"| {k} | {v} |")
if op_rows:
    print("\n| precision | op class | measured [ms] | predicted [ms] | measured / predicted |\n| --- | --- | ---: | ---: | ---: |")
    for p, kind, meas, pr, r in op_rows:
        print(f"| {p} | {kind} | {meas:.2f} | {pr:.2f} | {r:.2f} |")
for p, names in by_name.items():
    print(f"\n| {p}: op (layers summed) | count | measured [ms] | predicted [ms] | ratio |\n| --- | ---: | ---: | ---: | ---: |")
    for n, (meas, pr, cnt) in sorted(names.items(), key=lambda kv: -kv[1][0])[:14]:
        print(f"| {n} | {cnt} | {meas*1e3:.2f} | {pr*1e3:.2f} | {meas/pr if pr > 0 else float('nan'):.2f} |")
