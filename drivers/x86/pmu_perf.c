// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: the arch hooks of the perf-owned counters
 * (drivers/common/counters.c).
 *
 * User RDPMC is switched by the cpu PMU's rdpmc attribute (2: always),
 * which perf keeps in CR4.PCE; the driver writes no register for it.
 */

#include <linux/perf_event.h>

#include "drivers/common/counters.h"

/* RDPMC's ECX for the counter perf gave @event (bit 30: fixed counter). */
int spmu_arch_counter_index(struct perf_event *event)
{
	return event->hw.event_base_rdpmc;
}

bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	WRITE_ONCE(c->open, c->placed && READ_ONCE(spmu_user_access));
	return false;
}

void spmu_arch_revoke(struct spmu_pcpu *c)
{
	WRITE_ONCE(c->open, false);
}
