"""The shipped speed model reproduces from the vendored data (data/cmdare), within a stated tolerance."""

import json
from pathlib import Path

import pytest

from scripts import fit_speed_model

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def test_fit_script_reproduces_shipped_params():
    shipped = json.loads((REPO / "planner" / "data" / "speed_model.json").read_text())
    fresh = json.loads(fit_speed_model.fitted_model_json(REPO))
    assert fit_speed_model.close(fresh["tensor_rule"], shipped["tensor_rule"])
    for k, v in shipped["params"].items():
        assert fresh["params"][k] == pytest.approx(v, rel=fit_speed_model.REPRO_RTOL, abs=1e-15), k
    shipped_csv = (REPO / "planner" / "data" / "networks.csv").read_text()
    assert fit_speed_model.close(
        fit_speed_model.csv_cells(fit_speed_model.networks_csv(REPO)), fit_speed_model.csv_cells(shipped_csv)
    )


def test_check_mode_passes_and_tolerates_last_bit_differences_only():
    assert fit_speed_model.main(["--check"]) == 0
    assert fit_speed_model.close({"a": [1.0, "2.5"]}, {"a": [1.0 + 1e-12, "2.5000000001"]})
    assert not fit_speed_model.close({"a": 1.0}, {"a": 1.001})
    assert not fit_speed_model.close([["x", "1"]], [["y", "1"]])
    assert not fit_speed_model.close({"a": 1}, {"a": 1, "b": 2})


def test_one_ps_fit_holds_the_unidentifiable_wire_share():
    """With one PS, ps_wire cancels out of every prediction: the fit holds it at its stated prior
    instead of letting the optimiser's numerical noise pick a bound (which moved the held-out 2-PS band
    between scipy builds)."""
    from cmdare.planner.speed.speed_fit import PS_WIRE_UNIDENTIFIED, fit_params

    obs = fit_speed_model.load_observations(REPO)
    one_ps = [o for o in obs if o.ps == 1]
    assert len(one_ps) < len(obs)  # the vendored data has 2-PS runs
    assert fit_params(one_ps)["ps_wire"] == PS_WIRE_UNIDENTIFIED
