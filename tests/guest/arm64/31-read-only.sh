# Read-only is proven, not assumed: on every CPU, EL0 reads of the published
# counters work and writes to PMCR, PMCNTENCLR, PMCCNTR, PMEVTYPER0, PMSWINC and
# PMEVCNTR0 trap.
. /tests/lib.sh
# The Python checks before this one read through perf (thread scope, the default), and
# perf withdraws user access on those CPUs; the module grants it again at its next
# check, which an idle CPU defers: raw reads come after that (seen on sid: cpu1 SIGILL).
settle
for c in $(cpu_list); do
	out=$(pmuwrite $c) || fail "cpu$c: $out"
done
echo "every CPU: reads ok; $(echo "$out" | grep -c 'write-.*sigill') writes trap (PMCR, PMCNTENCLR, PMCCNTR, PMEVTYPER0, PMSWINC, PMEVCNTR0)"
