"""A DCGM exporter page, for tests. MOCK: no NVIDIA GPU (nor DCGM) can run here, so this serves what
NVIDIA's dcgm-exporter serves, built from its published default counter list
(``etc/default-counters.csv``: field, type, help) with its label layout (``gpu``, ``UUID``,
``device``, ``modelName``, ``Hostname``; MIG instances add ``GPU_I_PROFILE`` and ``GPU_I_ID`` and
have no ``DCGM_FI_DEV_GPU_UTIL``, only the profiling ratio ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.page_server import close_server, serve_pages

# dcgm-exporter etc/default-counters.csv (NVIDIA), in its order
DEFAULT_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active (in %)."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active (in %)."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active (in %)."),
)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    model: str
    util: float  # % (DCGM_FI_DEV_GPU_UTIL); the GR engine ratio is util / 100
    fb_used: float  # MiB
    fb_free: float
    mig: tuple[tuple[str, int, float, float, float], ...] = ()  # (profile, GPU_I_ID, ratio, used, free)


def page(gpus: list[Gpu], hostname: str = "gpu-host") -> str:
    """The exposition text dcgm-exporter would serve for ``gpus`` (MIG instances per device when given)."""
    lines: list[str] = []
    for name, kind, help_text in DEFAULT_COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for g in gpus:
            base = (
                f'gpu="{g.index}",UUID="{g.uuid}",device="nvidia{g.index}",modelName="{g.model}",'
                f'Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="535.104.05"'
            )
            if not g.mig:
                lines.append(f"{name}{{{base}}} {_value(name, g.util, g.fb_used, g.fb_free)}")
                continue
            for profile, gi, ratio, used, free in g.mig:
                if name == "DCGM_FI_DEV_GPU_UTIL":
                    continue  # not reported for MIG instances
                labels = f'{base},GPU_I_PROFILE="{profile}",GPU_I_ID="{gi}"'
                lines.append(f"{name}{{{labels}}} {_value(name, ratio * 100, used, free)}")
    return "\n".join(lines) + "\n"


def _value(name: str, util: float, used: float, free: float) -> str:
    return str(
        {
            "DCGM_FI_DEV_GPU_UTIL": util,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": util / 100,
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_FB_FREE": free,
            "DCGM_FI_DEV_SM_CLOCK": 1530,
            "DCGM_FI_DEV_GPU_TEMP": 41,
            "DCGM_FI_DEV_POWER_USAGE": 61.5,
        }.get(name, 0)
    )


class DcgmServer:
    """Serves :func:`page` on ``addr`` (any 127.x address) at ``/metrics``."""

    def __init__(self, text: str, addr: str = "127.0.0.1") -> None:
        body = text.encode()
        self.server = serve_pages(lambda _path: body, addr)
        self.addr = f"{addr}:{self.server.server_address[1]}"

    def close(self) -> None:
        close_server(self.server)
