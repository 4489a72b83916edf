// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: from settings (user_access, ring, events) to the
 * register values every CPU gets, and changing them on a running system.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/cpu.h>
#include <linux/errno.h>
#include <linux/mutex.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <asm/virt.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"

struct spmu_settings spmu_settings;
struct spmu_config spmu_config;
/* Serialises settings changes: spmu_settings and spmu_config writers. */
DEFINE_MUTEX(spmu_lock);

static const u64 spmu_pmuserenr_of[] = {
	[SPMU_UA_OFF]	= 0,
	[SPMU_UA_RO]	= SPMU_PMUSERENR_RO,
	[SPMU_UA_RW]	= SPMU_PMUSERENR_RW,
};

/* "0x8" in a list is at most this long; anything longer is junk. */
#define SPMU_EVENT_TOKEN_MAX	15

/**
 * spmu_parse_events() - parse an events list into @st
 * @s: "" or "none", or comma-separated event numbers (decimal or 0x-hex)
 * @st: on success, its nr_events and events[] are replaced
 *
 * Return: 0, or -EINVAL for junk, an event above 0xffff or more events
 * than the PMU has counters; @st is untouched then.
 */
int spmu_parse_events(const char *s, struct spmu_settings *st)
{
	u16 events[SPMU_MAX_EVENT_COUNTERS];
	char tok[SPMU_EVENT_TOKEN_MAX + 1];
	unsigned int n = 0, ev;
	const char *end;
	size_t len;

	if (*s && strcmp(s, "none")) {
		for (;;) {
			end = strchrnul(s, ',');
			len = end - s;
			if (len > SPMU_EVENT_TOKEN_MAX ||
			    n == spmu_hw.num_counters)
				return -EINVAL;
			memcpy(tok, s, len);
			tok[len] = '\0';
			if (spmu_parse_number(tok, 0, SPMU_EVENT_MAX, &ev))
				return -EINVAL;
			events[n++] = ev;
			if (!*end)
				break;
			s = end + 1;
		}
	}
	st->nr_events = n;
	memcpy(st->events, events, n * sizeof(events[0]));
	return 0;
}

/* PMCCFILTR/PMEVTYPER filter bits counting what @ring asks for. */
static u64 spmu_filter_of(unsigned int ring)
{
	u64 filter = 0;

	if (!(ring & SPMU_RING_KERNEL))
		filter |= SPMU_FILTER_P;
	else if (is_kernel_in_hyp_mode())
		filter |= SPMU_FILTER_NSH;	/* a VHE kernel runs at EL2 */
	if (!(ring & SPMU_RING_USER))
		filter |= SPMU_FILTER_U;
	return filter;
}

/*
 * Event i goes in counter N-1-i: perf allocates from the bottom, so the
 * top of the range is where it looks last.
 */
void spmu_config_build(const struct spmu_settings *st,
		       struct spmu_config *cfg)
{
	u64 filter = spmu_filter_of(st->ring);
	unsigned int i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->pmuserenr = spmu_pmuserenr_of[st->user_access];
	cfg->own_pmuserenr = st->user_access != SPMU_UA_OFF;
	cfg->pmccfiltr = filter;
	cfg->pmcnten = SPMU_PMCNTEN_CYCLE;
	cfg->nr_events = st->nr_events;
	for (i = 0; i < st->nr_events; i++) {
		cfg->idx[i] = spmu_hw.num_counters - 1 - i;
		cfg->evtyper[i] = filter |
			FIELD_PREP(SPMU_EVTYPER_EVENT, st->events[i]);
		cfg->pmcnten |= BIT(cfg->idx[i]);
	}
}

/**
 * spmu_settings_set() - make @st the settings of every online CPU
 * @st: validated settings
 *
 * Caller holds spmu_lock. Hotplug is held off, so a CPU either is updated
 * here or comes online later and reads the new config.
 */
void spmu_settings_set(const struct spmu_settings *st)
{
	lockdep_assert_held(&spmu_lock);

	cpus_read_lock();
	spmu_settings = *st;
	spmu_config_build(st, &spmu_config);
	on_each_cpu(spmu_cpu_update, NULL, 1);
	cpus_read_unlock();
}
