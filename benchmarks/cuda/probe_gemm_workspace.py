"""Session 13 (lead): does MLX's CUDA matmul take a cuBLASLt workspace from the allocator, for which shapes?

s13-under charged ``gemm_workspace`` (profiles/kernels/cuda.yaml: min(32 MiB, rows x N x 4 B) on dense down projections
of <= 1024 rows) from one traced ramp (Devstral step 512, 189 vs 173 MiB per graph). This measures it directly: one
bf16 ``x @ w.T`` per shape (nn.Linear's form), warmed up, then peak - (active before + output bytes) over 3 repeats.
Predictions (committed before the run): benchmarks/cuda/predictions-s13-lead.md."""
import json
import sys

import mlx.core as mx

SHAPES = []
for m in (1, 64, 256, 512, 1024, 1025, 1536, 2047, 2048):
    SHAPES.append(("down_devstral", m, 32768, 5120))
for m in (512, 1024, 1536, 2047):
    SHAPES.append(("down_llama8b", m, 14336, 4096))
    SHAPES.append(("down_qwen72b", m, 29568, 8192))
for m in (512, 2047):
    SHAPES.append(("up_devstral", m, 5120, 32768))
    SHAPES.append(("up_llama8b", m, 4096, 14336))
    SHAPES.append(("q_devstral", m, 5120, 4096))
    SHAPES.append(("o_devstral", m, 4096, 5120))
    SHAPES.append(("k_devstral", m, 5120, 1024))
    SHAPES.append(("sq_8192", m, 8192, 8192))


def one(m, k, n):
    x = mx.random.normal((m, k)).astype(mx.bfloat16)
    w = mx.random.normal((n, k)).astype(mx.bfloat16)
    mx.eval(x, w)
    out = []
    for _ in range(4):
        mx.synchronize()
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        y = x @ w.T
        mx.eval(y)
        mx.synchronize()
        out.append(mx.get_peak_memory() - base - y.nbytes)
        del y
    del x, w
    mx.clear_cache()
    return out[1:]


res = []
for name, m, k, n in SHAPES:
    extra = one(m, k, n)
    pred = min(32 << 20, m * n * 4) if name.startswith("down") and m <= 1024 else 0
    res.append(dict(name=name, rows=m, k=k, n=n, extra=extra, charged=pred))
    print(f"{name:14s} M={m:5d} K={k:6d} N={n:6d} extra={[round(e / 2**20, 2) for e in extra]} MiB "
          f"charged={pred / 2**20:.2f} MiB", flush=True)
json.dump(dict(device=str(mx.device_info() if hasattr(mx, 'device_info') else ''), mlx=mx.__version__, rows=res),
          open(sys.argv[1], "w"), indent=1)
