"""Every demo kernel (demo_traces/*.cu) runs on the emulator through its own launch script (with
smaller inputs) and produces the script's NumPy reference; where the synthetic generator
(tuiprof/trace/synth/) models the kernel, the recorded snapshot equals the synthetic trace access
for access: op table, warp layout, op ids, active masks, lane addresses, per-CTA access counts and
(except matmul16, see below) per-CTA instruction counts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.support.emu_support import cuda_ptx  # noqa: F401 (a fixture)
from tuiprof.collect.emu.device import EmuDevice, RecordChoice, first_ctas
from tuiprof.trace import synth

DEMOS = Path(__file__).resolve().parents[2] / "demo_traces"


def script(name: str, **overrides):
    spec = importlib.util.spec_from_file_location(f"launch_{name}", DEMOS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in overrides.items():
        setattr(mod, k, v)
    return mod


# (kernel file, launch script, overrides of its sizes, the synthetic trace of the same launch)
MATCHED = [
    ("vecadd.cu", "vecadd_launch", {}, lambda: synth.vecadd()),
    ("transpose.cu", "transpose_launch", {"N": 256}, lambda: synth.transpose(False, n=256, waves=1)),
    ("transpose.cu", "transpose_launch_tiled", {"N": 256}, lambda: synth.transpose(True, n=256, waves=1)),
    ("stencil.cu", "stencil_launch", {"NX": 64, "NY": 64, "NZ": 6}, lambda: synth.stencil7(64, 64, 6, waves=2)),
    ("matmul.cu", "matmul_launch", {"N": 96}, lambda: synth.matmul16(n=96)),
    ("spmv.cu", "spmv_launch", {"ROWS": 4096}, lambda: synth.spmv("random", 32, n_rows=4096)),
    ("spmv.cu", "spmv_launch_b", {"ROWS": 4096}, lambda: synth.spmv("block", 32, n_rows=4096)),
    ("spmv.cu", "spmv_launch_vec_u", {"ROWS": 4096}, lambda: synth.spmv("random", 32, vectorized=True, n_rows=4096)),
    ("spmv.cu", "spmv_launch_vec_b128", {"ROWS": 2048},
     lambda: synth.spmv("block", 128, vectorized=True, n_rows=2048)),
]


@pytest.mark.parametrize("source, name, overrides, build", MATCHED, ids=[m[1] for m in MATCHED])
def test_demo_output_and_trace_equal_the_synthetic_model(cuda_ptx, source, name, overrides, build):
    ref = build()
    module, src, text = cuda_ptx.file(DEMOS / source, "sm_75")
    ls = script(name, **overrides)
    dev = EmuDevice(module, src, text, record=RecordChoice(ref.launch.kernel, snapshot=ref.snapshot.cta_ids))
    ls.check(ls.setup(dev))
    rec = dev.recorded
    assert (rec.grid, rec.block) == (ref.launch.grid, ref.launch.block)
    assert [(o.kind, o.space, o.bytes, o.line, o.label) for o in rec.ops] == \
        [(o.kind, o.space, o.bytes, o.line, o.label) for o in ref.ops]
    for field in ("warp_offsets", "warp_cta", "warp_index", "op", "mask", "addr"):
        np.testing.assert_array_equal(getattr(rec, field), getattr(ref, field), err_msg=field)
    np.testing.assert_array_equal(rec.ctas.accesses, ref.ctas.accesses)
    if name == "matmul_launch":
        # synth counts the entry block's `bra.uni` that the taken `@p bra` skips: one per warp too many
        np.testing.assert_array_equal(rec.ctas.insts, ref.ctas.insts - ref.launch.warps_per_cta)
    else:
        np.testing.assert_array_equal(rec.ctas.insts, ref.ctas.insts)


OTHERS = [
    ("matmul_tiles.cu", "matmul_tiles_launch_8", {"N": 64}),
    ("matmul_tiles.cu", "matmul_tiles_launch", {"N": 64}),
    ("matmul_tiles.cu", "matmul_tiles_launch_32", {"N": 64}),
    ("cyclic_reduction.cu", "cyclic_reduction_launch", {"SYSTEMS": 4}),
    ("cyclic_reduction.cu", "cyclic_reduction_launch_nbc", {"SYSTEMS": 4}),
    ("bfs.cu", "bfs_launch", {"N": 4096}),
]


@pytest.mark.parametrize("source, name, overrides", OTHERS, ids=[o[1] for o in OTHERS])
def test_demo_output_equals_its_reference(cuda_ptx, source, name, overrides):
    module, src, text = cuda_ptx.file(DEMOS / source, "sm_75")
    ls = script(name, **overrides)
    dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=first_ctas(4)))
    ls.check(ls.setup(dev))
    rec = dev.recorded
    assert rec.op.shape[0] > 0 and (rec.mask != 0).all()
    assert rec.ctas.accesses.sum() >= rec.op.shape[0]


def test_recording_does_not_depend_on_the_thread_count(cuda_ptx):
    module, src, text = cuda_ptx.file(DEMOS / "spmv.cu", "sm_75")
    recs = []
    for threads in (1, 2):
        ls = script("spmv_launch_vec_u", ROWS=4096)
        dev = EmuDevice(module, src, text, record=RecordChoice(snapshot=[3, 0, 9, 15]), threads=threads)
        ls.setup(dev)
        recs.append(dev.recorded)
    for field in ("cta_ids", "warp_offsets", "op", "mask", "addr"):
        np.testing.assert_array_equal(getattr(recs[0], field), getattr(recs[1], field))
    np.testing.assert_array_equal(recs[0].ctas.insts, recs[1].ctas.insts)
