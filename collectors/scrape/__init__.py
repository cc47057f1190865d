"""Direct scrape of Prometheus exposition endpoints as a source (:mod:`.source`): the job's exporter,
node_exporter, DCGM; the exposition text read into one task's values (:mod:`.exposition`); targets found
from ``TF_CONFIG`` (:mod:`.tf_config`).
"""
