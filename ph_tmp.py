import time, sys
T = time.perf_counter
t0 = T()
import kernscope
from kernscope.load.source import read_bytes
from kernscope.load import kineto
from kernscope.link import link
from kernscope.analyze.summary import analyze
t1 = T(); print(f"import {t1-t0:.2f}")
p = sys.argv[1]
tim = {}
orig = kineto._assemble
def asm(parts, path):
    tim['decode_end'] = T()
    r = orig(parts, path)
    tim['asm'] = T() - tim['decode_end']
    return r
kineto._assemble = asm
origsplit = kineto._fast_split
def fs(d):
    a = T(); r = origsplit(d); tim['split'] = T() - a; return r
kineto._fast_split = fs
d = read_bytes(p); t2 = T(); print(f"read {t2-t1:.2f}")
raw = kineto.parse_document(d, p); t4 = T(); print(f"fastsplit {tim['split']:.2f} decode(parallel) {tim['decode_end']-t2-tim['split']:.2f} assemble {tim['asm']:.2f}")
tr = link(raw, p); t5 = T(); print(f"link {t5-t4:.2f}")
a = analyze(tr); t6 = T(); print(f"analyze {t6-t5:.2f}  total {t6-t0:.2f}")
