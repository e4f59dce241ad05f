"""The model's headline figures on the demos, the ones issue 14 part 4 audits: the MD decision of
spmv-u (timing model, range, thesis rules), the timing model against Zhang11's bottleneck on
spmv-u and stencil7, and the scalar -> vectorized SpMV speedups against Baghsorkhi12 sec. 6.2's
measured ones; with ``--scheduler``, part 1's figures instead (`scheduler_figures`); with
``--part2``, part 2's figures instead (`part2_figures`). Not a speed benchmark: slow (minutes), run
on demand.

    python benchmarks/model_figures.py [--trials 20] [--sweep-trials 8] [--skip-ranking]
    python benchmarks/model_figures.py --scheduler [--trials 20]
    python benchmarks/model_figures.py --part2
"""

from __future__ import annotations

import argparse

MEASURED = {"u": 2.4, "b": 3.63, "u128": 2.5, "b128": 14.8}
"""Baghsorkhi12 sec. 6.2: measured speedups of the vectorized SpMV kernel over the scalar one."""

SCHEDULER_CASES = (("spmv-u", "tesla-c2050", "y[ind]"), ("stencil7", None, "in[idx - nx]"))
"""Issue 14 part 1: (demo, arch (None: the demo's own), the load whose H1 the scheduler swings)."""


def scheduler_figures(trials: int) -> None:
    """Issue 14 part 1 (the scheduler randomness of Baghsorkhi12 sec. 3): per case, the std over
    `trials` trials of the kernel L1 read, L2 read and L2 write hit ratios (Baghsorkhi12 sec. 5.2-5.3
    reports about 0.01, and 0.02 for SpMV L2 reads), and the mean H1 of one load with its 95%
    confidence interval and its std over trials. Seed 0, the demo's default MD, no early stop."""
    import numpy as np

    from tuiprof.arch.presets import load_arch, preset_arch
    from tuiprof.demos import demo_path, load
    from tuiprof.sim.montecarlo import MonteCarlo
    from tuiprof.stats import ci_half_width

    for name, arch_name, label in SCHEDULER_CASES:
        trace = load(demo_path(name))
        arch = load_arch(arch_name) if arch_name else preset_arch(trace.provenance.arch)
        mc = MonteCarlo(trace, arch, trials=trials, seed=0)
        results = mc.run()
        print(f"{name} on {arch.name}, MD {mc.md}, {len(results)} trials:")
        for key in ("l1_read_hit_ratio", "l2_read_hit_ratio", "l2_write_hit_ratio"):
            x = np.array([getattr(r, key) for r in results])
            x = x[~np.isnan(x)]
            print(f"  {key:20s} mean {x.mean():.4f}  std {x.std(ddof=1):.2e}" if x.size > 1 else f"  {key:20s} n/a")
        op = next(o.id for o in trace.ops if o.label == label)
        h1 = np.array([r.op_l1_read_hit_ratio()[op] for r in results])
        sd = h1.std(ddof=1)
        print(f"  H1 of {label} (line {trace.ops[op].line}): mean {h1.mean():.4f} "
              f"± {ci_half_width(sd, h1.size):.4f} (95% CI), std {sd:.2e}")


PRESETS = ("tesla-c2050", "gtx480", "gtx285", "v100", "a100", "h100")


def part2_figures(seeds: int = 3) -> None:
    """Issue 14 part 2 (Volta+ cache semantics): for transpose-naive on v100 at its default MD, the
    DRAM write-throughs, write-backs, distinct 32 B sectors stored, the L2 write hit ratio and Tm;
    Tm per preset for transpose-naive and spmv-u; the L1 size a session simulates for
    transpose-tiled on v100. Means over `seeds` trials (seeds 1..seeds). Uses only what the
    simulator had before part 2, so that the same script measures the code before and after."""
    import numpy as np

    from tuiprof import units
    from tuiprof.arch.presets import preset_arch
    from tuiprof.demos import demo_path
    from tuiprof.session import RunConfig, Session
    from tuiprof.sim.prepared import default_md, prepare
    from tuiprof.sim.trial import run_trial
    from tuiprof.trace.io import load_trace

    def trials(trace, arch):
        p = prepare(trace, arch)
        md = default_md(trace, arch)
        return md, p, [run_trial(p, None, md, s) for s in range(1, seeds + 1)]

    naive = load_trace(demo_path("transpose-naive"))
    md, p, rs = trials(naive, preset_arch("v100"))
    co = p.coalesced
    store_ops = np.array([o.kind != "load" for o in naive.ops])
    acc = np.repeat(np.arange(naive.n_accesses), np.diff(co.req_off))
    st = store_ops[naive.op[acc]]
    sectors = {(int(line), k) for line, m in zip(co.request_lines()[st], co.req_mask[st]) for k in range(32) if int(m) >> k & 1}
    print(f"transpose-naive on v100, MD {md}, {seeds} trials: DRAM write-throughs "
          f"{np.mean([r.dram_writes.sum() for r in rs]):,.0f}, write-backs {np.mean([r.dram_writebacks for r in rs]):,.0f}"
          + (f" (+{np.mean([r.dram_writebacks_owed for r in rs]):,.0f} owed at the end)"
             if hasattr(rs[0], "dram_writebacks_owed") else "")
          + f", stored sectors {len(sectors):,}, L2 write hit ratio {np.mean([r.l2_write_hit_ratio for r in rs]):.4f}, "
          f"Tm {np.mean([r.mean_dram_latency for r in rs]):.0f} cycles")
    for demo in ("transpose-naive", "spmv-u"):
        trace = naive if demo == "transpose-naive" else load_trace(demo_path(demo))
        cells = []
        for name in PRESETS:
            arch = preset_arch(name)
            _, _, rs = trials(trace, arch)
            cells.append(f"{name} {np.mean([r.mean_dram_latency for r in rs]):.0f} "
                         f"({np.mean([r.mean_dram_latency for r in rs]) / (arch.dram.base_latency + arch.dram.row_miss_cycles):.2f}x)")
        print(f"Tm of {demo} (x the unloaded base + row miss): " + ", ".join(cells))
    tiled = load_trace(demo_path("transpose-tiled"))
    s = Session(tiled, RunConfig(arch="v100"))
    L = tiled.launch
    print(f"transpose-tiled on v100, MD {s.md}: {s.md} x {L.static_shared + L.dynamic_shared} B shared per SM; "
          f"L1 simulated {units.size(s.arch.l1.size)} ({s.arch.l1.assoc} ways)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sweep-trials", type=int, default=8)
    ap.add_argument("--skip-ranking", action="store_true")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--scheduler", action="store_true", help="issue 14 part 1's figures only")
    ap.add_argument("--part2", action="store_true", help="issue 14 part 2's figures only (Volta+ cache semantics)")
    args = ap.parse_args()
    if args.scheduler or args.part2:
        if args.scheduler:
            scheduler_figures(args.trials)
        if args.part2:
            part2_figures()
        return
    from tuiprof.arch.presets import parse_overrides
    from tuiprof.demos import demo_path
    from tuiprof.report import build_report
    from tuiprof.session import RunConfig

    over = parse_overrides(args.overrides)
    for name in ("spmv-u", "stencil7"):
        doc = build_report(demo_path(name), RunConfig(trials=args.trials, sweep_trials=args.sweep_trials, overrides=over))
        d = doc["analysis"]["decisions"]
        t, b = d["timing"], d["bottleneck"]
        print(f"{name}: timing model {1e6 * t['time_s']:.1f} us ({t['bound_label']}); MWP/CWP {1e6 * t['mwp_s']:.1f} us; "
              f"bottleneck (Zhang11) {1e6 * b['time_s']:.1f} us ({b['bottleneck']}); DRAM floor "
              f"{1e6 * t['dram_floor_s']:.1f} us, L2 floor {1e6 * t['l2_floor_s']:.1f} us")
        m = d["md"]
        if m is not None:
            rng = m["gain_range"]
            print(f"  MD: default {m['default_md']}, recommended {m['recommended_md']} ({m['headline']}) gain "
                  f"{m['gain']:+.1%}" + (f" [{rng[0]:+.1%}..{rng[1]:+.1%}]" if rng else "")
                  + f"; thesis rules {m['thesis_md']} ({m['thesis_gain']:+.1%})"
                  + ("; LOW CONFIDENCE" if m["low_confidence"] else ""))
            for r in m["rows"]:
                k = r["timing"]
                print(f"    MD {r['md']}: T {1e6 * k['time_s']:9.1f} us  Mem_LD {k['mem_ld']:7.1f}  MWP {k['mwp']:6.2f}  "
                      f"{k['bound_label']}")
    if args.skip_ranking:
        return
    cfg = RunConfig(trials=max(2, args.trials // 5), sweep=False, seed=3, overrides=over)
    predicted = {}
    for m in MEASURED:
        times = [build_report(demo_path(f"spmv-{v}{m}"), cfg)["analysis"]["decisions"]["timing"]["time_s"]
                 for v in ("", "vec-")]
        predicted[m] = times[0] / times[1]
        print(f"spmv {m}: scalar {1e3 * times[0]:.2f} ms, vectorized {1e3 * times[1]:.2f} ms, predicted speedup "
              f"{predicted[m]:.2f} (measured {MEASURED[m]})")
    same = sorted(predicted, key=predicted.get) == sorted(MEASURED, key=MEASURED.get)
    print("ranking " + ("matches" if same else "DIFFERS FROM") + " Baghsorkhi12 sec. 6.2: "
          + " < ".join(sorted(predicted, key=predicted.get)))


if __name__ == "__main__":
    main()
