"""The PyTorch twin of an etrun run, for bench/pytorch/compare_cpu.sh (not part of ET; PyTorch is not a
dependency of the product).

It trains exactly etrun's model on exactly etrun's batches: the initial parameters, micro-batches, loss
normaliser and optimizer settings that export_run wrote. Encoders are post-LN (BERT), decoders pre-LN (GPT);
GELU is the tanh approximation; layer norms use eps 1e-5; attention runs within each packed sequence
(causal for decoders), batched over sequences when a micro-batch's lengths are all equal. AdamW decays every
parameter, as etrun does; Adam has no decay; clipping after the all-reduce is clip_grad_norm_.

Usage: torch_twin.py EXPORT_DIR [--compile] [--warmup N] [--device cpu|cuda] [--amp none|bf16|fp16]
                     [--out result.json]
--device cuda runs on the GPU (tests/gpu/run.sh), timing each step after torch.cuda.synchronize(); --amp
wraps forward and loss in torch.autocast with that type (master weights and optimizer states fp32, as
etrun's 16-bit products; no loss scaler, as etrun has none yet).
Prints one JSON line: mode, step times, losses.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def load(export_dir):
    with open(os.path.join(export_dir, "meta.json")) as f:
        meta = json.load(f)
    flat = np.fromfile(os.path.join(export_dir, "params.bin"), dtype=np.float32)
    ints = np.fromfile(os.path.join(export_dir, "batches.bin"), dtype=np.int32)
    return meta, flat, ints


def shape_of(pid, count, H, F_):
    if "layernorm" in pid or pid.endswith(".bias"):
        return (count,)
    if pid.endswith("fc2.weight"):
        return (H, F_)
    return (count // H, H)


DEVICE = "cpu"


def build_params(meta, flat):
    H, F_ = meta["model"]["hidden"], meta["model"]["ffn"]
    params = {}
    for p in meta["params"]:
        t = torch.from_numpy(flat[p["offset"]:p["offset"] + p["count"]].copy())
        t = t.reshape(shape_of(p["id"], p["count"], H, F_)).to(DEVICE)
        params[p["id"]] = t.requires_grad_(True)
    return params


def batches(meta, ints):
    """Yields per step (norm, [micro-batch dicts]) from batches.bin."""
    at = 0
    for step in meta["steps_data"]:
        micro = []
        for mb in step["micro"]:
            B, T, P = mb["B"], mb["T"], mb["P"]
            take = lambda n: torch.from_numpy(ints[at:at + n].astype(np.int64)).to(DEVICE)
            tokens = take(T); at += T
            positions = take(T); at += T
            offsets = take(B + 1); at += B + 1
            pred_rows = take(P); at += P
            targets = take(P); at += P
            lengths = (offsets[1:] - offsets[:-1]).tolist()
            micro.append(dict(tokens=tokens, positions=positions, offsets=offsets.tolist(), lengths=lengths,
                              pred_rows=pred_rows, targets=targets))
        yield step["norm"], micro


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def attention(qkv, mb, A, causal):
    T, H3 = qkv.shape
    H = H3 // 3
    D = H // A
    lengths = mb["lengths"]
    if len(set(lengths)) == 1:  # equal lengths: one batched product over sequences and heads
        l = lengths[0]
        q, k, v = qkv.view(len(lengths), l, 3, A, D).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return ctx.permute(0, 2, 1, 3).reshape(T, H)
    out = []
    for o, l in zip(mb["offsets"][:-1], lengths):
        q, k, v = qkv[o:o + l].view(l, 3, A, D).permute(1, 2, 0, 3)
        ctx = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=causal)
        out.append(ctx[0].permute(1, 0, 2).reshape(l, H))
    return torch.cat(out, 0)


def make_blocks(compile_dense):
    """The dense parts of a layer; with --compile they go through torch.compile (attention stays eager: its
    shapes change with every micro-batch's lengths)."""

    def encoder_mlp(x, y, p, i):
        pre = f"layer.{i}."
        ln1 = layer_norm(x + y, p[pre + "attn.layernorm.weight"], p[pre + "attn.layernorm.bias"])
        u = F.linear(ln1, p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"])
        v = F.linear(F.gelu(u, approximate="tanh"), p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])
        return layer_norm(ln1 + v, p[pre + "mlp.layernorm.weight"], p[pre + "mlp.layernorm.bias"])

    def decoder_mlp(x, y, p, i):
        pre = f"layer.{i}."
        res1 = x + y
        ln2 = layer_norm(res1, p[pre + "mlp.layernorm.weight"], p[pre + "mlp.layernorm.bias"])
        u = F.linear(ln2, p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"])
        return res1 + F.linear(F.gelu(u, approximate="tanh"), p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])

    if compile_dense:
        encoder_mlp = torch.compile(encoder_mlp, dynamic=True)
        decoder_mlp = torch.compile(decoder_mlp, dynamic=True)
    return encoder_mlp, decoder_mlp


def forward_loss(p, mb, model, norm, blocks):
    L, A = model["layers"], model["heads"]
    decoder = model["decoder"]
    encoder_mlp, decoder_mlp = blocks
    x = p["embed.word_embeddings"][mb["tokens"]] + p["embed.position_embeddings"][mb["positions"]]
    if "embed.token_type_embeddings" in p:
        x = x + p["embed.token_type_embeddings"][0]
    if not decoder:
        x = layer_norm(x, p["embed.layernorm.weight"], p["embed.layernorm.bias"])
    for i in range(L):
        pre = f"layer.{i}."
        h = layer_norm(x, p[pre + "attn.layernorm.weight"], p[pre + "attn.layernorm.bias"]) if decoder else x
        qkv = F.linear(h, p[pre + "attn.qkv.weight"], p[pre + "attn.qkv.bias"])
        y = F.linear(attention(qkv, mb, A, decoder), p[pre + "attn.out.weight"], p[pre + "attn.out.bias"])
        x = decoder_mlp(x, y, p, i) if decoder else encoder_mlp(x, y, p, i)
    P = mb["targets"].shape[0]
    if decoder:
        h = layer_norm(x, p["head.final_layernorm.weight"], p["head.final_layernorm.bias"])[:P]
        w = p["embed.word_embeddings"] if model["tied"] else p["head.lm.decoder.weight"]
        logits = F.linear(h, w, p.get("head.lm.decoder.bias"))
    else:
        h = x[mb["pred_rows"]]
        h = F.linear(h, p["head.mlm.transform.weight"], p["head.mlm.transform.bias"])
        h = layer_norm(F.gelu(h, approximate="tanh"), p["head.mlm.layernorm.weight"], p["head.mlm.layernorm.bias"])
        w = p["embed.word_embeddings"] if model["tied"] else p["head.mlm.decoder.weight"]
        logits = F.linear(h, w, p.get("head.mlm.decoder.bias"))
    return F.cross_entropy(logits, mb["targets"], ignore_index=-1, reduction="sum") / norm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--amp", default="none", choices=["none", "bf16", "fp16"])
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's top ops of the last step")
    ap.add_argument("--no-cudnn-attention", action="store_true",
                    help="keep scaled_dot_product_attention off cuDNN's backend (flash or memory-efficient "
                         "kernels instead): cuDNN's builds a graph per new sequence length, 1.5-2.2 ms of host time a "
                         "call on an H200 machine")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    if DEVICE == "cpu":
        torch.set_num_threads(1)
    amp = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.amp]
    if a.no_cudnn_attention and DEVICE == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    torch.manual_seed(0)
    meta, flat, ints = load(a.export_dir)
    model, opt = meta["model"], meta["optimizer"]
    if opt["name"] == "lamb" or opt["clip"] == "per_bucket":
        sys.exit("torch_twin: LAMB and per-bucket clipping have no PyTorch counterpart here")
    p = build_params(meta, flat)
    decay = opt["weight_decay"] if opt["name"] == "adamw" else 0.0
    cls = torch.optim.AdamW if opt["name"] == "adamw" else torch.optim.Adam
    optimizer = cls(list(p.values()), lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                    weight_decay=decay)
    blocks = make_blocks(a.compile)
    step_s, losses = [], []
    all_steps = list(batches(meta, ints))
    for step, (norm, micro) in enumerate(all_steps):
        prof = None
        if a.profile and step == len(all_steps) - 1:
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
        sync()
        t0 = time.perf_counter()
        warm = opt["lr_warmup_steps"]
        for g in optimizer.param_groups:
            g["lr"] = opt["lr"] * ((step + 1) / warm if warm > 0 and step + 1 < warm else 1.0)
        optimizer.zero_grad(set_to_none=False)
        total = 0.0
        for mb in micro:
            with torch.autocast(DEVICE, dtype=amp, enabled=amp is not None):
                loss = forward_loss(p, mb, model, norm, blocks)
            loss.backward()
            total += loss.item()
        if opt["clip"] == "after_allreduce":
            torch.nn.utils.clip_grad_norm_(list(p.values()), opt["max_grad_norm"])
        optimizer.step()
        sync()
        step_s.append(time.perf_counter() - t0)
        if prof is not None:
            prof.__exit__(None, None, None)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), file=sys.stderr)
        losses.append(total)
    measured = sorted(step_s[a.warmup:]) or [float("nan")]
    result = dict(mode="torch.compile" if a.compile else "eager", torch=torch.__version__, device=DEVICE,
                  amp=a.amp, cudnn_attention=not a.no_cudnn_attention, steps=len(step_s),
                  median_step_s=measured[len(measured) // 2], step_times_s=step_s, loss=losses)
    line = json.dumps(result)
    if a.out:
        with open(a.out, "w") as f:
            f.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
