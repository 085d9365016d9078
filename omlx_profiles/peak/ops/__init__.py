"""What the ops of one prefill call allocate, block by block (see ``peak.layers`` for the whole call).

What one prefill call (a ``generate_step`` chunk, or the last token) allocates while it runs.

The measured peak of a chunk is not "the largest layer": MLX's host thread allocates every op's output
while it encodes the graph and the device (or the CPU worker thread) releases an op's inputs only once it
has run that op, so the host runs ahead by a window of ops and the outputs of all ops in that window are
alive together (``Executor.inflight_ops`` in ``profiles/kernels/<backend>.yaml``). A chunk is therefore
modelled as the ordered list of what its ops allocate, layer after layer (``Item``s), and its transient is

    transient = pinned + max over windows of ``inflight_ops`` consecutive ops of the bytes allocated there

where ``pinned`` is what outlives any window (the residual stream, the masks built once per forward).
Every item has a name and a formula in this file: nothing is fitted except the window length, a property
of the backend's executor that the kernel table documents.

Per attention layer (``_attention``): input norm, the q/k/v projections, q/k norms where the family has
them, RoPE, the cache update (the old buffer and the zero block of a growing ``KVCache`` concatenation,
or the trimmed copy of a ``RotatingKVCache``), SDPA as routed by the kernel table (fused: its output;
fallback: one score buffer, scaled q, output, the causal mask; bool masks converted to additive on
backends that cannot take them), the output projection and the residual add. Then the MLP (dense SwiGLU)
or MoE block (router, token sort, the k-expanded gate/up/activation/down, unsort, weighting). MLA,
gated-DeltaNet and Mamba2 layers have their own lists below. On the CPU backend ``mx.fast`` norms and RoPE
are decomposed into several ops with temporaries (``FastOps`` in ``cpu.yaml``).

The cache buffers themselves are accounted outside the window (``prefill.py``): what a layer held before
the call is resident, the rows a call adds are counted for every layer at once (the conservative side:
the new buffers of layers the window has not reached yet are not allocated yet).
"""
