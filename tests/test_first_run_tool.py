"""``tools.first_run``'s reading of a page's step counter."""

from tools.first_run import summary


def test_the_first_second_with_steps_and_the_end_of_the_run():
    seen = [(0.5, 0), (1.0, 0), (1.5, 12), (2.0, 900), (2.5, 5000), (3.0, 5000)]
    assert summary(seen) == {"first_steps_s": 1.5, "final_steps": 5000, "final_at_s": 2.5}


def test_a_run_that_never_steps_has_neither():
    assert summary([(0.5, 0), (1.0, 0)]) == {
        "first_steps_s": None, "final_steps": 0, "final_at_s": None,
    }  # fmt: skip
    assert summary([]) == {"first_steps_s": None, "final_steps": 0, "final_at_s": None}
