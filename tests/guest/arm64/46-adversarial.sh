# Issue 22, adversarial: with the module loaded, readers on one CPU while perfchurn, on
# the same CPU, opens and closes per-task perf events on itself and adds and removes pinned
# CPU-wide cycles/instructions events there. C (cycles.h windows, 1000 windows x 1000
# reads = 10^6 reads per path) on the self-monitoring path (thread scope) and on the
# module (CYCLES_SCOPE_CPU_ID); Python measure(scope="thread") and measure(scope="cpu");
# the module's readers with it reloaded at recheck_ms=10 (below).
# No reader dies;
# every window or block is exact (one count, the same each time, under -icount) or
# flagged invalid; the flagged count is printed. measure() is called from Python, and
# the interpreter's work between its reads varies (by a few hundred instructions on
# perf, a few dozen on the driver): there the bound is stated instead (spmu_adv.py,
# PY_SLACK). Self-monitoring needs Linux >= 5.17 and kernel.perf_user_access=1 (set
# here, restored after): SKIP before with the reason.
# One CPU online (cpu0, the others taken offline and put back after): QEMU's instruction
# count is global under -icount, so a second online vCPU's instructions (a timer
# interrupt on cpu0) land in cpu1's windows; with one CPU a valid window is exact.
. /tests/lib.sh
# Loaded here (45 unloads it at its end) and unloaded again after, as 44 and 45 do.
loaded=
if [ ! -d $SYSFS ]; then
	modprobe $MOD || fail "modprobe $MOD"
	loaded=1
fi
[ -d $SYSFS ] || fail "module not loaded: no $SYSFS after modprobe"
CPU=0
PUA=/proc/sys/kernel/perf_user_access
if [ -f $PUA ]; then
	pua0=$(cat $PUA)
	echo 1 > $PUA
fi
churn_pid=
# reloaded: the module runs at recheck_ms=10 (its readers, C and Python, below). At the end
# it is unloaded if 46 loaded it, else loaded again with its defaults (as the guest's
# tests load it), also when a check failed on the way.
reloaded=
trap '[ -n "$churn_pid" ] && kill $churn_pid 2>/dev/null; [ -n "$pua0" ] && echo "$pua0" > $PUA; others_online; if [ -n "$loaded" ]; then unload; elif [ -n "$reloaded" ]; then unload; modprobe $MOD; fi' EXIT
others_offline

# spmu_spin(N) windows: small N keeps TCG time low; 500 pairs = 1000 reads a window.
N=200
out=${TMPDIR:-/tmp}/adv.churn
# run_reader NAME CMD...: runs CMD with perfchurn on $CPU beside it (started: it has
# done one round); CMD's output in $res, its exit status in $rc.
run_reader() {
	_name=$1
	shift
	# Emptied here, not only by the redirection below: that runs in the background
	# child, maybe after the wait loop has found the last run's 'started' (host, loaded).
	: > $out
	perfchurn $CPU > $out 2>&1 &
	churn_pid=$!
	while kill -0 $churn_pid 2>/dev/null && ! grep -q '^started$' $out; do
		sleep 0.1
	done
	grep -q '^started$' $out || fail "$_name: perfchurn did not start: $(cat $out)"
	res=$("$@" 2>&1)
	rc=$?
	kill -0 $churn_pid 2>/dev/null || fail "$_name: perfchurn stopped early: $(cat $out)"
	kill -TERM $churn_pid
	wait $churn_pid
	crc=$?
	churn_pid=
	[ $crc = 0 ] || fail "$_name: perfchurn exited $crc: $(cat $out)"
	churn=$(grep -v '^started$' $out)
	# The churn must have run while the reader read: events opened, pinned ones too.
	case "$churn" in
	"rounds="*" task="*" pinned="*) ;;
	*) fail "$_name: perfchurn said: $churn" ;;
	esac
	_p=${churn##*pinned=}
	[ "$_p" -gt 0 ] || fail "$_name: perfchurn opened no pinned CPU-wide event: $churn"
	[ $rc -le 3 ] || fail "$_name died (exit status $rc: a signal?): $res"
	[ $rc = 1 ] && fail "$_name: $res"
	[ $rc = 2 ] && fail "$_name: usage or setup error: $res"
}

# C, self-monitoring (thread scope).
run_reader "advreader thread" advreader $CPU thread $N 1000 500
if [ $rc = 3 ]; then
	[ -f $PUA ] && fail "Linux >= 5.17 with perf_user_access=1, yet: $res"
	echo "SKIP (C, thread scope, Linux < 5.17): $res"
else
	echo "C thread: $res; churn: $churn"
fi

# Python: each measure() is two reads; fewer blocks, as Python under TCG is slow.
# run_python SCOPE: measure(scope=SCOPE) blocks beside perfchurn.
run_python() {
	run_reader "measure(scope=$1)" python3 /tests/py/spmu_adv.py $CPU $1 1000 300
}
run_python thread
if [ $rc = 3 ]; then
	[ -f $PUA ] && fail "Linux >= 5.17 with perf_user_access=1, yet: $res"
	echo "SKIP (Python, thread scope, Linux < 5.17): $res"
else
	echo "Python thread: $res; churn: $churn"
fi

# The module's readers run with it reloaded at recheck_ms=10. perf withdraws access at
# each switch to or from perfchurn and the module's timer gives it back while the reader
# runs: at the default 100 the re-grants can fall in step with the switches, each
# withdrawn at once (trixie: 0 of 18000 reads in 1 s in one of three runs beside
# perfchurn), and every block would be flagged: honest, but nothing judged. And the C
# reader's reads fault while access is withdrawn (a SIGILL each, which the guard
# skips): ~55 s of TCG time at 100 (bookworm: 822 of 1000 windows flagged), a few at 10.
unload || fail "unload before reloading it with recheck_ms=10"
reloaded=1
modprobe $MOD recheck_ms=10 || fail "modprobe $MOD recheck_ms=10"
[ "$(cat $SYSFS/recheck_ms)" = 10 ] ||
	fail "recheck_ms is $(cat $SYSFS/recheck_ms) after modprobe recheck_ms=10"

# C, the module (CPU scope).
run_reader "advreader cpu" advreader $CPU cpu $N 1000 500
[ $rc = 3 ] && fail "module loaded, yet advreader cpu: $res"
echo "C cpu: $res; churn: $churn"

# Python, scope "cpu" (the module): waits for reads by spinning and starts the block on
# one path; a block the thread was switched out in is not exact (perfchurn's work is in
# the CPU's counts: seen on sid, 4537 for a 4464 loop).
run_python cpu
[ $rc = 3 ] && fail "module loaded, yet measure(scope=cpu): $res"
# From 5.17 the module's readings are exact: some block must have been judged.
if [ -f $PUA ]; then
	case "$res" in
	*" valid=0 "*) fail "measure(scope=cpu): no exact block to judge: $res" ;;
	esac
fi
echo "Python cpu: $res; churn: $churn"
kernel_log_clean
