"""Metric logs a training script appends to, as a source (:mod:`.source`: JSON lines, Lightning's
``CSVLogger`` file), and the one table of recognised keys every log-record reader shares (:mod:`.keys`).
"""
