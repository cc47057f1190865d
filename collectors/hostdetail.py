"""Host detail from node_exporter and NVIDIA's DCGM exporter, and how it is joined to tasks.

node_exporter: CPU seconds (busy modes and all modes, so busy % = busy rate / all rate), memory
(``MemTotal``, ``MemAvailable``) and NIC bytes (every device but ``lo``). DCGM: utilisation
(``DCGM_FI_DEV_GPU_UTIL``; on MIG pages, which have none, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` x 100),
GPU memory (``DCGM_FI_DEV_FB_USED`` / ``_FREE``, MiB) and the model (``modelName`` label).

DCGM values are kept per device under keys ``<metric>{dev=<gpu>[:<GPU_I_ID>]|<UUID>}`` so that a task
that declares its GPUs (``cmdare_task_info{gpu_ids="0,1"}``, indices or UUIDs) gets only those; the
folded keys (:data:`metrics.GPU_KEYS`) cover every device of the host. Pure functions over values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping

from cmdare.collectors import metrics as M
from cmdare.collectors.untrusted import clean_text, label_limit

DCGM_NAMES = frozenset({M.GPU_UTIL.name, M.GPU_GR_ACTIVE.name, M.GPU_FB_USED.name, M.GPU_FB_FREE.name})
DEV_PREFIX = "dcgm{dev="
NOT_A_GPU = frozenset({"", "cpu", "none", "-"})
HOST_JOB = "hosts"  # the job host detail is filed under (shown only for a host no task runs on)


ID_PART_CHARS = 48  # a device id part (gpu index, GPU_I_ID, UUID) longer than this is shortened (id_part)
_ID_SEPARATORS = str.maketrans({"}": "?", "|": "?", ",": "?"})  # what the key and gpu_ids split on


def id_part(text: str) -> str:
    """One part of a device id, bounded and free of the characters keys and ``gpu_ids`` are split on: a
    real index (``0``) or UUID (``GPU-…``, 40 characters) stays as it is; a longer one keeps its head and a
    digest of the whole (two long UUIDs with one head stay two devices). Applied alike to DCGM's labels and
    to a task's declared ``gpu_ids`` (after the same label cut the task's labels had), so the two match."""
    text = clean_text(text, label_limit()).strip().translate(_ID_SEPARATORS)  # as a declared gpu_ids is
    if len(text) <= ID_PART_CHARS:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=6).hexdigest()
    return f"{text[: ID_PART_CHARS - 13]}~{digest}"


def device_id(labels: Mapping[str, str]) -> str:
    """``<gpu>[:<GPU_I_ID>]|<UUID>`` of one DCGM series (a MIG instance is its own device), each part
    bounded (:func:`id_part`): the series key made of it is never cut, whatever the labels hold."""
    mig = id_part(labels.get("GPU_I_ID", ""))
    return f"{id_part(labels.get('gpu', '?'))}{':' + mig if mig else ''}|{id_part(labels.get('UUID', ''))}"


MAX_DEVICES = 64  # GPU devices read of one host (8 GPUs with 7 MIG instances each: 56; 3 series each stay
# under the 256 series a task may have); the rest ignored


class DcgmFold:
    """Accumulates DCGM samples of one page (or one Prometheus answer) per device, at most
    :data:`MAX_DEVICES` of them (a page announcing 100,000 GPUs costs what 64 do, and says so)."""

    def __init__(self) -> None:
        self.devices: dict[str, dict[str, float]] = {}
        self.model = ""
        self.ignored = 0  # samples of devices past MAX_DEVICES

    def add(self, name: str, labels: Mapping[str, str], value: float) -> None:
        dev_id = device_id(labels)
        dev = self.devices.get(dev_id)
        if dev is None:
            if len(self.devices) >= MAX_DEVICES:
                self.ignored += 1
                return
            dev = self.devices[dev_id] = {}
        dev[name] = value
        self.model = self.model or labels.get("modelName", "")

    @property
    def note(self) -> str | None:
        """What the device cap left out, for the host's status ("" when nothing)."""
        if not self.ignored:
            return None
        return f"GPU detail: more than {MAX_DEVICES} devices reported, {self.ignored:,} sample(s) past them ignored"

    def values(self) -> dict[str, float]:
        """Per-device keys plus the host-wide folded keys."""
        out: dict[str, float] = {}
        for dev, vals in self.devices.items():
            for key, val in _device_values(vals).items():
                out[f"{DEV_PREFIX}{dev}}}{key}"] = val
        out.update(fold_devices(self.devices.keys(), out))
        return out


def _device_values(vals: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    if M.GPU_UTIL.name in vals:
        out[M.K_GPU_UTIL] = vals[M.GPU_UTIL.name]
    elif M.GPU_GR_ACTIVE.name in vals:  # MIG: no GPU_UTIL; the ratio as a percentage
        out[M.K_GPU_UTIL] = 100.0 * vals[M.GPU_GR_ACTIVE.name]
    for name in (M.GPU_FB_USED.name, M.GPU_FB_FREE.name):
        if name in vals:
            out[name] = vals[name]
    return out


def fold_devices(devices: Collection[str], values: Mapping[str, float]) -> dict[str, float]:
    """Utilisation averaged, memory summed over ``devices`` (ids as in :func:`device_id`)."""
    util, used, free, n = [], 0.0, 0.0, 0
    for dev in devices:
        pre = f"{DEV_PREFIX}{dev}}}"
        if pre + M.K_GPU_UTIL in values:
            util.append(values[pre + M.K_GPU_UTIL])
        used += values.get(pre + M.K_GPU_FB_USED, 0.0)
        free += values.get(pre + M.K_GPU_FB_FREE, 0.0)
        n += 1
    out: dict[str, float] = {M.K_GPU_COUNT: float(n)} if n else {}
    if util:
        out[M.K_GPU_UTIL] = sum(util) / len(util)
    if any(pre in values for pre in (f"{DEV_PREFIX}{d}}}{M.K_GPU_FB_USED}" for d in devices)):
        out[M.K_GPU_FB_USED], out[M.K_GPU_FB_FREE] = used, free
    return out


def devices_in(keys: Iterable[str]) -> list[str]:
    """The device ids among a host's series keys. A key without its closing ``}`` (cut somewhere on the
    way: a recording, a lower ``label_length`` cap) names no device: it is passed over, never an error."""
    out: list[str] = []
    seen: set[str] = set()
    for k in keys:
        if k.startswith(DEV_PREFIX):
            end = k.find("}", len(DEV_PREFIX))
            dev = k[len(DEV_PREFIX) : end]
            if end > 0 and "|" in dev and dev not in seen:
                seen.add(dev)
                out.append(dev)
    return out


def owned_devices(devices: list[str], gpu_ids: str) -> list[str]:
    """The devices a task declared (``gpu_ids``: indices or UUIDs); all of them when undeclared."""
    wanted = {id_part(g) for g in gpu_ids.split(",") if g.strip()}
    if not wanted:
        return devices
    out = []
    for d in devices:
        index, _, uuid = d.partition("|")
        if index.split(":")[0] in wanted or uuid in wanted or index in wanted:
            out.append(d)
    return out


def owns_gpus(role: str, gpu: str, gpu_ids: str, host_has_gpus: bool) -> bool:
    """Whether a task owns GPUs: it says so (``gpu_ids``, or a ``gpu`` label naming a GPU), or it is
    a worker-like task with no ``gpu`` label on a host whose DCGM exporter reports GPUs. A PS
    (or any task labelled ``gpu="cpu"``) without a declared GPU never owns one."""
    if gpu_ids.strip():
        return True
    if gpu.strip().lower() not in NOT_A_GPU:
        return True
    return not gpu.strip() and host_has_gpus and role not in ("ps", "node")


_MODEL = re.compile(r"\b([A-Z]{1,2}\d{1,4}[A-Za-z]?)\b")  # "Tesla V100-SXM2-16GB" -> V100


def short_model(model: str) -> str:
    """The GPU's short name from DCGM's ``modelName`` (``NVIDIA A100-SXM4-40GB`` → ``A100``), or ""."""
    m = _MODEL.search(model)
    return m.group(1) if m else ""


def is_host_key(key: str) -> bool:
    """A series key of host detail (node_exporter, DCGM) rather than of a training task."""
    return key in M.HOST_KEYS or key in M.GPU_KEYS or key.startswith(DEV_PREFIX) or key == M.K_PROCESS_CPU


def host_name(url: str) -> str:
    """The host part of a URL or of a Prometheus ``instance`` (``host:port``), lower-case: ``url`` itself
    when it is its host already (an instance without a port): the books of a target keep one string,
    not two equal ones (~57 bytes a target)."""
    s = url.split("://", 1)[-1].split("/", 1)[0]
    s = s.rsplit("@", 1)[-1]
    if s.startswith("["):
        return s[1:].split("]", 1)[0].lower()
    host = (s.rpartition(":")[0] if s.count(":") == 1 else s).lower() or s.lower()
    return url if host == url else host


_MEMORY_NAMES = (M.GPU_FB_USED.name, M.GPU_FB_FREE.name)


def forget_memory(fold: DcgmFold, devices: set[str]) -> None:
    """Drop the memory figures of ``devices`` whose used or free memory was refused: half a
    device's memory would make its total (used + free) wrong."""
    for dev in devices:
        for name in _MEMORY_NAMES:
            fold.devices.get(dev, {}).pop(name, None)
