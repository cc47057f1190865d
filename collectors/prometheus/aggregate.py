"""The PromQL a Prometheus source asks of every task: per-task values folded by the server (``sum by
(instance)``: ~300 raw series of a node become ~13 values), the tasks cap as a server-side ``topk``, the
"scraped since" filter, the task counts. A large fleet's queries (per-task rate columns, detail of
chosen tasks) are in :mod:`cmdare.collectors.prometheus.fleet`.

Pure functions of the selector: no I/O (``source`` sends them and reads the answers).
"""

from __future__ import annotations

from collections.abc import Container

from cmdare.collectors import metrics as M

KEY_LABEL = "cmdare_key"
T_KEY = "__scrape_time"
NODE_KEYS = (M.K_NET_RX, M.K_NET_TX, M.K_CPU_BUSY, M.K_GPU_UTIL)  # a task page's own (rare) node series
ALWAYS_KEYS = (M.K_PREEMPTED,)  # read on every refresh, with the scrape times
STEP_KEYS = (  # one group; the rest another
    M.K_WORKER_STEPS,
    M.K_STEP_SECONDS_SUM,
    M.K_STEP_SECONDS_COUNT,
    M.K_ALLREDUCE_SECONDS_SUM,
    M.K_ALLREDUCE_SECONDS_COUNT,
)
# (series key, aggregation, metric, extra matchers, extra grouping label)
VALUE_QUERIES: tuple[tuple[str, str, str, str, str], ...] = (
    (M.K_GLOBAL_STEP, "max", "cmdare_global_step", "", ""),
    (M.K_WORKER_STEPS, "sum", "cmdare_worker_steps_total", "", ""),
    (M.K_EXAMPLES, "sum", "cmdare_examples_total", "", ""),
    (M.K_STEP_SECONDS_SUM, "sum", "cmdare_step_seconds_sum", "", ""),
    (M.K_STEP_SECONDS_COUNT, "sum", "cmdare_step_seconds_count", "", ""),
    (M.K_ALLREDUCE_SECONDS_SUM, "sum", "cmdare_allreduce_seconds_sum", "", ""),
    (M.K_ALLREDUCE_SECONDS_COUNT, "sum", "cmdare_allreduce_seconds_count", "", ""),
    (M.K_PS_IN, "sum", "cmdare_ps_bytes_total", 'direction="in"', ""),
    (M.K_PS_OUT, "sum", "cmdare_ps_bytes_total", 'direction="out"', ""),
    (M.K_PREEMPTED, "max", "cmdare_instance_preempted", "", ""),
    (M.K_CHECKPOINT_SECONDS_SUM, "sum", "cmdare_checkpoint_seconds_sum", "", ""),
    (M.K_CHECKPOINT_SECONDS_COUNT, "sum", "cmdare_checkpoint_seconds_count", "", ""),
    (M.K_LAST_CHECKPOINT, "max", "cmdare_last_checkpoint_timestamp_seconds", "", ""),
    (M.K_STAGE_COMPUTE, "sum", "cmdare_stage_compute_seconds_total", "", ""),
    (M.K_STAGE_WAIT, "sum", "cmdare_stage_wait_seconds_total", "", ""),
    (M.K_STAGE_MICROBATCHES, "sum", "cmdare_stage_microbatches_total", "", ""),
    (M.K_STAGE_BYTES_PREFIX, "sum", "cmdare_stage_bytes_sent_total", "", "peer"),
    (M.K_PROCESS_CPU, "sum", "process_cpu_seconds_total", "", ""),
)


def selector_matchers(selector: str) -> str:
    """``'{job="x"}'`` or ``'job="x"'`` → ``'job="x"'`` (the inside of the braces)."""
    s = selector.strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1].strip()
    return s


def metric_selector(metric: str, base: str, extra: str = "") -> str:
    inner = ",".join(x for x in (base, extra) if x)
    return f"{metric}{{{inner}}}" if inner else metric


def of_tasks(metric: str, base: str, extra: str = "", tasks: str | None = None) -> str:
    """``metric{extra}`` of the targets whose ``cmdare_task_info`` matches the selector. The
    exporter's own labels (``exported_job``, ``role``, ``region``…) are on its info series only, so
    the selector picks targets there and the values join on ``instance``: any label works, with or
    without ``honor_labels`` (which gives the info series the exporter's ``job``, the other series
    the scrape config's). ``tasks``: the task-info expression that picks the tasks (default every
    task the selector matches; :func:`capped_tasks` past the tasks cap)."""
    if not base and tasks is None:
        return metric_selector(metric, "", extra)
    return f"({metric_selector(metric, '', extra)} and on (instance) {tasks or metric_selector('cmdare_task_info', base)})"


def values_query(
    selector: str, keys: Container[str] | None = None, *, scrape_time: bool = True, tasks: str | None = None
) -> str:
    """The single ``or`` query that fetches every per-task value (or those of ``keys``), keyed by
    ``cmdare_key``; with ``scrape_time`` also each target's last scrape time. ``tasks``: see
    :func:`of_tasks`."""
    base = selector_matchers(selector)
    parts = []
    for key, agg, metric, extra, by in VALUE_QUERIES:
        if keys is not None and key not in keys:
            continue
        group = "instance" + (f", {by}" if by else "")
        # per scrape target, then one answer per instance (a target two scrape configs read counts once)
        expr = f"max by ({group}) ({agg} by (job, {group}) ({of_tasks(metric, base, extra, tasks)}))"
        if by:  # one key per label value, e.g. cmdare_stage_bytes_sent_total{peer=stage-1}
            parts.append(f'label_replace({expr}, "{KEY_LABEL}", "{key}$1}}", "{by}", "(.*)")')
        else:
            parts.append(f'label_replace({expr}, "{KEY_LABEL}", "{key}", "", "")')
    if scrape_time:
        ts = f"max by (instance) (timestamp({metric_selector('cmdare_task_info', base)}))"
        if tasks:
            ts = f"({ts} and on (instance) {tasks})"
        parts.append(f'label_replace({ts}, "{KEY_LABEL}", "{T_KEY}", "", "")')
    return " or ".join(parts)


def capped_tasks(selector: str, cap: int) -> str:
    """The task-info series of at most ``cap`` tasks: ``topk`` keeps the first ``cap`` series in the
    server's own order (all values are 1, so ties keep the order in which series are read: the
    same tasks from one refresh to the next while the fleet does not change)."""
    return f"topk({int(cap)}, {metric_selector('cmdare_task_info', selector_matchers(selector))})"


def changed_values_query(
    selector: str, keys: Container[str], since: float, *, scrape_time: bool, tasks: str | None = None
) -> str:
    """:func:`values_query` for the targets scraped after ``since`` (server time, seconds) only:
    Prometheus compares each target's last scrape time, so a refresh reads only the tasks that have
    something new. The selector and the filter join once, around the whole ``or`` (not once per
    series key: each join costs the server a pass over every task-info series). ``tasks``: the
    capped task set (:func:`capped_tasks`), else every task the selector matches."""
    info = metric_selector("cmdare_task_info", selector_matchers(selector))
    parts = []
    for key, agg, metric, extra, by in VALUE_QUERIES:
        if key not in keys:
            continue
        group = "instance" + (f", {by}" if by else "")
        expr = f"max by ({group}) ({agg} by (job, {group}) ({metric_selector(metric, '', extra)}))"
        label = f"{key}$1}}" if by else key
        parts.append(f'label_replace({expr}, "{KEY_LABEL}", "{label}", "{by}", "{"(.*)" if by else ""}")')
    if scrape_time:
        parts.append(
            f'label_replace(max by (instance) (timestamp({info})), "{KEY_LABEL}", "{T_KEY}", "", "")'
        )
    changed = f"(timestamp({info}) > {since:.3f})"
    if tasks:
        changed = f"({tasks} and on (instance) {changed})"
    return f"({' or '.join(parts)}) and on (instance) {changed}"


def lag_query(selector: str) -> str:
    """The longest scrape of the selected tasks' targets (one row): a sample stamped at its
    scrape's start is visible only once the scrape has ended, so a "scraped after" filter looks
    back this far."""
    return f"max({of_tasks('scrape_duration_seconds', selector_matchers(selector), '', None)})"


def instances_query(selector: str) -> str:
    """How many scrape targets (``instance`` values) carry the selected task-info series (one row)."""
    return f"count(count by (instance) ({metric_selector('cmdare_task_info', selector_matchers(selector))}))"


def count_query(selector: str) -> str:
    """How many tasks the selector matches (one row), to say "showing N of M tasks"."""
    return f"count({metric_selector('cmdare_task_info', selector_matchers(selector))})"
