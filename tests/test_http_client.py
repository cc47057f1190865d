"""The collectors' HTTP client: plain HTTP never builds a TLS context; HTTPS always verifies
(a real TLS server on 127.0.0.1 with a self-signed certificate made by openssl)."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import http_client

pytestmark = pytest.mark.slow


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = b"cmdare_global_step 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(tls: ssl.SSLContext | None) -> tuple[http.server.HTTPServer, str]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Hello)
    if tls is not None:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    scheme = "https" if tls else "http"
    return srv, f"{scheme}://127.0.0.1:{srv.server_address[1]}/metrics"


async def test_plain_http_builds_no_tls_context():
    http_client.tls_context.cache_clear()
    srv, url = _serve(None)
    try:
        async with http_client.new_client(httpx.Limits(max_connections=4)) as client:
            assert (await client.get(url)).text.startswith("cmdare_global_step")
        assert http_client.tls_context.cache_info().currsize == 0
    finally:
        srv.shutdown()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
async def test_https_verifies_certificates(tmp_path: Path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    srv, url = _serve(tls)
    try:
        async with http_client.new_client(httpx.Limits(max_connections=4)) as client:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(url)  # a self-signed certificate is refused
        assert http_client.tls_context().verify_mode == ssl.CERT_REQUIRED
    finally:
        srv.shutdown()
