# When perf cannot place the driver's pinned events (seven pinned CPU-wide perf
# events hold PMCCNTR and all six event counters of cpu1), they go to ERROR without
# a word from perf: the driver says so (one line, cycle_index -1), keeps user
# access closed there (SIGILL, not someone else's counter), serves the other CPU,
# and, once perf's events are gone, has perf schedule its own again by itself
# (perf_event_enable() from a work item, at most once a second).
. /tests/lib.sh
[ -d /sys/module/simple_pmu ] && rmmod $MOD
rm -f /tmp/ctl.in /tmp/ctl.out
mkfifo /tmp/ctl.in /tmp/ctl.out
perfhold 1 7 on < /tmp/ctl.in > /tmp/ctl.out &
exec 3>/tmp/ctl.in 4</tmp/ctl.out
read -r l <&4; [ "$l" = "opened 7" ] || fail "perfhold: $l"
echo state >&3; read -r l <&4; [ "$l" = "running=7 of 7" ] || fail "perfhold: $l"
log_mark
modprobe $MOD || fail "modprobe"
line=$(log_since | grep 'simple-pmu: cpu1: not every event' | head -n 1)
[ -n "$line" ] || fail "no line about cpu1's events: $(log_since | tail -n 3)"
[ "$(published 1 0)" = -1 ] || fail "cpu1 cycle_index $(published 1 0), want -1"
[ "$(cat $SYSFS/cpus)" = 0 ] || fail "cpus $(cat $SYSFS/cpus), want 0"
[ "$(cpu_attr 1 user_access)" = 0 ] || fail "cpu1/user_access $(cpu_attr 1 user_access) with nothing placed"
[ "$(cpu_attr 0 user_access)" = 1 ] || fail "cpu0/user_access $(cpu_attr 0 user_access), want 1"
[ "$(cpu_attr 1 conflicts)" -ge 1 ] || fail "cpu1/conflicts $(cpu_attr 1 conflicts): the ERROR state was not counted"
[ "$(cpu_attr 0 conflicts)" = 0 ] || fail "cpu0/conflicts $(cpu_attr 0 conflicts) on a quiet CPU"
out=$(pmuread 1)
has "$out" result=sigill || fail "cpu1 readable with no counters placed: $out"
pmuread 0 >/dev/null || fail "cpu0 not readable"
echo quit >&3; wait
exec 3>&- 4<&-
# perf leaves a pinned event in ERROR when counters free up; the driver asks
# again (cpu1 kept busy so its deferrable timer runs): placed within 2.5 s.
g=$(cpu_attr 1 generation)
t=0
while [ "$(published 1 0)" != 31 ] && [ $t -lt 5 ]; do
	pmuspin 1 500 >/dev/null
	t=$((t + 1))
done
[ "$(published 1 0)" = 31 ] || fail "cpu1 cycle_index $(published 1 0) 2.5 s after perf's events went: not revived"
[ "$(cpu_attr 1 generation)" != "$g" ] || fail "placed again but generation stayed $g"
[ "$(cat $SYSFS/cpus)" = 0-1 ] || fail "cpus $(cat $SYSFS/cpus) after the revival"
[ "$(cpu_attr 1 user_access)" = 1 ] || fail "cpu1/user_access $(cpu_attr 1 user_access) after the revival"
# perf's released events (perfhold's exit) leave RCU and kworker work on cpu0, which
# QEMU's global instruction count would put into cpu1's windows: let it finish.
settle
x=$(pmuwin_exact 1) || fail "after the revival: $x"
rmmod $MOD || fail "rmmod"
kernel_log_clean
echo "ERROR state reported (${line#*] }), cpu1 closed, placed again by itself within $((t * 500)) ms, reads exact"
