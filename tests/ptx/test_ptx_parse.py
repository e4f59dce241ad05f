"""parse_module on hand-written PTX: every construct of nvcc/NVRTC output, and the errors."""

from __future__ import annotations

import struct

import pytest

from tuiprof.errors import TuiprofError
from tuiprof.ptx import PtxError, parse_module
from tuiprof.ptx.module import Addr, Args, Imm, Label, NegPred, PredDest, Reg, Sink, SourceLoc, Special, Sym, Vec

HEADER = ".version 9.0\n.target sm_75\n.address_size 64\n"


def kernel(body: str, params: str = ".param .u64 k_param_0", regs: str = "") -> str:
    regs = regs or ".reg .pred %p<3>;\n.reg .b32 %r<10>;\n.reg .b64 %rd<10>;\n.reg .f32 %f<10>;"
    return HEADER + f".visible .entry k(\n{params}\n)\n{{\n{regs}\n{body}\n}}\n"


def only(text: str):
    m = parse_module(text)
    return m, m.functions["k"]


def test_directives_and_file_table() -> None:
    text = kernel("ret;") + ('.file 1 "/home/u/app.cu", 1700000000, 1234\n'
                             '.file 2 "/usr/local/cuda/include/cuda_fp16.hpp"\n')
    m = parse_module(text)
    assert (m.version, m.target, m.address_size) == ("9.0", "sm_75", 64)
    assert m.files == {1: "/home/u/app.cu", 2: "/usr/local/cuda/include/cuda_fp16.hpp"}
    assert list(m.kernels) == ["k"]


def test_target_with_options_and_32_bit_addresses() -> None:
    m = parse_module(".version 8.5\n.target sm_90a, debug\n.address_size 32\n")
    assert m.target == "sm_90a, debug" and m.address_size == 32 and m.functions == {}


def test_function_headers_linkage_returns_and_performance_directives() -> None:
    text = HEADER + """
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.weak .func (.param .align 16 .b8 func_retval0[16]) _Z3fooi(
	.param .b32 _Z3fooi_param_0
)
.noreturn
{
	.reg .b32 %r<2>;
	ld.param.u32 %r1, [_Z3fooi_param_0];
	st.param.b32 [func_retval0+0], %r1;
	trap;
}
.visible .entry bar(
	.param .u64 .ptr .global .align 16 bar_param_0,
	.param .align 8 .b8 bar_param_1[24],
	.param .f32 bar_param_2
)
.maxntid 256, 1, 1
.minnctapersm 2
.maxnreg 64
{
	ret;
}
.entry empty()
.reqntid 32
{
	ret;
}
"""
    m = parse_module(text)
    v = m.functions["vprintf"]
    assert not v.has_body and v.linkage == "extern" and not v.is_entry
    assert [p.name for p in v.params] == ["vprintf_param_0", "vprintf_param_1"]
    assert v.ret_params[0].name == "func_retval0" and v.ret_params[0].size_bytes == 4
    foo = m.functions["_Z3fooi"]
    assert foo.linkage == "weak" and foo.noreturn and foo.has_body
    assert foo.ret_params[0].size_bytes == 16 and foo.ret_params[0].align == 16
    assert foo.ret_params[0].dims == (16,)
    bar = m.functions["bar"]
    p0, p1, p2 = bar.params
    assert p0.is_pointer_hint and p0.ptr_space == "global" and p0.align == 16 and p0.size_bytes == 8
    assert (p1.type, p1.size_bytes, p1.align, p1.dims) == ("b8", 24, 8, (24,))
    assert (p2.type, p2.size_bytes, p2.is_pointer_hint) == ("f32", 4, False)
    assert bar.maxntid == (256, 1, 1) and bar.minnctapersm == 2 and bar.maxnreg == 64
    assert m.functions["empty"].params == () and m.functions["empty"].reqntid == (32,)
    assert list(m.kernels) == ["bar", "empty"]


def test_register_ranges_expand() -> None:
    _, f = only(kernel("ret;", regs=".reg .pred %p<4>;\n.reg .b64 %rd<29>;\n.reg .f32 x, y;"))
    assert [r for r in f.registers if r.startswith("%p")] == ["%p0", "%p1", "%p2", "%p3"]
    assert sum(1 for r in f.registers if r.startswith("%rd")) == 29 and f.registers["%rd28"] == "b64"
    assert f.registers["x"] == "f32" and f.registers["y"] == "f32"


def test_variables_alignment_arrays_initialisers() -> None:
    text = HEADER + """
.global .align 4 .u32 table[3] = {1, 2, 3};
.global .align 1 .b8 $str[6] = {104, 105, 0};
.const .align 4 .f32 coeffs[2] = {0f3F800000, 0fBF000000};
.const .align 8 .f64 half = 0d3FE0000000000000;
.global .align 8 .u64 big = 0xFFFFFFFFFFFFFFFF;
.global .s32 neg[2] = {-1, -2};
.extern .shared .align 16 .b8 dyn[];
.visible .shared .align 4 .b8 tile[32][33];
.global .u32 a, b;
.global .u16 grid[][2] = {1, 2, 3, 4, 5};
.visible .entry k()
{
	.local .align 16 .b8 __local_depot0[80];
	.shared .align 4 .b8 _ZZ1kE4tile[1024];
	ret;
}
"""
    m = parse_module(text)
    v = {x.name: x for x in m.variables}
    assert v["table"].init == struct.pack("<3I", 1, 2, 3) and v["table"].size_bytes == 12
    assert v["$str"].init == bytes([104, 105, 0, 0, 0, 0]) and v["$str"].dims == (6,)
    assert v["coeffs"].init == struct.pack("<2f", 1.0, -0.5) and v["coeffs"].space == "const"
    assert v["half"].init == struct.pack("<d", 0.5) and v["half"].align == 8
    assert v["big"].init == b"\xff" * 8
    assert v["neg"].init == struct.pack("<2i", -1, -2)
    assert v["dyn"].is_dynamic_shared and v["dyn"].size_bytes == 0 and v["dyn"].align == 16
    assert v["tile"].dims == (32, 33) and v["tile"].size_bytes == 32 * 33 and v["tile"].linkage == "visible"
    assert v["a"].init is None and v["b"].size_bytes == 4
    assert v["grid"].dims == (3, 2) and v["grid"].init == struct.pack("<6H", 1, 2, 3, 4, 5, 0)
    fv = {x.name: x for x in m.functions["k"].variables}
    assert fv["__local_depot0"].space == "local" and fv["__local_depot0"].size_bytes == 80
    assert fv["_ZZ1kE4tile"].space == "shared" and fv["_ZZ1kE4tile"].align == 4


def test_instructions_mods_guards_and_operands() -> None:
    body = """
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %laneid;
	setp.ge.u32 	%p1, %r1, 0x20;
	@%p1 bra 	$L__BB0_2;
	@!%p1 add.s32 %r3, %r1, -7;
	ld.global.nc.v4.f32 	{%f1, %f2, _, %f4}, [%rd2+-16];
	st.global.v2.f32 	[%rd2+8], {%f1, %f2};
	shfl.sync.down.b32 	%r4|%p2, %r1, 16, 31, -1;
	setp.lt.and.s32 	%p1|%p2, %r1, %r2, !%p1;
	mov.f32 	%f5, 0f3F800000;
	mov.f64 	%fd1, 0dBFF0000000000000;
	ld.global.L1::no_allocate.b32 %r5, [%rd2];
$L__BB0_2:
	ret;
"""
    regs = ".reg .pred %p<3>;\n.reg .b32 %r<10>;\n.reg .b64 %rd<10>;\n.reg .f32 %f<10>;\n.reg .f64 %fd<3>;"
    text = kernel(body, regs=regs)
    _, f = only(text)
    ins = f.instructions
    assert ins[0].opcode == "ld" and ins[0].mods == ("param", "u64") and ins[0].space == "param"
    assert ins[0].operands == (Reg("%rd1"), Addr(Sym("k_param_0"), 0))
    assert ins[2].operands[1] == Special("tid", "x") and ins[3].operands[1] == Special("laneid")
    assert ins[4].operands[2] == Imm(0x20, "0x20")
    assert ins[5].guard == ("%p1", False) and ins[5].operands == (Label("$L__BB0_2"),)
    assert ins[6].guard == ("%p1", True) and ins[6].operands[2] == Imm(-7, "-7")
    ld = ins[7]
    assert ld.mods == ("global", "nc", "v4", "f32") and (ld.space, ld.type, ld.vector) == ("global", "f32", 4)
    assert ld.operands == (Vec((Reg("%f1"), Reg("%f2"), Sink(), Reg("%f4"))), Addr(Reg("%rd2"), -16))
    assert ins[8].operands == (Addr(Reg("%rd2"), 8), Vec((Reg("%f1"), Reg("%f2"))))
    assert ins[9].operands[0] == PredDest(Reg("%r4"), Reg("%p2")) and ins[9].operands[4] == Imm(-1, "-1")
    assert ins[10].operands[0] == PredDest(Reg("%p1"), Reg("%p2"))
    assert ins[10].operands[3] == NegPred(Reg("%p1"))
    assert ins[11].operands[1] == Imm(0x3F800000, "0f3F800000", 32)
    assert ins[12].operands[1] == Imm(0xBFF0000000000000, "0dBFF0000000000000", 64)
    assert ins[13].mods == ("global", "L1::no_allocate", "b32") and ins[13].space == "global"
    assert f.labels == {"$L__BB0_2": 14}
    lines = text.splitlines()
    assert [lines[i.ptx_line - 1].split()[0] for i in ins] == [
        "ld.param.u64", "cvta.to.global.u64", "mov.u32", "mov.u32", "setp.ge.u32", "@%p1", "@!%p1",
        "ld.global.nc.v4.f32", "st.global.v2.f32", "shfl.sync.down.b32", "setp.lt.and.s32",
        "mov.f32", "mov.f64", "ld.global.L1::no_allocate.b32", "ret;"]


def test_integer_literal_forms() -> None:
    body = "mov.u32 %r1, 017;\nmov.u32 %r2, 0b101;\nmov.u32 %r3, 42U;\nmov.f32 %f1, 1.5;\nret;"
    _, f = only(kernel(body))
    assert [i.operands[1].value for i in f.instructions[:4]] == [15, 5, 42, 1.5]


def test_addresses_absolute_symbolic_and_32_bit_shared() -> None:
    text = HEADER + """.const .align 4 .b8 coeffs[64];
.visible .entry k()
{
	.reg .b32 %r<4>;
	.reg .f32 %f<3>;
	.shared .align 4 .b8 tile[64];
	ld.const.f32 %f1, [coeffs+4];
	ld.shared.f32 %f2, [tile];
	st.shared.f32 [%r1], %f1;
	ld.global.u32 %r2, [0x100];
	mov.u32 %r3, tile;
	ret;
}
"""
    f = parse_module(text).functions["k"]
    ops = [i.operands for i in f.instructions]
    assert ops[0][1] == Addr(Sym("coeffs"), 4) and ops[1][1] == Addr(Sym("tile"), 0)
    assert ops[2][0] == Addr(Reg("%r1"), 0) and ops[3][1] == Addr(None, 0x100)
    assert ops[4][1] == Sym("tile")


def test_loc_inlined_at_chains_by_latest_definition() -> None:
    body = """
	.loc	1 9 5
	.loc	1 2 5, function_name $L__info_string0, inlined_at 1 9 5
	.loc	2 440 9, function_name $L__info_string1, inlined_at 1 2 5
	mov.u32 	%r1, 1;
	.loc	1 2 5, function_name $L__info_string0, inlined_at 1 14 5
	.loc	2 440 9, function_name $L__info_string1, inlined_at 1 2 5
	mov.u32 	%r2, 2;
	.loc	1 20 3
	ret;
"""
    _, f = only(kernel(body))
    a, b, c = (i.loc for i in f.instructions)
    assert a == SourceLoc(2, 440, 9, SourceLoc(1, 2, 5, SourceLoc(1, 9, 5), "$L__info_string0"),
                          "$L__info_string1")
    assert b.outermost == SourceLoc(1, 14, 5)
    assert [(x.file, x.line) for x in b.chain] == [(2, 440), (1, 2), (1, 14)]
    assert c == SourceLoc(1, 20, 3)


def test_debug_sections_and_comments_are_skipped() -> None:
    text = kernel("/* block\n comment */ ret; // trailing") + """
	.section	.debug_str
	{
$L__info_string0:
.b8 95,90,49,0
	}
	.section	.debug_abbrev
	{
.b8 1
	}
"""
    m = parse_module(text)
    assert [i.opcode for i in m.functions["k"].instructions] == ["ret"]


def test_inline_asm_scopes_rename_and_shadow() -> None:
    body = """
	mov.u32 %r1, 5;
	// begin inline asm
	{.reg .pred p; .reg .b32 %r1; setp.ne.u32 p, %r2, 0; @p mov.u32 %r1, 7; mov.u32 %r3, %r1;
	}
	// end inline asm
	{mul.lo.u32 %r4,%r1,%r1;
}
	{
	.reg.b32 t;
	{ .reg .b32 t; mov.u32 t, 1; }
	mov.u32 t, 2;
	}
	add.u32 %r5, %r1, 1;
	ret;
"""
    _, f = only(kernel(body))
    ins = f.instructions
    setp, guarded, copy = ins[1], ins[2], ins[3]
    assert setp.operands[0] == Reg("p~1") and f.registers["p~1"] == "pred"
    assert guarded.guard == ("p~1", False) and guarded.operands[0] == Reg("%r1~1")
    assert copy.operands == (Reg("%r3"), Reg("%r1~1"))
    assert ins[4].operands == (Reg("%r4"), Reg("%r1"), Reg("%r1"))  # outer %r1 again
    inner, outer = ins[5].operands[0], ins[6].operands[0]
    assert inner != outer and {inner.name, outer.name} == {"t~3", "t~4"} and outer == Reg("t~3")
    assert ins[7].operands[1] == Reg("%r1")


def test_multi_line_call_with_param_blocks() -> None:
    text = HEADER + """
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.func _Z4sinkv()
{
	ret;
}
.visible .entry k()
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd1;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd2;
	.param .b32 retval0;
	call.uni (retval0),
	vprintf,
	(
	param0,
	param1
	);
	ld.param.b32 	%r1, [retval0+0];
	} // callseq 0
	{ // callseq 1, 0
	.param .b64 param0;
	call.uni _Z4sinkv, ();
	}
	call.uni _Z4sinkv;
	ret;
}
"""
    m = parse_module(text)
    f = m.functions["k"]
    call = f.instructions[2]
    assert call.opcode == "call" and call.mods == ("uni",)
    assert call.operands == (Args((Sym("retval0~1"),)), Sym("vprintf"),
                             Args((Sym("param0~1"), Sym("param1~1"))))
    assert f.instructions[0].operands[0] == Addr(Sym("param0~1"), 0)
    assert f.instructions[3].operands[1] == Addr(Sym("retval0~1"), 0)
    params = {v.name: v for v in f.variables}
    assert params["param0~1"].space == "param" and params["param0~1"].size_bytes == 8
    assert "param0~2" in params
    assert f.instructions[4].operands == (Args(()), Sym("_Z4sinkv"), Args(()))
    assert f.instructions[5].operands == (Args(()), Sym("_Z4sinkv"), Args(()))


def test_labels_at_the_end_and_several_per_instruction() -> None:
    body = "@%p1 bra $L__BB0_9;\n$L__BB0_1:\n$L__BB0_2: mov.u32 %r1, 1;\n$L__BB0_9:"
    _, f = only(kernel(body))
    assert f.labels == {"$L__BB0_1": 1, "$L__BB0_2": 1, "$L__BB0_9": 2}


def test_brx_idx_branch_targets() -> None:
    body = """
	mov.u32 %r1, 1;
$tbl: .branchtargets $L_a, $L_b;
	brx.idx %r1, $tbl;
$L_a:
	ret;
$L_b:
	ret;
"""
    _, f = only(kernel(body))
    assert f.branch_targets == {"$tbl": ("$L_a", "$L_b")}
    assert f.instructions[1].operands == (Reg("%r1"), Label("$tbl"))


def test_pragmas_are_accepted() -> None:
    _, f = only(kernel('.pragma "nounroll";\nret;'))
    assert [i.opcode for i in f.instructions] == ["ret"]


@pytest.mark.parametrize("body, bad, words", [
    ("ret", "ret", "cannot parse"),
    ("mov.u32 %r1, %nosuch;", None, "undeclared register %nosuch"),
    ("mov.u32 %r1, %tid.w;", None, "unknown special register"),
    ("bra $L__nowhere;", None, "undefined label $L__nowhere"),
    ("ld.global.u32 %r1, [%rd1*4];", None, "unsupported address"),
    (".frobnicate 3;", None, "unknown directive .frobnicate"),
    ("mov.u32 %r1, x;", None, "undeclared symbol x"),
    ("@%q bra $L;", None, "guard predicate %q"),
    ("ret;\n.reg .v4 .b32 %v;", ".reg .v4 .b32 %v;", "vector registers"),
    ("mov.u32 %r1, 0f3F80;", None, "hex float"),
    ("ret;\n}", "}", "unbalanced"),
    ("frobnicate.u32 %r1, %r2;", None, "unknown PTX instruction 'frobnicate.u32'"),
])
def test_errors_name_the_line(body: str, bad: str | None, words: str) -> None:
    text = kernel(body)
    lines = text.splitlines()
    line = len(lines) - lines[::-1].index(bad or body)  # the last line holding the bad text
    with pytest.raises(PtxError) as e:
        parse_module(text)
    assert isinstance(e.value, TuiprofError) and e.value.hint
    assert f"PTX line {line}:" in e.value.message and words in e.value.message


def test_not_ptx_and_unclosed_function() -> None:
    with pytest.raises(PtxError, match="not a PTX module"):
        parse_module("int main() { return 0; }\n")
    with pytest.raises(PtxError, match="not closed"):
        parse_module(HEADER + ".visible .entry k()\n{\nret;\n")
    with pytest.raises(PtxError, match="unknown module-level statement"):
        parse_module(HEADER + ".alias a, b;\n")
