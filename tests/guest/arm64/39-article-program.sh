# The user program of the arm64 article runs unchanged while the module is loaded.
. /tests/lib.sh
# The host builds it from a seed document beside its checkout; a plain clone has none,
# and the host then says why in article.skip. A program missing without that is a FAIL.
if ! command -v article >/dev/null; then
	[ -f /tests/data/article.skip ] || fail "article program missing, and the host gave no reason"
	echo "SKIP: $(cat /tests/data/article.skip)"
	exit 77
fi
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
echo "$n increasing readings of pmccntr_el0 on CPU 0, no SIGILL"
