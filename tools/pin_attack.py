"""The red team's pin attack (issue 29 finding 2, issue 47 finding 9) with the store's real caps
and limits: ``python -m tools.pin_attack [--sessions 300] [--addresses 1]``.

A victim pins 3 runs (written 23 hours ago), then each of ``--sessions`` fresh sessions (the
library API, one token and one tab each, as a new browser session gets, from ``--addresses``
network addresses in turn) tries to pin 8 of the largest pins the schema accepts, all within a
second of the clock; then a newcomer from another address pins once, and another an hour later
(when the sets nobody used since may be removed to make room). Prints what the victim keeps,
what the attackers kept, whether the newcomer could pin, the store's size and every refusal. A
throwaway store under the temp folder; the real one is not touched.
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
from app.pin_allowance import Visitor
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
    parser.add_argument("--addresses", type=int, default=1, help="the attackers' addresses")
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
        now = time.time()
        for k in range(args.sessions):
            attacker = PinStore(pin_store.new_token())
            tab = Visitor(
                f"tab {k}", f"10.{k % args.addresses // 256}.{k % args.addresses % 256}.1"
            )
            for _ in range(8):
                try:
                    attacker.save(big, now=now + k / args.sessions, visitor=tab)
                    saved += 1
                except pins.PinError as err:
                    refusals[str(err)] = refusals.get(str(err), 0) + 1
        seconds = time.perf_counter() - start
        try:
            newcomer = PinStore(pin_store.new_token())
            newcomer.save(big, now=now + 1, visitor=Visitor("newcomer", "192.0.2.1"))
            came_in = "pinned"
        except pins.PinError as err:
            came_in = f"refused: {str(err)[:100]}"
        left = victim.entries()
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        sets = len(os.listdir(root))
        print(
            f"pin of {len(big.to_json()):,} bytes; the victim keeps {len(left)} of {len(kept)}; "
            f"attackers' pins kept {saved:,}; the newcomer {came_in}; store {size / 1e6:.1f} MB "
            f"in {sets} sets; {seconds / (8 * args.sessions) * 1e3:.1f} ms a save"
        )
        later = PinStore(pin_store.new_token())  # an hour on, nobody used the attackers' sets
        later.save(big, now=now + pin_store.IDLE_S + 2, visitor=Visitor("later", "192.0.2.2"))
        print(f"  an hour later another newcomer pinned; sets {sets} -> {len(os.listdir(root))}")
        for text, count in refusals.items():
            print(f"  refused {count:,} times: {text[:160]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
