"""The prefill peak: which SDPA kernel each call takes (``routes``), what one prefill call holds while
it runs (``transient``), and the whole prompt's peak, fit and longest fitting prompt (``prefill``).

No mlx import here: kernel routes are data (``profiles/kernels/*.yaml``) and the rest is integer
arithmetic over a ``Profile``.
"""
from .prefill import Breakdown, Request, Verdict  # noqa: F401
