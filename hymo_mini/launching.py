"""Launching Triton kernels on the GPU their tensors live on.

A Triton kernel launches on the *current* CUDA device, into that device's current stream,
whatever device its pointer arguments point into. With a model on ``cuda:1`` while
``cuda:0`` is current (one process, ``--device cuda:1``), a kernel would run on the wrong
GPU, unordered with the work around it on the right one. PyTorch's own operators follow
their tensors instead. So every function of this package that launches a Triton kernel
runs with its first tensor argument's device made current, as PyTorch's operators
effectively do:

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, ...): ...

On the CPU (the Triton interpreter) this does nothing.

The launchers' grid and block arithmetic uses :func:`cdiv` and :func:`next_power_of_2` here,
plain integer arithmetic: Triton's own ``triton.cdiv`` and ``triton.next_power_of_2`` are
constexpr functions in recent releases (usable inside kernels), and each call from the host
goes through their wrapper, a few microseconds, several times a forward.

**Launching a compiled kernel directly** (:class:`Direct`, on while ``DIRECT`` is True, the
default).
``kernel[grid](*args)`` goes through Triton's ``JITFunction.run`` every call: it binds the
arguments, asks of each what the compiler specialises on (a tensor's dtype and whether its
address is a multiple of 16; an integer's width, whether it is 1, whether it is a multiple
of 16), hashes that into a key, looks the compiled kernel up, and only then launches it.
On a GPU machine's host that was tens of microseconds a launch, several launches a forward
(benchmarks/host_profile.py). :class:`Direct` wraps a kernel so that the first call for a
given key goes through Triton as always (compiling if need be) and keeps the compiled
kernel Triton returns; later calls with the same key (the same dtypes, alignments, integer
classes, constexprs and launch options, on the same device) hand the arguments to that
kernel's launcher at once, as the last lines of ``JITFunction.run`` do. The key asks the
same questions Triton's does (``triton.backends.compiler.BaseBackend``: its tensor and
integer specialisations), so a launch never reaches a kernel compiled for other arguments;
an argument of any other type goes through Triton every time. It assumes what a model's
forward leaves alone: Triton's debug and instrumentation switches, the kernel's globals and
its pre-run hooks (with a hook, every call goes through Triton). On an H100 (Triton 3.6,
2026-12-05) every launching function gave Triton's launches' results bit for bit with it
(tests/test_launching.py), and it cut the host's time to issue a forward by 12-20%
(benchmarks/direct_ab_h100_2026-12-05.json); ``DIRECT = False`` launches through Triton.
"""

from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["on_device", "on_inputs_device", "cdiv", "next_power_of_2", "Direct", "direct",
           "DIRECT"]

DIRECT = True  # launch compiled kernels directly (Direct); False: through Triton every time


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ of two ints (b > 0), as ``triton.cdiv``."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two at least ``n`` (an int ≥ 1), as ``triton.next_power_of_2``."""
    return 1 << (n - 1).bit_length()


def on_device(t):
    """A context in which ``t``'s CUDA device is the current one (nothing for a tensor off
    the GPU, or None)."""
    if isinstance(t, torch.Tensor) and t.device.type == "cuda":
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def on_inputs_device(fn):
    """``fn`` run with the device of its first tensor argument current (see the module)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        with on_device(first):
            return fn(*args, **kwargs)
    return run


_I32, _I64 = 2**31, 2**63


def _specialisation(args, constexprs=()) -> tuple | None:
    """What Triton compiles ``args`` (the positional arguments of a launch) for, flat: per
    tensor its dtype and whether its address is a multiple of 16; per int whether it is 1
    (a constant then), its width (i32, i64 or u64) and whether it is a multiple of 16;
    None, bools and floats by their type; then, for the positions in ``constexprs``
    (parameters declared tl.constexpr but passed by position), the values themselves. None
    if an argument is of another type."""
    spec = []
    for a in args:
        kind = type(a)
        if kind is torch.Tensor:
            spec += (a.dtype, a.data_ptr() % 16 == 0)
        elif kind is int:
            spec += (int, 1 if a == 1 else (a % 16 == 0) + 2 * (-_I32 <= a < _I32)
                     + 4 * (a < _I64))
        elif a is None or kind is bool or kind is float:
            spec.append(kind)
        else:
            return None
    for i in constexprs:
        if i < len(args):
            spec.append(args[i])
    return tuple(spec)


_TRITON = []  # [triton.knobs, the active-driver holder], imported on the first direct launch


def _triton():
    if not _TRITON:
        from triton import knobs
        from triton.runtime.driver import driver
        _TRITON.extend((knobs, driver))
    return _TRITON


class Direct:
    """``kernel[grid](*args, **kwargs)`` as Triton launches it, or with ``DIRECT`` the
    compiled kernel's launcher called at once for a key already launched (see the
    module). ``kernel`` may be anything indexable by a grid (a JITFunction, the
    interpreter's function, a stand-in in tests); only a JITFunction is launched
    directly."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.jit = None  # whether kernel is a JITFunction (asked on the first launch)
        self.constexprs = ()  # the positions of its tl.constexpr parameters
        self.compiled = {}  # key -> (compiled kernel, the names passed by keyword)

    def __getitem__(self, grid):
        if not DIRECT:
            return self.kernel[grid]
        if self.jit is None:
            self.jit = _is_jit(self.kernel)
            if self.jit:
                self.constexprs = tuple(i for i, p in enumerate(self.kernel.params)
                                        if p.is_constexpr)
        if not self.jit:
            return self.kernel[grid]
        return functools.partial(self._launch, grid)

    def _launch(self, grid, *args, **kwargs):
        spec = _specialisation(args, self.constexprs)
        if spec is None or self.kernel.pre_run_hooks:
            return self.kernel[grid](*args, **kwargs)
        knobs, driver = _triton()
        device = driver.active.get_current_device()
        key = (device, spec, *kwargs.items())
        try:
            found = self.compiled.get(key)
        except TypeError:  # a constexpr that cannot be hashed: Triton keys it its own way
            return self.kernel[grid](*args, **kwargs)
        if found is None:
            compiled = self.kernel[grid](*args, **kwargs)  # compiles if need be, launches
            if hasattr(compiled, "result"):  # an asynchronous compile's future
                compiled = compiled.result()
            rest = self.kernel.arg_names[len(args):]  # passed by name, in the kernel's order
            if compiled is not None and all(name in kwargs for name in rest):
                self.compiled[key] = (compiled, rest)
            return compiled
        compiled, rest = found
        bound = (*args, *[kwargs[name] for name in rest])
        stream = driver.active.get_current_stream(device)
        size = len(grid)
        compiled.run(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, stream,
                     compiled.function, compiled.packed_metadata,
                     compiled.launch_metadata(grid, stream, *bound),
                     knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound)
        return compiled


def _is_jit(kernel) -> bool:
    from triton.runtime.jit import JITFunction

    return isinstance(kernel, JITFunction)


def direct(*kernels):
    """Each kernel wrapped in :class:`Direct` (one kernel: the wrapper itself)."""
    wrapped = tuple(Direct(k) for k in kernels)
    return wrapped[0] if len(wrapped) == 1 else wrapped
