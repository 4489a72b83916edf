# The kernel runs at EL2 (VHE) with KVM: while a vCPU of its own is loaded on
# cpu1, KVM holds PMUSERENR_EL0 (the guest's value, the host's in a shadow) and the
# driver must not write it. kvmspin runs a guest's counting loop on cpu1 for 2 s of
# guest time: the checks the driver made on cpu1 then were deferred (kvm_deferrals;
# all but those that fell between two KVM_RUNs), the guest's loop ran to its MMIO exit
# every time, and afterwards user reads on cpu1 work again.
. /tests/lib.sh
[ -c /dev/kvm ] || fail "no /dev/kvm: the kernel did not boot at EL2 with KVM"
modprobe $MOD || fail "modprobe"
d0=$(cpu_attr 1 kvm_deferrals) c0=$(cpu_attr 1 checks) i0=$(cpu_attr 1 interventions)
out=$(kvmspin 1 2) || fail "kvmspin: $out"
runs=$(echo "$out" | sed -n 's/^runs=\([0-9]*\) .*/\1/p')
[ -n "$runs" ] && [ "$runs" -gt 0 ] && [ "$out" = "runs=$runs exits_mmio=$runs" ] || fail "the vCPU did not run cleanly: $out"
d=$(($(cpu_attr 1 kvm_deferrals) - d0)) c=$(($(cpu_attr 1 checks) - c0))
i=$(($(cpu_attr 1 interventions) - i0))
[ "$c" -ge 5 ] || fail "only $c checks on cpu1 in 2 s of a busy vCPU"
# A check between two KVM_RUNs finds no vCPU loaded: two at most, or one in four on a
# debug kernel (spmu.debug=1), whose KVM exits are slower (19 of 22 deferred there).
if grep -qw spmu.debug=1 /proc/cmdline; then
	[ $((4 * d)) -ge $((3 * c)) ] || fail "$d of $c checks on cpu1 deferred while the vCPU ran (3 in 4 wanted on a debug kernel)"
else
	[ "$d" -ge $((c - 2)) ] || fail "$d of $c checks on cpu1 deferred while the vCPU ran"
fi
# Only a check between two KVM_RUNs (no vCPU loaded) may grant access again.
[ "$i" -le $((c - d)) ] || fail "$i interventions on cpu1 from $((c - d)) checks without a vCPU"
settle
out=$(pmuread 1) || fail "cpu1 not readable after the vCPU: $out"
rmmod $MOD || fail "rmmod"
echo "vCPU on cpu1 for 2 s ($runs runs): $d of $c checks deferred, no write; readable after"
