"""A loader of the object code LLVM makes of a kernel (llvm_jit.py) on x86-64 Linux, so that a process whose
kernels all come from the disk cache loads no LLVM: it maps the object's sections, binds its external symbols
and applies its relocations (LLVM's large code model: absolute 64-bit addresses) itself. Whatever it has not
met (another machine, a section, symbol or relocation of another kind) it refuses with Unsupported, before
any code can run: llvm_jit loads that object through LLVM's MCJIT instead."""

from __future__ import annotations

import ctypes
import os
import struct
import sys

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
# section flags a loaded section may carry: write, alloc, exec, merge, strings, info link, link order and
# x86-64's SHF_X86_64_LARGE (the large code model's .ltext, .lrodata, .lbss); others (TLS, groups) refuse
KNOWN_FLAGS = 0x1 | 0x2 | 0x4 | 0x10 | 0x20 | 0x40 | 0x80 | 0x10000000
SHT_PROGBITS, SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 1, 2, 4, 8, 9
SHN_UNDEF, SHN_LORESERVE, SHN_ABS = 0, 0xFF00, 0xFFF1
EM_X86_64 = 62
# relocation type -> (bytes written, whether relative to the place, the range the value must fit)
RELOCATIONS = {
    1: (8, False, None),  # R_X86_64_64: S + A
    2: (4, True, (-(1 << 31), 1 << 31)),  # R_X86_64_PC32: S + A - P
    10: (4, False, (0, 1 << 32)),  # R_X86_64_32
    11: (4, False, (-(1 << 31), 1 << 31)),  # R_X86_64_32S
    24: (8, True, None),  # R_X86_64_PC64: S + A - P
}
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20
PAGE = 4096
MAX_BYTES = 1 << 30  # a kernel's code and data take kilobytes


class Unsupported(Exception):
    """Object code this loader does not take (nothing of it was run)."""


def supported_here() -> bool:
    """Whether this process is one the loader serves: 64-bit x86 Linux."""
    return sys.platform.startswith("linux") and os.uname().machine == "x86_64" and sys.maxsize > 2**32


def load(obj: bytes, symbols: dict[str, int], libraries: list[ctypes.CDLL], names: list[str]) -> dict[str, int]:
    """The addresses of `names` (symbols the object defines) in a mapping of the object, its relocations
    applied: an external symbol is `symbols`' address for it, else the first of `libraries` (then the process)
    that defines it. The mapping lives as long as the process. Unsupported where the object is not one the
    loader knows; `obj` has passed llvm_jit.check_object (its section table and sections lie within it)."""
    if not supported_here():
        raise Unsupported(f"the loader serves x86-64 Linux, not {sys.platform} on {os.uname().machine}")
    try:
        return _load(obj, symbols, libraries, names)
    except (struct.error, IndexError, ValueError, OverflowError, ctypes.ArgumentError) as e:
        raise Unsupported(f"its object file does not read as expected ({e})") from None


def _load(obj: bytes, symbols: dict[str, int], libraries: list[ctypes.CDLL], names: list[str]) -> dict[str, int]:
    if obj[4] != 2 or obj[5] != 1 or struct.unpack_from("<HH", obj, 16) != (1, EM_X86_64):
        raise Unsupported("it is not a relocatable x86-64 ELF object")
    (shoff,) = struct.unpack_from("<Q", obj, 40)
    shnum, shstrndx = struct.unpack_from("<HH", obj, 60)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def text(table: int, at: int) -> str:
        end = obj.index(b"\0", table + at)
        return obj[table + at : end].decode()

    # which sections are mapped, and where: executable, read-only and writable ones each on pages of their own
    layout: dict[int, int] = {}
    regions: dict[int, list[int]] = {PROT_READ | PROT_EXEC: [], PROT_READ: [], PROT_READ | PROT_WRITE: []}
    for i, (name, kind, flags, _, _, _, _, _, align, _) in enumerate(sections):
        if not flags & SHF_ALLOC:
            continue
        section = text(names_at, name)
        if section == ".eh_frame" or kind == 0x70000001:  # unwind tables: nothing unwinds through a kernel
            continue
        if kind not in (SHT_PROGBITS, SHT_NOBITS) or flags & ~KNOWN_FLAGS or align > PAGE:
            raise Unsupported(f"it has a section {section!r} of a kind the loader does not map")
        prot = PROT_READ | (PROT_EXEC if flags & SHF_EXECINSTR else 0) | (PROT_WRITE if flags & SHF_WRITE else 0)
        if prot not in regions:
            raise Unsupported(f"its section {section!r} is both writable and executable")
        regions[prot].append(i)
    offset, spans = 0, []
    for prot, members in regions.items():
        start = offset
        for i in members:
            align = max(sections[i][8], 1)
            offset = -(-offset // align) * align
            layout[i] = offset
            offset += sections[i][5]
        offset = -(-offset // PAGE) * PAGE
        spans.append((prot, start, offset - start))
    if not 0 < offset <= MAX_BYTES:
        raise Unsupported(f"it would map {offset} bytes")

    symtabs = [s for s in sections if s[1] == SHT_SYMTAB]
    if len(symtabs) != 1 or symtabs[0][9] != 24:
        raise Unsupported("it has no single symbol table")
    _, _, _, _, sym_at, sym_size, sym_names, _, _, _ = symtabs[0]
    symtab = [struct.unpack_from("<IBBHQQ", obj, sym_at + 24 * k) for k in range(sym_size // 24)]
    names_table = sections[sym_names][4]

    base = _map(offset)
    try:
        for i, at in layout.items():
            if sections[i][1] == SHT_PROGBITS:
                ctypes.memmove(base + at, obj[sections[i][4] : sections[i][4] + sections[i][5]], sections[i][5])
        resolved: dict[int, int] = {}

        def address(k: int) -> int:
            if k in resolved:
                return resolved[k]
            if k == 0:  # (no symbol: the addend alone)
                return 0
            name, _, _, shndx, value, _ = symtab[k]
            if shndx == SHN_UNDEF:
                where = _external(text(names_table, name), symbols, libraries)
            elif shndx == SHN_ABS:
                where = value
            elif shndx < SHN_LORESERVE and shndx in layout:
                where = base + layout[shndx] + value
            else:
                raise Unsupported(f"its symbol {text(names_table, name)!r} lies in a section the loader does not map")
            resolved[k] = where
            return where

        for _, kind, _, _, at, size, link, target, _, entsize in sections:
            if kind == SHT_REL and target in layout:
                raise Unsupported("it has relocations without addends (SHT_REL)")
            if kind != SHT_RELA or target not in layout:
                continue
            if entsize != 24 or sections[link][1] != SHT_SYMTAB:
                raise Unsupported("its relocations are not of the form expected")
            place_base, room = base + layout[target], sections[target][5]
            for r_offset, r_info, addend in struct.iter_unpack("<QQq", obj[at : at + size]):
                kind_of = r_info & 0xFFFFFFFF
                if kind_of == 0:  # R_X86_64_NONE
                    continue
                if kind_of not in RELOCATIONS:
                    raise Unsupported(f"it has a relocation of type {kind_of} the loader does not apply")
                width, relative, fits = RELOCATIONS[kind_of]
                if r_offset + width > room:
                    raise Unsupported("it has a relocation outside its section")
                place = place_base + r_offset
                value = address(r_info >> 32) + addend - (place if relative else 0)
                if fits is not None and not fits[0] <= value < fits[1]:
                    raise Unsupported(f"a relocation of type {kind_of} does not reach its symbol from the mapping")
                ctypes.memmove(place, (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little"), width)

        found = {}
        for name, _, _, shndx, value, _ in symtab:
            label = text(names_table, name) if name else ""
            if label in names and shndx in layout:
                if value >= sections[shndx][5]:
                    raise Unsupported(f"its symbol {label!r} lies outside its section")
                found[label] = base + layout[shndx] + value
        missing = [n for n in names if n not in found]
        if missing:
            raise Unsupported(f"it does not define {', '.join(missing)}")
        for prot, start, size in spans:
            if size and prot != PROT_READ | PROT_WRITE and _mprotect(base + start, size, prot) != 0:
                raise Unsupported(f"its pages cannot be made {'executable' if prot & PROT_EXEC else 'read-only'}")
    except BaseException:
        _munmap(base, offset)
        raise
    return found


def _external(name: str, symbols: dict[str, int], libraries: list[ctypes.CDLL]) -> int:
    """The address MCJIT would bind `name` to in this process: where LLVM is loaded, its own table first
    (Numba binds the C math functions there to its helper library's: its code and ours call the same ones)."""
    if name in symbols:
        return symbols[name]
    llvm = sys.modules.get("llvmlite.binding")
    if llvm is not None:
        where = llvm.address_of_symbol(name)
        if where:
            return where
    for library in [*libraries, _process()]:
        try:
            where = ctypes.cast(library[name], ctypes.c_void_p).value
        except AttributeError:
            continue
        if where:
            return where
    raise Unsupported(f"its external symbol {name!r} is found in no library loaded")


_libc: list[ctypes.CDLL] = []


def _process() -> ctypes.CDLL:
    if not _libc:
        libc = ctypes.CDLL(None, use_errno=True)
        int_ = ctypes.c_int
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, int_, int_, int_, ctypes.c_long]
        libc.mprotect.restype, libc.mprotect.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.munmap.restype, libc.munmap.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]
        _libc.append(libc)
    return _libc[0]


def _map(size: int) -> int:
    where = _process().mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if where is None or where == ctypes.c_void_p(-1).value:
        raise Unsupported(f"no memory could be mapped for it (errno {ctypes.get_errno()})")
    return where


def _mprotect(where: int, size: int, prot: int) -> int:
    return _process().mprotect(where, size, prot)


def _munmap(where: int, size: int) -> None:
    _process().munmap(where, size)
