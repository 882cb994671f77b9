"""The reproduction ledger at the top of docs/reproduction.md: it is what its data renders, every
claim is complete, and a generated section whose verdict disagrees with the ledger fails."""

from pathlib import Path

import pytest

from lsbcore.studies import BY_NAME, reproduce
from lsbcore.studies.ledger import cli, document
from lsbcore.studies.ledger.claims import CLAIMS, NOT_ATTEMPTED, SOURCES, STATUSES

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reproduction.md"


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_the_page_opens_with_the_ledger_its_data_renders(page):
    assert page.startswith(document.BEGIN)
    assert document.ledger_of(page) == document.render(), "run python -m lsbcore.studies ledger"


def test_every_generated_verdict_agrees_with_the_ledger(page):
    assert document.disagreements(page) == []


def test_every_claim_has_a_source_status_command_and_a_reason_when_not_attempted():
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)
    for c in CLAIMS:
        assert c.status in STATUSES, c.id
        assert c.command.strip(), c.id
        assert c.claim.endswith("."), c.id
        assert any(c.source.startswith(s) for s in SOURCES), c.id
        if c.status == NOT_ATTEMPTED:
            assert c.reason.strip(), c.id
        else:
            assert c.figure.strip() and c.shown.strip(), c.id
    assert {s for s in SOURCES if any(c.source.startswith(s) for c in CLAIMS)} == set(SOURCES)


def test_table_2_has_a_claim_per_cell_read_from_its_marks(page):
    cells = [c for c in CLAIMS if c.check and c.check.reader == "ising-cell"]
    assert len(cells) == 24
    statuses = {c.check.anchor: document.section_verdict(page, c.check) for c in cells}
    assert statuses["4,barker"] == "not reproduced" and statuses["4,lsb2"] == "within a wide bound"
    assert statuses["1,barker"] == "reproduced"


def test_the_small_rbms_claims_are_each_named_beside_the_paper_size_verdict(page):
    """The 64 x 50 RBM's section judges the claims the 784 x 250 one judges (the ledger's
    status): each of its bullets has a ledger entry checked on the paper-size section whose
    figures name the small model's result too (Table 4's counts are the same on both)."""
    text = document.sections(page)["rbm-digits"].split("### Which claims hold", 1)[1]
    bullets = [ln for ln in text.split("\n### ", 1)[0].splitlines() if ln.startswith("- ")]
    assert bullets
    for bullet in bullets:
        entries = [c for c in CLAIMS if c.check and c.check.section == "rbm-digits-28x28"
                   and c.check.anchor in bullet]  # fmt: skip
        assert entries, bullet[:80]
        if "Table 4" not in bullet:
            assert any("64 x 50" in c.figure for c in entries), bullet[:80]


@pytest.mark.parametrize("section", ["rbm-digits-28x28", "flow-denoising"])
def test_every_claim_a_section_judges_has_a_ledger_entry(page, section):
    text = document.sections(page)[section].split("### Which claims hold", 1)[1]
    bullets = [ln for ln in text.split("\n### ", 1)[0].splitlines() if ln.startswith("- ")]
    anchors = [c.check.anchor for c in CLAIMS if c.check and c.check.section == section]
    assert bullets
    for bullet in bullets:
        if "not a claim of the paper" in bullet:
            continue
        assert any(a in bullet for a in anchors), bullet[:80]


def test_a_section_that_changes_its_verdict_fails_the_check(page):
    flipped = page.replace(
        "**Does not hold here.** 16x16: best flow sampler `flow-exact` 18.7",
        "**Holds here.** 16x16: best flow sampler `flow-exact` 18.7",
    )
    assert flipped != page
    assert any(d.startswith("flow-t1-ess:") for d in document.disagreements(flipped))
    unmarked = page.replace("2.25 ± 0.86 [0.05] z=-2.8 ✗", "2.25 ± 0.86 [0.05] z=-2.8")
    assert unmarked != page
    said = document.disagreements(unmarked)
    assert said == [
        "icml-t2-c4-barker: the ledger says 'not reproduced', its section 'table-2' says "
        "'reproduced'."
    ]
    pending = page.replace("the differences are within twice", "pending: being regenerated", 1)
    assert any("'pending'" in d for d in document.disagreements(pending))


def test_a_section_without_its_verdict_line_is_named(page):
    gone = page.replace("- **FLSB 2's ESS per second is below", "- FLSB 2's speed")
    said = document.disagreements(gone)
    assert len(said) == 1 and "no verdict" in said[0] and "icml-rbm-flsb2-ess-sec" in said[0]


def test_the_command_puts_the_ledger_on_top_and_check_says_when_it_is_stale(tmp_path, capsys):
    assert BY_NAME["ledger"].module == "lsbcore.studies.ledger.cli"
    doc = tmp_path / "reproduction.md"
    doc.write_text("# Ising\n\nbody\n", encoding="utf-8")
    assert cli.main(["--out", str(doc), "--check"]) == 1
    assert "is stale" in capsys.readouterr().err
    assert cli.main(["--out", str(doc)]) == 0
    assert cli.main(["--out", str(doc)]) == 0  # a second write replaces, not repeats, it
    text = doc.read_text(encoding="utf-8")
    assert text == document.render() + "\n# Ising\n\nbody\n"


def test_rewriting_the_ising_part_keeps_the_ledger_on_top(tmp_path, monkeypatch):
    doc = tmp_path / "reproduction.md"
    rbm = "<!-- rbm-digits:begin (x) -->\nRBM\n<!-- rbm-digits:end -->\n"
    doc.write_text(document.render() + "\n# Old Ising\n\n" + rbm, encoding="utf-8")
    monkeypatch.setattr(reproduce, "load_runs", lambda path, variants: {})
    monkeypatch.setattr(reproduce, "document", lambda data, command: "# New Ising\n")
    runs = tmp_path / "runs.json"
    runs.write_text("{}", encoding="utf-8")
    assert reproduce.main(["--from-runs", str(runs), "--out", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == document.render() + "\n# New Ising\n\n" + rbm
