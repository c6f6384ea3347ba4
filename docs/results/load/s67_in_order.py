# session 67: the 209 MB JAX profile analyzed cold with the analyses side by side (as shipped) and in order (one thread)
# usage: python s67_in_order.py PROFILE side|order   (prints the peak RSS; wall time from /usr/bin/time)
import sys, resource
import kernscope.analyze.summary as S
if sys.argv[2]=="order":
    S.SIDE_BY_SIDE_MAX_ROWS=0; S.SIDE_BY_SIDE_MAX_EVENTS=0
from kernscope.cli import main
rc=main(["analyze","--no-cache",sys.argv[1],"--format","json","-o","/tmp/s67/o_"+sys.argv[2]+".json"])
print(sys.argv[2], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024, "MB")
