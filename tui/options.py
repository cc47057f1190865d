"""The typed options of a monitoring session (no argparse, no collectors: cheap to import).

The options of the sources themselves are declared by each source's spec (``collectors/<room>/spec.py``)
and held in :attr:`SessionOptions.sources`; the session's own source options (the demo, the job name,
recording and replay) are declared here, so the command line and the config file treat both alike."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from cmdare.collectors.source_contract import Option, SourceNote, SourceValues, all_options, positive_number

if TYPE_CHECKING:
    from cmdare.collectors.samples import JobFacts

DEMO: Option[bool] = Option(
    name="demo", flag="--demo", default=False, noun="bool", kind="bool", source=True,
    help="monitor the embedded demo cluster (the default when no source is given)",
)  # fmt: skip
JOB: Option[str | None] = Option(
    name="job", flag="--job", default=None, noun="job name", metavar="NAME",
    help="job name for sources that carry none",
)  # fmt: skip
RECORD: Option[str | None] = Option(
    name="record", flag="--record", default=None, noun="file path (SQLite)", metavar="FILE",
    help="append every poll to an SQLite recording",
)  # fmt: skip
REPLAY: Option[str | None] = Option(
    name="replay", flag="--replay", default=None, noun="file path (a recording)", metavar="FILE",
    source=True, help="play a recording back",
)  # fmt: skip
REPLAY_SPEED: Option[float] = Option(
    name="replay_speed", flag="--replay-speed", default=1.0, noun="number > 0", kind="number",
    check=positive_number, metavar="X", help="replay speed factor (default 1 = as recorded)",
)  # fmt: skip
LEADING = (DEMO,)  # the session's options listed before the sources' …
TRAILING = (JOB, RECORD, REPLAY, REPLAY_SPEED)  # … and after them


def source_options() -> tuple[Option[Any], ...]:
    """Every option of the ``sources`` group in ``--help`` order: the demo, each spec's, then the job name,
    recording and replay. Each is a ``[sources]`` key of the config too (its name)."""
    return (*LEADING, *all_options(), *TRAILING)


@dataclass
class SessionOptions:
    """What a session monitors and how: built from the command line and the config (tui/source_flags.py),
    read by tui/sources.py to build the sources."""

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
    job: str | None = None  # job name for sources that carry none (TF_CONFIG, TensorBoard, JSONL)
    record: str | None = None
    replay: str | None = None
    replay_speed: float = 1.0
    caps: dict[str, int] = field(default_factory=dict)  # config [caps] (cmdare.collectors.caps.Caps fields)
    job_facts: list[JobFacts] = field(
        default_factory=list
    )  # config [[jobs]]: facts the exporter may not publish
    sources: SourceValues = field(
        default_factory=SourceValues
    )  # the specs' options (collectors/<room>/spec.py)
    notes: list[SourceNote] = field(
        default_factory=list
    )  # status-line remarks on how the sources were chosen

    @classmethod
    def of(cls, **values: Any) -> SessionOptions:
        """Options from keywords: the session's fields, and any source option by name
        (``SessionOptions.of(prometheus=url, refresh=1)``); an unknown name raises TypeError."""
        own = {f.name for f in fields(cls)}
        return cls(
            **{k: v for k, v in values.items() if k in own},
            sources=SourceValues.of(**{k: v for k, v in values.items() if k not in own}),
        )
