# Invalid module parameters make insmod fail with one clear line naming the
# parameter; nothing stays loaded and the log has no WARNING. Events are also
# checked against this PMU: PMCEID0/1_EL0 (0x5, L1D_TLB_REFILL, and 0x4001 are
# not implemented by QEMU's PMU) and the number of event counters.
. /tests/lib.sh
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
n=0
for p in user_access=2 user_access=-1 ring=0 ring=4 ring=x events=0x10000 \
	 events=8,junk events=1,2,3,4,5,6,7 events=0x5 events=0x8,0x4001 \
	 recheck_ms=5 recheck_ms=20000; do
	dmesg -c >/dev/null
	insmod $ko "$p" 2>/dev/null && { rmmod $MOD; fail "insmod accepted $p"; }
	[ -d /sys/module/simple_pmu ] && fail "module left loaded after $p"
	log=$(dmesg)
	echo "$log" | grep -E 'WARNING:|BUG:|Oops|Call trace:' && fail "kernel log after $p: $log"
	line=$(echo "$log" | grep 'simple-pmu:' | head -n 1)
	name=${p%%=*}
	echo "$line" | grep -q "$name" || fail "no clear line naming $name for $p: '$line'"
	echo "$p -> ${line#*] }"
	n=$((n + 1))
done
echo "$n invalid parameters refused, each with a line naming it"
