"""A toy GPU for chapter 10: programs that wait for one another, started in an order the
machine chooses, a few at a time.

The one-launch forward of the delta rule's chunked kernel
(``hymo_mini.ops.gated_delta.chunk_chain``) has each program wait for the state the program of
the stretch of chunks before hands on. :func:`run`
plays such a launch: ``slots`` programs can be resident at once, they start in
``start_order`` as slots free up, and a resident program finishes once the chunk before its
own has finished (chunk 0 needs nothing). Which chunk a program works on is either fixed by
its program id or taken as a ticket, in the order the programs start. Nothing here is
timed; it only shows whether every wait can end.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Launch", "run"]


@dataclass
class Launch:
    """The outcome of :func:`run`: how many programs finished, out of how many, and the
    chunks (as (chunk, sequence)) the resident programs were waiting on when nothing could
    move, empty if every program finished."""

    finished: int
    programs: int
    stuck_on: list[tuple[int, int]]

    @property
    def completed(self) -> bool:
        return self.finished == self.programs

    def __str__(self) -> str:
        if self.completed:
            return f"all {self.programs} programs finished"
        return (f"stuck after {self.finished} of {self.programs} programs: "
                f"{len(self.stuck_on)} resident programs wait for chunks nobody is running")


def run(n_chunks: int, n_seqs: int, slots: int, start_order: list[int],
        by_ticket: bool) -> Launch:
    """Play one launch of ``n_chunks * n_seqs`` programs, ``slots`` at a time.

    Program id p (or, ``by_ticket``, the p-th program to start) works on chunk
    p // n_seqs of sequence p % n_seqs, so ids and tickets are handed out chunk-major, as
    the kernel's grid does. ``start_order`` is the order in which the machine starts the
    program ids."""
    programs = n_chunks * n_seqs
    if sorted(start_order) != list(range(programs)):
        raise ValueError(f"start_order must order the {programs} program ids 0..{programs - 1}, "
                         f"got {len(start_order)} ids")
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    done: set[tuple[int, int]] = set()
    resident: list[tuple[int, int]] = []  # the (chunk, sequence) of each resident program
    queue, started = list(start_order), 0
    while len(done) < programs:
        while queue and len(resident) < slots:  # start programs while slots are free
            pid = queue.pop(0)
            work = started if by_ticket else pid
            resident.append((work // n_seqs, work % n_seqs))
            started += 1
        ready = [w for w in resident if w[0] == 0 or (w[0] - 1, w[1]) in done]
        if not ready:
            return Launch(len(done), programs, sorted((c - 1, s) for c, s in resident))
        for w in ready:  # each hands its state on and leaves its slot
            done.add(w)
            resident.remove(w)
    return Launch(len(done), programs, [])
