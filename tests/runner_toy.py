"""A toy experiment for tests/test_runner.py: each run squares a number (no torch, no rope_lib).

Worker processes import it by name, so it lives in its own module.  ``LOG`` (a path given by
the test through the environment) receives one line per run: the number and the process id.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from rope_lib.experiments.runner import Experiment


@dataclass(frozen=True)
class ToyConfig:
    name: str
    numbers: tuple[int, ...]
    pause: float = 0.0


CONFIGS = {"toy": ToyConfig("toy", (1, 2, 3, 4)), "smoke": ToyConfig("smoke", (5, 6))}


def runs(config: ToyConfig) -> list[dict]:
    return [{"n": n} for n in config.numbers]


def run(config: ToyConfig, params: dict) -> dict:
    time.sleep(config.pause)
    log = os.environ.get("TOY_RUN_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{params['n']} {os.getpid()}\n")
    return {**params, "square": params["n"] ** 2}


def cost(config: ToyConfig, params: dict) -> float:
    return float(params["n"])


TOY = Experiment(
    name="toy",
    modules=("tests.runner_toy",),
    configs="tests.runner_toy:CONFIGS",
    runs="tests.runner_toy:runs",
    run="tests.runner_toy:run",
    cost="tests.runner_toy:cost",
    chapter=("toy",),
)
