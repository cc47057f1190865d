"""A real PyTorch DDP job (gloo, CPU) instrumented with cmdare's exporter."""
