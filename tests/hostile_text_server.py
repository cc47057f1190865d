"""A hostile monitoring target on 127.0.0.1: exposition pages and Prometheus API answers whose label
values, names and error bodies carry terminal escape sequences, Rich/Textual markup, bidi overrides,
zero-width characters, very long strings and invalid UTF-8 (:data:`HOSTILE`).

    with HostileServer() as srv: srv.target_url(0), srv.prometheus_url(), srv.prometheus_error_url()
    python tests/hostile_text_server.py            # own process: prints the port, serves until killed

Routes: ``/t/<i>/metrics`` is a well-formed exposition page for task ``i`` (its task, GPU, region and
zone, the job and the model named by hostile strings; HTTP 500 once ``i`` is in ``down``), ``/t/garbage/metrics`` is not exposition and
quotes hostile text (so a parser's error message would carry it), ``/prom/api/v1/query`` answers every
query (GET or POST) with hostile ``cmdare_task_info`` / ``cmdare_job_info`` rows, and
``/prom-error/api/v1/query`` with a Prometheus error whose type and message are hostile.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
TITLE_MARK = "PWNED-TITLE"  # what the OSC 0/2 payloads would set the terminal title to
HOSTILE: dict[str, str] = {
    "osc52": "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # write the clipboard
    "osc8": "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\",  # a hyperlink
    "title": f"\x1b]0;{TITLE_MARK}\x07\x1b]2;{TITLE_MARK}\x1b\\",  # window/icon title
    "csi": "\x1b[2J\x1b[H\x1b[31mred\x1b[?1049l",  # clear, home, colour, leave the alternate screen
    "dcs": "\x1bP+q544e\x1b\\",  # a terminal query
    "bel": "ding\x07\x07",
    "c1": "c1\u009b31m\u009d0;x\u0007",  # 8-bit CSI / OSC
    "close": "oops[/]",
    "link": "[link=file:///etc/passwd]x[/link]",
    "bold": "[bold]b[/bold]",
    "action": "[@click=app.quit]q[/]",  # Textual markup runs actions
    "bidi": "abc\u202edcba\u2066x\u2069",
    "zw": "a\u200bb\u200dc\ufeffd",
    "nl": "two\nlines\r\tx",
    "long": "L" * 20000,
}
NAMES = list(HOSTILE)
INVALID_UTF8 = b"bad\xff\xfe\xc3(utf8"
# byte strings that must never reach a terminal (raw, or as they are encoded in UTF-8)
INJECTED = (b"\x1b]52", b"\x1b]8;", b"\x1b]0;", b"\x1b]2;", b"\x1bP+q", b"\x1b[2J", b"\x1b[31mred",
            b"\xc2\x9b", b"\xc2\x9d", b"ding\x07", "\u202e".encode(), "\u200b".encode())  # fmt: skip


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def task_name(i: int) -> str:
    key = NAMES[i % len(NAMES)]
    return f"t{i}-{HOSTILE[key]}"


def page(i: int, step: int) -> bytes:
    """A valid exposition page for task ``i``: every text label hostile, the values sane."""
    h = HOSTILE
    labels = {
        "job": f"job{h['title']}{h['close']}", "task": task_name(i), "role": "worker",
        "gpu": h["link"], "region": h["osc52"], "zone": h["bidi"], "provisioning": "spot",
    }  # fmt: skip
    info = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    facts = f'job="{_label(labels["job"])}",model="{_label(h["osc8"] + h["action"])}",batch_size="128"'
    text = (
        f"cmdare_task_info{{{info}}} 1\n"
        f"cmdare_job_info{{{facts}}} 1\n"
        f"cmdare_worker_steps_total {step}\ncmdare_global_step {step}\n"
        f'cmdare_stage_bytes_sent_total{{peer="{_label(h["dcs"] + h["zw"])}"}} {step}\n'
        f'cmdare_ps_bytes_total{{direction="{_label(h["c1"])}"}} 1\n'
    )
    return text.encode() + b'cmdare_examples_total{x="' + INVALID_UTF8 + b'"} 1\n'


def garbage() -> bytes:
    return f"{HOSTILE['title']} {HOSTILE['osc52']} not exposition {{{{{HOSTILE['close']}\n".encode()


def prom_rows() -> dict:
    h = HOSTILE
    rows = [
        {"metric": {"__name__": "cmdare_task_info", "job": "prom" + h["title"], "instance": f"10.0.0.{i}:9400",
                    "task": task_name(i), "gpu": h["link"], "region": h["osc52"], "role": "worker"},
         "value": [1.7e9, "1"]}
        for i in range(3)
    ]  # fmt: skip
    return {"status": "success", "data": {"resultType": "vector", "result": rows}}


def prom_error() -> dict:
    h = HOSTILE
    return {
        "status": "error",
        "errorType": "bad_data" + h["csi"],
        "error": h["title"] + h["link"] + h["osc52"],
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    steps: dict[int, int] = {}

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        parts = path.strip("/").split("/")
        if path.startswith("/prom/"):
            self._send(200, json.dumps(prom_rows()).encode(), "application/json")
        elif path.startswith("/prom-error/"):
            self._send(400, json.dumps(prom_error()).encode(), "application/json")
        elif parts[:1] == ["t"] and len(parts) == 3 and parts[1] == "garbage":
            self._send(200, garbage(), "text/plain; version=0.0.4")
        elif (
            parts[:1] == ["t"]
            and len(parts) == 3
            and parts[1].isdigit()
            and int(parts[1]) in self.server.down
        ):
            self._send(500, HOSTILE["title"].encode(), "text/plain")
        elif parts[:1] == ["t"] and len(parts) == 3 and parts[1].isdigit():
            i = int(parts[1])
            self.steps[i] = self.steps.get(i, 0) + 10
            self._send(200, page(i, self.steps[i]), "text/plain; version=0.0.4")
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()


class _Server(ThreadingHTTPServer):
    down: set[int]  # targets answering HTTP 500 (with a hostile body)

    def handle_error(self, request: object, client_address: object) -> None:  # clients that hang up
        pass


class HostileServer:
    def __init__(self, port: int = 0) -> None:
        self.httpd = _Server((HOST, port), _Handler)
        self.httpd.down = self.down = set()
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="hostile", daemon=True)

    def target_url(self, i: int) -> str:
        return f"http://{HOST}:{self.port}/t/{i}/metrics"

    def garbage_url(self) -> str:
        return f"http://{HOST}:{self.port}/t/garbage/metrics"

    def prometheus_url(self) -> str:
        return f"http://{HOST}:{self.port}/prom"

    def prometheus_error_url(self) -> str:
        return f"http://{HOST}:{self.port}/prom-error"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    srv = HostileServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(srv.port, flush=True)
    srv.httpd.serve_forever()
