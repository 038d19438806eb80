"""Every exercise: its chapter's worked solution passes the checker, every plausible wrong
answer fails with the expected one-line message (which names its mistake), and the chapter
gives the learner a stub (a docstring and ``...``) and a ``check`` call. Every teaching
chapter has two or more; every exercise catalogues two or more wrong answers."""

from __future__ import annotations

import nbformat
import pytest
import torch
from hymo_book.curriculum import BOOK, CHAPTERS, PARTS
from hymo_book.exercises import Case, Exercise, compare_tensors, grade, registry
from hymo_book.exercises.causes import pattern_cause, with_cause

EXERCISES = registry()
NOT_TEACHING = {"00_environment"} | set(dict(PARTS)["Reports"])
# Chapter 10's catalogue gives fragments of its messages and no causes (yet): every other
# exercise catalogues whole messages with the cause each names.
WHOLE_MESSAGES = sorted(n for n, e in EXERCISES.items() if e.chapter != "10_triton_kernels")


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
    for wrong, fragment, *cause in exercise.wrong:
        result = grade(wrong, exercise)
        assert not result.passed and fragment in result.message, (fragment, result.message)
        if cause:  # the whole message, its cause at the end
            assert result.message == with_cause(f"{name}: {fragment}", cause[0])


@pytest.mark.parametrize("name", WHOLE_MESSAGES)
def test_two_wrong_answers_with_their_cause(name):
    """At least two plausible wrong answers, each with its whole message and the mistake
    the message names."""
    named = [entry for entry in EXERCISES[name].wrong if len(entry) == 3]
    assert len(named) == len(EXERCISES[name].wrong) >= 2, f"{name}: {len(named)} with a cause"


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


def test_a_mistake_outside_the_catalogue_is_named_by_its_shape():
    """A sign flipped, a transpose, a missing factor, an off-by-one shift and an inverted
    mask are recognised in any tensor answer; an unrelated difference gets no cause."""
    expected = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]])
    assert pattern_cause(-expected, expected).startswith("flip a sign")
    assert pattern_cause(expected * 0.125, expected).startswith("miss a factor (the answer is "
                                                                "0.125 times")
    square = torch.arange(9.0).reshape(3, 3) ** 2
    assert pattern_cause(square.T, square).startswith("transpose")
    ramp = torch.arange(1.0, 6.0) ** 2  # got[i + 1] == expected[i]
    assert pattern_cause(torch.cat([ramp[:1], ramp[:-1]]), ramp).startswith(
        "shift by one position along axis 0 (your value at i + 1 is the expected one at i")
    mask = torch.tensor([[True, False], [True, True]])
    assert pattern_cause(~mask, mask).startswith("invert the mask")
    assert pattern_cause(torch.tensor([1.0, 7.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) is None
    assert pattern_cause(torch.tensor(5.0), torch.tensor(3.0)) is None  # any two numbers


def test_a_learners_mistake_gets_its_catalogued_cause():
    """A learner's mistake written differently from the catalogued wrong answer (here the
    interleaved heads of chapter 05, written as a loop) still gets that answer's cause."""
    exercise = EXERCISES["grouped_attention"]

    def interleaved_loop(q, k, v):
        h, g = q.shape[0], k.shape[0]
        t, s = q.shape[1], k.shape[1]
        out = []
        for i in range(h):
            scores = q[i] @ k[i % g].T / q.shape[-1] ** 0.5
            scores = scores.masked_fill(~torch.ones(t, s, dtype=torch.bool).tril(s - t), -1e30)
            out.append(scores.softmax(-1) @ v[i % g])
        return torch.stack(out)
    result = grade(interleaved_loop, exercise)
    assert not result.passed and result.message.endswith(
        "— did you give head i the group i % g (heads come in blocks: head i reads group "
        "i // (h / g))?"), result.message

    def keys_only_as_a_float(n_kv_heads, head_dim, v_head_dim, n_tokens, n_layers=1,
                             dtype_bytes=2):  # two catalogued answers agree on the first case
        return float(n_layers * n_tokens * n_kv_heads * head_dim * dtype_bytes)
    result = grade(keys_only_as_a_float, EXERCISES["kv_cache_bytes"])
    assert result.message.endswith("— did you cache the keys only (each token keeps a key and "
                                   "a value)?"), result.message


def test_a_float_answer_is_compared_within_float32():
    """Every exercise whose answers are floats: the solution run in float32 (its float64
    inputs cast down, its outputs cast back) passes. rope_rotate is the exception its
    chapter teaches: float32 angles at position 4,000 are a catalogued mistake."""
    for name in WHOLE_MESSAGES:
        if name == "rope_rotate":
            continue
        exercise = EXERCISES[name]
        if not any(isinstance(a, torch.Tensor) and a.dtype == torch.float64
                   for case in exercise.cases() for a in case.args):
            continue
        solution = solution_namespace(exercise.chapter)[name]

        def in_float32(*args, _solution=solution, **kwargs):
            down = [a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.float64
                    else a for a in args]
            return up(_solution(*down, **kwargs))
        result = grade(in_float32, exercise)
        assert result.passed, result.message


def up(out):
    if isinstance(out, tuple | list):
        return type(out)(up(o) for o in out)
    if isinstance(out, torch.Tensor) and out.dtype == torch.float32:
        return out.double()
    return out


def test_a_failure_never_prints_two_equal_numbers():
    """Two values a tight tolerance tells apart are printed with enough digits to differ."""
    exercise = Exercise("nine_digits", "none", cases=lambda: [Case("one", (), expected=(
        torch.tensor(0.4166666667, dtype=torch.float64)))],
        compare=lambda got, expected, case: compare_tensors(got, expected, case, rtol=1e-8,
                                                           atol=0.0))
    result = grade(lambda: torch.tensor(0.4166667, dtype=torch.float64), exercise)
    assert "got 0.4166667, expected 0.416666667" in result.message, result.message
