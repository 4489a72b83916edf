# Issue 23 (should-fix): a CPU that is possible but has never been online gets no
# cpuhp callback, so nothing of the module's ran there; its cycle_index and
# event_index must say -1 (no counter), not the 0 of a fresh per-CPU area, which
# names PMEVCNTR0 and would send a reader to whatever counts there. This guest boots
# with maxcpus=1 (pmubuild/guests/guest.py): cpu1 is present and was never brought up.
# Then cpu1 comes online: the module places its events there, and the KVM test after
# this one has its two CPUs.
. /tests/lib.sh
C1=/sys/devices/system/cpu/cpu1
[ -f $C1/online ] || fail "no $C1/online: this guest needs a second, hotpluggable CPU"
trap 'echo 1 > $C1/online 2>/dev/null' EXIT
[ "$(cat $C1/online)" = 0 ] || fail "cpu1 is online: the guest did not boot with maxcpus=1"
modprobe $MOD || fail "modprobe $MOD"
ci=$(cpu_attr 1 cycle_index) ei=$(cpu_attr 1 event_index)
[ "$ci" = -1 ] && [ "$ei" = -1 ] ||
	fail "cpu1, never online: cycle_index '$ci', event_index '$ei' (want -1 and -1)"
[ "$(cpu_attr 1 user_access)" = 0 ] || fail "cpu1, never online: user_access $(cpu_attr 1 user_access)"
c0=$(cpu_attr 0 cycle_index)
[ "$c0" -ge 0 ] || fail "cpu0: cycle_index $c0 with the module loaded"
echo 1 > $C1/online || fail "cannot bring cpu1 online"
# The online callback placed the events on cpu1 and published them.
ci=$(cpu_attr 1 cycle_index) ei=$(cpu_attr 1 event_index)
[ "$ci" -ge 0 ] && [ "$ei" -ge 0 ] || fail "cpu1 online: cycle_index '$ci', event_index '$ei'"
settle
out=$(pmuread 1) || fail "cpu1 online: not readable: $out"
rmmod $MOD || fail "rmmod"
kernel_log_clean
echo "cpu1 never online: cycle_index -1, event_index -1, closed; online: $ci/$ei, readable"
