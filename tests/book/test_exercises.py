"""Every exercise: its chapter's worked solution passes the checker, every plausible wrong
answer fails with the expected one-line message, and the chapter gives the learner a stub
(a docstring and ``...``) and a ``check`` call. Every teaching chapter has two or more."""

from __future__ import annotations

import nbformat
import pytest
from hymo_book.curriculum import BOOK, CHAPTERS, PARTS
from hymo_book.exercises import grade, registry

EXERCISES = registry()
NOT_TEACHING = {"00_environment"} | set(dict(PARTS)["Reports"])


def chapter_cells(stem: str):
    path = BOOK / f"{stem}.ipynb"
    if not path.exists():
        pytest.skip(f"{path.name} is not written yet")
    return nbformat.read(path, as_version=4).cells


def solution_namespace(stem: str) -> dict:
    """The chapter's solution cells, run in order in one namespace."""
    namespace: dict = {}
    for cell in chapter_cells(stem):
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            exec(compile(cell.source, f"<{stem} solution>", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_solution_passes(name):
    exercise = EXERCISES[name]
    namespace = solution_namespace(exercise.chapter)
    assert name in namespace, f"{exercise.chapter} has no solution cell defining {name}"
    result = grade(namespace[name], exercise)
    assert result.passed, result.message


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_wrong_answers_fail_with_their_message(name):
    exercise = EXERCISES[name]
    assert exercise.wrong, f"{name} lists no plausible wrong answer"
    for wrong, fragment in exercise.wrong:
        result = grade(wrong, exercise)
        assert not result.passed and fragment in result.message, (fragment, result.message)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_chapter_gives_a_stub_and_a_check(name):
    cells = [c for c in chapter_cells(EXERCISES[name].chapter) if c.cell_type == "code"]
    stubs = [c for c in cells if f"def {name}(" in c.source
             and "solution" not in c.metadata.get("tags", [])]
    assert stubs and "..." in stubs[0].source, f"no stub of {name} with a `...` body"
    assert f"check({name}" in stubs[0].source, f"the stub of {name} is not checked"


@pytest.mark.parametrize("stem", [s for s in CHAPTERS if s not in NOT_TEACHING])
def test_every_teaching_chapter_has_two_exercises(stem):
    chapter_cells(stem)  # skips a chapter not written yet
    mine = [e for e in EXERCISES.values() if e.chapter == stem]
    assert len(mine) >= 2, f"{stem} has {len(mine)} exercise(s); a teaching chapter needs two"


def test_a_float32_answer_is_not_a_wrong_one():
    """A correct mean computed in float32 (a learner's natural choice) passes a checker that
    compares numbers: the tolerance is float32's, not float64's."""
    from hymo_book.mqar import IGNORE

    def in_float32(logits, targets):
        asked = targets != IGNORE
        return (logits.argmax(-1)[asked] == targets[asked]).float().mean()
    result = grade(in_float32, EXERCISES["recall_accuracy"])
    assert result.passed, result.message
