"""The table of measured compute traits (``profiles/calibration/measured_traits.yaml``), derived from the
calibration points: per backend, the traits (``peak/basis.py``) of every family whose warm points are all
at or above the measured peak, one within [1.00, 1.15]. ``peak.basis`` reads the table at estimate time;
this module regenerates it (``python -m omlx_profiles.estimate.basis_survey --write``) and is what the
leave-one-family-out test replays. It lives here, not in ``peak/``, because it reads the calibration files
(``estimate.calibration``), which need config extraction.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..peak.basis import BAND, _tables, compute_traits, traits_file
from ..peak.kernels import KernelRoutes
from ..peak.ops.recurrent import unverified_peak

# Points measured in a state the estimate does not claim to cover: the first prefill call of a process on
# CUDA (cold: MLX commits 2-7x as many smaller graphs and holds up to 38 in flight; a 64-token warm-up
# removes it, measured; the CUDA estimate is for a warmed-up process). They do not disqualify a family from
# ``measured``; the leave-one-family-out test still requires its bound to cover them.
COLD_FIRST_CALL = {
    ("cuda", "deepseek-v2-lite", 4096, 8192),
    ("cuda", "gpt-oss-20b", 2048, 8192),
}


@dataclass(frozen=True)
class SurveyRow:
    backend: str
    file: str
    model: str
    family: str
    tokens: int
    chunk: int
    measured: int
    op_model: int | None  # the op model's peak (no basis applied); None: reported unknown
    traits: frozenset[str]
    cold: bool
    point: object = None
    profile: object = None

    @property
    def ratio(self) -> float | None:
        return None if self.op_model is None or not self.measured else self.op_model / self.measured


def survey() -> list[SurveyRow]:
    """Every calibration point with a measured peak over the weights (published totals that include
    weights are skipped: their exact weight bytes are not known), its family, traits and op-model peak."""
    from ..errors import UnsupportedError
    from .calibration import calibration_files, load_calibration, profile_for_point
    from ..peak.prefill import Request, _prefill_peak

    rows = []
    profiles: dict = {}
    for path in calibration_files():
        f = load_calibration(path)
        kr = KernelRoutes.for_backend(f.backend, f.mlx or None)
        for pt in f.points:
            if not pt.peaks:
                continue
            key = (pt.model, pt.config_path, pt.profile_id, repr(pt.config) if pt.config else None, pt.dtype)
            if key not in profiles:
                profiles[key] = profile_for_point(pt)
            prof = profiles[key]
            try:
                if unverified_peak(prof, kr):
                    est = None
                else:
                    est = _prefill_peak(prof, Request(pt.tokens, cached=pt.cached, chunk=pt.chunk), kr, pt.dtype,
                                        False, False).peak_bytes
            except UnsupportedError:
                est = None
            rows.append(SurveyRow(f.backend, Path(path).name, pt.model, prof.mlx_model_type, pt.tokens, pt.chunk,
                                  pt.peak, est, compute_traits(prof, kr),
                                  (f.backend, pt.model, pt.chunk, pt.tokens) in COLD_FIRST_CALL, pt, prof))
    return rows


def clean_families(rows: list[SurveyRow], exclude_family: str | None = None) -> dict[tuple[str, str], list[SurveyRow]]:
    """(backend, family) -> its warm points, for every *clean* family: all its warm points at or above the
    measured peak, one of them within ``BAND``; ``exclude_family`` left out."""
    fams: dict[tuple[str, str], list[SurveyRow]] = {}
    for r in rows:
        if r.family != exclude_family:
            fams.setdefault((r.backend, r.family), []).append(r)
    out = {}
    for key, rs in fams.items():
        warm = [r for r in rs if not r.cold]
        if not warm or any(r.ratio is None or r.ratio < BAND[0] for r in warm):
            continue
        if any(BAND[0] <= r.ratio <= BAND[1] for r in warm):
            out[key] = warm
    return out


def over_families(rows: list[SurveyRow]) -> dict[tuple[str, str], list[SurveyRow]]:
    """(backend, family) -> its warm points, for every family measured only *over* the band: all its warm points
    above ``BAND`` (never under, none within it). Their traits not covered by a clean family get
    ``peak_basis: bound`` with the measurement as the reason (``peak.basis.over_traits``)."""
    fams: dict[tuple[str, str], list[SurveyRow]] = {}
    for r in rows:
        fams.setdefault((r.backend, r.family), []).append(r)
    out = {}
    for key, rs in fams.items():
        warm = [r for r in rs if not r.cold]
        if warm and all(r.ratio is not None and r.ratio > BAND[1] for r in warm):
            out[key] = warm
    return out


def over_from(rows: list[SurveyRow]) -> dict[str, dict[str, dict]]:
    """Per backend: trait -> {families, points, ratio: [min, max]} over the over-the-band families, for the
    traits no clean family covers."""
    clean = measured_from(rows)
    out: dict[str, dict[str, dict]] = {}
    for (backend, fam), warm in sorted(over_families(rows).items()):
        for t in sorted(set().union(*(r.traits for r in warm)) - clean.get(backend, frozenset())):
            d = out.setdefault(backend, {}).setdefault(t, {"families": [], "points": 0, "ratio": [None, None]})
            d["families"].append(fam)
            d["points"] += len(warm)
            lo, hi = min(r.ratio for r in warm), max(r.ratio for r in warm)
            d["ratio"] = [round(lo if d["ratio"][0] is None else min(lo, d["ratio"][0]), 3),
                          round(hi if d["ratio"][1] is None else max(hi, d["ratio"][1]), 3)]
    return out


def over_band_from(rows: list[SurveyRow]) -> dict[str, dict[str, dict]]:
    """Per backend: family -> the calibration shapes (model, step, tokens, cached) whose estimate is above ``BAND`` at
    the shape's HIGHEST measured peak (every repeat and condition - idle, a loaded GPU, a stalled GPU - of every file:
    the estimate bounds a warmed-up process under any GPU timing, so the highest is the truth it is compared with),
    for every family that has such a shape and no shape under, with the **regime** each one stands for: the family's
    profiles with the same attention head count at the same prefill step, from just above the largest token count
    measured in band there below the shape (from 1 if none) up to just below the smallest measured in band above it
    (open if none). ``peak.basis`` reports a request inside a regime with its band unknown and the shape as the
    reason; the family's other requests stay plainly ``measured``."""
    shapes: dict[tuple, list[SurveyRow]] = {}
    for r in rows:
        if not r.cold and r.op_model is not None and r.measured:
            heads = int(getattr(r.profile, "num_heads", 0) or 0)
            shapes.setdefault((r.backend, r.family, r.model, heads, r.chunk, r.tokens, r.point.cached), []).append(r)
    fams: dict[tuple[str, str], list[tuple]] = {}
    for (backend, fam, model, heads, chunk, tokens, cached), rs in shapes.items():
        top = max(rs, key=lambda r: r.measured)
        fams.setdefault((backend, fam), []).append((model, chunk, tokens, cached, top.ratio, heads))
    out: dict[str, dict[str, dict]] = {}
    for (backend, fam), lst in sorted(fams.items()):
        above = sorted(x for x in lst if x[4] > BAND[1])
        if not above or any(x[4] < BAND[0] for x in lst):
            continue
        regimes = []
        for m, c, t, k, r, h in above:
            inband = [x[2] for x in lst if x[1] == c and x[5] == h and x[3] == k and x[4] <= BAND[1]]
            lo = max((x for x in inband if x < t), default=0) + 1
            hi = min((x for x in inband if x > t), default=None)
            regimes.append({"heads": h, "chunk": c, "cached": k, "tokens_from": lo,
                            "tokens_to": None if hi is None else hi - 1,
                            "shape": f"{m} step {c} {t} tokens{f' ({k} cached)' if k else ''}", "ratio": round(r, 3)})
        out.setdefault(backend, {})[fam] = {
            "shapes": len(lst), "ratio": [round(min(x[4] for x in above), 3), round(max(x[4] for x in above), 3)],
            "above": [f"{m} step {c} {t} tokens{f' ({k} cached)' if k else ''}: {r:.3f}" for m, c, t, k, r, _ in above],
            "regimes": regimes}
    return out


def measured_from(rows: list[SurveyRow], exclude_family: str | None = None) -> dict[str, frozenset[str]]:
    """Per backend: the union of the traits of every clean family (``clean_families``)."""
    out: dict[str, set[str]] = {}
    for (backend, _fam), warm in clean_families(rows, exclude_family).items():
        out.setdefault(backend, set()).update(*(r.traits for r in warm))
    return {b: frozenset(t) for b, t in out.items()}


def render_table(rows: list[SurveyRow]) -> str:
    import yaml

    table = measured_from(rows)
    fam_of: dict[tuple[str, str], set[str]] = {}
    for (backend, fam), warm in clean_families(rows).items():
        for t in set().union(*(r.traits for r in warm)):
            fam_of.setdefault((backend, t), set()).add(fam)
    over = over_from(rows)
    band = over_band_from(rows)
    doc = {"backends": {b: {"traits": {t: sorted(fam_of.get((b, t), ())) for t in sorted(table.get(b, ()))},
                            **({"over_traits": over[b]} if over.get(b) else {}),
                            **({"over_band": band[b]} if band.get(b) else {})}
                        for b in sorted(set(table) | set(over))},
           "cold_first_call_points": sorted(f"{b} {m} step {c} {t} tokens" for b, m, c, t in COLD_FIRST_CALL)}
    head = ("# Generated by `python -m omlx_profiles.estimate.basis_survey --write` from profiles/calibration/*/*.yaml: per backend,\n"
            "# the compute traits (peak/basis.py) covered by a calibration family whose warm points are all at or above\n"
            "# the measured peak, one within [1.00, 1.15]; each trait lists those families. A profile whose traits are\n"
            "# all listed for the backend gets peak_basis: measured. over_traits: traits measured only over the band\n"
            "# (every warm point above 1.15, none under) by the families named: peak_basis bound, with that as the reason.\n"
            "# over_band: per family, the calibration shapes above 1.15 at their highest measured peak (idle, loaded or\n"
            "# stalled, any repeat), none under, each with its regime (same heads and prefill step, the token range up to the\n"
            "# neighbouring in-band shapes): a measured estimate inside a regime reports its band as unknown, with the shape\n"
            "# as the reason (basis 'band': 'unknown', 'over_band').\n"
            "# tests/test_peak_basis.py checks this file is current.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=120)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m omlx_profiles.estimate.basis_survey",
                                 description="Regenerate or check profiles/calibration/measured_traits.yaml")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--points", action="store_true", help="print every calibration point's op-model ratio")
    a = ap.parse_args(argv)
    rows = survey()
    if a.points:
        for r in rows:
            rt = "unknown" if r.ratio is None else f"{r.ratio:.3f}"
            print(f"{r.backend:5} {r.family:14} {r.model:32} {r.chunk:5} {r.tokens:6} {rt}{' cold' if r.cold else ''}")
    text = render_table(rows)
    if a.write:
        traits_file().write_text(text)
        _tables.cache_clear()
        return 0
    cur = traits_file().read_text() if traits_file().is_file() else ""
    if cur != text:
        print(f"{traits_file()} is out of date: run python -m omlx_profiles.estimate.basis_survey --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
