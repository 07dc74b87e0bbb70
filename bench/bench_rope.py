"""Benchmark of rope_lib.apply_rope against the real RoPE implementations (torch, float32, CPU).

Run ``python -m bench rope`` (or ``python bench/bench_rope.py``, or ``main()``).  Queries and
keys of shape (1, 32, 4096, 128) in float32 are rotated, in the same run and in interleaved
repetitions (the order of the routes rotates from one repetition to the next), by

* ``rope_lib`` with ``layout="interleaved"`` and with ``layout="half"`` (tables cached, as
  when every layer of a model rotates at the same positions; a cold call, tables rebuilt
  from the float64 angles, is timed too, and the caches it empties are refilled untimed
  right after it, so that no other row pays for them), and the half layout once more with the
  opt-in huge-page hint switched on (``ROPE_LIB_HUGE_PAGES=1``, off by default:
  results of 32 MiB and more are advised to live on 2 MiB pages, which cuts the page faults
  of their first write; only the allocation differs, the arithmetic is the same; only
  rope_lib gets huge pages in that row, so it counts toward no goal), and once more with the
  fused C++ kernel switched off (``_fastpath.FUSED_ENABLED``): the eager two-pass route
  that a machine without a compiler takes.  The fused kernel is built (or loaded from its
  cache) before anything is timed; the header says how long that took and where it lives;
* Hugging Face's ``apply_rotary_pos_emb`` (half layout) with the cos/sin tables of
  ``LlamaRotaryEmbedding`` computed beforehand (a model computes them once per forward);
* the LLaMA reference method (complex multiplication, ``torch.view_as_complex``, interleaved
  layout), with its ``freqs_cis`` table computed beforehand;
* the ``rotary-embedding-torch`` package (interleaved layout), its frequency cache filled
  beforehand;
* the memory floor: a copy of q and k into two buffers allocated once before the timing
  (``copy_``): it reads q and k and writes two tensors of their size, as every route
  must, and allocates nothing;
* ``clone`` of q and k: the same copy into freshly allocated tensors.  Every route above
  returns new tensors, so it pays this allocation (and the page faults of first touching
  the new memory) too; the gap between this row and the floor is that cost.

Every route runs under the process's torch thread count (``torch.get_num_threads()``,
printed in the header); the benchmark does not change it.
The table gives the minimum and the median of each route, the ratio of each median to the
fastest peer's and to the floor's, and the largest error of each route against a float64
reference at positions 0..4095.  The goal printed at the end: ``rope_lib`` in each layout
at least as fast (median) as the fastest peer.  Only ratios within one run mean anything:
the machine may be shared, so run the benchmark more than once.

The huge-page hint is an allocation choice, not faster arithmetic: PyTorch gives every large
CPU tensor huge pages when run with ``THP_MEM_ALLOC_ENABLE=1``, and then the peers' page
faults shrink too; ``THP_MEM_ALLOC_ENABLE=1 python -m bench rope`` shows that comparison.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch

from rope_lib import _fastpath, apply_rope, llama_apply_rotary_emb, llama_precompute_freqs_cis

SHAPE = (1, 32, 4096, 128)  # (batch, heads, T, d)
BASE = 10000.0
REPEATS = 9
QUICK_REPEATS = 3
FLOOR = "copy into preallocated buffers"
#: The one row where rope_lib alone gets huge pages: shown, but counted toward no goal.
HINTED = "rope_lib half, huge pages (rope_lib only)"
PEERS = ("HF apply_rotary_pos_emb", "LLaMA complex", "rotary-embedding-torch")


def _hf_routes(d: int, T: int):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = LlamaConfig(
        hidden_size=32 * d,
        num_attention_heads=32,
        head_dim=d,
        rope_parameters={"rope_theta": BASE, "rope_type": "default"},
    )
    emb = LlamaRotaryEmbedding(config)
    cos, sin = emb(torch.zeros(1, T, d), torch.arange(T)[None])
    return apply_rotary_pos_emb, cos, sin


def _rotary_embedding_torch(d: int, T: int):
    from rotary_embedding_torch import RotaryEmbedding

    rotary = RotaryEmbedding(dim=d, theta=BASE, cache_max_seq_len=T)
    rotary.rotate_queries_or_keys(torch.zeros(1, 1, T, d), seq_dim=-2)  # fills its cache
    return rotary


def main(repeats: int = REPEATS, quick: bool = False) -> dict[str, float]:
    """Time every route and print the table; ``quick``: :data:`QUICK_REPEATS` repetitions."""
    if quick:
        repeats = min(repeats, QUICK_REPEATS)
    start = time.perf_counter()
    kernel = _fastpath.kernel()  # builds it, or loads it from the cache
    ready = time.perf_counter() - start
    torch.manual_seed(0)
    B, H, T, d = SHAPE
    q = torch.randn(B, H, T, d)
    k = torch.randn(B, H, T, d)
    positions = np.arange(T)
    apply_hf, cos, sin = _hf_routes(d, T)
    freqs_cis = llama_precompute_freqs_cis(d, T, BASE)
    q_llama, k_llama = q.transpose(1, 2), k.transpose(1, 2)  # LLaMA's (B, T, H, d) view
    rotary = _rotary_embedding_torch(d, T)
    q_buf, k_buf = torch.empty_like(q), torch.empty_like(k)
    q_buf.fill_(0.0)  # touched once here, so the floor pays no page faults
    k_buf.fill_(0.0)

    def hinted_half():
        os.environ[_fastpath.HUGE_PAGE_ENV] = "1"
        try:
            return apply_rope(q, positions, BASE, "half"), apply_rope(k, positions, BASE, "half")
        finally:
            del os.environ[_fastpath.HUGE_PAGE_ENV]

    def eager_half():
        _fastpath.FUSED_ENABLED = False
        try:
            return apply_rope(q, positions, BASE, "half"), apply_rope(k, positions, BASE, "half")
        finally:
            _fastpath.FUSED_ENABLED = True

    def cold_rope():
        _fastpath.clear_caches()
        return apply_rope(q, positions, BASE), apply_rope(k, positions, BASE)

    def warm_tables():
        """Refill, untimed, the table caches that cold_rope emptied, so the routes timed
        after it find their tables cached as their rows say (a small x: eager route)."""
        for layout in ("interleaved", "half"):
            apply_rope(torch.zeros(1, T, d), positions, BASE, layout)

    routes = {
        "rope_lib interleaved": lambda: (
            apply_rope(q, positions, BASE),
            apply_rope(k, positions, BASE),
        ),
        "rope_lib half": lambda: (
            apply_rope(q, positions, BASE, "half"),
            apply_rope(k, positions, BASE, "half"),
        ),
        HINTED: hinted_half,
        "rope_lib half, eager (no fused kernel)": eager_half,
        "rope_lib interleaved, cold tables": cold_rope,
        "HF apply_rotary_pos_emb": lambda: apply_hf(q, k, cos, sin),
        "LLaMA complex": lambda: llama_apply_rotary_emb(q_llama, k_llama, freqs_cis),
        "rotary-embedding-torch": lambda: (
            rotary.rotate_queries_or_keys(q, seq_dim=-2),
            rotary.rotate_queries_or_keys(k, seq_dim=-2),
        ),
        FLOOR: lambda: (q_buf.copy_(q), k_buf.copy_(k)),
        "clone (fresh buffers)": lambda: (q.clone(), k.clone()),
    }
    outputs = {name: fn() for name, fn in routes.items()}  # warm-up, and outputs for accuracy
    warm_tables()
    times: dict[str, list[float]] = {name: [] for name in routes}
    names = list(routes)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
            start = time.perf_counter()
            routes[name]()
            times[name].append(time.perf_counter() - start)
            if routes[name] is cold_rope:
                warm_tables()

    reference = apply_rope(q.double(), positions, BASE)  # float64, tested against peers
    ref_half = apply_rope(q.double(), positions, BASE, "half")
    first = {name: out[0] for name, out in outputs.items()}
    first["LLaMA complex"] = first["LLaMA complex"].transpose(1, 2)
    half_routes = (
        "rope_lib half",
        HINTED,
        "rope_lib half, eager (no fused kernel)",
        "HF apply_rotary_pos_emb",
    )
    errors = {
        name: (first[name].double() - (ref_half if name in half_routes else reference))
        .abs()
        .max()
        .item()
        for name in names
        if name.startswith("rope_lib") or name in PEERS
    }

    best = {name: min(t) for name, t in times.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    fastest_peer = min(PEERS, key=lambda n: median[n])
    print(
        f"RoPE on q and k of shape {SHAPE}, float32, CPU, {torch.get_num_threads()} threads, "
        f"{repeats} interleaved repetitions"
    )
    if kernel is None:
        print(f"fused half-layout kernel: unavailable ({_fastpath.error()})")
    else:
        print(
            f"fused half-layout kernel: ready in {ready:.1f} s (built, or loaded from the "
            f"cache) in {_fastpath.build_directory()}"
        )
    print(
        f"{'route':40s} {'min ms':>8s} {'median ms':>10s} {'med/peer':>9s} {'med/floor':>10s} "
        f"{'max error':>10s}"
    )
    for name in routes:
        err = f"{errors[name]:.1e}" if name in errors else "-"
        print(
            f"{name:40s} {1e3 * best[name]:8.1f} {1e3 * median[name]:10.1f} "
            f"{median[name] / median[fastest_peer]:9.2f} {median[name] / median[FLOOR]:10.2f} "
            f"{err:>10s}"
        )
    print(f"fastest peer (median): {fastest_peer}; floor: {FLOOR}")
    # Rows under the same memory conditions as the peers only (the hinted row is not one).
    for name in (
        "rope_lib interleaved",
        "rope_lib half",
        "rope_lib half, eager (no fused kernel)",
    ):
        ratio = median[name] / median[fastest_peer]
        print(
            f"{name}: {'meets' if ratio <= 1.0 else 'MISSES'} 'at least as fast as the "
            f"fastest peer' (median ratio {ratio:.2f}); {median[name] / median[FLOOR]:.2f} "
            f"times the floor"
        )
    return median


if __name__ == "__main__":
    main()
