"""What a Linux shared object needs from the machine that loads it, and the wheel platform
tag that says so.

    elf_needs.py FILE.so      # prints the libraries, symbol versions and the tag

`needs(path)` reads the ELF file's dynamic section (DT_NEEDED: the libraries) and its
version-needs section (.gnu.version_r: GLIBC_2.34, GCC_3.0, GLIBCXX_3.4.30 ... per
library) with the standard library alone. `platform_tag(needs, arch)` turns that into the
tag of PEP 600: `manylinux_2_<N>_<arch>` where N is the newest GLIBC_2.N version asked
for (the oldest glibc that has every symbol), provided every library is one the
manylinux policy lets a wheel take from the system (glibc's own libraries and
libgcc_s) and nothing asks for a libstdc++ version; otherwise plain `linux_<arch>`,
which promises nothing beyond the build machine.
"""
from __future__ import annotations

import dataclasses
import re
import struct
import sys

# Libraries every manylinux system provides (glibc's and the GCC runtime's C part).
SYSTEM_LIBRARIES = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
})
_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine -> wheel arch
_DT_NEEDED, _DT_STRTAB, _DT_VERNEED, _DT_VERNEEDNUM = 1, 5, 0x6FFFFFFE, 0x6FFFFFFF
_PT_DYNAMIC, _PT_LOAD = 2, 1


@dataclasses.dataclass(frozen=True)
class ElfNeeds:
    arch: str
    libraries: tuple[str, ...]
    versions: dict  # library -> sorted tuple of version names


def needs(path: str) -> ElfNeeds:
    """The libraries and symbol versions a 64-bit little-endian ELF shared object needs."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine not in _MACHINES:
        raise ValueError(f"{path}: unknown machine {machine}")
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        raise ValueError(f"{path}: no dynamic section (a static object needs nothing)")

    def offset_of(vaddr: int) -> int:
        for start, offset, size in loads:
            if start <= vaddr < start + size:
                return vaddr - start + offset
        raise ValueError(f"{path}: address {vaddr:#x} is in no loaded segment")

    entries = []
    for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == 0:
            break
        entries.append((tag, value))
    strtab = offset_of(next(v for t, v in entries if t == _DT_STRTAB))

    def string(offset: int) -> str:
        end = data.index(b"\0", strtab + offset)
        return data[strtab + offset:end].decode()

    libraries = tuple(string(v) for t, v in entries if t == _DT_NEEDED)
    versions: dict[str, set] = {}
    verneed = [v for t, v in entries if t == _DT_VERNEED]
    count = next((v for t, v in entries if t == _DT_VERNEEDNUM), 0)
    at = offset_of(verneed[0]) if verneed else 0
    for _ in range(count):
        _, cnt, file, aux, nxt = struct.unpack_from("<HHIII", data, at)
        names = versions.setdefault(string(file), set())
        aux_at = at + aux
        for _ in range(cnt):
            _, _, _, name, aux_next = struct.unpack_from("<IHHII", data, aux_at)
            names.add(string(name))
            aux_at += aux_next
        at += nxt
    return ElfNeeds(_MACHINES[machine], libraries,
                    {lib: tuple(sorted(v)) for lib, v in sorted(versions.items())})


def glibc_minimum(n: ElfNeeds) -> tuple[int, int]:
    """The newest GLIBC_x.y any library is asked for ((2, 17) when none is)."""
    found = [(int(m[1]), int(m[2])) for vs in n.versions.values() for v in vs
             if (m := re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", v))]
    return max(found, default=(2, 17))


def platform_tag(n: ElfNeeds) -> str:
    """`manylinux_2_N_<arch>` when the object needs only system libraries and no libstdc++
    symbol version, else `linux_<arch>`."""
    foreign = [lib for lib in n.libraries if lib not in SYSTEM_LIBRARIES]
    cxx = [v for vs in n.versions.values() for v in vs if v.startswith(("GLIBCXX_", "CXXABI_"))]
    if foreign or cxx:
        return f"linux_{n.arch}"
    major, minor = glibc_minimum(n)
    return f"manylinux_{major}_{minor}_{n.arch}"


def main(argv: list[str]) -> int:
    for path in argv:
        n = needs(path)
        print(f"{path}: {platform_tag(n)}")
        for lib in n.libraries:
            print(f"  {lib}: {' '.join(n.versions.get(lib, ())) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
