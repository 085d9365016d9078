"""mlx-lm modules that compute a block differently from the llama shape, as sets of module names.

Temporary home (issue 12 moved them out of transient.py unchanged): issue 13 turns each set into a
compute trait of the module's YAML, so that a new module is data, not an edit here.
"""
from __future__ import annotations


# Families whose attention normalizes q and k per head (mlx-lm q_norm / k_norm).
QK_NORM_FAMILIES = {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "gemma3", "gemma3_text",
                    "olmo2", "olmo3", "gemma4", "gemma4_text"}
# Families whose attention gates its output: q_proj yields queries and a gate, o_proj(out * sigmoid(gate)).
GATED_ATTENTION_FAMILIES = {"qwen3_next", "qwen3_5", "qwen3_5_moe"}
# Families with pre- and post-norms around both blocks (four norms per layer).
SANDWICH_NORM_FAMILIES = {"gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text"}
# MLP = down(nn.gelu_approx(gate) * up) with gelu_approx as its own compiled primitive (gemma4 compiles the
# product as one geglu, which fuses like SwiGLU). Measured on the H200 (benchmarks/cuda/probe_commits.py
# --meter, CUDA graph launches of chains): gelu_approx is 2 kernel nodes reading 3x its input's elements and
# allocates its output (it does not write in place); the multiply then does (2x the elements).
GELU_APPROX_FAMILIES = {"gemma2", "gemma3", "gemma3_text"}
# q_norm / k_norm applied to the (B, H, L, D) transpose: RMSNorm::eval_gpu first copies a view whose rows
# are not contiguous, then normalizes the copy in place (two kernels reading the q/k elements twice)
QK_NORM_AFTER_TRANSPOSE_FAMILIES = {"gemma3", "gemma3_text"}
# Attention written out in Python by mlx-lm (never mx.fast's SDPA): gemma2 caps the logits,
# scores = tanh(q k^T / cap) * cap, then the mask, softmax and scores @ v. Measured on the H200
# (probe_commits.py, held-out check 2): the unfused ops of the fallback plus the three softcap ops, each
# writing in place and reading the whole score matrix.
SOFTCAP_ATTENTION_FAMILIES = {"gemma2"}
# One fused q|k|v projection (and one gate|up projection) split with mx.split: the pieces are column views
# of one buffer, and a kernel reading a view counts the view's whole span (data_size) toward CUDA's
# graph-commit element limit. Traced on the H200 (commits_unders.json: Phi-3-mini at 64k commits one graph
# per layer where separate projections would give 28-30 graphs for 32 layers).
FUSED_QKV_FAMILIES = {"phi3"}
FUSED_GATE_UP_FAMILIES = {"phi3"}
# Families whose new conv state is a slice view of the (K-1+S) x conv_dim concatenation (qwen3_next and
# qwen3_5 take mx.contiguous of it instead): reference/mlxlm_caches.md §3.1.
CONV_VIEW_FAMILIES = {"nemotron_h", "mamba2", "falcon_h1", "granitemoehybrid", "plamo2", "mamba", "falcon_mamba"}
# Families whose MoE experts (mlx-lm SwitchGLU) carry a bias per expert and projection.
MOE_BIAS_FAMILIES = {"gpt_oss"}
# Families whose attention always builds a bool array mask (create_attention_mask(return_array=True)).
ARRAY_MASK_FAMILIES = {"deepseek_v3", "deepseek_v32", "glm4_moe_lite", "kimi_k25", "kimi_linear", "gemma2"}
#: expanded MLA: the latent is decompressed into per-head keys / values before attention (and cached so)
EXPANDED_MLA_FAMILIES = {"deepseek_v2", "minicpm3", "youtu_llm"}
