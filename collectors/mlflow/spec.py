"""The MLflow sources' contract: tracking servers (``--mlflow URL``) and file stores (``--mlruns DIR``),
each run one task, optionally only some experiments' runs (``--mlflow-experiment NAME``)
(:class:`~cmdare.collectors.mlflow.server.MlflowServerSource`,
:class:`~cmdare.collectors.mlflow.store.MlrunsSource`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cmdare.collectors.source_contract import (
    BuildContext,
    Option,
    SourceSpec,
    SourceValues,
    directory,
    http_url,
)

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source

SERVERS: Option[list[str]] = Option(
    name="mlflow", flag="--mlflow", default=[], noun="http(s) URL", repeatable=True, source=True,
    check=http_url, metavar="URL",
    help="an MLflow tracking server to read runs from (repeatable; credentials: user:password in the URL "
    "or MLFLOW_TRACKING_USERNAME/PASSWORD/TOKEN)",
)  # fmt: skip
STORES: Option[list[str]] = Option(
    name="mlruns", flag="--mlruns", default=[], noun="directory path", repeatable=True, source=True,
    probe=directory, metavar="DIR",
    help="read an MLflow file store (an mlruns folder, or the folder holding it) (repeatable)",
)  # fmt: skip
EXPERIMENTS: Option[list[str]] = Option(
    name="mlflow_experiment", flag="--mlflow-experiment", default=[], noun="experiment name", repeatable=True,
    metavar="NAME", help="show only this MLflow experiment's runs (repeatable; default: every active experiment)",
)  # fmt: skip


def build(values: SourceValues, ctx: BuildContext) -> list[Source]:
    """One source per tracking server and per file store, each showing the experiments asked for."""
    sources: list[Source] = []
    experiments = values[EXPERIMENTS]
    if values[SERVERS]:
        from cmdare.collectors.mlflow.server import MlflowServerSource

        sources += [
            MlflowServerSource(u, timeout=ctx.timeout, experiments=experiments, env=os.environ)
            for u in values[SERVERS]
        ]
    if values[STORES]:
        from cmdare.collectors.mlflow.store import MlrunsSource

        sources += [MlrunsSource(d, experiments=experiments) for d in values[STORES]]
    return sources


SPEC = SourceSpec(
    name="mlflow",
    summary="MLflow tracking servers (REST API) and file stores (mlruns), one task per run",
    order=50,
    options=(SERVERS, STORES, EXPERIMENTS),
    build=build,
)
