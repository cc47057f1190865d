"""TensorBoard event files as a source (:mod:`.source`): the runs under a log directory (:mod:`.runs`),
the TFRecord container (:mod:`.tfrecord`) and the few event protos a tail needs, decoded by hand
(:mod:`.proto`; no TensorFlow dependency).
"""
