"""Kernel resources read from a cubin (the ELF file the assembler makes), without a GPU.

Used when no ``ptxas -v`` output is at hand (NVRTC) and for what ``ptxas -v`` no longer prints
(user constant memory on sm_90 and later). What is read, per kernel symbol:

- registers: the ``EIATTR_REGCOUNT`` attribute of the module's ``.nv.info`` section (up to sm_89
  also the top byte of the ``.text.<kernel>`` section's ``sh_info``, used as a fallback);
- stack (local memory per thread, callees included): ``EIATTR_MAX_STACK_SIZE``, else
  ``EIATTR_FRAME_SIZE``;
- static shared memory: the size of the ``.nv.shared.<kernel>`` section; from sm_90 on, ptxas
  places the 1 KiB that CUDA reserves per CTA (``reservedSharedMemPerBlock``) at the start of
  that section, so it is subtracted there (``ptxas -v`` and the occupancy calculator count it
  apart);
- user ``__constant__`` bytes: the size of ``.nv.constant3`` (the bank ``ptxas -v`` calls
  ``cmem[3]``), module-wide.

``.nv.info`` is a list of attributes: a format byte, an attribute byte, then a 16-bit field that
is the payload size for the sized format (``EIFMT_SVAL``, 4) and the value itself otherwise.
Sized per-function attributes start with the function's symbol index.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tuiprof.errors import BuildError
from tuiprof.toolchain.program import KernelResources

EIFMT_SVAL = 0x04
EIATTR_FRAME_SIZE = 0x11
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
USER_CONSTANT_SECTION = ".nv.constant3"
RESERVED_SHARED_FROM_SM90 = 1024


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Elf:
    """The parts of an ELF64 little-endian file the resource reader needs."""

    data: bytes
    sections: tuple[Section, ...]
    symbols: tuple[str, ...]
    """Symbol names by index (``.symtab``)."""

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def body(self, section: Section) -> bytes:
        if section.type == 8:  # SHT_NOBITS: occupies no file space
            return b""
        return self.data[section.offset:section.offset + section.size]


def _bad(why: str) -> BuildError:
    return BuildError(f"the compiled cubin is not a readable ELF file ({why})",
                      "this is a tuiprof bug or an unsupported compiler; please report it")


def read_elf(data: bytes) -> Elf:
    """Parse the section table and symbol names of an ELF64 little-endian file."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise _bad("no ELF header")
    if data[4] != 2 or data[5] != 1:
        raise _bad("not 64-bit little-endian")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= max(shnum, 1):
        raise _bad("section table out of range")
    raw = []
    for i in range(shnum):
        name, typ, flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        if typ != 8 and off + size > len(data):
            raise _bad(f"section {i} out of range")
        raw.append((name, typ, flags, off, size, link, info, entsize))
    strtab = raw[shstrndx]
    names = data[strtab[3]:strtab[3] + strtab[4]]
    sections = tuple(Section(_cstr(names, r[0]), *r[1:]) for r in raw)
    symbols: tuple[str, ...] = ()
    for s in sections:
        if s.type == 2:  # SHT_SYMTAB
            sym_names = data[sections[s.link].offset:sections[s.link].offset + sections[s.link].size]
            entsize = s.entsize or 24
            symbols = tuple(_cstr(sym_names, struct.unpack_from("<I", data, s.offset + j * entsize)[0])
                            for j in range(s.size // entsize))
            break
    return Elf(data, sections, symbols)


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def nv_info_attributes(body: bytes) -> list[tuple[int, int, bytes]]:
    """(format, attribute, payload) of every entry of a ``.nv.info`` section; the payload of an
    unsized entry is its 16-bit value."""
    out = []
    pos = 0
    while pos + 4 <= len(body):
        fmt, attr, size = struct.unpack_from("<BBH", body, pos)
        pos += 4
        if fmt == EIFMT_SVAL:
            out.append((fmt, attr, body[pos:pos + size]))
            pos += size
        else:
            out.append((fmt, attr, struct.pack("<H", size)))
    return out


def kernel_resources(data: bytes, kernels: tuple[str, ...], sm: int) -> dict[str, KernelResources]:
    """The resources of each of `kernels` (PTX entry names) in the cubin `data` built for sm_`sm`."""
    elf = read_elf(data)
    per_symbol: dict[int, dict[int, int]] = {}
    info = elf.section(".nv.info")
    if info is not None:
        for fmt, attr, payload in nv_info_attributes(elf.body(info)):
            if fmt == EIFMT_SVAL and len(payload) >= 8 and attr in (EIATTR_REGCOUNT, EIATTR_MAX_STACK_SIZE,
                                                                     EIATTR_FRAME_SIZE):
                sym, value = struct.unpack_from("<II", payload, 0)
                per_symbol.setdefault(sym, {})[attr] = value
    by_name = {name: per_symbol.get(i, {}) for i, name in enumerate(elf.symbols) if name}
    const = elf.section(USER_CONSTANT_SECTION)
    const_bytes = const.size if const is not None else 0
    out = {}
    for name in kernels:
        attrs = by_name.get(name, {})
        text = elf.section(f".text.{name}")
        if text is None:
            raise _bad(f"no code section for kernel {name}")
        registers = attrs.get(EIATTR_REGCOUNT, text.info >> 24)
        stack = attrs.get(EIATTR_MAX_STACK_SIZE, attrs.get(EIATTR_FRAME_SIZE, 0))
        shared = elf.section(f".nv.shared.{name}")
        static_shared = shared.size if shared is not None else 0
        if sm >= 90 and static_shared >= RESERVED_SHARED_FROM_SM90:
            static_shared -= RESERVED_SHARED_FROM_SM90
        out[name] = KernelResources(registers_per_thread=registers, static_shared=static_shared,
                                    local_bytes_per_thread=stack, const_bytes=const_bytes)
    return out
