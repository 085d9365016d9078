"""The weights term per rank.

Exact when the checkpoint's safetensors headers are at hand, read tensor by tensor the way mlx-lm loads
a shard:

* pipeline (``sharded_load``): a rank loads the tensors of its layers (``layers.<i>.`` with
  ``start <= i < end``) plus every tensor outside the layers (embeddings, final norm, head: "every stage
  keeps" them); tensors of layers past the model's depth (MTP heads) are dropped by ``sanitize``.
* tensor (``Model.shard``): a tensor of a projection the plan splits (``all_to_sharded``, ``heads``,
  ``custom``, ``lm_head`` when the vocabulary splits) keeps 1/N of its bytes; ``sharded_to_all`` splits
  weight, scales and quantization biases on the input axis but keeps the linear ``bias`` whole (MLX's
  ``_sharded_to_all``); every other tensor is held whole by every rank. The split axis must divide by N
  (``mx.split``), else an error.

Without files, the profile's total is split by parameter share (embeddings replicated); that is
*approximate* and labelled so: it is not a bound (a rank's layers may be larger than the average).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UnsupportedError
from ..estimate.safetensors import CheckpointHeaders
from .ranks import RankView, ShardSpec
from ..schema.sharding import TensorPlan

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_PARAM = ("weight", "scales", "biases", "bias")


@dataclass(frozen=True)
class RankWeights:
    bytes: int | None
    exact: bool
    source: str
    reason: str | None = None

    @property
    def label(self) -> str:
        return "unknown" if self.bytes is None else ("exact" if self.exact else "approximate")

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "exact": self.exact, "label": self.label, "source": self.source,
                "reason": self.reason}


def _module_and_param(name: str) -> tuple[str, str]:
    mod, _, param = name.rpartition(".")
    return (mod, param) if param in _PARAM else (name, "")


def _pattern(p: str) -> re.Pattern:
    # a plan path names a module under a decoder layer; ``*`` is any item of a module list
    return re.compile(r"(?:^|\.)" + re.escape(p).replace(r"\*", r"\d+") + "$")


def _matches(module: str, paths: list[str]) -> bool:
    return any(module == p or module.endswith("." + p) or ("*" in p and _pattern(p).search(module)) for p in paths)


def _tensor_share(name: str, shape: tuple[int, ...], nbytes: int, tp: TensorPlan, n: int) -> int:
    """Bytes of one checkpoint tensor on one tensor-parallel rank."""
    mod, param = _module_and_param(name)
    if _matches(mod, tp.sharded_to_all):
        if param == "bias":
            return nbytes
        axis = -1
    elif _matches(mod, tp.all_to_sharded) or (tp.vocab == "sharded" and mod.rsplit(".", 1)[-1] == "lm_head"):
        axis = -1 if param == "bias" else max(len(shape) - 2, 0)
    elif _matches(mod, tp.heads) or _matches(name, tp.heads) or _matches(mod, tp.custom) or _matches(name, tp.custom):
        axis = 0
    else:
        return nbytes
    if shape and shape[axis] % n:
        raise UnsupportedError(f"tensor {name} has {shape[axis]} on the axis mlx-lm splits, which does "
                               f"not divide by {n} ranks")
    return nbytes // n


def from_headers(ck: CheckpointHeaders, views: list[RankView], spec: ShardSpec, tp: TensorPlan | None,
                 num_layers: int) -> list[RankWeights]:
    tensors = [t for f in ck.files for t in f.tensors]
    src = f"safetensors headers of {ck.directory}"
    out = []
    for v in views:
        total = 0
        for t in tensors:
            m = _LAYER.search(t.name)
            layer = int(m.group(1)) if m else None
            if layer is not None and layer >= num_layers:
                continue  # MTP layers: sanitize drops them
            if spec.parallel == "pipeline":
                if layer is None or v.start <= layer < v.end:
                    total += t.nbytes
            else:
                total += _tensor_share(t.name, t.shape, t.nbytes, tp, spec.ranks)
        out.append(RankWeights(total, True, src))
    return out


def approximate(total: int | None, why: str, views: list[RankView], spec: ShardSpec, shared: int,
                num_layers: int) -> list[RankWeights]:
    """Split a whole-model total by parameter share: ``shared`` bytes (embeddings, head) on every rank."""
    if total is None:
        return [RankWeights(None, False, "unknown", why) for _ in views]
    shared = min(shared, total)
    rest = total - shared
    out = []
    for v in views:
        if spec.parallel == "pipeline":
            b = shared + -(-rest * (v.end - v.start) // num_layers)
            how = f"embeddings/head {shared:,} B + {v.end - v.start}/{num_layers} of the layers' bytes"
        else:
            b = shared + -(-rest // spec.ranks)
            how = f"embeddings/head {shared:,} B + 1/{spec.ranks} of the rest"
        out.append(RankWeights(b, False, "whole-model weights split by parameter share",
                               f"approximate (not a bound: layers may differ in size): {how}; whole model: {why}"))
    return out
