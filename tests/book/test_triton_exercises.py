"""Chapter 10's Triton exercises (hymo_book.exercises.ch10_triton_puzzles): each worked
solution in the chapter passes in Triton's interpreter, each catalogued wrong kernel fails with
the message that names its mistake, a stub is reported as not written, and the checks stay
fast enough for a CPU (tests/conftest.py sets TRITON_INTERPRET=1 before Triton is imported)."""

from __future__ import annotations

import time

import nbformat
import pytest
from hymo_book.curriculum import BOOK
from hymo_book.exercises import grade, registry
from hymo_book.exercises.triton_exercise import ExerciseKernel, triton_exercise

KERNELS = ["to_heads_first", "state_step", "chunk_attention", "chunk_attention_dv"]
EXERCISES = registry()


def solutions() -> dict:
    """The chapter's solution cells, run in one namespace."""
    namespace: dict = {}
    for cell in nbformat.read(BOOK / "10_triton_kernels.ipynb", as_version=4).cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            exec(compile(cell.source, "<chapter 10 solution>", "exec"), namespace)  # noqa: S102
    return namespace


SOLUTIONS = solutions()


@pytest.mark.parametrize("name", KERNELS)
def test_the_solution_is_a_kernel_and_passes(name):
    kernel = SOLUTIONS[name]
    assert isinstance(kernel, ExerciseKernel) and EXERCISES[name].chapter == "10_triton_kernels"
    start = time.perf_counter()
    result = grade(kernel, EXERCISES[name])
    assert result.passed, result.message
    assert time.perf_counter() - start < 30, "keep the interpreter's shapes tiny"


@pytest.mark.parametrize("name", KERNELS)
def test_each_catalogued_mistake_is_named(name):
    wrong = EXERCISES[name].wrong
    assert len(wrong) >= 2, f"{name} needs two catalogued wrong answers"
    for kernel, fragment in wrong:
        assert isinstance(kernel, ExerciseKernel), kernel
        result = grade(kernel, EXERCISES[name])
        assert not result.passed and fragment in result.message, (kernel.__name__,
                                                                   result.message)


def test_a_stub_is_not_written_yet():
    @triton_exercise
    def state_step(h, b, c, v, g, A, o, S, D, BD):
        """A docstring and `...`, as the chapter gives it."""
        ...

    result = grade(state_step, EXERCISES["state_step"])
    assert not result.passed and "not written yet" in result.message


def test_a_kernel_that_stores_nothing_is_reported_at_a_position():
    @triton_exercise
    def chunk_attention(c, b, v, l, A, o, C, S, D):
        o += 0  # a body that runs and leaves o at zero

    result = grade(chunk_attention, EXERCISES["chunk_attention"])
    assert not result.passed and "differs at position" in result.message, result.message


@pytest.mark.parametrize("name", ["row_offsets", "recurrent_step_backward", "hand_on"])
def test_the_torch_exercises_of_chapter_10_name_their_mistakes(name):
    exercise = EXERCISES[name]
    assert len(exercise.wrong) >= 2
    for wrong, fragment in exercise.wrong:
        result = grade(wrong, exercise)
        assert not result.passed and fragment in result.message, result.message


def test_a_float32_answer_passes_the_torch_exercises():
    """recurrent_step_backward and hand_on are graded at float32's tolerance: the solution
    computed in float32 from float64 inputs passes."""
    for name in ("recurrent_step_backward", "hand_on"):
        solution = SOLUTIONS[name]

        def in_float32(*args, solution=solution):
            out = solution(*(a.float() if hasattr(a, "float") else a for a in args))
            return tuple(t.double() for t in out)

        result = grade(in_float32, EXERCISES[name])
        assert result.passed, result.message
