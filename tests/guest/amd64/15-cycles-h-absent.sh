# x86 without architectural perfmon: cycles.h's perfmon_available() says 0, no fault.
. /tests/lib.sh
cyclesh absent
