"""Input validation of the public API: an engine calls it on every request with whatever it was given.

Counts are integers (``bool`` is *not* an integer here, nor ``1.0``), never negative, never NaN; a wrong
argument is an ``InputError`` (a ``ValueError``) that names the argument - never a silent 0, never an
``AttributeError``/``TypeError`` from deep inside. Functions that do not exist yet (the peak model, the
compat facade) are skipped cleanly and checked as soon as they land.
"""
from __future__ import annotations

import importlib
import inspect
import math
from decimal import Decimal
from fractions import Fraction

import pytest

from omlx_profiles import Estimator, InputError, KVQuant, kv_bytes, kv_report, load_registry
from omlx_profiles.units import check_count

NAN, INF = float("nan"), float("inf")
# values that are not a non-negative integer count (name -> value)
BAD_COUNTS = {
    "true": True, "false": False, "negative": -1, "float": 8.0, "fraction_float": 1.5, "nan": NAN, "inf": INF,
    "neg_inf": -INF, "str": "8", "str_k": "32k", "none": None, "list": [8], "complex": 1 + 0j,
    "decimal": Decimal(8), "fraction": Fraction(8), "huge": 1 << 80, "bytes": b"8",
}
# not even positive: where a count must be >= 1 (chunk), 0 is bad too
BAD_POSITIVE = dict(BAD_COUNTS, zero=0)


@pytest.fixture(scope="module")
def reg():
    return load_registry(include_env=False)


@pytest.fixture(scope="module")
def profile(reg):
    return reg.resolve("meta-llama/Llama-3.1-8B-Instruct").profile


def _is_input_error(exc_info, name: str) -> None:
    assert isinstance(exc_info.value, ValueError)
    assert name in str(exc_info.value), f"{name!r} not named in: {exc_info.value}"


# --------------------------------------------------------------------------------------------------
# check_count itself
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(BAD_COUNTS))
def test_check_count_rejects(key):
    with pytest.raises(InputError) as e:
        check_count("tokens", BAD_COUNTS[key])
    _is_input_error(e, "tokens")


def test_check_count_nan_says_nan():
    with pytest.raises(InputError, match="NaN"):
        check_count("tokens", NAN)


def test_check_count_accepts_integer_types():
    np = pytest.importorskip("numpy")
    assert check_count("tokens", np.int64(7)) == 7 and type(check_count("tokens", np.int64(7))) is int
    assert check_count("tokens", 0) == 0


def test_check_count_rejects_numpy_bool_and_float():
    np = pytest.importorskip("numpy")
    for v in (np.bool_(True), np.float64(8.0), np.float32("nan")):
        with pytest.raises(InputError):
            check_count("tokens", v)


# --------------------------------------------------------------------------------------------------
# kv_report / kv_bytes / Estimator
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(BAD_COUNTS))
def test_kv_report_tokens(profile, key):
    with pytest.raises(InputError) as e:
        kv_report(profile, BAD_COUNTS[key])
    _is_input_error(e, "tokens")


@pytest.mark.parametrize("key", sorted(BAD_POSITIVE))
def test_kv_report_chunk(profile, key):
    with pytest.raises(InputError) as e:
        kv_report(profile, 100, chunk=BAD_POSITIVE[key])
    _is_input_error(e, "chunk")


@pytest.mark.parametrize("schedule", ["", "Generate", "chunked", None, 1, ["generate"]])
def test_kv_report_schedule(profile, schedule):
    with pytest.raises(InputError) as e:
        kv_report(profile, 100, schedule=schedule)
    _is_input_error(e, "schedule")




@pytest.mark.parametrize("dtype", ["int8", "", "BF16 ", 2, ["bf16"]])
def test_kv_report_dtype(profile, dtype):
    with pytest.raises(InputError) as e:
        kv_report(profile, 100, dtype=dtype)
    _is_input_error(e, "dtype")


@pytest.mark.parametrize("quant", [4, "4bit", {"bits": 4}, True],
                         ids=["int", "str", "dict", "bool"])
def test_kv_report_quant_must_be_kvquant(profile, quant):
    with pytest.raises(InputError) as e:
        kv_report(profile, 10_000, quant=quant)
    _is_input_error(e, "quant")


@pytest.mark.parametrize("kw,name", [
    (dict(bits=True), "kv_bits"), (dict(bits=4.0), "kv_bits"), (dict(bits=7), "kv_bits"), (dict(bits=NAN), "kv_bits"),
    (dict(bits=4, group_size=0), "kv_group_size"), (dict(bits=4, group_size=48), "kv_group_size"),
    (dict(bits=4, start=-1), "quantized_kv_start"), (dict(bits=4, start=NAN), "quantized_kv_start"),
    (dict(bits=4, start=True), "quantized_kv_start"),
])
def test_kvquant(kw, name):
    with pytest.raises(InputError) as e:
        KVQuant(**kw)
    _is_input_error(e, name)


@pytest.mark.parametrize("key", sorted(BAD_COUNTS))
def test_estimator_kv_bytes(profile, key):
    with pytest.raises(InputError) as e:
        Estimator(profile).kv_bytes(BAD_COUNTS[key])
    _is_input_error(e, "tokens")
    with pytest.raises(InputError):
        kv_bytes(profile, BAD_COUNTS[key])


@pytest.mark.parametrize("what", [None, "meta-llama/Llama-3.1-8B-Instruct", 42, {}])
def test_estimator_needs_a_profile(what):
    """A wrong object is refused where it is given, not as an AttributeError on the first estimate."""
    try:
        est = Estimator(what)
    except (InputError, TypeError) as e:
        assert "profile" in str(e).lower()
        return
    with pytest.raises((InputError, TypeError)) as e:
        est.kv_bytes(100)
    assert "profile" in str(e.value).lower(), f"unhelpful: {type(e.value).__name__}: {e.value}"


def test_zero_tokens_is_zero_bytes_not_an_error(profile):
    """0 is a legal count for the API (an empty cache holds nothing); the CLI may still refuse it."""
    assert kv_bytes(profile, 0) == 0


# --------------------------------------------------------------------------------------------------
# registry.resolve
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", [None, 42, 4.2, True, b"meta-llama/Llama-3.1-8B", ["llama"], {"id": "x"},
                                   "", "   ", "a" * 301, "x\x00y", "x\ny", "llama\x85", "a\u202eb", "\u200b",
                                   "\ufeffllama-3.1-8b"],
                         ids=lambda q: repr(q)[:30])
def test_resolve_input_errors(reg, query):
    with pytest.raises(InputError) as e:
        reg.resolve(query)
    _is_input_error(e, "model id")


def test_resolve_memo_is_not_poisoned_by_errors(reg):
    with pytest.raises(InputError):
        reg.resolve("a\x00")
    assert reg.resolve("meta-llama/Llama-3.1-8B-Instruct").profile.name == "llama-3.1-8b-instruct"
    assert reg.resolve("meta-llama/Llama-3.1-8B-Instruct") is reg.resolve("meta-llama/Llama-3.1-8B-Instruct")


@pytest.mark.parametrize("dirs", [[None], [42], ["x" * 5000], ["/etc/passwd"], ["a\x00b"]], ids=str)
def test_load_registry_bad_dirs(dirs):
    from omlx_profiles import OmlxProfilesError

    with pytest.raises(OmlxProfilesError):
        load_registry(dirs, include_env=False)


# --------------------------------------------------------------------------------------------------
# The peak model and the facade (issue 5): checked as soon as they exist.
# --------------------------------------------------------------------------------------------------
def _maybe(module: str, attr: str | None = None):
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        pytest.skip(f"{module} does not exist yet")
    if attr is None:
        return mod
    if not hasattr(mod, attr):
        pytest.skip(f"{module}.{attr} does not exist yet")
    return getattr(mod, attr)


def _estimator_method(profile, name):
    est = Estimator(profile)
    if not hasattr(est, name):
        pytest.skip(f"Estimator.{name} does not exist yet")
    return getattr(est, name)


def _request(**kw):
    Request = _maybe("omlx_profiles.peak.prefill", "Request")
    params = inspect.signature(Request).parameters
    return Request(**{k: v for k, v in kw.items() if k in params})


@pytest.mark.parametrize("field", ["tokens", "cached", "chunk"])
@pytest.mark.parametrize("key", sorted(BAD_POSITIVE))
def test_request_fields(field, key):
    Request = _maybe("omlx_profiles.peak.prefill", "Request")
    if field not in inspect.signature(Request).parameters:
        pytest.skip(f"Request has no {field}")
    value = BAD_POSITIVE[key]
    if key == "zero" and field == "cached":
        pytest.skip("0 cached tokens is the common case")
    kw = dict(tokens=1000, cached=0, chunk=512)
    kw[field] = value
    with pytest.raises(ValueError) as e:
        _request(**kw)
    assert field in str(e.value)


def test_request_cached_must_leave_tokens_to_prefill():
    with pytest.raises(ValueError, match="cached"):
        _request(tokens=100, cached=100, chunk=512)


@pytest.mark.parametrize("backend,version", [("tpu", None), ("", None), (None, None), ("cpu", "not-a-version"),
                                             ("cpu", "../../etc"), ("cpu", "9" * 5000), ("cpu", 0.32)],
                         ids=lambda v: repr(v)[:20])
def test_prefill_peak_backend_and_version(profile, backend, version):
    Request = _maybe("omlx_profiles.peak.prefill", "Request")
    prefill_peak = _maybe("omlx_profiles.peak.prefill", "prefill_peak")
    from omlx_profiles import OmlxProfilesError

    with pytest.raises((ValueError, OmlxProfilesError)) as e:
        prefill_peak(profile, Request(tokens=1000), backend=backend, mlx_version=version)
    assert not isinstance(e.value, (AttributeError, KeyError))
    assert len(str(e.value)) < 2000


@pytest.mark.parametrize("key", sorted(BAD_COUNTS))
def test_max_tokens_budget(profile, key):
    max_tokens = _estimator_method(profile, "max_tokens")
    with pytest.raises(ValueError) as e:
        max_tokens(BAD_COUNTS[key])
    assert "budget" in str(e.value)


@pytest.mark.parametrize("key", sorted(BAD_COUNTS))
def test_fits_budget(profile, key):
    fits = _estimator_method(profile, "fits")
    with pytest.raises(ValueError) as e:
        fits(_request(tokens=1000, cached=0, chunk=512), BAD_COUNTS[key])
    assert "budget" in str(e.value)


# The seed's MemoryMonitor (omlx_profiles.compat): same names and semantics, but a bad count is an
# error instead of a silent 0.
def _monitor():
    MemoryMonitor = _maybe("omlx_profiles.compat", "MemoryMonitor")
    try:
        m = MemoryMonitor(max_kv_cache_memory=None, eviction_enabled=False)
    except TypeError:
        m = MemoryMonitor(None)
    m.set_model_info(num_layers=32, num_kv_heads=8, head_dim=128, num_attention_heads=32)
    return m


@pytest.mark.parametrize("arg", ["new_tokens", "chunk_size", "cached_tokens"])
@pytest.mark.parametrize("key", ["true", "negative", "nan", "inf", "str", "none", "fraction_float"])
def test_facade_prefill_peak_inputs(arg, key):
    m = _monitor()
    kw = dict(new_tokens=1000, chunk_size=512, cached_tokens=0)
    kw[arg] = BAD_COUNTS[key]
    with pytest.raises(ValueError) as e:
        m.estimate_prefill_peak_bytes(kw.pop("new_tokens"), kw.pop("chunk_size"), **kw)
    assert arg in str(e.value) or arg.split("_")[0] in str(e.value)


@pytest.mark.parametrize("kw", [
    dict(num_layers=-1), dict(num_layers=True), dict(num_kv_heads=NAN), dict(head_dim="128"),
    dict(dtype_size=NAN), dict(dtype_size=-2), dict(num_attention_heads=-32),
], ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()))
def test_facade_set_model_info_inputs(kw):
    MemoryMonitor = _maybe("omlx_profiles.compat", "MemoryMonitor")
    try:
        m = MemoryMonitor(max_kv_cache_memory=None, eviction_enabled=False)
    except TypeError:
        m = MemoryMonitor(None)
    args = dict(num_layers=32, num_kv_heads=8, head_dim=128)
    args.update(kw)
    with pytest.raises(ValueError) as e:
        m.set_model_info(**args)
    assert next(iter(kw)) in str(e.value)


@pytest.mark.parametrize("key", ["true", "negative", "nan", "str"])
def test_facade_other_counts(key):
    m = _monitor()
    for name, call in (("block_size", lambda v: m.estimate_block_memory(v)),
                       ("num_tokens", lambda v: m.estimate_prompt_kv_bytes(v))):
        with pytest.raises(ValueError):
            call(BAD_COUNTS[key])


def test_facade_never_returns_silent_zero_for_real_work():
    m = _monitor()
    assert m.estimate_prefill_peak_bytes(4096, 2048, cached_tokens=0) > 0
    assert not math.isnan(m.estimate_prefill_peak_bytes(4096, 2048))
