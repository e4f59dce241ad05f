"""Issue 21 items 1, 9 and 16: every trace tuiprof writes loads again, the writer and the reader
share one set of limits (checked before minutes of work), and what a trace costs follows the
warps it holds, not the CTAs it declares."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support import hostile as H
from tests.support.factories import make_trace
from tests.support.hostile_run import assert_clean_error, kernel_file, run_cli, snapshot
from tuiprof.errors import TraceError
from tuiprof.trace import io as trace_io
from tuiprof.trace.data import MAX_GRID_CTAS, MAX_NAME_CHARS, MAX_OPS, MAX_SOURCE_CHARS, Launch, Trace
from tuiprof.trace.io import load_trace, save_trace
from tuiprof.trace.packed import lane_addresses

RUN = ("--trials", "2", "--no-sweep")


def member_round_trip(data: bytes, method: int, level: int | None = None) -> bytes:
    """`data` through a zip member of `method` and back through the loader's `_member`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method, compresslevel=level) as zf:
        zf.writestr("a", data)
    with zipfile.ZipFile(buf) as zf:
        info = zf.infolist()[0]
    return bytes(trace_io._member(Path("t.tptrace"), buf, info, len(data), "array a"))


def test_a_member_whose_last_output_zlib_still_holds_loads() -> None:
    # Before: the deflate loop stopped when the input ran out while zlib still held the end of
    # a long match: 6,291,456 of these 6,291,584 bytes came out ("shorter than declared").
    data = bytes(6_291_584)
    assert member_round_trip(data, zipfile.ZIP_DEFLATED) == data


segments = st.one_of(
    st.lists(st.one_of(
        st.builds(bytes, st.integers(0, 70_000)),                                    # runs of zeros
        st.binary(min_size=0, max_size=5_000),                                        # noise
        st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=300), st.integers(1, 400)),  # repeats
    ), min_size=0, max_size=12),
    st.builds(lambda n: [bytes(n)], st.integers(0, 300_000)),  # one long run: the old loop lost ~3% of these
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=segments, method=st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA]),
       level=st.sampled_from([None, 1, 9]))
@example(parts=[bytes(73_779)], method=zipfile.ZIP_DEFLATED, level=None)  # refused before, with 4 KiB chunks
def test_every_member_the_writer_can_make_loads(monkeypatch: pytest.MonkeyPatch, parts: list[bytes], method: int,
                                                level: int | None) -> None:
    """Sizes and contents of every kind through both compressions, with the loader's chunk made
    small (4 KiB) so that a few hundred KiB cross as many chunk boundaries as the largest member
    a trace may hold (the format's limits) crosses with the real 1 MiB chunks."""
    monkeypatch.setattr(trace_io, "_CHUNK", 4096)
    data = b"".join(parts)
    assert member_round_trip(data, method, level if method == zipfile.ZIP_DEFLATED else None) == data


def streaming_trace(n: int):
    """`c[i] = a[i] + b[i]` as the emulator records it: n warp accesses of consecutive lines,
    three ops, 24 accesses per warp."""
    addr = 0x7F0000000000 + np.arange(n, dtype=np.uint64)[:, None] * 128 + np.arange(32, dtype=np.uint64) * 4
    return make_trace(addr, ops=[i % 3 for i in range(n)], warps=(np.arange(n) // 24).tolist(),
                      kinds=("load", "load", "store"), block=256)


def test_a_streaming_trace_round_trips(tmp_path: Path) -> None:
    # Before: 131,072 accesses of a stream (4 Mi lane deltas) were written and then refused.
    t = streaming_trace(1 << 17)
    u = load_trace(save_trace(t, tmp_path / "s.tptrace"))
    assert u.n_accesses == t.n_accesses and np.array_equal(lane_addresses(u), lane_addresses(t)) and np.array_equal(u.op, t.op)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_emulator")
def test_record_then_report_a_streaming_kernel(tmp_path: Path) -> None:
    """The issue's case end to end: record of a stream with a large snapshot, then report."""
    src = kernel_file(tmp_path, grid="(4096, 1, 1)", source=(
        "__global__ void add(float *c, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) c[i] = c[i] + c[i + n];\n}\n"))
    (tmp_path / "k_launch.py").write_text(
        "import numpy as np\n\n\ndef setup(dev):\n    n = 4096 * 256\n    c = dev.zeros(2 * n, np.float32)\n"
        "    dev.launch('_Z3addPfi', (4096, 1, 1), (256, 1, 1), [c, np.int32(n)])\n")
    run = run_cli(["record", str(src), "-o", str(tmp_path / "s.tptrace"), "--backend", "emu", "--snapshot", "4096"],
                  tmp_path, cap=3 << 30, timeout=900)
    assert run.code == 0, run.stderr
    run = run_cli(["report", str(tmp_path / "s.tptrace"), *RUN], tmp_path, cap=3 << 30, timeout=900)
    assert run.code == 0, run.stderr


# --- one set of limits --------------------------------------------------------------------------

def at_limits() -> Trace:
    """A trace at every cap of the format at once: the most ops, the longest names, the most
    source text, the largest grid."""
    import dataclasses

    t = make_trace(np.arange(64, dtype=np.uint64).reshape(2, 32) * 4)
    name = "k" * MAX_NAME_CHARS
    ops = tuple(dataclasses.replace(t.ops[0], id=i, label="x" * MAX_NAME_CHARS if i == 0 else "a",
                                    kernel=name if i == 0 else "k") for i in range(MAX_OPS))
    launch = Launch(kernel=name, grid=(MAX_GRID_CTAS, 1, 1), block=(32, 1, 1), registers_per_thread=16)
    source = dataclasses.replace(t.sources[0], text="/" * MAX_SOURCE_CHARS)
    return dataclasses.replace(t, ops=ops, launch=launch, sources=(source,))


def test_a_trace_at_every_limit_is_written_and_loads(tmp_path: Path) -> None:
    t = at_limits()
    u = load_trace(save_trace(t, tmp_path / "max.tptrace"))
    assert len(u.ops) == MAX_OPS and u.launch == t.launch and u.sources == t.sources


@pytest.mark.parametrize("past", ["grid", "kernel name", "source", "ops"])
def test_the_writer_refuses_what_the_loader_would(tmp_path: Path, past: str) -> None:
    # Before: record wrote a 2^24+1-CTA grid, a 6 MB source, a 5,013-character kernel name:
    # files that every later command refused.
    import dataclasses

    t = at_limits()
    if past == "grid":
        t = dataclasses.replace(t, launch=dataclasses.replace(t.launch, grid=(MAX_GRID_CTAS + 1, 1, 1)))
    elif past == "kernel name":
        t = dataclasses.replace(t, launch=dataclasses.replace(t.launch, kernel="k" * (MAX_NAME_CHARS + 1)))
    elif past == "source":
        t = dataclasses.replace(t, sources=(dataclasses.replace(t.sources[0], text="/" * (MAX_SOURCE_CHARS + 1)),))
    else:
        t = dataclasses.replace(t, ops=(*t.ops, dataclasses.replace(t.ops[1], id=MAX_OPS)))
    out = tmp_path / "t.tptrace"
    with pytest.raises(TraceError, match="exceeds what a .tptrace file holds") as exc:
        save_trace(t, out)
    assert exc.value.hint and list(tmp_path.iterdir()) == []


def test_a_long_label_is_cut_visibly(tmp_path: Path) -> None:
    # Before: a 6,004-character label made a file the loader refused.
    import dataclasses

    t = make_trace(np.arange(64, dtype=np.uint64).reshape(2, 32) * 4)
    t = dataclasses.replace(t, ops=(dataclasses.replace(t.ops[0], label="a[" + "i+" * 3000 + "0]"),))
    label = load_trace(save_trace(t, tmp_path / "t.tptrace")).ops[0].label
    assert len(label) == MAX_NAME_CHARS and label.endswith("…") and label.startswith("a[i+i+")


def test_the_compiler_takes_no_more_source_than_a_trace_holds(tmp_path: Path) -> None:
    # Before: compile accepted 8 MiB, the loader 4 Mi characters: a 6 MB source compiled,
    # recorded, and its trace never loaded.
    src = kernel_file(tmp_path)
    src.write_text(src.read_text() + "//" + "x" * (MAX_SOURCE_CHARS + 10) + "\n")
    before = snapshot(tmp_path)
    run = run_cli(["record", str(src), "-o", str(tmp_path / "t.tptrace"), "--backend", "emu"], tmp_path, timeout=60)
    assert_clean_error(run, "is larger than 4 MiB")
    assert run.peak_mib < 400 and snapshot(tmp_path) == before


@pytest.mark.usefixtures("warm_emulator")
@pytest.mark.parametrize("case", ["grid 2^24+1", "5,013-character kernel name"])
def test_record_refuses_a_launch_no_trace_holds_before_running_it(tmp_path: Path, case: str) -> None:
    # Before: the launch ran (minutes in the emulator), then the file was written, then refused.
    if case == "grid 2^24+1":
        src = kernel_file(tmp_path, grid=f"({MAX_GRID_CTAS + 1}, 1, 1)")
        needle = "16,777,216"  # the emulator's per-launch limit or the trace's: one number, tuiprof's
    else:
        name = "k" + "x" * 5012
        src = kernel_file(tmp_path, source=f'extern "C" __global__ void {name}(float *a, int n) {{ a[threadIdx.x] = n; }}\n')
        (tmp_path / "k_launch.py").write_text((tmp_path / "k_launch.py").read_text().replace("_Z3addPfi", name))
        needle = "the kernel's name is 5,013 characters long"
    before = snapshot(tmp_path)
    run = run_cli(["record", str(src), "-o", str(tmp_path / "t.tptrace"), "--backend", "emu"], tmp_path, timeout=120)
    assert_clean_error(run, needle)
    assert run.seconds < 60 and run.peak_mib < 700 and snapshot(tmp_path) == before


# --- work follows the warps -----------------------------------------------------------------------

def declared_ctas(path: Path, n: int, warp_last: bool = False) -> Path:
    """A trace whose grid and snapshot are `n` CTAs and which holds no warp (or, `warp_last`,
    one warp in the last CTA, with the vecadd demo's first access): 232 KB for 2^24."""
    t = H.TraceFile()
    t.header["launch"]["grid"] = [n, 1, 1]
    for k in [k for k in t.arrays if k.startswith("cta_")]:
        del t.arrays[k], t.header["arrays"][k]
    m = 1 if warp_last else 0
    t.header["counts"].update(accesses=m, warps=m, snapshot_ctas=n)
    t.set_array("snapshot_cta_ids", np.arange(n, dtype=np.int32))
    t.set_array("warp_lengths", np.ones(m, np.int8))
    t.set_array("warp_cta", np.full(m, n - 1, np.int32))
    t.set_array("warp_index", np.zeros(m, np.int8))
    whole = t.arrays["addr_whole"][:m].astype(bool)
    t.set_array("addr_lanes", t.arrays["addr_lanes"][:int(whole.sum())])
    for k in ("op", "mask", "addr_base", "addr_step", "addr_whole"):
        t.set_array(k, t.arrays[k][:m])
    return t.save(path)


@pytest.mark.usefixtures("warm_numba")
def test_declared_ctas_without_accesses_cost_nothing(tmp_path: Path) -> None:
    # Before: 57 s of CPU and 1.65 GB (34 s and 1.44 GB here) for this 232 KB file.
    path = declared_ctas(tmp_path / "t.tptrace", 1 << 24)
    assert path.stat().st_size < 300_000
    run = run_cli(["report", str(path), "--trials", "2"], tmp_path, timeout=120)
    assert run.code == 0, run.stderr
    assert run.seconds < 20 and run.peak_mib < 700, (run.seconds, run.peak_mib)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_numba")
def test_one_warp_behind_millions_of_empty_ctas(tmp_path: Path) -> None:
    path = declared_ctas(tmp_path / "t.tptrace", 1 << 24, warp_last=True)
    run = run_cli(["report", str(path), "--trials", "2"], tmp_path, timeout=300)
    assert run.code == 0, run.stderr
    assert run.seconds < 60 and run.peak_mib < 900, (run.seconds, run.peak_mib)


def test_ctas_without_warps_change_no_trial(tmp_path: Path) -> None:
    """Spreading a trace's CTAs out (each keeps its SM and its order on it, empty CTAs between)
    changes no result: the trial kernels leave warp-less CTAs out."""
    import dataclasses

    from tuiprof.arch.presets import load_arch
    from tuiprof.sim.prepared import prepare
    from tuiprof.sim.trial import run_trial

    t = load_trace(H.BASE)
    arch = load_arch("v100")
    S = arch.sm_count
    k = t.warp_cta.astype(np.int64)
    spread = (k + S * (k // S) * 3).astype(np.int32)           # CTA k -> k + 3 S (k // S): same SM, same order
    n = int(spread.max()) + 1
    u = dataclasses.replace(t, warp_cta=spread, snapshot=dataclasses.replace(t.snapshot, cta_ids=np.arange(n)),
                            launch=dataclasses.replace(t.launch, grid=(max(n, t.launch.grid_ctas), 1, 1)), ctas=type(t.ctas)())
    a, b = prepare(t, arch), prepare(u, arch)
    assert b.n_ctas <= a.n_ctas
    for seed in (1, 2):
        ra, rb = run_trial(a, arch, 4, seed), run_trial(b, arch, 4, seed)
        for f in ("l1_read_hits", "l2_read_hits", "l2_write_hits", "dram_reads"):
            assert np.array_equal(getattr(ra, f), getattr(rb, f)), f
        assert np.array_equal(ra.dram_batch_latencies, rb.dram_batch_latencies)


@settings(max_examples=80, deadline=None)
@given(costs=st.lists(st.sampled_from([0.0, 1.0, 4.0, 7.5, 100.0]), min_size=1, max_size=40),
       n=st.integers(1, 600), sm=st.integers(1, 20), md=st.integers(1, 8))
def test_the_compiled_dispatch_is_the_reference_dispatch(costs: list[float], n: int, sm: int, md: int) -> None:
    """The SM-utilisation dispatch (compiled, or closed form for one cost) against a plain
    Python transcription of its rule, CTA by CTA."""
    import heapq

    from tuiprof.sim.dispatch import dispatch_ctas

    cost = np.array(costs)
    resident, now = [0] * sm, 0.0
    running: list[tuple[float, int, int]] = []
    first, seg, reach = [0.0] * sm, [0.0] * sm, [0.0] * sm
    busy, span, ctas = np.zeros(sm), np.zeros(sm), np.zeros(sm, np.int64)
    for i in range(n):
        free = [s for s in range(sm) if resident[s] < md]
        if not free:
            now = running[0][0]
            while running and running[0][0] <= now:
                resident[heapq.heappop(running)[2]] -= 1
            free = [s for s in range(sm) if resident[s] < md]
        s = min(free, key=lambda x: (resident[x], x))
        resident[s] += 1
        end = now + cost[i % cost.size]
        if ctas[s] == 0:
            first[s] = seg[s] = now
            reach[s] = end
        elif now > reach[s]:
            busy[s] += reach[s] - seg[s]
            seg[s], reach[s] = now, end
        else:
            reach[s] = max(reach[s], end)
        ctas[s] += 1
        heapq.heappush(running, (end, i, s))
    for s in range(sm):
        if ctas[s]:
            busy[s] += reach[s] - seg[s]
            span[s] = reach[s] - first[s]
    got = dispatch_ctas(cost, n, sm, md)
    assert np.array_equal(got[2], ctas)
    assert np.allclose(got[0], busy) and np.allclose(got[1], span)


@pytest.mark.usefixtures("warm_numba")
def test_the_op_table_cap_costs_what_its_accessed_ops_cost(tmp_path: Path) -> None:
    """65,536 ops (the cap), 3 of them accessed, the default 64 trials and the MD sweep. Before:
    984 MB, every trial keeping 65,536 columns of counters and the analysis computing them all."""
    path = H.many_ops(H.TraceFile(), MAX_OPS).save(tmp_path / "t.tptrace")
    run = run_cli(["report", str(path)], tmp_path, timeout=300)
    assert run.code == 0, run.stderr
    assert run.peak_mib < 600, run.peak_mib
