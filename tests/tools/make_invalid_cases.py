# Regenerates tests/invalid/ (one folder per bad scenario, its expected error beside it). The folders are
# the suite; this script only makes adding a case cheap: edit, run, then write the whole expected messages
# with tests/tools/refresh_invalid_expected.sh, review the diff, commit.
import json, os, copy
base = {
  "name": "invalid-case",
  "model": {"preset": "bert-large"},
  "data": {"seq_len": 128},
  "batch": {"global": 256, "local": 32},
  "optimizer": {"name": "adam"},
  "precision": "fp16",
  "cluster": {"device": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 8},
  "target": {"steps": 100}
}
cases = {}
def case(name, mutate, expected, raw=None, files=None):
    cases[name] = (mutate, expected, raw, files)
def setp(path, value):
    def f(d):
        cur = d
        for k in path[:-1]: cur = cur[k]
        cur[path[-1]] = value
    return f
def delp(path):
    def f(d):
        cur = d
        for k in path[:-1]: cur = cur[k]
        del cur[path[-1]]
    return f
case("truncated-json", None, "invalid JSON", raw='{"name": "x", "model": {"preset": "bert-large"')
case("trailing-comma", None, "invalid JSON", raw='{"name": "x",}\n')
case("duplicate-key", None, "invalid JSON", raw='{"name": "x", "name": "y"}\n')
case("top-level-array", None, "$: expected an object, got an array", raw='[1, 2]\n')
case("empty-file", None, "invalid JSON", raw='')
case("unknown-top-key", setp(["modle"], {}), '$.modle: unknown key "modle" (did you mean "model"?)')
case("unknown-model-key", setp(["model","hiden"], 1024), '$.model.hiden: unknown key "hiden" (did you mean "hidden"?)')
case("unknown-cluster-key", setp(["cluster","gpus"], 8), '$.cluster.gpus: unknown key "gpus"')
case("missing-model", delp(["model"]), '$.model: missing required key "model"')
case("missing-batch-local", delp(["batch","local"]), '$.batch.local: missing required key "local"')
case("missing-cluster-device", delp(["cluster","device"]), '$.cluster.device: missing required key "device"')
case("missing-target", delp(["target"]), '$.target: missing required key "target"')
case("unknown-preset", setp(["model","preset"], "bert-huge"), '$.model.preset: unknown model preset "bert-huge"')
case("layers-string", setp(["model","layers"], "24"), '$.model.layers: expected an integer, got a string')
case("layers-zero", setp(["model","layers"], 0), '$.model.layers: expected an integer in [1,')
case("hidden-negative", setp(["model","hidden"], -1024), '$.model.hidden: expected an integer in [1,')
case("heads-not-dividing-hidden", setp(["model","heads"], 15), '$.model.heads: heads (15) must divide hidden (1024)')
case("seq-len-fractional", setp(["data","seq_len"], 128.5), '$.data.seq_len: expected an integer, got a number')
case("seq-len-over-max-positions", setp(["data","seq_len"], 1024), "$.data.seq_len: seq_len 1024 exceeds the model's max_positions 512")
case("precision-unknown", setp(["precision"], "fp4"), '$.precision: expected one of "fp32", "tf32", "fp16", "bf16", "fp8", got "fp4"')
case("precision-number", setp(["precision"], 16), '$.precision: expected a string, got an integer')
case("optimizer-unknown", setp(["optimizer","name"], "sgd"), '$.optimizer.name: expected one of "adam", "adamw", "lamb", got "sgd"')
case("batch-not-divisible", setp(["batch","global"], 260), '$.batch.global: global batch 260 is not divisible by local batch 32 x 8 data-parallel ranks = 256')
case("batch-accum-mismatch", lambda d: d["batch"].update({"grad_accum": 2}), '$.batch.global: global batch 256 must equal local 32 x data-parallel ranks 8 x grad_accum 2 = 512')
case("batch-local-zero", setp(["batch","local"], 0), '$.batch.local: expected an integer in [1,')
case("nodes-zero", setp(["cluster","nodes"], 0), '$.cluster.nodes: expected an integer in [1,')
case("nic-missing-multinode", setp(["cluster","nodes"], 2), '$.cluster.nics_per_node: missing required key "nics_per_node"')
case("bandwidth-negative", setp(["cluster","nvlink_GBps"], -600), '$.cluster.nvlink_GBps: expected a positive number, got -600')
case("device-unknown", setp(["cluster","device"], "tpu-v9"), 'profiles there: a100-sxm4-40gb, a100-sxm4-80gb')
case("tensor-not-dividing-node", setp(["parallelism"], {"tensor": 3}), '$.parallelism.tensor: tensor-parallel degree 3 must divide gpus_per_node 8')
case("pipeline-not-dividing-layers", lambda d: d.update({"model": {"preset": "bert-large", "layers": 20}, "parallelism": {"pipeline": 8}, "batch": {"local": 32, "global": 32}}), '$.parallelism.pipeline: pipeline degree 8 must divide the 20 layers')
case("zero-stage-4", setp(["parallelism"], {"zero_stage": 4}), '$.parallelism.zero_stage: expected an integer in [0, 3], got 4')
case("bucket-zero", setp(["parallelism"], {"bucket_MiB": 0}), '$.parallelism.bucket_MiB: expected a positive number, got 0')
case("target-both", setp(["target"], {"steps": 10, "samples": 1000}), '$.target: give exactly one of "samples", "steps" or "tokens"')
case("recompute-not-bool", setp(["parallelism"], {"recompute": "yes"}), '$.parallelism.recompute: expected a boolean, got a string')
case("platform-file-missing", setp(["cluster","platform_file"], "no-such-platform.xml"), '$.cluster.platform_file: cannot open platform file')
case("histogram-missing", setp(["data"], {"seq_len": 512, "lengths": {"distribution": "histogram", "file": "no-such-file.csv"}}), '$.data.lengths.file: cannot open the length histogram')
case("histogram-malformed", setp(["data"], {"seq_len": 512, "lengths": {"distribution": "histogram", "file": "bad.csv"}}), 'bad.csv:4:3: expected a count (a non-negative integer) and nothing after it',
     files={"bad.csv": "# a histogram with a typo\nlength,count\n1,10\n2,1x0\n"})
case("histogram-length-over-seq-len", setp(["data"], {"seq_len": 4, "lengths": {"distribution": "histogram", "file": "long.csv"}}), 'long.csv:3:1: length 9 is outside 1..4 (data.seq_len) but has 5 sequences',
     files={"long.csv": "length,count\n1,10\n9,5\n"})
case("histogram-empty", setp(["data"], {"seq_len": 8, "lengths": {"distribution": "histogram", "file": "empty.csv"}}), 'empty.csv:2: the histogram holds no sequences',
     files={"empty.csv": "length,count\n1,0\n"})
case("histogram-without-file", setp(["data"], {"seq_len": 8, "lengths": {"distribution": "histogram"}}), '$.data.lengths.file: missing required key "file"')
case("distribution-unknown", setp(["data"], {"seq_len": 8, "lengths": {"distribution": "zipf"}}), '$.data.lengths.distribution: expected one of "fixed", "uniform", "histogram", got "zipf"')
case("bf16-on-cpu", setp(["cluster","device"], "host-cpu"), '$.precision: device host-cpu-2core-avx2 has no fp16 support')
case("custom-model-missing-dims", setp(["model"], {"layers": 2, "hidden": 64}), '$.model.heads: missing required key "heads"')
case("causal-head-on-encoder", setp(["model"], {"preset": "bert-base", "loss_head": "causal_lm"}), '$.model.loss_head: loss head "causal_lm" needs architecture "decoder"')
case("profile-bad-json", setp(["cluster","device"], "bad-profile.json"), 'bad-profile.json:3:',
     files={"bad-profile.json": '{\n  "name": "x",\n  "peak_tflops": {fp32: 1}\n}\n'})
case("profile-missing-peak", setp(["cluster","device"], "profile.json"), 'profile.json: $.peak_tflops.bf16: missing required key "bf16"',
     files={"profile.json": json.dumps({"name": "x", "source": "test", "peak_tflops": {"fp32": 1, "tf32": 1, "fp16": 1}, "memory_GiB": 1, "memory_bandwidth_GBps": 1, "efficiency": {"gemm_max": 0.5, "gemm_half_dim": 1, "memory": 0.5, "kernel_overhead_us": 1}}, indent=1)})
U = {"seq_len": 128, "lengths": {"distribution": "uniform", "min": 1}, "unpadded": True}
def samp(extra):
    d = dict(U); d["sampling"] = extra; return setp(["data"], d)
case("sampling-counts-not-local", samp({"scheme": "stratified", "bins": [64, 128], "counts": [10, 10]}), "$.data.sampling.counts: bin counts add up to 20, the local batch is 32")
case("sampling-bins-decreasing", samp({"scheme": "stratified", "bins": [100, 64, 128], "counts": [10, 10, 12]}), "$.data.sampling.bins[1]: bin bounds must increase (got 64 after 100)")
case("sampling-last-bin-short", samp({"scheme": "stratified", "bins": [64, 100], "counts": [16, 16]}), "$.data.sampling.bins: the last bin must end at seq_len 128, got 100")
case("sampling-counts-length", samp({"scheme": "stratified", "bins": [64, 128], "counts": [32]}), "$.data.sampling.counts: expected 2 counts, one per bin, got 1")
case("sampling-empty-bin", lambda d: d.update({"data": {"seq_len": 128, "lengths": {"distribution": "uniform", "min": 100}, "unpadded": True, "sampling": {"scheme": "stratified", "bins": [50, 128], "counts": [16, 16]}}}), "$.data.sampling.counts[0]: bin 1..50 holds no sequences of the distribution")
case("sampling-presort-not-dividing", samp({"scheme": "random", "presort_group": 3}), "$.data.sampling.presort_group: presort groups of 3 GPUs must divide the 8 data-parallel ranks")
case("sampling-bins-with-packed", samp({"scheme": "packed", "bins": [128], "counts": [32]}), '$.data.sampling: "bins" and "counts" apply only to scheme "stratified"')
case("sampling-unknown-scheme", samp({"scheme": "sorted"}), '$.data.sampling.scheme: expected one of "random", "stratified", "packed", "binned", got "sorted"')
P = {"seq_len": 128, "lengths": {"distribution": "uniform", "min": 1}}
def padded(**kw):
    d = dict(P); d.update(kw); return setp(["data"], d)
case("sampling-binned-with-counts", padded(sampling={"scheme": "binned", "bins": [64, 128], "counts": [16, 16]}), '$.data.sampling.counts: a binned micro-batch draws all its sequences from one bin: "counts" applies only to scheme "stratified"')
case("sampling-binned-without-bins", padded(sampling={"scheme": "binned"}), '$.data.sampling.bins: missing required key "bins"')
case("sampling-binned-presort", padded(sampling={"scheme": "binned", "bins": [64, 128], "presort_group": 8}), "$.data.sampling.presort_group: presorting applies to random or stratified sampling")
case("sampling-binned-fractional-bin", padded(sampling={"scheme": "binned", "bins": [64.5, 128]}), "$.data.sampling: bins and counts must be whole numbers")
case("sampling-fractional-count", padded(sampling={"scheme": "stratified", "bins": [64, 128], "counts": [16.5, 15.5]}), "$.data.sampling: bins and counts must be whole numbers")
case("pad-to-unknown", padded(pad_to="bucket"), '$.data.pad_to: expected one of "seq_len", "longest", got "bucket"')
case("pad-to-with-unpadded", padded(pad_to="longest", unpadded=True), "$.data.pad_to: pad_to applies to padded batches; data.unpadded computes on real tokens")
case("pad-multiple-without-longest", padded(pad_multiple=8), '$.data.pad_multiple: pad_multiple applies to pad_to "longest"')
case("pad-multiple-zero", padded(pad_to="longest", pad_multiple=0), "$.data.pad_multiple: expected an integer in [1, 128], got 0")
case("pad-longest-packed", padded(pad_to="longest", sampling={"scheme": "packed"}), '$.data.pad_to: packed rows are padded to seq_len; pad_to "longest" applies to random, stratified or binned sampling')
case("pad-longest-presort", padded(pad_to="longest", sampling={"scheme": "random", "presort_group": 8}), '$.data.pad_to: pad_to "longest" with a local presort is not modelled (the expected batch assumes independent draws)')
TT = {"kind": "tensor_train", "tensor_train": {"rank": 8, "layers": ["mlp"], "factors": [
    {"shape": [1024, 4096], "in": [8, 8, 16], "out": [16, 16, 16]}, {"shape": [4096, 1024], "in": [16, 16, 16], "out": [16, 8, 8]}]}}
def method(m):
    return setp(["method"], m)
case("method-unknown-kind", method({"kind": "pruned"}), '$.method.kind: expected one of "dense", "sparse", "tensor_train", got "pruned"')
case("method-sparsity-on-dense", method({"kind": "dense", "sparsity": {}}), '$.method: "sparsity" and "dense_gradients" apply only to kind "sparse"')
case("sparse-2-4-without-sparse-units", lambda d: d.update({"precision": "fp32", "cluster": {"device": "cpu-without-sparse-kernels.json", "nodes": 1, "gpus_per_node": 8}, "method": {"kind": "sparse", "sparsity": {"mlp": {"density": 0.5, "pattern": "2:4"}}}}), "$.method.sparsity.mlp.pattern: device cpu-without-sparse-kernels has no 2:4 sparse units",
     files={"cpu-without-sparse-kernels.json": '{\n  "name": "cpu-without-sparse-kernels",\n  "kind": "cpu",\n  "source": "Generic 2-core x86-64 host with AVX2+FMA at ~3 GHz: 2 cores x 2 FMA units x 8 fp32 lanes x 2 FLOP x 3.0 GHz = 192 GFLOP/s fp32; ~20 GB/s DRAM. Sparse weights run as dense products with a mask (etrun\'s CPU backend has no sparse kernels). Uncalibrated: etcalib bench and etcalib fit replace these terms with ones fitted on the machine.",\n  "peak_tflops": {\n    "fp32": 0.192,\n    "tf32": 0,\n    "fp16": 0,\n    "bf16": 0\n  },\n  "vector_tflops": 0.048,\n  "memory_GiB": 24,\n  "memory_bandwidth_GBps": 20,\n  "reserved_GiB": 0.5,\n  "efficiency": {\n    "gemm_max": 0.85,\n    "gemm_half_dim": 48,\n    "memory": 0.7,\n    "kernel_overhead_us": 2\n  }\n}\n'})
case("sparse-2-4-wrong-density", method({"kind": "sparse", "sparsity": {"mlp": {"density": 0.3, "pattern": "2:4"}}}), "$.method.sparsity.mlp.density: 2:4 sparsity keeps exactly half the weights: density 0.5, got 0.3")
case("sparse-density-zero", method({"kind": "sparse", "sparsity": {"attention": {"density": 0, "pattern": "unstructured"}}}), "$.method.sparsity.attention.density: expected a number in [1e-06, 1], got 0")
case("sparse-block-missing-size", method({"kind": "sparse", "sparsity": {"mlp": {"density": 0.25, "pattern": "block"}}}), '$.method.sparsity.mlp.block: missing required key "block"')
case("tt-missing-factors", method({"kind": "tensor_train", "tensor_train": {"rank": 8, "layers": ["attention"], "factors": []}}), "$.method.tensor_train.factors: no factorisation for the 1024 x 1024 layers of group attention")
case("tt-factor-product", method({"kind": "tensor_train", "tensor_train": {"rank": 8, "layers": ["mlp"], "factors": [{"shape": [1024, 4096], "in": [8, 8, 8], "out": [16, 16, 16]}]}}), "$.method.tensor_train.factors[0]: factors multiply to 512 x 4096, the shape is 1024 x 4096")
case("tt-with-tensor-parallel", lambda d: d.update({"method": TT, "parallelism": {"tensor": 2}}), "$.parallelism.tensor: tensor-train layers are not split across GPUs: tensor parallelism must be 1, got 2")
case("tt-schedule-order", method({"kind": "tensor_train", "tensor_train": dict(TT["tensor_train"], rank_schedule=[{"from": 0, "rank": 8}, {"from": 0.5, "rank": 6}, {"from": 0.4, "rank": 4}])}), "$.method.tensor_train.rank_schedule[2].from: phases must start in increasing order (0.4 after 0.5)")
case("tt-embedding-cols", method({"kind": "tensor_train", "tensor_train": dict(TT["tensor_train"], embedding={"rows": [16, 24, 8, 10], "cols": [4, 4, 8, 4]})}), "$.method.tensor_train.embedding.cols: column factors multiply to 512, the hidden size is 1024")
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "invalid")
os.makedirs(out, exist_ok=True)
for name, (mutate, expected, raw, files) in cases.items():
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    if raw is not None:
        text = raw
    else:
        s = copy.deepcopy(base); mutate(s); text = json.dumps(s, indent=2) + "\n"
    open(os.path.join(d, "scenario.json"), "w").write(text)
    open(os.path.join(d, "expected_error.txt"), "w").write(expected + "\n")
    for fn, content in (files or {}).items():
        open(os.path.join(d, fn), "w").write(content)
print(len(cases))
