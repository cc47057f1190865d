import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
pytestmark = pytest.mark.skipif(not (SHARED / "data" / "cmdare").is_dir(), reason="needs ../shared")


def test_fit_script_reproduces_shipped_params():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import fit_speed_model
    finally:
        sys.path.remove(str(REPO / "scripts"))
    shipped = json.loads((REPO / "planner" / "data" / "speed_model.json").read_text())
    fresh = json.loads(fit_speed_model.fitted_model_json(SHARED))
    assert fresh["tensor_rule"] == shipped["tensor_rule"]
    for k, v in shipped["params"].items():
        assert fresh["params"][k] == pytest.approx(v, rel=1e-4, abs=1e-15), k
    assert fit_speed_model.networks_csv(SHARED) == (REPO / "planner" / "data" / "networks.csv").read_text()
