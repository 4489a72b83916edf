# Without the module, EL0 reads of PMCCNTR_EL0 trap on every CPU.
. /tests/lib.sh
[ -d /sys/module/simple_pmu ] && fail "module already loaded"
knobs > $KNOBS
out=$(pmuread all)
echo "$out"
n=$(echo "$out" | grep -c 'result=sigill')
[ "$n" -eq "$(nproc)" ] || fail "expected SIGILL on all $(nproc) CPUs, got $n"
echo "SIGILL on all $n CPUs"
