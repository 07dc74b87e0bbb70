"""Tests of rope_lib._fastpath, the fast paths of apply_rope: the table caches, the torch route,
the huge-page hint (opt-in) and the fused half-layout kernel.

Expected values come from two routes independent of the kernel:

* ``rope_2x2`` of tests/peers.py: float64, one explicit 2x2 rotation per pair, with
  frequencies from Python's ``math``;
* the eager torch route of apply_rope (the kernel switched off: ``x * [cos | cos]`` and
  torch's ``addcmul_``), which the kernel must equal bit for bit: it rounds the same
  products and sums, fusing the partner product into the sum (an FMA) exactly when torch's
  CPU capability makes ``addcmul_`` do so (checked under ``ATEN_CPU_CAPABILITY=default``
  too, in a subprocess).

Each test that claims the kernel ran checks it: ``rope_lib._fastpath.fused_rotate`` is wrapped by a
counter.  The kernel must build wherever a C++ compiler and ninja are found; elsewhere those
tests are skipped (and apply_rope's fallback is what runs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rope_lib
from rope_lib import _fastpath, apply_rope

from .conftest import ROOT
from .peers import new_tensors, rope_2x2

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def _toolchain() -> bool:
    ninja = shutil.which("ninja") or (Path(sys.executable).parent / "ninja").is_file()
    return bool(ninja and shutil.which("c++"))


@pytest.fixture
def calls(monkeypatch):
    """Kernel on for every size; returns the list of shapes the kernel rotated."""
    if not _toolchain():
        pytest.skip("no C++ compiler or ninja: apply_rope takes the eager route here")
    monkeypatch.delenv(_fastpath.FUSED_ENV, raising=False)
    monkeypatch.setattr(_fastpath, "FUSED_ENABLED", True)
    monkeypatch.setattr(_fastpath, "FUSED_MIN_BYTES", 0)
    assert _fastpath.kernel() is not None, _fastpath.error()
    seen: list[tuple[int, ...]] = []
    real = _fastpath.fused_rotate

    def counting(x, cs, out):
        seen.append(tuple(x.shape))
        return real(x, cs, out)

    monkeypatch.setattr(_fastpath, "fused_rotate", counting)
    return seen


def _eager(x, pos, base=10000.0):
    """apply_rope's half layout with the kernel switched off."""
    saved = _fastpath.FUSED_ENABLED
    _fastpath.FUSED_ENABLED = False
    try:
        return apply_rope(x, pos, base, "half")
    finally:
        _fastpath.FUSED_ENABLED = saved


def _pair_scale(x: np.ndarray) -> np.ndarray:
    """|a| + |b| of each coordinate's pair (a, b) = (x_j, x_{j+h}), shape of x."""
    h = x.shape[-1] // 2
    s = np.abs(x[..., :h]) + np.abs(x[..., h:])
    return np.concatenate((s, s), axis=-1)


# ------------------------------------------------------------------- equality


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    T=st.sampled_from([1, 2, 3, 5, 8, 33]),
    h=st.integers(1, 128),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    base=st.sampled_from([10000.0, 500000.0, 1.5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_equals_eager_route_and_float64_reference(calls, lead, T, h, dtype, base, seed):
    d = 2 * h
    rng = np.random.default_rng(seed)
    x64 = rng.standard_normal((*lead, T, d)) * rng.choice([1e-3, 1.0, 1e3])
    pos = rng.integers(-(10**6), 10**6, size=T)
    x = torch.from_numpy(x64).to(dtype)
    xd = x.double().numpy()
    before = len(calls)
    got = apply_rope(x, pos, base, "half")
    assert len(calls) == before + 1  # the kernel ran
    eager = _eager(x, pos, base)
    assert len(calls) == before + 1  # the eager route did not use it
    assert got.dtype == dtype and got.shape == x.shape and got.is_contiguous()
    assert torch.equal(got, eager)
    u = UNIT_ROUNDOFF[dtype]
    scale = _pair_scale(xd)
    # Against float64 math: the tables' rounding and the arithmetic (4 u), and the float64
    # reference's own angle error (angles up to 1e6 rad: about 1e-10, here 1e-9).
    expected = rope_2x2(xd, pos, base, "half")
    assert np.all(np.abs(got.double().numpy() - expected) <= (4 * u + 1e-9) * scale)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float16, 2.0**-11), (torch.bfloat16, 2.0**-8)])
def test_half_precision_inputs_take_the_kernel_in_float32(calls, dtype, tol):
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.uniform(-1, 1, (2, 3, 7, 16))).to(dtype)
    pos = np.array([0, 1, 5, 100, 4096, 65537, 10**6])
    y = apply_rope(x, pos, 10000.0, "half")
    assert calls == [(2, 3, 7, 16)]  # rotated in float32 by the kernel
    assert y.dtype == dtype and y.shape == x.shape
    expected = rope_2x2(x.double().numpy(), pos, 10000.0, "half")
    err = np.abs(y.double().numpy() - expected)
    assert np.all(err <= tol * np.maximum(np.abs(expected), 2.0**-14) + 1e-6)


def test_kernel_at_the_benchmark_shape(calls):
    """The shape of make bench, at the default size limit: one kernel call per tensor."""
    _fastpath.FUSED_MIN_BYTES = 1 << 22  # monkeypatched by the fixture, restored after
    x = torch.randn(1, 32, 4096, 128)
    pos = np.arange(4096)
    y = apply_rope(x, pos, 10000.0, "half")
    assert calls == [(1, 32, 4096, 128)]
    assert torch.equal(y, _eager(x, pos))
    rows = [0, 1, 4095]
    expected = rope_2x2(x[0, :2, rows].double().numpy(), pos[rows], 10000.0, "half")
    assert np.abs(y[0, :2, rows].double().numpy() - expected).max() < 2e-6 * x.abs().max().item()


def test_kernel_output_is_new_and_input_untouched(calls):
    x = torch.randn(4, 9, 32)
    keep = x.clone()
    y = apply_rope(x, np.arange(9), layout="half")
    assert calls and y.data_ptr() != x.data_ptr() and torch.equal(x, keep)
    first = y.clone()
    y.fill_(0.0)  # writing the result changes neither x nor the next result
    assert torch.equal(apply_rope(x, np.arange(9), layout="half"), first)
    assert len(calls) == 2 and torch.equal(x, keep)


# --------------------------------------------------------- where the kernel is used


def test_size_limit(calls):
    _fastpath.FUSED_MIN_BYTES = 1 << 22
    pos = np.arange(1024)
    apply_rope(torch.randn(7, 1024, 128), pos, layout="half")  # 3.5 MiB
    assert calls == []
    apply_rope(torch.randn(8, 1024, 128), pos, layout="half")  # 4 MiB
    assert calls == [(8, 1024, 128)]


def test_autograd_keeps_the_eager_route(calls):
    """A tensor that requires grad (grad mode on) is rotated out of place by torch ops, so
    backward works; under no_grad the kernel runs and the result has no graph."""
    rng = np.random.default_rng(6)
    x = torch.tensor(rng.standard_normal((2, 5, 16)), requires_grad=True)
    pos = [0, 3, -7, 100, 10**6]
    y = apply_rope(x, pos, 10000.0, "half")
    assert calls == [] and y.grad_fn is not None
    g = rng.standard_normal((2, 5, 16))
    (y * torch.from_numpy(g)).sum().backward()
    expected = rope_2x2(g, [-m for m in pos], 10000.0, "half")  # R_m^T g = R_{-m} g
    np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-12)
    with torch.no_grad():
        z = apply_rope(x, pos, 10000.0, "half")
    assert calls == [(2, 5, 16)] and z.grad_fn is None
    np.testing.assert_allclose(z.numpy(), y.detach().numpy(), atol=1e-15)
    with torch.inference_mode():
        w = apply_rope(x.detach(), pos, 10000.0, "half")
    assert len(calls) == 2 and w.is_inference()
    assert torch.equal(w, z)


# torch's forward mode loads decompositions through torch.jit.script, which warns.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_transforms_and_modes_keep_the_eager_route(calls):
    """vmap, torch.func.jvp, forward-mode dual tensors, a dispatch mode, the meta device and
    non-contiguous tensors never reach the kernel, and give the right numbers."""
    from torch.utils.flop_counter import FlopCounterMode

    rng = np.random.default_rng(7)
    x, v = (torch.from_numpy(rng.standard_normal((3, 5, 8))) for _ in range(2))
    pos = [0, 3, -7, 100, 10**6]
    ref_x, ref_v = (rope_2x2(t.numpy(), pos, 500.0, "half") for t in (x, v))

    def f(t):
        return apply_rope(t, pos, 500.0, "half")

    y, dy = torch.func.jvp(f, (x,), (v,))
    np.testing.assert_allclose(dy.numpy(), ref_v, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on a slow batching rule
        np.testing.assert_allclose(torch.func.vmap(f)(x).numpy(), ref_x, atol=1e-12)
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        out = fwad.unpack_dual(f(fwad.make_dual(x, v)))
    np.testing.assert_allclose(out.tangent.numpy(), ref_v, atol=1e-12)
    with FlopCounterMode(display=False):
        np.testing.assert_allclose(f(x).numpy(), ref_x, atol=1e-12)
    assert f(x.to("meta")).device.type == "meta"
    strided = torch.from_numpy(rng.standard_normal((5, 3, 8))).transpose(0, 1)
    np.testing.assert_allclose(
        f(strided).numpy(), rope_2x2(strided.numpy(), pos, 500.0, "half"), atol=1e-12
    )
    assert calls == []
    np.testing.assert_allclose(f(x).numpy(), ref_x, atol=1e-12)
    assert calls == [(3, 5, 8)]


def test_partial_rotation_keeps_the_eager_route(calls):
    """rotary_dim < d: the rotated coordinates are a strided slice of each row, which the
    kernel (contiguous rows only) does not take; the numbers are the reference's, and the
    other coordinates are copied exactly."""
    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.standard_normal((2, 3, 9, 32))).float()
    pos = rng.integers(0, 10**5, size=9)
    y = apply_rope(x, pos, 10000.0, "half", rotary_dim=8)
    assert calls == [] and y.shape == x.shape and y.dtype == x.dtype
    assert torch.equal(y[..., 8:], x[..., 8:])
    xd = x.double().numpy()
    expected = rope_2x2(xd[..., :8], pos, 10000.0, "half")
    assert np.all(np.abs(y[..., :8].double().numpy() - expected) <= 1e-6 * _pair_scale(xd[..., :8]))
    apply_rope(x, pos, 10000.0, "half", rotary_dim=32)  # the whole head: the kernel
    assert calls == [(2, 3, 9, 32)]


# ------------------------------------------------------------------------ fallback


def test_switches_select_the_eager_route(calls, monkeypatch):
    x = torch.randn(2, 6, 16)
    pos = np.arange(6)
    _fastpath.FUSED_ENABLED = False
    off = apply_rope(x, pos, layout="half")
    _fastpath.FUSED_ENABLED = True
    monkeypatch.setenv(_fastpath.FUSED_ENV, "0")
    env_off = apply_rope(x, pos, layout="half")
    assert calls == []
    monkeypatch.setenv(_fastpath.FUSED_ENV, "1")
    on = apply_rope(x, pos, layout="half")
    assert calls == [(2, 6, 16)]
    assert torch.equal(off, env_off)
    expected = rope_2x2(x.double().numpy(), pos, layout="half")
    for y in (off, on):
        assert np.abs(y.double().numpy() - expected).max() < 2e-6 * x.abs().max().item()
    monkeypatch.setenv(_fastpath.FUSED_ENV, "yes")
    with pytest.raises(ValueError, match="ROPE_LIB_FUSED must be 0 .* or 1 .*got 'yes'"):
        apply_rope(x, pos, layout="half")


@pytest.mark.parametrize("failure", ["compile error", "no ninja"])
def test_failed_build_falls_back_silently(monkeypatch, tmp_path, capfd, failure):
    """A build that fails leaves apply_rope on the eager route: no warning, no output, the
    right numbers; error() says why, and the build is not tried again."""
    monkeypatch.delenv(_fastpath.FUSED_ENV, raising=False)
    monkeypatch.setattr(_fastpath, "FUSED_ENABLED", True)
    monkeypatch.setattr(_fastpath, "FUSED_MIN_BYTES", 0)
    monkeypatch.setattr(_fastpath, "_state", _fastpath._State())
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    if failure == "compile error":
        if not _toolchain():
            pytest.skip("no C++ compiler or ninja")
        monkeypatch.setattr(_fastpath, "_SOURCE", "#error rope_lib test: a broken kernel\n")
    else:
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        monkeypatch.setattr(_fastpath, "_ninja_dir", lambda: None)
    builds = []
    real_build = _fastpath._build
    monkeypatch.setattr(_fastpath, "_build", lambda: builds.append(1) or real_build())
    x = torch.randn(3, 4, 8)
    pos = [0, 1, 2, 300]
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = apply_rope(x, pos, layout="half")
        second = apply_rope(x, pos, layout="half")
    assert capfd.readouterr() == ("", "")
    assert builds == [1] and _fastpath.kernel() is None
    message = _fastpath.error()
    assert message is not None
    assert ("a broken kernel" in message) if failure == "compile error" else ("ninja" in message)
    expected = rope_2x2(x.double().numpy(), pos, layout="half")
    assert torch.equal(first, second)
    assert np.abs(first.double().numpy() - expected).max() < 2e-6 * x.abs().max().item()


# ------------------------------------------------------------------ build and cache


def test_build_directory_is_predictable(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert _fastpath.build_root() == ROOT / "_build" / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert _fastpath.build_root() == tmp_path
    directory = _fastpath.build_directory()
    assert directory.parent == tmp_path and directory.name.startswith("rope_lib_fused_")
    monkeypatch.setattr(_fastpath, "_SOURCE", _fastpath._SOURCE + "// changed\n")
    assert _fastpath.build_directory() != directory  # a changed source gets its own build


def _run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process in the repository, with the environment ``env``."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def _load_in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = (
        "from rope_lib import _fastpath; import torch; m = _fastpath.kernel(); "
        "print(m.__file__ if m else _fastpath.error())"
    )
    return _run_python(code, env)


def test_compiled_kernel_is_reused_by_later_processes(calls):
    """A second process loads the library the first one compiled (same file, unchanged),
    even with a stale lock file of torch's left by a process killed mid-build, and prints
    nothing."""
    env = dict(os.environ)
    library = Path(_fastpath.kernel().__file__)
    assert library.parent == _fastpath.build_directory()
    stamp = library.stat().st_mtime_ns
    (library.parent / "lock").touch()  # what a killed build leaves behind
    done = _load_in_subprocess(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(library) and done.stderr == ""
    assert library.stat().st_mtime_ns == stamp  # not rebuilt
    assert not (library.parent / "lock").exists()


@pytest.mark.slow
def test_concurrent_first_builds_share_one_library(calls, tmp_path):
    """Two processes asking for the kernel at once in an empty build root: one compiles,
    the other waits for it; both load the same library."""
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = str(tmp_path)
    results: list[subprocess.CompletedProcess] = []
    threads = [
        threading.Thread(target=lambda: results.append(_load_in_subprocess(env))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    paths = {r.stdout.strip() for r in results}
    assert len(paths) == 1
    (path,) = paths
    assert Path(path).is_file() and Path(path).parent.parent == tmp_path


_CAPABILITY_SCRIPT = """
import numpy as np, torch
import rope_lib
from rope_lib import _fastpath, apply_rope
_fastpath.FUSED_MIN_BYTES = 0
rng = np.random.default_rng(0)
same = []
for shape in [(1, 2), (3, 5, 6), (2, 7, 34), (2, 3, 9, 256)]:
    for dtype in (torch.float32, torch.float64):
        x = torch.from_numpy(rng.standard_normal(shape)).to(dtype)
        pos = rng.integers(-10**6, 10**6, size=shape[-2])
        fused = apply_rope(x, pos, 10000.0, "half")
        _fastpath.FUSED_ENABLED = False
        eager = apply_rope(x, pos, 10000.0, "half")
        _fastpath.FUSED_ENABLED = True
        same.append(torch.equal(fused, eager))
print(torch.backends.cpu.get_cpu_capability(), _fastpath.variant(), all(same), len(same))
"""


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_kernel_follows_torch_cpu_capability(calls, capability, tmp_path):
    """With torch's vectorized kernels lowered (``ATEN_CPU_CAPABILITY``), the kernel picks
    the variant that rounds as they do, and still equals the eager route bit for bit.  Built
    in a root of its own: another variant's build in the shared directory would make the
    next process there rebuild, which test_compiled_kernel_is_reused_by_later_processes
    forbids."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability, TORCH_EXTENSIONS_DIR=str(tmp_path))
    done = _run_python(_CAPABILITY_SCRIPT, env)
    assert done.returncode == 0, done.stderr
    torch_capability, variant, same, count = done.stdout.split()
    if torch_capability != capability.upper():
        pytest.skip(f"this CPU cannot run torch's {capability} kernels")
    fused_multiply_add = variant.endswith("+fma")
    assert fused_multiply_add == (capability != "default")
    assert (same, count) == ("True", "8")


def test_kernel_refuses_wrong_arguments(calls):
    """The C++ entry point checks what apply_rope guarantees, so a misuse fails loudly."""
    module = _fastpath.kernel()
    x = torch.randn(2, 5, 8)
    cs = torch.randn(5, 8)
    out = torch.empty_like(x)
    module.rope_half(x, cs, out, True)
    bad = {
        "shape (T, d)": (x, torch.randn(4, 8), out),
        "contiguous CPU tensors": (x.transpose(0, 1), cs, out),
        "x's dtype": (x, cs.double(), out),
        "float32 or float64": (x.half(), cs.half(), out.half()),
        "shape of x": (x, cs, torch.empty(2, 5, 6)),
        "even": (torch.randn(2, 5, 7), torch.randn(5, 7), torch.empty(2, 5, 7)),
    }
    for message, args in bad.items():
        with pytest.raises(RuntimeError, match=re.escape(message)):
            module.rope_half(*args, True)
    assert rope_lib.rotation._fastpath is _fastpath


# ------------------------------------------- the torch route, the caches and the huge-page hint


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_huge_page_hint_gives_an_ordinary_tensor(monkeypatch, layout):
    """With the hint on, a result above the size limit (4 MiB here) is a plain torch
    tensor: right values, its own resizable storage, freed like any other."""
    monkeypatch.setenv(_fastpath.HUGE_PAGE_ENV, "1")
    monkeypatch.setattr(_fastpath, "_HUGE_PAGE_MIN_BYTES", 1 << 22)
    found = _fastpath._madvise()
    if found is None:
        pytest.skip("no madvise(MADV_HUGEPAGE) on this platform")
    calls = []

    def recording(start, length, advice):
        calls.append((start, length))
        return found[0](start, length, advice)

    monkeypatch.setattr(_fastpath, "_madvise", lambda: (recording, found[1]))
    rng = np.random.default_rng(33)
    x = torch.from_numpy(rng.standard_normal((4, 1024, 128)).astype(np.float32))  # 2 MiB
    x2 = torch.cat((x, x))  # 4 MiB: hinted
    pos = rng.integers(0, 10**6, size=1024)
    small = apply_rope(x, pos, layout=layout)
    assert not calls  # below the size limit
    big = apply_rope(x2, pos, layout=layout)
    (start, length) = calls[0]
    begin = big.untyped_storage().data_ptr()
    assert start % (1 << 21) == 0 and length % (1 << 21) == 0 and length > 0
    assert begin <= start and start + length <= begin + big.untyped_storage().nbytes()
    assert torch.equal(big[:4], small) and torch.equal(big[4:], small)
    expected = rope_2x2(x[:, :8].double().numpy(), pos[:8], layout=layout)
    assert np.abs(big[:4, :8].double().numpy() - expected).max() < 2e-6 * x.abs().max().item()
    assert big.is_contiguous() and big.untyped_storage().resizable()
    big.resize_(3)  # an ordinary storage can be resized
    assert big.shape == (3,)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_tables_cached_under_inference_mode_serve_training(layout):
    """Evaluation under torch.inference_mode, then a training step at the same positions:
    the cached tables must not be inference tensors (autograd cannot save those)."""
    pos = [11, 12, 13]
    x = torch.randn(3, 24)
    _fastpath._torch_tables.cache_clear()  # the first request is the inference one
    with torch.inference_mode():
        evaluated = apply_rope(x, pos, layout=layout)
    xr = x.clone().requires_grad_()
    trained = apply_rope(xr, pos, layout=layout)
    trained.sum().backward()
    torch.testing.assert_close(trained.detach(), evaluated.clone(), rtol=0, atol=1e-6)
    expected = rope_2x2(np.ones((3, 24)), [-m for m in pos], 10000.0, layout)
    assert np.abs(xr.grad.double().numpy() - expected).max() < 1e-6


def test_huge_page_hint_is_off_by_default_and_switched_on_by_the_environment(monkeypatch):
    """ROPE_LIB_HUGE_PAGES: unset or "0" advises nothing, "1" advises a large result,
    anything else is refused naming the variable."""
    monkeypatch.setattr(_fastpath, "_HUGE_PAGE_MIN_BYTES", 1 << 22)
    found = _fastpath._madvise()
    if found is None:
        pytest.skip("no madvise(MADV_HUGEPAGE) on this platform")
    calls = []
    monkeypatch.setattr(_fastpath, "_madvise", lambda: (lambda *a: calls.append(a) or 0, found[1]))
    x = torch.zeros(4, 1024, 512)  # 8 MiB
    pos = np.arange(1024)
    monkeypatch.delenv(_fastpath.HUGE_PAGE_ENV, raising=False)
    apply_rope(x, pos, layout="half")
    assert not calls  # opt-in: no hint unless asked for
    monkeypatch.setenv(_fastpath.HUGE_PAGE_ENV, "0")
    apply_rope(x, pos, layout="half")
    assert not calls
    monkeypatch.setenv(_fastpath.HUGE_PAGE_ENV, "1")
    apply_rope(x, pos, layout="half")
    assert len(calls) == 1
    monkeypatch.setenv(_fastpath.HUGE_PAGE_ENV, "yes")
    with pytest.raises(
        ValueError,
        match=r"ROPE_LIB_HUGE_PAGES must be 0 \(no hint.*\) or 1 \(the hint\), got 'yes'",
    ):
        apply_rope(x, pos, layout="half")


@pytest.mark.parametrize("row_pairs", [False, True])
@pytest.mark.parametrize("hint", [False, True])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "shape", [(1, 2), (5, 2), (7, 8), (3, 37, 8), (2, 3, 11, 16), (40, 3, 4), (2, 1, 6)]
)
def test_apply_rope_torch_matches_explicit_route(monkeypatch, row_pairs, hint, layout, shape):
    """Both layouts, float64 and float32, with and without the huge-page hint's route (an
    empty result, advised when it spans a whole huge page, then written by ``out=``), and
    in the half layout both forms of the partner terms: two half updates, or one update
    over the view that pairs each row with the next (used from 4 MiB; here at any size)."""
    monkeypatch.setenv(_fastpath.HUGE_PAGE_ENV, "1" if hint else "0")
    monkeypatch.setattr(_fastpath, "_HUGE_PAGE_MIN_BYTES", 1024)
    monkeypatch.setattr(_fastpath, "_ROW_PAIR_MIN_BYTES", 0 if row_pairs else 1 << 62)
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape)
    pos = rng.integers(-3000, 3000, size=shape[-2])
    expected = rope_2x2(x, pos, 500.0, layout)
    got = apply_rope(torch.from_numpy(x), pos, 500.0, layout)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    got32 = apply_rope(torch.from_numpy(x).float(), pos, 500.0, layout)
    assert got32.dtype == torch.float32
    assert np.abs(got32.double().numpy() - expected).max() < 2e-6 * max(1.0, np.abs(x).max())


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_table_cache_keys_positions_base_and_dtype(layout):
    """Calls that differ only in positions, base or dtype, in turn and then again (from the
    cache): each result is the explicit route's at its own positions and base."""
    _fastpath.clear_caches()
    rng = np.random.default_rng(30)
    x = rng.standard_normal((2, 6, 8))
    pos = np.array([0, 5, -3, 100, 7, 2])
    calls = [
        (torch.float64, pos, 10000.0),
        (torch.float64, pos + 1, 10000.0),
        (torch.float64, pos[::-1], 10000.0),
        (torch.float64, pos, 500.0),
        (torch.float32, pos, 500.0),
        (torch.float32, pos, 10000.0),
        (torch.bfloat16, pos, 10000.0),
    ]
    for _ in range(2):
        for dtype, p, base in calls:
            xt = torch.from_numpy(x).to(dtype)
            y = apply_rope(xt, p, base, layout)
            assert y.dtype == dtype
            expected = rope_2x2(xt.double().numpy(), p, base, layout)
            tol = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}[dtype]
            assert np.abs(y.double().numpy() - expected).max() < tol, (dtype, base)
            np_y = apply_rope(xt.double().numpy(), p, base, layout)  # numpy route, same cache
            np.testing.assert_allclose(np_y, expected, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_mutating_inputs_or_outputs_after_a_call_leaves_no_stale_tables(layout):
    """The tables are keyed by the positions' values, not by the array holding them, and
    no result shares memory with a cached table."""
    _fastpath.clear_caches()
    x = torch.from_numpy(np.random.default_rng(31).standard_normal((3, 5, 8)))
    pos = np.arange(5)
    first = apply_rope(x, pos, layout=layout)
    np.testing.assert_allclose(first.numpy(), rope_2x2(x.numpy(), range(5), layout=layout))
    pos *= 7  # the same array, new values
    second = apply_rope(x, pos, layout=layout)
    np.testing.assert_allclose(second.numpy(), rope_2x2(x.numpy(), pos, layout=layout))
    pos_t = torch.arange(5)
    third = apply_rope(x, pos_t, layout=layout)
    pos_t.mul_(7)  # a position tensor changed in place
    np.testing.assert_allclose(apply_rope(x, pos_t, layout=layout).numpy(), second.numpy())
    first.fill_(0.0)  # a result changed in place
    third.mul_(2.0)
    np.testing.assert_allclose(
        apply_rope(x, range(5), layout=layout).numpy(), rope_2x2(x.numpy(), range(5), layout=layout)
    )
    x_np = x.numpy().copy()
    out_np = apply_rope(x_np, range(5), layout=layout)
    out_np[...] = 0.0  # a numpy result changed in place (its cached tables are read-only)
    np.testing.assert_allclose(
        apply_rope(x_np, range(5), layout=layout), rope_2x2(x_np, range(5), layout=layout)
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_tables_are_kept_per_device(layout):
    """Tables built for one device are never handed to a tensor on another: a call on the
    meta device (and on CUDA when present) first, then the same call on the CPU."""
    _fastpath.clear_caches()
    x = torch.from_numpy(np.random.default_rng(32).standard_normal((2, 5, 8)))
    pos = [0, 1, 2, 30, 400]
    devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
    expected = rope_2x2(x.numpy(), pos, layout=layout)
    for device in devices:
        y = apply_rope(x.to(device), pos, layout=layout)
        assert y.device.type == device and y.shape == x.shape and y.dtype == x.dtype
        if device != "meta":
            np.testing.assert_allclose(y.cpu().numpy(), expected, atol=1e-12)
    y = apply_rope(x, pos, layout=layout)
    assert y.device.type == "cpu"
    np.testing.assert_allclose(y.numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_allocations_are_as_chapter_5_says(layout):
    """Chapter 5's account of the torch route (the eager route, which every tensor below the
    fused kernel's size limit takes): float32 and float64 outside autograd, once the tables
    are cached, one new tensor, the output; the first call at new positions also builds the
    tables (interleaved: two casts and the complex table; half: two (N, d) tables); a tensor
    with an odd storage offset is copied first in the interleaved layout; float16 and
    bfloat16, two more (the float32 copy of x, the result converted back); under autograd the
    half layout builds its result out of place; rotary_dim < d adds the concatenation with the
    passed-through coordinates (and, interleaved, a contiguous copy of the rotated slice)."""
    pos = np.arange(5)

    def count(x, **kwargs):
        apply_rope(x, pos, layout=layout, **kwargs)  # tables cached first, as in a model
        return new_tensors(lambda: apply_rope(x, pos, layout=layout, **kwargs))

    for dtype in (torch.float32, torch.float64):
        assert count(torch.randn(2, 5, 16, dtype=dtype))[0] == 1
    _fastpath.clear_caches()
    x_new = torch.randn(2, 5, 16)
    n, ops = new_tensors(lambda: apply_rope(x_new, pos, layout=layout))
    if layout == "interleaved":
        assert n == 4 and ops.count("_to_copy.default") == 2 and "complex.default" in ops
    else:
        assert n == 3 and ops.count("_to_copy.default") == 2
    odd = torch.randn(2 * 5 * 16 + 1)[1:].view(2, 5, 16)  # contiguous, storage offset 1
    assert odd.is_contiguous() and odd.storage_offset() == 1
    assert count(odd)[0] == (1 if layout == "half" else 2)
    # not contiguous: the interleaved layout copies it once first
    strided = torch.randn(5, 2, 16).transpose(0, 1)
    assert count(strided)[0] == (1 if layout == "half" else 2)
    for dtype in (torch.float16, torch.bfloat16):
        n, ops = count(torch.randn(2, 5, 16).to(dtype))
        assert n == 3 and ops.count("_to_copy.default") == 2
    n, ops = count(torch.randn(2, 5, 16, requires_grad=True))
    if layout == "half":
        assert n > 3 and "cat.default" in ops
    else:
        assert n == 1  # the complex product is differentiable as it is
    n, ops = count(torch.randn(2, 5, 16), rotary_dim=8)
    assert n == (2 if layout == "half" else 3) and "cat.default" in ops
