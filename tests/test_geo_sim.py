"""A discrete-event simulation of GPipe / 1F1B with D pipelines sharing WAN links checks the closed form.

The simulator is independent of the product: each (stage, pipeline) is a machine running its ops in
schedule order as soon as inputs arrive; each WAN boundary direction is a FIFO server (one per pipeline
at D·A/B when shared spatially, one for all pipelines at A/B when shared temporally), followed by a
pure latency. The closed form (cmdare.planner.geo_model.pipeline_time) must agree within 5%:
GPipe with backward = 2 × forward (any m), 1F1B when m ≥ 6p (shorter 1F1B runs can be off by up to ~25%, see report).
"""

from __future__ import annotations

import heapq

from cmdare.planner.geo_model import pipeline_time
from hypothesis import given, settings
from hypothesis import strategies as st


def simulate(f, b, lat, a, wan, D, m, schedule, sharing):
    p = len(f)

    # op orders per stage
    def order(k):
        if schedule == "gpipe":
            return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
        w = min(p - k - 1, m)
        ops = [("F", j) for j in range(w)]
        nb = 0
        for j in range(w, m):
            ops.append(("F", j))
            ops.append(("B", nb))
            nb += 1
        ops += [("B", j) for j in range(nb, m)]
        return ops

    orders = [order(k) for k in range(p)]
    avail = {}  # (k,d,kind,j) -> time
    for d in range(D):
        for j in range(m):
            avail[(0, d, "F", j)] = 0.0
    ptr = {(k, d): 0 for k in range(p) for d in range(D)}
    busy = {(k, d): False for k in range(p) for d in range(D)}
    ev = []
    seq = [0]

    def push(t, kind, data):
        seq[0] += 1
        heapq.heappush(ev, (t, seq[0], kind, data))

    # links: key (boundary, dir, server) server = d for spatial or 0 for temporal
    lq = {}
    lbusy = {}

    def link_key(k, direction, d):
        shared = wan[k] and sharing == "temporal"
        return (k, direction, 0 if shared else d)

    def service(k):
        if not wan[k]:
            return a[k]
        return D * a[k] if sharing == "spatial" else a[k]

    def try_start(k, d, now):
        if busy[(k, d)] or ptr[(k, d)] >= len(orders[k]):
            return
        kind, j = orders[k][ptr[(k, d)]]
        t = avail.get((k, d, kind, j))
        if t is None or t > now + 1e-15:
            return
        busy[(k, d)] = True
        dur = f[k] if kind == "F" else b[k]
        push(now + dur, "done", (k, d, kind, j))

    def link_push(k, direction, d, j, now):
        key = link_key(k, direction, d)
        lq.setdefault(key, []).append((d, j))
        if not lbusy.get(key):
            link_next(key, now)

    def link_next(key, now):
        q = lq.get(key)
        if not q:
            lbusy[key] = False
            return
        d, j = q.pop(0)
        lbusy[key] = True
        push(now + service(key[0]), "xfer", (key, d, j))

    end = 0.0
    for k in range(p):
        for d in range(D):
            try_start(k, d, 0.0)
    while ev:
        now, _, kind, data = heapq.heappop(ev)
        end = max(end, now)
        if kind == "done":
            k, d, op, j = data
            busy[(k, d)] = False
            ptr[(k, d)] += 1
            if op == "F":
                if k < p - 1:
                    link_push(k, "fwd", d, j, now)
                else:
                    avail[(k, d, "B", j)] = now
            else:
                if k > 0:
                    link_push(k - 1, "bwd", d, j, now)
            try_start(k, d, now)
        elif kind == "xfer":
            key, d, j = data
            k, direction = key[0], key[1]
            dest = (k + 1, d, "F", j) if direction == "fwd" else (k, d, "B", j)
            avail[dest] = now + lat[k]
            push(now + lat[k], "arrive", (dest[0], d))
            link_next(key, now)
        else:
            try_start(data[0], data[1], now)
    return end


def _config(draw, m_lo: int, m_hi: int, hetero: bool) -> tuple:
    p = draw(st.integers(1, 6))
    m = draw(st.integers(m_lo * p if m_lo else 1, m_hi * p + 4))
    d = draw(st.integers(1, 4))
    unit = st.floats(0.05, 0.3)
    base = draw(unit)
    f = [base * draw(st.floats(0.8, 1.2)) for _ in range(p)]
    b = [draw(st.floats(0.05, 0.6)) if hetero else 2 * x for x in f]
    wan = [draw(st.booleans()) for _ in range(p - 1)]
    lat = [draw(st.floats(0.0, 0.12)) if w else 0.0 for w in wan]
    a = [draw(st.floats(0.0, 0.3)) for _ in range(p - 1)]
    return f, b, lat, a, wan, d, m


@st.composite
def gpipe_configs(draw):
    return _config(draw, 0, 4, hetero=False)


@st.composite
def one_f_one_b_configs(draw):
    return _config(draw, 6, 10, hetero=False)


@settings(max_examples=150, deadline=None)
@given(gpipe_configs(), st.sampled_from(["spatial", "temporal"]))
def test_gpipe_closed_form_matches_simulation(cfg, sharing):
    f, b, lat, a, wan, d, m = cfg
    sim = simulate(f, b, lat, a, wan, d, m, "gpipe", sharing)
    model = pipeline_time(f, b, lat, a, wan, d, m, "gpipe", sharing).total
    assert abs(model - sim) <= 0.05 * sim


@settings(max_examples=100, deadline=None)
@given(one_f_one_b_configs(), st.sampled_from(["spatial", "temporal"]))
def test_1f1b_closed_form_matches_simulation(cfg, sharing):
    f, b, lat, a, wan, d, m = cfg
    sim = simulate(f, b, lat, a, wan, d, m, "1f1b", sharing)
    model = pipeline_time(f, b, lat, a, wan, d, m, "1f1b", sharing).total
    assert abs(model - sim) <= 0.05 * sim


def test_spatial_gpipe_is_exact():
    f, b, lat, a = [0.1, 0.2, 0.15], [0.2, 0.4, 0.3], [0.02, 0.05], [0.3, 0.05]
    sim = simulate(f, b, lat, a, [True, True], 3, 8, "gpipe", "spatial")
    assert abs(pipeline_time(f, b, lat, a, [True, True], 3, 8, "gpipe", "spatial").total - sim) < 1e-9


def test_uniform_1f1b_without_communication_is_m_plus_p_minus_1_periods():
    p, m, c = 4, 12, 0.3
    sim = simulate([c / 3] * p, [2 * c / 3] * p, [0.0] * 3, [0.0] * 3, [False] * 3, 1, m, "1f1b", "spatial")
    assert abs(sim - (m + p - 1) * c) < 1e-9
