"""The speed model: per-step time of a training job on a cluster shape, fitted on CM-DARE measurements.

Public names load lazily (PEP 562): importing the package costs nothing until a name is used,
and no module of the package imports another through this file."""

from __future__ import annotations

from cmdare.planner.lazy_exports import lazy_getattr

_HOME: dict[str, str] = {
    "SpeedModel": "speed_model",
    "SpeedPrediction": "speed_model",
    "Observation": "speed_model",
    "fit_params": "speed_fit",
    "fit_tensor_rule": "speed_fit",
    "predict_observations": "speed_fit",
    "SpeedBand": "speed_band",
    "GainBand": "speed_band",
    "ps_gain_band": "speed_band",
    "shape_bands": "speed_band",
    "mix_bands": "speed_band",
    "interval_table": "speed_cv",
    "Calibration": "calibration",
    "GpuSpec": "gpu_catalog",
    "UnknownGpuError": "gpu_catalog",
    "get_gpu": "gpu_catalog",
    "gpu_names": "gpu_catalog",
    "all_gpus": "gpu_catalog",
    "KnownNetwork": "network_catalog",
    "canonical_network_name": "network_catalog",
    "family_of": "network_catalog",
    "lookup_network": "network_catalog",
    "known_networks": "network_catalog",
    "busiest_share": "ps_tier",
    "share_of": "ps_tier",
    "capacity_seconds": "ps_tier",
    "cycle_seconds": "ps_tier",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_getattr(__name__, _HOME)
