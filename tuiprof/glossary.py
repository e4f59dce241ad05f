"""Every term, unit and citation the screen and the report show, defined once: the help screen's
"Terms" groups and `docs/glossary.md` are both generated from here (`glossary_markdown`), and a
test checks that the words the UI shows are all defined. Headless: no Textual."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """A source paper, cited everywhere by its short `tag`."""

    tag: str
    authors: str
    title: str
    venue: str
    used_for: str


REFERENCES: tuple[Reference, ...] = (
    Reference("Baghsorkhi12", "Sara S. Baghsorkhi, Isaac Gelado, Matthieu Delahaye, Wen-mei W. Hwu",
              "Efficient Performance Evaluation of Memory Hierarchy for Highly Multithreaded Graphics Processors",
              "PPoPP 2012",
              "the core: snapshot traces, the stochastic (Monte Carlo) L1/L2/DRAM model, the latency equation "
              "X (sec. 6.1), the SpMV case study (sec. 6.2), the Tesla C2050 preset"),
    Reference("Zhang11", "Yao Zhang, John D. Owens", "A Quantitative Performance Analysis Model for GPU Architectures",
              "HPCA 2011", "the bottleneck (instruction pipeline, shared memory, global memory), the GTX 285 preset"),
    Reference("Yen14", "Yen (advisor: Lai)", "A Cache Behavior Aware Multithreading Degree Decision Scheme on GPGPUs",
              "MS thesis, National Chiao Tung University, 2014",
              "the MD decision's thesis rules (DRAM-read increasing rate, latency growth, pipeline effect, "
              "compute-bound test), the GTX 480 preset"),
    Reference("Farooqui11", "Naila Farooqui, Andrew Kerr, Gregory Diamos, S. Yalamanchili, Karsten Schwan",
              "A Framework for Dynamically Instrumenting GPU Compute Applications within GPU Ocelot",
              "GPGPU-4 workshop, 2011", "PTX instrumentation, per-CTA clocks and SM ids: the SM utilisation pane"),
    Reference("HongKim09", "Sunpyo Hong, Hyesoon Kim (as presented in Hyesoon Kim's slides, Performance Analysis "
              "Models and Tools)", "An Analytical Model for a GPU Architecture with Memory-level and "
              "Thread-level Parallelism Awareness", "ISCA 2009", "the MWP/CWP timing model"),
)
"""The papers, in the order the code was built on them."""

TAGS = {r.tag: r for r in REFERENCES}
LEGACY_NAMES = {"paper 000": "Baghsorkhi12", "paper 001": "Zhang11", "paper 002": "Yen14", "paper 003": "Farooqui11",
                "paper 004": "HongKim09"}
"""How traces recorded before the tags named the papers (their snapshot rule keeps the text)."""


def retag(text: str) -> str:
    """`text` with the old paper numbers replaced by their tags."""
    for old, tag in LEGACY_NAMES.items():
        text = text.replace(old, tag)
    return text


@dataclass(frozen=True)
class Term:
    """One term as the screen writes it, and what it means (units included)."""

    term: str
    meaning: str


GLOSSARY: tuple[tuple[str, tuple[Term, ...]], ...] = (
    ("What is simulated", (
        Term("trace", "the recorded memory accesses of one kernel launch (a .tptrace file, or a demo); "
                      "tuiprof's numbers are a model's predictions from it, not measurements"),
        Term("snapshot", "the consecutive CTAs the trace records (by default 4 x the CTAs resident at once, "
                         "Baghsorkhi12 sec. 3.1); it stands for the whole grid"),
        Term("CTA", "cooperative thread array: a thread block"),
        Term("L1, L2", "the first-level cache of each SM and the second-level cache all SMs share"),
        Term("DRAM", "the GPU's device memory, behind the L2"),
        Term("GPU", "the graphics processor the arch describes"),
        Term("SM", "streaming multiprocessor; each has its own L1"),
        Term("warp access", "one warp instruction's memory access: an op, an active-lane mask, 32 lane addresses"),
        Term("op", "one static memory instruction of the program (a load, store or atomic on a source line)"),
        Term("trial", "one run of the stochastic model with its own seed: warps, CTAs and SMs interleave in a "
                      "random but valid order (program order kept); the figures are averages over trials"),
        Term("seed", "the number that fixes the trials' random draws: the same seed gives the same results"),
        Term("MD", "multithreading degree: CTAs resident per SM at once (Yen14); the MD pane predicts the best one"),
        Term("emulator / gpu / synthetic", "where the trace came from: the PTX emulator (any machine), a GPU run, "
                                           "or a generated model"),
        Term("arch", "the simulated GPU (a preset such as a100, or a TOML file); a * after its name marks "
                     "what-if overrides"),
    )),
    ("Per op (gutter, op line, drill-down)", (
        Term("#1, #2, ...", "the rank of a load by cost (warp accesses x X): #1 is the costliest load"),
        Term("w1, w2, ...", "the rank of a store or atomic (a write) by cost, ranked apart from loads: "
                            "their latency is mostly hidden from the warp"),
        Term("H1", "L1 hit ratio of the op: % of its sectors found in the L1"),
        Term("H2", "L2 hit ratio of the op's L1 misses (for a store: the L2 write hit ratio)"),
        Term("X", "expected latency of the op, cycles: X = H1 t1 + (1-H1)(H2 t2 + (1-H2) Tm) "
                  "(Baghsorkhi12 sec. 6.1)"),
        Term("t1, t2", "L1 and L2 hit latencies of the arch, cycles"),
        Term("Tm", "mean latency of a DRAM batch (requests issued together), cycles, from the model"),
        Term("cyc", "cycles of the SM clock"),
        Term("ms, us", "milliseconds, microseconds"),
        Term("B, KiB, MiB", "bytes; 1,024 bytes; 1,048,576 bytes"),
        Term("PTX", "the virtual instruction set nvcc emits and tuiprof reads: each op is one or more PTX "
                    "instructions, mapped to its source line"),
        Term("s/r", "sectors per request as Nsight Compute counts them: 32-byte sectors per warp instruction "
                    "(4 for 32 lanes of 4 B, 32 at worst)"),
        Term("✓ / ideal", "the fewest sectors (or wavefronts) the active lanes' bytes need; ✓ marks an op at it"),
        Term("shm", "shared-memory op: wavefronts per request (bank conflicts), no cache figures"),
        Term("cst", "constant-memory op: constant-cache requests per warp access (1 = a broadcast)"),
        Term("share", "the op's part of the kernel's total cost"),
        Term("uncoalesced Nx", "the lanes touch N times the sectors they need"),
        Term("gather", "addresses follow an index array: no layout change alone coalesces them"),
        Term("thrash", "the warp comes back to its lines but they were evicted first"),
        Term("camping", "many accesses fall on one L2 slice or DRAM channel"),
        Term("streaming", "each line is touched once: no reuse for a cache to catch"),
        Term("CSR", "compressed sparse row: a sparse matrix stored row by row (the SpMV demos' format)"),
        Term("N-way conflict", "shared memory: N lanes hit one bank, N wavefronts"),
    )),
    ("Uncertainty (histogram, status bar)", (
        Term("mean ± CI", "the 95% confidence interval of the mean: mean ± t σ/√n over n trials, "
                          "t of Student with n-1 degrees of freedom (2.093 at 20 trials, 1.96 at many)"),
        Term("σ", "standard deviation of the trials"),
        Term("σ vs trials", "how σ settles as trials are added (Baghsorkhi12 Fig. 7): flat means enough trials"),
        Term("spread ├─▲─┤", "where one run may fall: mean ± 1.96 σ over the trials; both this and the CI "
                             "cover only the model's randomness, never its assumptions"),
        Term("pts", "percentage points: ±0.5 pts on 40% means 39.5%-40.5%"),
        Term("tolerance", "the run stops early once every kernel-wide hit ratio's CI is within ± this "
                          "many pts (after at least 20 trials)"),
        Term("converged", "the run stopped at the tolerance before its planned trials"),
        Term("L1 read, L2 read, L2 write", "kernel-wide hit ratios: of the L1 read sectors, of the L2 read "
                                           "sectors, of the L2 write sectors"),
    )),
    ("Comparing (b in the UI, tuiprof diff)", (
        Term("baseline", "a run pinned with b: every view then shows the run on screen against it"),
        Term("Δ, ΔX", "the change from the baseline (or from A to B in tuiprof diff): ΔX in cycles"),
        Term("*, **", "significant at 5% by Welch's t-test over the two runs' trials; ** also after Holm's "
                      "correction over every test shown"),
        Term("p", "the test's p-value: the chance of a change this large from the model's randomness alone"),
        Term("new", "an op the baseline does not have"),
    )),
    ("Model pane", (
        Term("timing model", "the kernel time predicted per MD: MWP/CWP (HongKim09) fed with the simulated "
                             "latency and bytes, floored by DRAM and L2 bandwidth and instruction issue"),
        Term("MWP", "memory warp parallelism: warps whose memory requests overlap (HongKim09)"),
        Term("CWP", "computation warp parallelism: warps that compute while one waits for memory (HongKim09)"),
        Term("N", "active warps per SM at the MD"),
        Term("Mem_LD", "the access-weighted X of the global loads, cycles"),
        Term("bound", "what limits the predicted time: MWP/CWP, DRAM bandwidth, L2 bandwidth or instruction issue"),
        Term("bottleneck", "the slowest of instruction pipeline, shared memory and global memory (Zhang11); "
                           "'at most Nx faster': the kernel time over the next slowest component's, the most that "
                           "improving the bottleneck alone can gain"),
        Term("thesis rules", "Yen14's MD rules, which predict MD > 1 from the MD 1 simulation alone "
                             "(L1 miss rate, DRAM reads, latency growth); shown beside the timing model"),
        Term("timing, thesis (columns)", "throughput relative to MD 1 predicted by the timing model and by the "
                                         "thesis rules"),
        Term("DRAM/CTA", "DRAM read transactions (32 B each) per snapshot CTA, simulated at that MD: the L2's "
                         "read misses, so it follows the L2 column more than the L1 miss column"),
        Term("miss, L2 (MD columns)", "the simulated L1 read miss ratio and L2 read hit ratio at that MD"),
        Term("D, ★, ▸ (MD rows)", "the default MD, the recommended MD, the MD simulated now"),
        Term("default MD", "the MD the launch gets as written: its occupancy limit (the limiter in brackets: "
                           "warps, registers, shared memory or CTAs)"),
        Term("recommended MD", "the MD the timing model predicts fastest; gain = T(default)/T(recommended) - 1 "
                               "with its range"),
        Term("low confidence", "the timing model's and the thesis rules' speedups differ by more than 2x"),
        Term("measured / modeled", "SM utilisation from the GPU's per-CTA clocks, or from each CTA's work"),
        Term("imbalance", "busiest SM's busy time / the mean (1.00 = even)"),
    )),
)
"""The glossary, in the groups the help screen and docs/glossary.md show."""


def terms() -> list[str]:
    """Every defined term (a "a / b" or "a, b" entry counts each part)."""
    out = []
    for _, group in GLOSSARY:
        for t in group:
            out.append(t.term)
            out += [p.strip() for sep in (" / ", ", ") for p in t.term.split(sep) if sep in t.term]
    return out


def glossary_markdown() -> str:
    """docs/glossary.md, generated: the glossary's groups, then the references."""
    lines = ["# Glossary", "",
             "Generated from `tuiprof/glossary.py` (the help screen, `?` in the UI, shows the same "
             "definitions); `python -m tuiprof.glossary > docs/glossary.md` rewrites this file.", ""]
    for title, group in GLOSSARY:
        lines += [f"## {title}", "", "| term | meaning |", "|---|---|"]
        lines += [f"| {t.term.replace('|', chr(92) + '|')} | {t.meaning.replace('|', chr(92) + '|')} |" for t in group]
        lines.append("")
    lines += ["## References", "",
              "Cited by tag in the UI, the report and these docs (for example `Baghsorkhi12 sec. 6.1`).", ""]
    lines += [f"- **{r.tag}**: {r.authors}. *{r.title}*. {r.venue}. Used for {r.used_for}." for r in REFERENCES]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(glossary_markdown(), end="")
