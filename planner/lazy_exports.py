"""Lazy public names for the planner's sub-packages (PEP 562): a package lists where each public name lives,
and the home module is imported on first use only, so importing a package costs nothing and makes no cycle."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``homes`` maps each public name to its home module."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
