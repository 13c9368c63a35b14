#!/usr/bin/env python3
"""Times the vendor peers of einjit's GPU benchmarks and writes them as JSON.

Peers: cuBLAS (torch.matmul / torch.einsum) and cuDNN (F.conv2d, torch.nn.grad.conv2d_input /
conv2d_weight). The case names match the C++ benchmark table so the two can be joined by name+dtype.

    python3 bench/gpu_peers.py --out peers.json [--quick] [--filter SUBSTR]

Needs a CUDA GPU and PyTorch; never run in CI. Method, per case:
  * inputs are random normal; whenever one input set is < ROTATE_BYTES, k sets are allocated
    (k * bytes >= ROTATE_BYTES) and the calls cycle through them, so inputs never sit in L2;
  * correctness: rel = ||out - ref|| / ||ref|| against the same op computed in float64 on the GPU
    from the upcast inputs (null when that would need more than REF_LIMIT_BYTES);
  * timing: warm-up calls first (they also absorb cuDNN's algorithm search, cudnn.benchmark =
    True), then CUDA events around batches of about 20 ms of calls (as bench_cuda times einjit;
    until session 10 each call was timed alone, which also counted the CPU's issue gaps), and
    the median over the batches of the time per call.
fp32 peers are true fp32: TF32 is switched off for cuBLAS and cuDNN (legacy flags only; mixing
them with the newer fp32_precision API makes recent PyTorch raise).
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

ROTATE_BYTES = 256 << 20      # rotate input sets until they total at least this (L2 is 50-60 MB)
REF_LIMIT_BYTES = 8 << 30     # skip the float64 reference above this estimated footprint
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def rn(*shape, dtype):
    """Random normal tensor on the GPU (never zeros)."""
    return torch.randn(*shape, device="cuda", dtype=dtype)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def rel_error(op, args, outs):
    """Max over outputs of ||out-ref||/||ref||, ref = op on float64 copies; None if too big."""
    numel = sum(t.numel() for t in args) + sum(t.numel() for t in outs)
    if 2 * 8 * numel > REF_LIMIT_BYTES:  # x2: upcast copies + internal temporaries (einsum permutes)
        return None
    refs = as_tuple(op(*[t.double() for t in args]))
    rel = 0.0
    for o, r in zip(outs, refs):
        rel = max(rel, (torch.linalg.vector_norm(o.double() - r) / torch.linalg.vector_norm(r)).item())
    del refs
    return rel


def median_ms(op, sets, warmup, reps):
    """Median time per call (ms, CUDA events) of op over `reps` batches of calls, cycling
    through the input sets: each batch is timed between two events and divided by its length,
    about 20 ms of calls as bench_cuda times einjit (events around single calls also count any
    gap while the CPU issues the next call, which inflates short kernels)."""
    k = len(sets)
    for i in range(warmup):
        op(*sets[i % k])
    torch.cuda.synchronize()
    one_s, one_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    one_s.record()
    op(*sets[warmup % k])
    one_e.record()
    torch.cuda.synchronize()
    batch = int(min(200, max(1, 20.0 / max(one_s.elapsed_time(one_e), 1e-3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    n = warmup + 1
    for i in range(reps):
        starts[i].record()
        for _ in range(batch):
            op(*sets[n % k])
            n += 1
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) / batch for s, e in zip(starts, ends))


def cases():
    """Yields (name, dtype key, flops, make, op): make() -> tuple of inputs, op(*inputs) -> out(s)."""
    mm = lambda a, b: torch.matmul(a, b)
    for dt in ("f32", "bf16"):
        d = DTYPES[dt]
        # GEMM C[i,k] = sum_j A[i,j] B[j,k]; flops 2 n^3.
        for n in (1024, 4096, 8192):
            yield f"matmul_NN_{n}", dt, 2 * n ** 3, (lambda n=n, d=d: (rn(n, n, dtype=d), rn(n, n, dtype=d))), mm
        # Transposed operands at 4096: the stored tensor is the transpose, the op uses a .t() view.
        n = 4096
        sq = lambda n=n, d=d: (rn(n, n, dtype=d), rn(n, n, dtype=d))
        yield f"matmul_TN_{n}", dt, 2 * n ** 3, sq, lambda a, b: torch.matmul(a.t(), b)
        yield f"matmul_NT_{n}", dt, 2 * n ** 3, sq, lambda a, b: torch.matmul(a, b.t())
        yield f"matmul_TT_{n}", dt, 2 * n ** 3, sq, lambda a, b: torch.matmul(a.t(), b.t())
        # Permuted batched: C[i,k,b] = sum_j A[i,j,b] B[b,k,j]; einsum permutes/copies internally.
        I = J = K = 1024
        B = 16
        yield ("permuted_batched", dt, 2 * B * I * J * K,
               (lambda d=d: (rn(I, J, B, dtype=d), rn(B, K, J, dtype=d))),
               lambda a, b: torch.einsum("ijb,bkj->ikb", a, b))
        # conv2d NCHW, valid (no padding): y[n,o,h,w] = sum x[n,c,s*h+a,s*w+b] k[o,c,a,b].
        N = 32
        for tag, C, O, H, KS, s in (("conv_c64_56_s1", 64, 64, 56, 3, 1),
                                    ("conv_c128_56_s2", 128, 128, 56, 3, 2),
                                    ("conv_c256_14_s1", 256, 256, 14, 3, 1),
                                    ("conv_c64_256_1x1", 64, 256, 56, 1, 1)):
            Ho = (H - KS) // s + 1
            flops = 2 * N * O * Ho * Ho * C * KS * KS
            x = lambda N=N, C=C, H=H, d=d: rn(N, C, H, H, dtype=d)
            w = lambda O=O, C=C, KS=KS, d=d: rn(O, C, KS, KS, dtype=d)
            dy = lambda N=N, O=O, Ho=Ho, d=d: rn(N, O, Ho, Ho, dtype=d)
            yield (f"{tag}_fwd", dt, flops, (lambda x=x, w=w: (x(), w())),
                   lambda x, w, s=s: F.conv2d(x, w, stride=s))
            yield (f"{tag}_dgrad", dt, flops, (lambda w=w, dy=dy: (w(), dy())),
                   lambda w, dy, s=s, shape=(N, C, H, H): torch.nn.grad.conv2d_input(shape, w, dy, stride=s))
            yield (f"{tag}_wgrad", dt, flops, (lambda x=x, dy=dy: (x(), dy())),
                   lambda x, dy, s=s, shape=(O, C, KS, KS): torch.nn.grad.conv2d_weight(x, shape, dy, stride=s))
    # An embedding's gradient dE[tok[b], d] += dy[b, d] (index_add_, atomic adds); "flops" are
    # the adds. 16384 tokens uniform over a 32768 x 1024 table.
    for dt in ("f32", "bf16"):
        d = DTYPES[dt]
        V, D, Bt = 32768, 1024, 16384
        yield ("embedding_grad", dt, Bt * D,
               (lambda d=d: (torch.zeros(V, D, device="cuda", dtype=d),
                             torch.randint(0, V, (Bt,), device="cuda"), rn(Bt, D, dtype=d))),
               lambda E, t, g: E.index_add_(0, t.long(), g))
    # Linear layer y[b,o] = sum_i x[b,i] w[o,i], fp32 only; fwd+bwd adds dX = dY W, dW = dY^T X.
    Bt, Ii, Oo = 4096, 784, 1024
    f = 2 * Bt * Ii * Oo
    d = torch.float32

    def fwdbwd(x, w, dy):
        return x @ w.t(), dy @ w, dy.t() @ x

    yield "linear_fwd", "f32", f, (lambda: (rn(Bt, Ii, dtype=d), rn(Oo, Ii, dtype=d))), lambda x, w: x @ w.t()
    yield ("linear_fwdbwd", "f32", 3 * f,
           (lambda: (rn(Bt, Ii, dtype=d), rn(Oo, Ii, dtype=d), rn(Bt, Oo, dtype=d))), fwdbwd)


def run_case(name, dt, flops, make, op, warmup, reps):
    first = make()
    k = max(1, math.ceil(ROTATE_BYTES / nbytes(first)))
    sets = [first] + [make() for _ in range(k - 1)]
    with torch.no_grad():
        # On copies: an in-place op (index_add_) must leave `first` as it was for the reference.
        outs = as_tuple(op(*[t.clone() for t in first]))
        torch.cuda.synchronize()
        rel = rel_error(op, first, outs)
        del outs
        torch.cuda.empty_cache()
        ms = median_ms(op, sets, warmup, reps)
    return {"name": name, "dtype": dt, "flops": flops, "median_ms": ms,
            "tflops": flops / (ms * 1e-3) / 1e12, "rel_err": rel, "input_sets": k}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--quick", action="store_true", help="fewer timed calls")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_peers.py: no CUDA device")
    warmup, reps = (5, 7) if a.quick else (10, 30)

    # True fp32 peers (no TF32); let cuDNN choose its fastest algorithm (searched during warm-up).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)

    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "warmup": warmup, "reps": reps,
           "bf16_reduced_precision_reduction":
               torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
           "cases": [], "errors": []}
    print(f"# {doc['device']}  torch {doc['torch']}  cuDNN {doc['cudnn']}  warmup {warmup} reps {reps}")
    print(f"{'case':24s} {'dtype':5s} {'ms':>10s} {'TFLOP/s':>9s} {'rel_err':>9s} {'sets':>4s}")

    def save():
        with open(a.out, "w") as fh:
            json.dump(doc, fh, indent=1)

    fwd_ms = None
    for name, dt, flops, make, op in cases():
        if a.filter not in name:
            continue
        try:
            r = run_case(name, dt, flops, make, op, warmup, reps)
        except Exception as e:  # one failing case must not lose the others
            print(f"{name:24s} {dt:5s} FAILED: {type(e).__name__}: {e}", flush=True)
            doc["errors"].append({"name": name, "dtype": dt, "error": f"{type(e).__name__}: {e}"})
            torch.cuda.empty_cache()
            save()
            continue
        note = ""
        if name == "linear_fwd":
            fwd_ms = r["median_ms"]
        if name == "linear_fwdbwd" and fwd_ms:
            r["ratio_to_fwd"] = r["median_ms"] / fwd_ms
            note = f"  fwd+bwd / fwd = {r['ratio_to_fwd']:.2f}x"
        rel = "null" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        print(f"{name:24s} {dt:5s} {r['median_ms']:10.4f} {r['tflops']:9.2f} {rel:>9s} "
              f"{r['input_sets']:4d}{note}", flush=True)
        doc["cases"].append(r)
        torch.cuda.empty_cache()
        save()  # rewrite after every case so a killed run keeps what it had
    save()
    print(f"# wrote {len(doc['cases'])} cases ({len(doc['errors'])} errors) to {a.out}")


if __name__ == "__main__":
    main()
