# CPU PM from idle (issue 24): each CPU idles in a PSCI idle state, which 6.1's
# cpuidle-psci enters through cpu_pm_enter()/cpu_pm_exit(); arm_pmu's exit notifier
# restarts the PMU, which clears PMUSERENR_EL0, and the module's notifier, after it,
# opens user access again. Loaded with everyone=1 (access wanted on every CPU) and
# recheck_ms=10000 (the timer checks once in 10 s), a reader on each CPU that sleeps
# between reads must never fault: every read after the first follows an idle period.
# Proof that CPU PM ran meanwhile: the idle states above WFI (state0) were entered on
# each CPU (cpuidle's usage). The module has no count of checks by cause: its
# interventions (access found revoked and opened again, any cause) less the timer's
# checks must be at least half the idle-state entries. Then, with nobody let in, no PM
# exit may give a new generation (nothing was reloaded: 64-bit counters). SKIP on a
# kernel or tree without an idle state (qemu.boot(idle_states=True) gives QEMU's tree
# one, pmubuild/guests/idledt.py; the debug kernel has CPU_IDLE).
. /tests/lib.sh
reads=20
usage() { # CPU: entries into the idle states above WFI so far
	cat $CPUDIR/cpu$1/cpuidle/state[1-9]*/usage 2>/dev/null | awk '{ n += $1 } END { print n + 0 }'
}
for c in $(cpu_list); do
	[ -d $CPUDIR/cpu$c/cpuidle/state1 ] || {
		grep -qw spmu.idle_states=1 /proc/cmdline &&
			fail "cpu$c has no idle state beyond WFI, yet the guest booted with one (spmu.idle_states=1): cpuidle-psci did not take it: $(dmesg | grep -i -e psci -e cpuidle | tail -n 5)"
		echo "SKIP: cpu$c has no idle state beyond WFI ($CPUDIR/cpu$c/cpuidle/state1): a kernel without CPU_IDLE or a device tree without idle states"
		exit 77
	}
done
modprobe $MOD $EV everyone=1 recheck_ms=10000 || fail "modprobe $EV everyone=1 recheck_ms=10000: $(dmesg | tail -n 3)"
trap 'unload' EXIT
for c in $(cpu_list); do
	eval "u$c=$(usage $c) v$c=$(cpu_attr $c interventions) k$c=$(cpu_attr $c checks)"
done
i=0
while [ $i -lt $reads ]; do
	for c in $(cpu_list); do
		r=$(pmuread $c) || fail "read $i on cpu$c after an idle period: $r"
	done
	sleep 0.1
	i=$((i + 1))
done
line=""
for c in $(cpu_list); do
	eval "u=\$u$c v=\$v$c k=\$k$c"
	du=$(($(usage $c) - u)) di=$(($(cpu_attr $c interventions) - v)) dk=$(($(cpu_attr $c checks) - k))
	line="$line cpu$c: idle-state entries $du, interventions $di, timer checks $dk;"
	[ "$du" -ge $reads ] || fail "cpu$c entered its idle states above WFI $du times in $reads sleeps: CPU PM hardly ran"
	# Each PM exit reopens (access is wanted all along); the timer's checks and the
	# overflow path's account for a few at most. Half of the entries is the bound.
	[ $((di - dk)) -ge $((du / 2)) ] || fail "cpu$c: $di interventions, $dk timer checks, $du idle-state entries: the PM exits did not reopen access"
done
unload || fail "rmmod after the reads"
trap - EXIT
# With nobody let in (the idle task is not) no access is reopened, and a PM exit gives a
# new generation only where arm_pmu reloads a counter with a new period there: a 32-bit
# counter that wrapped before the entry. QEMU's -cpu max has PMUv3p5, so every counter
# here is 64-bit and no idle-state entry may move the generation (the module-wide one:
# it moves with any CPU's).
modprobe $MOD $EV recheck_ms=10000 || fail "modprobe $EV recheck_ms=10000: $(dmesg | tail -n 3)"
trap 'unload' EXIT
[ "$(cat $SYSFS/event_width)" = 64 ] || fail "event_width $(cat $SYSFS/event_width): this guest wants 64-bit event counters (QEMU -cpu max: PMUv3p5)"
g=$(cat $SYSFS/generation)
for c in $(cpu_list); do eval "u$c=$(usage $c)"; done
sleep 2
du=0
for c in $(cpu_list); do
	eval "n=\$(($(usage $c) - u$c))"
	[ "$n" -ge 10 ] || fail "cpu$c: $n idle-state entries in 2 s of sleep, nobody let in: CPU PM hardly ran"
	du=$((du + n))
done
dg=$(($(cat $SYSFS/generation) - g))
[ "$dg" -eq 0 ] || fail "the generation moved $dg times across $du idle-state entries (nobody let in, 64-bit counters): a PM exit with no reload gave a new generation"
echo "$reads reads on each CPU after idle periods, none faulted;${line%;}; nobody let in: generation unchanged across $du idle-state entries"
