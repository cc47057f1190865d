"""Geo-distributed training: pipeline stages across data centres joined by WAN links.

Public names load lazily (PEP 562): importing the package costs nothing until a name is used,
and no module of the package imports another through this file."""

from __future__ import annotations

from cmdare.planner.lazy_exports import lazy_getattr

_HOME: dict[str, str] = {
    "GeoJob": "geo_model",
    "GeoResult": "geo_model",
    "DataCenter": "geo_model",
    "LanguageModel": "geo_model",
    "Layout": "geo_model",
    "evaluate": "geo_model",
    "with_layout": "geo_model",
    "search": "geo_placement",
    "candidate_layouts": "geo_placement",
    "gains": "geo_placement",
    "GeoWorkload": "geo_workload",
    "GeoWorkloadError": "geo_workload",
    "load_geo_workload": "geo_workload",
    "parse_geo_workload": "geo_workload",
    "LiveBoundary": "geo_live",
    "wan_bound_from_live": "geo_live",
    "WanLink": "wan",
    "PublicLink": "wan",
    "effective_gbps": "wan",
    "public_links": "wan",
    "SCHEDULES": "pipeline_schedule",
    "SHARINGS": "pipeline_schedule",
    "PipelineTiming": "pipeline_schedule",
    "pipeline_time": "pipeline_schedule",
    "PrefillSpec": "bubbles",
    "Bubble": "bubbles",
    "stage_bubbles": "bubbles",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_getattr(__name__, _HOME)
