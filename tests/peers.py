"""Independent routes shared by the RoPE tests (rotation, implementations, fast path, figures).

Each expected value in those tests comes from here or from a peer implementation, never from
rope_lib's own code: ``rope_2x2`` rotates pair by pair with explicit 2x2 matrices and
frequencies from Python's ``math``; ``mp_tables`` computes cos/sin tables with mpmath.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import torch
from hypothesis import strategies as st


def freqs_math(d: int, base: float) -> list[float]:
    """theta_i = base ** (-2 i / d) with Python floats."""
    return [base ** (-2.0 * i / d) for i in range(d // 2)]


def pairs(d: int, layout: str) -> list[tuple[int, int]]:
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rope_2x2(x, positions, base=10000.0, layout="interleaved"):
    """float64 RoPE with one explicit 2x2 rotation per (position, pair)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    out = np.empty_like(x)
    freqs = freqs_math(d, base)
    for t, m in enumerate(positions):
        for (a, b), th in zip(pairs(d, layout), freqs, strict=True):
            ang = float(m) * th
            block = np.array([[math.cos(ang), -math.sin(ang)], [math.sin(ang), math.cos(ang)]])
            out[..., t, [a, b]] = x[..., t, [a, b]] @ block.T
    return out


def rotation_2x2(m, d, base=10000.0, layout="interleaved"):
    """R_m column by column: column j is the rotated unit vector e_j."""
    return rope_2x2(np.eye(d)[:, None, :], [m], base, layout)[:, 0, :].T


even_d = st.integers(1, 32).map(lambda h: 2 * h)

bases = st.floats(1.5, 1e9, allow_nan=False)

positions_st = st.integers(-(10**6), 10**6)


def mp_tables(pos: int, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    with mpmath.workdps(30):
        angles = [
            mpmath.mpf(pos) * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / d)
            for i in range(d // 2)
        ]
        return (
            np.array([float(mpmath.cos(a)) for a in angles]),
            np.array([float(mpmath.sin(a)) for a in angles]),
        )


def requires_grad(*arrays, dtype=torch.float64):
    return [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


def new_tensors(fn) -> tuple[int, list[str]]:
    """Run ``fn`` under a torch dispatch mode; return how many tensors its aten ops created
    with storage of their own (not a view, not an in-place result), and the op names."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    ops: list[tuple[str, int]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = tree_flatten((args, kwargs))[0]
            given = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
            made = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            ops.append(
                (func.__name__, sum(t.untyped_storage().data_ptr() not in given for t in made))
            )
            return out

    with Record():
        fn()
    return sum(n for _, n in ops), [name for name, _ in ops]


def one_layer_config(config_class, **sizes):
    """A Hugging Face model config of one layer with an MLP 8 wide and a vocabulary of 8
    tokens (sizes the attention tests never reach), the given ``sizes``, and eager attention
    (the plain code path that the tests spy on)."""
    config = config_class(intermediate_size=8, num_hidden_layers=1, vocab_size=8, **sizes)
    config._attn_implementation = "eager"
    return config


def spy_on_rotary(monkeypatch, module) -> dict:
    """Wrap ``module.apply_rotary_pos_emb`` (a Hugging Face modeling module's) for the test:
    each call records the queries and keys it is given (``q``, ``k``) and those it returns
    rotated (``q_rot``, ``k_rot``) in the dict returned here."""
    seen: dict = {}
    real = module.apply_rotary_pos_emb

    def spy(q, k, *args, **kwargs):
        out = real(q, k, *args, **kwargs)
        seen.update(q=q, k=k, q_rot=out[0], k_rot=out[1])
        return out

    monkeypatch.setattr(module, "apply_rotary_pos_emb", spy)
    return seen
