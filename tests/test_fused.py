"""Tests of the fused half-layout kernel (rope_lib._fused) and of how apply_rope uses it.

Expected values come from two routes independent of the kernel:

* ``rope_2x2`` of tests/test_rotation.py: float64, one explicit 2x2 rotation per pair, with
  frequencies from Python's ``math``;
* the eager torch route of apply_rope (the kernel switched off: ``x * [cos | cos]`` and
  torch's ``addcmul_``), which the kernel must equal bit for bit: it rounds the same
  products and sums, fusing the partner product into the sum (an FMA) exactly when torch's
  CPU capability makes ``addcmul_`` do so (checked under ``ATEN_CPU_CAPABILITY=default``
  too, in a subprocess).

Each test that claims the kernel ran checks it: ``rope_lib._fused.rotate`` is wrapped by a
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
from rope_lib import _fused, apply_rope

from .conftest import ROOT
from .test_rotation import rope_2x2

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def _toolchain() -> bool:
    ninja = shutil.which("ninja") or (Path(sys.executable).parent / "ninja").is_file()
    return bool(ninja and shutil.which("c++"))


@pytest.fixture
def calls(monkeypatch):
    """Kernel on for every size; returns the list of shapes the kernel rotated."""
    if not _toolchain():
        pytest.skip("no C++ compiler or ninja: apply_rope takes the eager route here")
    monkeypatch.delenv(_fused.ENV_VAR, raising=False)
    monkeypatch.setattr(_fused, "ENABLED", True)
    monkeypatch.setattr(_fused, "MIN_BYTES", 0)
    assert _fused.kernel() is not None, _fused.error()
    seen: list[tuple[int, ...]] = []
    real = _fused.rotate

    def counting(x, cs, out):
        seen.append(tuple(x.shape))
        return real(x, cs, out)

    monkeypatch.setattr(_fused, "rotate", counting)
    return seen


def _eager(x, pos, base=10000.0):
    """apply_rope's half layout with the kernel switched off."""
    saved = _fused.ENABLED
    _fused.ENABLED = False
    try:
        return apply_rope(x, pos, base, "half")
    finally:
        _fused.ENABLED = saved


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
    _fused.MIN_BYTES = 1 << 22  # monkeypatched by the fixture, restored after
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
    _fused.MIN_BYTES = 1 << 22
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
    _fused.ENABLED = False
    off = apply_rope(x, pos, layout="half")
    _fused.ENABLED = True
    monkeypatch.setenv(_fused.ENV_VAR, "0")
    env_off = apply_rope(x, pos, layout="half")
    assert calls == []
    monkeypatch.setenv(_fused.ENV_VAR, "1")
    on = apply_rope(x, pos, layout="half")
    assert calls == [(2, 6, 16)]
    assert torch.equal(off, env_off)
    expected = rope_2x2(x.double().numpy(), pos, layout="half")
    for y in (off, on):
        assert np.abs(y.double().numpy() - expected).max() < 2e-6 * x.abs().max().item()
    monkeypatch.setenv(_fused.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="ROPE_LIB_FUSED must be 0 .* or 1 .*got 'yes'"):
        apply_rope(x, pos, layout="half")


@pytest.mark.parametrize("failure", ["compile error", "no ninja"])
def test_failed_build_falls_back_silently(monkeypatch, tmp_path, capfd, failure):
    """A build that fails leaves apply_rope on the eager route: no warning, no output, the
    right numbers; error() says why, and the build is not tried again."""
    monkeypatch.delenv(_fused.ENV_VAR, raising=False)
    monkeypatch.setattr(_fused, "ENABLED", True)
    monkeypatch.setattr(_fused, "MIN_BYTES", 0)
    monkeypatch.setattr(_fused, "_state", _fused._State())
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    if failure == "compile error":
        if not _toolchain():
            pytest.skip("no C++ compiler or ninja")
        monkeypatch.setattr(_fused, "_SOURCE", "#error rope_lib test: a broken kernel\n")
    else:
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        monkeypatch.setattr(_fused, "_ninja_dir", lambda: None)
    builds = []
    real_build = _fused._build
    monkeypatch.setattr(_fused, "_build", lambda: builds.append(1) or real_build())
    x = torch.randn(3, 4, 8)
    pos = [0, 1, 2, 300]
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = apply_rope(x, pos, layout="half")
        second = apply_rope(x, pos, layout="half")
    assert capfd.readouterr() == ("", "")
    assert builds == [1] and _fused.kernel() is None
    message = _fused.error()
    assert message is not None
    assert ("a broken kernel" in message) if failure == "compile error" else ("ninja" in message)
    expected = rope_2x2(x.double().numpy(), pos, layout="half")
    assert torch.equal(first, second)
    assert np.abs(first.double().numpy() - expected).max() < 2e-6 * x.abs().max().item()


# ------------------------------------------------------------------ build and cache


def test_build_directory_is_predictable(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert _fused.build_root() == ROOT / "_build" / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert _fused.build_root() == tmp_path
    directory = _fused.build_directory()
    assert directory.parent == tmp_path and directory.name.startswith("rope_lib_fused_")
    monkeypatch.setattr(_fused, "_SOURCE", _fused._SOURCE + "// changed\n")
    assert _fused.build_directory() != directory  # a changed source gets its own build


def _load_in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = (
        "from rope_lib import _fused; import torch; m = _fused.kernel(); "
        "print(m.__file__ if m else _fused.error())"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def test_compiled_kernel_is_reused_by_later_processes(calls):
    """A second process loads the library the first one compiled (same file, unchanged),
    even with a stale lock file of torch's left by a process killed mid-build, and prints
    nothing."""
    env = dict(os.environ)
    library = Path(_fused.kernel().__file__)
    assert library.parent == _fused.build_directory()
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
from rope_lib import _fused, apply_rope
_fused.MIN_BYTES = 0
rng = np.random.default_rng(0)
same = []
for shape in [(1, 2), (3, 5, 6), (2, 7, 34), (2, 3, 9, 256)]:
    for dtype in (torch.float32, torch.float64):
        x = torch.from_numpy(rng.standard_normal(shape)).to(dtype)
        pos = rng.integers(-10**6, 10**6, size=shape[-2])
        fused = apply_rope(x, pos, 10000.0, "half")
        _fused.ENABLED = False
        eager = apply_rope(x, pos, 10000.0, "half")
        _fused.ENABLED = True
        same.append(torch.equal(fused, eager))
print(torch.backends.cpu.get_cpu_capability(), _fused.variant(), all(same), len(same))
"""


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_kernel_follows_torch_cpu_capability(calls, capability):
    """With torch's vectorized kernels lowered (``ATEN_CPU_CAPABILITY``), the kernel picks
    the variant that rounds as they do, and still equals the eager route bit for bit."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
    done = subprocess.run(
        [sys.executable, "-c", _CAPABILITY_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    torch_capability, variant, same, count = done.stdout.split()
    if torch_capability != capability.upper():
        pytest.skip(f"this CPU cannot run torch's {capability} kernels")
    fused_multiply_add = variant.endswith("+fma")
    assert fused_multiply_add == (capability != "default")
    assert (same, count) == ("True", "8")


def test_kernel_refuses_wrong_arguments(calls):
    """The C++ entry point checks what apply_rope guarantees, so a misuse fails loudly."""
    module = _fused.kernel()
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
    assert rope_lib.rotation._fused is _fused
