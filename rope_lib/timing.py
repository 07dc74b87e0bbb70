"""Timing of the RoPE routes that chapter 5 shows (a tools layer: it measures, it proves nothing).

The numbers are measurements on the machine that runs the call; no test asserts a time, and
speed claims live in ``make bench``.  Like the figures, this module may import the math
modules and is imported by none of them.
"""

from __future__ import annotations

import numpy as np

from ._validate import check_dim, check_elements, check_positive_int, check_seed
from .implementations import (
    apply_rope_matrix,
    apply_rotate_half,
    llama_apply_rotary_emb,
    llama_precompute_freqs_cis,
    rotate_half_cos_sin,
)
from .rotation import apply_rope

__all__ = ["time_rope_routes"]

#: Limits of :func:`time_rope_routes`: repeats, and repeats x the explicit route's work.
_MAX_REPEATS = 1000


_MAX_TIMING_WORK = 1 << 32


def time_rope_routes(
    batch: int = 1, heads: int = 8, N: int = 256, d: int = 64, repeats: int = 25, seed: int = 0
) -> dict[str, float]:
    r"""Median wall-clock time of each RoPE route, rotating a query and a key, in microseconds.

    A query and a key tensor of shape ``(batch, heads, N, d)``, float32 (positions
    ``0 .. N-1``, base :math:`10^4`, random entries from ``seed``), are rotated ``repeats``
    times by each route, the routes taking turns so that they share the machine's state; the
    tables are built beforehand, as a model builds them once per forward pass.  Routes:

    * ``"explicit matrix"``: :func:`apply_rope_matrix` (float64 numpy; builds the ``N``
      matrices, :math:`O(N d^2)`);
    * ``"LLaMA complex"``: :func:`llama_apply_rotary_emb` on the ``(batch, N, heads, d)``
      views;
    * ``"rotate_half"``: :func:`apply_rotate_half` with the float32 tables (Hugging Face's
      formula);
    * ``"apply_rope interleaved"``, ``"apply_rope half"``: :func:`apply_rope` on the torch
      tensors (tables cached after the first call);
    * ``"copy"``: ``clone`` of both tensors, the cost of reading and writing them once.

    torch runs on one thread during the measurement (the previous setting is restored).  The
    numbers are measurements on the machine that runs the call; nothing here asserts a time.

    ``seed`` is any integer >= 0; torch's generator takes 64 bits, so it is seeded with
    ``seed % 2**63`` (seeds below :math:`2^{63}` are used as they are).

    Limits: ``repeats <= 1000``, and ``repeats * batch * heads * N * d**2`` (the explicit
    route's multiply-adds) at most :math:`2^{32}`; the defaults use about 5 % of that budget.

    Returns
    -------
    dict
        Route name to median time in microseconds, in the order above.
    """
    import time

    import torch

    batch, heads, N = (
        check_positive_int(value, name)
        for name, value in (("batch", batch), ("heads", heads), ("N", N))
    )
    repeats = check_positive_int(
        repeats, "repeats", maximum=_MAX_REPEATS, hint="medians need no more than a few dozen"
    )
    d = check_dim(d)
    seed = check_seed(seed)
    check_elements(
        2 * batch * heads * N * d,
        f"the query and key tensors of shape (batch, heads, N, d) = ({batch}, {heads}, {N}, {d})",
    )
    check_elements(N * d * d, f"the explicit route's N = {N} matrices of shape (d, d) = ({d}, {d})")
    work = repeats * batch * heads * N * d * d  # the explicit route's multiply-adds dominate
    if work > _MAX_TIMING_WORK:
        raise ValueError(
            f"repeats * batch * heads * N * d * d = {work} multiply-adds of the explicit route "
            f"exceed the timing budget of {_MAX_TIMING_WORK} (2**32); lower repeats or the shape"
        )
    gen = torch.Generator().manual_seed(seed % (1 << 63))
    q, k = torch.randn(2, batch, heads, N, d, generator=gen)
    q_l, k_l = q.transpose(1, 2), k.transpose(1, 2)  # LLaMA's (batch, N, heads, d) views
    q_np, k_np = q.numpy(), k.numpy()
    pos = np.arange(N)
    freqs_cis = llama_precompute_freqs_cis(d, N)
    cos, sin = rotate_half_cos_sin(pos, d)
    routes = {
        "explicit matrix": lambda: (apply_rope_matrix(q_np, pos), apply_rope_matrix(k_np, pos)),
        "LLaMA complex": lambda: llama_apply_rotary_emb(q_l, k_l, freqs_cis),
        "rotate_half": lambda: (apply_rotate_half(q, cos, sin), apply_rotate_half(k, cos, sin)),
        "apply_rope interleaved": lambda: (apply_rope(q, pos), apply_rope(k, pos)),
        "apply_rope half": lambda: (
            apply_rope(q, pos, layout="half"),
            apply_rope(k, pos, layout="half"),
        ),
        "copy": lambda: (q.clone(), k.clone()),
    }
    times: dict[str, list[float]] = {name: [] for name in routes}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared machine, thread contention swamps small shapes
    try:
        for route in routes.values():  # warm-up: caches, allocator
            route()
        for _ in range(repeats):
            for name, route in routes.items():
                start = time.perf_counter()
                route()
                times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return {name: 1e6 * float(np.median(t)) for name, t in times.items()}
