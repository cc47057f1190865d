"""Record and replay: ``--record FILE`` appends every poll cycle to SQLite (:mod:`.recorder`),
``--replay FILE`` plays it back as a source (:mod:`.replay`), the file read without writing a byte and
without losing its ``-wal`` (:mod:`.sqlite_image`).
"""
