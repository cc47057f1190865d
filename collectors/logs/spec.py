"""The JSON-lines source's contract: a metric log tailed line by line — plain JSON lines, MMEngine,
detectron2, a Lightning ``metrics.csv`` or an HF ``trainer_state.json``
(:class:`~cmdare.collectors.logs.source.JsonlSource`, one per file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmdare.collectors.source_contract import BuildContext, Option, SourceSpec, SourceValues, readable_file

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source

FILES: Option[list[str]] = Option(
    name="jsonl", flag="--jsonl", default=[], noun="file path", repeatable=True, source=True,
    probe=readable_file, metavar="FILE",
    help="tail a JSON-lines metric log (MMEngine, detectron2, plain), a Lightning metrics.csv or an HF "
    "trainer_state.json (repeatable)",
)  # fmt: skip


def build(values: SourceValues, ctx: BuildContext) -> list[Source]:
    """One source per file."""
    if not values[FILES]:
        return []
    from cmdare.collectors.logs.source import JsonlSource

    return [JsonlSource(f, job=ctx.job) for f in values[FILES]]


SPEC = SourceSpec(
    name="jsonl",
    summary="JSON-lines metric logs; MMEngine, detectron2, Lightning metrics.csv, HF trainer_state.json",
    order=40,
    options=(FILES,),
    build=build,
)
