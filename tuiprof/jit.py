"""Numba for every tuiprof kernel, with its on-disk cache in a writable per-user folder.

Import `njit` (and the kernel options and helpers) from here, never from numba directly: the
cache folder must be set before numba is first imported, so that ``cache=True`` works when
tuiprof is installed read-only. This is the only place that sets it. The folder is
``<user cache>/numba/<digest of the kernel sources>``, the sources being this file and every
module that compiles kernels (`KERNEL_SOURCES`): Numba validates a cached kernel against its own
file only, and kernels inline helpers from other files, so a change to any of them must not
reuse stale machine code. An explicit ``NUMBA_CACHE_DIR`` wins.

It also makes Numba's own compiling cheaper, for a first run after an install, without changing
the machine code of any kernel: built-in typings memoised (`_memoize_typing`), no C callback
wrappers, live variables computed only where read and over bit sets, SSA reconstruction and IR
copies that skip what cannot change, one front end per inlined helper, unoptimised Python entry
wrappers, and no LLVM passes on mere declarations. Each is left alone on a Numba whose internals
differ from those it was written against (most check a digest of the source they replace).

Importing this module imports numba and numpy; keep it out of the paths that must start light
(``tuiprof --help``, ``import tuiprof.sim``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypedDict

from tuiprof.errors import CompiledCodeError
from tuiprof.resources import user_cache_dir

KERNEL_SOURCES = ("jit.py", "sim/*.py", "trace/_codec.py", "collect/emu/kernel/*.py", "collect/gpu/records.py",
                  "model/wavefronts.py")
"""The modules, relative to the package, whose kernels share the cache folder (globs)."""


def _sources_digest() -> str:
    root = Path(__file__).resolve().parent
    h = hashlib.sha1()
    for path in sorted({p for pattern in KERNEL_SOURCES for p in root.glob(pattern)}):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _choose_cache_dir() -> Path | None:
    """The first writable of NUMBA_CACHE_DIR, the user cache folder and a private temp folder,
    saying on stderr when it falls back; None when nothing is writable (kernels run uncached)."""
    digest = _sources_digest()
    wanted = [Path(os.environ["NUMBA_CACHE_DIR"])] if os.environ.get("NUMBA_CACHE_DIR") else []
    wanted += [user_cache_dir() / "numba" / digest,
               Path(tempfile.gettempdir()) / f"tuiprof-numba-{os.getuid() if hasattr(os, 'getuid') else 0}" / digest]
    for i, folder in enumerate(wanted):
        if _writable(folder):
            if i:
                _note(f"note: {wanted[0]} is not writable; compiled kernels are cached in {folder} instead")
            return folder
    _note(f"note: no writable folder for compiled kernels ({', '.join(map(str, wanted))}); "
          "every run compiles them again (slow start)")
    return None


def _note(text: str) -> None:
    if sys.stderr is not None:
        try:
            print(text, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


_CACHE_DIR = _choose_cache_dir()
if _CACHE_DIR is not None:
    os.environ["NUMBA_CACHE_DIR"] = str(_CACHE_DIR)
    _numba_config = sys.modules.get("numba.core.config")
    if _numba_config is not None:
        # numba was imported first (``import numba; import tuiprof...``, a test module): it read
        # its settings before the line above, and would cache the kernels decorated from here on
        # beside their source files (the installed package) under no digest
        setattr(_numba_config, "CACHE_DIR", str(_CACHE_DIR))  # noqa: B010 (a module typed as ModuleType)


def kernel_cache_dir() -> Path | None:
    """Where compiled kernels are cached; None when they cannot be (no writable folder)."""
    return _CACHE_DIR

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit  # noqa: E402
from numba.core import cgutils, types  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

_said: set[str] = set()


def _note_once(kind: str, text: str) -> None:
    if kind not in _said:
        _said.add(kind)
        _note(text)


def _harden_cache() -> None:
    """Make Numba's disk cache a cache: an entry it cannot read is discarded and compiled again, an
    entry it cannot write is left unwritten, each said once on stderr.

    Numba trusts its files: a truncated index or data file (a disk that filled up under a writer,
    a cache copied in part) made the first call of a kernel raise EOFError or UnpicklingError, and
    a failed write (a full disk) raised OSError out of the compilation, on every run, until the
    folder was removed by hand. Concurrent processes stay safe: Numba replaces files atomically,
    so a discarded entry only makes another process miss and compile too."""
    from numba.core.caching import Cache

    load, save = Cache.load_overload, Cache.save_overload

    def load_overload(self, sig, target_context):  # noqa: ANN001, ANN202 (Numba's signature)
        try:
            return load(self, sig, target_context)
        except Exception as exc:  # whatever the damaged bytes raise: a miss
            index = getattr(getattr(self, "_cache_file", None), "_index_path", None)
            try:
                if index:
                    os.unlink(index)  # its data files are overwritten as the entries are saved again
            except OSError:
                pass
            _note_once("damaged", f"note: discarded damaged compiled kernels in {_CACHE_DIR} ({type(exc).__name__}: "
                       f"{str(exc)[:80]}); they are compiled again (slow start this once)")
            return None

    def save_overload(self, sig, data):  # noqa: ANN001, ANN202
        try:
            save(self, sig, data)
        except Exception as exc:  # a full disk, a folder gone read-only: the kernel runs uncached
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
            _note_once("unsaved", f"note: cannot save compiled kernels in {_CACHE_DIR} ({str(reason)[:80]}); "
                       "they are compiled again at the next run")

    Cache.load_overload, Cache.save_overload = load_overload, save_overload  # type: ignore[method-assign]


if _CACHE_DIR is not None:
    _harden_cache()


_TYPINGS: dict[tuple[object, ...], object] = {}
"""Numba's typings of built-in operations and functions in this process, by (function type,
typing context, argument types, compile options); see `_memoize_typing`."""


def _memoize_typing() -> None:
    """Type each built-in operation once per argument types in a process, not at every use.

    Numba types a call of a built-in (``a + b``, ``a < b``, ``np.int64(x)``, ``min``, an
    ``@overload`` or ``@intrinsic``) by trying the function's templates one by one, each applied
    with and without literal arguments, at every call site of every kernel, and again whenever
    type propagation revisits the site; it keeps no record of the answer. On a first run of the
    simulator 87% of those resolutions repeated one already made (7485 of 8595 for the vecadd demo)
    and typing was the largest part of compiling. A resolution that succeeded depends only on the
    function type, the typing context, the argument types and the compile options in force (the
    templates' own products, the implementation keys and compiled overloads, are kept by Numba on
    the function type and its templates), so it is kept here and returned for the same ones. A failed resolution is
    not kept: it raises its errors again. Left alone on a Numba whose internals differ."""
    from numba.core import targetconfig
    from numba.core.types import functions

    base = getattr(functions, "BaseFunction", None)
    resolve = getattr(base, "get_call_type", None)
    stack = getattr(targetconfig, "ConfigStack", None)
    if base is None or resolve is None or stack is None or getattr(resolve, "_tuiprof_memo", False):
        return

    def flags_key() -> object:
        """The compile options in force (Numba keys an ``@overload``'s implementation by them too)."""
        flags = stack.top_or_none()
        values = getattr(flags, "_values", None)
        return tuple(sorted(values.items(), key=lambda kv: kv[0])) if isinstance(values, dict) else flags

    def get_call_type(self, context, args, kws):  # noqa: ANN001, ANN202 (Numba's signature)
        try:
            key = (self, context, tuple(args), tuple(sorted(kws.items())), flags_key())
            sig = _TYPINGS.get(key)
        except TypeError:  # an unhashable argument type: typed as Numba does
            return resolve(self, context, args, kws)
        if sig is None:
            sig = resolve(self, context, args, kws)
            if sig is not None:
                _TYPINGS[key] = sig
        return sig

    get_call_type._tuiprof_memo = True  # type: ignore[attr-defined]
    base.get_call_type = get_call_type


_memoize_typing()


def _no_cfunc_wrappers() -> None:
    """Compile no C callback wrapper for a function unless asked (``@cfunc`` asks: it sets the
    option itself). Numba builds one beside every compiled function, for use as a first-class
    function value or through ``.address``, which neither tuiprof's kernels nor Numba's own
    implementations of NumPy functions are: on a first run of the simulator they were 0.8 s of
    11.7 s of compiling. Left alone on a Numba whose internals differ."""
    from numba.core import compiler

    option = getattr(compiler.Flags, "options", {}).get("no_cfunc_wrapper")
    if option is not None and hasattr(option, "_default"):
        option._default = True


_no_cfunc_wrappers()


_POSTPROC_RUN_DIGESTS = frozenset({"5b91e80193b8e368"})
"""Digests (`_source_digest`) of the sources of Numba's ``PostProcessor.run`` that
`_lazy_block_entry_vars` replaces (Numba 0.68)."""


def _source_digest(fn: object) -> str | None:
    """A digest of `fn`'s source text, whitespace aside; None where it cannot be read."""
    import inspect

    try:
        text = inspect.getsource(fn)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return None
    return hashlib.sha1("".join(text.split()).encode()).hexdigest()[:16]


def _lazy_block_entry_vars() -> None:
    """Compute the variables live at each block's entry only when something asks for them.

    Numba's IR post-processor, run after every pass that changes a function's IR (about a dozen
    times per function, and again inside each inlining), computed them for every block: def-reach
    and liveness fix points and dead maps over the whole function. Only object-mode lowering and
    generators read them; tuiprof's kernels are neither, and on a first vecadd ``.cu`` run this
    was about a fifth of all compiling. Generators still get them at once (their state is what is
    live at each yield); any other reader gets them computed on its first question
    (`get_block_entry_vars`), from the blocks as they then are. The runs that emit ``del``s still
    compute the dead maps those need. Left alone unless
    Numba's post-processor is the one this was written against (`_POSTPROC_RUN_DIGESTS`)."""
    try:
        from numba.core import analysis, ir, postproc, transforms
    except ImportError:
        return
    processor = getattr(postproc, "PostProcessor", None)
    run = getattr(processor, "run", None)
    if processor is None or run is None or getattr(run, "_tuiprof_lazy", False) or \
            _source_digest(run) not in _POSTPROC_RUN_DIGESTS:
        return

    def entry_vars(func_ir) -> None:  # noqa: ANN001 (Numba's FunctionIR)
        vlt = postproc.VariableLifetime(func_ir.blocks)
        live = analysis.compute_live_variables(vlt.cfg, func_ir.blocks, vlt.usedefs.defmap, vlt.deadmaps.combined)
        for offset, block in func_ir.blocks.items():
            func_ir.block_entry_vars[block] = live[offset]

    def lazy_run(self, emit_dels: bool = False, extend_lifetimes: bool = False) -> None:  # noqa: ANN001
        func_ir = self.func_ir
        func_ir.blocks = transforms.canonicalize_cfg(func_ir.blocks)
        func_ir.variable_lifetime = postproc.VariableLifetime(func_ir.blocks)
        if func_ir.is_generator:
            entry_vars(func_ir)
            func_ir.generator_info = postproc.GeneratorInfo()
            self._compute_generator_info()
        else:
            func_ir.generator_info = None
        if emit_dels:
            self._insert_var_dels(extend_lifetimes=extend_lifetimes)

    def get_block_entry_vars(self, block):  # noqa: ANN001, ANN202 (Numba's signature)
        if block not in self.block_entry_vars:
            entry_vars(self)
        return self.block_entry_vars[block]

    lazy_run._tuiprof_lazy = True  # type: ignore[attr-defined]
    processor.run = lazy_run
    ir.FunctionIR.get_block_entry_vars = get_block_entry_vars  # type: ignore[method-assign]


_lazy_block_entry_vars()


_OPTIMIZE_FUNCTIONS_DIGESTS = frozenset({"544c7bd91a561e4e"})
"""Digests (`_source_digest`) of Numba's ``CPUCodeLibrary._optimize_functions`` that
`_no_passes_on_declarations` replaces (Numba 0.68)."""


def _no_passes_on_declarations() -> None:
    """Run LLVM's per-function passes on the functions a module defines, not on those it only
    declares (the runtime and Python API functions each module calls: most of a small module's
    functions). Numba built a pass manager and ran it on every one, where it does nothing. Same
    machine code. Left alone unless Numba's method is the one this was written against."""
    from numba.core import codegen

    library = getattr(codegen, "CPUCodeLibrary", None)
    optimize = getattr(library, "_optimize_functions", None)
    if library is None or optimize is None or _source_digest(optimize) not in _OPTIMIZE_FUNCTIONS_DIGESTS:
        return

    def optimize_functions(self, ll_module) -> None:  # noqa: ANN001 (Numba's signature)
        ll_module.data_layout = self._codegen._data_layout
        for func in ll_module.functions:
            if func.is_declaration:
                continue
            fpm, pb = self._codegen._function_pass_manager()
            with self._recorded_timings.record(f"Function passes on {func.name!r}", pb):
                fpm.run(func, pb)

    library._optimize_functions = optimize_functions


_no_passes_on_declarations()


_LIVE_MAP_DIGESTS = frozenset({"34f047f8e771ef6c"})
"""Digests (`_source_digest`) of Numba's ``analysis.compute_live_map`` that `_live_map_by_bits`
replaces (Numba 0.68)."""


def _live_map_by_bits() -> None:
    """Numba's live-variable analysis (the variables live at each block's entry, which places
    the ``del``s that free arrays) over bit sets: the same fix points over the same blocks in the
    same order, each set of variable names an integer with one bit per name, turned back into
    the same sets of names at the end. Numba's sets of strings made each step of the fix points
    a hashing of every live name (thousands in an inlined interpreter, at every block, after each
    of several passes). Left alone unless Numba's analysis is the one this was written against."""
    from numba.core import analysis, ir_utils

    numbas = getattr(analysis, "compute_live_map", None)
    if numbas is None or _source_digest(numbas) not in _LIVE_MAP_DIGESTS:
        return

    def compute_live_map(cfg, blocks, var_use_map, var_def_map):  # noqa: ANN001, ANN202 (Numba's signature)
        topo_order = cfg.topo_order()
        bit: dict[str, int] = {}
        names: list[str] = []

        def bits(vs) -> int:  # noqa: ANN001
            b = 0
            for v in vs:
                i = bit.get(v)
                if i is None:
                    i = bit[v] = len(names)
                    names.append(v)
                b |= 1 << i
            return b

        uses = {k: bits(v) for k, v in var_use_map.items()}
        defs = {k: bits(v) for k, v in var_def_map.items()}
        def_reach: dict[object, int] = {}
        changed = True
        while changed:  # sets only grow: unchanged values are Numba's unchanged sizes
            changed = False
            for offset in topo_order:
                here = def_reach.get(offset, 0) | defs[offset] | uses[offset]
                if here != def_reach.get(offset):
                    def_reach[offset] = here
                    changed = True
                for out_blk, _ in cfg.successors(offset):
                    merged = def_reach.get(out_blk, 0) | here
                    if merged != def_reach.get(out_blk):
                        def_reach[out_blk] = merged
                        changed = True
        live = {offset: uses[offset] for offset in blocks.keys()}
        changed = True
        while changed:
            changed = False
            for offset in reversed(topo_order):
                live_vars = live[offset]
                for inc_blk, _ in cfg.predecessors(offset):
                    merged = live[inc_blk] | (live_vars & def_reach.get(inc_blk, 0) & ~defs[inc_blk])
                    if merged != live[inc_blk]:
                        live[inc_blk] = merged
                        changed = True
        out = {}
        for offset, b in live.items():
            s = set()
            i = 0
            while b:
                if b & 1:
                    s.add(names[i])
                b >>= 1
                i += 1
            out[offset] = s
        return out

    # Numba's own, which the tests compare it with
    compute_live_map._numba = numbas  # type: ignore[attr-defined]
    analysis.compute_live_map = compute_live_map
    if getattr(ir_utils, "compute_live_map", None) is numbas:
        ir_utils.compute_live_map = compute_live_map


_live_map_by_bits()


_SSA_DIGESTS = frozenset({"593336afef8fde85 f5aec3523658d50c 074a3a1c84b95aaa 347d3c3a6a2732ee 396a9b32adc46072 "
                          "2bc5b43fe65abd55"})
"""Digests (`_source_digest`) of Numba's SSA reconstruction functions that `_ssa_where_used`
relies on: ``_run_ssa``, ``_run_block_rewrite``, ``_fresh_vars``, ``_fix_ssa_vars``,
``_make_states`` and ``_run_ssa_block_pass`` of ``numba.core.ssa`` (Numba 0.68)."""


def _ssa_where_used() -> None:
    """Numba's SSA reconstruction, visiting for each variable only the blocks that mention it.

    Numba fixes one variable with several definitions at a time, and for each one rewrote every
    statement of every block twice (fresh names for its definitions, then each use pointed at the
    reaching definition, with phi nodes where needed). A block that neither defines nor uses the
    variable comes out of both rewrites unchanged, so it is copied as it is: the same blocks,
    statements and phi nodes, in the same order, for a fraction of the work (an inlined
    interpreter has hundreds of such variables and thousands of blocks). Left alone unless
    Numba's SSA functions are the ones this was written against."""
    from numba.core import errors, ir, ssa
    from numba.core.analysis import compute_cfg_from_blocks

    names = ("_run_ssa", "_run_block_rewrite", "_fresh_vars", "_fix_ssa_vars", "_make_states", "_run_ssa_block_pass")
    helpers = ("_iterated_domfronts", "_find_defs_violators", "_CacheListVars", "_compute_phi_locations",
               "_FreshVarHandler", "_FixSSAVars", "defaultdict")
    if any(not callable(getattr(ssa, n, None)) for n in names + helpers) or \
            " ".join(str(_source_digest(getattr(ssa, n))) for n in names) not in _SSA_DIGESTS:
        return

    def rewrite(blocks, states, handler, mentions):  # noqa: ANN001, ANN202 (Numba's IR)
        varname = states["varname"]
        newblocks = {}
        for label, blk in blocks.items():
            newblk = ir.Block(scope=blk.scope, loc=blk.loc)
            if varname in mentions[label]:
                states["label"] = label
                states["block"] = blk
                newblk.body = list(ssa._run_ssa_block_pass(states, blk, handler))
            else:
                newblk.body = list(blk.body)
            newblocks[label] = newblk
        return newblocks

    def run_ssa(blocks):  # noqa: ANN001, ANN202
        if not blocks:
            return {}
        cfg = compute_cfg_from_blocks(blocks)
        df_plus = ssa._iterated_domfronts(cfg)
        violators = ssa._find_defs_violators(blocks, cfg)
        cache_list_vars = ssa._CacheListVars()
        # the names each block mentions (its statements' variables, targets included); fixing one
        # variable renames only that variable, so the other names a block mentions stay as they are
        mentions = {label: {v.name for stmt in blk.body for v in stmt.list_vars()} for label, blk in blocks.items()}
        for varname in violators:
            states = ssa._make_states(blocks)
            states["varname"] = varname
            states["defmap"] = defmap = ssa.defaultdict(list)
            blocks = rewrite(blocks, states, ssa._FreshVarHandler(), mentions)
            states = ssa._make_states(blocks)
            states["varname"] = varname
            states["defmap"] = defmap
            states["phimap"] = phimap = ssa.defaultdict(list)
            states["cfg"] = cfg
            states["phi_locations"] = ssa._compute_phi_locations(df_plus, defmap)
            blocks = rewrite(blocks, states, ssa._FixSSAVars(cache_list_vars), mentions)
            for label, philist in phimap.items():
                blocks[label].body = philist + blocks[label].body
        if compute_cfg_from_blocks(blocks) != cfg:
            raise errors.CompilerError("CFG mutated in SSA pass")
        return blocks

    # Numba's own, which the tests compare it with
    run_ssa._numba = ssa._run_ssa  # type: ignore[attr-defined]
    ssa._run_ssa = run_ssa


_ssa_where_used()


_INLINE_FUNCTION_DIGESTS = frozenset({"c48859b545c604d3 48a5dc7ed0d6de7e"})
"""Digests (`_source_digest`) of Numba's ``InlineWorker.inline_function`` and
``run_untyped_passes`` that `_one_front_end_per_inlined_function` relies on (Numba 0.68)."""


def _one_front_end_per_inlined_function() -> None:
    """Run Numba's front end (bytecode to IR, the untyped passes) once per inlined function in a
    process, not at every call site it is inlined into.

    A helper marked ``inline="always"`` (`INLINE`) was translated from bytecode and put through
    the untyped pipeline afresh at each of its call sites, in every kernel, although the result
    depends only on the function, the compiler's typing context and options: a handler inlined
    at five sites was translated five times. The IR is kept per (function, typing context, kind
    of target context (each compile has its own, configured by the options), pipeline class,
    locals, options) and each call site inlines a copy with a fresh function
    identity (Numba copies it again before changing it), so inlined variables are named apart as
    before. Left alone unless Numba's inliner is the one this was written against."""
    from numba.core import inline_closurecall

    worker = getattr(inline_closurecall, "InlineWorker", None)
    inline = getattr(worker, "inline_function", None)
    front_end = getattr(worker, "run_untyped_passes", None)
    if worker is None or inline is None or front_end is None or \
            f"{_source_digest(inline)} {_source_digest(front_end)}" not in _INLINE_FUNCTION_DIGESTS:
        return
    kept: dict[tuple[object, ...], object] = {}

    def inline_function(self, caller_ir, block, i, function, arg_typs=None):  # noqa: ANN001, ANN202
        values = getattr(self.flags, "_values", None)
        try:
            key = (function, self.typingctx, type(self.targetctx), type(self.pipeline),
                   tuple(sorted((self.locals or {}).items())),
                   tuple(sorted((k, v) for k, v in values.items() if k != "enable_ssa"))
                   if isinstance(values, dict) else None)
            hash(key)
        except TypeError:  # something unhashable: as Numba does
            return inline(self, caller_ir, block, i, function, arg_typs)
        if key[-1] is None:  # options that cannot be told apart: as Numba does
            return inline(self, caller_ir, block, i, function, arg_typs)
        kept_ir = kept.get(key)
        if kept_ir is None:
            kept_ir = kept[key] = self.run_untyped_passes(function)  # sets the caller's flags.enable_ssa = False
        else:
            self.flags.enable_ssa = False  # as the front end does
        callee_ir = kept_ir.copy()  # type: ignore[attr-defined]
        callee_ir.func_id = kept_ir.func_id.derive()  # type: ignore[attr-defined]
        callee_ir._definitions = {k: list(v) for k, v in kept_ir._definitions.items()}  # type: ignore[attr-defined]
        return self.inline_ir(caller_ir, block, i, callee_ir, function.__code__.co_freevars, arg_typs=arg_typs)

    worker.inline_function = inline_function


_one_front_end_per_inlined_function()


def _source_locations_not_copied() -> None:
    """Share Numba's source locations (``ir.Loc``: file, line, column) between copies of IR
    instead of deep-copying them. Inlining deep-copies the callee's IR twice per call site, and
    every statement and variable carries a location: a third of the copying. A location is never
    changed once made (its only later attribute, the source lines, is read from the same file),
    so a shared one reads the same. Left alone where Numba already defines how a location copies."""
    from numba.core import ir

    loc = getattr(ir, "Loc", None)
    if loc is None or "__deepcopy__" in vars(loc):
        return

    def shared(self, memo):  # noqa: ANN001, ANN202 (the copy protocol)
        return self

    loc.__deepcopy__ = shared


_source_locations_not_copied()


def _plain_entry_wrappers() -> None:
    """Compile the Python entry of each kernel (Numba's wrapper that unboxes the arguments of a
    call from Python, calls the kernel and boxes its result) without optimising it: it runs once
    per call from Python, a few microseconds, and LLVM spent as long on it as on a small kernel
    (it is as large as one for every array argument, and was optimised three times: alone, then
    twice more in the kernel's final module). Marked ``optnone`` (with ``noinline``, which that
    requires), so LLVM's passes skip it and its machine code is selected quickly; the kernel's
    own code is unchanged. Left alone on a Numba whose internals differ."""
    from llvmlite import ir as llvm_ir
    from numba.core import callwrapper

    wrapper_class = getattr(callwrapper, "PyCallWrapper", None)
    build = getattr(wrapper_class, "build", None)
    if wrapper_class is None or build is None or getattr(build, "_tuiprof_plain", False):
        return

    def plain_build(self):  # noqa: ANN001, ANN202 (Numba's signature)
        built = build(self)
        wrapper = built[0] if isinstance(built, tuple) and built else None
        if isinstance(wrapper, llvm_ir.Function):
            wrapper.attributes.add("noinline")
            wrapper.attributes.add("optnone")
        return built

    plain_build._tuiprof_plain = True  # type: ignore[attr-defined]
    wrapper_class.build = plain_build


_plain_entry_wrappers()


def _no_llvm_lock_events() -> None:
    """Stop Numba's per-call LLVM lock events: Numba registers callbacks that broadcast an event
    each time any LLVM function is entered and left (tens of thousands per first run), only to
    fill a compile-time statistic (``metadata['timers']['llvm_lock']``) that tuiprof never reads.
    Left alone on an llvmlite or Numba whose internals differ."""
    from llvmlite.binding import ffi

    lock = getattr(getattr(ffi, "lib", None), "_lock", None)
    callbacks = getattr(lock, "_cblist", None)
    if not isinstance(callbacks, list):
        return
    for acquire, release in list(callbacks):
        if getattr(acquire, "__module__", "") == "numba.core.base":
            ffi.unregister_lock_callback(acquire, release)


_no_llvm_lock_events()

class KernelOptions(TypedDict, total=False):
    """The Numba options tuiprof passes to `njit`: typed so that ``njit(**KERNEL)`` type-checks."""

    nogil: bool
    cache: bool
    error_model: Literal["python", "numpy"]
    inline: Literal["never", "always"]


KERNEL: KernelOptions = {"nogil": True, "cache": _CACHE_DIR is not None, "error_model": "numpy"}
"""Options of every kernel: releases the GIL, cached on disk; integer division by zero does not
raise (no exception path, which would also defeat reference-count pruning, see `INLINE`)."""

INLINE: KernelOptions = {**KERNEL, "inline": "always"}
"""Options of the small helpers called inside hot loops: inlined at the Numba IR level. A call
that is not inlined keeps an error-return path, and around it Numba's reference-count pruning
cannot remove the caller's atomic incref/decref pairs on its arrays (measured: 20-40 ns per call
instead of 2). Helpers must also not return arrays into a loop variable, for the same reason.
Inlining by LLVM instead (``forceinline=True``: each helper typed once, shared by the emulator's
variants) compiles the vecadd interpreter 2.7 s faster but ran spmv, matmul32 and stencil 10-13%
slower per instruction (bench_emu.py, against the inlined handlers in the same run), so the hot
handlers stay inlined here."""


def plain_args(dispatcher):  # noqa: ANN001, ANN201 (a Numba dispatcher in and out)
    """`dispatcher`, compiled once per argument *type* when called from other kernels, never per
    literal value: Numba types a constant argument (``f(x, 0)``) as a literal and compiles a
    separate specialisation for each (the emulator's error helper had 13, at seconds each). The
    call sites pass the constants converted to the plain type. Not for a kernel whose callees
    need a literal (`find_tag`'s width)."""
    typed = getattr(dispatcher, "get_call_template", None)
    if typed is None:  # NUMBA_DISABLE_JIT: njit gave the Python function back
        return dispatcher

    def get_call_template(args, kws):  # noqa: ANN001, ANN202 (Numba's signature)
        return typed(tuple(types.unliteral(a) for a in args), {k: types.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher


def emu_kernel(fn):  # noqa: ANN001, ANN201
    """``njit(**KERNEL)`` without literal specialisations (`plain_args`): the emulator's compiled helpers."""
    return plain_args(njit(**KERNEL)(fn))


_BUILT_NAMES: dict[tuple[str, str], str] = {}
"""The kernels `built_kernel` named in this process: (module, name) -> their closure values (repr)."""


def built_kernel(fn, name: str):  # noqa: ANN001, ANN201 (a function in, a Numba dispatcher out)
    """``njit(**KERNEL)`` of `fn`, a kernel that a factory builds (a closure over the values it is
    compiled for), renamed `name`: a name of those values, the same in every process.

    Numba names a compiled function's machine code, its environment (the constants its Python
    entry reads, such as the dtypes of the arrays it returns) and its cache files after its
    qualified name and a counter that restarts in every process; the closures of one factory
    share the qualified name. Two of them compiled by different processes could thus get one
    name, and a process that loaded both from the disk cache ran the second with the first one's
    environment (Numba keeps one per name): when its constants were numbered differently, the
    call failed with ``SystemError: ... returned a result with an exception set`` ('descr' is
    NULL), on every run until the cache was removed. Giving the same `name` to other closure
    values in one process raises RuntimeError (a factory whose names do not tell its kernels apart)."""
    values = repr(tuple(cell.cell_contents for cell in fn.__closure__ or ()))
    key = (fn.__module__, name)
    if _BUILT_NAMES.setdefault(key, values) != values:
        raise RuntimeError(f"two kernels built by {fn.__module__}.{fn.__qualname__} are both named {name!r}: "
                           "the name must tell their closure values apart (their compiled code and cache "
                           "entries would be mixed up)")
    fn.__name__ = fn.__qualname__ = name
    return njit(**KERNEL)(fn)


plain_kernel = emu_kernel
"""The same for the simulator's helpers that kernels call with constant arguments (one compile
per argument type: ``lists_init(.., 4, 5)`` from one replay family and ``(.., n, m)`` from
another were separate compiles, as were ``xor_table``, ``access_lines``, ``_phase``, and the replay
kernel's ``locate``, ``dirty_transactions`` and ``rng_streams`` per family)."""


@njit(**KERNEL)
def keep(a):
    """Call at the very end of a kernel that branches, once per array argument.

    Numba increfs each array argument on entry and decrefs it where the variable dies; when it
    dies on several branches, the reference-count pruning pass leaves the atomic updates in
    place and every call pays them. A last use in the exit block lets the pass remove the pair.
    """
    return 0


@intrinsic
def popcount(typingctx, x):
    """Set bits of the low 32 bits of integer `x` (a chunk or sector mask), as an int64: one
    POPCNT instruction. The only popcount of the kernels."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.uint64)
        return builder.ctpop(builder.and_(v, ir.Constant(ir.IntType(64), 0xFFFFFFFF)))

    return types.int64(x), codegen


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to bring ``arr[idx]`` (a whole row of a 2-d array) into its caches; no effect
    on results. Lets a kernel overlap the cache misses of the next step with the current one."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        stride0 = cgutils.unpack_tuple(builder, ary.strides, aryty.ndim)[0]
        off = builder.mul(context.cast(builder, args[1], idxty, types.intp), stride0)
        ptr = builder.gep(builder.bitcast(ary.data, ir.IntType(8).as_pointer()), [off])
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
                                            "llvm.prefetch")
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.none(arr, idx), codegen


@intrinsic
def borrowed(typingctx, arr):
    """`arr` as a view that holds no reference (no meminfo): handing it to an inlined helper makes
    no atomic incref/decref pair. Numba's IR inlining binds each array argument to a new variable,
    and when the helper has branches the pruning pass leaves that pair in place: two atomic adds
    per call (the emulator's handlers, per warp instruction: 40% of its time in spmv). The caller
    must keep `arr` itself alive (a later use, see `keep`) for as long as it uses the view, and
    must not return the view or store it."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()

    return arr(arr), codegen


@intrinsic
def find_tag(typingctx, arr, base, key, n):
    """The first `i` below `n` (a compile-time constant) with ``arr[base + i] == key`` in an int32
    array, or -1: one vector load and compare of the `n` entries, their match bits read as an
    integer and its trailing zeros counted. The tag scan of a set: a loop that sums ``(i+1) *
    [match]`` compiles to masked 64-bit adds of constants kept on the stack, about 3x the
    instructions. No bounds check (the caller's indices are in range)."""
    if (not isinstance(arr, types.Array) or arr.dtype != types.int32 or arr.ndim != 1
            or not isinstance(base, types.Integer) or not isinstance(key, types.Integer)
            or not isinstance(n, types.IntegerLiteral)):
        return None
    width = n.literal_value

    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        i32, i64 = ir.IntType(32), ir.IntType(64)
        b = context.cast(builder, args[1], sig.args[1], types.intp)
        k = builder.trunc(context.cast(builder, args[2], sig.args[2], types.int64), i32)
        vec = ir.VectorType(i32, width)
        ptr = builder.bitcast(builder.gep(ary.data, [b]), vec.as_pointer())
        tags = builder.load(ptr, align=4)
        splat = builder.shuffle_vector(builder.insert_element(ir.Constant(vec, ir.Undefined), k, ir.Constant(i32, 0)),
                                       ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, width), None))
        bits = builder.bitcast(builder.icmp_unsigned("==", tags, splat), ir.IntType(width))
        wide = ir.IntType(width + 1)  # a stop bit above the matches: no match counts `width`
        bits = builder.or_(builder.zext(bits, wide), ir.Constant(wide, 1 << width))
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(wide, [wide, ir.IntType(1)]),
                                            f"llvm.cttz.i{width + 1}")
        tz = builder.call(fn, [bits, ir.Constant(ir.IntType(1), 1)])
        tz = builder.zext(tz, i64) if width + 1 < 64 else builder.trunc(tz, i64) if width + 1 > 64 else tz
        return builder.select(builder.icmp_unsigned("==", tz, ir.Constant(i64, width)), ir.Constant(i64, -1), tz)

    return types.int64(arr, base, key, n), codegen


def mulhi(a, b):
    """The high 64 bits of the 128-bit product of two uint64s: one MUL instruction in a kernel
    (`_mulhi`), exact integers as plain Python (``NUMBA_DISABLE_JIT``). Division by a run-time
    divisor through a multiplication (`tuiprof.sim.addressing.udivmod`)."""
    return np.uint64((int(a) * int(b)) >> 64)


@intrinsic
def _mulhi(typingctx, a, b):
    if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        i128 = ir.IntType(128)
        x = builder.zext(context.cast(builder, args[0], sig.args[0], types.uint64), i128)
        y = builder.zext(context.cast(builder, args[1], sig.args[1], types.uint64), i128)
        return builder.trunc(builder.lshr(builder.mul(x, y), ir.Constant(i128, 64)), ir.IntType(64))

    return types.uint64(a, b), codegen


@overload(mulhi, jit_options=dict(KERNEL), inline="always")  # type: ignore[arg-type]  # KERNEL is a _JITOptions
def _mulhi_overload(a, b):  # noqa: ANN001, ANN202 (Numba's signature)
    if isinstance(a, types.Integer) and isinstance(b, types.Integer):
        return lambda a, b: _mulhi(a, b)
    return None


def _int64_cell(context, builder, sig, args):  # noqa: ANN001, ANN202 (codegen helper)
    """The address of ``arr[idx]`` for the atomic intrinsics (no bounds check)."""
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    return builder.gep(ary.data, [context.cast(builder, args[1], sig.args[1], types.intp)])


def _is_int64_vector(arr: object) -> bool:
    return isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1


@intrinsic
def atomic_add(typingctx, arr, idx, val):
    """``arr[idx] += val`` as one atomic step on an int64 array that worker threads share; returns
    the value before. How batches of CTAs running at once count what they share (the snapshot's
    warp accesses) without losing updates."""
    if not (_is_int64_vector(arr) and isinstance(idx, types.Integer) and isinstance(val, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[2], sig.args[2], types.int64)
        return builder.atomic_rmw("add", _int64_cell(context, builder, sig, args), v, "seq_cst")

    return types.int64(arr, idx, val), codegen


@intrinsic
def atomic_get(typingctx, arr, idx):
    """``arr[idx]`` of an int64 array another thread may write, read afresh at every call (an
    acquire load, which the compiler never hoists out of a loop): a stop request between threads."""
    if not (_is_int64_vector(arr) and isinstance(idx, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_int64_cell(context, builder, sig, args), "acquire", 8)

    return types.int64(arr, idx), codegen


_DISPATCHER_FAILURES = ("returned a result with an exception set", "returned NULL without setting an exception")
"""How Python reports a C function whose result and error state disagree (the end of the message)."""


def kernel_failure(exc: BaseException) -> CompiledCodeError | None:
    """The user-facing error for `exc` when it is a compiled kernel's failure that no input can cause:
    a ``SystemError`` from a Numba dispatcher whose entry returned a result with an exception set
    (or none with none), as a stale or mixed-up compiled-code cache makes it (two of the emulator's
    variants under one name did, see `built_kernel`). None for anything else, which stays a bug
    with its traceback."""
    text = str(exc)
    if not isinstance(exc, SystemError) or "Dispatcher(" not in text or not text.endswith(_DISPATCHER_FAILURES):
        return None
    match = re.search(r"<function (\S+) at ", text)
    name = match.group(1) if match else "a compiled kernel"
    cause = exc.__cause__ or exc.__context__
    why = f" ({type(cause).__name__}: {str(cause)[:120]})" if cause is not None else ""
    if _CACHE_DIR is None:
        return CompiledCodeError(f"the compiled kernel {name} failed inside tuiprof{why}",
                                 "this is a tuiprof bug (no compiled-code cache was in use): please report it "
                                 "with the command that showed it")
    return CompiledCodeError(f"the compiled kernel {name} failed inside tuiprof{why}; the compiled-code "
                             f"cache at {_CACHE_DIR} may be stale or damaged",
                             f"remove that folder (rm -r '{_CACHE_DIR}') and run again: the kernels are compiled "
                             "afresh (about a minute; `tuiprof warmup` does it ahead); if it happens again with a "
                             "fresh folder, please report it")


_noted: set[int] = set()
_silenced = [0]
"""How many `compiles_announced` blocks are open (the note is silent inside them)."""


@contextlib.contextmanager
def compiles_announced() -> Iterator[None]:
    """Within: the caller says what it compiles itself (`tuiprof warmup`'s steps), so
    `note_first_compile` stays silent."""
    _silenced[0] += 1
    try:
        yield
    finally:
        _silenced[0] -= 1


def note_first_compile(kernel: object, what: str) -> None:
    """Before the first call of `kernel` in this process, say on stderr (once) that `what` is being
    compiled when Numba's disk cache holds no fresh machine code for it: the first run after an
    install or an upgrade takes about a minute, and a silent minute looks like a hang."""
    if getattr(kernel, "signatures", None) or id(kernel) in _noted or _silenced[0]:
        return
    _noted.add(id(kernel))
    if not _cached(kernel):
        _note(f"note: compiling {what} (first run after an install or upgrade: about a minute; "
              "cached afterwards; `tuiprof warmup` compiles every preset's ahead)...")


def is_cached(kernel: object) -> bool:
    """Whether `kernel`'s first call will not compile it: loaded in this process, or fresh machine
    code for it in Numba's disk cache (or that cannot be told)."""
    return bool(getattr(kernel, "signatures", None)) or _cached(kernel)


def _cached(kernel: object) -> bool:
    """Whether Numba's disk cache has an entry for `kernel` that is fresh for its source file:
    one read of its small index file (Numba's own check, ``_load_index``, which answers empty
    for a missing, stale or other-version index), holding an entry for this function's code and
    closure values. True when that cannot be told (no cache, or a Numba whose internals differ),
    so that no false alarm is printed."""
    cache = getattr(kernel, "_cache", None)
    load = getattr(getattr(cache, "_cache_file", None), "_load_index", None)
    if load is None:
        return True
    try:
        index = load()
    except Exception:  # a damaged index: Numba recompiles, and the note is then true
        return False
    if not index:
        return False
    try:
        want = cache._index_key(None, kernel.targetctx.codegen())[2]  # type: ignore[union-attr,attr-defined]
    except Exception:  # internals that differ: the index is not empty, say nothing
        return True
    return any(isinstance(k, tuple) and len(k) > 2 and k[2] == want for k in index)


__all__ = ["INLINE", "KERNEL", "KernelOptions", "atomic_add", "atomic_get", "built_kernel", "compiles_announced", "emu_kernel", "find_tag", "is_cached", "keep", "kernel_cache_dir", "kernel_failure", "plain_kernel",
           "mulhi", "njit", "note_first_compile", "plain_args", "popcount", "prefetch"]
