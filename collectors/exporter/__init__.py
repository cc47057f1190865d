"""The exporter training scripts import to expose the metric contract::

    from cmdare.collectors.exporter import TrainingExporter

Its home is :mod:`.training`; a synchronous step's exposed all-reduce is timed by :mod:`.allreduce_timer`.
"""

from cmdare.collectors.exporter.training import TrainingExporter

__all__ = ["TrainingExporter"]
