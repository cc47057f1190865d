"""The contract every kind of source declares, once, in a light module beside it (``spec.py`` in the
source's room, ``collectors/<room>/spec.py``, exposing ``SPEC``): its options (flag, ``[sources]`` key, type, help), how its
sources are built from their values, what it checks before a session starts, and the status-line
notes it adds. The command line, the config file's validation, the session's options and the docs'
table are all derived from these declarations (``tui/source_flags.py``, ``tui/config.py``,
``scripts/source_table.py``), so adding a source is its module, its spec and their tests.

A spec module imports nothing heavy: it is read at every start to build the flags; the source itself
is imported by ``build`` only when asked for. What a source can do beyond polling is declared by the
protocols of :mod:`cmdare.collectors.capabilities`."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, cast
from urllib.parse import urlparse

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source

T = TypeVar("T")

# How a value is written in the config file: a TOML string, a number, or true/false (a switch flag)
Kind = Literal["text", "number", "bool"]


class OptionError(ValueError):
    """A value an option cannot take; ``str()`` is one line (the caller names the flag or the file's line)."""


# The declarations below are plain classes with slots, not dataclasses: they are defined at every start
# (the flags are built from them) and defining a dataclass costs ~1 ms on this project's machine (measured,
# loaded), about 4 ms for the four. Each is immutable once built and takes keywords only.


class _Frozen:
    __slots__ = ()

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")


class Option(_Frozen, Generic[T]):
    """One option of a source: the flag that sets it, the ``[sources]`` key (its ``name``) and its type.

    ``check`` (pure: the value's syntax) runs on a flag's value and on the config's value when the file
    is read; ``probe`` (the file system: a file readable, a directory there) runs on a flag's value when
    it is parsed, and on the config's value when a session is about to start from it. Each raises
    :class:`OptionError` and returns the value to keep."""

    __slots__ = ("name", "flag", "help", "default", "noun", "kind", "repeatable", "source", "check", "probe",
                 "metavar", "env")  # fmt: skip
    name: str
    flag: str
    help: str
    default: T
    noun: str  # what one value is, for the docs and errors: "http(s) URL", "directory path"
    kind: Kind
    repeatable: bool  # a list: the flag repeats, the config takes a TOML array
    source: bool  # a value asks for a source (else the option only tunes one)
    check: Callable[[str], Any] | None
    probe: Callable[[str], Any] | None
    metavar: str | None
    env: str | None  # an environment variable that gives the default

    def __init__(
        self,
        *,
        name: str,
        flag: str,
        help: str,
        default: T,
        noun: str,
        kind: Kind = "text",
        repeatable: bool = False,
        source: bool = False,
        check: Callable[[str], Any] | None = None,
        probe: Callable[[str], Any] | None = None,
        metavar: str | None = None,
        env: str | None = None,
    ) -> None:
        self._set(name=name, flag=flag, help=help, default=default, noun=noun, kind=kind, repeatable=repeatable,
                  source=source, check=check, probe=probe, metavar=metavar, env=env)  # fmt: skip

    def __repr__(self) -> str:
        return f"Option(name={self.name!r}, flag={self.flag!r})"

    def parse(self, text: str) -> Any:
        """A value from the command line: ``check``, then ``probe`` (each may raise OptionError)."""
        value: Any = text
        for step in (self.check, self.probe):
            if step is not None:
                value = step(value)
        return value


class BuildContext(NamedTuple):
    """What every source is built with besides its own options."""

    job: str | None = None  # the job name for sources whose data carry none
    timeout: float = 2.0  # seconds per request
    refresh: float = 2.0  # seconds between polls (a source may pace its own work by it)


class SourceValues:
    """The values of the sources' options, by option (typed: ``values[URL]`` is a ``str | None``);
    an option not set has its default."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values = dict(values or {})

    @classmethod
    def of(cls, **values: Any) -> SourceValues:
        """Values by option name; a name no spec declares raises TypeError (like a keyword argument)."""
        known = {o.name for o in all_options()}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"no source declares the option(s) {', '.join(unknown)}")
        return cls(values)

    def __getitem__(self, option: Option[T]) -> T:
        value = self._values.get(option.name, option.default)
        return cast(T, list(value) if option.repeatable else value)

    def given(self, option: Option[Any]) -> bool:
        """Whether ``option`` holds a value (a non-empty one)."""
        return bool(self._values.get(option.name))

    def replace(self, **values: Any) -> SourceValues:
        """A copy with ``values`` set (by option name)."""
        return SourceValues({**self._values, **values})

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SourceValues) and self._values == other._values

    def __repr__(self) -> str:
        return f"SourceValues({self._values!r})"


class SourceNote(NamedTuple):
    """A status-line remark on what a source was given, shown under ``source`` (e.g. ``tf_config``)."""

    source: str
    text: str
    ok: bool = True  # False: something given cannot be used as it stands (shown as a problem)


def _no_check(values: SourceValues) -> None:
    return None


def _no_notes(values: SourceValues) -> list[SourceNote]:
    return []


class SourceSpec(_Frozen):
    """One kind of source: its options, its factory and its start-up checks."""

    __slots__ = ("name", "summary", "order", "options", "build", "check", "notes", "when_alone")
    name: str  # e.g. "prometheus"
    summary: str  # what it reads, one line (the docs' table)
    order: int  # where its flags go in ``--help`` and its row in the docs (lower first)
    options: tuple[Option[Any], ...]
    build: Callable[[SourceValues, BuildContext], list[Source]]
    check: Callable[[SourceValues], None]  # before a session starts: raises OptionError
    notes: Callable[[SourceValues], list[SourceNote]]  # status-line remarks on what was given
    # when no source at all was given: what the spec takes from the environment (values, notes)
    when_alone: Callable[[SourceValues, Mapping[str, str]], tuple[SourceValues, list[SourceNote]]] | None

    def __init__(
        self,
        *,
        name: str,
        summary: str,
        order: int,
        options: tuple[Option[Any], ...],
        build: Callable[[SourceValues, BuildContext], list[Source]],
        check: Callable[[SourceValues], None] = _no_check,
        notes: Callable[[SourceValues], list[SourceNote]] = _no_notes,
        when_alone: Callable[[SourceValues, Mapping[str, str]], tuple[SourceValues, list[SourceNote]]]
        | None = None,
    ) -> None:
        self._set(name=name, summary=summary, order=order, options=options, build=build, check=check,
                  notes=notes, when_alone=when_alone)  # fmt: skip

    def __repr__(self) -> str:
        return f"SourceSpec(name={self.name!r}, options={[o.name for o in self.options]!r})"

    def asked_for(self, values: SourceValues) -> bool:
        """Whether ``values`` ask for this kind of source."""
        return any(values.given(o) for o in self.options if o.source)


SPEC_MODULE = "spec.py"  # a room's declaration: collectors/<room>/spec.py


@cache
def all_specs() -> tuple[SourceSpec, ...]:
    """Every ``SPEC`` declared by a ``spec.py`` module under ``collectors/``, in their ``order``."""
    root = Path(__file__).resolve().parent
    specs: list[SourceSpec] = []
    for path in sorted(root.rglob(SPEC_MODULE)):
        parts = path.relative_to(root).with_suffix("").parts
        module = importlib.import_module(".".join((__package__ or "cmdare.collectors", *parts)))
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, SourceSpec):
            specs.append(spec)
    specs.sort(key=lambda s: (s.order, s.name))
    names = [o.name for s in specs for o in s.options]
    if len(names) != len(set(names)):
        raise RuntimeError(
            f"two sources declare one option: {sorted(n for n in names if names.count(n) > 1)}"
        )
    return tuple(specs)


def all_options() -> tuple[Option[Any], ...]:
    """Every source option, in the specs' order."""
    return tuple(o for s in all_specs() for o in s.options)


def asked_for(values: SourceValues, specs: Iterable[SourceSpec] | None = None) -> list[SourceSpec]:
    """The specs whose sources ``values`` ask for."""
    return [s for s in (all_specs() if specs is None else specs) if s.asked_for(values)]


# --- value checkers shared by several sources (each raises OptionError with a one-line message)


def http_url(value: str) -> str:
    """An http(s) URL with a host and, if given, a port in 1-65535."""
    try:
        p = urlparse(value)
        p.hostname  # noqa: B018 - an unclosed IPv6 bracket is found here, not by urlparse
    except ValueError:
        raise OptionError(f"not an http(s) URL (bad host): {value!r}") from None
    if p.scheme not in ("http", "https") or not p.hostname:
        raise OptionError(f"not an http(s) URL: {value!r}")
    try:
        port = p.port
    except ValueError:
        raise OptionError(f"bad port in URL (want 1-65535): {value!r}") from None
    if port == 0:
        raise OptionError(f"bad port in URL (want 1-65535): {value!r}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise OptionError(f"URL holds spaces or control characters: {value!r}")
    return value


def positive_number(value: str) -> float:
    """A finite number > 0."""
    try:
        x = float(value)
    except ValueError:
        raise OptionError(f"not a number: {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise OptionError(f"must be a finite number > 0: {value!r}")
    return x


def readable_file(value: str) -> str:
    """A path to a readable regular file: a FIFO or a device is refused at once."""
    from cmdare.collectors.redaction import redact_cut
    from cmdare.collectors.textfile import file_problem
    from cmdare.collectors.untrusted import clean_text

    problem = file_problem(value)
    if problem is not None:
        raise OptionError(f"{clean_text(redact_cut(value, 200))}: {problem}")
    return value


def directory(value: str) -> str:
    """A path to an existing directory."""
    from cmdare.collectors.redaction import redact_cut

    try:
        ok = Path(value).is_dir()
    except (OSError, ValueError):  # e.g. a name too long for the file system, an embedded NUL
        ok = False
    if not ok:
        raise OptionError(f"not a directory: {redact_cut(value, 200)!r}")
    return value
