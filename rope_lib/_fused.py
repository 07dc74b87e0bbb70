r"""A fused C++ kernel for the half-layout torch route of :func:`rope_lib.apply_rope`.

Eager torch needs two passes over a half-layout tensor (``x * [cos | cos]``, then the
partner terms added to each half), because no strided view swaps the two halves of a row.
The kernel here does it in one pass: for each row :math:`t` and pair :math:`j < h = d/2`,

.. math::

    o_j = x_j c_j - x_{j+h} s_j,\qquad o_{j+h} = x_{j+h} c_j + x_j s_j,

with :math:`c, s` read from one table ``cs = [cos | sin]`` of shape ``(N, d)``: the
float64 cosines and sines rounded once to the working dtype, the same numbers as in the
eager route's ``cos2 = [cos | cos]`` and ``sin2 = [sin | -sin]``, laid out like a row of
``x`` so that the table is read as one stream.  Rows are processed in blocks of
consecutive positions, every leading index (batch, head) of a block before the next block,
so that a block's 16 KiB of the table stays in the core's cache; blocks are shared out
with ``at::parallel_for`` (torch's thread count).  float32 and float64, CPU, contiguous
inputs.

Rounding: the same as the eager route's, so both give the same numbers.  The eager route
rounds ``x * cos``, then adds the partner term with torch's ``addcmul_``, whose vectorized
kernels (torch's AVX2 and AVX-512 builds) fuse the partner product into the sum (an FMA,
one rounding) and whose baseline build rounds the partner product too.  The inner loop is
compiled in four variants (AVX-512 with FMA, AVX2 with FMA, AVX2 and baseline x86-64, each
with ``-ffp-contract=off`` and explicit ``fma`` calls where meant) and the one used follows
torch's CPU capability (``torch.backends.cpu.get_cpu_capability()``, which
``ATEN_CPU_CAPABILITY`` can lower): FMA variants unless it is ``DEFAULT``, the widest
vectors this CPU has.

Build: on the first call of :func:`kernel` (never at import), with
:func:`torch.utils.cpp_extension.load` (g++ with OpenMP, and ``ninja``: the one on
``PATH``, else one installed next to this Python, such as PyPI's ``ninja`` wheel in a
virtual environment).  The compiled library is kept in :func:`build_directory`, whose name
carries a hash of the source, the flags, the torch and Python versions, so later processes
load it without compiling and a changed source gets a directory of its own.  Processes that
build at once take turns through a lock file (``fcntl.flock``, released by the system when
a process dies).

Fallback: when the kernel is switched off (:data:`ENABLED` or the environment variable
``ROPE_LIB_FUSED=0``), or when the build fails (no compiler, no ninja, not Linux, not
x86-64...), :func:`kernel` returns ``None`` without a warning or any output, and
``apply_rope`` takes the eager route; :func:`error` says why the kernel is missing.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import sys
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

__all__: list[str] = []

#: Environment variable that switches the kernel off ("0") or on ("1", the default).
ENV_VAR = "ROPE_LIB_FUSED"
#: Module switch: ``False`` makes :func:`kernel` return ``None`` (the eager route).
ENABLED = True
#: Smallest ``x`` (bytes) that ``apply_rope`` hands to the kernel.  Smaller calls (the
#: chapters' examples, most tests) keep the eager route: they never wait for the build.
MIN_BYTES = 1 << 22
#: The directory that holds the package: a source checkout when it has ``pyproject.toml``
#: (see :func:`build_root`).
_REPO = Path(__file__).resolve().parent.parent

_SOURCE = r"""
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

// One run of n consecutive rows (positions t0 .. t0 + n - 1 of one leading index): x, out
// and the table advance by d per row; a table row is [cos | sin].  FMA variants round the
// product x * cos, then fuse the partner product into the sum (one rounding), as torch's
// vectorized addcmul_ does in the eager route on CPUs with FMA; the others round the
// product, the partner product and the sum, as that route does without FMA.
#define ROPE_HALF_ROWS(NAME, T, TARGET, FIRST, SECOND)                               \
  __attribute__((target(TARGET))) void NAME(const T* __restrict x,                  \
                                            const T* __restrict cs,                 \
                                            T* __restrict out, int64_t n, int64_t d) { \
    const int64_t h = d / 2;                                                         \
    for (int64_t r = 0; r < n; ++r) {                                                \
      const T* __restrict xr = x + r * d;                                            \
      const T* __restrict c = cs + r * d;                                            \
      const T* __restrict s = c + h;                                                 \
      T* __restrict o = out + r * d;                                                 \
      for (int64_t j = 0; j < h; ++j) {                                              \
        const T a = xr[j];                                                           \
        const T b = xr[j + h];                                                       \
        o[j] = FIRST;                                                                \
        o[j + h] = SECOND;                                                           \
      }                                                                              \
    }                                                                                \
  }

#define ROPE_FMA_1 std::fma(-b, s[j], a * c[j])
#define ROPE_FMA_2 std::fma(a, s[j], b * c[j])
#define ROPE_MUL_1 a * c[j] - b * s[j]
#define ROPE_MUL_2 b * c[j] + a * s[j]

ROPE_HALF_ROWS(f32_avx512_fma, float, "avx512f,fma", ROPE_FMA_1, ROPE_FMA_2)
ROPE_HALF_ROWS(f64_avx512_fma, double, "avx512f,fma", ROPE_FMA_1, ROPE_FMA_2)
ROPE_HALF_ROWS(f32_avx2_fma, float, "avx2,fma", ROPE_FMA_1, ROPE_FMA_2)
ROPE_HALF_ROWS(f64_avx2_fma, double, "avx2,fma", ROPE_FMA_1, ROPE_FMA_2)
ROPE_HALF_ROWS(f32_avx2, float, "avx2", ROPE_MUL_1, ROPE_MUL_2)
ROPE_HALF_ROWS(f64_avx2, double, "avx2", ROPE_MUL_1, ROPE_MUL_2)
ROPE_HALF_ROWS(f32_base, float, "arch=x86-64", ROPE_MUL_1, ROPE_MUL_2)
ROPE_HALF_ROWS(f64_base, double, "arch=x86-64", ROPE_MUL_1, ROPE_MUL_2)

template <typename T>
using Rows = void (*)(const T*, const T*, T*, int64_t, int64_t);

// The widest variant this CPU runs; FMA only when asked (torch's eager kernels use it).
template <typename T>
Rows<T> pick(bool fma, Rows<T> avx512_fma, Rows<T> avx2_fma, Rows<T> avx2, Rows<T> base) {
  __builtin_cpu_init();
  const bool has_fma = __builtin_cpu_supports("fma");
  if (fma && has_fma && __builtin_cpu_supports("avx512f")) return avx512_fma;
  if (fma && has_fma && __builtin_cpu_supports("avx2")) return avx2_fma;
  if (__builtin_cpu_supports("avx2")) return avx2;
  return base;
}

Rows<float> rows_for(float*, bool fma) {
  return pick<float>(fma, f32_avx512_fma, f32_avx2_fma, f32_avx2, f32_base);
}
Rows<double> rows_for(double*, bool fma) {
  return pick<double>(fma, f64_avx512_fma, f64_avx2_fma, f64_avx2, f64_base);
}

template <typename T>
void run(const at::Tensor& x, const at::Tensor& cs, const at::Tensor& out, bool fma) {
  const Rows<T> rows = rows_for(static_cast<T*>(nullptr), fma);
  const int64_t d = x.size(-1);
  const int64_t T_ = x.size(-2);
  const int64_t L = x.numel() / (T_ * d);
  // Blocks of positions whose table rows fill about 16 KiB.
  const int64_t block = std::clamp<int64_t>(16384 / (d * int64_t(sizeof(T))), 1, T_);
  const int64_t nblocks = (T_ + block - 1) / block;
  // Work item i = (block i / L, leading index i % L); about 32768 elements per task.
  const int64_t grain = std::max<int64_t>(1, 32768 / (block * d));
  const T* xp = x.const_data_ptr<T>();
  const T* tp = cs.const_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  at::parallel_for(0, nblocks * L, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t0 = (i / L) * block;
      const int64_t r = (i % L) * T_ + t0;
      rows(xp + r * d, tp + t0 * d, op + r * d, std::min(block, T_ - t0), d);
    }
  });
}

void rope_half(const at::Tensor& x, const at::Tensor& cs, const at::Tensor& out, bool fma) {
  TORCH_CHECK(x.dim() >= 2, "rope_half: x must have at least 2 axes (..., T, d)");
  const int64_t T_ = x.size(-2);
  const int64_t d = x.size(-1);
  TORCH_CHECK(d % 2 == 0, "rope_half: the last axis of x must be even, got ", d);
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble,
              "rope_half: x must be float32 or float64, got ", dtype);
  for (const at::Tensor* t : {&x, &cs, &out}) {
    TORCH_CHECK(t->device().is_cpu() && t->layout() == at::kStrided && t->is_contiguous() &&
                    t->scalar_type() == dtype && !t->is_neg() && !t->is_conj(),
                "rope_half: x, cs and out must be contiguous CPU tensors of x's dtype");
  }
  TORCH_CHECK(cs.dim() == 2 && cs.size(0) == T_ && cs.size(1) == d,
              "rope_half: cs must have shape (T, d) = (", T_, ", ", d, ")");
  TORCH_CHECK(out.sizes() == x.sizes(), "rope_half: out must have the shape of x");
  if (x.numel() == 0) {
    return;
  }
  if (dtype == at::kDouble) {
    run<double>(x, cs, out, fma);
  } else {
    run<float>(x, cs, out, fma);
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rope_half", &rope_half, "Half-layout RoPE of x into out, one pass");
  m.def("variant", [](bool fma) {
    const Rows<float> f = rows_for(static_cast<float*>(nullptr), fma);
    return f == f32_avx512_fma ? "avx512f+fma" : f == f32_avx2_fma ? "avx2+fma"
         : f == f32_avx2 ? "avx2" : "x86-64";
  });
}
"""

_CFLAGS = ("-O3", "-fopenmp", "-ffp-contract=off")
_LDFLAGS = ("-fopenmp",)


class _State:
    """What this process knows about the kernel: not tried yet, loaded, or failed."""

    def __init__(self) -> None:
        self.tried = False
        self.module: ModuleType | None = None
        self.error: str | None = None
        self.lock = threading.Lock()


_state = _State()


def enabled() -> bool:
    """Whether the kernel may be used: :data:`ENABLED` and ``ROPE_LIB_FUSED`` not "0".

    Raises
    ------
    ValueError
        ``ROPE_LIB_FUSED`` set to anything other than "0" or "1".
    """
    value = os.environ.get(ENV_VAR, "1")
    if value not in ("0", "1"):
        raise ValueError(
            f"the environment variable {ENV_VAR} must be 0 (eager torch route) or 1 "
            f"(the fused half-layout kernel, the default), got {value!r}"
        )
    return ENABLED and value == "1"


def _tag() -> str:
    """Hash of everything the compiled library depends on."""
    import torch

    parts = (
        _SOURCE,
        " ".join(_CFLAGS),
        " ".join(_LDFLAGS),
        torch.__version__,
        f"{sys.implementation.cache_tag}{getattr(sys, 'abiflags', '')}",
        platform.machine(),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def build_root() -> Path:
    """The directory that holds the build directories.

    ``$TORCH_EXTENSIONS_DIR`` when set (torch's own setting); otherwise, when rope_lib sits
    in a source checkout (an editable install: ``pyproject.toml`` next to the package),
    ``_build/torch_extensions`` of that checkout (``make clean`` removes it); otherwise
    torch's default root, ``~/.cache/torch_extensions`` (``$XDG_CACHE_HOME`` moves it).
    """
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return Path(root)
    if (_REPO / "pyproject.toml").is_file() and os.access(_REPO, os.W_OK):
        return _REPO / "_build" / "torch_extensions"
    from torch.utils.cpp_extension import get_default_build_root

    return Path(get_default_build_root())


def build_directory() -> Path:
    """Where the kernel is compiled and cached: ``build_root() / rope_lib_fused_<hash>``."""
    return build_root() / f"rope_lib_fused_{_tag()}"


def error() -> str | None:
    """Why :func:`kernel` returned ``None`` in this process (None: loaded or not tried)."""
    return _state.error


def _ninja_dir() -> str | None:
    """A directory to put on ``PATH`` for the build when ``ninja`` is not on it already."""
    if shutil.which("ninja"):
        return None
    here = Path(sys.executable).parent  # a virtual environment's bin/ (PyPI's ninja wheel)
    return str(here) if (here / "ninja").is_file() else None


def _build() -> ModuleType:
    """Compile (or find compiled) and import the kernel; raise on any failure."""
    import fcntl

    from torch.utils import cpp_extension

    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        raise RuntimeError(
            f"the fused kernel is built on x86-64 Linux only, not {sys.platform} "
            f"{platform.machine()}"
        )
    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "rope_half.cpp"
    ninja_dir = _ninja_dir()
    old_path = os.environ.get("PATH", "")
    logger = logging.getLogger("torch.utils.cpp_extension")
    old_level = logger.level
    with open(directory / "rope_lib.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # released by the system if we die
        try:
            # torch's own lock file: only a process that held our lock can have made it,
            # so one left now is stale (its process died mid-build) and would make torch
            # wait for ever.
            (directory / "lock").unlink(missing_ok=True)
            if not source.is_file() or source.read_text() != _SOURCE:
                tmp = directory / f"rope_half.cpp.{os.getpid()}"
                tmp.write_text(_SOURCE)
                os.replace(tmp, source)  # a killed writer never leaves half a file
            if ninja_dir:
                os.environ["PATH"] = ninja_dir + os.pathsep + old_path
            logger.setLevel(logging.ERROR)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return cpp_extension.load(
                    name=directory.name,
                    sources=[str(source)],
                    extra_cflags=list(_CFLAGS),
                    extra_ldflags=list(_LDFLAGS),
                    build_directory=str(directory),
                    verbose=False,
                )
        finally:
            logger.setLevel(old_level)
            if ninja_dir:
                os.environ["PATH"] = old_path
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def kernel() -> ModuleType | None:
    """The compiled kernel module (built on the first call), or None.

    None when :func:`enabled` is false or when the build failed (then :func:`error` says
    why; the build is not tried again in this process).  Thread-safe.
    """
    if not enabled():
        return None
    state = _state
    if state.tried:
        return state.module
    with state.lock:
        if not state.tried:
            try:
                state.module = _build()
            except Exception as exc:  # noqa: BLE001 - any failure means: eager route
                state.error = f"{type(exc).__name__}: {exc}"
            state.tried = True
    return state.module


@functools.cache
def _fma() -> bool:
    """Whether torch's eager kernels fuse multiply-adds (any capability above DEFAULT)."""
    import torch

    return torch.backends.cpu.get_cpu_capability() != "DEFAULT"


def variant() -> str | None:
    """The inner loop the kernel runs on this CPU ("avx512f+fma", "avx2+fma", "avx2" or
    "x86-64"), or None when the kernel is unavailable."""
    module = kernel()
    return None if module is None else module.variant(_fma())


def rotate(x: Any, cs: Any, out: Any) -> bool:
    """Write the half-layout rotation of ``x`` into ``out`` with the kernel.

    Parameters
    ----------
    x, out : torch.Tensor
        Contiguous CPU tensors of shape ``(..., N, d)``, float32 or float64.
    cs : torch.Tensor
        The table ``[cos | sin]`` of shape ``(N, d)``, contiguous, x's dtype.

    Returns
    -------
    bool
        True when the kernel wrote ``out``; False when it is unavailable (``out`` is
        untouched and the caller takes the eager route).
    """
    module = kernel()
    if module is None:
        return False
    module.rope_half(x, cs, out, _fma())
    return True
