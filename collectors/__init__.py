"""cmdare.collectors: turn the outside world (metrics endpoints, logs, clouds) into plain values.

Nothing here knows about models or screens; nothing here imports Textual or Rich.
"""
