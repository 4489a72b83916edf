# simple-pmu mhz: the dependent-XOR estimate and the cycle counter beside it. Under
# -icount shift=0 an instruction takes 1 ns and PMCCNTR_EL0 counts 1 GHz of virtual time,
# so both must say 1000 MHz (within 1%): the method cross-checked by the hardware counter.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
out=$(simple-pmu mhz --runs 3) || fail "simple-pmu mhz exit $?: $out"
echo "$out"
xor=$(echo "$out" | sed -n 's/^median cpu_MHz=\([0-9.]*\) .*/\1/p')
# The cycle counter beside the method is this thread's (perf, issue 22) where perf gives
# one, else the module's: either counts 1 GHz of virtual time here.
cyc=$(echo "$out" | sed -n 's/^cycle counter ([a-z-]*): median \([0-9.]*\) MHz/\1/p')
[ -n "$xor" ] || fail "no median cpu_MHz line"
[ -n "$cyc" ] || fail "no cycle counter line"
within() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= b / 100) }'; }
within "$cyc" 1000 || fail "cycle counter says $cyc MHz, want 1000 (QEMU virtual time)"
within "$xor" "$cyc" || fail "XOR method $xor MHz vs cycle counter $cyc MHz: more than 1% apart"
echo "XOR method $xor MHz, cycle counter $cyc MHz"
