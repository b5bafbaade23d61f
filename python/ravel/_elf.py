"""The sizes of a shared library's exported data symbols, from its ELF
dynamic symbol table.

An AOT library's ``NAME_fields`` is an array of structs whose layout may
grow (new members appended) as ``ravel build`` learns to say more; its
symbol's size divided by ``NAME_num_fields`` is the struct's size, so a
reader that knows only the leading members still walks the array right.
"""

import struct

__all__ = ["symbol_sizes"]


def symbol_sizes(path, names):
    """{name: st_size} for those of ``names`` in the .dynsym of the ELF64
    little-endian file at ``path``; {} when it is not one."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    wanted, out = {n.encode() for n in names}, {}
    for sec in sections:
        if sec[1] != 11:  # SHT_DYNSYM
            continue
        strtab = sections[sec[6]]  # sh_link: its string table
        str_off = strtab[4]
        off, size, entsize = sec[4], sec[5], sec[9] or 24
        for at in range(off, off + size, entsize):
            st_name, _, _, _, _, st_size = struct.unpack_from("<IBBHQQ", data, at)
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name:end]
            if name in wanted:
                out[name.decode()] = st_size
    return out
