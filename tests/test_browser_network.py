"""Markov networks in a real browser (headless Chromium): pick MN 1 in the sidebar, run, watch
the Network view's node colours change, switch to MN 2 and back, then upload a .uai file (a
refused one first, which says why, then a good one, drawn by the spring layout)."""

from __future__ import annotations

from tests.browser_support import (  # noqa: F401  (fixtures, known to pytest by name)
    TIMEOUT_MS,
    assert_healthy,
    browser_fixture,
    button,
    open_app,
    page_fixture,
    server_fixture,
    shot,
    stop_if_running,
)

RUN_TIMEOUT_MS = 120_000  # the first run compiles its steps
# the open tab's graph: its node trace's colours (P(x = +1) per variable), as one string
NODE_COLOURS = """() => {
    const g = [...document.querySelectorAll('[role="tabpanel"] .js-plotly-plot')]
        .find(e => e.offsetParent !== null);
    if (!g || !g.data) return null;
    const nodes = g.data.find(t => t.name === 'variables');
    return nodes ? JSON.stringify(Array.from(nodes.marker.color)) : null; }"""
RING = (
    "MARKOV\n6\n2 2 2 2 2 2\n6\n"
    + "".join(f"2 {i} {(i + 1) % 6}\n" for i in range(6))
    + "".join("4\n 1.0 0.0 0.5 2.0\n" for _ in range(6))
).encode()


def pick_target(page, label: str) -> None:
    page.locator(".st-key-target").first.click()
    page.get_by_role("option", name=label, exact=True).click()


def node_colours(page, n: int) -> str:
    """The graph's node colours once it shows ``n`` nodes."""
    page.wait_for_function(
        f"n => {{ const c = ({NODE_COLOURS})(); "
        "return c !== null && JSON.parse(c).length === n; }",
        arg=n,
        timeout=RUN_TIMEOUT_MS,
        polling=200,
    )
    return page.evaluate(NODE_COLOURS)


def upload(page, name: str, data: bytes) -> None:
    page.locator('.st-key-network_upload input[type="file"]').set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": data}
    )


def test_mn1_runs_live_switches_and_takes_an_upload(page, server):
    open_app(page, server.url)
    pick_target(page, "Markov network: MN 1")
    before = node_colours(page, 100)
    assert_healthy(page)
    button(page, "run").click()
    page.wait_for_function(
        f"before => {{ const c = ({NODE_COLOURS})(); return c !== null && c !== before; }}",
        arg=before,
        timeout=RUN_TIMEOUT_MS,
        polling=200,
    )  # the colours follow the chains while running
    assert_healthy(page)
    shot(page, "network-mn1")
    stop_if_running(page)

    pick_target(page, "Markov network: MN 2")
    page.get_by_text("MN 2: a 10 × 10 grid network").first.wait_for(timeout=TIMEOUT_MS)
    node_colours(page, 100)
    assert_healthy(page)
    pick_target(page, "Markov network: MN 1")
    page.get_by_text("MN 1: a 10 × 10 grid network").first.wait_for(timeout=TIMEOUT_MS)
    node_colours(page, 100)
    assert_healthy(page)

    pick_target(page, "Markov network: your .uai")
    page.get_by_text("Upload a UAI model file").first.wait_for(timeout=TIMEOUT_MS)
    upload(page, "notes.uai", b"hello")
    page.get_by_text("is not a UAI model file").first.wait_for(timeout=TIMEOUT_MS)
    upload(page, "ring.uai", RING)
    page.get_by_text("6 of its 24 table entries zero").first.wait_for(timeout=TIMEOUT_MS)
    node_colours(page, 6)
    assert_healthy(page)
    shot(page, "network-upload")
