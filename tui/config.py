"""The user's config file: typed TOML (``tomllib`` + dataclasses) that rejects unknown keys.

Found at ``--config FILE`` or ``<user config dir>/cmdare-tui/config.toml`` (platformdirs; on Linux
``$XDG_CONFIG_HOME/cmdare-tui/config.toml``). A missing default file means defaults; a missing
``--config`` file is an error. Every error is one line naming the file, the line and the key.
Schema and examples: ``docs/config.md``, ``examples/config.toml``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.collectors.toml_lines import line_of

APP_NAME = "cmdare-tui"
TOP_KEYS = ("refresh", "timeout", "read_only", "theme", "animations", "prices")
TABLES = ("sources", "thresholds", "budget", "keys", "jobs", "links", "caps")
# [caps]: the fields of cmdare.collectors.caps.Caps (a test checks the two agree)
CAP_KEYS = (
    "tasks",
    "series_per_task",
    "tags_per_task",
    "label_length",
    "rows_per_answer",
    "cycle_polls",
    "history_mb",
)
THRESHOLD_KEYS = ("silent_after", "raise_after", "clear_after")
BUDGET_KEYS = ("usd", "deadline_hours")
JOB_KEYS = (
    "name",
    "model",
    "model_flops",
    "params",
    "batch_size",
    "target_steps",
    "budget_usd",
    "deadline_hours",
)
PRICE_MODES = ("offline", "live", "study-era")  # the --prices vocabulary (cmdare.tui.cli_args)
# SessionOptions fields set from elsewhere in the file, so not allowed under [sources]
NOT_SOURCE_FIELDS = {
    "refresh",
    "timeout",
    "read_only",
    *THRESHOLD_KEYS,
    "budget_usd",
    "deadline_hours",
    "link_capacity_gbps",  # [links]
    "job_facts",  # [[jobs]]
    "caps",  # [caps]
}


class ConfigError(ValueError):
    """A config file is malformed; ``str()`` is one line: ``FILE:LINE: [table] key: problem``."""


@dataclass(frozen=True)
class JobConfig:
    """One ``[[jobs]]`` entry: the job's facts (name, what it trains, target steps; units in
    :class:`~cmdare.collectors.samples.ModelSpec`), for when its exporter does not publish
    ``cmdare_job_info``, and its goals: budget in USD, deadline in hours."""

    facts: JobFacts
    budget_usd: float | None = None
    deadline_hours: float | None = None

    @property
    def name(self) -> str:
        """The job's name, as its sources report it (the ``job`` label, or ``--job``)."""
        return self.facts.job


@dataclass(frozen=True, kw_only=True)
class Config:
    """Settings; ``None`` means "not set here" (the command line or the built-in default decides)."""

    path: Path | None = None
    refresh: float | None = None  # seconds between polls
    timeout: float | None = None  # seconds per target
    read_only: bool = False
    theme: str | None = None  # a Textual theme name, e.g. "textual-dark", "nord"
    animations: bool = False  # Textual animations (off by default: cheap redraws over SSH)
    prices: str | None = None  # the --prices vocabulary; None: each command's own default
    sources: dict[str, Any] = field(default_factory=dict)  # SessionOptions source fields
    thresholds: dict[str, int] = field(
        default_factory=dict
    )  # silent_after, raise_after, clear_after (refreshes)
    budget_usd: float | None = None
    deadline_hours: float | None = None
    keys: dict[str, str] = field(default_factory=dict)  # binding id -> key(s), e.g. "app.quit" = "ctrl+q"
    jobs: tuple[JobConfig, ...] = ()
    links: dict[frozenset[str], float] = field(default_factory=dict)  # DC pair -> WAN Gbit/s
    caps: dict[str, int] = field(default_factory=dict)  # [caps]: what one source may grow to


def default_path() -> Path:
    """Where the config file is looked for when ``--config`` is not given (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_NAME)) / "config.toml"


def source_keys() -> tuple[str, ...]:
    """Keys accepted under ``[sources]``: the session's source fields (targets, demo, …)."""
    from cmdare.tui.options import SessionOptions

    return tuple(f.name for f in fields(SessionOptions) if f.name not in NOT_SOURCE_FIELDS)


def load_config(path: str | Path | None = None) -> Config:
    """Read ``path`` (must exist) or the default file (may be absent)."""
    explicit = path is not None
    p = Path(path) if path is not None else default_path()
    from cmdare.collectors.textfile import TextFileError, TextFileMissing, read_small_text

    try:
        text = read_small_text(p, limit=1024 * 1024)
    except TextFileMissing:
        if explicit:
            raise ConfigError(f"{p}: no such config file") from None
        return Config()
    except TextFileError as exc:
        raise ConfigError(f"cannot read config: {exc}") from None
    return parse_config(text, p)


def parse_config(text: str, path: str | Path = "<config>") -> Config:
    """A :class:`Config` from TOML text; unknown keys or bad values raise ConfigError naming file, line and key."""
    import tomllib  # only when there is a file to parse (most starts have none)

    loc = _Locator(str(path), text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
    loc.unknown(data, (*TOP_KEYS, *TABLES), "")
    top = {k: data[k] for k in TOP_KEYS if k in data}
    for k in ("refresh", "timeout"):
        if k in top:
            top[k] = loc.positive(top[k], "", k)
    for k in ("read_only", "animations"):
        if k in top:
            loc.expect(isinstance(top[k], bool), "", k, "must be true or false")
    if "theme" in top:
        loc.expect(isinstance(top["theme"], str), "", "theme", "must be a string")
    if "prices" in top:
        loc.expect(top["prices"] in PRICE_MODES, "", "prices", f"must be one of {', '.join(PRICE_MODES)}")
    budget = loc.table(data, "budget", BUDGET_KEYS)
    return Config(
        path=Path(path),
        **top,
        sources=_sources(loc, loc.table(data, "sources", source_keys())),
        thresholds={
            k: loc.count(v, "thresholds", k) for k, v in loc.table(data, "thresholds", THRESHOLD_KEYS).items()
        },
        budget_usd=loc.positive(budget["usd"], "budget", "usd") if "usd" in budget else None,
        deadline_hours=loc.positive(budget["deadline_hours"], "budget", "deadline_hours")
        if "deadline_hours" in budget
        else None,
        keys=_keys(loc, data.get("keys", {})),
        jobs=tuple(_job(loc, j) for j in _job_list(loc, data.get("jobs", []))),
        links=_links(loc, data.get("links", {})),
        caps={k: loc.count(v, "caps", k) for k, v in loc.table(data, "caps", CAP_KEYS).items()},
    )


# [sources] keys by kind (each checked like its flag); anything else there is a string.
_URL_KEYS = ("prometheus",)
_LIST_KEYS = {
    "targets": "http(s) URLs",
    "tensorboard": "directory paths",
    "jsonl": "file paths",
    "mlflow": "http(s) URLs",
    "mlruns": "directory paths",
    "mlflow_experiment": "experiment names",
}
_BOOL_KEYS = ("demo",)
_NUMBER_KEYS = ("replay_speed",)


def _sources(loc: _Locator, src: dict[str, Any]) -> dict[str, Any]:
    """``[sources]``: each value of the type its flag takes (a list where the flag repeats)."""
    for key, value in src.items():
        if key in _LIST_KEYS:
            ok = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
            loc.expect(ok, "sources", key, f"must be a list of {_LIST_KEYS[key]}")
        elif key in _BOOL_KEYS:
            loc.expect(isinstance(value, bool), "sources", key, "must be true or false")
        elif key in _NUMBER_KEYS:
            loc.positive(value, "sources", key)
        else:
            loc.expect(isinstance(value, str), "sources", key, "must be a string")
        urls = value if key in ("targets", "mlflow") else [value] if key in _URL_KEYS else []
        for u in urls:
            loc.expect(
                _is_url(u),
                "sources",
                key,
                f"must be a list of http(s) URLs (bad: {u!r})"
                if key in ("targets", "mlflow")
                else f"must be an http(s) URL (bad: {u!r})",
            )
    return dict(src)


def _is_url(value: Any) -> bool:
    import argparse

    from cmdare.tui.cli_args import url

    try:
        url(value)
    except (argparse.ArgumentTypeError, TypeError):
        return False
    return True


def _links(loc: _Locator, links: Any) -> dict[frozenset[str], float]:
    """``[links]``: ``"dc-a/dc-b" = Gbit/s`` — the WAN capacity between two datacenters (regions),
    so ``wan-bound`` can name the link that paces a pipeline."""
    loc.expect(isinstance(links, dict), "", "links", 'must be a table of "dc-a/dc-b" = Gbit/s')
    out: dict[frozenset[str], float] = {}
    for pair, gbps in links.items():
        dcs = [p.strip() for p in pair.split("/")]
        loc.expect(
            len(dcs) == 2 and all(dcs) and dcs[0] != dcs[1], "links", pair, 'must name two DCs: "dc-a/dc-b"'
        )
        out[frozenset(dcs)] = loc.positive(gbps, "links", pair)
    return out


def _keys(loc: _Locator, keys: Any) -> dict[str, str]:
    loc.expect(isinstance(keys, dict), "", "keys", "must be a table of binding id = key")
    for k, v in keys.items():
        loc.expect(isinstance(v, str) and v.strip() != "", "keys", k, 'must be a key name such as "ctrl+q"')
    return dict(keys)


def _job_list(loc: _Locator, jobs: Any) -> list[dict[str, Any]]:
    loc.expect(isinstance(jobs, list) and all(isinstance(j, dict) for j in jobs), "", "jobs",
               "must be an array of tables ([[jobs]])")  # fmt: skip
    return jobs


def _job(loc: _Locator, j: dict[str, Any]) -> JobConfig:
    loc.expect("link_capacity_gbps" not in j, "jobs", "link_capacity_gbps",
               'WAN capacity belongs in the [links] table: "dc-a/dc-b" = Gbit/s')  # fmt: skip
    loc.unknown(j, JOB_KEYS, "jobs")
    loc.expect(isinstance(j.get("name"), str) and j["name"] != "", "jobs", "name", "is required (a string)")
    loc.expect(isinstance(j.get("model", ""), str), "jobs", "model", "must be a string")
    num = {
        k: loc.positive(j[k], "jobs", k)
        for k in ("model_flops", "params", "budget_usd", "deadline_hours")
        if k in j
    }
    count = {k: loc.count(j[k], "jobs", k) for k in ("batch_size", "target_steps") if k in j}
    spec = ModelSpec(
        name=j.get("model", ""),
        model_flops=num.get("model_flops", 0.0),
        params=num.get("params", 0.0),
        batch_size=count.get("batch_size", 0),
    )
    facts = JobFacts(j["name"], spec, count.get("target_steps", 0))
    return JobConfig(facts, num.get("budget_usd"), num.get("deadline_hours"))


class _Locator:
    """Finds the line of ``key`` inside ``[table]`` for error messages."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, table: str, key: str) -> int | None:
        return line_of(self.lines, table, key)

    def fail(self, table: str, key: str, problem: str) -> ConfigError:
        line = self.line_of(table, key)
        where = f"{self.path}:{line}" if line else self.path
        name = f"[{table}] {key}" if table else key
        return ConfigError(f"{where}: {name}: {problem}")

    def expect(self, ok: bool, table: str, key: str, problem: str) -> None:
        if not ok:
            raise self.fail(table, key, problem)

    def unknown(self, data: dict[str, Any], allowed: tuple[str, ...], table: str) -> None:
        for k in data:
            if k not in allowed:
                raise self.fail(table, k, f"unknown key (allowed: {', '.join(allowed)})")

    def table(self, data: dict[str, Any], name: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        t = data.get(name, {})
        self.expect(isinstance(t, dict), "", name, "must be a table")
        self.unknown(t, allowed, name)
        return t

    def positive(self, v: Any, table: str, key: str) -> float:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        self.expect(ok, table, key, "must be a number > 0")
        return float(v)

    def count(self, v: Any, table: str, key: str) -> int:
        self.expect(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1, table, key, "must be an integer >= 1"
        )
        return int(v)
