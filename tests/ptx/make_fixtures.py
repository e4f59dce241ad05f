"""Regenerate the PTX fixtures of the front end's tests (run from anywhere; needs nvcc, and
cuda-bindings + nvidia-cuda-nvrtc for the NVRTC ones):

    python tests/ptx/make_fixtures.py [STEM ...]

With STEMs (``demo_bfs``, ``ptx_extras``) only those fixtures are made again: a fixture holds the
absolute path of its source, so regenerating the others would only change that line.

nvcc/: ``nvcc -ptx -lineinfo -arch=sm_75`` of every corpus file (tests/cuda/ptx_*.cu) and demo
(demo_traces/*.cu), sm_80 where a file needs it, plus sm_80 and sm_90 of ptx_extras.cu.
nvrtc/: NVRTC ``compute_80`` PTX of the same files (not modern_features: its CUB code makes a
160 KB module).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.ptx_support import FIXTURES, compile_nvcc, compile_nvrtc, corpus_sources, demo_sources, min_arch  # noqa: E402


def main(only: list[str]) -> None:
    (FIXTURES / "nvcc").mkdir(parents=True, exist_ok=True)
    (FIXTURES / "nvrtc").mkdir(parents=True, exist_ok=True)
    sources = [(s, s.stem) for s in corpus_sources()] + [(s, "demo_" + s.stem) for s in demo_sources()]
    unknown = set(only) - {stem for _, stem in sources}
    if unknown:
        raise SystemExit(f"no such fixture source: {', '.join(sorted(unknown))}")
    sources = [(src, stem) for src, stem in sources if not only or stem in only]
    for src, stem in sources:
        arches = [min_arch(src)] + ([80, 90] if stem == "ptx_extras" else [])
        for arch in arches:
            compile_nvcc(src, arch, FIXTURES / "nvcc" / f"{stem}.sm{arch}.ptx")
        if stem != "ptx_modern_features":
            text = compile_nvrtc(src.read_text(), src.name, 80)
            (FIXTURES / "nvrtc" / f"{stem}.sm80.ptx").write_text(text)
        print(stem)


if __name__ == "__main__":
    main(sys.argv[1:])
