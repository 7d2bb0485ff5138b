#!/usr/bin/env python3
"""Name XLA's generated kernels in a perf profile of a live nitro (or JAX) process.

XLA's CPU backend compiles each fusion to its own object and loads it into anonymous executable
memory, so perf shows its samples as bare addresses. With XLA_FLAGS=--xla_dump_to=DIR the same
objects are written to DIR (*.o). This finds each object's code in the process's executable
anonymous mappings (bytes that relocation patches are wildcards) and appends "START SIZE NAME"
lines to /tmp/perf-PID.map, which perf report reads; NAME is "<module>:<kernel>", and kernels
with identical code share one name ("+N_same_code"). It also writes /tmp/perf-PID.names with
every name of each address. Run it after the programs are compiled and before the process ends.

usage: xla_kernel_names.py PID DUMPDIR [MODULE_SUBSTRING...]   (docs/profiling.md shows the run)"""
import os, re, struct, sys
pid, dump = int(sys.argv[1]), sys.argv[2]
subs = sys.argv[3:]

def elf(path):
    b = open(path, 'rb').read()
    shoff, = struct.unpack_from('<Q', b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', b, 0x3A)
    secs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from('<IIQQQQIIQQ', b, shoff + i * shentsize)
        secs.append(dict(name=name, type=typ, flags=flags, off=off, size=size, link=link, info=info, entsize=entsize))
    strtab = secs[shstrndx]
    def nm(o, tab):
        e = b.index(b'\0', tab['off'] + o)
        return b[tab['off'] + o:e].decode()
    for s in secs:
        s['n'] = nm(s['name'], strtab)
    out = []  # (section bytes, wildcard offsets, [(sym, value, size)])
    for i, s in enumerate(secs):
        if not (s['flags'] & 4) or s['size'] == 0:  # SHF_EXECINSTR
            continue
        code = bytearray(b[s['off']:s['off'] + s['size']])
        wild = set()
        for r in secs:
            if r['type'] == 4 and r['info'] == i:  # SHT_RELA for this section
                for k in range(r['size'] // 24):
                    off, info, add = struct.unpack_from('<QQq', b, r['off'] + 24 * k)
                    t = info & 0xffffffff
                    n = 8 if t in (1, 24) else 4
                    wild.update(range(off, off + n))
        syms = []
        for st in secs:
            if st['type'] == 2:
                for k in range(st['size'] // 24):
                    nmo, info, other, shndx, val, size = struct.unpack_from('<IBBHQQ', b, st['off'] + 24 * k)
                    if shndx == i and (info & 0xf) == 2:  # FUNC
                        syms.append((nm(nmo, secs[st['link']]), val, size))
        out.append((bytes(code), wild, syms))
    return out

regions = []
with open(f'/proc/{pid}/maps') as f:
    for l in f:
        p = l.split()
        if 'x' in p[1] and (len(p) < 6 or p[5].startswith('[anon')):
            a, z = (int(x, 16) for x in p[0].split('-'))
            regions.append((a, z))
mem = open(f'/proc/{pid}/mem', 'rb')
blobs = []
for a, z in regions:
    try:
        mem.seek(a); blobs.append((a, mem.read(z - a)))
    except OSError:
        pass
groups = {}  # pattern -> (code length, [(symbol offset, size, name)])
for fn in sorted(os.listdir(dump)):
    if not fn.endswith('.o') or (subs and not any(s in fn for s in subs)):
        continue
    mod = fn.split('.obj-file.')[0].split('.', 1)[1]
    for code, wild, syms in elf(os.path.join(dump, fn)):
        n = min(len(code), 1024)
        pat = b''.join(b'.' if i in wild else re.escape(code[i:i + 1]) for i in range(n))
        g = groups.setdefault(pat, (len(code), []))
        for name, val, size in syms:
            g[1].append((val, size or len(code), mod + ':' + name))
found = {}
miss = 0
for pat, (length, syms) in groups.items():
    rx = re.compile(pat, re.S)
    hits = [a + m.start() for a, blob in blobs for m in rx.finditer(blob)]
    if not hits:
        miss += 1
        continue
    names = sorted({n for _, _, n in syms})
    for hit in hits:
        for val, size, _ in syms[:1]:
            found.setdefault((hit + val, size), set()).update(names)
with open(f'/tmp/perf-{pid}.map', 'a') as f:
    for (a, size), names in sorted(found.items()):
        names = sorted(names)
        label = names[0] if len(names) == 1 else names[0] + '+%d_same_code' % (len(names) - 1)
        f.write('%x %x %s\n' % (a, size, label))
with open(f'/tmp/perf-{pid}.names', 'a') as f:
    for (a, size), names in sorted(found.items()):
        f.write('%x %s\n' % (a, ' '.join(sorted(names))))
print(f'jitmap: {len(found)} code addresses named, {miss} objects not found, {len(regions)} exec regions')
