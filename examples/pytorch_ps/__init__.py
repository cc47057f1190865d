"""A real PyTorch parameter-server training job instrumented with cmdare's exporter (see train.py)."""
