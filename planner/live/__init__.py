"""The planner for a running job, from what it measures: the current shape read off its nodes and the
speed-only outlook of nearby shapes (:mod:`.outlook`), the calibrated, throttled ranking of alternatives
(:mod:`.plan`), and for a synchronous all-reduce job its measured compute / all-reduce split
(:mod:`.sync_job`) and its ranking (:mod:`.sync_plan`). Pure computation."""
