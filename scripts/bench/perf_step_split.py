#!/usr/bin/env python3
"""Split a perf profile of a GPT's training steps into kinds of work.

usage: perf_step_split.py DIR PLUGIN
DIR holds perf.data (perf record of the steps), perf.names (xla_kernel_names.py's) and dump/
(--xla_dump_to's files); PLUGIN is the pjrt_c_api_cpu_plugin.so the process ran.

XLA's kernels (named by xla_kernel_names.py) are sorted by what their fusion in the optimized
HLO touches: a 12x1024x1024 attention matrix, tanh (GELU), a square root or a per-token row
spread over the width (layer norm), log or exp (the loss), a reduce, a transpose or copy, else
other elementwise; the optimizer program's kernels are a kind of their own. oneDNN's JIT kernels
are matmuls. The plugin exports no symbols for its own code, so its samples are grouped by
function with the plugin's unwind table (readelf --debug-dump=frames), and a function with 8 or
more FMA instructions is counted as a matmul micro-kernel (YNNPACK's and Eigen's inner loops);
the rest of the plugin (YNNPACK's reductions and packing, XLA's runtime, the thread pool) is
one kind. Shares are of CPU samples."""
import bisect, collections, os, re, subprocess, sys
d, plugin = sys.argv[1], sys.argv[2]
frames = subprocess.run(['readelf', '--debug-dump=frames', plugin], capture_output=True, text=True).stdout
fdes = sorted(tuple(int(x, 16) for x in m.groups()) for m in re.finditer(r' FDE .*pc=([0-9a-f]+)\.\.([0-9a-f]+)', frames))
starts = [a for a, _ in fdes]

# XLA kernel -> category, from the optimized HLO of each module
hlo = {}
for fn in os.listdir(os.path.join(d, 'dump')):
    if fn.endswith('.cpu_after_optimizations.txt'):
        mod = fn.split('.', 1)[1].split('.cpu_after')[0]
        hlo[mod] = open(os.path.join(d, 'dump', fn)).read()
def comps(text):
    out, cur, name = {}, [], None
    for l in text.splitlines():
        m = re.match(r'^(?:ENTRY )?%?([\w.\-]+) .*\{$', l)
        if m and not l.startswith(' '):
            name, cur = m.group(1), []
            continue
        if l.startswith('}'):
            if name: out[name] = '\n'.join(cur)
            name = None; continue
        if name: cur.append(l)
    return out
ATT = re.compile(r'\[(?:\d+,)*12,1024,1024\]|\[12288,1024\]|\[1024,1024\]|\[12,1024,1024\]')
def category(mod, kernel):
    text = hlo.get(mod, '')
    if mod.endswith('optimizer'):
        return 'optimizer update (its own program)'
    m = re.search(r'%' + re.escape(kernel) + r' = (\S+) fusion\((.*?)\), kind=(\w+), calls=%([\w.\-]+)', text)
    body, shapes = '', ''
    if m:
        shapes = m.group(1) + ' ' + m.group(2)
        body = comps(text).get(m.group(4), '')
    else:
        m = re.search(r'%' + re.escape(kernel) + r' = (\S+) ([\w\-]+)\((.*?)\)', text)
        if m:
            shapes = m.group(1) + ' ' + m.group(3); body = m.group(2)
    allshapes = shapes + ' ' + body
    if ATT.search(allshapes) or 'f32[12,1024,1024' in allshapes:
        return 'attention: mask, softmax and their gradients (12x1024x1024 per layer)'
    if 'tanh' in body:
        return 'GELU (forward and backward)'
    # a layer norm's statistics are one value per token ([1,1024] at gpt2@1), spread over the
    # width: its square root, or a broadcast of such a row against a [..,1024,768] array
    if 'sqrt(' in body or (re.search(r'\[1,1024\]', body) and re.search(r'1024,768\]', allshapes)):
        return 'layer norm (forward and backward)'
    if 'log(' in body or 'exponential(' in body:
        return 'cross-entropy over the 256 logits'
    if ' reduce(' in body:
        return 'other reductions (bias gradients, norms)'
    if 'transpose(' in body or 'copy(' in body:
        return 'transposes and copies'
    return 'other elementwise (residual adds, bias adds, gradient packing)'

names = {}
if os.path.exists(os.path.join(d, 'perf.names')):
    for l in open(os.path.join(d, 'perf.names')):
        a, *ns = l.split()
        names[int(a, 16)] = ns

rep = subprocess.run(['perf', 'report', '-i', os.path.join(d, 'perf.data'), '--no-children', '--sort', 'dso,sym',
                      '-g', 'none', '--stdio', '-F', 'overhead,sample,dso,sym'], capture_output=True, text=True).stdout
cats = collections.Counter(); plugfn = collections.Counter(); total = 0
detail = collections.Counter()
for l in rep.splitlines():
    if not l.strip() or l.startswith('#'):
        continue
    m = re.match(r'\s*([\d.]+)%\s+(\d+)\s+(\S.*?)\s+\[(.)\]\s+(.*)$', l)
    if not m:
        continue
    n, dso, sym = int(m.group(2)), m.group(3).strip(), m.group(5).strip()
    total += n
    if dso.startswith('[JIT]'):
        if sym.startswith('jit_') or sym.startswith('0x'):
            c = 'matmul: oneDNN' if sym.startswith('jit_') else 'JIT code not named'
        else:
            mod, _, k = sym.partition(':')
            k = k.split('+')[0]
            c = category(mod, k)
            detail[(c, sym)] += n
    elif dso == 'pjrt_c_api_cpu_plugin.so':
        if sym.startswith('0x'):
            a = int(sym, 16)
            i = bisect.bisect_right(starts, a) - 1
            f = fdes[i][0] if i >= 0 and fdes[i][0] <= a < fdes[i][1] else a
            plugfn[f] += n
            c = 'plugin (XLA runtime, YNNPACK, Eigen)'
        else:
            c = 'plugin: ' + sym
    elif dso.startswith('[kernel'):
        if re.search(r'clear_page|page_fault|anonymous_page|mm_fault|folio|memcg|alloc_.*pages|lruvec|get_page|zone|rmqueue|charge', sym):
            c = 'kernel: faulting in fresh pages (clearing them, mapping, accounting)'
        else:
            c = 'kernel: scheduling, futex and the rest'
    elif 'jemalloc' in dso or 'libc' in dso:
        c = 'malloc/free, memcpy, memset (' + dso + ')'
    elif 'nitro' in dso:
        c = 'Go (nitro, GoMLX, gopjrt)'
    else:
        c = 'other: ' + dso
    cats[c] += n
# split the plugin's functions: FMA-dense ones are matmul micro-kernels
def fma_share(start, end):
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '--start-address=%#x' % start,
                          '--stop-address=%#x' % min(end, start + 20000), plugin], capture_output=True, text=True).stdout
    ins = [l for l in out.splitlines() if re.match(r'\s+[0-9a-f]+:\s', l)]
    f = sum(1 for l in ins if 'vfmadd' in l)
    return f, len(ins)
pl = cats.pop('plugin (XLA runtime, YNNPACK, Eigen)', 0)
fmaspl = 0
print('plugin functions by samples (top 15): start  samples  FMA/instructions')
for f, n in plugfn.most_common(40):
    i = bisect.bisect_right(starts, f) - 1
    end = fdes[i][1] if i >= 0 and fdes[i][0] == f else f + 1
    fm, ins = fma_share(f, end) if end > f + 1 else (0, 0)
    matm = fm >= 8
    if matm:
        fmaspl += n
    if plugfn.most_common(15).count((f, n)):
        print('  %#x %6d  %d/%d%s' % (f, n, fm, ins, '  matmul' if matm else ''))
cats['matmul: plugin micro-kernels (FMA-dense; YNNPACK/Eigen)'] += fmaspl
cats['plugin, other (XLA runtime, thread pool, other library code)'] += pl - fmaspl
print('\ntotal samples', total)
for c, n in cats.most_common():
    print('%6.1f%%  %7d  %s' % (100.0 * n / total, n, c))
print('\ntop XLA kernels:')
for (c, s), n in detail.most_common(25):
    print('%6.2f%%  %s  [%s]' % (100.0 * n / total, s, c))
