# Issue 23, no residual values: PMUSERENR.ER lets EL0 read every event counter, not
# only the module's. A counter another perf user released keeps that user's last
# value, so before the module opens access on a CPU it zeroes the counters no event
# holds (as perf does before its own grant), and while access is open it does so at
# every check: before 5.17 perf never takes access back at a release, so nothing else
# would clear them. perfhold's four CPU-wide cycles events count on cpu1, a raw reader
# (pmuraw: mrs of every counter, the 2011 way) must see them there; after perfhold
# exits and two check periods pass, every counter the module does not hold reads 0
# (or faults). Nothing else may hold a counter on cpu1 then (its live count would be
# readable, and rightly not zeroed): these guests run no perf but the tests', and arm64
# uses the PMU for the hard-lockup watchdog only with pseudo-NMIs, which they lack.
. /tests/lib.sh
loaded=
if [ ! -d $SYSFS ]; then
	modprobe $MOD || fail "modprobe $MOD"
	loaded=1
fi
[ "$(cat $CPUDIR/cpu1/online)" = 1 ] || fail "cpu1 is offline: perfhold cannot open its events there"
rm -f /tmp/res.in /tmp/res.out
mkfifo /tmp/res.in /tmp/res.out
perfhold 1 4 on < /tmp/res.in > /tmp/res.out &
hold=$!
exec 3>/tmp/res.in 4</tmp/res.out
# (echo) in a subshell: with perfhold gone, SIGPIPE ends the subshell, not the trap's rmmod.
trap '(echo quit >&3) 2>/dev/null; wait; [ -n "$loaded" ] && rmmod $MOD' EXIT
read -r l <&4
[ "$l" = "opened 4" ] || fail "perfhold: $l"
# cpu1 runs user code for three check periods: perfhold's events count, and the
# module has opened access again after perf withdrew it at their install (5.17+).
pmuspin 1 $(($(cat $SYSFS/recheck_ms) * 3)) >/dev/null
echo state >&3
read -r l <&4
[ "$l" = "running=4 of 4" ] || fail "perfhold's events are not all counting: $l"
N=$(cat $SYSFS/num_counters)
held=" $(cpu_attr 1 cycle_index) $(cpu_attr 1 event_index) "
# unheld LINE: the K=V words of pmuraw's LINE for counters the module does not hold.
unheld() {
	for _kv in $1; do
		case "$held" in *" ${_kv%%=*} "*) continue ;; esac
		echo "$_kv"
	done
}
before=$(pmuraw 1 $N) || fail "pmuraw: $before"
live=$(unheld "$before" | grep -v -e '=0$' -e '=sigill$' | tr '\n' ' ')
[ -n "$live" ] || fail "perfhold's counters not visible on cpu1 (held:$held): $before"
# arm_pmu starts a counting event at 2^31 + 1 and reloads it there: below 2^31,
# someone wrote a counter perf holds for another user.
low=$(echo "$live" | tr ' ' '\n' | awk -F= 'NF == 2 && $2 < 2147483648')
[ -z "$low" ] || fail "perfhold's counters on cpu1 read $(echo $low): below 2^31"
echo quit >&3
wait $hold || fail "perfhold exited $?"
exec 3>&- 4<&-
trap '[ -n "$loaded" ] && rmmod $MOD' EXIT
settle
after=$(pmuraw 1 $N) || fail "pmuraw: $after"
now=" $(cpu_attr 1 cycle_index) $(cpu_attr 1 event_index) "
[ "$now" = "$held" ] || fail "the module's counters on cpu1 moved from$held to$now"
left=$(unheld "$after" | grep -v -e '=0$' -e '=sigill$' | tr '\n' ' ')
[ -z "$left" ] || fail "after perfhold released them, cpu1's counters still read $left(module holds$held; before: $before)"
# has, not '| grep -q': grep leaving at its first match can kill unheld's next echo.
has "$(unheld "$after")" '=0$' || fail "every unheld counter faulted on cpu1: access not open after settle: $after"
kernel_log_clean
echo "cpu1: perfhold's counters read ${live}while it ran; after its release, every counter the module does not hold reads 0 (held:$held)"
