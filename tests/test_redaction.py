"""One redaction for logs, recordings, statuses and errors."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from cmdare.collectors.redaction import RedactFilter, redact

SECRET = "s3cr3t-Sentinel-42"


def test_every_credential_shape_is_removed():
    cases = [
        f"http://admin:{SECRET}@prom:9090/api/v1/query",
        f"GET http://n1:9400/metrics?token={SECRET}&x=1",
        f"Authorization: Bearer {SECRET}",
        f"Basic {SECRET}",
        f"https://x/?key={SECRET}",
        "oauth ya29.a0AfH6SMBxyz-123 expired",
    ]
    for text in cases:
        out = redact(text)
        assert SECRET not in out and "ya29.a0" not in out, out
    assert redact("http://n1:9400/metrics?token=abc") == "http://n1:9400/metrics?token=***"
    assert redact(f"server said: {SECRET}", secrets=[SECRET]) == "server said: ***"


@given(st.text(max_size=40), st.text(max_size=40))
def test_an_explicit_secret_never_survives(before: str, after: str):
    assert SECRET not in redact(before + SECRET + after, secrets=[SECRET])


def test_log_filter_redacts_formatted_records():
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "HTTP Request: GET %s", (f"http://h/?token={SECRET}",), None
    )
    RedactFilter().filter(record)
    assert SECRET not in record.getMessage()
