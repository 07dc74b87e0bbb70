"""Shared pytest configuration: a headless matplotlib backend, quiet hypothesis, and the fixtures
that several test modules use (a peer's RoPE pieces, chapter 2's expansion and its series)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from rope_lib import taylor as ty  # noqa: E402

from .taylor_routes import RATIONAL_POINT, output_model_by_hand, ray_coefficients  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"

settings.register_profile("book", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


@pytest.fixture(scope="session")
def hf():
    """Hugging Face's Llama RoPE pieces (the peer of the half layout): ``apply_rotary_pos_emb``,
    ``rotate_half`` and a ``LlamaRotaryEmbedding`` factory."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    def rotary(d: int, base: float):
        config = LlamaConfig(
            hidden_size=2 * d,
            num_attention_heads=2,
            head_dim=d,
            rope_parameters={"rope_theta": base, "rope_type": "default"},
        )
        return modeling_llama.LlamaRotaryEmbedding(config)

    return SimpleNamespace(
        apply_rotary_pos_emb=modeling_llama.apply_rotary_pos_emb,
        rotate_half=modeling_llama.rotate_half,
        make_rotary=rotary,
    )


@pytest.fixture
def size_limit(monkeypatch):
    """``size_limit(n, call, message)`` checks that a size check of rope_lib sits exactly at
    MAX_ELEMENTS = n: with MAX_ELEMENTS = n, ``call()`` goes through (its result is returned);
    with n - 1 it raises ValueError with a message that matches ``message`` from its start."""
    import rope_lib._validate as validate

    def check(n, call, message):
        monkeypatch.setattr(validate, "MAX_ELEMENTS", n)
        result = call()
        monkeypatch.setattr(validate, "MAX_ELEMENTS", n - 1)
        with pytest.raises(ValueError, match="^" + message):
            call()
        return result

    return check


@pytest.fixture(scope="session")
def output_expansion():
    """Chapter 2's expansion of the two-token attention output model, d = 2."""
    f, x_m, x_n = ty.attention_output_model(2)
    return ty.second_order_expansion(f, x_m, x_n)


@pytest.fixture(scope="session")
def ray_coeffs():
    """Series coefficients of the attention output model along the ray of RATIONAL_POINT,
    from the model written independently of the library (quotient of exponentials)."""
    f, x_m, x_n = output_model_by_hand()
    p = RATIONAL_POINT
    return ray_coefficients(f, x_m, x_n, p["x_m"], p["x_n"], p["p_hat_m"], p["p_hat_n"])
