"""The approximate weights term: a profile's ``weights.params`` at a quantization (the package docstring says
how MLX stores a quantized parameter, which parameters stay in the model dtype and why), and the plausibility
floor a checkpoint's "exact" bytes are checked against.
"""
from __future__ import annotations

import re

from ...units import DTYPE_BYTES
from ...quantization import Quantization
from .info import WeightsInfo


def _kept_embedding_params(profile, nq) -> int:
    """AWQ / GPTQ quantize only the blocks' Linear layers: the embedding (and an untied LM head) stay in the
    model dtype. Untied is assumed when the profile does not say (an upper bound)."""
    if nq is None or not getattr(nq, "keeps_embeddings", False):
        return 0
    w = getattr(profile, "weights", None)
    if w is not None and getattr(w, "embedding_params", None):
        return w.embedding_params
    if profile.vocab_size and profile.hidden_size:
        return profile.vocab_size * profile.hidden_size * (1 if profile.tie_word_embeddings else 2)
    return 0


def _router_params(profile) -> int:
    """MoE router (gate) parameters, E x hidden per layer: mlx-lm's convert keeps them at 8 bits in the families
    whose ``quant_predicate`` says so (qwen3_moe, qwen3_next, gpt_oss, ...); counted at 8 bits for every MoE
    profile below 8 bits (the upper side where the family does not)."""
    m = getattr(profile, "moe", None)
    if m is None or not profile.hidden_size or not profile.num_layers:
        return 0
    moe_layers = profile.num_layers - (getattr(m, "first_dense_layers", 0) or 0)
    return max(0, moe_layers) * m.num_experts * profile.hidden_size


def _norm_params(profile) -> int:
    """Parameters ``mlx_lm.convert`` leaves in the model dtype (1-D tensors and convolutions: only ``Linear`` and
    ``Embedding`` have ``to_quantized``), bounded from the dims without knowing which the family has: per block
    four norms (Gemma's sandwich norms), q / k norms, biases on q, k, v, o (Qwen2), on the MLP (dense: two of the
    intermediate width and one of the hidden; MoE: the same per expert, gpt-oss), plus the final norm. The
    families without some of these get a few per mille of a block too many; issue 14: counting only two norms
    per block was under a real mlx-lm Qwen2 (attention biases) and Qwen3-MoE (q/k norms) checkpoint at 8 bits
    (tests/test_weights_sweep.py)."""
    h, n = profile.hidden_size, profile.num_layers
    if not h or not n:
        return 0
    nh = getattr(profile, "num_heads", None) or 0
    nkv = getattr(profile, "num_kv_heads", None) or nh
    hd = getattr(profile, "head_dim", None) or (h // nh if nh else h)
    per_block = 4 * h + 2 * hd + (nh + 2 * nkv) * hd + h
    inter = getattr(profile, "intermediate_size", None) or 0
    moe = getattr(profile, "moe", None)
    dense = getattr(moe, "first_dense_layers", 0) or 0 if moe is not None else n
    mlp = dense * (2 * inter + h)
    if moe is not None:
        mi = getattr(moe, "moe_intermediate_size", None) or inter
        experts = moe.num_experts + (getattr(moe, "shared_experts", 0) or 0)
        mlp += (n - dense) * experts * (2 * mi + h)
    return n * per_block + mlp + h


def _cost(q: Quantization | None, act: int) -> float:
    """Bytes per parameter stored as ``q`` (None: unquantized, the model dtype)."""
    return float(act) if q is None else q.nbytes(1 << 20, act) / (1 << 20)


def _override_bound(profile, q: Quantization, quantized_params: int, act: int) -> tuple[int, Quantization | None, str]:
    """A config's per-module quantization overrides (mlx-lm's mixed recipes: some layers at 6 or 8 bits, some
    modules kept unquantized), bounded from above without the files: every block an override names is counted
    whole at the costliest width among the base and the overrides (a block's parameters: the non-embedding
    parameters over the MoE layers only, which no block exceeds), an overridden ``lm_head`` / embedding as
    vocab x hidden; an override naming anything else puts every parameter at that width. Returns (parameters so
    counted, their Quantization (None: unquantized), the sentence for the label); (0, None, "") without
    overrides. Issue 14: 49 modules of 7 blocks at 8 bits in a 4-bit Qwen3-0.6B were counted at 4 bits, 14% under
    the checkpoint (tests/test_weights_sweep.py)."""
    mods = getattr(q, "override_modules", ())
    if getattr(profile, "moe", None) is not None:  # router gates at <= 8 bits: the router term counts them
        mods = tuple((n, m) for n, m in mods if not (_ROUTER_NAME.search(n) and m is not None
                                                     and _cost(m, act) <= _cost(_ROUTER, act)))
    if not mods:
        return 0, None, ""
    worst = max((m for _, m in mods), key=lambda m: _cost(m, act))
    if _cost(worst, act) <= _cost(q, act):
        return 0, None, ""  # every override is as cheap as the base or cheaper: the base width bounds them
    blocks, other, unknown = set(), 0, False
    vh = (profile.vocab_size or 0) * (profile.hidden_size or 0)
    for name, _ in mods:
        m = re.search(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)", name)
        if m:
            blocks.add(int(m.group(1)))
        elif re.search(r"(lm_head|embed_tokens|wte|embeddings?)$", name) and vh:
            other += vh
        else:
            unknown = True
    moe = getattr(profile, "moe", None)
    n = (profile.num_layers or 0) - ((getattr(moe, "first_dense_layers", 0) or 0) if moe is not None else 0)
    emb = vh * (1 if profile.tie_word_embeddings else 2)
    per_block = -(-max(quantized_params - emb, 0) // n) if n > 0 else quantized_params
    over = quantized_params if unknown else min(quantized_params, len(blocks) * per_block + other)
    w = "unquantized" if worst is None else worst.label()
    where = "an override names a module outside the blocks" if unknown else f"{len(blocks)} block(s) named by overrides"
    return over, worst, f"{over:,} params at {w} ({where}: each counted whole at the costliest override, an upper bound)"


#: module names of MoE router gates in mlx-lm's models (``mlp.gate``, ``block_sparse_moe.gate``, gpt-oss
#: ``mlp.router``, qwen3_next ``shared_expert_gate``)
_ROUTER_NAME = re.compile(r"\.(?:gate|router|shared_expert_gate)$")
#: how mlx-lm's ``quant_predicate`` stores MoE router gates ({"group_size": 64, "bits": 8}: affine, see
#: ``quantization.read``): counted so when that costs more than the base (below 8 bits, or mxfp8's 8.25 < 8.5)
_ROUTER = Quantization(8, 64)


def _indivisible(profile, q: Quantization) -> str | None:
    """A Linear input width of the profile that ``q.group_size`` does not divide (``quantize_model`` then leaves
    those layers unquantized), named; ``None`` when every known width divides."""
    moe = getattr(profile, "moe", None)
    widths = {"hidden_size": profile.hidden_size, "intermediate_size": getattr(profile, "intermediate_size", None),
              "moe_intermediate_size": getattr(moe, "moe_intermediate_size", None),
              "num_heads x head_dim": (getattr(profile, "num_heads", None) or 0)
              * (getattr(profile, "head_dim", None) or 0) or None}
    for name, v in widths.items():
        if v and v % q.group_size:
            return f"{name} {v} is not a multiple of group {q.group_size}"
    return None


def from_profile(profile, picked: tuple[Quantization, str], explicit: bool, nq=None, vision=None) -> WeightsInfo:
    """``vision``: a ``vision.VisionBound`` when the checkpoint stores a vision tower the text profile's
    ``weights.params`` does not count; added unquantized in the model dtype (an upper bound)."""
    q, why = picked
    w = getattr(profile, "weights", None)
    act = DTYPE_BYTES.get(profile.dtype, 2)
    prof_bits = getattr(w, "bits", None) or 16
    if w is not None and w.bytes and q.bits == prof_bits:
        return WeightsInfo(w.bytes, True, "profile weights.bytes", None, params=w.params, bits=q.bits,
                           group_size=q.group_size, mode=q.mode if q.quantized else None)
    params = getattr(w, "params", None) if w is not None else None
    if not params:
        return WeightsInfo(None, False, "unknown",
                           f"profile {profile.name!r} has no weights.params; point MODEL at a local model "
                           "directory (its safetensors headers give exact bytes) or add weights.params to the profile")
    odd = _indivisible(profile, q) if q.quantized else None
    if odd:  # mlx_lm.utils.quantize_model skips every Linear whose input width the group does not divide
        q, why = Quantization(8 * act), f"{why}; {odd}: counted unquantized, an upper bound"
    if q.quantized:
        kept = min(_norm_params(profile) + _kept_embedding_params(profile, nq), params)
        router = min(_router_params(profile), params - kept) if _cost(_ROUTER, act) > _cost(q, act) else 0
        rest = params - kept - router
        over, over_q, over_how = _override_bound(profile, q, rest, act)
        nbytes = (q.nbytes(rest - over, act) + (over_q.nbytes(over, act) if over_q else over * act) + kept * act
                  + _ROUTER.nbytes(router, act))
        what = "norm, bias and embedding" if _kept_embedding_params(profile, nq) else "norm and bias (bound)"
        how = f"{params:,} params at {q.label()} ({why}); {kept:,} {what} params kept in {profile.dtype}"
        if router:
            how += f"; {router:,} MoE router params at 8 bits (mlx-lm keeps router gates at 8: an upper bound)"
        if over_how:
            how += f"; {over_how}"
    else:
        nbytes = q.nbytes(params, act)
        how = f"{params:,} params at {q.bits // 8} bytes ({why})"
    if vision is not None:
        nbytes += vision.params * act
        how += f"; + {vision.how}, unquantized at {act} bytes (an upper bound: mlx-vlm loads the tower)"
    return WeightsInfo(nbytes, False, f"profile params, {q.label()}",
                       f"approximate: {how}", params=params, bits=q.bits,
                       group_size=q.group_size, mode=q.mode if q.quantized else None)


def plausible_floor(profile) -> int | None:
    """Fewest bytes a checkpoint of this shape can hold: every layer has at least one hidden x hidden
    projection and the model an embedding (vocab x hidden), all at 2 bits (the smallest MLX quantization),
    halved for slack. ``None`` when the profile lacks the dimensions."""
    h, n, v = profile.hidden_size, profile.num_layers, profile.vocab_size
    if not h or not n:
        return None
    return (n * h * h + (v or 0) * h) * 2 // 8 // 2


def implausible(nbytes: int, profile) -> str | None:
    """A note (not an error: the headers are what they are) when "exact" bytes are far too few for the
    profile's shape: shards missing without an index, a stub file, or the wrong directory."""
    floor = plausible_floor(profile) if profile is not None else None
    if floor is None or nbytes >= floor:
        return None
    from ...units import format_bytes

    return (f"implausibly small: {format_bytes(nbytes)} for "
            f"{profile.num_layers} layers of width {profile.hidden_size} (at 2 bits such a model holds at least "
            f"{format_bytes(2 * floor)}); are weight files missing, or is this another model's directory?")
