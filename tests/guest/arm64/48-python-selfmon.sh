# simple_pmu without the module (after 40-unload): measure()'s default is perf
# self-monitoring of the calling thread. With kernel.perf_user_access=1 (5.17+; set here,
# restored after) through the mmap page (perf-rdpmc), before 5.17 through read(2)
# (perf-read): known_loop(n) counts 2n plus a bounded overhead on every run, in each of
# two threads and in a forked child, as root and as an unprivileged user under
# perf_event_paranoid 2; with paranoid 3 the unprivileged reason names the sysctl and
# the module.
. /tests/lib.sh
[ -d $SYSFS ] && fail "module loaded before this test (40-unload unloads it)"
PUA=/proc/sys/kernel/perf_user_access
PARANOID=/proc/sys/kernel/perf_event_paranoid
par0=$(cat $PARANOID)
if [ -f $PUA ]; then
	pua0=$(cat $PUA)
	trap 'others_online; echo "$pua0" > $PUA; echo "$par0" > $PARANOID' EXIT
	echo 1 > $PUA
	want=perf-rdpmc
else
	trap 'others_online; echo "$par0" > $PARANOID' EXIT
	want=perf-read
fi
# One CPU: QEMU's instruction count is global under -icount (lib.sh).
others_offline
python3 /tests/py/spmu_check.py selfmon $want || fail "root"
echo 2 > $PARANOID
out=$(runas 65534 python3 /tests/py/spmu_check.py selfmon $want) ||
	fail "uid 65534, paranoid 2: $out"
echo "uid 65534, paranoid 2: $(echo "$out" | head -n1)"
# paranoid 3 (Linux >= 5.17): the reason names the sysctl, its remedy the sysctl and
# the module. Before 5.17 the first reason is the missing perf_user_access (43 checks
# cycles.h says so): not judged here.
if [ -f $PUA ]; then
	echo 3 > $PARANOID
	out=$(runas 65534 python3 /tests/py/spmu_check.py selfmon-refused) ||
		fail "uid 65534, paranoid 3: $out"
	echo "$out"
fi
