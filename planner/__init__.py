"""The planner: speed/ (speed model), risk_cost/ (revocation, time and cost), geo/ (geo-distributed
pipelines), rules/ (live alerts), and the live glue at top level (analysis, view + view_json — the typed
answer and its one JSON rendering —, live_plan, job_plan, predict_csv). The jobs as observed, which it
reads, are the collectors' (``collectors/observed.py``)."""

