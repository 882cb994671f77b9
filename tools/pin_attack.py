"""The red team's pin attack (issue 29, finding 2) with the store's real caps:
``python -m tools.pin_attack [--sessions 300]``.

A victim pins 3 runs (written 23 hours ago), then each of ``--sessions`` fresh sessions (the
library API, one token each, as a new browser session gets) tries to pin 8 of the largest
pins the schema accepts. Prints what the victim keeps, what the attackers kept, the store's
size and every refusal. A throwaway store under the temp folder; the real one is not touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from app import config as cfgmod
from app import pin_store, pins
from app.pin_store import PinStore
from lsbcore.samplers.registry import APP_SAMPLERS


def largest_pin() -> pins.Pin:
    """Every sampler, a 500-lag autocorrelation and g curves of numbers at full precision."""
    rng = np.random.default_rng(0)
    cfg = replace(cfgmod.defaults_for("paper", 1), samplers=tuple(APP_SAMPLERS))
    pin = pins.Pin(
        name="x", created=1.7e9, problem="p" * 200, config=cfg, steps=10**6, phase="mixing",
        shared=True, max_lag=500,
        samplers={
            n: dict(zip(pins.SUMMARY_FIELDS, rng.uniform(-1e3, 1e3, 8).tolist(), strict=False))
            for n in cfg.samplers
        },
        acf={n: (-rng.uniform(0.1, 0.99, 501) * 1e-5).tolist() for n in cfg.samplers},
        g={n: (rng.uniform(1, 9, 129) * 1e-5).tolist() for n in cfg.samplers},
    )  # fmt: skip
    return pins.from_json(pin.to_json())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pin-attack-"))
    pin_store.ROOT = root
    try:
        big = largest_pin()
        victim = PinStore(pin_store.new_token())
        kept = [victim.save(replace(big, acf={}, g={})) for _ in range(3)]
        for pin_id in kept:
            then = time.time() - 23 * 3600
            os.utime(victim.dir / f"{pin_id}.json", (then, then))
        refusals: dict[str, int] = {}
        saved, start = 0, time.perf_counter()
        for _ in range(args.sessions):
            attacker = PinStore(pin_store.new_token())
            for _ in range(8):
                try:
                    attacker.save(big)
                    saved += 1
                except pins.PinError as err:
                    refusals[str(err)] = refusals.get(str(err), 0) + 1
        seconds = time.perf_counter() - start
        left = victim.entries()
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        print(
            f"pin of {len(big.to_json()):,} bytes; the victim keeps {len(left)} of {len(kept)}; "
            f"attackers' pins kept {saved:,}; store {size / 1e6:.1f} MB in "
            f"{len(os.listdir(root))} sets; {seconds / (8 * args.sessions) * 1e3:.1f} ms a save"
        )
        for text, count in refusals.items():
            print(f"  refused {count:,} times: {text[:160]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
