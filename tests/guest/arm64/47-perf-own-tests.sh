# Issue 22: perf's own self-monitoring programs are not disturbed by the module or by
# our readers sharing their CPU. Debian's perf of this kernel's suite (linux-perf, put in
# the guest by pmubuild/guests/perfguest.py) runs its own tests "User space counter reading of
# instructions" and "... of cycles" (tools/perf/tests/mmap-basic.c: an event with
# config1 bit 1 under kernel.perf_user_access=1, read with mrs through libperf's
# perf_mmap__read_self() under perf's own EL0 grant), pinned to the readers' CPU:
#  a) the module loaded, nothing else running;
#  b) one CPU online: perf, the cycles.h window readers (advreader: self-monitoring and
#     the module) and simple_pmu.measure() loops (both scopes) on cpu0, while the
#     module's sysfs (user_access, ring, events) is rewritten there;
#  c) two CPUs online: perf and the C readers on cpu1, the sysfs writes and an unload
#     and load of the module from cpu0: the case where the module's cross-CPU calls
#     reach perf's CPU while its test reads (the reported bug: perf's programs killed by
#     a sysfs write).
# Every perf run must report Ok for both subtests: Skip, FAILED, a missing line or a
# nonzero exit fails (perf test exits 0 even for a test it does not know, so the lines
# decide). No reader may die. In (b) every self-monitoring window is exact or flagged
# (one CPU: QEMU's count is exact). The module's CPU-wide counters count every program
# on the CPU, and perf and Python share it here: a module window the reader was
# preempted in counts their instructions too and is still valid (seen: 10481884
# instructions in a window of a 418-instruction loop), so there a valid window must
# count at least the loop (ADV_AT_LEAST, advreader.c and spmu_adv.py; the surplus is
# printed as over=). measure(scope="thread") is held to it too: its ok blocks differed
# by a few instructions here (13146, then 13120 for known_loop(1000)), which the C
# self-monitoring reader's do not (an open question for issue 22). In (c) QEMU's global instruction count lets cpu0's work into cpu1's
# windows, so every path is held to ADV_AT_LEAST.
# Not run: libperf's own tests/test-evsel.c (test_stat_user_read): Debian ships neither
# libperf as a package nor its tests (perf links libperf statically).
. /tests/lib.sh
if [ -f /tests/data/perf.skip ]; then
	echo "SKIP: $(cat /tests/data/perf.skip)"
	exit 77
fi
command -v perf > /dev/null || fail "no perf in this guest, and no tests/data/perf.skip saying why"
PUA=/proc/sys/kernel/perf_user_access
if [ ! -f $PUA ]; then
	echo "SKIP: Linux $(uname -r) has no kernel.perf_user_access (before 5.17): perf's user reads cannot run on arm64"
	exit 77
fi
TESTS="User space counter reading"
list=$(perf test list 2>&1) || fail "perf test list: $list"
for what in instructions cycles; do
	has "$list" -E "^ *[0-9.]+: $TESTS of $what\$" ||
		fail "$(cat /opt/perf/VERSION): no test '$TESTS of $what' in perf test list: $list"
done

W=${TMPDIR:-/tmp}/perfown
rm -rf $W
mkdir -p $W
STOP=$W/stop
pua0=$(cat $PUA)
loaded0=
[ -d $SYSFS ] && loaded0=1
bgpids=
restore() {
	touch $STOP
	for _p in $bgpids; do wait $_p 2>/dev/null; done
	echo "$pua0" > $PUA
	if [ -d $SYSFS ]; then
		echo 1 > $SYSFS/user_access
		echo 2 > $SYSFS/ring
		echo 0x8 > $SYSFS/events
	fi
	if [ -n "$loaded0" ]; then
		[ -d $SYSFS ] || modprobe $MOD
	else
		[ -d $SYSFS ] && unload
	fi
	others_online
}
trap restore EXIT
echo 1 > $PUA
[ -d $SYSFS ] || modprobe $MOD || fail "modprobe $MOD"
[ -d $SYSFS ] || fail "module not loaded"

# perf_own PHASE CPU: perf's two user-read tests on CPU; both must say Ok.
runs=0
perf_own() {
	_o=$(taskset -c $2 perf test "$TESTS" 2>&1)
	_rc=$?
	# Colour and cursor codes, in case perf decides the output is a terminal.
	_o=$(echo "$_o" | tr -d '\033\r' | sed 's/\[[0-9;]*[A-Za-z]//g')
	[ $_rc = 0 ] || fail "$1: perf test exited $_rc: $_o"
	# A subtest's verdict follows its name and a colon ("Skip (permissions)",
	# "FAILED!"); perf 7.x adds a summary ("Skipped tests     : 0", "Failed tests : 0").
	echo "$_o" | grep -E ": *(FAILED|[Ss]kip)" &&
		fail "$1: perf's own test did not pass: $_o"
	echo "$_o" | grep -E "^(Failed|Skipped) tests *: *[1-9]" &&
		fail "$1: perf's own test did not pass: $_o"
	for _what in instructions cycles; do
		has "$_o" -E "^ *[0-9.]+: $TESTS of $_what +: Ok *\$" ||
			fail "$1: no Ok from perf's '$TESTS of $_what': $_o"
	done
	runs=$((runs + 1))
}

# in_loop LOG CMD...: in the background, CMD again and again until $STOP exists; one
# line "rc=N output" per run in LOG.
in_loop() {
	_log=$1
	shift
	(
		while [ ! -f $STOP ]; do
			_r=$("$@" 2>&1)
			echo "rc=$? $_r" >> $_log
		done
	) &
	bgpids="$bgpids $!"
}

# stop_all: ends the loops (each finishes its run) and waits for them.
stop_all() {
	touch $STOP
	for _p in $bgpids; do wait $_p; done
	bgpids=
	rm -f $STOP
}

# judge NAME LOG MAY_SKIP: the reader's runs. None died (exit status above 3: a
# signal) or failed (1: a valid window with another count; 2: setup); only if MAY_SKIP,
# 3 (its path not available at setup: the module closed or unloaded by the writer) and
# runs whose every window was flagged; at least one run reported valid windows.
# Prints the totals.
judge() {
	[ -s "$2" ] || fail "$1: never ran"
	_bad=$(grep -vE "^rc=0 path=|^rc=0 scope=" "$2" | grep -vE "^rc=3 SKIP|^rc=1 FAIL: .*: no valid window in" | head -n 3)
	[ -z "$_bad" ] || fail "$1: $_bad"
	[ "$3" = 1 ] || ! grep -qE "^rc=3|no valid window" "$2" || fail "$1: $(grep -m 1 -E '^rc=3|no valid window' "$2")"
	_ok=$(grep -c "^rc=0" "$2")
	[ "$_ok" -gt 0 ] || fail "$1: no run got its path: $(head -n 1 "$2")"
	_sum=$(awk '/^rc=0/ { for (i = 2; i <= NF; i++) { split($i, kv, "=");
		if (kv[1] == "valid" || kv[1] == "flagged" || kv[1] == "over") t[kv[1]] += kv[2] } }
		END { printf "valid=%d flagged=%d", t["valid"], t["flagged"];
		if ("over" in t) printf " over=%d", t["over"] }' "$2")
	echo "$1: $_ok runs ($(grep -c '^rc=3' "$2") without the path), $_sum"
}

# writer LOG RELOAD PAUSE: rewrites the module's sysfs until $STOP exists, sleeping PAUSE
# seconds between rounds (with RELOAD=1 it unloads and loads the module every third
# round); counts rounds in LOG.
writer() {
	(
		_n=0
		while [ ! -f $STOP ]; do
			for _v in "user_access 0" "user_access 1" "ring 3" "ring 2" \
				"events 0x8,0x11" "events 0x8"; do
				echo ${_v#* } > $SYSFS/${_v% *} 2>/dev/null
			done
			_n=$((_n + 1))
			if [ "$2" = 1 ] && [ $((_n % 3)) = 0 ]; then
				unload && modprobe $MOD && echo reload >> $1
			fi
			echo round >> $1
			[ "$3" = 0 ] || sleep $3
		done
	) &
	bgpids="$bgpids $!"
}

# toggler LOG: user_access 0 and 1 again and again until $STOP exists (each write runs
# the module's access change on every CPU: the path of the reported bug); LOG gets a
# line per 50 pairs.
toggler() {
	(
		_n=0
		while [ ! -f $STOP ]; do
			echo 0 > $SYSFS/user_access 2>/dev/null
			echo 1 > $SYSFS/user_access 2>/dev/null
			_n=$((_n + 1))
			[ $((_n % 50)) = 0 ] && echo 50 >> $1
		done
	) &
	bgpids="$bgpids $!"
}

# a) Alone, the module loaded.
perf_own "a (module loaded)" 0
echo "a: perf's user-read tests Ok beside the module"

# b) One CPU: perf, the readers and the writer on cpu0.
others_offline
in_loop $W/b-thr advreader 0 thread 200 100 100
in_loop $W/b-cpu env ADV_AT_LEAST=1 advreader 0 cpu 200 100 100
in_loop $W/b-pythr env ADV_AT_LEAST=1 python3 /tests/py/spmu_adv.py 0 thread 1000 40
in_loop $W/b-pycpu env ADV_AT_LEAST=1 python3 /tests/py/spmu_adv.py 0 cpu 1000 40
writer $W/b-writes 0 0.1
for i in 1 2 3; do
	perf_own "b (one CPU, readers and sysfs writes, run $i)" 0
done
stop_all
echo "b: perf's tests Ok in 3 runs beside readers and $(grep -c round $W/b-writes) rounds of sysfs writes"
judge "b advreader thread" $W/b-thr 0
judge "b advreader cpu" $W/b-cpu 1
judge "b measure(thread)" $W/b-pythr 0
judge "b measure(cpu)" $W/b-pycpu 1
others_online

# c) Two CPUs: perf and the readers on cpu1, the writer (and the shell) on cpu0.
[ -d $CPUDIR/cpu1 ] || fail "no cpu1 for phase c"
taskset -p 1 $$ > /dev/null || fail "cannot pin the script to cpu0"
ADV_AT_LEAST=1
export ADV_AT_LEAST
in_loop $W/c-thr advreader 1 thread 200 100 100
in_loop $W/c-cpu advreader 1 cpu 200 100 100
writer $W/c-writes 1 0.1
# perf's reads in one run span a few ms of the guest's time: a write that cleared
# perf's grant on its CPU (the reported bug; injected by hand, it was not caught with
# the writer alone) must land there, hence writes without pause.
toggler $W/c-toggles
for i in 1 2 3; do
	perf_own "c (perf on cpu1, sysfs writes and module reloads from cpu0, run $i)" 1
done
stop_all
[ "$(grep -c round $W/c-writes)" -gt 0 ] || fail "c: the writer made no round"
echo "c: perf's tests Ok in 3 runs beside readers, $(grep -c round $W/c-writes) rounds of sysfs writes, $(grep -c reload $W/c-writes) reloads and $(($(grep -c . $W/c-toggles) * 50)) user_access 0/1 pairs"
judge "c advreader thread" $W/c-thr 0
judge "c advreader cpu" $W/c-cpu 1
[ -d $SYSFS ] || fail "module not loaded after the reloads"
kernel_log_clean
echo "perf's user-read tests ($(cat /opt/perf/VERSION)) Ok in $runs runs: alone, beside readers on one CPU, and across CPUs with sysfs writes and reloads"
