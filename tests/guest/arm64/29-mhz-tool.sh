# Willy Tarreau's mhz tool (the seed, built unchanged) and simple-pmu mhz, on the same
# machine, decidably: under -icount shift=0 every instruction takes 1 ns of QEMU's
# virtual clock, so both time their XOR loops on a clock nothing else moves once the
# other CPUs are offline (others_offline), and must agree within 1% (both near 1000).
# On the host the two tools run side by side in `invoke bench` (a table of spreads, no
# assert). SKIP where the seed documents are not beside the checkout. cpu1 is idle here;
# it goes offline as a precaution, and before 30-33 (which do not depend on it).
. /tests/lib.sh
# A program missing without the host's reason (seed-mhz.skip) is a FAIL, as for 39.
if ! command -v seed-mhz >/dev/null; then
	[ -f /tests/data/seed-mhz.skip ] || fail "seed-mhz missing, and the host gave no reason"
	echo "SKIP: $(cat /tests/data/seed-mhz.skip)"
	exit 77
fi
trap others_online EXIT
others_offline
seed=$(seed-mhz -c 1) || fail "seed-mhz exit $?: $seed"
out=$(simple-pmu mhz --runs 1 --clock wall) || fail "simple-pmu mhz exit $?: $out"
ours=$(echo "$out" | sed -n 's/^median cpu_MHz=\([0-9.]*\) .*/\1/p')
[ -n "$ours" ] || fail "no median cpu_MHz line: $out"
within() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= b / 100) }'; }
within "$ours" "$seed" || fail "simple-pmu mhz $ours MHz vs the mhz tool $seed MHz: more than 1% apart"
within "$seed" 1000 || fail "the mhz tool says $seed MHz, want 1000 (1 ns per instruction)"
echo "mhz tool $seed MHz, simple-pmu mhz $ours MHz (virtual clock, cpu0 alone)"
