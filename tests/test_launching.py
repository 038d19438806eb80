"""hymo_mini.launching: every function of the package that launches a Triton kernel runs
with its tensors' GPU current (Triton launches on the current device, not on its
arguments'). On the CPU the guard is a no-op, and each launching function is checked to
enter it; with two GPUs, each op on the second equals the same op on the first."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_moe_rows import routing_like

from hymo_mini import launching
from hymo_mini.moe.dispatch import combine_rows, gather_rows, row_maps

pytestmark = pytest.mark.triton
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_off_the_gpu_it_does_nothing():
    for t in (torch.zeros(2), None, 3.0):
        assert isinstance(launching.on_device(t), contextlib.nullcontext)


def test_the_first_tensor_argument_decides(monkeypatch):
    seen = []
    monkeypatch.setattr(launching, "on_device", lambda t: seen.append(t) or
                        contextlib.nullcontext())

    @launching.on_inputs_device
    def add(ctx, x, y, scale=1.0):
        """x + y, scaled."""
        return (x + y) * scale

    x, y = torch.ones(2), torch.full((2,), 2.0)
    assert torch.equal(add(None, x, y, scale=2.0), torch.full((2,), 6.0))
    assert seen == [x] and add.__name__ == "add" and add.__doc__ == "x + y, scaled."
    add("not a tensor", 1, 2)  # no tensor at all: the guard gets None
    assert seen[-1] is None


def _gdn_inputs(rule, B=1, T=5, H=1, S=4, D=4):
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(B, T, H, D, generator=gen)
    b = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    c = torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    A = -torch.rand(H, S, generator=gen)
    extra = [torch.sigmoid(torch.randn(B, T, H, generator=gen))] if rule == "delta" else []
    return [t.to(DEVICE).requires_grad_() for t in (v, b, c, g, A, *extra)]


def _run_gdn(rule, backend, inputs):
    from hymo_mini import ops

    if rule == "gla":
        o = ops.gated_linear_attention(*inputs, backend=backend)[0]
    else:
        o = ops.gated_delta_rule(*inputs, backend=backend)[0]
    return [o, *torch.autograd.grad(o.sum(), inputs)]


def _run_gdn_forward(rule, inputs):
    """The forward alone under torch.no_grad: the dispatcher skips the autograd Function."""
    from hymo_mini import ops

    with torch.no_grad():
        if rule == "gla":
            return list(ops.gated_linear_attention(*inputs, backend="chunk_triton",
                                                   output_final_state=True))
        return list(ops.gated_delta_rule(*inputs, backend="chunk_triton",
                                         output_final_state=True))


def _run_rows(inputs):
    x, y, w = inputs
    by_expert, kept, _ = (t.to(x.device) for t in routing_like(3, 2, 4, 0.0))
    maps = row_maps(by_expert, kept)
    xs = gather_rows(x, maps, x.dtype, "triton")
    out = combine_rows(y, maps, w, "triton")
    return [xs, out, *torch.autograd.grad(xs.sum() + out.sum(), inputs)]


def _run_loss(inputs):
    from hymo_mini.loss_triton import softcap_ce_rows_triton

    z, = inputs
    targets = torch.tensor([0, 3, 1], device=z.device)
    return list(softcap_ce_rows_triton(z.detach().clone(), targets, 15.0, -100, grad=True))


CASES = {  # name -> (run, inputs): every Function and function that launches a kernel
    "gla chunk": (lambda i: _run_gdn("gla", "chunk_triton", i), lambda: _gdn_inputs("gla")),
    "gla recurrent": (lambda i: _run_gdn("gla", "recurrent_triton", i),
                      lambda: _gdn_inputs("gla")),
    "delta chunk": (lambda i: _run_gdn("delta", "chunk_triton", i),
                    lambda: _gdn_inputs("delta")),
    "gla chunk, no grad": (lambda i: _run_gdn_forward("gla", i), lambda: _gdn_inputs("gla")),
    "delta chunk, no grad": (lambda i: _run_gdn_forward("delta", i),
                             lambda: _gdn_inputs("delta")),
    "moe rows": (_run_rows, lambda: [torch.randn(3, 8, device=DEVICE).requires_grad_(),
                                     torch.randn(6, 8, device=DEVICE).requires_grad_(),
                                     torch.rand(3, 2, device=DEVICE).requires_grad_()]),
    "softcap loss": (_run_loss, lambda: [torch.randn(3, 5, device=DEVICE)]),
}
# the launching functions each case passes through, forward and backward
GUARDED = {"gla chunk": 2, "gla recurrent": 2, "delta chunk": 2, "gla chunk, no grad": 1,
           "delta chunk, no grad": 1, "moe rows": 4, "softcap loss": 1}


@pytest.mark.parametrize("name", list(CASES))
def test_every_launch_enters_the_guard(monkeypatch, name):
    """Each case's forward and backward pass through on_device with one of its tensors."""
    seen = []
    real = launching.on_device
    monkeypatch.setattr(launching, "on_device", lambda t: seen.append(t) or real(t))
    run, inputs = CASES[name]
    run(inputs())
    assert len(seen) == GUARDED[name], [type(t) for t in seen]
    assert all(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in seen)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("name", list(CASES))
def test_a_second_gpu_gives_what_the_first_does(name):
    """With cuda:0 current, each case on cuda:1 equals the same case on cuda:0: its kernels
    ran on its tensors' GPU, ordered with the work around them."""
    run, inputs = CASES[name]
    with torch.cuda.device(0):
        base = inputs()
        first = run(base)
        second = run([t.detach().to("cuda:1").requires_grad_(t.requires_grad) for t in base])
    for a, b in zip(first, second, strict=True):
        assert b.device == torch.device("cuda:1")
        torch.testing.assert_close(b.cpu(), a.cpu(), rtol=1e-5, atol=1e-5)


def test_host_arithmetic_matches_tritons():
    """cdiv and next_power_of_2, the launchers' plain-int arithmetic, give triton's answers."""
    import triton

    from hymo_mini.launching import cdiv, next_power_of_2

    for n in range(1, 3000):
        assert next_power_of_2(n) == triton.next_power_of_2(n)
        for d in (1, 2, 3, 16, 64, 100):
            assert cdiv(n, d) == triton.cdiv(n, d)
    assert cdiv(0, 16) == 0


@pytest.mark.parametrize("interpret", [True, False], ids=["interpreter", "gpu-settings"])
def test_launchers_do_not_call_tritons_host_arithmetic(monkeypatch, interpret):
    """The chunked forwards' launch arithmetic does not go through triton.cdiv or
    triton.next_power_of_2 (each host call of those costs microseconds): with both made to
    fail, a forward of either rule still runs (its kernels faked), with the interpreter's
    settings and with the GPU's."""
    import triton

    import hymo_mini.ops.gated_delta.chunk_triton as gdt
    import hymo_mini.ops.gla.chunk_chain as gcc
    import hymo_mini.ops.gla.chunk_triton as gct

    def refuse(*args, **kwargs):
        raise AssertionError("triton's host arithmetic called")

    class Launch:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(triton, "cdiv", refuse)
    monkeypatch.setattr(triton, "next_power_of_2", refuse)
    monkeypatch.setattr(gct, "INTERPRET", interpret)
    monkeypatch.setattr(gdt, "INTERPRET", interpret)
    for module in (gct, gcc, gdt):
        for name in dir(module):
            if name.startswith("_") and name.endswith("_kernel"):
                monkeypatch.setattr(module, name, Launch())
    v, b, c = (torch.randn(1, 40, 2, 8) for _ in range(3))
    g, A, beta = torch.rand(1, 40, 2), -torch.rand(2, 8), torch.rand(1, 40, 2)
    with torch.no_grad():
        assert gct.ChunkGLAFunction.apply(v, b, c, g, A, None, True)[0].shape == v.shape
        assert gdt.ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, None, True)[0].shape \
            == v.shape


# ----------------------------------------------------------------- launching directly
class _Compiled:
    """Stands in for Triton's CompiledKernel: records what its launcher is handed."""
    function, packed_metadata = "function", "packed"

    def __init__(self):
        self.launches = []

    def launch_metadata(self, grid, stream, *args):
        return None

    def run(self, *args):
        self.launches.append(args)


class _Param:
    def __init__(self, name):
        self.is_constexpr = name in ("BLOCK", "FLAG")


class _Jit:
    """Stands in for a JITFunction with parameters (x, y, T, BLOCK, FLAG), the last two
    tl.constexpr: a new compiled kernel per distinct specialisation it is launched with
    (keyed as Triton would: here simply by everything it is given)."""
    arg_names = ["x", "y", "T", "BLOCK", "FLAG"]
    params = [_Param(name) for name in arg_names]

    def __init__(self):
        self.pre_run_hooks = []
        self.through_triton = 0
        self.kernels = {}

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.through_triton += 1
            return self.kernels.setdefault(len(self.kernels), _Compiled())
        return launch


class _Driver:
    class active:
        @staticmethod
        def get_current_device():
            return 0

        @staticmethod
        def get_current_stream(device):
            return 7


@pytest.fixture
def direct_on(monkeypatch):
    monkeypatch.setattr(launching, "DIRECT", True)
    monkeypatch.setattr(launching, "_is_jit", lambda kernel: isinstance(kernel, _Jit))
    monkeypatch.setattr(launching, "_TRITON", [type("knobs", (), {"runtime": type(
        "runtime", (), {"launch_enter_hook": None, "launch_exit_hook": None})}), _Driver])


def test_direct_launch_hands_the_compiled_kernel_what_triton_would(direct_on):
    """The first launch of a specialisation goes through Triton; the next with the same
    one goes to the compiled kernel's launcher at once, with the grid padded to three
    dimensions, the stream, and every argument in the kernel's order (the constexprs
    passed by name put in their places). The key takes the names in the order passed (a
    launch site passes them in one order): another order is a new key, through Triton
    once."""
    jit = _Jit()
    kernel = launching.Direct(jit)
    x, y = torch.zeros(8), torch.zeros(8)
    first = kernel[(3,)](x, y, 32, BLOCK=16, FLAG=True, num_warps=1)
    assert jit.through_triton == 1 and first.launches == []
    again = kernel[(5, 2)](x, y, 64, BLOCK=16, FLAG=True, num_warps=1)
    assert jit.through_triton == 1 and again is first
    assert first.launches == [(5, 2, 1, 7, "function", "packed", None, None, None,
                               x, y, 64, 16, True)]
    swapped = kernel[(4,)](x, y, 16, FLAG=False, BLOCK=32, num_warps=1)
    assert jit.through_triton == 2
    assert kernel[(4,)](x, y, 16, FLAG=False, BLOCK=32, num_warps=1) is swapped
    assert jit.through_triton == 2
    assert swapped.launches == [(4, 1, 1, 7, "function", "packed", None, None, None,
                                 x, y, 16, 32, False)]


def test_direct_launch_keys_what_triton_specialises_on(direct_on):
    """Any change Triton compiles differently for goes through Triton again: a tensor's
    dtype or 16-byte alignment, an int that is 1, changes width or divisibility by 16, a
    None for a tensor, a constexpr or a launch option. What it does not specialise on (an
    int's value within its class, another aligned address) does not."""
    jit = _Jit()
    kernel = launching.Direct(jit)
    x = torch.zeros(64)

    def launch(*args, block=16, warps=1):
        before = jit.through_triton
        kernel[(1,)](*args, BLOCK=block, FLAG=False, num_warps=warps)
        return jit.through_triton - before  # 1: through Triton, 0: directly

    assert launch(x, x, 32) == 1
    assert launch(x, x, 32) == 0
    assert launch(x[4:], x, 48) == 0  # 16 bytes in, another multiple of 16
    assert launch(x[1:], x, 32) == 1  # 4 bytes in: not aligned
    assert launch(x.double(), x, 32) == 1
    assert launch(x, None, 32) == 1
    assert launch(x, x, 33) == 1  # not a multiple of 16
    assert launch(x, x, 35) == 0
    assert launch(x, x, 1) == 1  # Triton's constant 1
    assert launch(x, x, 2**31 + 16) == 1  # i64
    assert launch(x, x, 32, block=32) == 1
    assert launch(x, x, 32, warps=4) == 1
    assert launch(x, x, 32, warps=4) == 0
    seen = set()
    for block in (16, 32, 48, 16):  # a constexpr passed by position: keyed by its value
        before = jit.through_triton
        kernel[(1,)](x, x, 32, block, FLAG=False)
        kernel[(1,)](x, x, 32, block, FLAG=False)
        assert jit.through_triton - before == (block not in seen)
        seen.add(block)


def test_direct_launch_leaves_to_triton_what_it_cannot_key(direct_on, monkeypatch):
    """Through Triton every time: an argument of a type the key does not know, a kernel
    with pre-run hooks, a kernel whose every parameter was not passed (a default), a kernel
    that is not a JITFunction (the interpreter's), and everything while DIRECT is off."""
    x = torch.zeros(16)
    jit = _Jit()
    kernel = launching.Direct(jit)
    for _ in range(2):
        kernel[(1,)](x, x, torch.tensor(3).numpy(), BLOCK=16, FLAG=False)
        kernel[(1,)](x, x, 32, BLOCK=16)  # FLAG left to its default
    assert jit.through_triton == 4
    hooked = _Jit()
    hooked.pre_run_hooks.append(lambda *args, **kwargs: None)
    for _ in range(2):
        launching.Direct(hooked)[(1,)](x, x, 32, BLOCK=16, FLAG=False)
    assert hooked.through_triton == 2

    class Interpreted(_Jit):
        pass
    interpreted = Interpreted()
    monkeypatch.setattr(launching, "_is_jit", lambda kernel: type(kernel) is _Jit)
    wrapped = launching.Direct(interpreted)
    for _ in range(2):
        wrapped[(1,)](x, x, 32, BLOCK=16, FLAG=False)
    assert interpreted.through_triton == 2
    monkeypatch.setattr(launching, "DIRECT", False)
    off = _Jit()
    for _ in range(2):
        launching.Direct(off)[(1,)](x, x, 32, BLOCK=16, FLAG=False)
    assert off.through_triton == 2


def _misaligned(t):
    """t's values in a tensor that starts one element past an aligned address."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:]
    return flat.view(t.shape).copy_(t)


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("rule", ["gla", "delta"])
def test_direct_launches_give_tritons_results(monkeypatch, rule, dtype):
    """On a GPU, with DIRECT on, each chunked rule's outputs and gradients equal those of
    the kernels launched through Triton, bit for bit, while the inputs' alignment and
    length change from call to call; and a repeated call reaches no JITFunction.run."""
    from triton.runtime.jit import JITFunction

    runs = []
    real = JITFunction.run
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: runs.append(1) or
                        real(self, *a, **k))
    for T, shift in ((45, False), (64, True), (45, True), (17, False)):
        inputs = [t.detach().to(dtype) for t in _gdn_inputs(rule, B=2, T=T, H=3, S=32, D=32)]
        if shift:
            inputs[0], inputs[2] = _misaligned(inputs[0]), _misaligned(inputs[2])
        inputs = [t.requires_grad_() for t in inputs]
        monkeypatch.setattr(launching, "DIRECT", False)
        want = _run_gdn(rule, "chunk_triton", inputs)
        monkeypatch.setattr(launching, "DIRECT", True)
        for _ in range(2):
            runs.clear()
            got = _run_gdn(rule, "chunk_triton", inputs)
            assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))
        assert not runs  # the second call: every kernel launched directly


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", list(CASES))
def test_direct_launches_of_every_launching_function(monkeypatch, name):
    """On a GPU, with DIRECT on, each case (every function of the package that launches a
    kernel, forward and backward) gives Triton's launches' results bit for bit, and a
    repeated call reaches no JITFunction.run."""
    from triton.runtime.jit import JITFunction

    runs = []
    real = JITFunction.run
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: runs.append(1) or
                        real(self, *a, **k))
    run, inputs = CASES[name]
    base = inputs()
    monkeypatch.setattr(launching, "DIRECT", False)
    want = run([t.detach().clone().requires_grad_(t.requires_grad) for t in base])
    monkeypatch.setattr(launching, "DIRECT", True)
    for _ in range(2):
        runs.clear()
        got = run([t.detach().clone().requires_grad_(t.requires_grad) for t in base])
        assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))
    assert not runs
