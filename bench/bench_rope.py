"""Benchmark of rope_lib.apply_rope against the real RoPE implementations (torch, float32, CPU).

Run ``python bench/bench_rope.py`` (or ``main()``).  Queries and keys of shape
(1, 32, 4096, 128) in float32 are rotated, in the same run and in interleaved repetitions, by

* ``rope_lib`` with ``layout="interleaved"`` and with ``layout="half"`` (tables cached, as
  when every layer of a model rotates at the same positions; a cold call is timed too);
* Hugging Face's ``apply_rotary_pos_emb`` (half layout) with the cos/sin tables of
  ``LlamaRotaryEmbedding`` computed beforehand (a model computes them once per forward);
* the LLaMA reference method (complex multiplication, ``torch.view_as_complex``), with its
  ``freqs_cis`` table computed beforehand;
* a plain copy of the same bytes (``clone`` of q and k): the memory floor.

It prints the minimum and median of each, the ratios to the fastest peer and to the floor,
and the largest error of each route against a float64 reference at positions 0..4095.
Goal: rope_lib at least as fast as the fastest peer and within 3x of the memory floor.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

import rope_lib
from rope_lib import apply_rope, llama_apply_rotary_emb, llama_precompute_freqs_cis

SHAPE = (1, 32, 4096, 128)  # (batch, heads, T, d)
BASE = 10000.0
REPEATS = 9


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


def main(repeats: int = REPEATS) -> dict[str, float]:
    torch.manual_seed(0)
    B, H, T, d = SHAPE
    q = torch.randn(B, H, T, d)
    k = torch.randn(B, H, T, d)
    positions = np.arange(T)
    apply_hf, cos, sin = _hf_routes(d, T)
    freqs_cis = llama_precompute_freqs_cis(d, T, BASE)
    q_llama, k_llama = q.transpose(1, 2), k.transpose(1, 2)  # LLaMA's (B, T, H, d) view

    def cold_rope():
        rope_lib.rotation._cos_sin_float64.cache_clear()
        rope_lib.rotation._torch_tables.cache_clear()
        return apply_rope(q, positions, BASE), apply_rope(k, positions, BASE)

    routes = {
        "rope_lib interleaved": lambda: (
            apply_rope(q, positions, BASE),
            apply_rope(k, positions, BASE),
        ),
        "rope_lib half": lambda: (
            apply_rope(q, positions, BASE, "half"),
            apply_rope(k, positions, BASE, "half"),
        ),
        "rope_lib interleaved, cold tables": cold_rope,
        "HF apply_rotary_pos_emb": lambda: apply_hf(q, k, cos, sin),
        "LLaMA complex": lambda: llama_apply_rotary_emb(q_llama, k_llama, freqs_cis),
        "copy (memory floor)": lambda: (q.clone(), k.clone()),
    }
    outputs = {name: fn() for name, fn in routes.items()}  # warm-up, and outputs for accuracy
    times: dict[str, list[float]] = {name: [] for name in routes}
    names = list(routes)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
            start = time.perf_counter()
            routes[name]()
            times[name].append(time.perf_counter() - start)

    reference = apply_rope(q.double(), positions, BASE)  # float64, tested against peers
    ref_half = apply_rope(q.double(), positions, BASE, "half")
    errors = {
        "rope_lib interleaved": outputs["rope_lib interleaved"][0].double() - reference,
        "rope_lib half": outputs["rope_lib half"][0].double() - ref_half,
        "rope_lib interleaved, cold tables": outputs["rope_lib interleaved, cold tables"][
            0
        ].double()
        - reference,
        "HF apply_rotary_pos_emb": outputs["HF apply_rotary_pos_emb"][0].double() - ref_half,
        "LLaMA complex": outputs["LLaMA complex"][0].transpose(1, 2).double() - reference,
    }

    best = {name: min(t) for name, t in times.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    peers = ("HF apply_rotary_pos_emb", "LLaMA complex")
    fastest_peer = min(peers, key=lambda n: median[n])
    floor = "copy (memory floor)"
    print(
        f"RoPE on q and k of shape {SHAPE}, float32, CPU, {torch.get_num_threads()} threads, "
        f"{repeats} interleaved repetitions"
    )
    print(
        f"{'route':36s} {'min ms':>8s} {'median ms':>10s} {'med/peer':>9s} {'med/floor':>10s} "
        f"{'max error':>10s}"
    )
    for name in routes:
        err = f"{errors[name].abs().max().item():.1e}" if name in errors else "-"
        print(
            f"{name:36s} {1e3 * best[name]:8.1f} {1e3 * median[name]:10.1f} "
            f"{median[name] / median[fastest_peer]:9.2f} {median[name] / median[floor]:10.2f} "
            f"{err:>10s}"
        )
    print(f"fastest peer (median): {fastest_peer}")
    for name in ("rope_lib interleaved", "rope_lib half"):
        ok_peer = median[name] <= median[fastest_peer]
        ok_floor = median[name] <= 3.0 * median[floor]
        print(
            f"{name}: {'meets' if ok_peer else 'MISSES'} 'at least as fast as the fastest peer' "
            f"(ratio {median[name] / median[fastest_peer]:.2f}); "
            f"{'meets' if ok_floor else 'MISSES'} 'within 3x of the memory floor' "
            f"(ratio {median[name] / median[floor]:.2f})"
        )
    return median


if __name__ == "__main__":
    main()
