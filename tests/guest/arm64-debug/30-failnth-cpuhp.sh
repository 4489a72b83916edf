# Fault injection where the module makes each CPU's perf events (debug kernel only):
# its online callback runs in the CPU's hotplug thread cpuhp/N, at load and at each
# ring or events write. That thread's N-th fault-capable call fails (its fail-nth,
# which root may set for any task), N = 1, 2, ... until the callbacks make fewer than
# N such calls, in four ways:
#   load, cpu1 only:   the load works; cpu1 either says why it stays closed (and
#                      faults) or absorbed the failure (and reads); cpu0 reads
#   load, both CPUs:   perf refused the events on every CPU: the load fails with its
#                      error, a line per CPU, and leaves nothing; or it works (absorbed)
#   ring write, cpu1:  the write takes effect; cpu1 as at load; offline/online brings
#                      it back
#   ring write, both:  the write fails and the previous settings are back on every
#                      CPU (the fallback), or it takes effect (absorbed)
# Leaks and warnings are judged after the whole run.
. /tests/lib.sh
fault_setup
thread() { ps -o pid,comm | awk -v c="cpuhp/$1" '$2 == c { print $1 }'; }
t0=$(thread 0) t1=$(thread 1)
[ -n "$t0" ] && [ -n "$t1" ] || fail "no cpuhp/0 or cpuhp/1 thread: $(ps -o pid,comm | grep cpuhp)"
online=/sys/devices/system/cpu/cpu1/online
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
arm() { # N PID...: arm each thread's fail-nth
	_n=$1
	shift
	for _p in "$@"; do echo "$_n" > /proc/$_p/task/$_p/fail-nth || fail "cannot arm cpuhp $_p"; done
}
injected() { # PID...: 1 if any armed thread had its failure injected; disarms all
	_inj=0
	for _p in "$@"; do
		[ "$(cat /proc/$_p/task/$_p/fail-nth)" = 0 ] && _inj=1
		echo 0 > /proc/$_p/task/$_p/fail-nth
	done
	echo $_inj
}
# After a load or write that worked with the hotplug threads of CPUS armed: each of
# them either refused (faults, says why, not in cpus) or absorbed the failure (reads);
# every other CPU reads. Prints "refused" if any refused.
cpus_state() { # WHAT CPUS
	_r=$(pmuread all) _open="" _any=absorbed
	for _c in 0 1; do
		if has "$2" -w "$_c" && has "$_r" "cpu=$_c .*result=sigill"; then
			has "$(log_since)" "simple-pmu: cpu$_c: perf refused event" ||
				fail "$1: cpu$_c closed without a word: $(log_since | grep simple-pmu)"
			_any=refused
		else
			has "$_r" "cpu=$_c .*result=ok" || fail "$1: cpu$_c: $_r"
			_open="$_open $_c"
		fi
	done
	_want=$(echo $_open | sed 's/^0 1$/0-1/')
	[ "$(cat $SYSFS/cpus)" = "$_want" ] || fail "$1: cpus is '$(cat $SYSFS/cpus)', readable: '$_want'"
	echo $_any
}
trap 'echo 0 > /proc/$t0/task/$t0/fail-nth; echo 0 > /proc/$t1/task/$t1/fail-nth; echo 1 > $online; unload' EXIT
summary=""
for way in load-cpu1 load-both ring-cpu1 ring-both; do
	case $way in *-cpu1) pids=$t1 cpus=1 ;; *) pids="$t0 $t1" cpus="0 1" ;; esac
	n=1 refused=0
	while :; do
		log_mark
		case $way in
		load-*)
			arm $n $pids
			# One finit_module(): busybox modprobe would retry a failed load at once,
			# with nothing left to inject.
			out=$(failnth 0 load "$ko" "$EV") || fail "$way N=$n: failnth: $out"
			rc=1
			has "$out" 'rc=0 ' && rc=0
			inj=$(injected $pids)
			if [ $rc -ne 0 ]; then
				[ $way = load-both ] && [ $inj = 1 ] || fail "$way N=$n: load failed ($out)"
				left_nothing "$way N=$n"
				for c in 0 1; do
					has "$(log_since)" "simple-pmu: cpu$c: perf refused event" || fail "$way N=$n: cpu$c's refusal not said: $(log_since | grep simple-pmu)"
				done
				refused=$((refused + 1))
			else
				st=$(cpus_state "$way N=$n" "$cpus") || fail "$st"
				[ "$st" = refused ] && refused=$((refused + 1))
				unload || fail "$way N=$n: rmmod"
				left_nothing "$way N=$n, unloaded"
			fi
			;;
		ring-*)
			modprobe $MOD $EV || fail "$way N=$n: modprobe failed: $(dmesg | tail -n 3)"
			old=$(cat $SYSFS/ring)
			log_mark
			arm $n $pids
			echo 3 > $SYSFS/ring 2>/tmp/cpuhp.err
			rc=$?
			inj=$(injected $pids)
			if [ $rc -ne 0 ]; then
				[ $way = ring-both ] && [ $inj = 1 ] || fail "$way N=$n: write failed ($(cat /tmp/cpuhp.err))"
				[ "$(cat $SYSFS/ring)" = "$old" ] || fail "$way N=$n: write failed but ring is '$(cat $SYSFS/ring)'"
				has "$(log_since)" 'previous settings kept' || fail "$way N=$n: no word of the previous settings: $(log_since | grep simple-pmu)"
				has "$(pmuread all)" 'result=sigill' && fail "$way N=$n: previous settings back, yet a CPU faults: $(pmuread all)"
				[ "$(cat $SYSFS/cpus)" = 0-1 ] || fail "$way N=$n: previous settings back, yet cpus is '$(cat $SYSFS/cpus)'"
				refused=$((refused + 1))
			else
				[ "$(cat $SYSFS/ring)" = 3 ] || fail "$way N=$n: write took, ring is '$(cat $SYSFS/ring)'"
				st=$(cpus_state "$way N=$n" "$cpus") || fail "$st"
				if [ "$st" = refused ]; then
					refused=$((refused + 1))
					# A CPU whose events perf refused comes back when it comes online
					# again (cpu0 cannot go offline here).
					echo 0 > $online && echo 1 > $online || fail "$way N=$n: cpu1 offline/online"
					has "$(pmuread all)" 'cpu=1 .*result=ok' || fail "$way N=$n: cpu1 not back after offline/online"
					[ "$(cat $SYSFS/cpus)" = 0-1 ] || fail "$way N=$n: cpu1 back after offline/online, yet cpus is '$(cat $SYSFS/cpus)'"
				fi
			fi
			unload || fail "$way N=$n: rmmod"
			left_nothing "$way N=$n, unloaded"
			;;
		esac
		echo "$way N=$n rc=$rc injected=$inj"
		[ "$inj" = 0 ] && break
		n=$((n + 1))
	done
	# N=1 injected nothing: the callbacks made no fault-capable call in the thread
	# armed, and the way proved nothing.
	[ $n -gt 1 ] || fail "$way: no failure was injected at N=1: nothing swept"
	summary="$summary $way $((n - 1)) ($refused refused)"
done
trap - EXIT
echo "fail-nth points exercised in cpuhp threads:$summary"
