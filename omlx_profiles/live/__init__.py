"""Live mlx-lm harness: tiny models, cache replay, peak measurement.

Deliberately empty of imports: importing ``omlx_profiles`` must never import mlx. Import the
submodules (``omlx_profiles.live.build``, ``.probe``, ``.peak``) explicitly; they need mlx-lm.
"""
