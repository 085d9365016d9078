"""What a user or an engine asks (layer 6), as plain values in and dicts / dataclasses out.

* ``estimator``   - ``Estimator``: resident KV, the prefill peak, fits, the longest prompt;
* ``budget``      - the budget and the default reserve kept free inside it (the only place);
* ``weights``     - the weights term (exact from safetensors headers, else from the profile, else unknown);
* ``safetensors`` - the bounded safetensors header reader;
* ``report``      - ``EstimateOptions`` -> the ``estimate --json`` dict;
* ``fit``         - ``FitRequest`` -> the ``fit --json`` dict and the chart's ``Series``;
* ``calibration`` - the measured peaks of ``profiles/calibration`` and the profile of each point.
"""
