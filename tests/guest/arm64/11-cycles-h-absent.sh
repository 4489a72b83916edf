# Before the module loads, cycles.h's perfmon_available() says 0 and nothing faults.
. /tests/lib.sh
cyclesh absent
