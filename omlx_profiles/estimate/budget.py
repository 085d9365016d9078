"""The memory budget a request is checked against, and the default reserve kept free inside it.

``budget`` is the memory MLX may use for this model. On a Mac that is the GPU's working set, not the
RAM on the box: ``mx.device_info()["max_recommended_working_set_size"]`` (macOS sets it to a fraction
of RAM; ``sudo sysctl iogpu.wired_limit_mb=...`` raises it), or the limit an engine sets with
``mx.set_memory_limit``. On CUDA it is the device memory, on CPU the RAM the process may take.

``reserve`` is kept free inside the budget, for what the estimate deliberately does not model.
The default is ``512 MiB + 5% of the budget``, because:

* **5%: MLX's own cache-collection threshold.** MLX's Metal allocator (``allocator.cpp``) sets
  ``gc_limit = min(memory_limit, 0.95 * recommendedMaxWorkingSetSize)``: once active memory plus its
  buffer cache would pass 95% of the working set, every new allocation first releases cached buffers,
  and above the working set itself macOS starts to page wired GPU memory (the road to the kernel panics
  engines report). Keeping the predicted peak under 95% of the budget keeps the prefill out of that
  regime when the budget is the working set.
* **512 MiB: memory outside the estimated arrays.** The Python process with mlx and mlx-lm imported
  (76 MB RSS measured on Linux with mlx 0.32.4 / mlx-lm 0.32.2), a tokenizer and a server around it
  (a few hundred MB), Metal's compiled kernel libraries, the last token's logits and sampling
  buffers (``vocab * 4`` bytes), and the allocator's rounding of every buffer above 16 KiB up to a
  16 KiB page (a few MB for a few hundred weight tensors).

The estimate itself already sits on the safe side of the measured peak (calibrated to [1.00, 1.15]
of it), so the reserve is not a fudge factor for estimation error: set ``--reserve 0`` to see the
bare arithmetic, or a larger value when other programs share the machine.
"""
from __future__ import annotations

from ..errors import InputError
from ..units import MAX_BYTES
from ..units import check_count

RESERVE_FIXED = 512 * 1024**2
RESERVE_FRACTION_PERCENT = 5


def default_reserve(budget: int) -> int:
    """``512 MiB + 5%`` of ``budget`` (see the module docstring for why), never more than the budget."""
    budget = check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
    return min(budget, RESERVE_FIXED + budget * RESERVE_FRACTION_PERCENT // 100)


def resolve_reserve(budget: int, reserve: int | None = None) -> int:
    """``reserve`` as given (a non-negative count), else the default for ``budget``."""
    budget = check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
    return default_reserve(budget) if reserve is None else check_count("reserve", reserve, minimum=0, maximum=MAX_BYTES)


def usable(budget: int, reserve: int | None = None) -> int:
    """Bytes a request's total may reach: the budget less the reserve (the default when ``None``)."""
    return max(0, budget - resolve_reserve(budget, reserve))


def reserve_for(budget: int | None, reserve: int | None = None) -> int | None:
    """The reserve a request with ``budget`` keeps: ``reserve`` as given, else the default; ``None``
    without a budget. A reserve larger than the budget is an input error (nothing would be usable)."""
    if budget is None:
        return None
    r = resolve_reserve(budget, reserve)
    if r > budget:
        raise InputError(f"--reserve {r} bytes is larger than the budget ({budget} bytes)")
    return r
