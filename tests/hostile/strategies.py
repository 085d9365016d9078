"""Hypothesis strategies for the two file formats users hand us: config.json and safetensors headers.

``configs()``: a real config (Qwen3-8B's keys, or Qwen3-Next's, whose linear_* keys a recipe formula reads) with a few keys replaced by hostile values of every JSON
type (huge, negative and zero integers, NaN/Infinity, floats where ints belong, strings with control
characters, booleans, nulls, nested containers) and sometimes an MLX ``quantization`` block, valid or not.

``safetensors_files()``: the bytes of a ``.safetensors`` file: a header of tensors (known and unknown
dtypes, shapes, offsets that tile the data or overlap, leave gaps, run past the end), optional
``__metadata__``, a length prefix that may lie, and a data section that may be short or long.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

from hypothesis import strategies as st

from omlx_profiles.estimate.safetensors import DTYPE_BITS

BASE_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 151936,
}

ints = st.one_of(st.integers(-2, 300), st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63, 10**30, 10**400]))
hostile_values = st.recursive(
    st.one_of(ints, st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
              st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
              st.sampled_from(["\x1b[31m", "\u202e", "bfloat16", "float8", "sliding_attention"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)

quantization = st.one_of(
    st.none(),
    st.fixed_dictionaries({"bits": st.sampled_from([2, 3, 4, 5, 6, 8])},
                          optional={"group_size": st.sampled_from([32, 64, 128]),
                                    "mode": st.sampled_from(["affine", "mxfp4"])}),
    st.dictionaries(st.sampled_from(["bits", "group_size", "mode", "lm_head"]), hostile_values, max_size=4))


#: A hybrid whose state shapes are formulas over config keys (module recipe): its ``linear_*`` integers are
#: read by the recipe reader, not ``Reader.int`` (a 400-digit one reached float arithmetic, session 6).
NEXT_CONFIG = json.loads((Path(__file__).resolve().parents[1] / "configs" / "qwen3-next-80b-a3b-thinking.json")
                         .read_text())


#: ``rope_scaling`` as mlx-lm's initialize_rope reads it: real shapes (YaRN gives the context, session 7)
#: and every hostile value in each field
rope_scaling = st.one_of(
    st.none(), hostile_values,
    st.fixed_dictionaries({"rope_type": st.sampled_from(["yarn", "linear", "dynamic", "llama3", "longrope", "mrope",
                                                         "nosuch", "\x1b[2J"])},
                          optional={"factor": st.one_of(st.floats(0.5, 64), hostile_values),
                                    "original_max_position_embeddings": st.one_of(st.sampled_from([4096, 32768]),
                                                                                  hostile_values)}))


@st.composite
def configs(draw) -> dict:
    base = draw(st.sampled_from([BASE_CONFIG, NEXT_CONFIG]))
    c = dict(base)
    for key in draw(st.lists(st.sampled_from(sorted(base)), max_size=3, unique=True)):
        c[key] = draw(hostile_values)
    q = draw(quantization)
    if q is not None:
        c["quantization"] = q
    if draw(st.booleans()):
        c[draw(st.sampled_from(["rope_scaling", "rope_parameters"]))] = draw(rope_scaling)
    if draw(st.integers(0, 5)) == 0:  # the multimodal wrapper: the language model's keys under text_config
        c = {"model_type": c.get("model_type"), "architectures": c.get("architectures"), "text_config": c}
    return c


@st.composite
def checkpoints(draw) -> dict:
    """A model directory's weight files: ``{file name: (header, data bytes)}`` plus an optional index.
    Tensors may repeat across files, shard names may be numbered out of range or miss one, the index may
    name files that escape the directory, are missing, or are not weight files."""
    n_files = draw(st.integers(1, 3))
    total = draw(st.one_of(st.just(n_files), st.integers(0, 4)))
    numbered = draw(st.booleans())
    names = [f"model-{i + 1 if draw(st.integers(0, 4)) else draw(st.integers(0, 5)):05d}-of-{total:05d}.safetensors"
             if numbered else ("model.safetensors" if i == 0 else f"model{i}.safetensors") for i in range(n_files)]
    pool = ["a", "b", "c", "d"]
    files = {}
    for name in names:
        tensors = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=3, unique=True))
        files[name] = {t: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, t in enumerate(tensors)}
    index = None
    if draw(st.booleans()):
        targets = st.one_of(st.sampled_from(sorted(files)), st.sampled_from(["../x.safetensors", "/etc/passwd", "", ".",
                                                                               "missing.safetensors", "config.json"]))
        index = {"weight_map": draw(st.dictionaries(st.sampled_from(pool), targets, max_size=4))}
    return {"files": files, "index": index}


def config_text(c: dict) -> str:
    return json.dumps(c, allow_nan=True)


dtypes = st.one_of(st.sampled_from(sorted(DTYPE_BITS)), st.sampled_from(["F128", "", "bf16"]), st.integers(),
                   st.none(), st.lists(st.sampled_from(["F16", "BF16"]), max_size=2),  # unhashable: was a TypeError
                   st.dictionaries(st.sampled_from(["F16"]), st.integers(), max_size=1))


@st.composite
def safetensors_files(draw) -> bytes:
    n = draw(st.integers(0, 6))
    header: dict = {}
    pos = 0
    for i in range(n):
        dtype = draw(dtypes)
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        bits = DTYPE_BITS.get(dtype, 16) if isinstance(dtype, str) else 16
        size = -(-(bits * _prod(shape)) // 8)
        begin = draw(st.one_of(st.just(pos), st.integers(0, pos + 4)))  # contiguous, or overlapping / gapped
        end = begin + draw(st.one_of(st.just(size), st.integers(0, size + 3)))
        header[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": draw(st.one_of(
            st.just([begin, end]), st.just([end, begin]), st.lists(st.integers(-2, 40), max_size=3)))}
        pos = max(pos, end)
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.one_of(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
                                                hostile_values))
    raw = json.dumps(header).encode()
    length = draw(st.one_of(st.just(len(raw)), st.integers(0, len(raw) + 10), st.just(2**64 - 1)))
    data = pos + draw(st.integers(-3, 3))
    return struct.pack("<Q", length) + raw + b"\0" * max(0, data)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
