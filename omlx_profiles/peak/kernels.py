"""Kernel routes as data: ``profiles/kernels/{metal,cuda,cpu}.yaml``, one table per MLX version range.

Why a table: which ``mx.fast.scaled_dot_product_attention`` calls run a fused kernel decides whether a
prefill chunk materializes an ``n_q x qL x kL`` score matrix (gigabytes at long context) or writes only
its output, and MLX changes the rule between releases (Metal's full-attention head dims were {64, 80,
128} up to 0.31, {64, 72, 80, 96, 128} in 0.32.1; D=256 prefill stayed unfused off the M5's neural
accelerators). The seed hard-coded one Metal table; here every backend and version range is a YAML table
whose rules name their source (MLX source, disassembly of the released wheels, measurement).

``KernelRoutes.for_backend(backend, mlx_version)`` picks the table; ``.route(call)`` returns the first
matching rule for an ``SdpaCall``. Tiled kernels an engine installs at runtime (oMLX's sdpa256 patch)
are added with ``register_tiled`` and take precedence over the table, as the seed's
``register_tiled_prefill_head_dim`` did.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, ProfileError, UnsupportedError
from ..registry.paths import kernels_dir
from ..registry.yaml_safe import load_yaml_text, read_text
from ..schema.kernels import KernelRoutesFile, Route, RouteTable
from ..versions import in_range

BACKENDS = ("metal", "cuda", "cpu")


# --------------------------------------------------------------------------------------------------
# versions
# --------------------------------------------------------------------------------------------------



def parse_version(text: str) -> tuple[int, int, int]:
    """``"0.32.4"`` -> (0, 32, 4); ``"0.32"`` -> (0, 32, 0). Suffixes (``.dev``, ``+cuda``) are ignored."""
    if not isinstance(text, str):
        raise InputError(f"--mlx-version must be a string like '0.32.4', got {text!r}")
    # the whole text is read as PEP 440 (packaging, as the kernel tables' ranges are): a prefix match read
    # "1!0.32" (epoch 1) as 1.0.0 and "0.32.*" (a range, not a version) as 0.32.0, without a word
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(text.strip())
    except InvalidVersion:
        v = None
    if v is None or v.epoch != 0 or len(text) > 64:
        raise InputError(f"--mlx-version {text!r} is not an MLX version of the form MAJOR.MINOR[.PATCH] (e.g. 0.32.4)")
    r = (tuple(v.release) + (0, 0))[:3]
    return (r[0], r[1], r[2])


def version_matches(version: tuple[int, int, int], spec: str) -> bool:
    """Is ``version`` inside the PEP 440 range ``spec`` (``>=0.32.3,<0.33``)? Read with ``packaging``
    (``versions.check_range``): a range that cannot be read is an ``InputError``, never a silent miss."""
    try:
        return in_range(".".join(str(x) for x in version), spec)
    except ValueError as e:
        raise InputError(f"bad version range in a kernel table: {e}") from None


# --------------------------------------------------------------------------------------------------
# a call and its route
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SdpaCall:
    """One ``scaled_dot_product_attention`` call of a prefill chunk (batch 1 unless ``batch``)."""

    n_q: int
    n_kv: int
    head_dim: int
    v_head_dim: int
    q_len: int
    kv_len: int
    mask: str = "causal"  # none | causal | bool | additive
    sinks: bool = False
    dtype: str = "bf16"
    nax: bool = False

    @property
    def gqa(self) -> int:
        return max(1, self.n_q // max(1, self.n_kv))


@dataclass(frozen=True, slots=True)
class RouteDecision:
    name: str
    route: str  # fused | vector | fallback | blocked | tiled
    q_tile: int | None
    kv_tile: int | None
    source: str
    output_in_query_layout: bool = False  # the output needs no copy before o_proj (``Route.output_in_query_layout``)


def _matches(r: Route, c: SdpaCall) -> bool:
    w = r.when
    dq, dv = c.head_dim, c.v_head_dim
    if w.head_dim is not None and dq not in w.head_dim:
        return False
    if w.v_head_dim is not None and dv not in w.v_head_dim:
        return False
    if w.pairs is not None and [dq, dv] not in [list(p) for p in w.pairs]:
        return False
    if w.same_qk_v_dim is not None and (dq == dv) != w.same_qk_v_dim:
        return False
    if w.head_dim_max is not None and (dq > w.head_dim_max or dv > w.head_dim_max):
        return False
    if w.head_dim_multiple_of is not None and (dq % w.head_dim_multiple_of or dv % w.head_dim_multiple_of):
        return False
    if w.query_len_min is not None and c.q_len < w.query_len_min:
        return False
    if w.query_len_max is not None and c.q_len > w.query_len_max:
        return False
    if w.query_len_eq_kv_len is not None and (c.q_len == c.kv_len) != w.query_len_eq_kv_len:
        return False
    if w.query_len_le_kv_len is not None and (c.q_len <= c.kv_len) != w.query_len_le_kv_len:
        return False
    if w.kv_len_min is not None and c.kv_len < w.kv_len_min:
        return False
    if w.gqa_times_query_max is not None and c.gqa * c.q_len > w.gqa_times_query_max:
        return False
    if w.gqa is not None and c.gqa != w.gqa:
        return False
    if w.mask is not None and c.mask not in w.mask:
        return False
    if w.sinks is not None and c.sinks != w.sinks:
        return False
    if w.dtype is not None and c.dtype not in w.dtype:
        return False
    if w.nax is not None and c.nax != w.nax:
        return False
    return True


# Runtime-registered tiled kernels (the seed's register_tiled_prefill_head_dim): head_dim -> (min kv, kv tile).
_TILED: dict[int, tuple[int, int]] = {}
_TILED_LOCK = threading.Lock()
_TILED_VERSION = [0]


def register_tiled(head_dim: int, *, min_kv_len: int = 8192, kv_tile: int = 1024) -> None:
    """Declare that multi-token SDPA calls with this head_dim and ``kv_len >= min_kv_len`` run an
    O(L) tiled kernel installed by the engine (oMLX's sdpa256 patch): the estimate then charges one
    ``n_q x qL x kv_tile`` score tile instead of the whole score matrix. Call it in lockstep with
    installing the kernel: without the kernel the estimate would be too low. Unlike the seed, the
    minimum kv length is kept per head_dim (the seed overwrote one global threshold)."""
    for name, v in (("head_dim", head_dim), ("min_kv_len", min_kv_len), ("kv_tile", kv_tile)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(f"register_tiled: {name} must be a positive integer, got {v!r}")
    with _TILED_LOCK:
        _TILED[int(head_dim)] = (int(min_kv_len), int(kv_tile))
        _TILED_VERSION[0] += 1


def unregister_tiled(head_dim: int | None = None) -> None:
    """Forget one (or every) runtime tiled kernel."""
    with _TILED_LOCK:
        if head_dim is None:
            _TILED.clear()
        else:
            _TILED.pop(int(head_dim), None)
        _TILED_VERSION[0] += 1


def tiled_state() -> tuple[int, dict[int, tuple[int, int]]]:
    """(generation counter, copy of the registry): estimators cache per generation."""
    with _TILED_LOCK:
        return _TILED_VERSION[0], dict(_TILED)


# --------------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelRoutes:
    """One backend's table for one MLX version: routes, executor, fast-op costs, fallback costs."""

    backend: str
    mlx_version: str
    table: RouteTable
    supports_bool_mask: bool
    bool_to_additive_buffers: float
    file: str

    @classmethod
    def for_backend(cls, backend: str, mlx_version: str | None = None, directory: Path | None = None) -> "KernelRoutes":
        """The table of ``backend`` whose ``mlx_versions`` range contains ``mlx_version``.

        ``None`` picks the newest table (and says so in ``mlx_version``: ``"newest (>=0.32.4)"``). A
        version no table covers raises ``UnsupportedError`` naming the known ranges: the estimate never
        silently borrows another release's rules.
        """
        if backend not in BACKENDS:
            raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
        f, path = _load(backend, str(directory) if directory else None)
        if mlx_version is None:
            t = f.tables[0]
            return cls(backend, f"newest ({t.mlx_versions})", t, f.supports_bool_mask, f.bool_to_additive_buffers, path)
        v = parse_version(mlx_version)
        for t in f.tables:
            if version_matches(v, t.mlx_versions):
                return cls(backend, mlx_version, t, f.supports_bool_mask, f.bool_to_additive_buffers, path)
        known = ", ".join(t.mlx_versions for t in f.tables)
        raise UnsupportedError(
            f"unsupported: no {backend} kernel table covers MLX {mlx_version} (known ranges: {known}; "
            f"see {path})"
        )

    def route(self, call: SdpaCall, tiled: dict[int, tuple[int, int]] | None = None) -> RouteDecision:
        if tiled and call.q_len > 1 and call.head_dim in tiled:
            min_kv, tile = tiled[call.head_dim]
            if call.kv_len >= min_kv:
                return RouteDecision(f"tiled-d{call.head_dim}", "tiled", None, tile,
                                     "runtime: register_tiled_prefill_head_dim")
        for r in self.table.routes:
            if _matches(r, call):
                return RouteDecision(r.name, r.route, r.q_tile, r.kv_tile, r.source, r.output_in_query_layout)
        raise UnsupportedError(
            f"unsupported: no {self.backend} SDPA rule matches D={call.head_dim}/{call.v_head_dim} qL={call.q_len} "
            f"kL={call.kv_len} mask={call.mask} ({self.file} should end with a catch-all rule)"
        )

    @property
    def executor(self):
        return self.table.executor

    @property
    def fast_ops(self):
        return self.table.fast_ops

    @property
    def donation(self):
        return self.table.donation

    @property
    def gemm_workspace(self):
        return self.table.gemm_workspace

    @property
    def fallback(self):
        return self.table.fallback


@lru_cache(maxsize=16)
def _load(backend: str, directory: str | None) -> tuple[KernelRoutesFile, str]:
    d = Path(directory) if directory else kernels_dir()
    path = d / f"{backend}.yaml"
    try:
        text = read_text(path)
    except OSError as e:
        raise UnsupportedError(f"unsupported: kernel table {path} cannot be read ({e.strerror or e})") from None
    data = load_yaml_text(text, str(path))
    try:
        f = KernelRoutesFile.model_validate(data)
    except Exception as e:  # pydantic ValidationError: name the file
        raise ProfileError_from(path, e) from None
    if f.backend != backend:
        raise UnsupportedError(f"unsupported: {path} declares backend {f.backend!r}, expected {backend!r}")
    return f, str(path)


def ProfileError_from(path: Path, e: Exception) -> ProfileError:
    from ..errors import Issue

    return ProfileError([Issue(str(path), None, "", f"invalid kernel table: {e}")])
