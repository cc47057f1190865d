"""A Prometheus-API server (Prometheus, VictoriaMetrics) as a source: the server scrapes the fleet, the
dashboard asks it a handful of instant queries per refresh (:mod:`.source`), whatever the number of tasks.

The source's parts: the per-task PromQL (:mod:`.aggregate`), a large fleet's columns and focus
(:mod:`.fleet`), answers read as untrusted (:mod:`.answers`), credentials (:mod:`.auth`), a new task's
recent samples (:mod:`.backfill`) and node_exporter / DCGM detail by host (:mod:`.hosts`).
"""
