"""What mlx-lm 0.32 does with a config, as data and pure functions (layer 3); never imports mlx.

* ``facts``       - mlx-lm's ``MODEL_REMAPPING`` and, per args class, required keys and defaults
  (copied from mlx-lm; a live test checks them against the installed mlx-lm);
* ``model_types`` - every mlx-lm module with its cache layout in prose (the coverage table's source);
* ``config``      - reading a config.json (clear errors naming the file), the language-model sub-config of
  a wrapper, typed key access that records where each value came from;
* ``to_layers``   - config -> per-layer caches, one rule per mlx-lm module;
* ``to_config``   - the inverse: a ``Profile`` -> an mlx-lm config (builds the live test models);
* ``fold``        - a per-layer list of caches -> the profile's ``layers`` block (kinds + pattern);
* ``coverage``    - the rows of ``profiles/COVERAGE.md``.
"""
