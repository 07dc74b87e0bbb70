r"""The fast paths of :func:`rope_lib.apply_rope`: table caches, the torch route, the fused
C++ kernel and the huge-page hint.  Private: only :mod:`rope_lib.rotation` calls it.

:func:`rope_lib.apply_rope` validates its arguments and states the formula: pair :math:`i`
of row :math:`t`, coordinates :math:`(a_i, b_i)`, turns by :math:`\alpha = m_t\theta_i`,

.. math::

    x'_{a_i} = x_{a_i}\cos\alpha - x_{b_i}\sin\alpha,\qquad
    x'_{b_i} = x_{a_i}\sin\alpha + x_{b_i}\cos\alpha .

Everything here computes exactly that, faster; none of it changes a number beyond the
rounding of the working dtype.

Table caches
    :func:`cos_sin` keeps the float64 cosines and sines of the 16 most recent combinations of
    positions, ``d`` and base (a model rotates the queries and keys of every layer at the
    same positions), keyed by the positions' bytes; the torch route keeps the tables cast to
    its working dtype and device (:func:`_torch_tables`, :func:`_fused_table`).
    :func:`clear_caches` empties them (the benchmark's cold row, the tests).

The torch route (:func:`rotate_torch`)
    float16 and bfloat16 are rotated in float32, float64 in float64.  Interleaved layout: the
    pairs :math:`(2i, 2i+1)` are complex numbers and the rotation is one product with the
    unit phasors :math:`e^{\mathrm i m\theta_i}`.  Half layout, under autograd: the two halves
    built out of place.  Half layout otherwise: ``x * [cos | cos]`` into a new tensor, then
    the partner terms added in place (:func:`_half_layout_inference`), or, for a plain
    contiguous CPU tensor of at least :data:`FUSED_MIN_BYTES`, one pass of the fused kernel.

The fused kernel
    Eager torch needs two passes over a half-layout tensor, because no strided view swaps
    the two halves of a row.  The C++ kernel below does it in one pass: for each row
    :math:`t` and pair :math:`j < h = d/2`,

    .. math::

        o_j = x_j c_j - x_{j+h} s_j,\qquad o_{j+h} = x_{j+h} c_j + x_j s_j,

    with :math:`c, s` read from one table ``cs = [cos | sin]`` of shape ``(N, d)``: the
    float64 cosines and sines rounded once to the working dtype, the same numbers as in the
    eager route's ``cos2 = [cos | cos]`` and ``sin2 = [sin | -sin]``.  Rows are processed in
    blocks of consecutive positions, every leading index (batch, head) of a block before the
    next block, so that a block's 16 KiB of the table stays in the core's cache; blocks are
    shared out with ``at::parallel_for`` (torch's thread count).  float32 and float64, CPU,
    contiguous inputs.

    Rounding: the same as the eager route's, so both give the same numbers.  The eager route
    rounds ``x * cos``, then adds the partner term with torch's ``addcmul_``, whose vectorized
    kernels (torch's AVX2 and AVX-512 builds) fuse the partner product into the sum (an FMA,
    one rounding) and whose baseline build rounds the partner product too.  The inner loop is
    compiled in four variants (AVX-512 with FMA, AVX2 with FMA, AVX2 and baseline x86-64, each
    with ``-ffp-contract=off`` and explicit ``fma`` calls where meant) and the one used
    follows torch's CPU capability (``torch.backends.cpu.get_cpu_capability()``, which
    ``ATEN_CPU_CAPABILITY`` can lower): FMA variants unless it is ``DEFAULT``, the widest
    vectors this CPU has.

    Build: on the first call of :func:`kernel` (never at import), with
    :func:`torch.utils.cpp_extension.load` (g++ with OpenMP, and ``ninja``: the one on
    ``PATH``, else one installed next to this Python, such as PyPI's ``ninja`` wheel in a
    virtual environment).  The compiled library is kept in :func:`build_directory`, whose
    name carries a hash of the source, the flags, the torch and Python versions, so later
    processes load it without compiling and a changed source gets a directory of its own.
    Processes that build at once take turns through a lock file (``fcntl.flock``, released
    by the system when a process dies).

    Fallback: when the kernel is switched off (:data:`FUSED_ENABLED` or the environment
    variable ``ROPE_LIB_FUSED=0``), or when the build fails (no compiler, no ninja, not
    Linux, not x86-64...), :func:`kernel` returns ``None`` without a warning or any output,
    and the route takes the eager two passes; :func:`error` says why the kernel is missing.

The huge-page hint (opt-in: ``ROPE_LIB_HUGE_PAGES=1`` switches it on; off by default)
    Results of 32 MiB or more are advised (``madvise(MADV_HUGEPAGE)``) to live on 2 MiB
    pages: 512 times fewer page faults when the result is first written.  The cost: where
    ``/sys/kernel/mm/transparent_hugepage/defrag`` is ``madvise`` (Linux's default), a fault
    in an advised region may wait for memory compaction when free memory is fragmented.  It
    is off by default because it does not help every caller on every machine, and because a
    benchmark row where only rope_lib gets huge pages compares allocations, not RoPE routes.
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

import numpy as np

from .frequencies import angles

__all__: list[str] = []

# ------------------------------------------------------------------------------ caches


def cos_sin(pos: np.ndarray, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """The float64 tables :math:`\\cos m\\theta_i`, :math:`\\sin m\\theta_i` of shape
    ``(N, d/2)`` for validated int64 positions, cached and read-only."""
    return _cos_sin_float64(pos.tobytes(), d, base)


@functools.lru_cache(maxsize=16)
def _cos_sin_float64(pos_bytes: bytes, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    angle = angles(np.frombuffer(pos_bytes, dtype=np.int64), d, base)
    cos, sin = np.cos(angle), np.sin(angle)
    cos.flags.writeable = False
    sin.flags.writeable = False
    return cos, sin


@functools.lru_cache(maxsize=16)
def _torch_tables(pos_bytes: bytes, d: int, base: float, dtype: Any, device: Any, layout: str):
    r"""The cached float64 tables cast once to the working dtype and moved to the device.

    Interleaved layout: ``(phasor,)``, the complex table :math:`e^{i m\theta_j}` of shape
    ``(N, d/2)``.  Half layout: ``(cos2, sin2)`` of shape ``(N, d)``, ``cos2 = [cos | cos]``
    and ``sin2 = [sin | -sin]``: ``cos2`` multiplies a whole row at once, and ``sin2`` holds
    the sine with the sign of each half's partner term (see :func:`rotate_torch`).
    """
    import torch

    cos, sin = _cos_sin_float64(pos_bytes, d, base)
    # Normal tensors even when first asked for under torch.inference_mode: the cache must
    # serve a later training step, and autograd refuses to save inference tensors.
    with torch.inference_mode(False):
        if layout == "interleaved":
            c = torch.from_numpy(cos.copy()).to(device=device, dtype=dtype)
            s = torch.from_numpy(sin.copy()).to(device=device, dtype=dtype)
            return (torch.complex(c, s),)
        # Signs and repeats applied in float64, then one rounding to the working dtype.
        cos2 = torch.from_numpy(np.concatenate((cos, cos), axis=1))
        sin2 = torch.from_numpy(np.concatenate((sin, -sin), axis=1))
        return (cos2.to(device=device, dtype=dtype), sin2.to(device=device, dtype=dtype))


@functools.lru_cache(maxsize=16)
def _fused_table(pos_bytes: bytes, d: int, base: float, dtype: Any) -> Any:
    """``[cos | sin]``, shape ``(N, d)``, for the fused kernel: the cached float64 tables
    rounded once to ``dtype`` (the numbers of :func:`_torch_tables`'s half layout), CPU."""
    import torch

    cos, sin = _cos_sin_float64(pos_bytes, d, base)
    with torch.inference_mode(False):  # as in _torch_tables
        return torch.from_numpy(np.concatenate((cos, sin), axis=1)).to(dtype)


def clear_caches() -> None:
    """Empty every table cache (the next call recomputes its tables from the angles)."""
    for cache in (_cos_sin_float64, _torch_tables, _fused_table):
        cache.cache_clear()


def _switch(name: str, unset: str, *, off: str, on: str) -> bool:
    """The on/off switch ``name`` of the environment: "1" is on, "0" off, unset ``unset``.

    Raises
    ------
    ValueError
        The variable set to anything other than "0" or "1"; the message names it and says
        what each value does (``off``, ``on``).
    """
    value = os.environ.get(name, unset)
    if value not in ("0", "1"):
        raise ValueError(
            f"the environment variable {name} must be 0 ({off}) or 1 ({on}), got {value!r}"
        )
    return value == "1"


# -------------------------------------------------------------------------- huge pages

#: ``ROPE_LIB_HUGE_PAGES=1`` switches the huge-page hint on ("0", the default: off).
HUGE_PAGE_ENV = "ROPE_LIB_HUGE_PAGES"
#: Results of at least this many bytes get the hint: larger than glibc's largest mmap
#: threshold (32 MiB), so the hint lands on a mapping of their own, never on the heap.
_HUGE_PAGE_MIN_BYTES = 1 << 25
_HUGE_PAGE_BYTES = 1 << 21


def huge_pages() -> bool:
    """Whether the huge-page hint is on: ``ROPE_LIB_HUGE_PAGES`` is "1" (unset: "0", off).

    Raises
    ------
    ValueError
        ``ROPE_LIB_HUGE_PAGES`` set to anything other than "0" or "1".
    """
    return _switch(HUGE_PAGE_ENV, "0", off="no hint, the default", on="the hint")


@functools.cache
def _madvise() -> Any:
    """libc's ``madvise`` through ctypes on Linux (with ``MADV_HUGEPAGE``), else None."""
    import ctypes
    import mmap

    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if not sys.platform.startswith("linux") or advice is None:
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn, advice


def _hinted_empty(a: Any) -> Any:
    """A new uninitialized tensor like ``a`` (contiguous when ``a`` is), advised to use
    huge pages when :func:`huge_pages` is on, ``a`` is a large CPU tensor and ``madvise``
    exists; None when no hint applies (the caller allocates as usual)."""
    import torch

    if not (huge_pages() and a.device.type == "cpu"):
        return None
    found = _madvise() if a.numel() * a.element_size() >= _HUGE_PAGE_MIN_BYTES else None
    if found is None:
        return None
    out = torch.empty_like(a)
    fn, advice = found
    begin, nbytes = out.untyped_storage().data_ptr(), out.untyped_storage().nbytes()
    first = -(-begin // _HUGE_PAGE_BYTES) * _HUGE_PAGE_BYTES  # whole huge pages only
    last = (begin + nbytes) // _HUGE_PAGE_BYTES * _HUGE_PAGE_BYTES
    if last > first:
        fn(first, last - first, advice)  # a refusal (return -1) leaves small pages
    return out


def _product(a: Any, table: Any) -> Any:
    """``a * table`` in a new tensor, advised to use huge pages when the hint applies (a
    hint only: where Linux declines it nothing changes)."""
    import torch

    taped = torch.is_grad_enabled() and (a.requires_grad or table.requires_grad)
    out = None if taped else _hinted_empty(a)  # out= has no autograd
    if out is None:
        return a * table
    return torch.mul(a, table, out=out)


# ---------------------------------------------------------------------- the torch route


def rotate_torch(x: Any, layout: str, pos: np.ndarray, d: int, base: float) -> Any:
    """RoPE of a validated torch tensor ``x`` of shape ``(..., N, d)`` (see the module
    docstring for the routes); the result has ``x``'s dtype and device."""
    import torch

    pos_bytes = pos.tobytes()
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(work)
    h = d // 2
    if layout == "half" and not (torch.is_grad_enabled() and xw.requires_grad):
        out = _half_layout_fused(xw, pos_bytes, d, base)  # needs only its own table
        if out is not None:
            return out.to(x.dtype)
    tables = _torch_tables(pos_bytes, d, base, work, x.device, layout)
    if layout == "interleaved":
        # One pass: pairs (2i, 2i+1) are complex numbers, the rotation is a product with
        # the unit phasor e^{i m theta_i} (built from the float64 cos/sin).
        xw = xw.contiguous()
        if xw.storage_offset() % 2:
            xw = xw.clone()
        z = torch.view_as_complex(xw.view(*xw.shape[:-1], h, 2))
        out = torch.view_as_real(_product(z, tables[0])).view(xw.shape)
    elif torch.is_grad_enabled() and xw.requires_grad:
        # Autograd: in-place updates of a result are not differentiable here, so build
        # the two halves out of place (one more temporary per half).
        cos2, sin2 = tables
        x1, x2 = xw[..., :h], xw[..., h:]
        out = torch.cat(
            (x1 * cos2[:, :h] + x2 * sin2[:, h:], x2 * cos2[:, h:] + x1 * sin2[:, :h]), dim=-1
        )
    else:
        out = _half_layout_inference(xw, *tables)
    return out.to(x.dtype)


#: Smallest ``x`` (bytes) for which :func:`_half_layout_inference` builds its row-pair
#: view: below it the two half updates are cheaper (16 against 32 microseconds of call
#: overhead for a (1, 8, 16, 64) float32 ``x``).
_ROW_PAIR_MIN_BYTES = 1 << 22


def _half_layout_inference(x: Any, cos2: Any, sin2: Any) -> Any:
    r"""Half-layout RoPE without autograd: ``x * [cos | cos] + swap_halves(x) * [-sin | sin]``.

    Pass 1 multiplies whole rows by ``cos2 = [cos | cos]`` into a new tensor.  Pass 2 adds
    the partner terms; it must read the second half of a row while writing the first half
    and the reverse, a swap that no strided view with non-negative strides expresses within
    one row.  Across two consecutive rows :math:`r, r + 1` of a contiguous ``x`` it is one:
    the view ``(r, j)`` takes, for :math:`j = 0`, the second half of row :math:`r` (partner:
    the first half of row :math:`r`, sign :math:`+`) and, for :math:`j = 1`, the first half
    of row :math:`r + 1` (partner: the second half of row :math:`r + 1`, sign :math:`-`),
    with strides :math:`h = d/2` for the result and :math:`d + h` for ``x`` and
    ``sin2 = [sin | -sin]``.  So pass 2 is one ``addcmul_`` over every head, plus two small
    ones for the first half of row 0 and the second half of row :math:`N - 1`.  (Two
    ``addcmul_`` over the halves do the same work in two passes; each parallel pass waits
    for both threads, and on a loaded 2-core machine the one-pass form measured 8-18 %
    faster.)  A tensor that is not contiguous takes the two-pass form on its own strides,
    and so does one below :data:`_ROW_PAIR_MIN_BYTES`, where the views' setup costs more
    than the pass it saves.
    """
    out = _product(x, cos2)
    if x.numel() == 0:
        return out
    N, d = x.shape[-2:]
    h = d // 2
    small = x.numel() * x.element_size() < _ROW_PAIR_MIN_BYTES
    if small or not (x.is_contiguous() and out.is_contiguous()):
        out[..., :h].addcmul_(x[..., h:], sin2[:, h:])
        out[..., h:].addcmul_(x[..., :h], sin2[:, :h])
        return out
    L, Td = x.numel() // (N * d), N * d
    o_v = out.as_strided((L, N - 1, 2, h), (Td, d, h, 1), out.storage_offset() + h)
    x_v = x.as_strided((L, N - 1, 2, h), (Td, d, d + h, 1), x.storage_offset())
    s_v = sin2.as_strided((N - 1, 2, h), (d, d + h, 1), sin2.storage_offset())
    o_v.addcmul_(x_v, s_v)
    rows = out.view(L, N, d)
    x3 = x.view(L, N, d)
    rows[:, 0, :h].addcmul_(x3[:, 0, h:], sin2[0, h:])
    rows[:, N - 1, h:].addcmul_(x3[:, N - 1, :h], sin2[N - 1, :h])
    return out


def _transformed(x: Any) -> bool:
    """Whether ``x`` is seen through a transform the kernel would bypass: functorch's
    wrappers (``vmap``, ``torch.func.jvp``), forward-mode dual levels (a plain tensor may
    carry a tangent), torch dispatch modes.  True also if torch lacks these (private)
    queries, so that a torch without them keeps the eager route."""
    import torch

    try:
        return bool(
            torch._C._functorch.is_functorch_wrapped_tensor(x)
            or torch.autograd.forward_ad._current_level >= 0
            or torch._C._len_torch_dispatch_stack() > 0
        )
    except AttributeError:
        return True


def _half_layout_fused(x: Any, pos_bytes: bytes, d: int, base: float) -> Any:
    """Half-layout RoPE in one pass by the C++ kernel of the fused kernel (below), or None.

    Taken for a plain, contiguous CPU tensor of at least ``FUSED_MIN_BYTES`` outside
    autograd's forward mode, functorch's transforms (``vmap``, ``torch.func.jvp``) and
    torch dispatch modes (``FakeTensorMode``, ``FlopCounterMode``: they would not see the
    kernel), when the kernel is switched on and builds (the first such call builds it);
    None otherwise, and the caller takes :func:`_half_layout_inference`.
    """
    import torch

    if (
        type(x) is not torch.Tensor
        or x.device.type != "cpu"
        or x.layout != torch.strided
        or x.numel() * x.element_size() < FUSED_MIN_BYTES
        or not x.is_contiguous()
        or x.is_neg()
        or _transformed(x)
        or kernel() is None
    ):
        return None
    out = _hinted_empty(x)
    if out is None:
        out = torch.empty_like(x)
    table = _fused_table(pos_bytes, d, base, x.dtype)
    return out if fused_rotate(x, table, out) else None


# ---------------------------------------------------------------------- the fused kernel

#: Environment variable that switches the kernel off ("0") or on ("1", the default).
FUSED_ENV = "ROPE_LIB_FUSED"
#: Module switch: ``False`` makes :func:`kernel` return ``None`` (the eager route).
FUSED_ENABLED = True
#: Smallest ``x`` (bytes) that ``apply_rope`` hands to the kernel.  Smaller calls (the
#: chapters' examples, most tests) keep the eager route: they never wait for the build.
FUSED_MIN_BYTES = 1 << 22
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
    """Whether the kernel may be used: :data:`FUSED_ENABLED` and ``ROPE_LIB_FUSED`` not "0".

    Raises
    ------
    ValueError
        ``ROPE_LIB_FUSED`` set to anything other than "0" or "1".
    """
    on = _switch(FUSED_ENV, "1", off="eager torch route", on="the fused kernel, the default")
    return FUSED_ENABLED and on


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


def fused_rotate(x: Any, cs: Any, out: Any) -> bool:
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
