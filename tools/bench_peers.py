#!/usr/bin/env python3
"""numgate peer benchmark: times torch.compile and Liger-Kernel at numgate-bench's shapes.

For every line of numgate-bench's JSON (bench.json, schema 2: op, pass, dtype, shape and the
case's op parameters) of the selected dtypes, this script times the same op with the same
semantics as written by two peers a numgate user could swap in instead:

  torch.compile   the op's forward and backward formulas as PyTorch functions, each compiled
                  with torch.compile(fullgraph=True) (Inductor's generated Triton kernels);
  liger           Liger-Kernel's Triton kernels (its forward / backward functions), when its
                  source tree is given with --liger PATH (the repository or its src/ folder;
                  its src/liger_kernel/ops/__init__.py must be an empty file: upstream it
                  imports every op, some of which need packages the GPU image lacks).

Method (the same as numgate-bench's kernel time): every input is a fresh random tensor;
enough independent input sets are allocated that one rotation touches more than 2x the L2
cache, and consecutive calls use consecutive sets (cold L2, as in a model step). After
warm-up calls, --iters calls run under the PyTorch profiler (CUPTI); a call's time is the
sum of the durations of every GPU activity (kernels, memsets, copies) the profiler records,
divided by the number of calls: GPU time only, no launch gaps, no host overhead.
Launch (--launch): "queued" (the default) runs a GPU spin (torch.cuda._sleep, twice the host
time of the timed calls, not counted) before the timed calls, so the host queues them all
and their kernels run back to back, as numgate-bench's C++ loop launches numgate's;
"per-call" issues each call when the previous one returns (issue 12's original method): a
torch.compile or Liger call takes the host longer to issue than a 20 us kernel runs, so the
GPU idles between the peer's kernels (median idle gaps of 60-106 us on the H200 at the
4x512 and 1x512 shapes, run 19); measured there, the peers' kernel times were the same
either way (queued 0.5-0.6% longer), but only queued matches numgate-bench's launches.
Each row records the median idle gap between consecutive GPU activities ("median_gap_us").
Outputs (--outputs): "reuse" (the default, the method of issue 12's table) drops each call's
results, so PyTorch's caching allocator hands the next call the same output blocks, whose
lines the previous call left in L2 when they fit (a peer's output smaller than L2 is then
written over warm, possibly still dirty, lines); "rotate" keeps the results of the last
sets + 1 calls alive, so the output blocks rotate with the input sets, as numgate-bench's
do with --outputs rotate (every numgate launch writes the outputs of its own set).
numgate-bench --peers FILE follows the file's mode unless --outputs says otherwise, so both
sides write alike.

Semantics. Each peer computes what numgate's pass reads and writes (numgate's descriptors:
tools/../kernels/*/..._oracle.cpp), in the same dtype, with FP32 math inside:
  rmsnorm / offset_rmsnorm / fused_add_rmsnorm / layernorm: y (and residual_out) from x
    (and residual), w (and b); backward dx (= d residual) and dw (and db) from x, w, dy.
  swiglu / geglu: y = act(a) * b; backward da, db. GeGLU's form (erf or tanh) is the case's
    approximate_tanh; Liger has the tanh form only: its erf rows are marked
    same_semantics = false.
  softmax: y = softmax(scale * x) with the case's mask_mode (1 = causal, bottom-right
    aligned, the mask built in the kernel); backward dx from y, dy, and for mask_mode 1 also
    the backward given the mask (dx masked_fill'ed to 0 where masked, autograd's graph of
    the masked forward), since numgate's causal backward uses the mask (it does not read y
    past the causal limit); the faster of the two is the row's peer. Liger's softmax has no
    scale and no mask: its rows are marked same_semantics = false when the case has either.
  rope: q, k rotated by the angles of positions (theta, rotate-half or interleaved) computed
    in the compiled function; Liger's rope takes precomputed cos / sin tensors (their
    computation is not timed) and is in place, rotate-half only.
  cross_entropy: loss (the case's reduction), lse; backward dlogits from logits, targets,
    dloss. Liger computes the gradient inside its forward: its row is pass "fused" (its
    forward + backward calls), compared with numgate's fused entry (variant "fused").
    Targets: random valid classes; with --ce-ignored-every N every N-th is ignore_index
    (default 0: none, as numgate-bench's targets, which are all class 0; Liger does not
    read an ignored token's row, so N > 0 gives it less work than numgate-bench's inputs).
  dropout_add: y = residual + dropout(x), and the keep mask; torch.compile draws its own
    Philox stream (a different stream, the same work); backward dx, d residual from dy and
    the saved mask (numgate regenerates the mask instead of reading it).

Output (--out, JSON, schema_version 1; numgate-bench --peers reads it):
  {"schema_version": 1, "device": str, "torch": str, "triton": str,
   "liger": null | {"path": str, "commit": str | null (HEAD, "-dirty" if modified)},
   "iters": int, "warmup": int, "outputs": "reuse" | "rotate", "launch": "queued" | "per-call",
   "ce_ignored_every": int (0: no cross-entropy target ignored),
   "rows": [{"op", "pass" ("forward" | "backward" | "fused"), "dtype", "shape": [int],
             "params": {name: number}, "peer" ("torch.compile" | "liger"),
             "kernel_us": number (GPU time per call, microseconds), "activities": number
             (GPU activities per call), "same_semantics": bool, "note": str, "sets": int,
             "median_gap_us": number (median idle time between consecutive GPU activities)}],
   "errors": [str]}                   a peer that failed at a shape: that row is missing
Exit status: 0 written (possibly with errors listed); 2 bad arguments or unreadable input;
77 no CUDA device, or no PyTorch to time the peers with.
"""

import argparse
import collections
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

EXIT_USAGE = 2
EXIT_NO_DEVICE = 77


def die(msg, code=EXIT_USAGE):
    print(f"bench_peers: {msg}", file=sys.stderr)
    sys.exit(code)


def checked_liger_src(path):
    """The folder holding Liger-Kernel's liger_kernel package: PATH itself or PATH/src. Refused
    (exit 2) when liger_kernel/ops/__init__.py is missing or not empty (upstream it imports every
    op). tools/peers_job.sh calls this before its main job."""
    src = path if os.path.isdir(os.path.join(path, "liger_kernel")) else os.path.join(path, "src")
    init = os.path.join(src, "liger_kernel", "ops", "__init__.py")
    if not os.path.isfile(init):
        die(f"--liger {path}: no liger_kernel/ops/__init__.py under it or its src/")
    if os.path.getsize(init) != 0:
        die(f"{init} is not empty: replace it by an empty file in your copy (upstream it imports every op)")
    return src


def load_bench_lines(paths, dtypes):
    """The distinct (op, dtype, shape, params) of numgate-bench's lines, in file order."""
    seen, out = set(), []
    for p in paths:
        try:
            with open(p) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            die(f"{p}: cannot read numgate-bench JSON: {e} (run numgate-bench first; tools/run.sh writes "
                f"build/reports/<op>/bench.json)")
        if doc.get("schema_version", 0) < 2:
            die(f"{p}: field 'schema_version' is {doc.get('schema_version')}: need 2 or later (the op parameters "
                f"of each line); rerun numgate-bench from this checkout")
        for i, l in enumerate(doc.get("results", [])):
            for k in ("op", "dtype", "shape", "params"):
                if k not in l:
                    die(f"{p}: results[{i}] has no field '{k}'")
            if l["dtype"] not in dtypes:
                continue
            key = (l["op"], l["dtype"], tuple(l["shape"]), json.dumps(l["params"], sort_keys=True))
            if key in seen:
                continue
            seen.add(key)
            out.append({"op": l["op"], "dtype": l["dtype"], "shape": list(l["shape"]), "params": dict(l["params"])})
    return out


# ----------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------


_SPIN = {}


def spin_cycles_per_us(torch):
    """Clock cycles per microsecond of torch.cuda._sleep's spin kernel (measured once)."""
    if "c" not in _SPIN:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
        _SPIN["c"] = 20_000_000 / (start.elapsed_time(end) * 1000.0)
    return _SPIN["c"]


def gpu_time_per_call(torch, call, nsets, iters, warmup, queued=False):
    """Mean GPU time per call (us), GPU activities per call and the median idle gap (us)
    between consecutive GPU activities, from the profiler's records.

    queued=False: each call is issued when the previous one returns; where a call takes the
    host longer to issue than its kernels run, the GPU idles between them.
    queued=True: a GPU spin (torch.cuda._sleep, twice the host time of the timed calls) runs
    first, so the host queues every timed call behind it and their kernels then run back to
    back, as numgate-bench's C++ loop launches its own; the spin is not counted."""
    import time

    from torch.profiler import ProfilerActivity, profile

    for i in range(warmup):
        call(i % nsets)
    torch.cuda.synchronize()
    cycles = 0
    if queued:
        t0 = time.perf_counter()
        for i in range(3):  # the host's steady-state time per call (compilation was in the warm-up)
            call(i % nsets)
        host_us = (time.perf_counter() - t0) * 1e6 / 3
        torch.cuda.synchronize()
        cycles = int(min(2 * host_us * iters + 1000, 500_000) * spin_cycles_per_us(torch))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if queued:
            torch.cuda._sleep(cycles)
        for i in range(iters):
            call((warmup + i) % nsets)
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if queued:
        spins = [e for e in events if "spin" in e.name]
        if len(spins) != 1:
            raise RuntimeError(f"queued timing: {len(spins)} spin kernels recorded, expected 1")
        events = [e for e in events if "spin" not in e.name]
    spans = sorted((e.time_range.start, e.time_range.end) for e in events)
    if not spans:
        raise RuntimeError("the profiler recorded no GPU activity (CUPTI unavailable?)")
    idle = sorted(spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1))
    gap = idle[len(idle) // 2] if idle else 0.0
    return sum(e - s for s, e in spans) / iters, len(spans) / iters, gap


def sets_for(footprint_bytes, l2_bytes, set_bytes, free_bytes):
    """Input sets so that one rotation touches more than 2x L2 (memory permitting)."""
    n = max(2, 2 * l2_bytes // max(footprint_bytes, 1) + 1)
    n = min(n, 256)
    cap = int(free_bytes * 0.6) // max(set_bytes, 1)
    return max(1, min(n, cap))


# ----------------------------------------------------------------------------------------
# the ops, as each peer writes them
# ----------------------------------------------------------------------------------------


def make_ops(torch, F, liger, ce_ignored_every=0):
    """{op: builder(case) -> list of (pass, peer, same_semantics, note, make_sets, call, footprint)}."""

    def rows_hidden(shape):
        return math.prod(shape[:-1]), shape[-1]

    def rnd(shape, dt, lo=0.25, hi=1.25, signed=True):
        t = torch.empty(shape, device="cuda", dtype=torch.float32).uniform_(lo, hi)
        if signed:
            t = t * (torch.randint(0, 2, shape, device="cuda") * 2 - 1)
        return t.to(dt)

    def nbytes(*ts):
        return sum(t.numel() * t.element_size() for t in ts)

    comp = lambda f: torch.compile(f, fullgraph=True, dynamic=False)

    # ---- norms -------------------------------------------------------------------------
    def rms_fwd(x, w, eps, offset):
        xf = x.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return ((xf * r) * (w.float() + offset)).to(x.dtype)

    def rms_bwd(x, w, dy, eps, offset):
        xf, g = x.float(), dy.float() * (w.float() + offset)
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        xh = xf * r
        dx = r * (g - xh * (g * xh).mean(-1, keepdim=True))
        dw = (dy.float() * xh).sum(0)
        return dx.to(x.dtype), dw.to(w.dtype)

    def fadd_fwd(x, res, w, eps):
        s = x + res
        return s, rms_fwd(s, w, eps, 0.0)

    def fadd_bwd(x, res, w, dy, dres, eps):
        s = x + res
        dx, dw = rms_bwd(s, w, dy, eps, 0.0)
        return (dx.float() + dres.float()).to(x.dtype), dw

    def ln_fwd(x, w, b, eps):
        xf = x.float()
        mu = xf.mean(-1, keepdim=True)
        var = (xf - mu).pow(2).mean(-1, keepdim=True)
        return (((xf - mu) * torch.rsqrt(var + eps)) * w.float() + b.float()).to(x.dtype)

    def ln_bwd(x, w, dy, eps):
        xf = x.float()
        mu = xf.mean(-1, keepdim=True)
        r = torch.rsqrt((xf - mu).pow(2).mean(-1, keepdim=True) + eps)
        xh = (xf - mu) * r
        g = dy.float() * w.float()
        dx = r * (g - g.mean(-1, keepdim=True) - xh * (g * xh).mean(-1, keepdim=True))
        return dx.to(x.dtype), (dy.float() * xh).sum(0).to(w.dtype), dy.float().sum(0).to(w.dtype)

    def norm_builder(kind):
        def build(c):
            R, H = rows_hidden(c["shape"])
            dt = DT[c["dtype"]]
            eps = float(c["params"].get("eps", 1e-6))
            out = []

            def mk():
                d = {"x": rnd((R, H), dt), "w": rnd((H,), dt, 0.5, 1.5, False), "dy": rnd((R, H), dt)}
                if kind == "fadd":
                    d["res"] = rnd((R, H), dt)
                    d["dres"] = rnd((R, H), dt)
                if kind == "ln":
                    d["b"] = rnd((H,), dt, 0.5, 1.5, False)
                return d

            if kind in ("rms", "offset"):
                off = 1.0 if kind == "offset" else 0.0
                f, b = comp(lambda x, w: rms_fwd(x, w, eps, off)), comp(lambda x, w, dy: rms_bwd(x, w, dy, eps, off))
                out.append(("forward", "torch.compile", True, "", mk, lambda s: f(s["x"], s["w"]), ("x", "w", "x")))
                out.append(("backward", "torch.compile", True, "", mk, lambda s: b(s["x"], s["w"], s["dy"]),
                            ("x", "w", "dy", "x", "w")))
                if liger:
                    from liger_kernel.ops.rms_norm import rms_norm_backward, rms_norm_forward

                    mode = "gemma" if kind == "offset" else "llama"

                    def lf(s):
                        return rms_norm_forward(s["x"], s["w"], eps, off, mode, None)

                    def mk_l():
                        s = mk()
                        y, xs, rstd, bs, nw, cm = lf(s)
                        s.update(xs=xs, rstd=rstd, bs=bs, nw=nw, cm=cm)
                        return s

                    out.append(("forward", "liger", True, f"casting_mode {mode}", mk, lf, ("x", "w", "x")))
                    out.append(("backward", "liger", True, f"casting_mode {mode}, in_place", mk_l,
                                lambda s: rms_norm_backward(s["dy"], s["xs"], s["w"], s["rstd"], off, s["cm"], s["bs"],
                                                            s["nw"], True, None),
                                ("x", "w", "dy", "x", "w")))
            elif kind == "fadd":
                f = comp(lambda x, r, w: fadd_fwd(x, r, w, eps))
                b = comp(lambda x, r, w, dy, dr: fadd_bwd(x, r, w, dy, dr, eps))
                out.append(("forward", "torch.compile", True, "", mk, lambda s: f(s["x"], s["res"], s["w"]),
                            ("x", "res", "w", "x", "x")))
                out.append(("backward", "torch.compile", True, "", mk,
                            lambda s: b(s["x"], s["res"], s["w"], s["dy"], s["dres"]),
                            ("x", "res", "w", "dy", "dres", "x", "w")))
                if liger:
                    from liger_kernel.ops.fused_add_rms_norm import (fused_add_rms_norm_backward,
                                                                     fused_add_rms_norm_forward)

                    def lf(s):
                        return fused_add_rms_norm_forward(s["x"], s["res"], s["w"], eps, 0.0, "llama")

                    def mk_l():
                        s = mk()
                        y, S, rstd, bs, nw, ns, cm = lf(s)
                        s.update(S=S, rstd=rstd, bs=bs, nw=nw, ns=ns, cm=cm)
                        return s

                    out.append(("forward", "liger", True, "", mk, lf, ("x", "res", "w", "x", "x")))
                    out.append(("backward", "liger", True, "reads the saved sum S instead of x and residual", mk_l,
                                lambda s: fused_add_rms_norm_backward(s["dy"], s["dres"], s["S"], s["w"], s["rstd"], 0.0,
                                                                      s["cm"], s["bs"], s["nw"], s["ns"], False),
                                ("x", "res", "w", "dy", "dres", "x", "w")))
            else:
                f = comp(lambda x, w, bb: ln_fwd(x, w, bb, eps))
                b = comp(lambda x, w, dy: ln_bwd(x, w, dy, eps))
                out.append(("forward", "torch.compile", True, "", mk, lambda s: f(s["x"], s["w"], s["b"]),
                            ("x", "w", "b", "x")))
                out.append(("backward", "torch.compile", True, "", mk, lambda s: b(s["x"], s["w"], s["dy"]),
                            ("x", "w", "dy", "x", "w", "b")))
                if liger:
                    from liger_kernel.ops.layer_norm import layer_norm_backward, layer_norm_forward

                    def lf(s):
                        return layer_norm_forward(s["x"], s["w"], s["b"], eps)

                    def mk_l():
                        s = mk()
                        y, xs, mean, rstd, bs, nw = lf(s)
                        s.update(xs=xs, mean=mean, rstd=rstd)
                        return s

                    out.append(("forward", "liger", True, "", mk, lf, ("x", "w", "b", "x")))
                    out.append(("backward", "liger", True, "", mk_l,
                                lambda s: layer_norm_backward(s["dy"], s["xs"], s["w"], s["b"], s["mean"], s["rstd"]),
                                ("x", "w", "dy", "x", "w", "b")))
            return out

        return build

    # ---- GLU ---------------------------------------------------------------------------
    def glu_builder(gelu):
        def build(c):
            n = math.prod(c["shape"])
            H = c["shape"][-1]
            R = n // H
            dt = DT[c["dtype"]]
            tanh = bool(c["params"].get("approximate_tanh", 0)) if gelu else False
            appr = "tanh" if tanh else "none"

            def act(a):
                return F.gelu(a, approximate=appr) if gelu else F.silu(a)

            def fwd(a, b):
                return (act(a.float()) * b.float()).to(a.dtype)

            def bwd(a, b, dy):
                af = a.float()
                # the derivative written out (Inductor fuses it into one kernel)
                if gelu and tanh:
                    k = math.sqrt(2 / math.pi)
                    u = k * (af + 0.044715 * af ** 3)
                    t = torch.tanh(u)
                    d = 0.5 * (1 + t) + 0.5 * af * (1 - t * t) * k * (1 + 3 * 0.044715 * af * af)
                elif gelu:
                    d = 0.5 * (1 + torch.erf(af / math.sqrt(2))) + af * torch.exp(-0.5 * af * af) / math.sqrt(2 * math.pi)
                else:
                    sg = torch.sigmoid(af)
                    d = sg * (1 + af * (1 - sg))
                g = dy.float()
                return ((g * b.float()) * d).to(a.dtype), (g * act(af)).to(a.dtype)

            def mk():
                return {"a": rnd((R, H), dt), "b": rnd((R, H), dt), "dy": rnd((R, H), dt)}

            f, b = comp(fwd), comp(bwd)
            out = [("forward", "torch.compile", True, "", mk, lambda s: f(s["a"], s["b"]), ("a", "b", "a")),
                   ("backward", "torch.compile", True, "", mk, lambda s: b(s["a"], s["b"], s["dy"]),
                    ("a", "b", "dy", "a", "b"))]
            if liger:
                if gelu:
                    from liger_kernel.ops.geglu import geglu_backward, geglu_forward

                    same = tanh
                    note = "" if tanh else "Liger has the tanh form only; the case is erf"
                    out.append(("forward", "liger", same, note, mk, lambda s: geglu_forward(s["a"], s["b"]),
                                ("a", "b", "a")))
                    out.append(("backward", "liger", same, note + ("; " if note else "") + "in place into a, b", mk,
                                lambda s: geglu_backward(s["a"], s["b"], s["dy"]), ("a", "b", "dy", "a", "b")))
                else:
                    from liger_kernel.ops.swiglu import swiglu_backward, swiglu_forward

                    out.append(("forward", "liger", True, "", mk, lambda s: swiglu_forward(s["a"], s["b"]),
                                ("a", "b", "a")))
                    out.append(("backward", "liger", True, "in place into a, b", mk,
                                lambda s: swiglu_backward(s["a"], s["b"], s["dy"]), ("a", "b", "dy", "a", "b")))
            return out

        return build

    # ---- softmax -----------------------------------------------------------------------
    def softmax_build(c):
        shape = c["shape"]
        dt = DT[c["dtype"]]
        scale = float(c["params"].get("scale", 1.0))
        mode = int(c["params"].get("mask_mode", 0))
        q_len, k_len = shape[-2], shape[-1]
        if mode == 2:
            raise NotImplementedError("mask_mode 2 (an additive mask tensor) is not timed by this script")

        def fwd(x):
            z = x.float() * scale
            if mode == 1:
                i = torch.arange(q_len, device=x.device)[:, None]
                j = torch.arange(k_len, device=x.device)[None, :]
                z = z.masked_fill(j > i + (k_len - q_len), float("-inf"))
            return torch.softmax(z, -1).to(x.dtype)

        def bwd(y, dy):
            yf, g = y.float(), dy.float()
            return (scale * (yf * (g - (g * yf).sum(-1, keepdim=True)))).to(y.dtype)

        def bwd_masked(y, dy):
            # autograd's graph of the masked forward: masked_fill's backward zeroes dx where
            # the mask is, so the compiled kernel is given the mask, as numgate's backward is
            yf, g = y.float(), dy.float()
            i = torch.arange(q_len, device=y.device)[:, None]
            j = torch.arange(k_len, device=y.device)[None, :]
            dx = scale * (yf * (g - (g * yf).sum(-1, keepdim=True)))
            return dx.masked_fill(j > i + (k_len - q_len), 0.0).to(y.dtype)

        def mk():
            x = rnd(tuple(shape), dt)
            return {"x": x, "y": fwd_c(x), "dy": rnd(tuple(shape), dt)}

        fwd_c, bwd_c = comp(fwd), comp(bwd)
        out = [("forward", "torch.compile", True, "", mk, lambda s: fwd_c(s["x"]), ("x", "x")),
               ("backward", "torch.compile", True, "", mk, lambda s: bwd_c(s["y"], s["dy"]), ("y", "dy", "x"))]
        if mode == 1:
            bwd_mc = comp(bwd_masked)
            # the same values as numgate's dx but at masked positions: 0 there, where numgate
            # gives +-0 (or NaN for a non-finite dy); the same work, so it counts as a peer
            out.append(("backward", "torch.compile", True, "mask given (masked_fill of dx)", mk,
                        lambda s: bwd_mc(s["y"], s["dy"]), ("y", "dy", "x")))
        if liger:
            from liger_kernel.ops.softmax import _softmax_backward, _softmax_forward

            same = mode == 0 and scale == 1.0
            note = "" if same else "Liger's softmax has no scale and no mask"

            def mk_l():
                s = mk()
                y, bs, nw, multi = _softmax_forward(s["x"])
                s.update(ly=y, bs=bs, nw=nw, multi=multi)
                return s

            out.append(("forward", "liger", same, note, mk, lambda s: _softmax_forward(s["x"]), ("x", "x")))
            out.append(("backward", "liger", same, note, mk_l,
                        lambda s: _softmax_backward(s["dy"], s["ly"], s["bs"], s["nw"], s["multi"]), ("y", "dy", "x")))
        return out

    # ---- RoPE --------------------------------------------------------------------------
    def rope_build(c):
        B, T, Hq, D = c["shape"]
        dt = DT[c["dtype"]]
        Hk = int(c["params"]["kv_heads"])
        theta = float(c["params"]["theta"])
        inter = bool(c["params"].get("interleaved", 0))
        inv = (1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))).float().cuda()

        def angles(pos):
            return pos.float()[:, :, None] * inv[None, None, :]  # [B, T, D/2]

        def rot(x, a, sign):
            c_, s_ = torch.cos(a)[:, :, None, :], sign * torch.sin(a)[:, :, None, :]
            xf = x.float()
            if inter:
                x1, x2 = xf[..., 0::2], xf[..., 1::2]
                return torch.stack((x1 * c_ - x2 * s_, x2 * c_ + x1 * s_), -1).flatten(-2).to(x.dtype)
            x1, x2 = xf[..., : D // 2], xf[..., D // 2:]
            return torch.cat((x1 * c_ - x2 * s_, x2 * c_ + x1 * s_), -1).to(x.dtype)

        def fwd(q, k, pos):
            a = angles(pos)
            return rot(q, a, 1.0), rot(k, a, 1.0)

        def bwd(dq, dk, pos):
            a = angles(pos)
            return rot(dq, a, -1.0), rot(dk, a, -1.0)

        def mk():
            pos = torch.arange(T, device="cuda", dtype=torch.int64)[None, :].expand(B, T).contiguous()
            return {"q": rnd((B, T, Hq, D), dt), "k": rnd((B, T, Hk, D), dt), "pos": pos}

        f, b = comp(fwd), comp(bwd)
        out = [("forward", "torch.compile", True, "", mk, lambda s: f(s["q"], s["k"], s["pos"]), ("q", "k", "q", "k")),
               ("backward", "torch.compile", True, "", mk, lambda s: b(s["q"], s["k"], s["pos"]),
                ("q", "k", "q", "k"))]
        if liger and not inter:
            from liger_kernel.ops.rope import rope_backward, rope_forward

            def mk_l():
                s = mk()
                a = angles(s["pos"][:1])
                emb = torch.cat((a, a), -1)  # [1, T, D]
                s.update(cos=emb.cos().to(dt), sin=emb.sin().to(dt), qt=s["q"].transpose(1, 2), kt=s["k"].transpose(1, 2))
                return s

            note = "cos / sin precomputed (not timed); in place"
            out.append(("forward", "liger", True, note, mk_l, lambda s: rope_forward(s["qt"], s["kt"], s["cos"], s["sin"]),
                        ("q", "k", "q", "k")))
            out.append(("backward", "liger", True, note, mk_l,
                        lambda s: rope_backward(s["qt"], s["kt"], s["cos"], s["sin"]), ("q", "k", "q", "k")))
        return out

    # ---- cross-entropy -----------------------------------------------------------------
    def ce_build(c):
        N, V = c["shape"]
        dt = DT[c["dtype"]]
        p = c["params"]
        ign = int(p.get("ignore_index", -100))
        eps = float(p.get("label_smoothing", 0.0))
        z = float(p.get("z_loss", 0.0))
        cap = float(p.get("softcap", 0.0))
        red = int(p.get("reduction", 1))

        def stats(logits, targets):
            s = logits.float()
            if cap > 0:
                s = cap * torch.tanh(s / cap)
            lse = torch.logsumexp(s, -1)
            valid = targets != ign
            t = torch.where(valid, targets, 0)
            return s, lse, valid, t

        def fwd(logits, targets):
            s, lse, valid, t = stats(logits, targets)
            ce = lse - s.gather(1, t[:, None]).squeeze(1)
            if eps > 0:
                ce = (1 - eps) * ce + eps * (lse - s.mean(-1))
            if z > 0:
                ce = ce + z * lse * lse
            ce = torch.where(valid, ce, 0.0)
            if red == 0:
                loss = ce
            elif red == 2:
                loss = ce.sum()
            else:
                n = valid.sum()
                loss = torch.where(n > 0, ce.sum() / n.clamp(min=1), 0.0)
            return loss.to(logits.dtype), lse.to(logits.dtype)

        def bwd(logits, targets, dloss):
            s, lse, valid, t = stats(logits, targets)
            if red == 0:
                g = dloss.float()
            elif red == 2:
                g = dloss.float().expand(N)
            else:
                g = (dloss.float() / valid.sum().clamp(min=1)).expand(N)
            g = torch.where(valid, g, 0.0)
            pr = torch.exp(s - lse[:, None])
            if z > 0:
                pr = pr * (1 + 2 * z * lse)[:, None]
            oh = F.one_hot(t, V).float()
            d = pr - (1 - eps) * oh - eps / V
            if cap > 0:
                th = torch.tanh(logits.float() / cap)
                d = d * (1 - th * th)
            return (g[:, None] * d).to(logits.dtype)

        def mk():
            tg = torch.randint(0, V, (N,), device="cuda")
            if ce_ignored_every > 0:  # --ce-ignored-every; default 0: every token counted, as numgate-bench's
                tg[::ce_ignored_every] = ign
            return {"x": rnd((N, V), dt), "t": tg, "dl": torch.ones((N,) if red == 0 else (), device="cuda", dtype=dt)}

        def fused(logits, targets, dloss):
            loss, lse = fwd(logits, targets)
            return loss, lse, bwd(logits, targets, dloss)

        f, b, fb = comp(fwd), comp(bwd), comp(fused)
        out = [("forward", "torch.compile", True, "", mk, lambda s: f(s["x"], s["t"]), ("x",)),
               ("backward", "torch.compile", True, "", mk, lambda s: b(s["x"], s["t"], s["dl"]), ("x", "x")),
               ("fused", "torch.compile", True, "loss, lse and dlogits from one compiled function", mk,
                lambda s: fb(s["x"], s["t"], s["dl"]), ("x", "x"))]
        if liger:
            from liger_kernel.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward

            rname = {0: "none", 1: "mean", 2: "sum"}[red]

            def lfused(s):
                loss, _, _, _, grad = cross_entropy_forward(s["x"], s["t"], None, ign, z, eps, rname,
                                                            cap if cap > 0 else None, False)
                return cross_entropy_backward(grad, s["dl"] if red == 0 else torch.ones((), device="cuda", dtype=dt))

            def mk_l():
                # Liger computes the gradient in its forward only when the logits require grad
                # (HAS_GRADIENTS = _input.requires_grad); without it the row would time a forward.
                s = mk()
                s["x"].requires_grad_(True)
                return s

            note = "loss and dlogits in one kernel (gradient written into the logits); no lse output"
            if ce_ignored_every > 0:
                note += f"; one token in {ce_ignored_every} ignored (its row not read), numgate-bench's targets: none"
            out.append(("fused", "liger", True, note, mk_l, lfused, ("x", "x")))
        return out

    # ---- dropout + residual add ---------------------------------------------------------
    def dropout_build(c):
        R, H = rows_hidden(c["shape"])
        dt = DT[c["dtype"]]
        pr = float(c["params"]["p"])
        scale = 1.0 / (1.0 - pr) if pr < 1 else 0.0

        def fwd(x, res):
            keep = torch.rand_like(x, dtype=torch.float32) >= pr
            return (res.float() + torch.where(keep, x.float() * scale, 0.0)).to(x.dtype), keep.to(x.dtype)

        def bwd(dy, mask):
            return torch.where(mask != 0, dy.float() * scale, 0.0).to(dy.dtype), dy.clone()

        def mk():
            return {"x": rnd((R, H), dt), "r": rnd((R, H), dt), "dy": rnd((R, H), dt),
                    "m": (torch.rand((R, H), device="cuda") >= pr).to(dt)}

        f, b = comp(fwd), comp(bwd)
        note = "torch's own Philox stream"
        return [("forward", "torch.compile", True, note, mk, lambda s: f(s["x"], s["r"]), ("x", "x", "x", "x")),
                ("backward", "torch.compile", True, note + "; reads the saved mask", mk, lambda s: b(s["dy"], s["m"]),
                 ("x", "x", "x"))]

    DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    return {
        "rmsnorm": norm_builder("rms"),
        "offset_rmsnorm": norm_builder("offset"),
        "fused_add_rmsnorm": norm_builder("fadd"),
        "layernorm": norm_builder("ln"),
        "swiglu": glu_builder(False),
        "geglu": glu_builder(True),
        "softmax": softmax_build,
        "rope": rope_build,
        "cross_entropy": ce_build,
        "dropout_add": dropout_build,
    }


def git_env():
    """os.environ without the variables that point git at a repository (GIT_DIR,
    GIT_WORK_TREE, GIT_INDEX_FILE, ...: `git rev-parse --local-env-vars`), which git exports to
    hooks and some CI runners set: git must find the repository from the folder it is given."""
    r = subprocess.run(["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, timeout=10)
    names = set(r.stdout.split()) if r.returncode == 0 else set()
    return {k: v for k, v in os.environ.items() if k not in names}


def liger_commit(src):
    """HEAD of the Liger-Kernel checkout whose src/ is src (the folder holding
    liger_kernel/), with "-dirty" appended when its tracked files are modified (the script's
    required empty ops/__init__.py is one such change); None when neither src nor its parent
    is the top of a git checkout (a copy inside another repository, say a git-ignored folder
    of numgate's, would otherwise report that repository's commit) or git cannot say (its
    message is printed)."""

    def git(*args):
        r = subprocess.run(["git", "-C", src, *args], capture_output=True, text=True, timeout=10, env=env)
        if r.returncode != 0 and r.stderr.strip():
            print(f"bench_peers: liger commit not recorded: git {' '.join(args)}: {r.stderr.strip()}",
                  file=sys.stderr)
        return r.stdout.splitlines() if r.returncode == 0 else []

    try:
        env = git_env()
        here = os.path.realpath(src)
        top_head = git("rev-parse", "--show-toplevel", "HEAD")
        if len(top_head) != 2 or os.path.realpath(top_head[0]) not in (here, os.path.dirname(here)):
            return None
        return top_head[1] + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", nargs="+", required=True,
                    help="numgate-bench JSON files (globs allowed), e.g. build/reports/*/bench.json")
    ap.add_argument("--out", required=True, help="peers JSON to write (numgate-bench --peers reads it)")
    ap.add_argument("--liger", default=None, help="Liger-Kernel source tree (repository or its src/)")
    ap.add_argument("--dtypes", default="bf16", help="comma-separated dtypes to time (default bf16)")
    ap.add_argument("--ops", default="", help="comma-separated ops (default: every op in the bench files)")
    ap.add_argument("--outputs", choices=("reuse", "rotate"), default="reuse",
                    help="reuse: drop each call's results (the allocator reuses one output block); "
                         "rotate: keep the last sets + 1 results alive (outputs rotate like numgate-bench --outputs rotate)")
    ap.add_argument("--launch", choices=("queued", "per-call"), default="queued",
                    help="per-call: each call issued when the previous returns (the GPU idles between kernels "
                         "where a call takes the host longer than its kernels run); queued: a GPU spin first, so "
                         "the timed calls queue behind it and run back to back, as numgate-bench launches its own")
    ap.add_argument("--ce-ignored-every", type=int, default=0, metavar="N",
                    help="cross-entropy targets: every N-th token ignore_index (0, the default: none, as numgate-bench's "
                         "targets, so both sides read every row; an ignored token's row is not read by Liger)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    if a.iters < 1 or a.warmup < 0:
        die("--iters must be >= 1 and --warmup >= 0")
    if a.ce_ignored_every < 0:
        die("--ce-ignored-every must be >= 0 (0: no token ignored)")
    paths = []
    for p in a.bench:
        g = sorted(glob.glob(p))
        paths += g if g else [p]
    cases = load_bench_lines(paths, set(a.dtypes.split(",")))
    if a.ops:
        keep = set(a.ops.split(","))
        cases = [c for c in cases if c["op"] in keep]
    liger_src = checked_liger_src(a.liger) if a.liger else None

    try:
        import torch
        import torch.nn.functional as F
    except (ImportError, OSError) as e:  # OSError: a torch whose shared libraries fail to load
        die(f"PyTorch cannot be imported ({e}): the peers are timed with PyTorch and Triton (the GPU "
            f"machine's python3 has both)", EXIT_NO_DEVICE)

    if not torch.cuda.is_available():
        die("no CUDA device", EXIT_NO_DEVICE)
    liger = None
    if a.liger:
        sys.path.insert(0, liger_src)
        liger = {"path": os.path.abspath(a.liger), "commit": liger_commit(liger_src)}
    import triton

    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 50 << 20))
    ops = make_ops(torch, F, liger is not None, a.ce_ignored_every)
    rows, errors = [], []
    for c in cases:
        if c["op"] not in ops:
            errors.append(f"{c['op']}: no peer written for this op")
            continue
        try:
            variants = ops[c["op"]](c)
        except Exception as e:  # noqa: BLE001 - reported, the other shapes go on
            errors.append(f"{c['op']} {c['shape']}: {type(e).__name__}: {e}")
            continue
        for (pas, peer, same, note, mk, call, fp_names) in variants:
            tag = f"{c['op']} {pas} {c['dtype']} {c['shape']} {peer}"
            held = {}  # this variant's input sets and (rotate) kept results, released after it
            try:
                s0 = mk()
                fp = sum(s0[n].numel() * s0[n].element_size() for n in fp_names if n in s0)
                set_bytes = sum(t.numel() * t.element_size() for t in s0.values() if torch.is_tensor(t))
                free, _ = torch.cuda.mem_get_info()
                n = sets_for(fp, l2, set_bytes * 2, free)
                held["sets"] = [s0] + [mk() for _ in range(n - 1)]
                del s0
                # rotate: the results of the last n + 1 calls stay allocated (while a call runs,
                # n + 2), so the allocator cannot hand a call the block the previous call wrote.
                held["ring"] = collections.deque(maxlen=n + 1) if a.outputs == "rotate" else None

                def timed(i):
                    result = call(held["sets"][i])
                    if held["ring"] is not None:
                        held["ring"].append(result)

                us, acts, gap = gpu_time_per_call(torch, timed, n, a.iters, a.warmup, queued=a.launch == "queued")
                rows.append({"op": c["op"], "pass": pas, "dtype": c["dtype"], "shape": c["shape"], "params": c["params"],
                             "peer": peer, "kernel_us": us, "activities": acts, "same_semantics": same, "note": note,
                             "sets": n, "median_gap_us": gap})
                print(f"peer {tag}: {us:.2f} us/call ({acts:.1f} GPU activities/call, {n} input sets, "
                      f"median idle gap {gap:.2f} us)"
                      + ("" if same else "  [different semantics]"), flush=True)
            except Exception as e:  # noqa: BLE001
                msg = f"{tag}: {type(e).__name__}: {e}"
                errors.append(msg)
                print(f"peer {msg}", flush=True)
                traceback.print_exc(limit=2)
            finally:
                held.clear()  # before the next variant measures free memory and allocates its sets
                s0 = None
            torch.cuda.empty_cache()
    doc = {"schema_version": 1, "device": props.name, "torch": torch.__version__, "triton": triton.__version__,
           "liger": liger, "iters": a.iters, "warmup": a.warmup, "outputs": a.outputs, "launch": a.launch,
           "ce_ignored_every": a.ce_ignored_every, "rows": rows, "errors": errors}
    d = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".peers.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, a.out)
    print(f"bench_peers: {len(rows)} rows, {len(errors)} errors -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
