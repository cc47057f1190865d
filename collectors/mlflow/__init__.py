"""MLflow as a source: a tracking server's REST API (:mod:`.server`) and a local file store, ``mlruns/``
(:mod:`.store`), both turning runs into tasks by the rules every log source shares (:mod:`.run`).
"""
