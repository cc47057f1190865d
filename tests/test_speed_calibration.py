import math

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.calibration import Calibration
from cmdare.planner.speed.speed_model import SpeedModel

MODEL = SpeedModel.load()
NET = ModelSpec(name="job", model_flops=3e9, params=4e6)


def _truth() -> SpeedModel:
    return MODEL.with_scales(1.3, 0.7)  # the job is 30% slower per worker, its PS 30% weaker


def test_calibration_recovers_job_scales_and_anchors_other_shapes():
    truth = _truth()
    cal = Calibration(MODEL, NET, {"P100": 4}, ps=1)
    pred = truth.predict(NET, {"P100": 4})
    own = 1.0 / pred.worker_steps_per_sec["P100"] - pred.terms["ps"]  # worker time without PS service
    for _ in range(5):
        cal.add_worker_step_time("P100", own)
    cal.add_cluster_rate(pred.steps_per_sec)
    cal.fit()
    assert cal.samples == 6
    assert cal.residual < 0.01
    assert math.isclose(cal.compute_scale_, 1.3, rel_tol=0.02)
    assert math.isclose(cal.ps_scale_, 0.7, rel_tol=0.02)
    other = cal.calibrated_model().predict(NET, {"P100": 8}, ps=2).steps_per_sec
    assert math.isclose(other, truth.predict(NET, {"P100": 8}, ps=2).steps_per_sec, rel_tol=0.02)


def test_ps_bytes_imply_cluster_rate_and_no_samples_is_identity():
    cal = Calibration(MODEL, NET, {"K80": 2})
    assert cal.samples == 0 and cal.residual == 0.0
    assert (
        cal.fit().calibrated_model().predict(NET, {"K80": 2}).steps_per_sec
        == MODEL.predict(NET, {"K80": 2}).steps_per_sec
    )
    cal.add_ps_bytes(10.0 * 8 * NET.params)
    assert cal.cluster_rates == [10.0]
