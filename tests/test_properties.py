"""Properties of the estimate over generated *valid* profiles (hypothesis).

Profiles are generated as YAML documents (every layer kind: full, sliding, chunked, latent, indexer,
state, none, and mlx-lm ``CacheList`` lists), written to a file and loaded through the real registry
(``build_registry``: safe YAML, pydantic models, inheritance), so the properties hold for what a
contributor can actually write.

What is true, and what is not (mlx-lm 0.32 cache rules, replayed by ``rows.py`` and checked against
the live classes in ``test_rows_live.py``; the counterexamples are replayed on the live classes below):

* Resident KV is never negative, and per-layer (per-entry) bytes sum to the total.
* "Resident KV never decreases as tokens grow" is FALSE in mlx-lm itself, twice over:
  - ``KVCache`` under ``generate_step`` with a prefill step that is not a multiple of 256: 257 tokens in
    steps of 100 end with 512 rows, 258 tokens with 456 (the buffer is sliced to the offset before it
    grows, so a different last chunk leaves a different slack). ``ChunkedKVCache`` inherits this.
  - ``RotatingKVCache`` fed a 1-token prompt in one call takes the in-place path and allocates
    ``min(256, window)`` rows; a 2-token prompt is concatenated and holds 2 rows.
  The true statements, tested here instead:
  - every attention entry holds at least the tokens it must keep (full/latent/indexer: ``rows >= N``;
    sliding: ``rows >= min(N, window)``; chunked: ``rows >= min(N, chunk)``) and a ``KVCache`` wastes
    less than one 256-row step (``rows < N + 256``), so resident KV never drops below the true need
    and never falls by more than one step per entry as tokens grow;
  - monotone for ``direct`` (one model call) from 2 tokens on, and for ``generate`` when the prefill
    step is a multiple of 256 (mlx-lm's default 2048 included);
  - under ``generate`` a sliding entry ends at most ``window`` rows (the last, 1-token call trims it).
* KV quantization never increases the total, and changes nothing before ``quantized_kv_start``.
* fp32 activations never hold less than bf16.
* Peak-model properties (cached tokens add no resident KV, peak >= resident growth, ``max_tokens`` is
  the inverse of the total) are written against the contract (``omlx_profiles.peak.prefill.Request``,
  ``Estimator.prefill_peak/total_bytes/max_tokens``) and skip until it lands.
"""
from __future__ import annotations

import importlib
import inspect
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from omlx_profiles import Estimator, KVQuant, UnsupportedError, kv_bytes, kv_report
from omlx_profiles.registry.index import build_registry

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HEAD_DIMS = [8, 16, 32, 64, 96, 128, 192, 256]


# --------------------------------------------------------------------------------------------------
# Strategies: a valid profile document
# --------------------------------------------------------------------------------------------------
ALL_KINDS = ("full", "sliding", "chunked", "latent", "indexer", "state", "none")
QUANTIZABLE = ("full", "full", "chunked", "state", "none")  # kinds kv_bits can run with (no sliding/latent)


@st.composite
def attn_overrides(draw) -> dict:
    out = {}
    if draw(st.booleans()):
        out["num_kv_heads"] = draw(st.integers(1, 8))
    if draw(st.booleans()):
        out["head_dim"] = draw(st.sampled_from(HEAD_DIMS))
        if draw(st.booleans()):
            out["v_head_dim"] = draw(st.sampled_from(HEAD_DIMS))
    return out


@st.composite
def cache_spec(draw, allow_none: bool = True, kinds: tuple[str, ...] = ALL_KINDS) -> dict:
    kinds = [k for k in kinds if allow_none or k != "none"]
    kind = draw(st.sampled_from(kinds))
    if kind == "full":
        return {"kind": "full", **draw(attn_overrides())}
    if kind == "sliding":
        window = draw(st.integers(1, 700))
        spec = {"kind": "sliding", "window": window, **draw(attn_overrides())}
        if window > 1 and draw(st.booleans()):
            spec["keep"] = draw(st.integers(0, min(4, window - 1)))
        return spec
    if kind == "chunked":
        return {"kind": "chunked", "chunk": draw(st.integers(1, 700)), **draw(attn_overrides())}
    if kind == "indexer":
        return {"kind": "indexer"} if draw(st.booleans()) else {"kind": "indexer", "head_dim": draw(st.sampled_from(HEAD_DIMS))}
    if kind == "state":
        tensors = draw(st.lists(st.fixed_dictionaries({
            "name": st.sampled_from(["conv", "ssm", "rec", "k"]),
            "shape": st.lists(st.integers(1, 64), min_size=1, max_size=3),
            "dtype": st.sampled_from(["model", "bf16", "fp16", "fp32"]),
        }), min_size=1, max_size=3))
        return {"kind": "state", "tensors": tensors}
    return {"kind": kind}


@st.composite
def profile_doc(draw, kinds: tuple[str, ...] = ALL_KINDS) -> dict:
    allowed = kinds
    n_kinds = draw(st.integers(1, 4))
    names = [f"k{i}" for i in range(n_kinds)]
    kinds = {}
    for name in names:
        if draw(st.integers(0, 5)) == 0:  # a CacheList
            kinds[name] = draw(st.lists(cache_spec(allow_none=False, kinds=allowed), min_size=1, max_size=3))
        else:
            kinds[name] = draw(cache_spec(kinds=allowed))
    num_layers = draw(st.integers(1, 12))
    layers: dict = {"kinds": kinds}
    if draw(st.booleans()):
        layers["types"] = draw(st.lists(st.sampled_from(names), min_size=num_layers, max_size=num_layers))
    else:
        period = draw(st.integers(1, num_layers))
        pattern = draw(st.lists(st.sampled_from(names), min_size=period, max_size=period))
        layers["pattern"] = pattern
        if num_layers % period:
            layers["cyclic"] = True
    used = set(layers.get("types") or layers["pattern"])
    layers["kinds"] = {k: v for k, v in kinds.items() if k in used}  # unused kinds are legal but noise
    variant = {
        "name": "prop-v",
        "ids": ["prop/Prop-V"],
        "num_layers": num_layers,
        "num_heads": draw(st.integers(1, 32)),
        "num_kv_heads": draw(st.integers(1, 8)),
        "head_dim": draw(st.sampled_from(HEAD_DIMS)),
        "dtype": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
        "mla": {
            "kv_lora_rank": draw(st.sampled_from([16, 64, 512])),
            "qk_rope_head_dim": draw(st.sampled_from([16, 64])),
            "qk_nope_head_dim": 128, "v_head_dim": 128,
            "index_head_dim": draw(st.sampled_from([32, 64, 128])),
        },
        "layers": layers,
    }
    return {"family": "prop", "model_types": ["prop"], "defaults": {"mlx_model_type": "prop"}, "variants": [variant]}


def load(doc: dict):
    """The generated document through the real loader (file -> safe YAML -> models -> Profile)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "prop.yaml"
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        reg = build_registry([[p]])
    return reg.resolve("prop/Prop-V").profile


tokens_st = st.integers(0, 20_000)
chunk_st = st.one_of(st.sampled_from([1, 2, 100, 255, 256, 257, 300, 512, 2048]), st.integers(1, 4096))
schedule_st = st.sampled_from(["generate", "direct"])


def entries(rep):
    for layer in rep.layers:
        for e in layer.entries:
            yield layer, e


# --------------------------------------------------------------------------------------------------
# Always true
# --------------------------------------------------------------------------------------------------
@SETTINGS
@given(profile_doc(), tokens_st, chunk_st, schedule_st)
def test_sums_and_signs(doc, tokens, chunk, schedule):
    p = load(doc)
    rep = kv_report(p, tokens, chunk=chunk, schedule=schedule)
    assert rep.total >= 0
    assert rep.total == sum(layer.nbytes for layer in rep.layers)
    assert len(rep.layers) == p.num_layers
    for layer in rep.layers:
        assert layer.nbytes == sum(e.nbytes for e in layer.entries) >= 0
        assert all(e.rows >= 0 for e in layer.entries)
    assert Estimator(p).kv_bytes(tokens, chunk=chunk, schedule=schedule) == kv_bytes(p, tokens, chunk=chunk,
                                                                                     schedule=schedule) == rep.total
    if tokens == 0:
        assert rep.total == 0


@SETTINGS
@given(profile_doc(), st.integers(1, 20_000), chunk_st, schedule_st)
def test_rows_hold_what_must_be_held(doc, tokens, chunk, schedule):
    """Never under the truth: each entry keeps at least the tokens mlx-lm attends to."""
    p = load(doc)
    rep = kv_report(p, tokens, chunk=chunk, schedule=schedule)
    for layer in rep.layers:
        for e, spec in zip(layer.entries, p.layer_types[layer.kind].entries, strict=True):
            event(f"entry kind {e.kind}")
            if e.kind in ("full", "latent", "indexer"):
                assert tokens <= e.rows < tokens + 256, (e, tokens)
            elif e.kind == "sliding":
                assert e.rows >= min(tokens, spec.window), (e, tokens, spec.window)
                if schedule == "generate":
                    assert e.rows <= spec.window, (e, tokens, spec.window)
                elif tokens >= 2:
                    assert e.rows == tokens  # one concatenating call keeps everything (unbounded)
            elif e.kind == "chunked":
                assert e.rows >= min(tokens, spec.chunk), (e, tokens, spec.chunk)


@SETTINGS
@given(profile_doc(), st.integers(2, 20_000), st.integers(1, 3000))
def test_direct_is_monotone_from_two_tokens(doc, tokens, more):
    p = load(doc)
    a = kv_bytes(p, tokens, schedule="direct")
    b = kv_bytes(p, tokens + more, schedule="direct")
    assert b >= a


@SETTINGS
@given(profile_doc(), st.integers(1, 20_000), st.integers(1, 3000), st.integers(1, 16).map(lambda k: 256 * k))
def test_generate_is_monotone_when_step_is_a_multiple_of_256(doc, tokens, more, chunk):
    p = load(doc)
    assert kv_bytes(p, tokens + more, chunk=chunk) >= kv_bytes(p, tokens, chunk=chunk)


@SETTINGS
@given(profile_doc(), st.integers(1, 20_000), st.integers(1, 3000), chunk_st)
def test_never_drops_more_than_one_step_per_entry(doc, tokens, more, chunk):
    """The true form of "never decreases" under any prefill step: at most one 256-row step per entry."""
    p = load(doc)
    a = kv_report(p, tokens, chunk=chunk)
    b = kv_report(p, tokens + more, chunk=chunk)
    for (la, ea), (lb, eb) in zip(entries(a), entries(b)):
        if ea.kind in ("full", "latent", "indexer", "chunked"):
            assert eb.rows > ea.rows - 256, (ea, eb, tokens, more, chunk)
        elif ea.kind == "state":
            assert eb.nbytes == ea.nbytes


@SETTINGS
@given(st.one_of(profile_doc(), profile_doc(kinds=QUANTIZABLE)), st.integers(1, 20_000), st.sampled_from([2, 4, 8]),
       st.sampled_from([32, 64, 128]),
       st.one_of(st.just(0), st.integers(0, 3000), st.integers(0, 30_000)))
def test_kv_quantization_never_adds(doc, tokens, bits, group, start):
    p = load(doc)
    q = KVQuant(bits, group, start)
    plain = kv_report(p, tokens)
    try:
        quant = kv_report(p, tokens, quant=q)
    except UnsupportedError:
        event("unsupported quantization")
        return  # mlx-lm raises for this layout (sliding / latent / width not divisible): said, not guessed
    event("quantized" if quant.total < plain.total else "unchanged")
    assert quant.total <= plain.total
    if tokens < start:
        assert quant.total == plain.total


@SETTINGS
@given(profile_doc(kinds=("full",)), st.integers(1, 20_000), st.sampled_from([4, 8]))
def test_kv_quantization_shrinks_full_attention(doc, tokens, bits):
    """All-full profiles from token 0 on: every top-level KVCache is converted, so the total shrinks."""
    p = load(doc)
    try:
        quant = kv_report(p, tokens, quant=KVQuant(bits, 32, 0))
    except UnsupportedError as e:
        assert "divisible" in str(e) or "pack" in str(e)
        return
    plain = kv_report(p, tokens)
    converted = [e for layer in quant.layers for e in layer.entries if e.quantized]
    event("converted" if converted else "all in CacheLists")
    assert quant.total < plain.total if converted else quant.total == plain.total


@SETTINGS
@given(profile_doc(), tokens_st, chunk_st)
def test_wider_dtype_never_holds_less(doc, tokens, chunk):
    p = load(doc)
    assert kv_bytes(p, tokens, chunk=chunk, dtype="fp32") >= kv_bytes(p, tokens, chunk=chunk, dtype="bf16")
    assert kv_bytes(p, tokens, chunk=chunk, dtype="fp16") == kv_bytes(p, tokens, chunk=chunk, dtype="bf16")


# --------------------------------------------------------------------------------------------------
# The counterexamples above are mlx-lm's, not ours: replayed on the live cache classes.
# --------------------------------------------------------------------------------------------------
@pytest.mark.live
def test_counterexamples_are_mlx_lm_behaviour():
    mx = pytest.importorskip("mlx.core")
    cache = pytest.importorskip("mlx_lm.models.cache")
    from omlx_profiles.kv.replay import calls_for

    def feed(c, calls):
        for s in calls:
            k = mx.zeros((1, 1, s, 2), dtype=mx.float16)
            c.update_and_fetch(k, k)
        mx.eval(c.keys)
        return c.keys.shape[2]

    assert feed(cache.KVCache(), calls_for(257, "generate", 100)) == 512
    assert feed(cache.KVCache(), calls_for(258, "generate", 100)) == 456
    assert feed(cache.RotatingKVCache(max_size=4096), calls_for(1, "direct", 2048)) == 256
    assert feed(cache.RotatingKVCache(max_size=4096), calls_for(2, "direct", 2048)) == 2


# --------------------------------------------------------------------------------------------------
# Peak model (issue 5): against the contract, skipped until it exists.
# --------------------------------------------------------------------------------------------------
def _peak_api():
    """(Request, prefill_peak(profile, request)): the Estimator method when it exists, else the module's."""
    try:
        mod = importlib.import_module("omlx_profiles.peak.prefill")
    except ModuleNotFoundError:
        pytest.skip("omlx_profiles.peak.prefill does not exist yet")
    if not hasattr(mod, "Request"):
        pytest.skip("omlx_profiles.peak.prefill.Request does not exist yet")
    if hasattr(Estimator, "prefill_peak"):
        return mod.Request, lambda p, r: Estimator(p).prefill_peak(r)
    if hasattr(mod, "prefill_peak"):
        return mod.Request, mod.prefill_peak
    pytest.skip("no prefill_peak yet")


def _req(Request, **kw):
    params = inspect.signature(Request).parameters
    return Request(**{k: v for k, v in kw.items() if k in params})


def _num(x, *names):
    """A byte count from a number or from a breakdown object / dict."""
    if isinstance(x, int):
        return x
    for n in names:
        v = x.get(n) if isinstance(x, dict) else getattr(x, n, None)
        if isinstance(v, int):
            return v
    raise AssertionError(f"no integer among {names} in {x!r}")


def _growth(bd) -> int:
    """KV the request adds: resident after the prompt minus what the prefix held before it."""
    return _num(bd, "resident_kv_bytes") - _num(bd, "held_before_bytes")


PEAK_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.filter_too_much])


@st.composite
def peak_doc(draw) -> dict:
    """A profile the transient model can price: attention layers with the dims it needs."""
    doc = draw(profile_doc(kinds=("full", "full", "sliding", "chunked")))
    v = doc["variants"][0]
    v["hidden_size"] = draw(st.sampled_from([64, 256, 1024]))
    v["intermediate_size"] = draw(st.sampled_from([128, 512, 4096]))
    v["vocab_size"] = draw(st.sampled_from([512, 32000]))
    v["num_heads"] = v["num_kv_heads"] * draw(st.integers(1, 4))
    return doc


def _priced(doc, peak, req):
    p = load(doc)
    try:
        return p, peak(p, req)
    except UnsupportedError:
        assume(False)


@PEAK_SETTINGS
@given(peak_doc(), st.integers(1, 12_000), st.integers(1, 12_000), st.sampled_from([256, 512, 2048]))
def test_cached_tokens_add_no_resident_kv(doc, new, cached, chunk):
    """A prefix hit widens attention but its tokens are already resident: the request adds no KV for them
    (at most one 256-row step per entry of alignment slack: the prefix ends mid-step)."""
    Request, peak = _peak_api()
    p, fresh = _priced(doc, peak, _req(Request, tokens=new, cached=0, chunk=chunk))
    _, hit = _priced(doc, peak, _req(Request, tokens=new + cached, cached=cached, chunk=chunk))
    slack = kv_bytes(p, 256, schedule="direct")
    assert _growth(hit) <= _growth(fresh) + slack, (hit, fresh)
    assert _num(hit, "held_before_bytes") > 0


@PEAK_SETTINGS
@given(peak_doc(), st.integers(1, 12_000), st.integers(0, 12_000), st.sampled_from([256, 512, 2048]))
def test_peak_is_at_least_resident_growth(doc, new, cached, chunk):
    Request, peak = _peak_api()
    _, bd = _priced(doc, peak, _req(Request, tokens=new + cached, cached=cached, chunk=chunk))
    assert _num(bd, "peak_bytes") >= _growth(bd) >= 0
    terms = getattr(bd, "terms", None)
    if isinstance(terms, dict):
        assert sum(terms.values()) == _num(bd, "peak_bytes")  # the breakdown adds up


@PEAK_SETTINGS
@given(peak_doc(), st.integers(1 << 24, 1 << 36))
def test_max_tokens_inverts_the_total(doc, budget):
    if not hasattr(Estimator, "max_tokens") or not hasattr(Estimator, "total_bytes"):
        pytest.skip("Estimator.max_tokens / total_bytes do not exist yet")
    Request, _ = _peak_api()
    p = load(doc)
    est = Estimator(p)
    try:
        # no reserve and no weights on both sides: max_tokens must invert exactly this total
        n = _num(est.max_tokens(budget, weights_bytes=0, reserve=0), "max_tokens", "tokens")
    except UnsupportedError:
        assume(False)

    def total(tokens):
        return _num(est.total_bytes(Request(tokens=tokens), 0), "total_bytes", "total")

    if n <= 0:
        assert total(1) > budget
        return
    assert total(n) <= budget
    limit = p.max_context or (1 << 22)
    assert n >= limit or total(n + 1) > budget
