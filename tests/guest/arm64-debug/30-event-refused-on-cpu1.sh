# perf refuses the module's event on one CPU (debug kernel only): the first slab
# allocation of cpu1's hotplug thread (where the module's online callback creates the
# CPU's events, at load and at each settings write) fails, once. At load: the load
# succeeds; cpu1 says why it stays closed, faults, and is not listed in cpus; cpu0
# reads. At a ring write (the writer's own fault points are 10-failnth-sysfs's): the
# write takes effect, cpu1 is closed and says so; taking cpu1 offline and online again
# brings it back. The unload leaves nothing.
. /tests/lib.sh
fault_setup
pid=$(ps -o pid,comm | awk '$2 == "cpuhp/1" { print $1 }')
[ -n "$pid" ] || fail "no cpuhp/1 thread: $(ps -o pid,comm | grep cpuhp)"
restore() {
	echo 0 > /proc/$pid/make-it-fail
	echo 0 > $FI/failslab/probability
	echo N > $FI/failslab/task-filter
}
trap 'restore; unload' EXIT
arm() {
	echo Y > $FI/failslab/task-filter && echo 100 > $FI/failslab/probability &&
		echo 1 > $FI/failslab/interval && echo 1 > $FI/failslab/times &&
		echo 1 > /proc/$pid/make-it-fail || fail "cannot arm failslab for cpuhp/1"
}
refused() { # WHEN: cpu1 refused once, said so, closed; cpu0 reads
	[ "$(cat $FI/failslab/times)" = 0 ] || fail "$1: no failure was injected in cpuhp/1"
	log=$(log_since | grep 'simple-pmu:')
	has "$log" 'simple-pmu: cpu1: perf refused event 0x11: -12' || fail "$1: cpu1's refusal not said: $log"
	[ "$(cat $SYSFS/cpus)" = 0 ] || fail "$1: cpus is '$(cat $SYSFS/cpus)' with cpu1's event refused"
	out=$(pmuread all)
	has "$out" 'cpu=0 .*result=ok' || fail "$1: cpu0 does not read: $out"
	has "$out" 'cpu=1 .*result=sigill' || fail "$1: cpu1 reads with its event refused: $out"
}
arm
log_mark
modprobe $MOD $EV || fail "load with cpu1's event refused failed: $(log_since | tail -n 3)"
restore
refused "at load"
unload || fail "rmmod with cpu1's event refused"
left_nothing "after the unload"
modprobe $MOD $EV || fail "modprobe failed: $(dmesg | tail -n 3)"
arm
log_mark
echo 3 > $SYSFS/ring || fail "ring write with cpu1's event refused failed: $(log_since | tail -n 3)"
restore
[ "$(cat $SYSFS/ring)" = 3 ] || fail "ring is '$(cat $SYSFS/ring)' after the write"
refused "at a ring write"
echo 0 > /sys/devices/system/cpu/cpu1/online && echo 1 > /sys/devices/system/cpu/cpu1/online ||
	fail "cannot take cpu1 offline and online"
has "$(pmuread all)" 'cpu=1 .*result=ok' || fail "cpu1 does not read after offline/online: $(pmuread all)"
[ "$(cat $SYSFS/cpus)" = 0-1 ] || fail "cpus is '$(cat $SYSFS/cpus)' after cpu1 came back"
unload || fail "rmmod after the ring write"
trap - EXIT
left_nothing "after the unload"
echo "cpu1's event refused (ENOMEM injected in cpuhp/1) at load and at a ring write: each took effect, cpu1 closed and said, cpu0 reads; cpu1 back after offline/online; unloaded clean"
