"""Where the chunked Triton gated delta kernels spend their time, and which launch settings
suit them: a development tool for the GPU machine (benchmarks/gated_delta.py is the
benchmark of record, with the peers).

    python3 benchmarks/gated_delta_profile.py --out $OUT/delta_profile.json
    python3 benchmarks/gated_delta_profile.py --dtypes bfloat16 --no-sweep

For each --dtypes (fp32 runs with its default "tf32x3" products; "float32_tf32" with
torch.backends.cuda.matmul.allow_tf32 = True): the time of each of the six launches from
torch.profiler (median over a few forward + backward calls), the registers, spills and
shared memory Triton compiled each kernel with, and the forward and forward + backward
time (triton.testing.do_bench). With the sweep (the default), for each chunk length in
CHUNKS: every in-chunk kernel at 1, 2, 4 and 8 warps and the two sequential passes at a
few (split, warps, stages) settings, paired so that one profiled run times every kernel
at one setting of each; the best setting of each kernel is then timed together, and the
other inverse (INVERSES) at that setting. Every run's output is checked against the first
setting's (relative RMS below 1e-3). The settings are restored afterwards.

With --gla: the gla kernel's forward + backward per launch at a few changes of its CONFIGS
(--gla-variants), in --gla-dtype; for the fp32 backward's products, for instance:

    python3 benchmarks/gated_delta_profile.py --dtypes --no-sweep --gla --gla-dtype float32 \
        --gla-variants '{}' '{"fp32_products": {"forward": "tf32x3", "backward": "tf32x3"}}'

With --gla-forward: the gla kernel's forward alone in bf16, fp32 with TF32 products and fp32,
its do_bench time against the sum of its launches' device times and a copy of its bytes.
With --gla-forward-changes: the same at each given change of the gla kernel's CONFIGS;
with --delta-forward-changes, at each change of the delta kernel's (the one-launch forward,
its stretch, its warps).

    python3 benchmarks/gated_delta_profile.py --dtypes --no-sweep --gla-forward-changes '{}' \
        '{"output_fwd": {"num_warps": 2, "num_stages": 1}}'

With --group-sweep G1 G2 ... (e.g. 16 32 64 128): for each --group-shapes and --dtypes, the
chunk-to-chunk passes as one walk (CONFIGS["group"]["below"] = 0) and then over groups of
each G chunks (forced on whatever the programs), each timed and checked against the walk.

    python3 benchmarks/gated_delta_profile.py --dtypes bfloat16 --no-sweep --group-sweep 32 64 \
        --group-shapes B1_T16384_H40 B4_T4096_H40
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cuda_graph import GraphedStep  # noqa: E402
from benchmarks.gated_delta_backends import kernel_alone, make_inputs, with_A_log  # noqa: E402
from benchmarks.gdn import environment, parse_shape, rel_err, time_ms  # noqa: E402
from benchmarks.gdn_chunk_profile import kernel_times  # noqa: E402
from hymo_mini.ops.gated_delta import (  # noqa: E402
    chunk_chain,
    chunk_groups,
    chunk_kernels,
    chunk_states,
)
from hymo_mini.ops.gated_delta import chunk_triton as gdt  # noqa: E402
from hymo_mini.ops.gla import chunk_blocks as gla_blocks  # noqa: E402
from hymo_mini.ops.gla import chunk_states as gla_states  # noqa: E402
from hymo_mini.ops.gla import chunk_triton as gtc  # noqa: E402

IN_CHUNK = ("wy_fwd", "output", "du_local", "chunk_bwd")
STATES = ("state_fwd", "state_bwd")
KERNELS = {"_wy_fwd_kernel": "wy_fwd", "_output_kernel": "output",
           "_du_local_kernel": "du_local", "_chunk_bwd_kernel": "chunk_bwd",
           "_state_fwd_kernel": "state_fwd", "_state_bwd_kernel": "state_bwd"}
GLA_KERNELS = ("_chunk_delta_kernel", "_state_scan_kernel", "_output_fwd_kernel",
               "_chain_fwd_kernel", "_state_bwd_kernel", "_chunk_bwd_kernel")


def kernel_us(fn, names=KERNELS) -> dict:
    """Device time per call of fn (µs) of each kernel in ``names``, every launch of it in the
    call counted, keyed by ``names``' values."""
    times = kernel_times(fn)
    return {names[k]: round(us, 1) for k, us in times.items() if k in names}


def compiled_info(modules=(chunk_kernels, chunk_states), names=tuple(KERNELS)) -> dict:
    """{kernel: [{n_regs, n_spills, shared, num_warps}, ...]} for every compiled variant."""
    out = {}
    for name in names:
        fn = next((getattr(m, name) for m in modules if hasattr(m, name)), None)
        rows = []
        for cache in getattr(fn, "device_caches", {}).values():
            kernels = cache[0] if isinstance(cache, tuple) else cache
            for k in getattr(kernels, "values", lambda: [])():
                meta = getattr(k, "metadata", None)
                rows.append({"n_regs": getattr(k, "n_regs", None),
                             "n_spills": getattr(k, "n_spills", None),
                             "shared": getattr(meta, "shared", None),
                             "num_warps": getattr(meta, "num_warps", None)})
        out[name] = rows
    return out


GLA_VARIANTS = [  # changes to the gla kernel's CONFIGS; the first ({}) is the current setting
    {}, {"block_states": "recompute"}, {"chunk_bwd": dict(num_warps=2, num_stages=1)},
    {"chunk": 16}]  # one block per chunk: no earlier blocks to read, a 4x longer scan


def gla_report(shape, device, variants=GLA_VARIANTS, dtype_name="bfloat16") -> dict:
    """The gla chunk kernel (the model's default rule) in ``dtype_name`` ("bfloat16",
    "float32" with its fp32-grade products, or "float32_tf32" with PyTorch's TF32 switch on),
    at each change of its CONFIGS in ``variants`` (warps, where the block states come from,
    how its products multiply): the kernel times of forward + backward, forward and forward +
    backward time, peak memory, registers and spills; the settings are restored."""
    dtype = torch.float32 if dtype_name.startswith("float32") else torch.bfloat16
    inputs, do = make_inputs(*parse_shape(shape), dtype, device)
    fn = with_A_log(kernel_alone("gla"))
    leaves = [t.detach().requires_grad_() for t in inputs]

    def fwd():
        with torch.no_grad():
            return fn(*inputs)

    def fwdbwd():
        return torch.autograd.grad(fn(*leaves), leaves[:5], do)

    saved, first, rows = copy.deepcopy(gtc.CONFIGS), None, []
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "float32_tf32"
    try:
        for change in variants:
            gtc.CONFIGS.clear()
            gtc.CONFIGS.update(copy.deepcopy(saved))
            gtc.CONFIGS.update(copy.deepcopy(change))
            row = {"change": change}
            try:
                grads = fwdbwd()
                first = grads if first is None else first
                row["rel_vs_first"] = max(rel_err(a, b) for a, b in zip(grads, first, strict=True))
                row["kernels_us"] = kernel_us(fwdbwd, {k: k for k in GLA_KERNELS})
                row["fwd_ms"] = time_ms(fwd, device)
                row["fwdbwd_ms"] = time_ms(fwdbwd, device)
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
                fwdbwd()
                row["peak_mib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            except Exception as err:  # a setting that does not compile is reported
                row["error"] = f"{type(err).__name__}: {err}"[:300]
            print("  gla", row, flush=True)
            rows.append(row)
    finally:
        gtc.CONFIGS.clear()
        gtc.CONFIGS.update(saved)
        torch.backends.cuda.matmul.allow_tf32 = False
    return {"dtype": dtype_name, "variants": rows,
            "compiled": compiled_info((gla_blocks, gla_states), GLA_KERNELS)}


def graph_ms(fn, device) -> float:
    """Median ms of ``fn`` replayed as one CUDA graph (recorded after two eager calls):
    its launches without the host's work around them."""
    step = GraphedStep(fn, warmup=2)
    for _ in range(3):  # two eager, then the capture and its first replay
        step()
    return time_ms(step.graph.replay, device)


DELTA_FORWARD_KERNELS = ("_wy_fwd_kernel", "_state_fwd_kernel", "_output_kernel",
                         "_group_fwd_kernel", "_group_scan_fwd_kernel", "_chain_fwd_kernel")


def forward_report(shape, device, dtypes=("bfloat16", "float32_tf32", "float32"),
                       rule="gla") -> dict:
    """The rule's chunked kernel's forward alone (no autograd, as the kernel-only benchmark
    times it), per dtype: its time by do_bench (the host's launches included), the device
    time of each of its launches by torch.profiler, their sum, the same forward replayed as
    one CUDA graph (``graph_ms``: no host work between its launches), a device-to-device copy
    of its bytes (v, b, c, g, and β for the delta rule, read and o written): how much of
    the forward is the GPU's and how much the host's. Then the forward + backward's time
    (do_bench) and peak memory above the inputs, the backward reading what this forward
    kept, and the output itself (for comparing settings)."""
    fn = with_A_log(kernel_alone(rule))
    names = GLA_KERNELS if rule == "gla" else DELTA_FORWARD_KERNELS
    out, outputs = {}, {}
    for name in dtypes:
        dtype = torch.float32 if name.startswith("float32") else torch.bfloat16
        inputs, do = make_inputs(*parse_shape(shape), dtype, device)
        torch.backends.cuda.matmul.allow_tf32 = name == "float32_tf32"
        try:
            def fwd(inputs=inputs):
                with torch.no_grad():
                    return fn(*inputs)
            kernels = kernel_us(fwd, {k: k for k in names})
            read = inputs[:4] if rule == "gla" else inputs[:4] + inputs[5:]
            nbytes = sum(t.numel() * t.element_size() for t in read) + inputs[0].numel() \
                * inputs[0].element_size()
            flat = torch.empty(nbytes // 2, dtype=torch.uint8, device=device)  # read + write
            leaves = [t.detach().requires_grad_() for t in inputs]
            leaves = leaves[:5] if rule == "gla" else leaves  # gla has no beta

            def fwdbwd(leaves=leaves, do=do):
                return torch.autograd.grad(fn(*leaves), leaves, do)
            out[name] = {"fwd_ms": time_ms(fwd, device), "graph_ms": graph_ms(fwd, device),
                         "kernels_us": kernels,
                         "kernels_sum_ms": sum(kernels.values()) / 1e3,
                         "copy_ms": time_ms(flat.clone, device), "bytes": nbytes,
                         "fwdbwd_ms": time_ms(fwdbwd, device)}
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            fwdbwd()
            out[name]["peak_mib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            outputs[name] = [fwd(), *fwdbwd()]  # o, then every leaf's gradient
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        print(f"  {rule} forward", name, out[name], flush=True)
    return out, outputs


def forward_changes(shape, device, changes, rule="gla",
                        dtypes=("bfloat16", "float32_tf32", "float32"), partial=None) -> dict:
    """forward_report at each change of the rule's kernel's CONFIGS (e.g. the output
    kernel's warps, or its maxnreg; for the delta rule, the one-launch forward and its
    stretch), each output's relative RMS difference from the first change's, then the
    registers and spills of every variant of its kernels compiled; the settings are
    restored. A change applies to every dtype: for the delta rule its keys replace those of
    CONFIGS_16BIT too, which bf16 inputs read first ({} is each dtype's setting as it is).
    ``partial(rows)``, if given, is called after each change (a run cut short keeps them)."""
    tables = [gtc.CONFIGS] if rule == "gla" else [gdt.CONFIGS, gdt.CONFIGS_16BIT]
    saved, rows, first = [copy.deepcopy(t) for t in tables], [], None
    try:
        for change in changes:
            for table, kept in zip(tables, saved, strict=True):
                table.clear()
                table.update(copy.deepcopy(kept))
            tables[0].update(copy.deepcopy(change))
            for table in tables[1:]:  # the 16-bit overrides of the keys changed
                table.update({k: copy.deepcopy(v) for k, v in change.items() if k in table})
            print(f"  {rule} forward change", change, flush=True)
            try:
                forward, outputs = forward_report(shape, device, dtypes, rule)
            except Exception as err:  # a setting that does not compile is reported
                rows.append({"change": change, "error": f"{type(err).__name__}: {err}"[:300]})
                continue
            first = outputs if first is None else first
            for name, got in outputs.items():  # o, and the largest over the gradients
                forward[name]["rel_vs_first"] = rel_err(got[0], first[name][0])
                forward[name]["grads_rel_vs_first"] = max(
                    rel_err(x, y) for x, y in zip(got[1:], first[name][1:], strict=True))
            rows.append({"change": change, "forward": forward})
            if partial is not None:
                partial(rows)
    finally:
        for table, kept in zip(tables, saved, strict=True):
            table.clear()
            table.update(kept)
    if rule == "gla":
        return {"changes": rows, "compiled": compiled_info((gla_blocks, gla_states),
                                                          GLA_KERNELS)}
    return {"changes": rows, "compiled": compiled_info((chunk_kernels, chunk_states,
                                                        chunk_groups, chunk_chain),
                                                       DELTA_FORWARD_KERNELS)}


class Case:
    def __init__(self, shape, dtype_name, device):
        B, T, H, S, D = parse_shape(shape)
        dtype = torch.float32 if dtype_name.startswith("float32") else torch.bfloat16
        self.tf32 = dtype_name == "float32_tf32"
        self.half = dtype == torch.bfloat16  # its launch settings: CONFIGS_16BIT over CONFIGS
        self.inputs, self.do = make_inputs(B, T, H, S, D, dtype, device)
        self.fn = with_A_log(kernel_alone("delta"))
        self.leaves = [t.detach().requires_grad_() for t in self.inputs]
        self.device = device
        self.first = None

    def fwdbwd(self):
        return torch.autograd.grad(self.fn(*self.leaves), self.leaves, self.do)

    def fwd(self):
        with torch.no_grad():
            return self.fn(*self.inputs)

    def run(self, times=True) -> dict:
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        try:
            o = self.fwd()
            row = {"kernels_us": kernel_us(self.fwdbwd)}
            if self.first is None:
                self.first = o
            row["rel_vs_first"] = rel_err(o, self.first)
            if times:
                row["fwd_ms"] = time_ms(self.fwd, self.device)
                row["fwdbwd_ms"] = time_ms(self.fwdbwd, self.device)
        except Exception as err:  # a setting that does not compile is reported
            row = {"error": f"{type(err).__name__}: {err}"[:300]}
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        return row


def setting(chunk, warps, state, inverse="levels") -> dict:
    split, s_warps, stages = state
    cfg = {"chunk": chunk, "inverse": inverse}
    cfg.update({k: dict(num_warps=warps, num_stages=1) for k in IN_CHUNK})
    cfg.update({k: dict(split=split, num_warps=s_warps, num_stages=stages) for k in STATES})
    return cfg


def apply(cfg: dict, case) -> None:
    """Put a setting in force for ``case``'s dtype: the kernels' entries go to
    CONFIGS_16BIT for bf16 (which the kernels read first for 16-bit inputs), chunk and
    inverse to CONFIGS."""
    cfg = copy.deepcopy(cfg)
    if case.half:
        gdt.CONFIGS_16BIT.update({k: cfg.pop(k) for k in KERNELS.values() if k in cfg})
    gdt.CONFIGS.update(cfg)


def sweep(case, chunks, warps_list, states) -> dict:
    trials, best = [], {}
    for chunk in chunks:
        per_kernel = defaultdict(list)  # kernel -> [(us, its config)]
        for warps, state in zip(warps_list, states, strict=True):
            cfg = setting(chunk, warps, state)
            apply(cfg, case)
            row = case.run(times=False)
            trials.append({"config": cfg, **row})
            print("  ", chunk, warps, state, row, flush=True)
            if row.get("rel_vs_first", 1.0) < 1e-3:
                for kernel, us in row["kernels_us"].items():
                    per_kernel[kernel].append((us, cfg[kernel]))
        if len(per_kernel) < len(KERNELS):
            continue
        cfg = {"chunk": chunk, "inverse": "levels",
               **{k: min(v, key=lambda t: t[0])[1] for k, v in per_kernel.items()}}
        apply(cfg, case)
        row = case.run()
        best[chunk] = {"config": cfg, **row}
        print("   best", chunk, best[chunk], flush=True)
    if not best:
        return {"trials": trials}
    chunk = min(best, key=lambda c: best[c].get("fwdbwd_ms", float("inf")))
    other = dict(best[chunk]["config"], inverse="rows")
    apply(other, case)
    rows_row = {"config": other, **case.run()}
    print("   rows inverse", rows_row, flush=True)
    return {"trials": trials, "best_per_chunk": best, "rows_inverse": rows_row}


def group_sweep(shapes, dtypes, sizes, device) -> dict:
    """{shape: {dtype: [{"chunks", "groups", fwd_ms, fwdbwd_ms, rel_vs_walk}]}}: the walk
    (chunks None) and then each group size in ``sizes`` forced on; CONFIGS["group"] is
    restored afterwards."""
    saved, out = copy.deepcopy(gdt.CONFIGS["group"]), {}
    try:
        for shape in shapes:
            NC = -(-parse_shape(shape)[1] // gdt.CONFIGS["chunk"])  # chunks a sequence
            for name in dtypes:
                case, rows = Case(shape, name, device), []
                for G in [None, *sizes]:
                    gdt.CONFIGS["group"] = (dict(chunks=1 << 30, below=0) if G is None
                                            else dict(chunks=G, below=1 << 30))
                    row = {"chunks": G, "groups": gdt._groups(1, NC)[0]}  # as launched
                    row.update(case.run())
                    row.pop("kernels_us", None)
                    row["rel_vs_walk"] = row.pop("rel_vs_first")
                    print("  group", shape, name, row, flush=True)
                    rows.append(row)
                out.setdefault(shape, {})[name] = rows
    finally:
        gdt.CONFIGS["group"] = saved
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="B4_T4096_H40")
    parser.add_argument("--dtypes", nargs="*", default=["float32", "float32_tf32", "bfloat16"])
    parser.add_argument("--sweep-dtype", default="float32")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--chunks", nargs="*", type=int, default=list(gdt.CHUNKS))
    parser.add_argument("--warps", nargs="*", type=int, default=[1, 2, 4, 8],
                        help="the in-chunk kernels' warps, one setting per run")
    parser.add_argument("--states", nargs="*", default=["32,2,1", "16,1,3", "16,2,3", "8,1,3"],
                        help="split,warps,stages of the sequential passes, paired with --warps")
    parser.add_argument("--gla", action="store_true",
                        help="also the gla kernel's forward + backward at a few settings "
                             "(--gla-variants, GLA_VARIANTS by default)")
    parser.add_argument("--gla-dtype", default="bfloat16",
                        choices=["bfloat16", "float32", "float32_tf32"],
                        help="the dtype of --gla (float32: its fp32-grade products)")
    parser.add_argument("--gla-variants", nargs="*", default=None, metavar="JSON",
                        help="--gla's changes to the gla kernel's CONFIGS, each a JSON object, "
                             "the first the baseline (e.g. '{}' and '{\"fp32_products\": "
                             "{\"forward\": \"tf32x3\", \"backward\": \"tf32x3\"}}')")
    parser.add_argument("--gla-forward", action="store_true",
                        help="the gla kernel's forward alone: do_bench against its launches' "
                             "device time, per dtype (forward_report)")
    parser.add_argument("--gla-forward-changes", nargs="*", default=[], metavar="JSON",
                        help="changes to the gla kernel's CONFIGS, each a JSON object "
                             "(e.g. '{}' and '{\"output_fwd\": {\"num_warps\": 1, "
                             "\"num_stages\": 1, \"maxnreg\": 128}}'): --gla-forward "
                             "at each (forward_changes)")
    parser.add_argument("--delta-forward-changes", nargs="*", default=[], metavar="JSON",
                        help="changes to the delta kernel's CONFIGS, each a JSON object (e.g. "
                             "'{}' and '{\"forward\": \"chain\"}'): its forward alone, "
                             "as --gla-forward-changes times the gla kernel's")
    parser.add_argument("--forward-dtypes", nargs="*",
                        default=["bfloat16", "float32_tf32", "float32"],
                        help="the dtypes of --gla-forward-changes and --delta-forward-changes")
    parser.add_argument("--best-out", default=None, help="write the best setting here (JSON)")
    parser.add_argument("--gla-best-out", default=None,
                        help="write the gla change with the least forward + backward (JSON)")
    parser.add_argument("--group-sweep", nargs="*", type=int, default=[],
                        help="group sizes (chunks) to time the grouped passes at")
    parser.add_argument("--group-shapes", nargs="*", default=["B1_T16384_H40"])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    saved, saved_16 = copy.deepcopy(gdt.CONFIGS), copy.deepcopy(gdt.CONFIGS_16BIT)
    report = {"environment": environment(device, __file__, argv), "shape": args.shape,
              "configs": copy.deepcopy(gdt.CONFIGS),
              "configs_16bit": copy.deepcopy(gdt.CONFIGS_16BIT), "current": {}}

    def save():
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))

    def partial(key):
        """Saves the rows of a sweep so far under report[key]["changes"]."""
        def keep(rows):
            report[key] = {"changes": rows, "partial": True}
            save()
        return keep

    for name in args.dtypes:
        report["current"][name] = Case(args.shape, name, device).run()
        print(name, report["current"][name], flush=True)
        save()
    report["compiled"] = compiled_info()
    save()
    if args.gla:
        variants = ([json.loads(v) for v in args.gla_variants] if args.gla_variants
                    else GLA_VARIANTS)
        report["gla"] = gla_report(args.shape, device, variants, args.gla_dtype)
        timed = [r for r in report["gla"]["variants"]
                 if "fwdbwd_ms" in r and r["rel_vs_first"] < 1e-2]
        if timed and args.gla_best_out:
            best = min(timed, key=lambda r: r["fwdbwd_ms"])
            Path(args.gla_best_out).write_text(json.dumps(best["change"]))
        print("gla", report["gla"], flush=True)
        save()
    if args.gla_forward:
        report["gla_forward"] = forward_report(args.shape, device)[0]
        save()
    if args.gla_forward_changes:
        report["gla_forward_changes"] = forward_changes(
            args.shape, device, [json.loads(c) for c in args.gla_forward_changes], "gla",
            args.forward_dtypes, partial("gla_forward_changes"))
        print("gla forward compiled", report["gla_forward_changes"]["compiled"], flush=True)
        save()
    if args.delta_forward_changes:
        report["delta_forward_changes"] = forward_changes(
            args.shape, device, [json.loads(c) for c in args.delta_forward_changes], "delta",
            args.forward_dtypes, partial("delta_forward_changes"))
        print("delta forward compiled", report["delta_forward_changes"]["compiled"],
              flush=True)
        save()
    if args.group_sweep:
        report["group_sweep"] = group_sweep(args.group_shapes, args.dtypes, args.group_sweep,
                                            device)
        save()
    if not args.no_sweep:
        states = [tuple(int(x) for x in s.split(",")) for s in args.states]
        try:
            report["sweep"] = sweep(Case(args.shape, args.sweep_dtype, device), args.chunks,
                                    args.warps, states)
            best = report["sweep"].get("best_per_chunk", {})
            if best and args.best_out:
                chunk = min(best, key=lambda c: best[c].get("fwdbwd_ms", float("inf")))
                Path(args.best_out).write_text(json.dumps(best[chunk]["config"]))
        finally:
            for live, kept in ((gdt.CONFIGS, saved), (gdt.CONFIGS_16BIT, saved_16)):
                live.clear()
                live.update(kept)
        report["compiled_after_sweep"] = compiled_info()
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
