"""The StaticOp table: memory-op classification, bulk-sequence starts on hand-built PTX, source
labels, and the demos against the synthetic models of tuiprof.trace.synth."""

from __future__ import annotations

import pytest

from tests.support.ptx_support import DEMO_DIR, FIXTURES, compile_nvcc, find_nvcc
from tuiprof.ptx import PtxError, parse_module
from tuiprof.ptx.module import Module, ResolvedLoc
from tuiprof.ptx.ops import (
    barrier_functions,
    candidates,
    instruction_location,
    memory_ops,
    sequence_starts,
    source_params,
    static_ops,
    user_file,
)
from tuiprof.trace import synth

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"
REGS = (".reg .pred %p<5>;\n.reg .b32 %r<20>;\n.reg .b64 %rd<20>;\n.reg .f32 %f<10>;\n"
        ".reg .b16 %rs<3>;\n")


def module(body: str, extra: str = "") -> Module:
    text = (HEADER + extra + ".visible .entry k(\n.param .u64 k_param_0,\n.param .u64 k_param_1\n)\n{\n"
            + REGS + body + "\n}\n")
    return parse_module(text)


def starts_by_line(m: Module) -> list[bool]:
    """Sequence-start flags of the memory instructions, in program order."""
    f = m.functions["k"]
    s = sequence_starts(f)
    return [s[i] for i in sorted(s)]


PROLOGUE = """
	ld.param.u64 %rd1, [k_param_0];
	ld.param.u64 %rd2, [k_param_1];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd3, %rd5;
	add.s64 %rd7, %rd4, %rd5;
"""


# --------------------------------------------------------------------------- classification


def test_memory_op_classification() -> None:
    body = """
	ld.param.u64 %rd1, [k_param_0];
	ld.const.f32 %f1, [c];
	ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
	ld.f32 %f5, [%rd1];
	st.local.u32 [%rd1], %r1;
	atom.global.add.u32 %r2, [%rd1], 1;
	red.shared.add.u32 [%r3], 1;
	ld.global.b128 %rd2, [%rd1];
	st.shared.v2.u16 [%r3+4], {%rs1, %rs2};
	ldu.global.u32 %r4, [%rd1];
	cp.async.ca.shared.global [%r3], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_group 0;
	prefetch.global.L2 [%rd1];
	ret;
"""
    m = module(body, extra=".const .align 4 .f32 c;\n")
    got = [[(o.kind, o.space, o.bytes) for o in memory_ops(ins, i)]
           for i, ins in enumerate(m.functions["k"].instructions)]
    assert got == [
        [], [("load", "const", 4)],  # __constant__ memory: an op of its own space (issue 22)
        [("load", "global", 16)],
        [("load", "global", 4)],  # generic: global until proved otherwise
        [("store", "local", 4)],
        [("atomic", "global", 4)],
        [("atomic", "shared", 4)],
        [("load", "global", 16)],
        [("store", "shared", 4)],
        [("load", "global", 4)],
        [("load", "global", 16), ("store", "shared", 16)],
        [], [], [], [],
    ]


def test_bulk_cp_async_is_refused() -> None:
    m = module(".reg .b64 %rb<3>;\ncp.async.bulk.shared::cluster.global [%rd1], [%rd2], 64;\nret;")
    with pytest.raises(PtxError, match="bulk"):
        memory_ops(m.functions["k"].instructions[0], 0)


# --------------------------------------------------------------------------- sequences


def test_first_op_starts_and_independent_loads_do_not() -> None:
    m = module(PROLOGUE + "ld.global.f32 %f1, [%rd6];\nld.global.f32 %f2, [%rd7];\n"
               "st.global.f32 [%rd6], %f1;\nret;")
    assert starts_by_line(m) == [True, False, False]


def test_dependent_load_chain_starts_new_sequences() -> None:
    body = PROLOGUE + """
	ld.global.u32 %r2, [%rd6];
	mul.wide.u32 %rd8, %r2, 4;
	add.s64 %rd9, %rd4, %rd8;
	ld.global.f32 %f1, [%rd9];
	ld.global.f32 %f2, [%rd7];
	cvt.rzi.s32.f32 %r3, %f1;
	mul.wide.s32 %rd10, %r3, 4;
	add.s64 %rd11, %rd3, %rd10;
	st.global.f32 [%rd11], %f2;
	mul.wide.u32 %rd12, %r2, 8;
	add.s64 %rd13, %rd3, %rd12;
	ld.global.f32 %f3, [%rd13];
	ret;
"""
    # x = a[i] (starts); b[x] depends (starts); c[i] no; the store's address depends on b[x]'s
    # value, read in the current sequence (starts); the last load depends on a[i], read by a
    # previous sequence, so it does not
    assert starts_by_line(module(body)) == [True, True, False, True, False]


def test_redefinition_kills_the_dependence() -> None:
    body = PROLOGUE + """
	ld.global.u32 %r2, [%rd6];
	mov.u32 %r2, 3;
	mul.wide.u32 %rd8, %r2, 4;
	add.s64 %rd9, %rd4, %rd8;
	ld.global.f32 %f1, [%rd9];
	ret;
"""
    assert starts_by_line(module(body)) == [True, False]


def test_barrier_starts_a_sequence_but_warp_sync_does_not() -> None:
    body = PROLOGUE + """
	ld.global.f32 %f1, [%rd6];
	bar.warp.sync -1;
	ld.global.f32 %f2, [%rd7];
	bar.sync 0;
	st.global.f32 [%rd6], %f2;
	barrier.sync.aligned 0;
	ld.global.f32 %f3, [%rd7];
	bar.red.popc.u32 %r5, 0, %p1;
	ld.global.f32 %f4, [%rd6];
	ret;
"""
    assert starts_by_line(module(body)) == [True, False, True, True, True]


def test_loop_back_edge_starts_the_body_on_every_iteration() -> None:
    body = PROLOGUE + """
	ld.global.f32 %f1, [%rd6];
	mov.u32 %r4, 0;
$LOOP:
	ld.global.f32 %f2, [%rd7];
	st.global.f32 [%rd6], %f2;
	add.u32 %r4, %r4, 1;
	setp.lt.u32 %p1, %r4, 8;
	@%p1 bra $LOOP;
	st.global.f32 [%rd7], %f1;
	ret;
"""
    # the loop's first load follows the back-edge on every iteration but the first (path OR);
    # the store after the loop is reached by the loop's exit edge, which is not a back-edge
    assert starts_by_line(module(body)) == [True, True, False, False]


def test_join_of_paths_ors_the_start_condition() -> None:
    body = PROLOGUE + """
	ld.global.u32 %r2, [%rd6];
	@%p1 bra $SKIP;
	mov.u32 %r2, 0;
$SKIP:
	mul.wide.u32 %rd8, %r2, 4;
	add.s64 %rd9, %rd4, %rd8;
	ld.global.f32 %f1, [%rd9];
	ret;
"""
    # on the path through the branch the index still holds the loaded value
    assert starts_by_line(module(body)) == [True, True]


def test_device_function_first_op_does_not_start() -> None:
    text = HEADER + """.func _Z1fPf(.param .b64 _Z1fPf_param_0)
{
	.reg .b64 %rd<3>;
	.reg .f32 %f<2>;
	ld.param.u64 %rd1, [_Z1fPf_param_0];
	ld.global.f32 %f1, [%rd1];
	ret;
}
"""
    f = parse_module(text).functions["_Z1fPf"]
    assert sequence_starts(f) == {1: False}
    assert sequence_starts(f, entry_starts=True) == {1: True}


def test_call_to_a_function_with_a_barrier_counts_as_one() -> None:
    extra = """.func _Z4syncv()
{
	bar.sync 0;
	ret;
}
.func _Z5outerv()
{
	call.uni _Z4syncv, ();
	ret;
}
.func _Z4noopv()
{
	ret;
}
"""
    body = PROLOGUE + """
	ld.global.f32 %f1, [%rd6];
	call.uni _Z4noopv, ();
	ld.global.f32 %f2, [%rd7];
	call.uni _Z5outerv, ();
	st.global.f32 [%rd6], %f2;
	ret;
"""
    m = module(body, extra=extra)
    assert barrier_functions(m) == {"_Z4syncv", "_Z5outerv", "k"}  # k calls outer
    f = m.functions["k"]
    s = sequence_starts(f, barrier_calls=barrier_functions(m))
    assert [s[i] for i in sorted(s)] == [True, False, True]
    assert [o.starts_sequence for _, _, o in static_ops(m, "k", "k.cu", "")] == [True, False, True]


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("line, want", [
    ("    C[id] = A[id] + B[id];", [("C[id]", "lhs"), ("A[id]", "rhs"), ("B[id]", "rhs")]),
    ("    t += val[j] * yval;", [("val[j]", "rhs")]),
    ("    s[t] += 1;", [("s[t]", "both")]),
    ("    hist[b]++;", [("hist[b]", "both")]),
    ("    for (int j = 0; j < 16; ++j) loc[j] = in[(i + j) % n];", [("loc[j]", "lhs"), ("in[(i + j) % n]", "rhs")]),
    ("    if (tid == 0) { data[0] = 42; *flag = 1; }", [("data[0]", "lhs"), ("*flag", "lhs")]),
    ("    while (*flag == 0) { }", [("*flag", "rhs")]),
    ("    atomicAdd(&hist[data[i]], 1u);", [("hist[data[i]]", "arg"), ("data[i]", "rhs")]),
    ("    atomicAdd(out, s);", [("atomicAdd(out, s)", "arg")]),
    ("    float yval = y[ind.x]; // y[not]", [("y[ind.x]", "rhs")]),
    ("    node->next->val = p->val;", [("node->next->val", "lhs"), ("p->val", "rhs")]),
    ("    Csub += As[ty][k] * Bs[k][tx];", [("As[ty][k]", "rhs"), ("Bs[k][tx]", "rhs")]),
    ("    float *p = q; int v = a * b;", []),
    ("    x = y * *q;", [("*q", "rhs")]),
    ("    if (a[i] == b[i]) c = 1;", [("a[i]", "rhs"), ("b[i]", "rhs")]),
])
def test_label_candidates(line: str, want: list[tuple[str, str]]) -> None:
    assert [(c.text, c.side) for c in candidates(line)] == want


def test_source_params_of_kernels_and_templates() -> None:
    src = """
template <typename T, int U>
__global__ void axpy(T a, const T* x, T* y, int n) { }
extern "C" __global__ void k(float *out, const float * __restrict__ in, int n = 3) { }
__device__ __noinline__ void store_pair(float* out, int i, float v) { }
__global__ void decl(int* a);
"""
    assert source_params(src, "_Z4axpyIfLi4EEvT_PKS0_PS0_i") == ["a", "x", "y", "n"]
    assert source_params(src, "k") == ["out", "in", "n"]
    assert source_params(src, "_Z10store_pairPfif") == ["out", "i", "v"]
    assert source_params(src, "decl") == []


def test_user_file_by_path_then_basename_else_none() -> None:
    m = parse_module(HEADER + '.file 1 "/usr/include/x.h"\n.file 2 "/home/u/app.cu"\n'
                     '.file 3 "/other/app.cu"\n')
    assert user_file(m, "/other/app.cu") == 3
    assert user_file(m, "app.cu") == 2
    # a kernel in a header has no line in the file that includes it: no file is that file
    assert user_file(m, "elsewhere.cu") is None


def test_unknown_kernel_is_an_error_naming_the_kernels() -> None:
    m = module("ret;")
    with pytest.raises(PtxError) as e:
        static_ops(m, "nope", "k.cu", "")
    assert "nope" in e.value.message and "k" in e.value.hint


def test_generic_access_proved_shared_through_cvta() -> None:
    body = """
	.shared .align 4 .b8 tile[128];
	mov.u32 %r1, tile;
	cvt.u64.u32 %rd1, %r1;
	cvta.shared.u64 %rd2, %rd1;
	ld.f32 %f1, [%rd2+4];
	ld.param.u64 %rd3, [k_param_0];
	ld.f32 %f2, [%rd3];
	ret;
"""
    ops = static_ops(module(body), "k", "k.cu", "")
    assert [o.space for _, _, o in ops] == ["shared", "global"]


# --------------------------------------------------------------------------- demos

SYNTH = {
    "kernel_vec_add": synth.VecAdd, "spmv_csr_scalar": synth.SpmvScalar,
    "spmv_csr_vector4": synth.SpmvVector, "transpose_naive": synth.TransposeNaive,
    "transpose_tiled": synth.TransposeTiled, "matmul16": synth.Matmul16, "stencil7": synth.Stencil7,
}
RULE_DIFFERS = {("matmul16", "C[c + wB * ty + tx]")}
"""Where the synthetic models' hand marking disagrees with the rule: the store of C follows the loop's last
__syncthreads() on every path, so by the rule (and synth's own docstring) it starts a sequence."""


def synth_ops(kernel: str) -> tuple:
    cls = SYNTH[kernel]
    return cls.ops(cls.__new__(cls))


def demo_modules(tmp_path) -> list[tuple[str, str, Module]]:
    """(source name, tag, module) for every demo: committed nvcc and NVRTC fixtures, and a fresh
    nvcc compile when nvcc is installed."""
    out = []
    for src in sorted(DEMO_DIR.glob("*.cu")):
        for kind in ("nvcc", "nvrtc"):
            for p in sorted(FIXTURES.glob(f"{kind}/demo_{src.stem}.*.ptx")):
                out.append((src.name, p.name, parse_module(p.read_text())))
        if find_nvcc():
            ptx = compile_nvcc(src, 75, tmp_path / f"{src.stem}.ptx")
            out.append((src.name, "fresh-nvcc", parse_module(ptx)))
    return out


def test_demo_ops_point_at_their_lines_and_match_synth(tmp_path) -> None:
    covered = set()
    for name, tag, m in demo_modules(tmp_path):
        text = (DEMO_DIR / name).read_text()
        lines = text.splitlines()
        for kernel in m.kernels:
            table = static_ops(m, kernel, name, text)
            assert table, (tag, kernel)
            ops = {o.id: o for _, _, o in table}
            ordered = [ops[i] for i in sorted(ops)]
            for o in ordered:
                assert o.file == name and o.label and o.label in lines[o.line - 1], (tag, o)
                assert lines[o.line - 1][o.column - 1:].startswith(o.label)  # the label's column
            if kernel not in SYNTH:  # the newer demos have no synthetic model
                continue
            want = synth_ops(kernel)
            assert [(o.kind, o.space, o.bytes, o.label) for o in ordered] == [
                (w.kind, w.space, w.bytes, w.label) for w in want], (tag, kernel)
            assert [(o.line, o.column) for o in ordered] == [(w.line, w.column) for w in want], (tag, kernel)
            for o, w in zip(ordered, want):
                if (kernel, o.label) in RULE_DIFFERS:
                    assert o.starts_sequence and not w.starts_sequence
                else:
                    assert o.starts_sequence == w.starts_sequence, (tag, kernel, o.label)
            covered.add(kernel)
    assert covered == set(SYNTH)


def test_unrolled_copies_share_one_op() -> None:
    p = FIXTURES / "nvcc" / "demo_transpose.sm75.ptx"
    m = parse_module(p.read_text())
    table = static_ops(m, "transpose_naive", "transpose.cu", (DEMO_DIR / "transpose.cu").read_text())
    assert len(table) == 8  # 4 unrolled iterations x (load, store)
    assert [o.id for _, _, o in table] == [0, 1] * 4
    assert len({i for i, _, _ in table}) == 1 and len({i for _, i, _ in table}) == 8


def test_instruction_location_resolves_inlining_and_line_zero() -> None:
    text = HEADER + """.visible .entry k()
{
	.reg .b32 %r<4>;
	.loc 1 7 3
	.loc 2 100 1, function_name $L__info_string0, inlined_at 1 7 3
	mov.u32 %r1, 1;
	.loc 1 0 5
	mov.u32 %r2, 2;
	.loc 1 9 4
	mov.u32 %r3, 3;
	ret;
}
	.file 1 "/src/app.cu"
	.file 2 "/usr/local/cuda/include/h.hpp"
"""
    m = parse_module(text)
    f = m.functions["k"]
    assert instruction_location(m, f, 0, "app.cu") == ResolvedLoc("app.cu", 7, 3)
    assert instruction_location(m, f, 1, "app.cu") == ResolvedLoc("app.cu", 9, 4)  # line 0: next line
    assert instruction_location(m, f, 2, "/src/app.cu") == ResolvedLoc("app.cu", 9, 4)
    # compiled from another name: the PTX's own file, by its name (issue 22: a header kernel's
    # lines are never shown as the including file's)
    assert instruction_location(m, f, 0, "other.cu") == ResolvedLoc("app.cu", 7, 3)


def test_barrier_pairs_are_the_ones_every_path_crosses() -> None:
    # load A; loop { bar; load B; store C }; bar; store D. B follows A and C across a barrier on
    # every path; C follows B with none; D follows C across the barrier after the loop. A load of
    # an inner loop reached both from a barrier and from its own back-edge gets no pair.
    body = PROLOGUE + """
	ld.global.f32 %f1, [%rd6];
$L_loop:
	bar.sync 0;
	ld.global.f32 %f2, [%rd7];
	st.global.f32 [%rd6], %f2;
	setp.lt.u32 %p1, %r1, 8;
	@%p1 bra $L_loop;
	bar.sync 0;
	st.global.f32 [%rd7], %f1;
$L_inner:
	ld.global.f32 %f3, [%rd6];
	setp.lt.u32 %p2, %r1, 4;
	@%p2 bra $L_inner;
	ret;
"""
    ops = [o for _, _, o in static_ops(module(body), "k", "k.cu", "")]
    assert [o.barrier_after for o in ops] == [(), (0, 2), (), (2,), ()]
