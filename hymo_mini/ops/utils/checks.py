"""The input check every GDN path shares, the kernels' device check, the plain paths' compute
dtype and start state, and the result of an empty sequence (layouts: ``LAYOUTS``)."""

import torch

__all__ = ["check_inputs", "check_triton_device", "compute_dtype", "start_state",
           "empty_sequence", "LAYOUTS"]

LAYOUTS = {"v": "(B, T, H, D)", "b": "(B, T, H, S)", "c": "(B, T, H, S)", "g": "(B, T, H)",
           "A": "(H, S)", "beta": "(B, T, H)", "initial_state": "(B, H, S, D)"}
_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_tensors(tensors: dict[str, torch.Tensor]) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape {LAYOUTS[name]}, "
                            f"got {type(t).__name__}")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; use float32, bfloat16, float16 "
                            "or float64")
    devices = {t.device for t in tensors.values()}
    if len(devices) > 1:
        where = ", ".join(f"{n} on {t.device}" for n, t in tensors.items())
        raise ValueError(f"all inputs must be on one device, got {where}")


def _check_shapes(tensors: dict[str, torch.Tensor]) -> None:
    v, b = tensors["v"], tensors["b"]
    for name, t in tensors.items():
        rank = LAYOUTS[name].count(",") + 1
        if t.ndim != rank:
            raise ValueError(f"{name} must have rank {rank} {LAYOUTS[name]}, "
                             f"got shape {tuple(t.shape)}")
    B, T, H, D = v.shape
    S = b.shape[-1]
    wanted = {"b": (B, T, H, S), "c": (B, T, H, S), "g": (B, T, H), "A": (H, S),
              "beta": (B, T, H), "initial_state": (B, H, S, D)}
    for name, t in tensors.items():
        if name != "v" and tuple(t.shape) != wanted[name]:
            raise ValueError(f"{name} must have shape {LAYOUTS[name]} = {wanted[name]} to "
                             f"match v {tuple(v.shape)} and b {tuple(b.shape)}, "
                             f"got {tuple(t.shape)}")


def check_inputs(v, b, c, g, A, initial_state=None, beta=None, *,
                 check_values: bool = True) -> None:
    """Raise a one-line error for inputs no GDN path can take: types, dtypes, one device,
    every shape against v and b; with ``check_values`` also a finite decay g * A (a read back
    to the host: the GDN mixer, which builds them finite, passes ``check_values=False``)."""
    tensors = {"v": v, "b": b, "c": c, "g": g, "A": A}
    if beta is not None:
        tensors["beta"] = beta
    if initial_state is not None:
        tensors["initial_state"] = initial_state
    _check_tensors(tensors)
    _check_shapes(tensors)
    if not check_values or g.device.type == "meta":  # meta: shapes only, no values
        return
    with torch.no_grad():
        if not bool(torch.isfinite(g).all() & torch.isfinite(A).all()):
            raise ValueError("the decay g * A must be finite: g or A contains inf or nan")


def check_triton_device(v, interpret: bool, what: str, module: str, instead: str) -> None:
    """Raise unless a Triton kernel can run where ``v`` is: on a CUDA GPU, or under the
    interpreter (``interpret``: TRITON_INTERPRET=1 was set before ``module`` was imported)."""
    if v.device.type != "cuda" and not interpret:
        raise RuntimeError(f"{what} needs a CUDA GPU, or the Triton interpreter on CPU: set "
                           f"TRITON_INTERPRET=1 before {module} is imported, or use {instead}")


def compute_dtype(v: torch.Tensor) -> torch.dtype:
    """fp64 for fp64 inputs, else fp32 (16-bit inputs are computed in fp32)."""
    return torch.float64 if v.dtype == torch.float64 else torch.float32


def start_state(v, b, initial_state, dtype: torch.dtype) -> torch.Tensor:
    """The state a sequence starts from, (B, H, S, D) in ``dtype``: ``initial_state``, or
    zeros without one."""
    if initial_state is not None:
        return initial_state.to(dtype)
    B, _, H, D = v.shape
    return torch.zeros(B, H, b.shape[-1], D, dtype=dtype, device=v.device)  # (B, H, S, D)


def empty_sequence(v, b, initial_state, output_final_state):
    """The result for T = 0, where a kernel has nothing to run: an empty o, and the state
    passed through unchanged (fp32; zeros without an initial state)."""
    B, _, H, D = v.shape
    state = start_state(v, b, initial_state, torch.float32)
    return v.new_zeros(B, 0, H, D), (state if output_final_state else None)
