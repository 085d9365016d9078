"""Resident cache bytes, exact (layer 5): ``replay`` is the per-call row replay of mlx-lm's caches
(``KVCache`` / ``RotatingKVCache`` / ``ChunkedKVCache`` growth), ``bytes`` the per-layer report."""
from .bytes import DEFAULT_QUANTIZED_KV_START, KVQuant, KVReport, kv_bytes, kv_report  # noqa: F401
