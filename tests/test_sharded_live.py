"""Two ranks on loopback (MLX's ring backend), tiny real mlx-lm models: per-rank KV, weights and peak.

The test spawns two processes (``python -m omlx_profiles.live.sharded``) with a hostfile of two free
loopback ports, the way ``mlx.launch --backend ring -n 2`` would on one host. Each rank loads the same
local checkpoint lazily, shards it the mlx-lm way (``model.shard(group)`` or
``model.model.pipeline(group[, split])``), evaluates its parameters, prefills a prompt as
``generate_step`` does, and reports ``sum(nbytes)`` of its parameters, ``sum(c.nbytes for c in cache)``
and its peak over the baseline (``mx.get_peak_memory()``). The estimate of each rank comes from the
config (``profile_for_config``), the checkpoint's safetensors headers and ``profiles/mlx_lm/sharding.yaml``:
nothing is copied from the measurement.

Done-when (issue 17): KV and weights byte-exact per rank. Peak: the reported peak (with its
``peak_basis``: measured, or a derived / bound worst case) is never under the measurement; the op model
itself (``apply_basis=False``) is held to ``PEAK_LIMIT`` unless its basis is ``bound`` (then only
never-under), and [1.00, 1.15] (``PEAK_BAND``) is reported per case: the
single-process peak model already over-estimates these tiny dense / MoE shapes by up to ~1.2 on CPU
(see /work/notes/issue-17.md), which the per-rank profiles inherit.
"""
from __future__ import annotations

import json

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.live.build import build_model, save_local  # noqa: E402
from omlx_profiles.live.sharded import launch_ring  # noqa: E402
from omlx_profiles.estimate.calibration import profile_for_config  # noqa: E402
from omlx_profiles.estimate.safetensors import read_checkpoint  # noqa: E402
from omlx_profiles.peak.prefill import Request, prefill_peak  # noqa: E402
from omlx_profiles.sharding import ShardedOptions, ShardSpec, rank_profiles, rank_weights  # noqa: E402
from omlx_profiles.sharding.report import rank_estimate  # noqa: E402

# 4 chunks + the last token, as 1025 / 256 did (same calls, same checks) at about half the CPU time: the
# tiny models' bf16 matmuls and attention on MLX's CPU backend are most of this module's cost (measured
# under load here: 28 s -> 18 s user, 110 s -> 60 s wall; every measured-basis rank ratio within 0.02-0.07 of
# 1025's; the hybrids' are bounds)
TOKENS, CHUNK = 513, 128
PEAK_BAND = (1.00, 1.15)
PEAK_LIMIT = (1.00, 1.35)
TIMEOUT_S = 300

_C = dict(vocab_size=512, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
          max_position_embeddings=32768)
MODELS = {
    # dense GQA (qwen2: tensor and pipeline), head_dim 128
    "dense": ("bf16", dict(_C, model_type="qwen2", num_hidden_layers=4, hidden_size=512, intermediate_size=512,
                           num_attention_heads=4, num_key_value_heads=2)),
    # MoE (qwen3_moe, 8 experts top-2; CPU gather_mm runs in fp32 only)
    "moe": ("fp32", dict(_C, model_type="qwen3_moe", num_hidden_layers=4, hidden_size=256, intermediate_size=512,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=128, num_experts=8,
                         num_experts_per_tok=2, moe_intermediate_size=256, decoder_sparse_step=1,
                         norm_topk_prob=True, mlp_only_layers=[])),
    # latent MLA (deepseek_v3: the latent cache is replicated under tensor sharding, heads split)
    "mla": ("bf16", dict(_C, model_type="deepseek_v3", num_hidden_layers=4, hidden_size=256, intermediate_size=512,
                         num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=128, qk_rope_head_dim=32,
                         qk_nope_head_dim=64, v_head_dim=64, q_lora_rank=128, n_routed_experts=None,
                         num_experts_per_tok=2, moe_intermediate_size=64, n_shared_experts=None, moe_layer_freq=1,
                         first_k_dense_replace=0, n_group=1, topk_group=1, routed_scaling_factor=1.0)),
    # hybrid (qwen3_next: gated DeltaNet + full attention; pipeline only in mlx-lm 0.32.2)
    "hybrid": ("bf16", dict(_C, model_type="qwen3_next", num_hidden_layers=4, hidden_size=256,
                            intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=128,
                            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                            linear_value_head_dim=32, linear_conv_kernel_dim=4, full_attention_interval=2,
                            num_experts=0, num_experts_per_tok=2, moe_intermediate_size=64,
                            shared_expert_intermediate_size=64, decoder_sparse_step=1, norm_topk_prob=True,
                            mlp_only_layers=[], partial_rotary_factor=0.25)),
    # hybrid with tensor sharding (qwen3_5: gated DeltaNet states, conv1d and lm_head split; VLM wrapper)
    "hybrid35": ("bf16", {"model_type": "qwen3_5", "tie_word_embeddings": False, "text_config": dict(
        model_type="qwen3_5_text", num_hidden_layers=4, hidden_size=256, intermediate_size=256, vocab_size=512,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, attn_output_gate=True, full_attention_interval=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        max_position_embeddings=32768, tie_word_embeddings=False, mlp_only_layers=[],
        rope_parameters={"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True})}),
}
# (case, model, parallel, pipeline split or None)
CASES = [("dense-tensor", "dense", "tensor", None), ("dense-pipeline", "dense", "pipeline", None),
         ("moe-tensor", "moe", "tensor", None), ("moe-pipeline-3-1", "moe", "pipeline", (3, 1)),
         ("mla-tensor", "mla", "tensor", None), ("mla-pipeline", "mla", "pipeline", None),
         ("hybrid-pipeline", "hybrid", "pipeline", None), ("hybrid35-tensor", "hybrid35", "tensor", None)]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sharded")
    dirs = {}
    for name, (dtype, cfg) in MODELS.items():
        m = build_model(cfg, dtype, allow_fp32_promotion=False)
        dirs[name] = save_local(m, cfg, tmp / name)
        del m
    spec = {"cases": [{"name": c, "path": str(dirs[m]), "parallel": par, "split": list(split) if split else None,
                       "tokens": TOKENS, "chunk": CHUNK, "repeats": 1} for c, m, par, split in CASES]}
    spec_path = tmp / "spec.json"
    spec_path.write_text(json.dumps(spec))
    return dirs, launch_ring(spec_path, tmp, timeout_s=TIMEOUT_S)


@pytest.mark.xdist_group("sharded_live")  # pytest-xdist: one worker runs the module's one launch of every case
@pytest.mark.parametrize("case, model, parallel, split", CASES)
def test_rank_kv_weights_exact_and_peak(live, case, model, parallel, split):
    dirs, measured = live
    dtype, cfg = MODELS[model]
    prof = profile_for_config(cfg, dtype)
    spec = ShardSpec(2, parallel, split)
    views = rank_profiles(prof, spec)
    weights = rank_weights(prof, spec, views, checkpoint=read_checkpoint(dirs[model]))
    opts = ShardedOptions(spec, chunk=CHUNK, backend="cpu", mlx_version=mx.__version__, dtype=dtype)
    rows = []
    for v, w in zip(views, weights):
        got = measured[v.rank][case]
        est = rank_estimate(v, opts, TOKENS, w, prof.hidden_size)
        assert got["layers"] == [v.start, v.end], f"{case} rank {v.rank}: layers"
        assert est["kv_bytes"] == got["cache_nbytes"], f"{case} rank {v.rank}: KV"
        assert w.exact and w.bytes == got["weights_nbytes"], f"{case} rank {v.rank}: weights"
        meas = got["peak_over_baseline"]
        # what the user sees: the op model, or its derived / bound worst case where the profile's compute
        # traits have no calibration in band (peak_basis): never under the measurement
        shown = est["peak_bytes"] + est["comm_bytes"]
        assert shown >= meas, f"{case} rank {v.rank}: reported peak {shown} under measured {meas}"
        # the op model itself (basis not applied), for the band
        op = prefill_peak(v.profile, Request(TOKENS, chunk=CHUNK), backend="cpu", mlx_version=mx.__version__,
                          dtype=dtype, apply_basis=False).peak_bytes + est["comm_bytes"]
        rows.append((v.rank, op, meas, op / meas, est["breakdown"]["peak_basis"], shown / meas))
    report = ", ".join(f"rank {r}: {e}/{m} = {q:.3f} (reported, basis {b}: {sq:.3f})" for r, e, m, q, b, sq in rows)
    print(f"{case}: est/measured peak {report}")
    # a peak whose basis is "bound" (compute traits with no calibration in band on this backend: here the
    # gated-DeltaNet recurrence) is a worst case by construction: only "never under" applies to it
    bad = [r for r in rows if r[3] < PEAK_LIMIT[0] or (r[4] != "bound" and r[3] > PEAK_LIMIT[1])]
    assert not bad, f"{case}: est/measured outside {PEAK_LIMIT}: {report}"


@pytest.mark.xdist_group("sharded_live")
@pytest.mark.parametrize("case, model, parallel, split", CASES)
def test_cli_json_per_rank_is_the_measurement(live, case, model, parallel, split):
    """``estimate DIR --ranks 2 --parallel ... --json`` on the local checkpoint, what a user runs: each rank's
    weights are exact from the safetensors headers (a pipeline rank: its layers' tensors plus the shared ones)
    and equal the rank's measured parameter bytes; its resident KV equals the measured cache bytes; its
    reported peak + communication buffer is not under the measured peak."""
    from .conftest import run_cli

    dirs, measured = live
    dtype, _ = MODELS[model]
    args = ["estimate", str(dirs[model]), "--tokens", str(TOKENS), "--chunk", str(CHUNK), "--backend", "cpu",
            "--dtype", dtype, "--ranks", "2", "--parallel", parallel, "--json"]
    if split:
        args += ["--split", ",".join(map(str, split))]
    code, out, err = run_cli(*args)
    assert code == 0, err
    per = json.loads(out)["per_rank"]
    assert [r["rank"] for r in per] == [0, 1]
    for r in per:
        got = measured[r["rank"]][case]
        assert r["layers"] == got["layers"], f"{case} rank {r['rank']}: layers"
        assert r["weights"]["label"] == "exact" and r["weights_bytes"] == got["weights_nbytes"], \
            f"{case} rank {r['rank']}: weights {r['weights_bytes']} vs measured {got['weights_nbytes']}"
        assert r["kv_bytes"] == got["cache_nbytes"], f"{case} rank {r['rank']}: KV"
        assert r["peak_bytes"] + r["comm_bytes"] >= got["peak_over_baseline"], f"{case} rank {r['rank']}: peak under"
