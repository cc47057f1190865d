"""cmdare.planner: pure computation over observed samples and shipped facts (no I/O, no Textual)."""
