# Instructions retired per read of every read path, counted by the driver's own
# instruction counter (readbench --insns: that counter read raw around 100 reads, minus the
# same loop without a read; the least of 7 windows). Under -icount shift=0 QEMU's count
# is global: what another vCPU executes while cpu0 counts lands in cpu0's window. The
# other CPUs are taken offline for the measurement (others_offline): cpu0 then runs
# alone, and two runs must print the same figures, except clock_gettime's (the vDSO's,
# see measure() below). ring=2 counts EL0 only; ring=3 (written for this test,
# 2 restored after) also EL1, the kernel share of perf read(2). The perf mmap read
# needs kernel.perf_user_access=1 (5.17+, set here, restored after); where the sysctl
# does not exist (5.10) that path must say why instead, and so must cycles.h's
# self-monitoring paths (selfmon: cycles_read() outside a window; window:
# cycles_window_read(); window-fixed: cycles_window_read_fixed()).
# The issue-22 goal "inside a window, <= 1.2x the bare mrs" is about the fixed read:
# window-cpu-fixed (module path, its cycles on PMCCNTR_EL0) from the ring=3 figures, and
# window-fixed (perf self-monitoring), which needs this thread's cycles event on
# PMCCNTR_EL0: the module holds that register while loaded, so the self-monitoring
# paths are measured again after rmmod, counted by a perf instructions event of
# readbench's own thread (EL0; instrument=perf), the other CPUs offline again.
# On Linux >= 6.1 a fixed read above 1.2x the bare mrs, or one that did not run, FAILS
# (the counts are exact); on 5.10 the figures are printed only (no
# kernel.perf_user_access: window-fixed must say why it cannot run). The other goals
# (docs/benchmarks.md) are printed, met or not, from the ring=3 figures; not met does not
# fail. What also fails: a path that should run and did not, two runs that differ, and a
# window path whose window did not hold in either run (its figure would belong to a
# counter that moved).
# It runs after 40-unload: it loads the module and unloads it again.
. /tests/lib.sh
[ -d $SYSFS ] && fail "module loaded before this test (40-unload unloads it)"
modprobe $MOD || fail "modprobe $MOD"
PUA=/proc/sys/kernel/perf_user_access
ring0=$(cat $SYSFS/ring)
pua0=""
[ -f $PUA ] && pua0=$(cat $PUA)
restore() {
	others_online
	[ -d $SYSFS ] && echo "$ring0" > $SYSFS/ring
	[ -z "$pua0" ] || echo "$pua0" > $PUA
}
trap 'restore; [ ! -d $SYSFS ] || rmmod $MOD' EXIT
[ -z "$pua0" ] || echo 1 > $PUA || fail "cannot set $PUA to 1"
want="driver window-cpu window-cpu-fixed bare cntvct clock_gettime perf-read"
[ -n "$pua0" ] && want="$want perf-mmap selfmon window"
# Linux major * 1000 + minor: the fixed read's goal must hold from 6.1.
noself=""
kver=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')

others_offline

# measure RING [WANT]: two runs at that ring (self: without the module), the same
# figures, the paths WANT (default $want) ran; the result in $out.
measure() {
	if [ "$1" != self ]; then
		echo "$1" > $SYSFS/ring || fail "cannot set ring=$1"
		settle
	fi
	out=$(readbench --insns --cpu 0) || fail "readbench --insns (ring=$1) exit $?: $out"
	again=$(readbench --insns --cpu 0) || fail "readbench --insns (ring=$1) exit $?: $again"
	echo "$out"
	# The figures, without window_valid (checked below: it may differ between runs), and
	# without clock_gettime: its count varied between runs on sid 7.2 (53, then 63 per
	# read, every window of the second run), the cause not established; the vDSO has
	# parts whose count depends on when the read is made (its seqlock retry, the
	# subtracting loop of __iter_div_u64_rem() in lib/vdso/gettimeofday.c). It is not
	# ours: both runs' figures are printed, and bound: the larger at most 1.5 times the
	# smaller (53 vs 63 is 1.19x; a read gone wrong, e.g. a syscall fallback of hundreds
	# of instructions, is far outside).
	a=$(echo "$out" | grep '^path=' | grep -v '^path=clock_gettime ' | sed 's/ window_valid=.$//')
	b=$(echo "$again" | grep '^path=' | grep -v '^path=clock_gettime ' | sed 's/ window_valid=.$//')
	ga=$(echo "$out" | sed -n 's/^path=clock_gettime .* per_read=\([0-9.-]*\).*$/\1/p')
	gb=$(echo "$again" | sed -n 's/^path=clock_gettime .* per_read=\([0-9.-]*\).*$/\1/p')
	[ "$ga" = "$gb" ] || echo "ring=$1: clock_gettime $ga, then $gb instructions per read"
	[ -z "$ga$gb" ] || awk -v a="$ga" -v b="$gb" 'BEGIN { lo = a < b ? a : b; hi = a < b ? b : a;
		exit !(lo > 0 && hi <= 1.5 * lo) }' ||
		fail "ring=$1: clock_gettime $ga, then $gb instructions per read: beyond 1.5x"
	# The failing line itself names the lines that differ (a run's summary shows it).
	[ "$a" = "$b" ] || fail "ring=$1: the counts differ between two runs: first" \
		"$(echo "$a" | grep -vxF "$b" | tr '\n' ';') second $(echo "$b" | grep -vxF "$a" | tr '\n' ';')"
	for p in ${2:-$want}; do
		has "$out" "^path=$p " || fail "ring=$1: path $p did not run: $out"
	done
	for p in perf-mmap selfmon window window-fixed; do
		has "$out" "^unavailable path=$p reason=." || [ -n "$pua0" ] ||
			fail "$p neither ran nor said why: $out"
	done
	# A window that never held: nothing says what its reads were. A switch to another
	# task on this lone CPU inside the window (a kworker, a timer's wake-up) invalidates
	# it: on sid 7.2 one run in two or three, with or without let-in threads. Up to 3
	# more runs, each with the same figure, until one holds.
	for p in window window-cpu window-fixed window-cpu-fixed; do
		has "$out" "^path=$p " || continue
		held=""
		has "$out" "^path=$p .*window_valid=1" ||
			has "$again" "^path=$p .*window_valid=1" && held=1
		fig=$(echo "$out" | grep "^path=$p " | sed 's/ window_valid=.$//')
		tries=2
		while [ -z "$held" ] && [ $tries -lt 5 ]; do
			more=$(readbench --insns --cpu 0) || fail "readbench --insns (ring=$1) exit $?: $more"
			line=$(echo "$more" | grep "^path=$p ")
			tries=$((tries + 1))
			[ "${line% window_valid=?}" = "$fig" ] ||
				fail "ring=$1: run $tries: '$line', the first: '$fig'"
			has "$line" 'window_valid=1' && held=1
		done
		[ -n "$held" ] || fail "ring=$1: the $p window was invalid in all $tries runs: $out"
		[ $tries -eq 2 ] || echo "ring=$1: the $p window held only in run $tries"
	done
}
per_read() { # PATH: instructions per read in $out
	echo "$out" | sed -n "s/^path=$1 .* per_read=\([0-9.-]*\).*$/\1/p"
}
measure 2
r2=$out
measure 3
r3=$out
restore
# Without the module: PMCCNTR_EL0 is free for this thread's cycles event.
rmmod $MOD || fail "rmmod $MOD"
if [ -n "$pua0" ]; then
	echo 1 > $PUA || fail "cannot set $PUA to 1"
	others_offline
	measure self "bare cntvct clock_gettime perf-read perf-mmap selfmon window window-fixed"
	rself=$out
	restore
fi
out=$r3
# goal NAME A B MAX-OR-MIN: print the figure A/B and whether it meets the bound.
goal() {
	awk -v n="$1" -v a="$2" -v b="$3" -v op="$4" -v bound="$5" 'BEGIN {
		if (b <= 0) { printf "goal %s: no figure (%s / %s)\n", n, a, b; exit }
		r = a / b
		met = (op == "<=") ? (r <= bound) : (r >= bound)
		printf "goal %s %s %s: %.2f (%s / %s) %s\n", n, op, bound, r, a, b,
			met ? "met" : "NOT met"
	}'
}
# fixed NAME A B: the fixed read's goal, which must hold on Linux >= 6.1.
fixed() {
	g=$(goal "$1" "$2" "$3" "<=" 1.2)
	echo "$g"
	case "$g" in
	*") met") ;;
	*) [ "$kver" -lt 6001 ] || fail "$g, on Linux $(uname -r) (>= 6.1)" ;;
	esac
}
d=$(per_read driver)
bare=$(per_read bare)
fixed "window-cpu-fixed/bare" "$(per_read window-cpu-fixed)" "$bare"
if [ -n "$pua0" ]; then
	out=$rself
	fixed "window-fixed/bare (no module)" "$(per_read window-fixed)" "$(per_read bare)"
	goal "window/bare (no module: cycles on PMCCNTR_EL0)" "$(per_read window)" \
		"$(per_read bare)" "<=" 1.2
	noself="without the module (EL0, instrument=perf) per read: $(echo "$out" |
		sed -n 's/^path=\([^ ]*\) .*per_read=\([0-9.-]*\).*/\1=\2/p' | tr '\n' ' ')"
	echo "$noself"
	out=$r3
fi
goal "window-cpu/bare" "$(per_read window-cpu)" "$bare" "<=" 1.2
[ -n "$pua0" ] && goal "window/bare" "$(per_read window)" "$bare" "<=" 1.2
goal "driver/bare" "$d" "$bare" "<=" 1.2
goal "perf-read/driver" "$(per_read perf-read)" "$d" ">=" 10
[ -n "$pua0" ] && goal "perf-mmap/driver" "$(per_read perf-mmap)" "$d" ">=" 3
[ -n "$pua0" ] && echo "selfmon (cycles_read() outside a window) per read: $(per_read selfmon)" \
	"(bare: $bare)"
echo "ring=2 (EL0) per read: $(echo "$r2" | sed -n 's/^path=\([^ ]*\) .*per_read=\([0-9.-]*\).*/\1=\2/p' | tr '\n' ' ')"
# The last line is what a passing run's summary shows: the module's figures, then these.
echo "ring=3 (EL0+EL1) per read: $(echo "$out" | sed -n 's/^path=\([^ ]*\) .*per_read=\([0-9.-]*\).*/\1=\2/p' | tr '\n' ' ')${noself:+| $noself}"
