"""Random use in a real browser: seeded sessions make random moves and the page never breaks.

Each session opens the app in headless Chromium and makes ``MOVES`` moves drawn (from its seed)
among the widgets the page shows at that moment: the Source radio, the paper case and sample
selects, the other radios and checkboxes, number steps (the + and - buttons), sliders (arrow
keys), adding and removing samplers, tabs, Run / Pause / Step / Reset, and uploads of photos
made here (a PNG, an odd-sized colour JPEG, an RGBA PNG with transparency, a file that is not
an image). After every move it waits until the script has finished and fails on any exception
element, any "Traceback", "KeyError" or "Something went wrong" on the page, a server path, or a
server that died; the message names the seed and lists the moves that led there.

The tree under test is this checkout, or the one named by ``LSB_RANDOM_USE_ROOT`` (how the
crash of the old sidebar was shown: the same moves against the code before the fix).
``LSB_RANDOM_USE_SEEDS=1-40`` and ``LSB_RANDOM_USE_MOVES=60`` explore further than the suite does.
"""

from __future__ import annotations

import io
import os
import random
import time
from pathlib import Path

import numpy as np
import pytest
from browser_support import (  # noqa: F401  (the *_fixture names register fixtures)
    ROOT,
    TIMEOUT_MS,
    VIEWPORT,
    ServerError,
    StreamlitServer,
    browser_fixture,
    button,
    open_app,
    shared_server,
    shot,
)
from PIL import Image

pytestmark = pytest.mark.browser


def _seeds(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


SEEDS = _seeds(os.environ.get("LSB_RANDOM_USE_SEEDS", "1-3"))
MOVES = int(os.environ.get("LSB_RANDOM_USE_MOVES", "30"))
TREE = Path(os.environ.get("LSB_RANDOM_USE_ROOT", ROOT)).resolve()
VERBOSE = bool(os.environ.get("LSB_RANDOM_USE_VERBOSE"))  # print the moves and their times
SETTLE_S = 30.0  # the longest a move's rerun may take on two busy cores
ACTION_MS = 5_000  # a click or key that cannot happen within this is a move not taken
# a select's list opens within a moment of its opener's click, or not at all (the click only
# took the focus from the list closed just before: measured, the next click opens it)
LIST_MS = 2_000
EMPTY_LIST = '[role="listbox"][data-empty="true"]'  # nothing left to choose
# what an unhandled failure leaves on the page
BROKEN_TEXTS = ("Traceback", "KeyError", "Something went wrong", "has no key", 'File "/')
SIDEBAR = '[data-testid="stSidebar"]'


# ----------------------------------------------------------------------------- the photos
def _encoded(image: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format=fmt)
    return buffer.getvalue()


def photos() -> list[tuple[str, bytes, str]]:
    """Small files of several kinds: (name, bytes, MIME type)."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:60, 0:80]
    disc = np.where((yy - 30) ** 2 + (xx - 40) ** 2 < 400, 60, 200)
    grey = np.clip(disc + rng.normal(0, 12, disc.shape), 0, 255).astype(np.uint8)
    odd = (rng.random((37, 53, 3)) * 255).astype(np.uint8)  # odd size, colour noise
    odd[10:27, 15:40] = (200, 30, 30)
    rgba = np.zeros((45, 45, 4), np.uint8)
    rgba[..., :3] = 90
    rgba[10:35, 10:35] = (250, 250, 250, 255)  # an opaque square on a transparent ground
    rgba[..., 3] = np.maximum(rgba[..., 3], 40)
    return [
        ("disc.png", _encoded(grey, "PNG"), "image/png"),
        ("odd 37x53.jpg", _encoded(odd, "JPEG"), "image/jpeg"),
        ("square.png", _encoded(rgba, "PNG"), "image/png"),
        ("notes.png", b"these are holiday notes, not an image" * 4, "image/png"),
    ]


# ----------------------------------------------------------------------------- the page
def settle(page) -> None:
    """Wait until the script run the move asked for has finished (a running run's live panel
    reruns five times a second: its gaps count as finished too)."""
    time.sleep(0.25)
    page.wait_for_function(
        """() => document.querySelector('[data-testid="stApp"]')
            ?.getAttribute('data-test-script-state') === 'notRunning'""",
        timeout=SETTLE_S * 1000,
        polling=100,
    )


def problems(page) -> list[str]:
    """What shows the page is broken: exception elements and tell-tale texts (one look)."""
    exceptions, body = page.evaluate(
        """() => [[...document.querySelectorAll('[data-testid="stException"]')]
                    .map(e => e.innerText), document.body.innerText]"""
    )
    found = ["exception element: " + " ".join(text.split())[:300] for text in exceptions]
    found += [f"the page says {text!r}" for text in BROKEN_TEXTS if text in body]
    if str(TREE) in body:
        found.append("the page shows a server path")
    return found


def visible(locator) -> bool:
    return locator.count() > 0 and locator.first.is_visible()


# ----------------------------------------------------------------------------- the moves
# A move looks at the page, does one thing a user could do there and says what it did; None
# when the page offers nothing of its kind just now.
def choose_source(page, rng):
    options = page.locator(f'{SIDEBAR} .st-key-source [data-testid="stRadioOption"]')
    labels = [t.strip() for t in options.all_inner_texts()]
    current = page.locator(
        f'{SIDEBAR} .st-key-source [data-testid="stRadioOption"][data-selected="true"]'
    ).all_inner_texts()
    others = [label for label in labels if [label] != [c.strip() for c in current]]
    if not others:
        return None
    label = rng.choice(others)
    options.filter(has_text=label).first.click()
    return f"Source: {label}"


def open_list(page, key: str):
    """Open the option list of the select or multiselect ``key``; its options (or None)."""
    opener = page.locator(f'{SIDEBAR} .st-key-{key} button[aria-label="Open"]')
    if not visible(opener):
        return None
    opener.first.click()
    options = page.locator('[role="listbox"] [role="option"]')
    try:  # an option to click, or the list saying it has none (its "No results" is drawn as
        # an option that is never visible: a multiselect with every option chosen)
        page.locator(f"{EMPTY_LIST}, [role=listbox] [role=option]:visible").first.wait_for(
            state="attached", timeout=LIST_MS
        )
        nothing = page.locator(EMPTY_LIST).count() > 0
    except Exception:  # the list did not open
        nothing = True
    if nothing:
        page.keyboard.press("Escape")
        return None
    return options


def choose_option(page, rng, key: str, name: str):
    options = open_list(page, key)
    if options is None:
        return None
    k = rng.randrange(options.count())
    label = " ".join(options.nth(k).inner_text().split())
    options.nth(k).click()
    return f"{name}: {label}"


def choose_case(page, rng):
    return choose_option(page, rng, "case", "Paper case")


def choose_sample(page, rng):
    return choose_option(page, rng, "sample", "Sample image")


NUMBERS = ("lam", "mu", "sigma", "noise", "seed", "burn_in", "steps", "thin")


def step_number(page, rng):
    keys = [k for k in NUMBERS if visible(page.locator(f"{SIDEBAR} .st-key-{k} input"))]
    if not keys:
        return None
    key = rng.choice(keys)
    way, testid = rng.choice([("+", "stNumberInputStepUp"), ("-", "stNumberInputStepDown")])
    step = page.locator(f'{SIDEBAR} .st-key-{key} [data-testid="{testid}"]')
    if step.first.is_disabled():
        return None
    step.first.click()
    return f"{key} {way}"


def slide(page, rng):
    sliders = {k: page.locator(f".st-key-{k} [role=slider]") for k in ("size", "chains", "speed")}
    keys = [k for k, thumb in sliders.items() if visible(thumb)]
    if not keys:
        return None
    key = rng.choice(keys)
    thumb = page.locator(f".st-key-{key} [role=slider]").first
    if thumb.get_attribute("aria-disabled") == "true":
        return None
    arrow, times = rng.choice(["ArrowLeft", "ArrowRight"]), rng.randint(1, 3)
    thumb.focus()
    for _ in range(times):
        thumb.press(arrow)
    return f"{key} slider: {arrow} x{times}"


RADIOS = ("boundary", "model", "polarity", "start")
CHECKBOXES = ("until_settled", "shared_alpha")


def click_radio(page, rng):
    keys = [k for k in RADIOS if visible(page.locator(f"{SIDEBAR} .st-key-{k}"))]
    if not keys:
        return None
    key = rng.choice(keys)
    options = page.locator(f'{SIDEBAR} .st-key-{key} [data-testid="stRadioOption"]')
    k = rng.randrange(options.count())
    label = options.nth(k).inner_text().strip()
    options.nth(k).click()
    return f"{key}: {label}"


def tick(page, rng):
    keys = [k for k in CHECKBOXES if visible(page.locator(f"{SIDEBAR} .st-key-{k}"))]
    if not keys:
        return None
    key = rng.choice(keys)
    page.locator(f"{SIDEBAR} .st-key-{key} label").first.click()
    return f"{key} ticked or unticked"


def samplers(page, rng):
    remove = page.locator(f'{SIDEBAR} .st-key-samplers button[aria-label^="Remove "]')
    if remove.count() > 0 and rng.random() < 0.5:  # removing the last one is a move too
        k = rng.randrange(remove.count())
        label = remove.nth(k).get_attribute("aria-label")
        remove.nth(k).click()
        return f"samplers: {' '.join(label.split())}"
    options = open_list(page, "samplers")
    if options is None:
        return None
    k = rng.randrange(options.count())
    label = " ".join(options.nth(k).inner_text().split())
    options.nth(k).click()
    page.keyboard.press("Escape")
    return f"samplers: add {label}"


def open_a_tab(page, rng):
    tabs = page.locator('[role="tab"]')
    names = [t.strip() for t in tabs.all_inner_texts() if t.strip()]
    if not names:
        return None
    name = rng.choice(names)
    page.get_by_role("tab", name=name, exact=True).first.click()
    return f"tab {name}"


def press(page, rng):
    keys = [k for k in ("run", "pause", "step", "reset") if visible(button(page, k))]
    keys = [k for k in keys if button(page, k).is_enabled()]
    if not keys:
        return None
    key = rng.choice(keys)
    button(page, key).click()
    return f"press {key.capitalize()}"


def upload(page, rng):
    box = page.locator(f"{SIDEBAR} .st-key-upload input[type=file]")
    if box.count() == 0:
        return None
    name, data, mime = rng.choice(photos())
    box.first.set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}])
    return f"upload {name}"


# (move, weight): changes of source, uploads and the run's buttons are where sessions broke
MOVE_TABLE = (
    (choose_source, 4),
    (choose_case, 2),
    (choose_sample, 2),
    (upload, 3),
    (step_number, 2),
    (slide, 2),
    (click_radio, 1),
    (tick, 1),
    (samplers, 1.5),
    (open_a_tab, 2),
    (press, 3),
)


def answering(page, seed: int, done: list[str]) -> None:
    """Fail, naming the moves, when the page no longer answers at all: a key press would wait
    for it forever (a CI run once hung here until its renderer was killed), a bounded
    ``wait_for_function`` does not."""
    try:
        page.wait_for_function("() => true", timeout=ACTION_MS)
    except Exception as err:
        moves = "\n".join(f"  {k + 1:2d}. {m}" for k, m in enumerate(done))
        pytest.fail(f"seed {seed}: the page stopped answering ({type(err).__name__})\n{moves}")


def walk(page, seed: int, moves: int, check) -> None:
    """``moves`` random moves from ``seed``; ``check(done)`` after each, with the moves so far."""
    rng = random.Random(seed)
    done: list[str] = []
    moves_made = 0
    while moves_made < moves:
        move = rng.choices([m for m, _ in MOVE_TABLE], [w for _, w in MOVE_TABLE])[0]
        try:
            what = move(page, rng)
        except Exception as err:  # a widget that moved away under the pointer: try another
            what = None
            done.append(f"({move.__name__} could not act: {type(err).__name__})")
            answering(page, seed, done)
            page.keyboard.press("Escape")
        if what is None:
            continue
        moves_made += 1
        started = time.monotonic()
        settle(page)
        done.append(f"{what}  [{time.monotonic() - started:.1f} s]" if VERBOSE else what)
        if VERBOSE:
            print(f"seed {seed} move {moves_made}: {done[-1]}", flush=True)
        check(done)


# ----------------------------------------------------------------------------- the test
@pytest.fixture(scope="module", name="server")
def tree_server(request):
    if TREE == ROOT:  # this checkout: the session's server, which the browser modules share
        yield shared_server(request.config)
        return
    process = StreamlitServer(root=TREE)
    try:
        process.start()
    except ServerError as err:
        pytest.fail(str(err))
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("seed", SEEDS)
def test_random_use_never_breaks_the_page(browser, server, seed):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(ACTION_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(f"{err} {err.stack}"))

    def check(done: list[str]) -> None:
        found = problems(page)
        if not server.alive() or not server.healthy():
            found.append(server.describe("died or stopped answering"))
        if errors:
            found.append(f"JavaScript error: {errors[0][:1500]}")
        if found:
            shot(page, f"random-use-seed{seed}-failed")
            moves = "\n".join(f"  {k + 1:2d}. {m}" for k, m in enumerate(done))
            pytest.fail(f"seed {seed}, after move {len(done)}: {found}\nthe moves:\n{moves}")

    try:
        open_app(page, server.url, TIMEOUT_MS)
        check(["open the app"])
        walk(page, seed, MOVES, check)
    finally:
        context.close()
