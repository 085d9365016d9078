"""config.json / live-model extraction, one module per job.

* ``mlx_specs``  - what mlx-lm 0.32.2 itself does with a config: its ``MODEL_REMAPPING`` table, and per
  args class the fields it requires and the defaults it fills in (data copied from mlx-lm; a live test
  checks it against the installed mlx-lm so it cannot drift silently).
* ``config``     - reading a config file (clear errors naming the file), choosing the language-model
  sub-config of a multimodal wrapper, and typed access to keys that records where each value came from.
* ``rules``      - per mlx-lm module: which cache each layer gets and with which widths.
* ``layout``     - turning a per-layer list of cache specs into the profile's ``layers`` block.
* ``merge``      - precedence and provenance when several sources describe one checkpoint, and the
  comparison of two profiles (config vs registry variant).
* ``skeleton``   - the YAML skeleton ``omlx-profiles extract`` writes.

Nothing here imports mlx or mlx_lm: ``omlx_profiles.live.from_model.profile_from_model`` and
``omlx_profiles.live.verify`` reach the live model through ``omlx_profiles.live`` only when called.
"""
