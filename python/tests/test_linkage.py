"""How the extension is linked: it exports Python's entry point and nothing else.

einjit, nanobind and, with a toolchain that has only a static libstdc++ (the GPU machine's
/opt/gcc), the C++ runtime are linked into the extension. Had their symbols stayed exported,
the dynamic linker would bind some of them process-wide to another copy of the C++ runtime
that a module imported earlier brought (NumPy's and PyTorch's libstdc++.so): GNU unique
objects such as the locale facets' ids are bound to the first definition loaded, whatever the
scope. Two runtimes' facet tables then disagree, and the first integer written to a stream
(the CUDA code emitter's) called another facet's function and crashed. The export table is
read from the ELF file itself, so the check needs no binutils."""
import struct
import sys

import pytest

from einjit import _einjit

SHT_DYNSYM = 11
STB_LOCAL = 0
STB_NAMES = {1: "global", 2: "weak", 10: "unique"}


def exported_symbols(path):
    """(name, binding) of each symbol the shared object defines in its dynamic symbol table
    with a non-local binding: what the dynamic linker can bind other objects to."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF", f"{path} is not an ELF file"
    assert data[4] == 2 and data[5] == 1, "expected a 64-bit little-endian ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != SHT_DYNSYM:
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name_at, info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, at)
            binding = info >> 4
            if shndx == 0 or binding == STB_LOCAL:  # undefined here, or not visible outside
                continue
            end = data.index(b"\0", strtab + name_at)
            out.append((data[strtab + name_at:end].decode(), STB_NAMES.get(binding, str(binding))))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the export table is checked on Linux (ELF)")
def test_the_extension_exports_only_its_init_function():
    symbols = exported_symbols(_einjit.__file__)
    names = sorted(name for name, _ in symbols)
    assert names == ["PyInit__einjit"], (
        f"{len(names)} exported symbols, for example "
        + ", ".join(f"{n} ({b})" for n, b in sorted(symbols)[:12])
    )


def test_the_export_reader_sees_a_library_with_many_exports():
    """The reader itself, on a library that exports much: the C library of this process."""
    import ctypes.util

    if not sys.platform.startswith("linux"):
        pytest.skip("the export table is checked on Linux (ELF)")
    libc = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/libc.so" in path or "/libc-" in path:
                libc = path
                break
    assert libc, f"no C library mapped into this process (find_library says {ctypes.util.find_library('c')})"
    names = dict(exported_symbols(libc))
    assert names.get("malloc") == "global" and names.get("printf") == "global"
    assert "PyInit__einjit" not in names
