# The user program of the arm64 article reads PMCCNTR_EL0 with no library and never
# asks to be let in: with the module loaded plainly it is killed (SIGILL: nobody is let
# in by loading), and with everyone=1 it runs unchanged, as under the 2011 driver.
. /tests/lib.sh
# The host builds it from a seed document beside its checkout; a plain clone has none,
# and the host then says why in article.skip. A program missing without that is a FAIL.
if ! command -v article >/dev/null; then
	[ -f /tests/data/article.skip ] || fail "article program missing, and the host gave no reason"
	echo "SKIP: $(cat /tests/data/article.skip)"
	exit 77
fi
[ "$(cat $SYSFS/access)" = members ] || fail "access is '$(cat $SYSFS/access)' after a plain load"
# First a raw reader that survives its SIGILLs, on cpu0 for 5 driver checks (recheck_ms):
# those checks, with no member on the CPU, must not open access. Without it the article
# could die only because a member's switch-out had just closed cpu0, even were the
# module open to all; after it, the article's first read meets what the checks left.
raw=$(SPMU_RAW=1 pmuspin 0 $((5 * $(cat $SYSFS/recheck_ms))))
has "$raw" '^ok=0 sigill=[1-9]' || fail "raw reader on cpu0, not let in, read: $raw"
timeout 1 article > /tmp/article.out
rc=$?
[ $rc -eq 132 ] || fail "article program not let in ended with status $rc, want 132 (SIGILL)"
unload || fail "rmmod failed"
log_mark
modprobe $MOD everyone=1 || fail "modprobe everyone=1 failed: $(dmesg | tail -n 3)"
# Put back the plain load for the tests after this one, whatever happens here.
trap 'unload; modprobe $MOD' EXIT
[ "$(cat $SYSFS/access)" = everyone ] || fail "access is '$(cat $SYSFS/access)' with everyone=1"
has "$(log_since)" -F "everyone=1: every local user" ||
	fail "no warning naming the exposure at load: $(log_since)"
timeout 1 article > /tmp/article.out
rc=$?
[ $rc -eq 143 ] || fail "article program ended with status $rc (132 = SIGILL), want our SIGTERM"
# Killed by our SIGTERM, the program never flushes its last stdio buffer: the file
# ends at a buffer boundary, usually inside a line. Judge the complete lines only.
sed -i '$d' /tmp/article.out
n=$(grep -c '^rdtsc:' /tmp/article.out)
[ "$n" -ge 50 ] || fail "only $n readings"
# Counts start where perf put them, near 2^63: beyond sh's arithmetic. Decimal
# strings of one length compare as numbers.
later() { [ ${#1} -gt ${#2} ] || { [ ${#1} -eq ${#2} ] && [ "$1" \> "$2" ]; }; }
prev=0
for v in $(sed -n 's/^rdtsc://p' /tmp/article.out); do
	later "$v" "$prev" || fail "reading $v after $prev"
	prev=$v
done
echo "not let in: SIGILL (raw reader on cpu0: $raw); everyone=1: $n increasing readings of pmccntr_el0 on CPU 0, no SIGILL"
