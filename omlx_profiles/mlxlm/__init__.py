"""What mlx-lm 0.32 does with a config, as data and pure functions (layer 3); never imports mlx.

* ``facts``       - mlx-lm's version, ``MODEL_REMAPPING`` / ``MODEL_ARCHITECTURE_REMAPPING`` (data:
  ``profiles/mlx_lm/index.yaml``) and ``ArgsSpec`` (an args class's required keys and defaults);
* ``model_types`` - every mlx-lm module with its cache layout in prose (the coverage table's source);
* ``config``      - reading a config.json (clear errors naming the file), the language-model sub-config of
  a wrapper, typed key access that records where each value came from;
* ``recipe_files`` / ``recipes`` / ``recipe_layout`` - the module files (``profiles/mlx_lm/<module>.yaml``) and
  their interpreter: config -> per-layer caches, one recipe per mlx-lm module (no module is Python);
* ``to_layers``   - the readers a recipe rule is made of (heads, head width, MLA ranks, ``Draft`` / ``Ctx``);
* ``to_config``   - the inverse: a ``Profile`` -> an mlx-lm config (builds the live test models);
* ``fold``        - a per-layer list of caches -> the profile's ``layers`` block (kinds + pattern);
* ``coverage``    - the rows of ``profiles/COVERAGE.md``.
"""
