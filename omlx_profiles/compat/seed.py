"""What oMLX's memory monitor did besides estimating, kept with oMLX's semantics: the device's memory, the
cached ``MemoryInfo``, request stats, the paged-cache manager, and which MLX backend and version are running.

A base class of ``MemoryMonitor`` so that the estimating half (``monitor.py``) reads as the estimate alone.
The only module of the facade besides ``from_model`` that touches mlx: lazily, inside oMLX's process, to ask
the running MLX what it is (never to estimate).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Optional

from ..peak import kernels as _routes
from ..units import format_bytes

DEFAULT_BACKEND_ENV = "OMLX_PROFILES_BACKEND"


def _mx():
    try:
        import mlx.core as mx
    except Exception:  # noqa: BLE001
        return None
    return mx


def default_backend() -> str:
    env = os.environ.get(DEFAULT_BACKEND_ENV)
    if env in _routes.BACKENDS:
        return env
    mx = _mx()
    if mx is None:
        return "metal"
    try:
        if mx.metal.is_available():
            return "metal"
        if hasattr(mx, "cuda") and mx.cuda.is_available():
            return "cuda"
        return "cpu"
    except Exception:  # noqa: BLE001
        return "metal"


def mlx_version() -> str | None:
    return getattr(_mx(), "__version__", None)


@dataclass
class MemoryInfo:
    """Current GPU memory state (as oMLX's)."""

    total_bytes: int
    used_bytes: int
    available_bytes: int
    utilization: float


class SeedMonitor:
    """oMLX's ``MemoryMonitor`` minus its estimates (paged-SSD mode: the KV lives on SSD, so the monitor
    reports no pressure and frees nothing; the estimates are ``MemoryMonitor``'s)."""

    def __init__(self, max_kv_cache_memory: int | None, check_interval: float = 1.0, *,
                 eviction_enabled: bool = True, max_memory: int | None = None):
        if eviction_enabled and (max_kv_cache_memory is None or max_kv_cache_memory <= 0):
            raise ValueError("max_kv_cache_memory must be positive when "
                             f"eviction_enabled=True, got {max_kv_cache_memory}")
        self._max_kv_cache_memory = max_kv_cache_memory or 0
        self._eviction_enabled = eviction_enabled
        self._check_interval = check_interval
        self._max_memory = max_memory if max_memory is not None else self._get_max_memory()
        self._last_check_time = 0.0
        self._last_memory_info: Optional[MemoryInfo] = None
        self._lock = threading.Lock()
        self._paged_cache_manager = None
        self._block_size = 256
        self._baseline_memory = 0
        self._running_requests = 0
        self._waiting_requests = 0

    def _get_max_memory(self) -> int:
        try:
            import mlx.core as mx

            info = mx.device_info()
            v = info.get("max_recommended_working_set_size") or info.get("memory_size")
            if v:
                return int(v)
        except Exception:
            pass
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return 0

    def set_paged_cache_manager(self, manager, block_size: int = 64) -> None:
        self._paged_cache_manager = manager
        self._block_size = block_size

    def set_baseline_memory(self) -> None:
        try:
            import mlx.core as mx

            self._baseline_memory = int(mx.get_active_memory())
        except Exception:
            self._baseline_memory = 0

    def set_request_stats(self, running: int, waiting: int) -> None:
        self._running_requests = running
        self._waiting_requests = waiting

    def _get_current_memory_usage(self) -> int:
        return 0  # paged-SSD mode: the KV lives on SSD (as the seed)

    def get_memory_info(self) -> MemoryInfo:
        with self._lock:
            now = time.time()
            if self._last_memory_info is not None and now - self._last_check_time < self._check_interval:
                return self._last_memory_info
            used = self._get_current_memory_usage()
            avail = max(0, self._max_memory - used)
            util = used / self._max_memory if self._max_memory > 0 else 0.0
            self._last_memory_info = MemoryInfo(self._max_memory, used, avail, util)
            self._last_check_time = now
            return self._last_memory_info

    def is_under_pressure(self) -> bool:
        return False

    def bytes_to_free(self) -> int:
        return 0

    @property
    def max_memory(self) -> int:
        return self._max_memory

    @property
    def max_kv_cache_memory(self) -> int:
        return self._max_kv_cache_memory

    @property
    def eviction_enabled(self) -> bool:
        return self._eviction_enabled

    def get_stats(self) -> dict:
        info = self.get_memory_info()
        return {
            "total_bytes": info.total_bytes, "used_bytes": info.used_bytes,
            "available_bytes": info.available_bytes, "utilization": info.utilization,
            "max_kv_cache_memory": self._max_kv_cache_memory,
            "total_formatted": format_bytes(info.total_bytes), "used_formatted": format_bytes(info.used_bytes),
            "available_formatted": format_bytes(info.available_bytes),
        }
