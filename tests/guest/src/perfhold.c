// SPDX-License-Identifier: GPL-2.0
/*
 * perfhold CPU COUNT on|off: another perf user. Opens COUNT pinned
 * CPU-wide CPU_CYCLES events on CPU (user only), enabled or not, then
 * obeys one command per line on stdin, answering one line each:
 *   enable / disable   every event     -> "ok"
 *   state              -> "running=R of COUNT" (events counting now)
 *   quit               closes them and exits 0
 * Opened before simple-pmu loads and enabled after, the events are older
 * than the driver's and perf schedules them first: the driver's must move.
 */
#include "guestlib.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_EVENTS 32

int main(int argc, char **argv)
{
	struct perf_event_attr attr;
	int fd[MAX_EVENTS], cpu, count, i, on;
	char line[64];

	if (argc != 4) {
		fprintf(stderr, "usage: perfhold CPU COUNT on|off\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[1], "cpu");
	count = (int)spmu_arg(argv[2], "count");
	on = !strcmp(argv[3], "on");
	if (count < 1 || count > MAX_EVENTS) {
		fprintf(stderr, "perfhold: COUNT 1..%d\n", MAX_EVENTS);
		return 2;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.pinned = 1;
	attr.disabled = !on;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	for (i = 0; i < count; i++) {
		fd[i] = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, 0);
		if (fd[i] < 0) {
			perror("perfhold: perf_event_open");
			return 2;
		}
	}
	printf("opened %d\n", count);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "enable", 6) || !strncmp(line, "disable", 7)) {
			unsigned long req = line[0] == 'e' ? PERF_EVENT_IOC_ENABLE :
							     PERF_EVENT_IOC_DISABLE;

			for (i = 0; i < count; i++)
				ioctl(fd[i], req, 0);
			printf("ok\n");
		} else if (!strncmp(line, "state", 5)) {
			uint64_t v[3], running = 0;

			/* A counting event has run for as long as it was enabled. */
			for (i = 0; i < count; i++)
				if (read(fd[i], v, sizeof(v)) == sizeof(v) && v[1] && v[2] == v[1])
					running++;
			printf("running=%llu of %d\n", (unsigned long long)running, count);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		} else {
			printf("unknown\n");
		}
		fflush(stdout);
	}
	for (i = 0; i < count; i++)
		close(fd[i]);
	return 0;
}
