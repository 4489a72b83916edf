# Helpers for the in-guest tests (sourced; POSIX sh as busybox runs it).
MOD=simple-pmu
SYSFS=/sys/devices/system/simple-pmu/simple-pmu0
# A pipeline fails when any part does: "prog | sed" must not hide prog's failure.
set -o pipefail

fail() {
	echo "FAIL: $*"
	exit 1
}

# has TEXT [GREP-OPTION...] PATTERN: a line of TEXT matches (grep -q). Not
# 'echo "$TEXT" | grep -q': with pipefail, grep leaving at its first match can
# kill an echo still writing (SIGPIPE), and the test fails for no reason (seen
# under load on the host, where bash writes a line at a time).
has() {
	_text=$1
	shift
	grep -q "$@" <<EOF
$_text
EOF
}

# The kernel log must stay free of WARNING/BUG/Oops through every test. Nothing
# clears it (no dmesg -c): tests that look at their own lines mark where they began.
# On a debug kernel (spmu.debug=1) the host judges every report by its title
# (pmubuild/guests/debugjudge.py): a bare call trace there is an injected allocation failure's
# (warn_alloc: "vmalloc error", "page allocation failure"), not a report; nor a data
# race KCSAN reports, which the judge counts only when the module is in it.
kernel_log_clean() {
	_pat='WARNING:|BUG:|Oops|Unable to handle|Call trace:|rcu: INFO|blocked for more than'
	_not='^$'
	if grep -q 'spmu\.debug=1' /proc/cmdline; then
		_pat='WARNING:|BUG:|Oops|Unable to handle|rcu: INFO|blocked for more than'
		_not='BUG: KCSAN: '
	fi
	bad=$(dmesg | grep -E "$_pat" | grep -v "$_not" | head -n 5)
	[ -z "$bad" ] || fail "kernel log: $bad"
}

log_mark() {
	_mark="spmu-mark-$$-$(cut -d' ' -f1 /proc/uptime)"
	echo "$_mark" > /dev/kmsg
}

# The kernel log after the last log_mark.
log_since() {
	dmesg | sed -n "/$_mark/,\$p" | sed 1d
}

# nonroot_refused FILE VALUE: writing VALUE to FILE as uid 65534 is refused by the
# kernel. runas must first show it can run a command as that user: a runas that cannot
# drop privileges, or cannot exec, fails too, and that must not pass for a refusal.
nonroot_refused() {
	_who=$(runas 65534 /bin/sh -c 'id -u' 2>&1) || fail "runas cannot run a command as uid 65534: $_who"
	[ "$_who" = 65534 ] || fail "runas 65534 ran 'id -u' as '$_who'"
	_err=${TMPDIR:-/tmp}/runas.err
	runas 65534 /bin/sh -c "echo $2 > $1" 2>"$_err" && fail "non-root wrote $1"
	# The shell's own message for the refused open names the file.
	grep -qF "$1: Permission denied" "$_err" ||
		fail "non-root write of $1 failed otherwise: $(cat "$_err")"
}

# unload: rmmod, tried again while a reader holds /dev/simple-pmu open for the
# moment of its JOIN (an open descriptor pins the module: rmmod says "Resource
# temporarily unavailable", EAGAIN); any other refusal, or 100 tries, fails.
unload() {
	_try=0
	while ! _err=$(rmmod $MOD 2>&1); do
		has "$_err" -e 'temporarily unavailable' -e 'in use' ||
			{ echo "$_err" >&2; return 1; }
		_try=$((_try + 1))
		[ $_try -lt 100 ] || { echo "$_err (100 tries)" >&2; return 1; }
		sleep 0.01
	done
}

# CPU $1's published counter for cycles (slot 0) or the k-th event (slot k).
published() {
	if [ "$2" -eq 0 ]; then
		cat $SYSFS/cpu$1/cycle_index
	else
		awk -v k="$2" '{ if (k > NF) exit 1; print $k }' $SYSFS/cpu$1/event_index
	fi
}

cpu_attr() { # CPU ATTR
	cat $SYSFS/cpu$1/$2
}

cpu_list() {
	seq 0 $(($(nproc) - 1))
}

# Keep every CPU busy for two check periods: user access perf withdrew is back,
# and the generation moves it brings are behind us.
settle() {
	for _c in $(cpu_list); do pmuspin $_c $(($(cat $SYSFS/recheck_ms) * 2)) >/dev/null & done
	wait
}

# Under -icount shift=0, QEMU's INST_RETIRED is its global instruction count and
# PMCCNTR its virtual clock: whatever the other vCPU executes during a window lands
# in it (docs/DEVELOPING.md, Tests: Known problem; measured: about 1 window of 20 on
# cpu1, each +16 or about +3400, whether the driver's timer runs every 100 ms or
# every 10 s; none on a CPU that is alone). How much it adds has no bound (seen
# under host load: +31109, +35206 on cpu1), so only its direction tells it from a
# defect: a batch with a window off upwards is QEMU's and is run again, at most ten
# times; a count below the expected one fails at once, and so does a batch never
# clean in ten tries.

# alone SED-SCRIPT CMD...: run CMD, then print its output filtered by sed -n SCRIPT.
# Not a pipeline: the filter would start (fork, exec) on the other vCPU inside CMD's
# first windows, and under -icount QEMU's instruction count is global (seen once in
# the CI: +97005 in a cpu1 window, sed starting on cpu0).
alone() {
	_script=$1
	shift
	_o=$("$@") || { echo "$_o"; return 1; }
	echo "$_o" | sed -n "$_script"
}

# exact_batch LABEL WANT COUNT CMD...: CMD prints COUNT counts, one per line; all
# must be WANT.
exact_batch() {
	label=$1 want=$2 count=$3
	shift 3
	for try in 1 2 3 4 5 6 7 8 9 10; do
		out=$("$@") || fail "$label: $* failed: $out"
		[ "$(echo "$out" | grep -c .)" -eq "$count" ] || fail "$label: $* printed not $count counts: $out"
		bad=""
		for v in $out; do
			[ "$v" -lt "$want" ] && fail "$label: $v, fewer than the $want expected"
			[ "$v" -ne "$want" ] && bad="$bad +$((v - want))"
		done
		[ -z "$bad" ] && { echo "$label: $want on every run (try $try)"; return 0; }
		echo "$label: try $try disturbed:$bad (QEMU: the other vCPU's work); again"
	done
	fail "$label: no undisturbed batch in 10 tries"
}

# Exact counts through CPU $1's published counters (pmuwin's direct reads): the
# same for every window of n=1000 (2000 loop instructions plus a small constant
# of the read path), and exactly 200000 more for n=101000.
pmuwin_exact() {
	base=$(alone 's/^n=1000 insns=\([0-9]*\).*/\1/p' pmuwin exact $1 3) || fail "pmuwin exact on cpu$1: $base"
	base=$(echo "$base" | sort -n | head -n 1)
	[ -n "$base" ] || fail "pmuwin exact on cpu$1: $(pmuwin exact $1 1)"
	[ "$base" -ge 2000 ] && [ "$base" -lt 2064 ] || fail "cpu$1: $base instructions for a 2000-instruction loop"
	out=$(pmuwin exact $1 3) || fail "cpu$1: $out"
	has "$out" 'gen=changed' && fail "cpu$1: generation changed inside a quiet window"
	# Cycles: one per instruction under -icount, so 200000 more for n=101000 too.
	c1=$(echo "$out" | sed -n 's/^n=1000 .*cycles=\([0-9]*\).*/\1/p' | sort -n | head -n 1)
	c2=$(echo "$out" | sed -n 's/^n=101000 .*cycles=\([0-9]*\).*/\1/p' | sort -n | head -n 1)
	[ $((c2 - c1)) -eq 200000 ] || fail "cpu$1: cycles $c1 (n=1000) and $c2 (n=101000): not 200000 apart"
	exact_batch "cpu$1 n=1000" $base 5 alone 's/^n=1000 insns=\([0-9]*\).*/\1/p' pmuwin exact $1 5
	exact_batch "cpu$1 n=101000" $((base + 200000)) 5 alone 's/^n=101000 insns=\([0-9]*\).*/\1/p' pmuwin exact $1 5
}

# Under -icount QEMU's instruction count and virtual clock are global: what another
# vCPU runs lands in this CPU's windows (above). A measurement that must repeat
# exactly takes every other CPU offline first (PSCI CPU_OFF: that vCPU then runs
# nothing at all) and puts them back after; others_online belongs in the caller's
# EXIT trap, and exits 1 if the CPUs do not all come back (a later test would
# otherwise run on fewer CPUs without a word). cpu0 stays: measure there.
CPUDIR=/sys/devices/system/cpu
_online_others() { # the CPUs other than cpu0 that say they are online
	for _f in $CPUDIR/cpu[1-9]*/online; do
		[ -f "$_f" ] && [ "$(cat "$_f")" = 1 ] && echo "${_f%/online}"
	done
}
_cpu_write() { # FILE VALUE (one place for the write: the host's tests fake it)
	echo "$2" > "$1"
}
others_offline() {
	_online0=$(_online_others)
	_offl_done=1
	for _c in $_online0; do
		_offlined="$_offlined $_c"
		_cpu_write $_c/online 0 || fail "cannot take $_c offline"
	done
	[ -z "$(_online_others)" ] || fail "still online after others_offline: $(_online_others)"
}

others_online() {
	[ -n "${_offl_done:-}" ] || return 0
	_offl_done=""
	for _c in $_offlined; do
		_cpu_write $_c/online 1 || echo "others_online: cannot put $_c back online"
	done
	_offlined=""
	[ "$(_online_others)" = "$_online0" ] || {
		echo "FAIL: online after others_online: $(_online_others | tr '\n' ' '), were:" \
			"$(echo "$_online0" | tr '\n' ' ')"
		exit 1
	}
}

# The machine-wide settings the module must never change by itself (issue 23): what
# perf lets unprivileged users count, and (5.17+) whether it grants EL0 reads.
KNOBS=/tmp/knobs.before
knobs() {
	for _k in perf_event_paranoid perf_user_access; do
		[ -f /proc/sys/kernel/$_k ] && echo "$_k=$(cat /proc/sys/kernel/$_k)"
	done
}
# knobs_unchanged WHEN: as 10-sigill-before-load recorded them before any load.
knobs_unchanged() {
	[ -s $KNOBS ] || fail "no $KNOBS: 10-sigill-before-load records the settings"
	_now=$(knobs)
	[ "$_now" = "$(cat $KNOBS)" ] ||
		fail "$1: $(echo $_now) (before the first load: $(echo $(cat $KNOBS)))"
}

# members_reaped WHO: the module's members count drops to 0 within 1 s (WHO: who
# exited, for the message): a let-in thread that exits is reaped after its last switch.
members_reaped() {
	_i=0
	while [ "$(cat $SYSFS/members)" != 0 ]; do
		_i=$((_i + 1))
		[ $_i -lt 100 ] || fail "members still $(cat $SYSFS/members) 1 s after every $1 exited"
		sleep 0.01
	done
}

# progress TEXT: a line on the console while a long script runs (its output is shown
# only when it ends), for the host to show as it comes.
progress() {
	echo "@@SPMU PROGRESS $*" > /dev/console
}

# Fault injection, for the debug guest's scripts (tests/guest/arm64-debug).
FI=/sys/kernel/debug
# That guest runs without -icount, where QEMU has no INST_RETIRED (the default event).
EV=events=0x11

# Per-task fail-nth reaches slab allocations, those that may sleep too (the kernel skips
# those by default). Page allocations stay out (fail_page_alloc's min-order above any
# order): KASAN's stack depot and SLUB's new slabs allocate pages from the calling task
# as the allocator's state goes, so with them N would not name the same call from run to
# run; the loader's vmalloc'd copy of the module alone makes hundreds of single pages;
# and the module allocates no pages itself. verbose 0: no report of each injected
# failure (the script says which N it is at; 50 turns it on to place each). Slab
# caches: only those slub_debug=A marks (the debug guest's command line: all but the
# debuggers' own, whose failures they absorb, so that a point there would only cost a
# load).
fault_setup() {
	[ -d $FI/failslab ] || fail "no $FI/failslab: not a fault-injection kernel"
	for a in failslab fail_page_alloc; do
		echo N > $FI/$a/ignore-gfp-wait || fail "cannot set $a/ignore-gfp-wait"
		echo 0 > $FI/$a/verbose || fail "cannot set $a/verbose"
	done
	echo 64 > $FI/fail_page_alloc/min-order || fail "cannot set fail_page_alloc/min-order"
	echo Y > $FI/failslab/cache-filter || fail "cannot set failslab/cache-filter"
	[ "$(cat /sys/kernel/slab/kmalloc-1k/failslab)" = 1 ] ||
		fail "kmalloc-1k is not marked for failslab (no slub_debug=A on the command line?)"
	for _c in kmemleak_object kmemleak_scan_area debug_objects_cache; do
		[ "$(cat /sys/kernel/slab/$_c/failslab)" = 0 ] ||
			fail "$_c is marked for failslab: its failures would be absorbed, not seen"
	done
}

# left_nothing WHAT: no module, no sysfs directory, no device node.
left_nothing() {
	grep -q "^simple_pmu " /proc/modules && fail "$1: the module is still loaded"
	[ -e /sys/devices/system/simple-pmu ] && fail "$1: /sys/devices/system/simple-pmu is left"
	[ -e /dev/simple-pmu ] && fail "$1: /dev/simple-pmu is left"
	true
}
