"""The planner: speed/ (speed model), risk_cost/ (revocation, time and cost), geo/ (geo-distributed
pipelines), rules/ (live alerts), live/ (a running job's outlook and ranking), predict/ (``cmdare-tui
predict``), and at top level what ties them into one answer a refresh (analysis, view + view_json — the
typed answer and its one JSON rendering). The jobs as observed, which it reads, are the collectors'
(``collectors/observed.py``)."""
