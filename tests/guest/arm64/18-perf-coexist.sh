# perf's own numbers judge the driver. A pinned CPU-wide perf group (cycles and
# instructions, user only, as perf stat -a -e cycles:u) and a per-task group (user
# and kernel; each window makes a getppid() call, so a filter the driver widened or
# narrowed shows in every window) stay open on cpu1
# while simple-pmu loads, ring and events are rewritten, and it unloads; each step
# is followed by five windows of a known loop (a batch the other vCPU disturbed is
# measured again, seven times at most), which both groups must count exactly as they did
# before the module was ever loaded. lost_ns=0: perf's pinned
# group was never pushed off its counters. Its count keeps rising after rmmod.
# Steps run *during* windows too (from cpu0): there QEMU's global instruction
# count inflates windows by the other vCPU's work (docs/DEVELOPING.md, Tests:
# Known problem), so their smallest window must be exact and none more than
# 5000000 above. Across each phase perf's CPU-wide count must rise by no more than
# its windows and a 50000000-instruction allowance for the step itself: a counter
# reset or rewrite by the driver would show as a jump of 2^31 or more.
. /tests/lib.sh
[ -d /sys/module/simple_pmu ] && fail "module already loaded"
out=$(perfcoexist 1 100000 before: load:"modprobe $MOD" ring3:"echo 3 > $SYSFS/ring" \
	ring2:"echo 2 > $SYSFS/ring" events:"echo 0x8,0x11 > $SYSFS/events" \
	events1:"echo 0x8 > $SYSFS/events" during-reload:"rmmod $MOD; modprobe $MOD" \
	during-ring:"echo 3 > $SYSFS/ring; echo 2 > $SYSFS/ring" \
	unload:"rmmod $MOD" after:) || fail "perfcoexist: $out"
echo "$out"
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
ref=$(echo "$out" | grep '^phase=before ')
ci=$(field "$ref" cpu_insns); ti=$(field "$ref" task_insns)
cc=$(field "$ref" cpu_cycles); tc=$(field "$ref" task_cycles)
want=200000
for v in $ci $cc; do
	lo=${v%..*} hi=${v#*..}
	[ "$lo" = "$hi" ] || fail "without the module, windows differ: $ref"
	[ "$lo" -ge $want ] && [ "$lo" -lt $((want + 128)) ] || fail "perf counts $lo in user space for a $want-instruction loop: $ref"
done
# The per-task group also counts getppid()'s kernel path: at least 100 more.
for v in $ti $tc; do
	lo=${v%..*} hi=${v#*..}
	[ "$lo" = "$hi" ] || fail "without the module, windows differ: $ref"
	[ "$lo" -ge $((want + 100)) ] && [ "$lo" -lt $((want + 50000)) ] || fail "perf counts $lo in user and kernel space for a $want-instruction loop and a getppid(): $ref"
done
echo "$out" | while IFS= read -r line; do
	name=$(field "$line" phase)
	[ "$(field "$line" rc)" = 0 ] || { echo "FAIL $name: its command failed"; continue; }
	[ "$(field "$line" lost_ns)" = 0 ] || echo "FAIL $name: the CPU-wide group lost counters: $line"
	[ "$(field "$line" task_lost_ns)" = 0 ] || echo "FAIL $name: the per-task group was multiplexed: $line"
	rise=$(($(field "$line" cpu_after) - $(field "$line" cpu_before)))
	ci=$(field "$line" cpu_insns)
	[ "$rise" -gt 0 ] || echo "FAIL $name: perf stopped counting"
	[ "$rise" -le $(($(field "$line" windows) * ${ci#*..} + 50000000)) ] ||
		echo "FAIL $name: perf's count jumped by $rise"
	for k in cpu_insns cpu_cycles; do
		v=$(field "$line" $k)
		r=$(field "$ref" $k)
		case $name in
		during*) [ "${v%..*}" = "${r%..*}" ] || echo "FAIL $name: smallest $k window ${v%..*}, want ${r%..*}"
			[ "${v#*..}" -le $((${r%..*} + 5000000)) ] || echo "FAIL $name: a $k window of ${v#*..}" ;;
		*) [ "$v" = "$r" ] || echo "FAIL $name: $k $v, without the module $r" ;;
		esac
	done
	# The per-task group's kernel share (perf's read() paths, getppid) differs by a
	# couple of hundred instructions after a fork (measured: 204911 / 204713, with and
	# without the module): within 1000 of the reference, and far (~4800) above an
	# EL0-only count, so a filter narrowed to EL0 still shows.
	for k in task_insns task_cycles; do
		v=$(field "$line" $k)
		r=$(field "$ref" $k)
		lo=${v%..*}
		[ "$lo" -ge $((${r%..*} - 1000)) ] && [ "$lo" -le $((${r%..*} + 1000)) ] ||
			echo "FAIL $name: smallest $k window $lo, without the module ${r%..*}"
		case $name in
		during*) [ "${v#*..}" -le $((${r%..*} + 5000000)) ] || echo "FAIL $name: a $k window of ${v#*..}" ;;
		*) [ "$lo" = "${v#*..}" ] || echo "FAIL $name: $k windows differ: $v" ;;
		esac
	done
done | grep FAIL && fail "perf's counts changed"
[ -d /sys/module/simple_pmu ] && fail "module still loaded"
kernel_log_clean
echo "perf exact and unchanged on cpu1 (CPU-wide and per-task, $ci instructions per window) through load, ring/events rewrites and unload"
