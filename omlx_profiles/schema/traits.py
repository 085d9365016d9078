"""Compute traits of an mlx-lm module (``traits:`` in ``profiles/mlx_lm/<module>.yaml``).

Why data: which op list the prefill peak's model (``peak/``) uses for a block - q/k norms, sandwich norms,
gelu_approx, Python softcap attention, fused projections, expert bias, the mask, expanded vs latent MLA,
the state layers' mixer - is knowledge about one mlx-lm module, so it lives in that module's file; the
peak code asks ``mlxlm.recipe_files.traits_of(model_type)`` and names no module.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Traits(_Strict):
    """How the module computes a block where it differs from the llama shape: what the prefill peak's op
    model (``peak/``) needs. Every trait defaults to the llama shape; each one selects an op list of the
    model (the measurements behind each are in ``peak/ops/``'s comments)."""

    qk_norm: Literal["none", "heads", "after_transpose"] = Field(
        "none", description="q_norm / k_norm per head: 'heads' on (B, L, H, D); 'after_transpose' on the "
                            "(B, H, L, D) transpose (RMSNorm first copies the non-contiguous view)")
    gated_attention: bool = Field(False, description="q_proj also yields an output gate: o_proj(out * sigmoid(gate))")
    sandwich_norm: bool = Field(False, description="pre- and post-norms around both blocks (four norms per layer)")
    query_scale: bool = Field(False, description="queries * a per-position scale after RoPE (llama-4 scaling): a "
                                                 "new q-sized product (RoPE's output is a transposed view), which "
                                                 "SDPA then writes its output in the layout of, so o_proj copies it")
    gelu_approx: bool = Field(False, description="MLP = down(gelu_approx(gate) * up), gelu_approx its own primitive")
    softcap_attention: bool = Field(
        False, description="attention written out in Python with tanh-capped logits (never mx.fast SDPA)")
    fused_qkv: bool = Field(False, description="one fused q|k|v projection split into column views")
    fused_gate_up: bool = Field(False, description="one fused gate|up projection split into column views")
    expert_bias: bool = Field(False, description="MoE experts (SwitchGLU) carry a bias per expert and projection")
    shared_expert: Literal["experts", "intermediate"] = Field(
        "experts", description="shared-expert MLP width: moe_intermediate_size x n_shared_experts ('experts') or "
                               "the model's intermediate_size ('intermediate': shared_expert_intermediate_size)")
    mask: Literal["causal", "array"] = Field(
        "causal", description="'array': attention always builds a bool mask array (return_array=True)")
    mla: Literal["latent", "expanded"] = Field(
        "latent", description="MLA attention: over the cached latent, or with the latent expanded into per-head "
                              "keys / values before attention (and cached so)")
    mixer: Literal["none", "gated_delta", "ssd"] = Field(
        "none", description="the op list of the state (recurrent) layers: gated DeltaNet, or Mamba-2's SSD (ssm_attn)")
    conv_state: Literal["contiguous", "view"] = Field(
        "contiguous", description="'view': the new conv state is a slice view of the (K-1+S) x conv_dim "
                                  "concatenation (keeps the whole buffer alive until the next call)")
    state_bound: bool = Field(
        True, description="False: the state layers' op model was measured UNDER the peak on some backend and no "
                          "worst case covers it, so an unmeasured estimate is reported unknown, not a number")
    separate_mlp: bool = Field(
        False, description="attention, mixer and MLP are separate layers (a cache layer runs no MLP block)")
    sinks: bool = Field(False, description="per-head attention sinks (the profile's attention_sinks): SDPA takes "
                                           "the sinks route")
    router_scores: Literal["activation", "fp32"] = Field(
        "activation", description="'fp32': the MoE router's weights are fp32 (sigmoid / softmax of the gates cast "
                                  "to float32), so the combine (y * scores[..., None]).sum(-2).astype(y.dtype) "
                                  "casts the (S, k, hidden) expert outputs to fp32 before the product and sums in fp32")
