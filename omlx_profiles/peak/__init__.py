"""The prefill peak (layer 5), term by term.

* ``kernels``  - which SDPA kernel a call takes: the per-backend, per-MLX-version tables of
  ``profiles/kernels/*.yaml`` (+ tiled kernels an engine registers at runtime);
* ``ops/``     - what one block allocates while it runs: ``items`` (the vocabulary: ``Item``, the call
  context, ``mx.fast`` op costs), ``attention``, ``mlp``, ``mla``, ``recurrent``; which op list a block
  takes follows the module's compute traits (``profiles/mlx_lm/<module>.yaml`` ``traits:``, ``mlxlm.recipe_files.traits_of``);
* ``layers``   - one call's ordered items: embedding, every layer, the last token's logits;
* ``executor`` - how many items are alive at once: the run-ahead window, CUDA graph commits;
* ``request``  - the question and the answer: ``Request``, ``Breakdown``, ``Verdict``;
* ``call``     - one call of a prompt: its items in executor order, its peak, what outlives the window;
* ``replay``   - the per-call cache replay (mlx-lm's growth rules, ``kv.replay``) the calls read;
* ``prefill``  - a whole prompt: the calls replayed, the peak call, the ``Breakdown``;
* ``fast``     - precomputed coefficients for the per-request hot path (oMLX's admission guard).

No mlx import here: kernel routes are data and the rest is integer arithmetic over a ``Profile``.
"""
from .request import Breakdown, Request, Verdict  # noqa: F401
