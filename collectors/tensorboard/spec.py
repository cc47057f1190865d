"""The TensorBoard source's contract: event files under a log directory, tailed
(:class:`~cmdare.collectors.tensorboard.source.TensorBoardSource`, one per directory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmdare.collectors.source_contract import BuildContext, Option, SourceSpec, SourceValues, directory

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source

LOGDIRS: Option[list[str]] = Option(
    name="tensorboard", flag="--tensorboard", default=[], noun="directory path", repeatable=True, source=True,
    probe=directory, metavar="DIR", help="tail TensorBoard event files in DIR (repeatable)",
)  # fmt: skip


def build(values: SourceValues, ctx: BuildContext) -> list[Source]:
    """One source per log directory."""
    if not values[LOGDIRS]:
        return []
    from cmdare.collectors.tensorboard.source import TensorBoardSource

    return [TensorBoardSource(d, job=ctx.job) for d in values[LOGDIRS]]


SPEC = SourceSpec(
    name="tensorboard",
    summary="TensorBoard event files (torch SummaryWriter, tensorboardX, TF/Keras) under a log directory",
    order=30,
    options=(LOGDIRS,),
    build=build,
)
