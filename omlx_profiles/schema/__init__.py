"""What a data file may say (layer 1): Pydantic models only, no I/O. The committed JSON Schemas in
``schema/`` are generated from them (``export``; a test forbids drift).

* ``family``   - a family file (``profiles/<family>.yaml``): variants, layer kinds, MLA / MoE / weights;
* ``kernels``  - a kernel-route table (``profiles/kernels/<backend>.yaml``);
* ``sharding`` - the mlx-lm sharding plan (``profiles/mlx_lm/sharding.yaml``);
* ``calibration`` - a measured-peak file (``profiles/calibration/<backend>/*.yaml``);
* ``export``   - writes / checks ``schema/*.json``.
"""
