"""In-memory time-series store: per-task ring buffers of fixed capacity (memory is bounded by design)
on the standard library's ``array`` (float32 values, float64 times: 4 and 8 bytes a point, as numpy's
would be; numpy is imported only by the readers that hand out numpy arrays), with Prometheus-style
counter rates (resets handled here, once).

Compact per task, for a fleet of 100,000 (issue 34): a task's points are one float64 buffer (its newest
points at full precision, then, older than them, a time ring and a float32 grid of every key's values,
two to a slot: :class:`TaskSeries`), no point held twice; what its newest scrape time read one float64
array and a bitmask; its objects have no ``__dict__``, what a store's tasks share is one object
(:class:`TaskShared`), tasks with the same keys share one key → position map, the newest point's figures
are one dict made when first asked, and past :data:`FIGURES_KEPT_UNDER` tasks they are let go after a
cycle (~0.75 kB a task with 10 series and 3 points; 1.3 kB with a buffer a ring, ~6.6 kB before that);
its newest rows are kept only while a rate needs them, and its whole footprint counts against the history
budget (:class:`Store`: ~1.0 kB a task of 10 series after an hour of a fleet's sweeps, 1.8 kB with
8 rows kept and a floor of 16 points, 2.8 kB before, 4.0 kB at first)."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from struct import Struct
from typing import TYPE_CHECKING, Final, cast

from cmdare.collectors.caps import current as current_caps
from cmdare.collectors.hostdetail import DEV_PREFIX, devices_in
from cmdare.collectors.metrics import (
    GPU_KEYS,
    K_CHECKPOINT_SECONDS_COUNT,
    K_EXAMPLES_RATE,
    K_LEARNING_RATE,
    K_LOSS,
    K_STAGE_MICROBATCHES,
    is_counter_key,
    rate_bound,
)
from cmdare.collectors.samples import Coverage, JobFacts, RoleFigures, TaskInfo, TaskPoll

if TYPE_CHECKING:  # numpy (~0.1 s to import) loads with the first numpy reader, not with the store
    import numpy as np

UNINDEXED_ROLES = frozenset(("worker",))  # roles Store.roles leaves out (its readers ask for the PS)
TRAINING_KEYS = frozenset((K_LOSS, K_LEARNING_RATE, K_EXAMPLES_RATE))  # what jobs log (TensorBoard scalars)
LATEST_LOOKBACK = 8  # polls a gauge may skip before it shows as unknown
SPARSE_STRETCH = 6  # a rate may reach this many windows back for a sparsely read series
RECENT_POINTS = 16  # newest points kept at full precision for rates, at most (a 10 s window at 2 s holds 6)
# the rate window assumed before a reader asks for one (the views' RATE_WINDOW_S, collectors/observed.py):
# the newest rows reach SPARSE_STRETCH of it back (or the sparse window), see TaskSeries._append_row
RATE_WINDOW_ASSUMED_S = 10.0
_NAN = math.nan  # one shared object for every missing value in the recent points
DEFAULT_CAPACITY = 1800  # points per series: 1 h of history at the default 2 s refresh
INITIAL_POINTS = 4  # a ring's first size; it doubles as points come, up to its capacity (a large fleet's
# sweep brings a task a point every ~2 min: 16 at once cost 100,000 tasks ~50 MB more, 64 ~240 MB)
# past this many tasks a task's memoised figures (rates, latest values) are kept one poll cycle only: the
# views made from them are cached (observed.cached_view), and a fleet's task is read again minutes later
FIGURES_KEPT_UNDER = 2000
_SCHEMA_MAX = 1024  # distinct key orders whose key -> position maps are shared between tasks
# points per series the history budget may push a task down to, the newest rows among them (the ring
# holds the points older than the rows, TaskSeries): 12 min of a large fleet's 2-minute sweep. No reader
# of a swept task needs more: its rates and latest values read the newest rows only (kept apart from
# this floor, as their readers need them: 4 rows at a 5-minute sparse window), its sparkline shows what
# is held. At 100,000 tasks of 10 series the budget's own share (1,090 bytes a task of 104 MB) leaves 3
# ring points besides 4 rows (7 points, the floor not binding): +97 MB RSS after an hour of sweeps
# (benchmarks/store_history.py). 8 points (4 in the ring) measured +118 MB: the task's buffer, 496 bytes
# at 7 points, is 544 at 8, past the 512 bytes the interpreter's small-object allocator serves (16
# points, 8 rows, before: +170 MB)
MIN_POINTS = 6
# ... and for a task with a series read over the last hour (the loss curve, the checkpoint interval:
# collectors/observed.py): an hour of a large fleet's 2-minute sweep (fleet.SWEEP_S) and two points more
HOUR_MIN_POINTS = 32
HOUR_KEYS = frozenset((K_LOSS, K_CHECKPOINT_SECONDS_COUNT))
# a task's bytes besides its points (its objects, its key and host, its buffer's header, the store's
# books): measured with tracemalloc, 20,000 tasks of 10 series on hosts of their own at 3 points: 752
# bytes a task (the store's set of changed tasks aside), of which 264 are points (the newest rows; the
# ring holds none yet). Before one buffer a task: 1,304, of which 456 points (850 besides)
TASK_BYTES = 488
FLOAT32: Final = "f"  # array typecodes (numpy reads them as the same dtypes): a series' values
FLOAT64: Final = "d"  # a series' times


Points = tuple[list[float], list[float]]  # a window's times and values, oldest first, no NaN value


class SparseWindow:
    """How far back a sparsely read series' rate may reach (s): one a store, shared by its tasks, so a
    new window (a fleet's sweep period moves every refresh) is set once, not on 100,000 tasks. It also
    holds the widest rate window asked of the store's tasks (``widest``): what the newest rows must
    reach back over (:attr:`reach`)."""

    __slots__ = ("s", "widest", "reach")

    def __init__(self, s: float = 0.0) -> None:
        self.s = s
        self.widest = RATE_WINDOW_ASSUMED_S
        self.reach = max(SPARSE_STRETCH * self.widest, s)  # how far back a rate reads the newest rows

    def set(self, s: float) -> None:
        """A new sparse window."""
        self.s = s
        self.reach = max(SPARSE_STRETCH * self.widest, s)

    def asked(self, seconds: float) -> None:
        """A rate over ``seconds`` was asked: the newest rows keep reaching over it from now on."""
        if seconds > self.widest:
            self.widest = seconds
            self.reach = max(SPARSE_STRETCH * seconds, self.s)


def _schema(keys: tuple[str, ...]) -> dict[str, int]:
    """``{key: position}`` for a task's keys in this order: one dict shared by every task whose keys
    came in the same order (a fleet's tasks mostly do). Never mutated."""
    got = _SCHEMAS.get(keys)
    if got is None:
        got = {k: i for i, k in enumerate(keys)}
        if len(_SCHEMAS) < _SCHEMA_MAX:
            _SCHEMAS[keys] = got
    return got


_SCHEMAS: dict[tuple[str, ...], dict[str, int]] = {}
_NO_KEYS: dict[str, int] = {}  # the schema of a task with no series yet (shared, never mutated)


def _nans(typecode: str, n: int) -> array[float]:
    """An array of ``n`` NaNs, allocated at exactly its size."""
    return array(typecode, (_NAN,)) * n


class Ring:
    """A ring of float values aligned with its owner's time ring: it starts small and grows (by
    doubling) up to ``capacity`` points, or up to the ``limit`` its owner passes on each append (the
    store's history budget, see :class:`Store`); when full it reuses its oldest slot. ``typecode``:
    :data:`FLOAT32` (values) or :data:`FLOAT64` (times)."""

    __slots__ = ("_buf", "_n", "_head", "_cap")

    def __init__(self, capacity: int, typecode: str = FLOAT32, initial: int = INITIAL_POINTS) -> None:
        self._buf = _nans(typecode, max(1, min(capacity, initial)))
        self._cap = capacity
        self._n = 0
        self._head = 0  # next write position

    def append(self, value: float, limit: int | None = None) -> None:
        size = len(self._buf)
        if self._n == size:
            room = self._cap if limit is None else min(self._cap, limit)
            if size < room:
                self._grow(min(room, size * 2))
                size = len(self._buf)
        self._buf[self._head] = value
        self._head += 1
        if self._head == size:
            self._head = 0
        if self._n < size:
            self._n += 1

    def _grow(self, size: int) -> None:
        """Make room for ``size`` points: the ones held first, oldest first, then NaN."""
        held = self._slice(self._n)
        self._buf, self._head = held + _nans(self._buf.typecode, size - len(held)), self._n

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """The bytes its points take (allocated, not only filled)."""
        return len(self._buf) * self._buf.itemsize

    def _slice(self, n: int | None) -> array[float]:
        """A copy of the newest ``n`` values (all when None), oldest first."""
        n = self._n if n is None else min(n, self._n)
        if n <= 0:
            return self._buf[:0]
        start = self._head - n
        if start >= 0:
            return self._buf[start : self._head]
        return self._buf[start:] + self._buf[: self._head]  # wraps around the end

    def tail(self, n: int | None = None) -> list[float]:
        """The newest ``n`` values (all when None), oldest first, as Python floats (no numpy)."""
        return self._slice(n).tolist()

    def last(self, n: int | None = None) -> np.ndarray:
        """The newest ``n`` values (all when None), oldest first, as a numpy array of the ring's
        dtype (float32 or float64)."""
        import numpy as np

        return np.frombuffer(self._slice(n), dtype=self._buf.typecode)

    def count_from(self, x: float) -> int:
        """How many of the values are ``>= x``, for a ring whose values never decrease (times are
        appended in order): a bisection over its one or two sorted runs, nothing copied."""
        buf, head, n = self._buf, self._head, self._n
        if n == 0 or x != x:  # nothing held; NaN: no value is >= it
            return 0
        start = head - n
        if start >= 0:  # one run: buf[start:head]
            return head - bisect_left(buf, x, start, head)
        if head and buf[0] < x:  # two runs, the older buf[size + start:] and the newer buf[:head]
            return head - bisect_left(buf, x, 0, head)
        size = len(buf)
        return head + size - bisect_left(buf, x, size + start, size)


class TaskShared:
    """What a store's tasks share, one object a store (five fields on each of 100,000 tasks before: ~32
    bytes a task): the points a series may hold (``capacity``), the series a task keeps (``max_series``,
    ``[caps] series_per_task``), the history budget (``allow``: :meth:`Store.allowed`), how far back a
    sparsely read series' rate may reach (``sparse``) and the book of tasks whose memo holds figures
    (``figured``: :meth:`Store.release_figures`). A task made outside a store has one of its own."""

    __slots__ = ("capacity", "max_series", "allow", "sparse", "figured")

    def __init__(
        self,
        capacity: int,
        max_series: int = 1 << 30,
        allow: Callable[[int, int, int], int] | None = None,
        sparse: SparseWindow | None = None,
        figured: dict[int, TaskSeries] | None = None,
    ) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self.allow = allow
        self.sparse = SparseWindow() if sparse is None else sparse
        self.figured = figured


# A task's figures of its newest point, computed once each, in one dict made when the first is asked and
# dropped whole by the next point (TaskSeries._memo; five fields on every task before, None at rest):
# rates, ratios and latest values under their own keys, and under these (how many points lie within a
# window under ("span", seconds)):
_TIMES: Final = ("times",)  # the newest rows' times
_GPU: Final = ("gpu",)  # a host's GPU detail (TaskSeries.gpu_detail)
# what TaskSeries._walk found at the newest point: its window, the sparse window, how many points in each,
# and the newest rows' times it walked
Walked = tuple[float, float, tuple[int, int] | None, list[float]]
Figure = float | int | None | list[float] | tuple[list[str], dict[str, float]]
Memo = dict[tuple[str | float, ...], Figure]


_MASKS: dict[int, int] = {}  # the keys' bitmasks tasks read (``_read``): one int object each, shared
_MASKS_MAX = 4096  # (a fleet's tasks read the same keys: an int of 32 bytes on each of 100,000 tasks before)


def _row_struct(width: int) -> Struct:
    """A row of ``width`` float32 values, packed in native order (what numpy and ``array`` read)."""
    got = _ROWS.get(width)
    if got is None:
        got = _ROWS[width] = Struct(f"={width}f")
    return got


_ROWS: dict[int, Struct] = {}
_STRIDED_MAX = 64  # a column's values read in place up to this many points (a format of that many)


def _strided(n: int, width: int) -> Struct:
    """``n`` float32 values ``width`` apart (one key's column of ``n`` grid rows), native order."""
    got = _STRIDED.get((n, width))
    if got is None:
        skip = f"{4 * (width - 1)}x" if width > 1 else ""
        got = Struct("=" + ("f" + skip) * (n - 1) + "f")
        if len(_STRIDED) < 4096:
            _STRIDED[n, width] = got
    return got


_STRIDED: dict[tuple[int, int], Struct] = {}


def _as_float32(values: list[float]) -> list[float]:
    """``values`` rounded to float32 (what the grid would hold), as Python floats."""
    st = _row_struct(len(values))
    try:
        return list(st.unpack(st.pack(*values)))
    except OverflowError:  # past float32's range: infinite, as ``array`` stores it
        return array(FLOAT32, values).tolist()


class TimeRing:
    """A task's time ring (:attr:`TaskSeries.times`), read like a :class:`Ring` (``len``, :meth:`tail`,
    :meth:`last`, :meth:`count_from`): a view of the first part of the task's one buffer, made when asked."""

    __slots__ = ("_ts",)

    def __init__(self, ts: TaskSeries) -> None:
        self._ts = ts

    def __len__(self) -> int:
        return self._ts._held()

    @property
    def nbytes(self) -> int:
        """The bytes its points take (allocated, not only filled): the ring's and the newest rows'."""
        return 8 * (self._ts._slots + self._ts._rows_held())

    def tail(self, n: int | None = None) -> list[float]:
        """The newest ``n`` times (all when None), oldest first, as Python floats (no numpy)."""
        return self._ts._time_slice(n).tolist()

    def last(self, n: int | None = None) -> np.ndarray:
        """The newest ``n`` times (all when None), oldest first, as a float64 numpy array."""
        import numpy as np

        return np.frombuffer(self._ts._time_slice(n), dtype=np.float64)

    def count_from(self, x: float) -> int:
        """How many of the times are ``>= x`` (a bisection, nothing copied: :meth:`TaskSeries._count_from`)."""
        return self._ts._count_from(x)


class RecentRows:
    """A task's newest points at full precision (:attr:`TaskSeries._recent`), read as rows: a view of the
    last part of the task's one buffer, made when asked (see :class:`TaskSeries`)."""

    __slots__ = ("_ts",)

    def __init__(self, ts: TaskSeries) -> None:
        self._ts = ts

    def __len__(self) -> int:
        return self._ts._rows_held()

    @property
    def full(self) -> bool:
        """Whether a row was ever let go (else the rows hold every point appended)."""
        return self._ts._full

    def times(self) -> list[float]:
        """The points' times, oldest first."""
        return self._ts._rows_times()

    def column(self, i: int) -> list[float]:
        """The values of the ``i``-th key at the points, oldest first."""
        return self._ts._rows_column(i)


class Column:
    """One key's values of a task (:attr:`TaskSeries.values`): a view of its column in the task's value
    grid, read like a :class:`Ring` (``len``, :meth:`tail`, :meth:`last`)."""

    __slots__ = ("_ts", "_i")

    def __init__(self, ts: TaskSeries, i: int) -> None:
        self._ts, self._i = ts, i

    def __len__(self) -> int:
        return self._ts._held()

    @property
    def nbytes(self) -> int:
        """The bytes its points take (allocated, not only filled): the ring's and the newest rows'."""
        return self._ts._slots * 4 + self._ts._rows_held() * 8

    def tail(self, n: int | None = None) -> list[float]:
        """The newest ``n`` values (all when None), oldest first, as Python floats (no numpy)."""
        return self._ts._column(self._i, n)

    def last(self, n: int | None = None) -> np.ndarray:
        """The newest ``n`` values (all when None), oldest first, as a float32 numpy array."""
        import numpy as np

        return np.array(self._ts._column(self._i, n), dtype=np.float32)


class ColumnMap(Mapping[str, Column]):
    """A task's series by key (:attr:`TaskSeries.values`), in the order they were met: views made when
    asked (the values themselves are one grid a task)."""

    __slots__ = ("_ts",)

    def __init__(self, ts: TaskSeries) -> None:
        self._ts = ts

    def __getitem__(self, key: str) -> Column:
        return Column(self._ts, self._ts._index[key])

    def __contains__(self, key: object) -> bool:
        return key in self._ts._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._ts._index)

    def __len__(self) -> int:
        return len(self._ts._index)


class TaskSeries:
    """One task's (or host's) history: its points in ONE float64 ``array`` (``_buf``), laid out as

    - ``[0, S)``: the time ring (float64), ``S`` slots (``_slots``), the next write at ``_head``, ``_n``
      held; it starts at :data:`INITIAL_POINTS`, doubles as points come, up to the store's ``capacity``
      or what the history budget allows (:meth:`Store.allowed`), then reuses its oldest slot;
    - ``[S, S + G)``: the value grid, float32, two to a float64 slot (``G = ceil(S * W / 2)``, ``W`` the
      task's keys): slot ``p``'s row holds key ``i``'s value at float32 ``p * W + i`` (NaN where a point
      did not read it), aligned with the time ring;
    - ``[S + G, end)``: the newest points at full precision (:class:`RecentRows`), rows ``[t, v0, …]`` of
      ``W + 1`` float64 values, oldest first: rates over a few points read them as Python floats without
      numpy (the grid holds float32). At most :data:`RECENT_POINTS` rows, and no more than the readers
      need: the older rows only while they reach back over the widest window a rate reads from them
      (:class:`SparseWindow`), and, among the :data:`LATEST_LOOKBACK` newest (what :meth:`latest` reads),
      while one holds a key's newest value (a newer row read it again: :meth:`_superseded`). A large
      fleet's swept task, every key read each sweep, keeps 4 rows at a 5-minute sparse window (8 before).
      The answers are the ones of 8 rows kept (tests/test_store_rows.py) while the widest window stays
      (a session's views ask theirs every refresh, from the first): a rate over a window asked later,
      wider than the rows reach, reads the grid's float32 values until new rows reach over it.

    One buffer where there were three ``array`` objects and two ring objects (a time :class:`Ring` and a
    rows object), each with its own header and allocation: ~330 bytes a task at a fleet's few points.
    The objects around it are views made when asked (:class:`TimeRing`, :class:`ColumnMap`,
    :class:`RecentRows`); what a store's tasks share is one :class:`TaskShared`; the figures of the newest
    point one dict (``_memo``), made when first asked."""

    __slots__ = (
        "info",
        "host",  # where the task runs (its node_exporter / DCGM detail is ``Store.hosts[host]``)
        "first_seen",
        "last_seen",
        "version",  # points appended so far, and identity changes: what a reader's cache keys on
        # the points (newest rows among them) the budget may push the task down to: HOUR_MIN_POINTS with a
        # series read over an hour, else MIN_POINTS (see append)
        "floor",
        "_buf",
        "_slots",
        "_n",
        "_head",
        "_full",  # whether a newest row was ever let go (else the rows hold every point appended)
        "_index",  # key -> place (:func:`_schema`, shared by tasks with the same keys in the same order)
        # the values known at ``last_seen`` (merged over the polls of that scrape time: series read in
        # turns), float64 in key order, made only when a second poll of that time comes (else they are the
        # newest row: 160 bytes a task spared); which were read: bits of ``_read``; past the cap: ``_extra``
        "_last",
        "_read",
        "_extra",
        "_memo",  # the newest point's figures (:data:`Memo`), None until asked
        # what :meth:`_walk` found at the newest point (:data:`Walked`): read by every rate and ratio of a
        # view, a slot of its own (8 bytes a task) where the memo's dict cost ~0.1 us a read
        "_walked",
        "_shared",  # what the store's tasks share (:class:`TaskShared`)
    )

    def __init__(
        self,
        info: TaskInfo,
        capacity: int,
        *,
        max_series: int = 1 << 30,
        allow: Callable[[int, int, int], int] | None = None,
        figured: dict[int, TaskSeries] | None = None,
        shared: TaskShared | None = None,
    ) -> None:
        self.info = info
        self._shared = TaskShared(capacity, max_series, allow, None, figured) if shared is None else shared
        self.host = ""
        self.first_seen = self.last_seen = _NAN
        self.version = 0
        self.floor = MIN_POINTS
        self._buf = array(FLOAT64)
        self._slots = self._n = self._head = 0
        self._full = False
        self._index: dict[str, int] = _NO_KEYS
        self._last: array[float] | None = None
        self._read = 0
        self._extra: dict[str, float] | None = None
        self._memo: Memo | None = None
        self._walked: Walked | None = None

    def __repr__(self) -> str:
        return f"TaskSeries({self.info!r}, points={self._held()}, keys={len(self._index)})"

    @property
    def capacity(self) -> int:
        """Points a series may hold at most."""
        return self._shared.capacity

    @property
    def max_series(self) -> int:
        """Series kept (``[caps] series_per_task``); keys past it are known at the newest point only."""
        return self._shared.max_series

    @property
    def sparse(self) -> SparseWindow:
        """How far back a sparsely read series' rate may reach (a store's tasks share one)."""
        return self._shared.sparse

    @sparse.setter
    def sparse(self, window: SparseWindow) -> None:
        sh = self._shared
        self._shared = TaskShared(sh.capacity, sh.max_series, sh.allow, window, sh.figured)

    @property
    def sparse_s(self) -> float:
        """How far back a sparsely read series' rate may reach for its last two points (0: the default
        ``SPARSE_STRETCH`` windows); set on a task of no store, it is that task's own."""
        return self._shared.sparse.s

    @sparse_s.setter
    def sparse_s(self, seconds: float) -> None:
        self.sparse = SparseWindow(seconds)
        self.forget_figures()

    @property
    def times(self) -> TimeRing:
        """The task's time ring (:class:`TimeRing`, a view)."""
        return TimeRing(self)

    @property
    def values(self) -> ColumnMap:
        """The task's series by key (in the order met), each read like a ring (:class:`Column`)."""
        return ColumnMap(self)

    @property
    def _recent(self) -> RecentRows:
        """The newest rows at full precision (:class:`RecentRows`, a view)."""
        return RecentRows(self)

    def keys(self) -> list[str]:
        """The series keys this task has reported so far."""
        return list(self._index)

    def has(self, key: str) -> bool:
        return key in self._index

    @property
    def nbytes(self) -> int:
        """The bytes its points take: times, values, newest rows and newest values (allocated, not only
        filled; :data:`TASK_BYTES` more for the rest of the task)."""
        last = 0 if self._last is None else 8 * len(self._last)
        return 8 * len(self._buf) + last

    # the buffer's parts (see the class' docstring)

    def _rows_at(self) -> int:
        """Where the newest rows start in the buffer."""
        s = self._slots
        return s + (s * len(self._index) + 1) // 2

    def _rows_held(self) -> int:
        """How many newest rows are held."""
        s, width = self._slots, len(self._index)
        return (len(self._buf) - s - (s * width + 1) // 2) // (width + 1)

    def _rows_times(self) -> list[float]:
        """The newest rows' times, oldest first."""
        s, width = self._slots, len(self._index)
        return self._buf[s + (s * width + 1) // 2 :: width + 1].tolist()

    def _rows_column(self, i: int) -> list[float]:
        """Key ``i``'s values at the newest rows, oldest first."""
        s, width = self._slots, len(self._index)
        return self._buf[s + (s * width + 1) // 2 + 1 + i :: width + 1].tolist()

    def _held(self) -> int:
        """Points held: the ring's and the newest rows' (the newest ``capacity`` of them when the rows
        alone hold more than a small capacity)."""
        return min(self._n + self._rows_held(), self._shared.capacity)

    def _time_slice(self, n: int | None) -> array[float]:
        """A copy of the newest ``n`` times (all when None), oldest first: the newest rows' and, past
        them, the ring's."""
        in_rows = self._rows_held()
        held = min(self._n + in_rows, self._shared.capacity)
        n = held if n is None else min(n, held)
        buf = self._buf
        if n <= 0:
            return buf[:0]
        stride = len(self._index) + 1
        rows = min(n, in_rows)
        newest = buf[len(buf) - rows * stride :: stride]
        return newest if rows == n else self._ring_times(n - rows) + newest

    def _ring_times(self, n: int) -> array[float]:
        """A copy of the ring's newest ``n`` times, oldest first."""
        buf, head = self._buf, self._head
        n = min(n, self._n)
        if n <= 0:
            return buf[:0]
        start = head - n
        if start >= 0:
            return buf[start:head]
        return buf[self._slots + start : self._slots] + buf[:head]  # wraps around the end

    def _count_from(self, x: float) -> int:
        """How many of the held times are ``>= x`` (times are appended in order): a bisection of the
        newest rows' times (made once a point), then, when they are all ``>= x``, of the ring's one or two
        sorted runs (nothing copied)."""
        if x != x:  # NaN: no time is >= it
            return 0
        held = self._held()
        times = self._newest_times()
        count = len(times) - bisect_left(times, x)
        head, n, buf = self._head, self._n, self._buf
        if count < len(times):  # an older row is older than x: the ring's are too
            return min(count, held)
        if n == 0:
            return min(count, held)
        start = head - n
        if start >= 0:  # one run: buf[start:head]
            count += head - bisect_left(buf, x, start, head)
        elif head and buf[0] < x:  # two runs, the older buf[size + start:size] and the newer buf[:head]
            count += head - bisect_left(buf, x, 0, head)
        else:
            size = self._slots
            count += head + size - bisect_left(buf, x, size + start, size)
        return min(count, held)

    def _grid(self, first: int, stop: int) -> tuple[array[float], int]:
        """The grid's float32 values of slots ``[first, stop)`` (a copy, with up to one value before them:
        the float64 slots they lie in) and where slot ``first``'s row starts in it."""
        s, width = self._slots, len(self._index)
        lo, hi = first * width, stop * width
        out = array(FLOAT32)
        out.frombytes(self._buf[s + lo // 2 : s + (hi + 1) // 2].tobytes())
        return out, lo & 1

    def _column(self, i: int, n: int | None) -> list[float]:
        """Key ``i``'s newest ``n`` values (all when None), oldest first, as Python floats: float32's, the
        newest rows' too (what every point of the grid holds)."""
        in_rows = self._rows_held()
        held = min(self._n + in_rows, self._shared.capacity)
        n = held if n is None else min(n, held)
        if n <= 0:
            return []
        buf, stride = self._buf, len(self._index) + 1
        rows = min(n, in_rows)
        newest = _as_float32(buf[len(buf) - rows * stride + 1 + i :: stride].tolist())
        return newest if rows == n else self._ring_column(i, n - rows) + newest

    def _ring_column(self, i: int, n: int) -> list[float]:
        """Key ``i``'s newest ``n`` values in the ring, oldest first."""
        n = min(n, self._n)
        if n <= 0:
            return []
        head, width, size = self._head, len(self._index), self._slots
        start = head - n
        runs: tuple[tuple[int, int], ...]  # (first slot, how many): one run, or two round the end
        if start >= 0:
            runs = ((start, n),)
        elif not head:
            runs = ((size + start, n),)
        else:  # wraps around the end
            runs = ((size + start, -start), (0, head))
        out: list[float] = []
        for first, count in runs:
            if count <= _STRIDED_MAX:  # the values read where they lie, nothing else copied
                out += _strided(count, width).unpack_from(self._buf, 8 * size + 4 * (first * width + i))
            else:
                grid, at = self._grid(first, first + count)
                out += grid[at + i : at + count * width : width].tolist()
        return out

    def _grid_rows(self) -> array[float]:
        """The whole grid, ``S * W`` float32 values (a copy, without the padding)."""
        grid, at = self._grid(0, self._slots)
        return grid[at : at + self._slots * len(self._index)]

    def is_repeat(self, t: float, values: dict[str, float]) -> bool:
        """The same sample again: a Prometheus server answers with a target's last scrape until it
        scrapes it anew, so polls faster than its scrape interval repeat samples (NaN-aware). A poll
        reading only some series (a large fleet's value groups are read in turns) repeats when each
        of its values is the one already held for that scrape time."""
        if t != self.last_seen:  # also before any point (NaN)
            return False
        index, read, extra = self._index, self._read, self._extra
        for key, v in values.items():
            i = index.get(key)
            if i is not None and read >> i & 1:
                a = self._newest(i)
            elif extra is not None and key in extra:
                a = extra[key]
            else:
                return False  # not read at this scrape time yet
            if not (a == v or (a != a and v != v)):
                return False
        return True

    def forget_figures(self) -> None:
        """Empty the memos: every figure is computed again from the points held (a new point, a new
        sparse window, or a large store's new cycle: :meth:`Store.release_figures`)."""
        self._memo = self._walked = None

    def _figures(self) -> Memo:
        """The newest point's figures, made when the first is asked (the store's book says who holds any)."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
            figured = self._shared.figured
            if figured is not None:
                figured[id(self)] = self
        return memo

    def _remember(self, memo_key: tuple[str | float, ...], out: float | None) -> float | None:
        """``out`` memoised under ``memo_key`` until the next point."""
        memo = self._memo
        if memo is None:
            memo = self._figures()
        memo[memo_key] = out
        return out

    def append(self, t: float, values: dict[str, float]) -> None:
        self._memo = self._walked = None  # every derived figure below is recomputed from the new point on
        self.version += 1
        index = self._index
        shared = self._shared
        if not values.keys() <= index.keys():
            keys = list(index)
            for key in values:  # a series met late: NaN back to the task's first point (up to the cap)
                if key not in index and len(keys) < shared.max_series:
                    keys.append(key)
            if len(keys) > len(index):
                self._widen(len(keys))
                self._index = index = _schema(tuple(keys))
                self.floor = HOUR_MIN_POINTS if HOUR_KEYS.intersection(keys) else MIN_POINTS
        get = values.get
        row = [get(key, _NAN) for key in index]
        self._append_row(t, row, shared.sparse.reach)
        self._remember_last(t, values, row)
        if self.first_seen != self.first_seen:
            self.first_seen = t
        self.last_seen = t

    def _append_row(self, t: float, row: list[float], reach: float) -> None:
        """One newest row: its time and its values. The oldest rows go while the next one is already older
        than ``reach`` before ``t`` (it alone still reaches back over the window), one among the
        :data:`LATEST_LOOKBACK` newest (the new one counted) only when a newer row read again every key it
        read (:meth:`latest` finds each key's newest value without it); never more than
        :data:`RECENT_POINTS`. The buffer stays at its size: a row in, a row out is done in place (the
        steady state), a row more makes it again at its size (``extend`` left ~8% of it unused, growing by
        steps: 72 bytes a task of 10 series at 3 points, 216 at 32)."""
        buf, at, stride = self._buf, self._rows_at(), len(row) + 1
        held = (len(buf) - at) // stride
        drop = 1 if held >= RECENT_POINTS else 0
        since = t - reach
        whole = None  # whether the new row read every key (then no older row holds a newest value)
        while drop + 1 < held and buf[at + (drop + 1) * stride] < since:
            if held - drop < LATEST_LOOKBACK:  # a row latest() reads: it goes if a newer one supersedes it
                if whole is None:
                    total = sum(row)  # NaN when any value is (or when an inf meets a -inf: read one by one)
                    whole = total == total or all(x == x for x in row)
                if not whole and not self._superseded(drop, held, row):
                    break
            drop += 1
        if not drop:
            self._buf = buf + array(FLOAT64, (t, *row))
            return
        self._full = True
        end = len(buf)
        if drop == 1:  # slide the rows one down, the new one last; the oldest into the ring
            gone_t, gone = buf[at], buf[at + 1 : at + stride]
            buf[at : end - stride] = buf[at + stride : end]
            buf[end - stride] = t
            buf[end - stride + 1 : end] = array(FLOAT64, row)
            self._to_ring(gone_t, gone, held)
            return
        let_go = buf[at : at + drop * stride]  # into the ring, oldest first
        self._buf = buf[:at] + buf[at + drop * stride :] + array(FLOAT64, (t, *row))
        rows = held - drop + 1
        for start in range(0, len(let_go), stride):
            self._to_ring(let_go[start], let_go[start + 1 : start + stride], rows)

    def _superseded(self, r: int, held: int, row: list[float]) -> bool:
        """Whether every value newest row ``r`` (of ``held``) read is read again by a newer row, ``row``
        (being appended) among them: then :meth:`latest` finds each key's newest value without it."""
        buf, stride = self._buf, len(row) + 1
        at = self._rows_at() + r * stride
        for i, x in enumerate(buf[at + 1 : at + stride]):
            if x == x and row[i] != row[i]:
                later = buf[at + stride + 1 + i :: stride]  # key i at the newer rows
                if all(y != y for y in later):
                    return False
        return True

    def _to_ring(self, t: float, values: array[float], rows: int) -> None:
        """A point the newest rows let go, into the ring (float32 values): it grows (by doubling, from
        :data:`INITIAL_POINTS`) while the points held, ``rows`` newest ones besides, stay within the
        capacity and the history budget (:meth:`Store.allowed`) or under the floor; else the point takes
        its oldest slot."""
        size, head, held = self._slots, self._head, self._n
        shared = self._shared
        if held == size:  # the ring is full (or not made yet): it grows if it may
            width = len(self._index)
            room = shared.capacity - rows
            if shared.allow is not None:
                room = min(room, shared.allow(width, rows, max(0, self.floor - rows)))
            if size < room:
                self._grow(min(room, size * 2 if size else INITIAL_POINTS))
            elif not size:  # the newest rows fill the capacity: no room for it
                return
            size, head = self._slots, self._head
        buf, width = self._buf, len(self._index)
        buf[head] = t
        if width:
            try:
                _row_struct(width).pack_into(buf, 8 * size + 4 * head * width, *values)
            except OverflowError:  # past float32's range: infinite, as ``array`` stores it
                _row_struct(width).pack_into(buf, 8 * size + 4 * head * width, *array(FLOAT32, values))
        head += 1
        self._head = 0 if head == size else head
        if held < size:
            self._n = held + 1

    def _grow(self, slots: int) -> None:
        """Room for ``slots`` points: the times and grid rows held first, oldest first, then NaN; the
        newest rows after them as they were."""
        buf, size, held, head, width = self._buf, self._slots, self._n, self._head, len(self._index)
        times = self._ring_times(held)
        grid = self._grid_rows()
        if held == size and head:  # full: the oldest row is at the head
            cut = head * width
            grid = grid[cut:] + grid[:cut]
        grid += _nans(FLOAT32, (slots - size) * width)
        if len(grid) & 1:
            grid.append(_NAN)
        rows = buf[self._rows_at() :]
        times += _nans(FLOAT64, slots - held)
        times.frombytes(grid.tobytes())
        self._buf = times + rows  # allocated at its size
        self._slots, self._head = slots, held

    def _widen(self, width: int) -> None:
        """Room for keys met late: NaN columns for them in every grid row and newest row."""
        old = len(self._index)
        buf, size = self._buf, self._slots
        grid, rows = self._grid_rows(), buf[self._rows_at() :]
        pad = _nans(FLOAT32, width - old)
        new = array(FLOAT32)
        for start in range(0, size * old, old or 1):
            new += grid[start : start + old]
            new += pad
        if not old:
            new = pad * size
        if len(new) & 1:
            new.append(_NAN)
        out = buf[:size]
        out.frombytes(new.tobytes())
        pad64, stride = _nans(FLOAT64, width - old), old + 1
        for start in range(0, len(rows), stride):
            out += rows[start : start + stride]
            out += pad64
        self._buf = out[:]  # allocated at its size

    def _remember_last(self, t: float, values: dict[str, float], row: list[float]) -> None:
        """What is known at scrape time ``t`` (:meth:`is_repeat`, :meth:`last_value`): ``values`` merged
        into what the polls of the same time read (series read in turns), else only them."""
        index, last = self._index, self._last
        if t != self.last_seen:  # a new scrape time: its values are the newest row (just appended)
            last = self._last = None
            self._read, self._extra = 0, None
        elif last is None:  # a second poll of the time: the values read so far, from the row before
            stride, buf = len(index) + 1, self._buf
            last = self._last = buf[len(buf) - 2 * stride + 1 : len(buf) - stride]
        elif len(last) < len(row):  # keys met since: not read at this time before
            last.extend(row[len(last) :])
        read = self._read
        for key, v in values.items():
            i = index.get(key)
            if i is None:  # past the series cap: not in the grid, known all the same
                if self._extra is None:
                    self._extra = {}
                self._extra[key] = v
            else:
                if last is not None:
                    last[i] = v
                read |= 1 << i
        if read > 256:  # past the ints Python shares: one object a mask
            got = _MASKS.get(read)
            if got is not None:
                read = got
            elif len(_MASKS) < _MASKS_MAX:
                _MASKS[read] = read
        self._read = read

    def _newest(self, i: int) -> float:
        """Key ``i``'s value known at ``last_seen`` (:meth:`_remember_last`)."""
        last = self._last
        if last is not None:
            return last[i]
        buf = self._buf
        return buf[len(buf) - len(self._index) + i]

    def last_value(self, key: str) -> float | None:
        """``key``'s value at the newest point (None when that point did not read it)."""
        if self.last_seen != self.last_seen:  # no point yet
            return None
        i = self._index.get(key)
        if i is not None and self._read >> i & 1:
            return self._newest(i)
        return None if self._extra is None else self._extra.get(key)

    def gpu_detail(self) -> tuple[list[str], dict[str, float]]:
        """A host's GPU devices (:func:`~cmdare.collectors.hostdetail.devices_in`) and the newest value of
        each of its GPU series, once per new point: every task on the host asks for them."""
        memo = self._figures()
        got = memo.get(_GPU)
        if got is None:
            keys = self.keys()
            latest = {
                k: v
                for k in keys
                if (k in GPU_KEYS or k.startswith(DEV_PREFIX)) and (v := self.latest(k)) is not None
            }
            got = memo[_GPU] = (devices_in(keys), latest)
        return cast("tuple[list[str], dict[str, float]]", got)

    def _recent_of(self, key: str) -> list[float] | None:
        """``key``'s values at the newest points (aligned with :meth:`_rows_times`), or None."""
        i = self._index.get(key)
        if i is None:
            return None
        return self._rows_column(i)

    def latest(self, key: str, lookback: int = LATEST_LOOKBACK) -> float | None:
        """The newest value of ``key`` among the last ``lookback`` points (a source may read some
        series less often than others, e.g. node detail through Prometheus), or None."""
        memo_key = ("latest", key, lookback)
        memo = self._memo
        if memo is not None and memo_key in memo:
            return cast("float | None", memo[memo_key])
        recent = self._recent_of(key)
        out = None
        if recent is not None:
            if lookback <= RECENT_POINTS:
                out = next(
                    (x for _, x in zip(range(lookback), reversed(recent), strict=False) if x == x), None
                )
                older = lookback - len(recent)
                if out is None and older > 0 and self._full:  # rows let go (a large fleet's task,
                    # past LATEST_LOOKBACK of them): the points before them, from the grid
                    i = self._index[key]
                    before = self._column(i, lookback)[: -len(recent)]
                    out = next((x for x in reversed(before) if x == x), None)
            else:
                i = self._index[key]
                out = next((x for x in reversed(self._column(i, lookback)) if x == x), None)
        return self._remember(memo_key, out)

    def _span(self, seconds: float) -> int:
        """How many of the newest points lie within ``seconds`` of the newest one (memoised per
        point): a bisection of the time ring (times are appended in order)."""
        memo = self._figures()
        memo_key = ("span", seconds)
        n = memo.get(memo_key)
        if n is None:
            n = memo[memo_key] = self._count_from(self.last_seen - seconds)
        return cast("int", n)

    def window(self, key: str, seconds: float) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of ``key`` within the last ``seconds`` before the newest point, as numpy
        arrays (float64 times, float32 values; numpy is imported on the first call)."""
        import numpy as np

        i = self._index.get(key)
        if i is None or self.last_seen != self.last_seen:
            return np.empty(0), np.empty(0)
        n = self._span(seconds)
        times = np.frombuffer(self._time_slice(n), dtype=np.float64)
        return times, np.array(self._column(i, n), dtype=np.float32)

    def window_values(self, key: str, seconds: float) -> tuple[list[float], list[float]]:
        """:meth:`window` as Python floats (NaN where ``key`` was not read), without numpy."""
        i = self._index.get(key)
        if i is None or self.last_seen != self.last_seen:
            return [], []
        n = self._span(seconds)
        return self._time_slice(n).tolist(), self._column(i, n)

    def _newest_times(self) -> list[float]:
        """The newest rows' times, made once a point (every rate of the point reads them)."""
        memo = self._memo
        if memo is None:
            memo = self._figures()
        times = memo.get(_TIMES)
        if times is None:
            times = memo[_TIMES] = self._rows_times()
        return cast("list[float]", times)

    def _points(self, key: str, seconds: float) -> tuple[list[float], list[float]]:
        """The window's (times, values) without NaN values, as Python floats: a rate reads a
        handful of points, where plain arithmetic is several times cheaper than numpy calls."""
        recent = self._recent_of(key)
        if recent is None:
            return [], []
        since = self.last_seen - seconds
        times = self._newest_times()
        if not self._full or times[0] < since:  # the window lies within them
            t: list[float] = []
            v: list[float] = []
            for ti, vi in zip(reversed(times), reversed(recent), strict=True):
                if ti < since:
                    break
                if vi == vi:
                    t.append(ti)
                    v.append(vi)
            return t[::-1], v[::-1]
        t, v = self.window_values(key, seconds)
        pairs = [(a, b) for a, b in zip(t, v, strict=True) if b == b]
        return [a for a, _ in pairs], [b for _, b in pairs]

    def _sparse_points(self, key: str, seconds: float) -> tuple[list[float], list[float]]:
        """The last two points within ``SPARSE_STRETCH`` windows, or within :attr:`sparse_s` when the
        source reads this task less often than that (a large fleet's sweep: every two minutes)."""
        t, v = self._points(key, max(seconds * SPARSE_STRETCH, self._shared.sparse.s))
        return t[-2:], v[-2:]

    def _walk(self, seconds: float) -> tuple[int, int] | None:
        """How many of the newest points lie within ``seconds`` of the newest one and how many within the
        sparse window, walking back from the newest as :meth:`_points` does (up to the first point
        older); None when the newest points do not reach back over the sparse window. Once a point: the
        points' times are every key's (a view's rates and ratios all walk the same points)."""
        reach = max(seconds * SPARSE_STRETCH, self._shared.sparse.s)
        walked = self._walked
        if walked is not None and walked[0] == seconds and walked[1] == reach:
            return walked[2]
        figs = self._memo
        if figs is None:  # the point's first figure (as _figures, inline: every swept task's view comes here)
            figs = self._memo = {}
            figured = self._shared.figured
            if figured is not None:
                figured[id(self)] = self
            times = None
        else:
            times = walked[3] if walked is not None else cast("list[float] | None", figs.get(_TIMES))
        if times is None:  # every rate of the point reads them: made once
            s, width = self._slots, len(self._index)
            times = figs[_TIMES] = self._buf[s + (s * width + 1) // 2 :: width + 1].tolist()
        last = self.last_seen
        wide = last - reach
        got: tuple[int, int] | None = None
        if not self._full or times[0] < wide:
            since = last - seconds
            n_short = n_wide = 0
            within = True  # still within ``seconds``: the short window stops at its first point older
            for ti in reversed(times):
                if ti < wide:
                    break
                if within and ti < since:
                    within = False
                n_short += within
                n_wide += 1
            got = (n_short, n_wide)
        self._walked = (seconds, reach, got, times)
        return got

    def _windows(self, key: str, seconds: float) -> tuple[Points, Points] | None:
        """(:meth:`_points`, :meth:`_sparse_points`) of ``key`` over ``seconds``, read from the newest
        points :meth:`_walk` found (a fleet's swept task: a point every two minutes, its short window
        holding one) when they reach back over the sparse window; None when they do not (the caller
        reads both windows)."""
        i = self._index.get(key)
        if i is None:
            return ([], []), ([], [])
        walk = self._walk(seconds)
        if walk is None:
            return None
        n_short, n_wide = walk
        if not n_wide:
            return ([], []), ([], [])
        buf, stride = self._buf, len(self._index) + 1
        vals = buf[len(buf) - n_wide * stride + 1 + i :: stride].tolist()  # the newest n_wide, oldest first
        times = cast("Walked", self._walked)[3][-n_wide:]
        t = [a for a, b in zip(times, vals, strict=True) if b == b]
        v = [b for b in vals if b == b]
        if n_short == n_wide:
            short = (t, v)
        elif not n_short:
            short = ([], [])
        else:
            times, vals = times[-n_short:], vals[-n_short:]
            short = ([a for a, b in zip(times, vals, strict=True) if b == b], [b for b in vals if b == b])
        return short, (t[-2:], v[-2:])

    def _window_values(self, key: str, seconds: float) -> tuple[list[float], list[float]] | None:
        """The values of :meth:`_windows` (the short window's, the sparse window's last two), without the
        times a ratio of two series does not read; None when :meth:`_windows` is None."""
        i = self._index.get(key)
        if i is None:
            return [], []
        walk = self._walk(seconds)
        if walk is None:
            return None
        n_short, n_wide = walk
        if not n_wide:
            return [], []
        buf, stride = self._buf, len(self._index) + 1
        vals = buf[len(buf) - n_wide * stride + 1 + i :: stride].tolist()  # the newest n_wide, oldest first
        total = sum(vals)  # NaN when any is (or when an inf meets a -inf: then read one by one)
        v = vals if total == total else [b for b in vals if b == b]
        if n_short == n_wide:
            return v, v[-2:]
        return ([b for b in vals[-n_short:] if b == b] if n_short else []), v[-2:]

    def _rate_points(self, key: str, seconds: float) -> Points:
        """:meth:`_points` over ``seconds``, or :meth:`_sparse_points` when that holds fewer than two."""
        got = self._windows(key, seconds)
        if got is not None:
            return got[0] if len(got[0][1]) >= 2 else got[1]
        t, v = self._points(key, seconds)
        return (t, v) if len(v) >= 2 else self._sparse_points(key, seconds)

    def rate(self, key: str, seconds: float) -> float | None:
        """Per-second rate of a counter (or of a gauge that only grows, like the global step)
        over the window, divided by the *measured* time between the first and last samples (None
        over the key's physical bound, :func:`~cmdare.collectors.metrics.rate_bound`); a
        series with fewer than two samples in the window (read less often than the others) takes
        its last two within ``SPARSE_STRETCH`` windows. Computed once per new point (panes, job
        totals and rules ask for the same rates)."""
        memo_key = ("rate", key, seconds)
        memo = self._memo
        if memo is not None and memo_key in memo:
            return cast("float | None", memo[memo_key])
        self._shared.sparse.asked(seconds)  # the newest rows keep reaching over it
        # a series read less often than the others (node detail, a large fleet's sweep): its last two
        t, v = self._rate_points(key, seconds)
        out = None
        if key.endswith("global_step"):  # a step that went back (a restart from a checkpoint) began a
            t, v = _since_last_drop(t, v)  # new timeline: the rate is the new timeline's only
        if len(v) >= 2 and t[-1] > t[0]:
            counter = is_counter_key(key) or key.endswith("global_step")
            out = (_increase(v) if counter else v[-1] - v[0]) / (t[-1] - t[0])
            bound = rate_bound(key)
            if bound is not None and out > bound.high:  # a jump no NIC or CPU makes: refused (the
                out = None  # poll that brought it said so, collectors/plausibility.py)
        return self._remember(memo_key, out)

    def mean_of_ratio(self, num_key: str, den_key: str, seconds: float) -> float | None:
        """increase(num)/increase(den) over the window, e.g. mean step seconds from a histogram."""
        memo_key = ("ratio", num_key, den_key, seconds)
        memo = self._memo
        if memo is not None and memo_key in memo:
            return cast("float | None", memo[memo_key])
        self._shared.sparse.asked(seconds)
        got_num, got_den = self._window_values(num_key, seconds), self._window_values(den_key, seconds)
        if got_num is not None and got_den is not None:  # both windows of both series in one walk each
            short = len(got_den[0]) >= 2
            num, den = got_num[0 if short else 1], got_den[0 if short else 1]
        else:
            _, num = self._points(num_key, seconds)
            _, den = self._points(den_key, seconds)
            if len(den) < 2:  # read less often than the window (a large fleet's sweep): the last two
                _, num = self._sparse_points(num_key, seconds)
                _, den = self._sparse_points(den_key, seconds)
        dn = _increase(den) if len(den) >= 2 else math.nan
        out = None if not dn > 0 else (_increase(num) if len(num) >= 2 else math.nan) / dn
        return self._remember(memo_key, out)


def _since_last_drop(t: list[float], v: list[float]) -> tuple[list[float], list[float]]:
    """The points from the last drop of ``v`` on (all of them when it never drops)."""
    for i in range(len(v) - 1, 0, -1):
        if v[i] < v[i - 1]:
            return t[i:], v[i:]
    return t, v


def _increase(v: list[float]) -> float:
    """Increase of a counter over a short list of non-NaN floats (a drop is a reset to zero)."""
    total, prev = 0.0, v[0]
    for x in v[1:]:
        total += x - prev if x >= prev else x
        prev = x
    return total


@dataclass
class JobSeries:
    """Per-job derived series (cluster throughput over time, predicted throughput) for plots."""

    capacity: int
    facts: JobFacts | None = None
    sync: str = ""  # how the job trains (declared or inferred, see collectors/jobrate.py)
    sync_how: str = ""  # declared | inferred | ""
    times: Ring = field(init=False)
    values: dict[str, Ring] = field(default_factory=dict)
    fleet: dict[str, RoleFigures] = field(
        default_factory=dict
    )  # a large fleet's figures by role (Prometheus)
    rate_basis: str = ""  # where the job's rates come from when not its tasks' samples
    steps_coverage: Coverage | None = None  # how many tasks the last summed steps/s rests on, of how many
    examples_coverage: Coverage | None = None  # likewise examples/s

    def __post_init__(self) -> None:
        self.times = Ring(self.capacity, FLOAT64)

    def append(self, t: float, values: dict[str, float]) -> None:
        n_before = len(self.times)
        self.times.append(t)
        for key, value in values.items():
            if key not in self.values:
                ring = self.values[key] = Ring(self.capacity)
                for _ in range(n_before):
                    ring.append(math.nan)
            self.values[key].append(value)
        for key, ring in self.values.items():
            if key not in values:
                ring.append(math.nan)

    def last(self, key: str, n: int) -> np.ndarray:
        """The newest ``n`` values of ``key``, oldest first, as a float32 numpy array (imported on
        the first call)."""
        ring = self.values.get(key)
        if ring is not None:
            return ring.last(n)
        import numpy as np

        return np.empty(0, np.float32)

    def tail(self, key: str, n: int) -> list[float]:
        """:meth:`last` as Python floats, without numpy (what the overview reads each refresh)."""
        ring = self.values.get(key)
        return ring.tail(n) if ring is not None else []

    @property
    def nbytes(self) -> int:
        """The bytes its rings take."""
        return self.times.nbytes + sum(r.nbytes for r in self.values.values())


class Store:
    """Every task's and job's recent history. Bounded: ``capacity`` points per series, and the tasks
    together about ``history_bytes`` (``[caps] history_mb``; the points' part at most twice its share, as
    rings grow by doubling), each task's whole footprint counted: its points, its newest rows and values
    at full precision and the rest of it (:data:`TASK_BYTES`, :meth:`allowed`). With many tasks each keeps
    fewer points, so memory stays flat and history gets shorter (10 series a task, 2 s refresh: 1 h at
    1,000 tasks, ~6 min at 10,000, 14 min at 100,000 of a 2-min sweep) down to the floors: :data:`MIN_POINTS`
    (6, the newest rows among them), :data:`HOUR_MIN_POINTS` (32) for a task with an hour-long series.
    At 100,000 swept tasks of 10 series the budget holds: +97 MB RSS after an hour of sweeps, ~1.0 kB a
    task, 7 points (4 newest rows), ``benchmarks/store_history.py``; +170 MB, ~1.8 kB, with 8 rows and a
    16-point floor before, 2.8 kB when the ring held the rows' points too, 4.1 kB before the floors gave
    way. Past ~106,000 such tasks the floor binds (2 ring points besides 4 rows) and the store grows with the tasks, not with time."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        history_bytes: int | None = None,
        max_series: int | None = None,
    ) -> None:
        caps = current_caps()
        self.capacity = capacity
        self.history_bytes = caps.history_mb << 20 if history_bytes is None else history_bytes
        self.max_series = caps.series_per_task if max_series is None else max_series
        self.tasks: dict[str, TaskSeries] = {}
        self.members: dict[str, dict[str, TaskSeries]] = {}  # job -> its tasks (a task's key holds its job)
        # role -> its tasks, for the roles other than :data:`UNINDEXED_ROLES` (the rules ask for the PS; a
        # fleet's 100,000 workers are not indexed a second time)
        self.roles: dict[str, dict[str, TaskSeries]] = {}
        self.staged: dict[str, TaskSeries] = {}  # tasks with pipeline-stage counters
        self.jobs: dict[str, JobSeries] = {}
        self.hosts: dict[str, TaskSeries] = {}  # node_exporter / DCGM detail by host (info.gpu = GPU model)
        self._dirty: set[str] = set()  # tasks whose points, identity or host detail changed (take_dirty)
        # host -> the task that runs on it, or the set of them when several do (a fleet's task mostly has
        # a host of its own: a set each cost 100,000 tasks ~20 MB)
        self._on_host: dict[str, str | set[str]] = {}
        self.logs_training = False  # whether any task ever logged a training figure (loss, LR, examples/s)
        self.sparse = (
            SparseWindow()
        )  # how far back a sparsely read series' rate may reach (set_sparse_window)
        self._unbooked = False  # figures memoised by tasks outside :attr:`_figured` (release_figures)
        self._figured: dict[int, TaskSeries] = {}  # tasks whose memo holds figures (release_figures)
        # what every task shares (capacity, series cap, budget, sparse window, the figures' book): one object
        self._shared = TaskShared(self.capacity, self.max_series, self.allowed, self.sparse, self._figured)

    def add(self, poll: TaskPoll) -> TaskSeries | None:
        """Add one successful poll; failed polls carry no values and are left to the lifecycle.
        A host-detail poll (node_exporter, DCGM) goes to :attr:`hosts`, joined to tasks by host."""
        if not poll.ok or poll.info is None:
            return None
        book, key = (self.hosts, poll.host) if poll.host_only else (self.tasks, poll.info.key)
        ts = book.get(key)
        before = -1 if ts is None else ts.version
        if ts is None:
            ts = book[key] = TaskSeries(poll.info, self.capacity, shared=self._shared)
            if not poll.host_only:
                self.members.setdefault(poll.info.job, {})[key] = ts
                if poll.info.role not in UNINDEXED_ROLES:
                    self.roles.setdefault(poll.info.role, {})[key] = ts
        elif ts.info is not poll.info and ts.info != poll.info:
            if not poll.host_only and ts.info.role != poll.info.role:
                self.roles.get(ts.info.role, {}).pop(key, None)
                if poll.info.role not in UNINDEXED_ROLES:
                    self.roles.setdefault(poll.info.role, {})[key] = ts
            ts.info = poll.info  # labels may be enriched later (e.g. zone discovered)
            ts.version += 1  # what a reader's cache keys on: the identity changed too
        if poll.host and poll.host != ts.host:
            if not poll.host_only:
                self._leave_host(ts.host, key)
                self._join_host(poll.host, key)
            ts.host = poll.host
            ts.version += 1
        if not ts.is_repeat(poll.t, poll.values):
            ts.append(poll.t, poll.values)
            if not self.logs_training and not poll.host_only and TRAINING_KEYS.intersection(poll.values):
                self.logs_training = True
            if K_STAGE_MICROBATCHES in poll.values and not poll.host_only:
                self.staged[key] = ts
        if ts.version != before:  # something a reader shows changed: the task, or every task on the host
            if poll.host_only:
                self._dirty.update(self._tasks_on(key))
            else:
                self._dirty.add(key)
        if poll.job_facts is not None and not poll.host_only:
            self.job(poll.info.job).facts = poll.job_facts
        return ts

    def series_of(self, poll: TaskPoll) -> TaskSeries | None:
        """The series ``poll`` would be added to, if it exists yet."""
        if poll.info is None:
            return None
        return self.hosts.get(poll.host) if poll.host_only else self.tasks.get(poll.info.key)

    def set_sparse_window(self, seconds: float) -> None:
        """Rates of series read less often than their window reach back ``seconds`` for their last two
        points (a source that reads each task only every so often says how often; 0: the default
        ``SPARSE_STRETCH`` windows). Applies to every task, met or to come."""
        if seconds == self.sparse.s:
            return
        self.sparse.set(seconds)  # every task's (one shared object): the rates memoised with the last go
        if self._unbooked or len(self.tasks) + len(self.hosts) <= FIGURES_KEPT_UNDER:
            held: Iterable[TaskSeries] = (*self.tasks.values(), *self.hosts.values())
            self._unbooked = False
        else:  # past it every memo is in the book (release_figures): ~800 a refresh, not 100,000
            held = list(self._figured.values())
        for ts in held:
            ts.forget_figures()
        self._figured.clear()

    @property
    def sparse_s(self) -> float:
        """How far back a sparsely read series' rate may reach (:meth:`set_sparse_window`)."""
        return self.sparse.s

    def release_figures(self) -> None:
        """A new poll cycle: past :data:`FIGURES_KEPT_UNDER` tasks, the figures memoised in the last one
        are let go (~2 KB a task: a large fleet's task is read again only minutes later, and the views
        made from its figures are cached); below it they are kept until the task's next point."""
        if len(self.tasks) + len(self.hosts) > FIGURES_KEPT_UNDER:
            for ts in list(self._figured.values()):
                ts.forget_figures()
        else:  # kept by their tasks, out of the book
            self._unbooked = True
        self._figured.clear()  # each task's book (the same dict): filled again as figures are asked

    def take_dirty(self) -> set[str]:
        """The tasks whose points, identity or host detail changed since the last call (one reader:
        the session's overview, which rebuilds only their views)."""
        dirty, self._dirty = self._dirty, set()
        return dirty

    def allowed(self, n_series: int, rows: int = RECENT_POINTS, floor: int = MIN_POINTS) -> int:
        """Points a series of a task with ``n_series`` series may hold now in its ring, besides its ``rows``
        newest ones, within the budget: the task's share of it less what the task takes besides its ring
        (:data:`TASK_BYTES`, its newest rows and its newest values, float64), over a ring point's bytes
        (its time, float64, and a float32 value a series); never under ``floor`` (what the task's floor,
        :data:`MIN_POINTS` or :data:`HOUR_MIN_POINTS`, leaves after its rows: TaskSeries._to_ring)."""
        per_task = self.history_bytes / max(1, len(self.tasks) + len(self.hosts))
        fixed = TASK_BYTES + 8 * (rows + 1) * (n_series + 1)
        return max(floor, min(self.capacity, int((per_task - fixed) / (8 + 4 * n_series))))

    def take_fleet(self, roles: Iterable[RoleFigures]) -> None:
        """A large fleet's per-role figures from the server: each job's replace its last ones."""
        by_job: dict[str, dict[str, RoleFigures]] = {}
        for r in roles:
            by_job.setdefault(r.job, {})[r.role] = r
        for job, figures in by_job.items():
            self.job(job).fleet = figures

    def has_tasks_on(self, host: str) -> bool:
        """Whether any task runs on ``host`` (its node detail alone does not count)."""
        return bool(self._tasks_on(host))

    def _tasks_on(self, host: str) -> set[str] | tuple[str, ...]:
        """The tasks that run on ``host``."""
        held = self._on_host.get(host)
        return () if held is None else (held,) if isinstance(held, str) else held

    def _join_host(self, host: str, key: str) -> None:
        held = self._on_host.get(host)
        if held is None or held == key:
            self._on_host[host] = key
        elif isinstance(held, str):
            self._on_host[host] = {held, key}
        else:
            held.add(key)

    def _leave_host(self, host: str, key: str) -> None:
        held = self._on_host.get(host)
        if held == key:
            del self._on_host[host]
        elif isinstance(held, set):
            held.discard(key)

    def host_of(self, ts: TaskSeries) -> TaskSeries | None:
        """The node_exporter / DCGM detail of the host ``ts`` runs on, if any was read."""
        return self.hosts.get(ts.host) if ts.host else None

    def job(self, name: str) -> JobSeries:
        js = self.jobs.get(name)
        if js is None:
            js = self.jobs[name] = JobSeries(self.capacity)
        return js
