"""A Profile without a hand-written YAML (layer 4): from a config.json, a model directory, or a probe.

* ``from_config`` - config.json / model directory -> ``Profile`` with provenance; ``resolve_path``
  matches it against the registry;
* ``from_probe``  - a cache probe's report (plain data) -> ``Profile``, any family;
* ``match``       - a config profile against a registry variant: compare, fill from YAML;
* ``skeleton``    - the YAML skeleton ``omlx-profiles extract --write`` writes.

Nothing here imports mlx or mlx_lm: taking a probe of a live model is ``omlx_profiles.live``
(``live.from_model.profile_from_model``, ``live.verify``).
"""
