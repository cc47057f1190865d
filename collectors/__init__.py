"""cmdare.collectors: turn the outside world (metrics endpoints, logs, clouds) into plain values.

Nothing here knows about models or screens; nothing here imports Textual or Rich.

httpx's command-line client (``httpx._main``) is kept from loading: ``import httpx`` imports it whenever
``click`` is installed (MLflow, Flask, Ray… bring it), and with it click, Pygments' lexers and Rich's
console, progress, syntax and table modules, none of which the collectors use. Measured on this project's
machine (2 cores, loaded): ``import httpx`` 327-393 ms with it, 184-228 ms without; in the app, after
Textual has loaded Rich, it still cost 48-108 ms of start-up (``python -X importtime``). httpx itself
catches the ImportError and installs a ``main`` that only says its CLI is unavailable.
"""

import sys

if "httpx" not in sys.modules:  # imported already (by the caller): nothing left to save
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: a module that fails to import
