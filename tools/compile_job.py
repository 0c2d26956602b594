"""One job of the compile check: find a CUDA compiler and compile a source's name expressions
to a CUBIN without a GPU, with the per-kernel register, stack and spill figures of ptxas.

Compilers, in order of preference:

1. NVRTC loaded with ctypes: ``libnvrtc.so*`` from the ``nvidia-cuda-nvrtc`` wheel
   (``site-packages/nvidia/*/lib``), else from ``$CUDA_HOME/lib64`` or the loader path.
   Every name expression must lower to a kernel (as CuPy's ``RawModule`` requires).
2. ``nvcc -cubin``: the name expressions are instantiated by taking each kernel's address at
   namespace scope. nvcc force-includes the CUDA runtime headers, whose ``<stdint.h>`` types
   clash with the fixed-width typedefs of ``iop_common.cuh``; the source is preceded by macros
   that rename ours (``int64_t`` -> ``iop_nvcc_int64_t``), which changes no generated code.

A job is a dict: op, unit, chunk, source (with the common header), names, options, backend
and tool (what :func:`find_backend` returned), ptx. :func:`compile_unit` runs in the check's
worker processes, so this module imports nothing of the library.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import resource
import shutil
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


# --------------------------------------------------------------------------------------------
# Finding a compiler
# --------------------------------------------------------------------------------------------
def _version_key(path: str) -> tuple:
    """Sort key preferring the newest ``libnvrtc.so.X.Y``."""
    tail = path.rsplit(".so", 1)[-1]
    return tuple(int(x) for x in re.findall(r"\d+", tail))


def find_nvrtc() -> str | None:
    """Path of a usable ``libnvrtc.so*`` (the wheel's first), or None."""
    roots = []
    for getter in (site.getsitepackages, lambda: [site.getusersitepackages()]):
        try:
            roots += list(getter())
        except Exception:  # site functions are missing in some virtualenv layouts
            pass
    roots += [p for p in sys.path if p.endswith("site-packages")]
    candidates = []
    for root in dict.fromkeys(roots):
        candidates += glob.glob(os.path.join(root, "nvidia", "*", "lib", "libnvrtc.so*"))
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    system = glob.glob(os.path.join(cuda_home, "lib64", "libnvrtc.so*"))
    for group in (candidates, system):
        group = [p for p in group if "builtins" not in os.path.basename(p)]
        for path in sorted(group, key=_version_key, reverse=True):
            try:
                ctypes.CDLL(path)
            except OSError:
                continue
            return path
    for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    return None


def find_nvcc() -> str | None:
    path = shutil.which("nvcc")
    if path:
        return path
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    cand = os.path.join(cuda_home, "bin", "nvcc")
    return cand if os.access(cand, os.X_OK) else None


def find_backend(prefer: str = "auto") -> tuple[str, str] | None:
    """('nvrtc', library path) or ('nvcc', executable), or None when neither exists."""
    if prefer in ("auto", "nvrtc"):
        lib = find_nvrtc()
        if lib:
            return "nvrtc", lib
        if prefer == "nvrtc":
            return None
    nvcc = find_nvcc()
    return ("nvcc", nvcc) if nvcc else None


# --------------------------------------------------------------------------------------------
# Compiling one job (runs in a worker process)
# --------------------------------------------------------------------------------------------
@dataclass
class KernelInfo:
    name: str  # name expression (NVRTC) or mangled name (nvcc)
    mangled: str
    registers: int | None = None
    stack: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None


@dataclass
class UnitResult:
    op: str
    unit: int
    chunk: int
    ok: bool
    seconds: float  # wall
    names: int
    log: str = ""
    warnings: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    error: str = ""
    cached: bool = False
    cpu: float = 0.0  # CPU seconds of the compiler (this process's, and nvcc's children)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per mangled entry: registers, stack frame and spill bytes from ``ptxas -v`` output."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            continue
        m = _REGS.search(line)
        if m:
            current["registers"] = int(m.group(1))
    return out


def compiler_warnings(log: str) -> list[str]:
    """Front-end warnings in a compile log (ptxas info lines are not warnings)."""
    lines = [ln for ln in log.splitlines() if "warning" in ln.lower() and not ln.startswith("ptxas info")]
    return [ln for ln in lines if "#pragma once in main file" not in ln]


class _Nvrtc:
    """The few NVRTC entry points the check needs, through ctypes."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
        lib.nvrtcGetErrorString.restype = cp
        lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(vp), cp, cp, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.nvrtcAddNameExpression.argtypes = [vp, cp]
        lib.nvrtcCompileProgram.argtypes = [vp, ctypes.c_int, ctypes.POINTER(cp)]
        lib.nvrtcGetProgramLogSize.argtypes = [vp, ctypes.POINTER(sz)]
        lib.nvrtcGetProgramLog.argtypes = [vp, ctypes.c_char_p]
        lib.nvrtcGetLoweredName.argtypes = [vp, cp, ctypes.POINTER(cp)]
        lib.nvrtcGetCUBINSize.argtypes = [vp, ctypes.POINTER(sz)]
        lib.nvrtcGetPTXSize.argtypes = [vp, ctypes.POINTER(sz)]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(vp)]
        for fn in (
            "nvrtcCreateProgram",
            "nvrtcAddNameExpression",
            "nvrtcCompileProgram",
            "nvrtcGetProgramLogSize",
            "nvrtcGetProgramLog",
            "nvrtcGetLoweredName",
            "nvrtcGetCUBINSize",
            "nvrtcGetPTXSize",
            "nvrtcDestroyProgram",
        ):
            getattr(lib, fn).restype = ctypes.c_int
        self.lib = lib

    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return f"{major.value}.{minor.value}"

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what}: {self.lib.nvrtcGetErrorString(rc).decode()}")

    def compile(self, source: str, names: list[str], options: list[str], ptx: bool = False) -> tuple[bool, str, dict[str, str]]:
        """(success, log, {name expression: lowered name}); the output is a CUBIN, or PTX with ``ptx``."""
        lib = self.lib
        prog = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None), "create")
        try:
            for n in names:
                self._check(lib.nvrtcAddNameExpression(prog, n.encode()), f"name expression {n!r}")
            opts = [o.encode() for o in options]
            rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(max(size.value, 1))
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
            if rc != 0:
                return False, f"{lib.nvrtcGetErrorString(rc).decode()}\n{log}", {}
            lowered = {}
            missing = []
            for n in names:
                out = ctypes.c_char_p()
                if lib.nvrtcGetLoweredName(prog, n.encode(), ctypes.byref(out)) != 0 or not out.value:
                    missing.append(n)
                else:
                    lowered[n] = out.value.decode()
            if missing:
                return False, log + "\nname expressions with no kernel: " + ", ".join(missing), lowered
            (lib.nvrtcGetPTXSize if ptx else lib.nvrtcGetCUBINSize)(prog, ctypes.byref(size))
            if size.value == 0:
                return False, log + f"\nNVRTC produced an empty {'PTX' if ptx else 'CUBIN'}", lowered
            return True, log, lowered
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_NVRTC: dict[str, _Nvrtc] = {}

# nvcc only: rename the fixed-width typedefs of iop_common.cuh so they do not clash with the
# <stdint.h> that nvcc's forced include of cuda_runtime.h has already declared.
_STDINT = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")
NVCC_PRELUDE = "".join(f"#define {t} iop_nvcc_{t}\n" for t in _STDINT)


def nvcc_source(full: str, names: list[str]) -> str:
    """The unit for nvcc: the prelude, the source, and one kernel address per name expression."""
    table = "".join(f"  (const void*)&{n},\n" for n in names)
    return (
        f"{NVCC_PRELUDE}{full}\n\n// Instantiate every name expression.\n"
        f"extern const void* const iop_compile_check_kernels[];\n"
        f"const void* const iop_compile_check_kernels[] = {{\n{table}}};\n"
    )


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (nvcc), user and system."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def compile_unit(job: dict) -> UnitResult:
    """Compile one unit; ``job`` holds op, unit, source (full), names, options, backend, tool."""
    t0, c0 = time.perf_counter(), _cpu_seconds()
    names = list(dict.fromkeys(job["names"]))
    res = UnitResult(job["op"], job["unit"], job.get("chunk", 0), False, 0.0, len(names))
    ptx = bool(job.get("ptx"))
    if ptx:  # front end only: a virtual architecture, no ptxas
        options = [o.replace("=sm_", "=compute_") for o in job["options"]]
    else:
        options = list(job["options"]) + ["-Xptxas=-v"]
    try:
        if job["backend"] == "nvrtc":
            nv = _NVRTC.get(job["tool"])
            if nv is None:
                nv = _NVRTC[job["tool"]] = _Nvrtc(job["tool"])
            ok, log, lowered = nv.compile(job["source"], names, options, ptx)
            stats = parse_ptxas(log)
            res.kernels = [asdict(KernelInfo(n, low, **stats.get(low, {}))) for n, low in lowered.items()]
        else:
            with tempfile.TemporaryDirectory(prefix="iop_cc_") as tmp:
                src = Path(tmp) / "kernel.cu"
                src.write_text(nvcc_source(job["source"], names))
                out = Path(tmp) / ("kernel.ptx" if ptx else "kernel.cubin")
                cmd = [job["tool"], "-ptx" if ptx else "-cubin", *options, "-o", str(out), str(src)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                log = proc.stdout + proc.stderr
                ok = proc.returncode == 0
                entries = re.findall(r"^\.(?:visible )?\.entry (\S+?)\(", out.read_text(), re.M) if ok and ptx else []
            stats = parse_ptxas(log) if not ptx else {m: {} for m in entries}
            res.kernels = [asdict(KernelInfo(m, m, **s)) for m, s in stats.items()]
            if ok and len(stats) < len(names):
                ok = False
                log += f"\nnvcc produced {len(stats)} kernels for {len(names)} name expressions"
        res.ok = ok
        res.log = log
        res.warnings = compiler_warnings(log)
    except Exception as exc:  # a broken library or a crashed compiler: report, do not hide
        res.ok = False
        res.error = f"{type(exc).__name__}: {exc}"
    res.seconds = time.perf_counter() - t0
    res.cpu = _cpu_seconds() - c0
    return res


def compiler_version(backend: tuple[str, str]) -> str:
    """The NVRTC version ("13.0"), or nvcc's last ``--version`` line."""
    if backend[0] == "nvrtc":
        return _Nvrtc(backend[1]).version()
    proc = subprocess.run([backend[1], "--version"], capture_output=True, text=True)
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def strip_ptxas_info(log: str) -> str:
    """A compile log without ptxas's per-kernel info lines (what is left is the error)."""
    keep = [ln for ln in log.splitlines() if not ln.startswith("ptxas info") and not ln.startswith("ptxas         .")]
    return "\n".join(keep).strip()
