# Another pinned CPU-wide perf event, opened before simple-pmu loads and enabled
# after, is older than the driver's and perf schedules it first: it takes
# PMCCNTR_EL0 on cpu1 and the driver's events move. The driver publishes the new
# counters with a new generation, and reads of them are exact.
. /tests/lib.sh
rmmod $MOD || fail "rmmod"
rm -f /tmp/ctl.in /tmp/ctl.out
mkfifo /tmp/ctl.in /tmp/ctl.out
perfhold 1 1 off < /tmp/ctl.in > /tmp/ctl.out &
exec 3>/tmp/ctl.in 4</tmp/ctl.out
trap 'echo quit >&3; wait' EXIT
read -r l <&4; [ "$l" = "opened 1" ] || fail "perfhold: $l"
modprobe $MOD || fail "modprobe"
c0=$(published 1 0) e0=$(published 1 1) g0=$(cpu_attr 1 generation)
k0=$(cpu_attr 1 conflicts)
[ "$c0" = 31 ] || fail "before: cycles on $c0, want 31"
echo enable >&3; read -r l <&4; [ "$l" = ok ] || fail "perfhold enable: $l"
echo state >&3; read -r l <&4; [ "$l" = "running=1 of 1" ] || fail "perfhold's event not counting: $l"
# The driver notices at its next check (cpu1 busy: within recheck_ms).
pmuspin 1 $(($(cat $SYSFS/recheck_ms) * 3)) >/dev/null
c1=$(published 1 0) e1=$(published 1 1) g1=$(cpu_attr 1 generation)
[ "$c1" != 31 ] && [ "$c1" -ge 0 ] || fail "after: cycles on '$c1', want an event counter (perf's event holds PMCCNTR)"
[ "$g1" != "$g0" ] || fail "placement changed ($c0/$e0 -> $c1/$e1) but generation stayed $g0"
[ "$(cpu_attr 1 conflicts)" -gt "$k0" ] || fail "cycles moved but cpu1/conflicts stayed $k0"
[ "$(cat $SYSFS/cpus)" = "0-1" ] || fail "cpus $(cat $SYSFS/cpus) after the move"
x=$(pmuwin_exact 1) || fail "after: $x"
echo quit >&3; wait
trap - EXIT
# Writing the same events again changes nothing (the counters held are kept);
# a reload places new events as on a quiet CPU (later tests read PMCCNTR).
echo 0x8 > $SYSFS/events || fail "rewriting events"
[ "$(published 1 0)" = "$c1" ] || fail "rewriting the same events moved cycles from $c1 to $(published 1 0)"
rmmod $MOD && modprobe $MOD || fail "reload"
[ "$(published 1 0)" = 31 ] || fail "cycles on $(published 1 0) after the reload"
settle
echo "cpu1: cycles $c0 -> $c1, instructions $e0 -> $e1, generation $g0 -> $g1; reads of the new counters exact"
