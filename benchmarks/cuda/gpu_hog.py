"""Keep the GPU busy from another process (time-slicing makes every kernel of the measured process take
longer, so its host thread gets further ahead of the GPU): a loop of 8192^3 bf16 matmuls for N seconds."""
import sys
import time

import mlx.core as mx

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
a = mx.random.normal((8192, 8192)).astype(mx.bfloat16)
b = mx.random.normal((8192, 8192)).astype(mx.bfloat16)
mx.eval(a, b)
t0 = time.time()
n = 0
while time.time() - t0 < secs:
    c = a @ b
    for _ in range(7):
        c = c @ b * 0.01
    mx.eval(c)
    n += 8
print(f"gpu_hog: {n} matmuls in {time.time() - t0:.1f}s", flush=True)
