# s8-shard: Qwen3-8B chunk replayed in MLX's real kernel order (from the DOT files of benchmarks/cuda/results/graph_dots_s8.tgz),
# per-kernel input elements (set_input_array) and bytes, residual adds donated; prints graphs per chunk and the
# largest 11-graph allocation. usage: python3 s8-shard-kernel-order-sim.py OLD_ROWS CHUNK [WINDOW_GRAPHS]
# (14336 2048 -> 16 graphs, 7008 MiB: traced 16 graphs, 7104 MiB over the chunk start incl. growth/residual)
import sys
old = int(sys.argv[1]); S = int(sys.argv[2]); W = int(sys.argv[3]) if len(sys.argv) > 3 else 11
cap_new = old + ((S + 255)//256)*256
Mi = 2**20
kvo = old*8*128/Mi; z = (cap_new-old)*8*128/Mi; s8 = S*4096/Mi; kvlen = cap_new*8*128/Mi
kvbuf = cap_new*8*128*2/Mi  # one of k / v new buffer, MiB
a = S*4096*2/Mi  # S x hidden bf16
# (name, elements Mi, bytes MiB)
layer = [("rms", s8, a), ("q", s8+16, a), ("k", s8+4, a/4), ("v", s8+4, a/4), ("qn", s8, 0), ("fill",0, z*2/ (1) /2), ("fill",0, z*2/2), ("kn", S*1024/Mi, 0),
         ("ck1", kvo, kvbuf), ("ck2", z, 0), ("E",0,0), ("ropek", S*1024/Mi, 0), ("cv1", kvo, kvbuf), ("cv2", z, 0), ("E",0,0), ("suk", S*1024/Mi,0), ("suv", S*1024/Mi,0),
         ("ropeq", s8, 0), ("sdpa", s8 + 2*kvlen, a), ("o", s8+16, a), ("add", 2*s8, 0), ("rms", s8, a), ("gate", s8+48, 3*a), ("up", s8+48, 3*a), ("sw", 2*S*12288/Mi, 0), ("down", S*12288/Mi+48, a), ("add", 2*s8, 0)]
last = layer[:1] + [layer[2], layer[3]] + layer[5:17]
ops = [("gather", 593.5, a)] + layer*35 + last
# fills: zero block z rows * 8*128*2B per k = z Mi*2 ... recompute: zero rows bytes per k
zb = (cap_new-old)*8*128*2/Mi
ops = [(n, e, (zb if n == "fill" else b)) for n, e, b in ops]
ends = []; n = 0; e = 0.0
for i, (name, el, b) in enumerate(ops):
    n += 1; e += el
    if n > 100 or e >= 1001:
        ends.append(i + 1); n = 0; e = 0.0
if not ends or ends[-1] < len(ops): ends.append(len(ops))
starts = [0] + ends[:-1]
cum = [0.0]
for _, _, b in ops: cum.append(cum[-1] + b)
best = 0
for g, hi in enumerate(ends):
    lo = starts[max(0, g - (W - 1))]
    best = max(best, cum[hi] - cum[lo])
# old kv freed when each layer's concat graph completes: at the peak the window's layers hold old+new; layers before: net growth
print(len(ends), "graphs; max window alloc", round(best), "MiB (+ carried residual ~%d)" % a)
