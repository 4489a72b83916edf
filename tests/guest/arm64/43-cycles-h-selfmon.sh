# include/cycles.h without the module (it runs after 40-unload): its default path is
# perf self-monitoring of the calling thread. With kernel.perf_user_access=1 (5.17+;
# set here, restored after) a known loop counts exactly the same on every run, in each
# of two threads and in a forked child, as root and as an unprivileged user under
# perf_event_paranoid 2; with paranoid 3 the unprivileged reason names the sysctl and
# the module; with perf_user_access 0 the reads go through read(2); the 2011 tcyc.c,
# unmodified, runs on it. Before 5.17 (5.10) the reason must say why.
. /tests/lib.sh
[ -d $SYSFS ] && fail "module loaded before this test (40-unload unloads it)"
PUA=/proc/sys/kernel/perf_user_access
PARANOID=/proc/sys/kernel/perf_event_paranoid
if [ ! -f $PUA ]; then
	out=$(selfmon path)
	echo "$out"
	case "$out" in
	*"path=2 "*|*"path=0 "*) ;;
	*) fail "Linux < 5.17 without the module: $out" ;;
	esac
	has "$out" "note=.*Linux >= 5.17.*perf_user_access=1" ||
		fail "the note does not say why there are no user reads: $out"
	exit 0
fi
pua0=$(cat $PUA)
par0=$(cat $PARANOID)
trap 'others_online; echo "$pua0" > $PUA; echo "$par0" > $PARANOID' EXIT

# perf_user_access 0: perf grants no EL0 reads; without the module, read(2).
echo 0 > $PUA
out=$(selfmon path)
has "$out" "^path=2 name=perf self-monitoring (read(2)) .*note=.*perf_user_access=1" ||
	fail "pua 0: $out"
echo 1 > $PUA
out=$(selfmon path)
has "$out" "^path=1 name=perf self-monitoring (user read) .* note=none" ||
	fail "pua 1: $out"
echo "$out"

# One CPU: QEMU's instruction count is global under -icount (lib.sh).
others_offline
# spmu_spin(n) is 2n instructions plus a few around the loop: the same on every run.
counts() { # N: five windows, one count
	_c=$(selfmon exact $1 5) || fail "selfmon exact $1: $_c"
	_u=$(echo "$_c" | sort -u)
	[ "$(echo "$_u" | grep -c .)" = 1 ] || fail "spmu_spin($1) counted differently: $(echo $_c)"
	echo "$_u"
}
small=$(counts 1000)
large=$(counts 101000)
[ "$small" -ge 2000 ] && [ "$small" -lt 2064 ] || fail "spmu_spin(1000): $small instructions"
[ $((large - small)) -eq 200000 ] || fail "spmu_spin: $small and $large, not 200000 apart"
echo "windows: spmu_spin(1000) = $small, spmu_spin(101000) = $large on every run"

# The 2011 names, no window: exact as well (the reads retry on perf's lock).
p1=$(selfmon plain 1000) && p2=$(selfmon plain 101000) || fail "selfmon plain: $p1 $p2"
[ $((p2 - p1)) -eq 200000 ] || fail "insn_retired(): $p1 and $p2, not 200000 apart"
echo "insn_retired(): $p1 and $p2"

# Two threads on the one CPU, each its own count; a forked child its own.
out=$(selfmon threads 1000 101000) || fail "threads: $out"
[ "$out" = "t1=$small t2=$large" ] || fail "two threads: $out, want t1=$small t2=$large"
echo "two threads: $out"
out=$(selfmon fork 1000) || fail "fork: $out"
[ "$out" = "child=$small path=1" ] || fail "forked child: $out, want child=$small path=1"
echo "forked child: $out"

# Unprivileged: paranoid 2 allows self-monitoring of user space; 3 refuses it.
echo 2 > $PARANOID
out=$(runas 65534 selfmon exact 1000 2) || fail "uid 65534, paranoid 2: $out"
[ "$(echo "$out" | sort -u)" = "$small" ] || fail "uid 65534 counted $(echo $out), want $small"
echo 3 > $PARANOID
out=$(runas 65534 selfmon path)
has "$out" "^path=0 " || fail "uid 65534, paranoid 3: $out"
for word in kernel.perf_event_paranoid CAP_PERFMON "modprobe simple-pmu"; do
	has "$out" -F "$word" || fail "paranoid 3 reason does not name $word: $out"
done
echo "uid 65534: exact under paranoid 2; paranoid 3: $out"
echo "$par0" > $PARANOID

# The 2011 demo, unmodified: no module, so it runs on self-monitoring.
if command -v tcyc >/dev/null; then
	out=$(tcyc) || fail "tcyc: $out"
	has "$out" "^instructions retired [0-9]" || fail "tcyc: $out"
	echo "tcyc: $(echo $out)"
else
	echo "tcyc not built (shared/reference/seeds missing)"
fi

# Root turns user reads off and on (from cpu0) while a reader runs on cpu1: perf's
# sysctl handler clears EL0 access on every CPU at once, so reads in flight fault until
# the reader's next sched-in, and the page says index 0 after it. The reader is never
# killed (the guard: a faulting single read is taken again with read(2) and says
# FAULTED, a window with one ends invalid); windows across the change are invalid; no
# valid window counts below 2n or a million above it (a faulted read yielding 0 would).
others_online
selfmon revoke 1000 4 1 > /tmp/revoke.out 2>&1 &
rpid=$!
sleep 1; echo 0 > $PUA; sleep 1; echo 1 > $PUA; sleep 1; echo 0 > $PUA; echo 1 > $PUA
rc=0; wait $rpid || rc=$?
out=$(cat /tmp/revoke.out)
[ "$rc" = 0 ] || fail "revoke: the reader ended with status $rc (SIGILL is 132): $out"
has "$out" "^valid=[1-9][0-9]* invalid=[1-9][0-9]* faulted=[0-9]* exact=[0-9]* wrong=0$" ||
	fail "revoke: $out (want valid and invalid windows, wrong=0)"
echo "perf_user_access 0 and 1 under a reader on cpu1: $out"
