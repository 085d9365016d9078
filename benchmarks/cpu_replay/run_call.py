"""The inferior of ``gdb_record.py``: one tiny mlx-lm model (random weights, built by mlx-lm's own classes from a
config) prefills a prompt as ``generate_step`` does (chunks of ``--chunk`` tokens, ``mx.eval`` of the cache state
after each), on a fresh CPU stream, and brackets call ``--call`` with ``mx.get_peak_memory()`` markers.

Why a fresh stream: MLX's CPU command encoder counts dispatches per stream and ends a task every 10th; the
recorder's dispatch indices start at this stream's first dispatch, so ``replay.py`` can place the task ends exactly.
Also prints the undisturbed measurement of the same call (a second model instance, no breakpoints hit before:
only the recording's markers) is not possible under gdb: compare with ``omlx_profiles.live.measure`` instead.
"""
import argparse
import json
import sys

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

sys.path.insert(0, ".")
from omlx_profiles.live.build import build_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config", help="a JSON file with the model config")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--call", type=int, default=1, help="0-based chunk call to bracket")
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    model = build_model(cfg, a.dtype, allow_fp32_promotion=False)
    cache = make_prompt_cache(model)
    toks = mx.random.randint(0, 512, ((a.call + 1) * a.chunk,))
    mx.eval(toks)
    mx.get_peak_memory()  # gdb: set the breakpoints
    s = mx.new_stream(mx.cpu)
    mx.get_peak_memory()  # recording starts: the stream's dispatch 0
    with mx.stream(s):
        for c in range(a.call + 1):
            if c == a.call:
                mx.synchronize(s)
                mx.get_peak_memory()  # MARK: the call starts (worker idle, everything earlier released)
            model(toks[None, c * a.chunk:(c + 1) * a.chunk], cache=cache)
            mx.eval([x.state for x in cache])
        mx.synchronize(s)
        mx.get_peak_memory()  # MARK: the call ended


if __name__ == "__main__":
    main()
