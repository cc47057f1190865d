"""The embedded demo: simulated training clusters that really serve Prometheus ``/metrics`` on loopback
through the collectors' exporter. Depends on the collectors only; nothing in the collectors imports it,
and the TUI imports it only when a demo runs."""
