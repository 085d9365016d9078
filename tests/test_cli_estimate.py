"""``estimate``: the table and the JSON come from one dict; weights exact from a local directory; help,
exit codes and errors as documented; fast and free of heavy imports."""
from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import CONFIGS, REPO, run_cli
from .test_weights import _tiny_tensors, write_safetensors

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def local_model(tmp_path) -> tuple[Path, int]:
    d = tmp_path / "Llama-3.2-1B-Instruct-local"
    d.mkdir()
    (d / "config.json").write_text((CONFIGS / "llama-3.2-1b-instruct.json").read_text())
    tensors, bf = _tiny_tensors()
    items = list(tensors.items())
    wm = {}
    for s in range(2):
        part = dict(items[s::2])
        name = f"model-{s + 1:05d}-of-00002.safetensors"
        write_safetensors(d / name, part, bf16=bf & part.keys())
        wm.update({k: name for k in part})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    return d, sum(a.nbytes for a in tensors.values())


def test_json_keys_and_table_agree():
    code, out, err = run_cli("estimate", LLAMA, "--tokens", "32k", "--json")
    assert code == 0, err
    est = json.loads(out)
    for k in ("model", "variant", "family", "tokens", "kv_bytes", "weights_bytes", "weights", "layers", "resolution"):
        assert k in est, k
    assert est["tokens"] == 32768
    assert est["weights"]["label"] == "approximate" and est["weights_bytes"] == est["weights"]["bytes"]
    code, table, _ = run_cli("estimate", LLAMA, "--tokens", "32768")
    assert code == 0
    assert "32,768 (32k) tokens" in table and "KV cache at the peak (32 x full)" in table
    assert "weights (approximate, bf16)" in table
    # the component rows of the table add up to the JSON's total, byte for byte
    rows = [int(m.group(1).replace(",", "")) for m in
            (re.search(r"\s([\d,]+)\s+(?:\d+%|<1%)$", line) for line in table.split("total at the prefill peak")[0].splitlines())
            if m]
    assert rows[0] == est["weights_bytes"] and sum(rows) == est["total_bytes"]
    assert f"{est['total_bytes']:,}" in table
    assert est["total_bytes"] == est["weights_bytes"] + est["held_before_bytes"] + est["peak_bytes"]


def test_quantized_id_and_weights_bits():
    _, out, _ = run_cli("estimate", "mlx-community/Llama-3.1-8B-Instruct-4bit", "--tokens", "1k", "--json")
    w = json.loads(out)["weights"]
    # "-4bit" states no group: the bound takes the smallest MLX allows (issue 14), and says so
    assert (w["bits"], w["group_size"], w["exact"]) == (4, 32, False) and "not stated" in w["reason"]
    _, out, _ = run_cli("estimate", "mlx-community/Llama-3.1-8B-Instruct-4bit-g64", "--tokens", "1k", "--json")
    assert json.loads(out)["weights"]["group_size"] == 64
    _, out, _ = run_cli("estimate", LLAMA, "--tokens", "1k", "--weights-bits", "8", "--json")
    assert json.loads(out)["weights"]["bits"] == 8
    code, _, err = run_cli("estimate", LLAMA, "--tokens", "1k", "--weights-bits", "7")
    assert code == 2 and "invalid choice" in err


def test_local_sharded_dir_gives_exact_weights(local_model):
    d, expected = local_model
    code, out, err = run_cli("estimate", str(d), "--tokens", "4k", "--json")
    assert code == 0, err
    w = json.loads(out)["weights"]
    assert (w["bytes"], w["exact"], w["files"]) == (expected, True, 2)
    code, table, _ = run_cli("estimate", str(d), "--tokens", "4k")
    table = " ".join(table.split())
    assert "weights (exact" in table and f"{expected:,}" in table and "2 files" in table


def test_hostile_local_weights_are_an_input_error(local_model):
    d, _ = local_model
    (d / "model-00002-of-00002.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    code, out, err = run_cli("estimate", str(d), "--tokens", "4k")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "model-00002-of-00002.safetensors" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_budget_verdict_and_exit_code():
    code, out, _ = run_cli("estimate", LLAMA, "--tokens", "32k", "--budget", "64GiB")
    assert code == 0 and "verdict: FITS" in out and "headroom" in out
    code, out, _ = run_cli("estimate", LLAMA, "--tokens", "32k", "--budget", "16GiB")
    assert code == 1 and "verdict: DOES NOT FIT" in out and "over the usable budget by" in out
    code, out, _ = run_cli("estimate", LLAMA, "--tokens", "32k", "--budget", "16GiB", "--json")
    est = json.loads(out)
    assert code == 1 and est["fits"] is False and est["headroom_bytes"] < 0
    assert est["usable_bytes"] == est["budget_bytes"] - est["reserve_bytes"]
    assert est["headroom_bytes"] == est["usable_bytes"] - est["total_bytes"]


def test_unknown_weights_are_never_a_fit():
    from omlx_profiles import load_registry

    reg = load_registry()
    unknown = next((p for p in reg.profiles.values() if p.ids and (p.weights is None or not p.weights.params)), None)
    if unknown is None:
        pytest.skip("every profile has weights.params")
    code, out, _ = run_cli("estimate", unknown.ids[0], "--tokens", "1k", "--budget", "1TB", "--json")
    est = json.loads(out)
    assert code == 1 and est["weights_bytes"] is None and est["fits"] is None and est["total_bytes"] is None
    assert "weights.params" in est["weights"]["reason"]
    code, out, _ = run_cli("estimate", unknown.ids[0], "--tokens", "1k", "--budget", "1TB")
    assert code == 1 and "verdict: UNKNOWN" in out and "total without the weights" in out
    # the user may state them: never a guess of ours
    code, out, _ = run_cli("estimate", unknown.ids[0], "--tokens", "1k", "--budget", "1TB", "--weights", "5GB", "--json")
    est = json.loads(out)
    assert code == 0 and est["weights_bytes"] == 5 * 10**9 and est["fits"] is True
    assert "command line" in est["weights"]["reason"]


@pytest.mark.parametrize("argv, words", [
    (["estimate", LLAMA, "--tokens", "lots"], "token count"),
    (["estimate", LLAMA, "--tokens", "-5"], "tokens"),
    (["estimate", "no/such-model", "--tokens", "1k"], "unknown model"),
    (["estimate", LLAMA, "--tokens", "1k", "--reserve", "12 parsecs"], "size"),
    (["estimate", LLAMA], "--tokens"),
])
def test_usage_errors_exit_2(argv, words):
    code, out, err = run_cli(*argv)
    assert code == 2 and words in err and "Traceback" not in err


@pytest.mark.parametrize("cmd", ["estimate", "fit", "chart"])
def test_help_has_examples_and_exit_codes(cmd):
    code, out, _ = run_cli(cmd, "--help")
    assert code == 0
    assert "examples:" in out and f"omlx-profiles {cmd} " in out and "exit codes:" in out


# ---------------------------------------------------------------------------- speed, imports
ESTIMATE = ["-m", "omlx_profiles.cli.main", "estimate", LLAMA, "--tokens", "32768", "--json"]


def test_estimate_imports_nothing_heavy():
    code = ("import sys; from omlx_profiles.cli.main import main; "
            f"rc = main({ESTIMATE[2:]!r}); "
            "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & {'mlx', 'mlx_lm', 'transformers', 'matplotlib'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "HEAVY []"


def _child_cpu_seconds(argv: list[str]) -> tuple[float, float, int]:
    """(CPU seconds the child used, user + system; its wall seconds; its exit code). CPU time is what the
    command costs whatever else the machine runs: a loaded CI host stretches the wall time, not this."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, *argv], capture_output=True, cwd=REPO)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, r.returncode


def test_the_cpu_gauge_sees_work():
    """The gauge below is not blind: a child that spins for 0.3 s of CPU reads at least 0.2 s."""
    cpu, _, code = _child_cpu_seconds(["-c", "import time\nt = time.process_time()\n"
                                             "while time.process_time() - t < 0.3: pass"])
    assert code == 0 and cpu >= 0.2, cpu


def test_estimate_cost_is_bounded():
    """The README quotes the wall median (printed here). The pass/fail bound is on CPU seconds (start-up,
    imports, the estimate), not wall time: on a CI host shared by other jobs the wall time measures the
    machine, and a 3 s wall limit failed under load with the command unchanged. Median of 5 runs < 3 s of
    CPU: only a pathological slowdown (an mlx import, a replay of every chunk) fails."""
    _child_cpu_seconds(ESTIMATE)  # warm the file caches
    cpus, walls = [], []
    for _ in range(5):
        cpu, wall, code = _child_cpu_seconds(ESTIMATE)
        assert code == 0
        cpus.append(cpu)
        walls.append(wall)
    cpu, wall = statistics.median(cpus), statistics.median(walls)
    print(f"estimate median over 5 runs: wall {wall:.3f} s, CPU {cpu:.3f} s")
    assert cpu < 3.0, f"estimate used {cpu:.2f} s of CPU (median of 5 runs; wall {wall:.2f} s)"
