# Read-only is proven, not assumed: on every CPU, EL0 reads of the published
# counters work and writes to PMCR, PMCNTENCLR, PMCCNTR, PMEVTYPER0, PMSWINC and
# PMEVCNTR0 trap.
. /tests/lib.sh
for c in $(cpu_list); do
	out=$(pmuwrite $c) || fail "cpu$c: $out"
done
echo "every CPU: reads ok; $(echo "$out" | grep -c 'write-.*sigill') writes trap (PMCR, PMCNTENCLR, PMCCNTR, PMEVTYPER0, PMSWINC, PMEVCNTR0)"
