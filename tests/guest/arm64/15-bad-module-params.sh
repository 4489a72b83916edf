# Invalid module parameters make insmod fail with exactly one simple-pmu: line
# naming the parameter; nothing stays loaded. Events are also checked against this
# PMU: PMCEID0/1_EL0 (0x5, L1D_TLB_REFILL, and 0x4001 are not implemented by QEMU's
# PMU) and the number of event counters. (The kernel adds its own "simple_pmu:"
# line for a value .set refuses.)
. /tests/lib.sh
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
n=0
for p in user_access=2 user_access=-1 ring=0 ring=4 ring=x ring=+2 ring=02 events=0x10000 \
	 events=8,junk events=1,2,3,4,5,6,7 events=0x5 events=0x8,0x4001 \
	 recheck_ms=5 recheck_ms=20000; do
	log_mark
	insmod $ko "$p" 2>/dev/null && { rmmod $MOD; fail "insmod accepted $p"; }
	[ -d /sys/module/simple_pmu ] && fail "module left loaded after $p"
	# busybox insmod tries finit_module, then init_module: each line comes twice.
	log=$(log_since | grep 'simple-pmu:' | sed 's/^\[[^]]*\] //' | sort -u)
	[ "$(echo "$log" | grep -c .)" -eq 1 ] || fail "want one simple-pmu: line for $p, got: $log"
	name=${p%%=*}
	has "$log" "$name" || fail "the line for $p does not name $name: '$log'"
	echo "$p -> $log"
	n=$((n + 1))
done
kernel_log_clean
echo "$n invalid parameters refused, each with one line naming it"
