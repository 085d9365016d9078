"""``WeightsInfo``: the weights term and where it came from (the one type every weights path returns)."""
from __future__ import annotations

from dataclasses import dataclass, field

GIVEN = "given by the user"  # ``source`` of a size the caller states (the CLI's --weights)


@dataclass(frozen=True)
class WeightsInfo:
    """The weights term and where it came from.

    ``bytes``: the weight bytes, or ``None`` when unknown (``reason`` says why); ``exact``: read from
    the checkpoint (or a profile's measured ``weights.bytes``) rather than computed from a parameter
    count; ``source``: a short phrase for tables; ``reason``: why it is approximate or unknown.
    """

    bytes: int | None
    exact: bool
    source: str
    reason: str | None = None
    params: int | None = None
    bits: int | None = None
    group_size: int | None = None
    mode: str | None = None
    files: int | None = None
    tensors: int | None = None
    directory: str | None = None
    stored_dtypes: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.bytes is None:
            return "unknown"
        if self.source == GIVEN:
            return "given"
        return "exact" if self.exact else "approximate"

    def as_dict(self) -> dict:
        return {
            "bytes": self.bytes,
            "exact": self.exact,
            "label": self.label,
            "source": self.source,
            "reason": self.reason,
            "params": self.params,
            "bits": self.bits,
            "group_size": self.group_size,
            "mode": self.mode,
            "files": self.files,
            "tensors": self.tensors,
            "directory": self.directory,
        }
