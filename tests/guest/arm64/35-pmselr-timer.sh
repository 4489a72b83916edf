# The driver never uses PMSELR_EL0: an EL0 program that selects a counter once
# and reads PMXEVCNTR_EL0 across several of the driver's checks still reads the
# counter it selected (exact counts on every run).
. /tests/lib.sh
. /tests/data/pmuloop.env
c0=$(cpu_attr 1 checks)
gap=$(($(cat $SYSFS/recheck_ms) * 3 / 2))
exact_batch "PMSELR across checks" $((STRAIGHT + BODY * 100000 + TAIL)) \
	sh -c "pmuloop 1 $(published 1 1) 100000 5 $gap | sed -n 's/^insns=\([0-9]*\) .*/\1/p'"
c1=$(cpu_attr 1 checks)
[ $((c1 - c0)) -ge 3 ] || fail "only $((c1 - c0)) driver checks ran on cpu1 during the runs"
echo "PMSELR selection kept across $((c1 - c0)) driver checks; every run exact"
