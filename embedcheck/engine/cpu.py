"""What CPU this is: its model name and the vector/matrix units that decide which backend and
precision are fast (read from ``/proc/cpuinfo``; ground floor, standard library only).

* :func:`cpu_info` — ``{"model": "...", "units": ["avx2", "avx512f", ...], "cores": N}``, the units
  being those of :data:`UNITS` the CPU reports;
* :func:`has_bf16_units` — AVX-512 bf16 or AMX bf16 (where ``torch.autocast`` bf16 is fast);
* :func:`has_int8_units` — VNNI or AMX int8 (where an int8 encoder is faster than fp32);
* :func:`fingerprint` — a short hash of the model name and **all** flags, the key under which
  per-machine measurements (the backend calibration, bf16's fidelity check) are cached: a CPU whose
  flags change (another host, a VM with other units exposed) is measured again.

``EMBEDCHECK_CPUINFO`` names another file to read instead of ``/proc/cpuinfo`` (tests use it to
stand in for a CPU without bf16 units).
"""

from __future__ import annotations

import hashlib
import os
import platform

#: the units reported beside every speed figure, in this order
UNITS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
#: units that make bf16 arithmetic fast on x86
BF16_UNITS = ("avx512_bf16", "amx_bf16")
#: units that make int8 dot products fast on x86 (VNNI; AMX int8); ARM's dot-product extensions
INT8_UNITS = ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")
CPUINFO_ENV = "EMBEDCHECK_CPUINFO"


def _read_cpuinfo() -> tuple[str, set[str]]:
    path = os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo"
    name, flags = "", set[str]()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if not name and key in ("model name", "cpu model", "hardware"):
                    name = value.strip()
                elif not flags and key in ("flags", "features"):
                    flags = set(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine() or "unknown", flags


def cpu_info() -> dict[str, object]:
    """``{"model", "units", "cores"}`` of this CPU (``cores``: ``os.cpu_count()``).

    >>> sorted(cpu_info())
    ['cores', 'model', 'units']
    """
    name, flags = _read_cpuinfo()
    return {"model": name, "units": [u for u in UNITS if u in flags], "cores": os.cpu_count() or 1}


def has_bf16_units() -> bool:
    """Whether the CPU reports AVX-512 bf16 or AMX bf16 instructions."""
    _name, flags = _read_cpuinfo()
    return any(u in flags for u in BF16_UNITS)


def has_int8_units() -> bool:
    """Whether the CPU reports int8 dot-product instructions (VNNI, AMX int8, ARM dot product)."""
    _name, flags = _read_cpuinfo()
    return any(u in flags for u in INT8_UNITS)


def fingerprint() -> str:
    """sha256 (24 hex digits) of the CPU model name and all its flags."""
    name, flags = _read_cpuinfo()
    return hashlib.sha256(f"{name}|{' '.join(sorted(flags))}".encode()).hexdigest()[:24]


def describe() -> str:
    """``Intel(R) Xeon(R) Processor [avx2 avx512f avx512_bf16 amx_bf16], 2 cores`` — one line for benchmarks."""
    info = cpu_info()
    units = " ".join(info["units"]) or "no avx2/avx512/amx"  # type: ignore[arg-type]
    return f"{info['model']} [{units}], {info['cores']} cores"
