"""The typed options of a monitoring session (no argparse, no collectors: cheap to import)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cmdare.collectors.samples import JobFacts


@dataclass
class SessionOptions:
    """What a session monitors and how: built from the command line and the config (tui/source_flags.py),
    read by tui/sources.py to build the sources."""

    targets: list[str] = field(default_factory=list)
    demo: bool = False
    refresh: float = 2.0
    timeout: float = 2.0
    read_only: bool = False
    silent_after: int = 3
    raise_after: int = 3  # refreshes a condition must hold before a flag is raised
    clear_after: int = 3  # refreshes a condition must be false before a flag clears
    budget_usd: float | None = None  # the job's budget (Job pane: cost accrued vs budget)
    deadline_hours: float | None = None
    link_capacity_gbps: dict[frozenset[str], float] | None = None  # WAN Gbit/s per DC pair (config [links])
    # live collectors (issue 3); tui/sources.py turns these into sources
    job: str | None = None  # job name for sources that carry none (TF_CONFIG, TensorBoard, JSONL)
    prometheus: str | None = None
    selector: str = ""
    prometheus_token_file: str | None = None  # the token itself is never held in options
    tensorboard: list[str] = field(default_factory=list)
    jsonl: list[str] = field(default_factory=list)
    mlflow: list[str] = field(default_factory=list)  # MLflow tracking server URLs
    mlruns: list[str] = field(default_factory=list)  # MLflow file stores
    mlflow_experiment: list[str] = field(default_factory=list)  # experiments shown (all when empty)
    tf_config: str | None = None  # TF_CONFIG JSON text or a file path
    metrics_port: str = "9400"  # fixed port, or "+N" = training port + N
    tf_config_from_env: bool = False  # tf_config came from $TF_CONFIG (no other source was given)
    tf_config_env_error: str = ""  # why $TF_CONFIG was not used
    record: str | None = None
    replay: str | None = None
    replay_speed: float = 1.0
    caps: dict[str, int] = field(default_factory=dict)  # config [caps] (cmdare.collectors.caps.Caps fields)
    job_facts: list[JobFacts] = field(
        default_factory=list
    )  # config [[jobs]]: facts the exporter may not publish
