"""The approximate weights term: a profile's ``weights.params`` at a quantization (the package docstring says
how MLX stores a quantized parameter, which parameters stay in the model dtype and why), and the plausibility
floor a checkpoint's "exact" bytes are checked against.
"""
from __future__ import annotations

from ...dtypes import DTYPE_BYTES
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
    if profile.hidden_size and profile.num_layers:
        return (2 * profile.num_layers + 1) * profile.hidden_size
    return 0


def from_profile(profile, picked: tuple[Quantization, str], explicit: bool, nq=None) -> WeightsInfo:
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
    if q.quantized:
        kept = min(_norm_params(profile) + _kept_embedding_params(profile, nq), params)
        router = min(_router_params(profile), params - kept) if q.bits < 8 else 0
        nbytes = q.nbytes(params - kept - router, act) + kept * act + Quantization(8, 64).nbytes(router, act)
        what = "norm and embedding" if _kept_embedding_params(profile, nq) else "norm"
        how = f"{params:,} params at {q.label()} ({why}); {kept:,} {what} params kept in {profile.dtype}"
        if router:
            how += f"; {router:,} MoE router params at 8 bits (mlx-lm keeps router gates at 8: an upper bound)"
    else:
        nbytes = q.nbytes(params, act)
        how = f"{params:,} params at {q.bits // 8} bytes ({why})"
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
    floor = plausible_floor(profile)
    if floor is None or nbytes >= floor:
        return None
    from ...units import format_bytes

    return (f"implausibly small: {format_bytes(nbytes)} for "
            f"{profile.num_layers} layers of width {profile.hidden_size} (at 2 bits such a model holds at least "
            f"{format_bytes(2 * floor)}); are weight files missing, or is this another model's directory?")
