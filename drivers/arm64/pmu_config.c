// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: what the PMU offers, the settings (ring, events,
 * user_access), and the perf events they turn into.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/bitfield.h>
#include <linux/cpu.h>
#include <linux/errno.h>
#include <linux/minmax.h>
#include <linux/mutex.h>
#include <linux/smp.h>
#include <linux/string.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"

/* Defaults: cycles and instructions retired, counted in user space only. */
struct spmu_settings spmu_settings = {
	.ring = SPMU_RING_USER,
	.nr_events = 1,
	.events = { 0x08 },
};

struct spmu_hw spmu_hw;
/* Serialises settings changes: spmu_settings writers and the events held. */
DEFINE_MUTEX(spmu_lock);

/* The ID registers of one CPU. */
struct spmu_cpu_id {
	unsigned int pmuver;
	unsigned int num_counters;
	u64 pmceid[2];
};

static bool spmu_pmuver_is_v3(unsigned int pmuver)
{
	return pmuver != SPMU_DFR0_PMUVER_NI &&
	       pmuver != SPMU_DFR0_PMUVER_IMP_DEF;
}

static void spmu_read_cpu_id(void *arg)
{
	struct spmu_cpu_id *id = arg;

	id->pmuver = FIELD_GET(SPMU_DFR0_PMUVER, spmu_read_id_aa64dfr0());
	if (!spmu_pmuver_is_v3(id->pmuver))
		return;
	id->num_counters = FIELD_GET(SPMU_PMCR_N, spmu_read_pmcr());
	id->pmceid[0] = spmu_read_pmceid0();
	id->pmceid[1] = spmu_read_pmceid1();
}

/**
 * spmu_probe_hw() - what every online CPU's PMU offers, into spmu_hw
 *
 * big.LITTLE parts differ per cluster: the lowest version and counter
 * count and the events all CPUs have are what the settings are checked
 * against. A CPU without PMUv3 is left out (perf refuses it events).
 *
 * Return: 0, or -ENODEV after one line if no online CPU has PMUv3.
 */
int spmu_probe_hw(void)
{
	struct spmu_cpu_id id;
	unsigned int cpu, nr = 0;

	cpus_read_lock();
	for_each_online_cpu(cpu) {
		memset(&id, 0, sizeof(id));
		smp_call_function_single(cpu, spmu_read_cpu_id, &id, 1);
		if (!spmu_pmuver_is_v3(id.pmuver)) {
			pr_warn("cpu%u has no PMUv3 (ID_AA64DFR0_EL1.PMUVer=%#x)\n",
				cpu, id.pmuver);
			continue;
		}
		if (!nr++) {
			spmu_hw.pmuver = id.pmuver;
			spmu_hw.num_counters = id.num_counters;
			spmu_hw.pmceid[0] = id.pmceid[0];
			spmu_hw.pmceid[1] = id.pmceid[1];
			continue;
		}
		spmu_hw.pmuver = min(spmu_hw.pmuver, id.pmuver);
		spmu_hw.num_counters = min(spmu_hw.num_counters,
					   id.num_counters);
		spmu_hw.pmceid[0] &= id.pmceid[0];
		spmu_hw.pmceid[1] &= id.pmceid[1];
	}
	cpus_read_unlock();

	if (!nr) {
		pr_err("no CPU has PMUv3; not loading\n");
		return -ENODEV;
	}
	spmu_hw.long_events = spmu_hw.pmuver >= SPMU_DFR0_PMUVER_V3P5;
	return 0;
}

/* "0x8" in a list is at most this long; anything longer is junk. */
#define SPMU_EVENT_TOKEN_MAX	15

/**
 * spmu_parse_events() - parse an events list into @st
 * @s: "" or "none", or comma-separated event numbers (decimal or 0x-hex)
 * @st: on success, its nr_events and events[] are replaced
 *
 * Only the syntax and the absolute limits (SPMU_MAX_EVENTS events, each
 * 0..0xffff): spmu_check_events() checks them against this PMU.
 *
 * Return: 0, or -EINVAL; @st is untouched then.
 */
int spmu_parse_events(const char *s, struct spmu_settings *st)
{
	u16 events[SPMU_MAX_EVENTS];
	char tok[SPMU_EVENT_TOKEN_MAX + 1];
	unsigned int n = 0, ev;
	const char *end;
	size_t len;

	if (*s && strcmp(s, "none")) {
		for (;;) {
			end = strchrnul(s, ',');
			len = end - s;
			if (len > SPMU_EVENT_TOKEN_MAX || n == SPMU_MAX_EVENTS)
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

/*
 * Is a common event (PMCEID0/1_EL0 describe 0x00-0x3f and, from PMUv3p1,
 * 0x4000-0x403f) implemented? Other numbers are IMPLEMENTATION DEFINED:
 * no register says, and perf passes them to the hardware as they are.
 */
static bool spmu_event_implemented(unsigned int ev)
{
	unsigned int base, bit;

	if (ev < SPMU_COMMON_EVENTS_LO + SPMU_COMMON_EVENTS_NR)
		base = 0;
	else if (ev >= SPMU_COMMON_EVENTS_HI &&
		 ev < SPMU_COMMON_EVENTS_HI + SPMU_COMMON_EVENTS_NR)
		base = 32;
	else
		return true;
	bit = ev & (SPMU_COMMON_EVENTS_NR - 1);
	/* PMCEID0 holds events 0x00-0x1f of a range, PMCEID1 0x20-0x3f. */
	return spmu_hw.pmceid[bit / 32] & BIT_ULL(base + bit % 32);
}

/**
 * spmu_check_events() - can this PMU count @st's events?
 * @st: parsed settings
 *
 * Return: 0, or -EINVAL after one line naming the first problem.
 */
int spmu_check_events(const struct spmu_settings *st)
{
	unsigned int i, ev, max = spmu_hw.pmuver >= SPMU_DFR0_PMUVER_V3P1 ?
				  SPMU_EVENT_MAX : SPMU_EVENT_MAX_V3;

	if (st->nr_events > spmu_hw.num_counters) {
		pr_err("events: %u events, but the PMU has %u event counters\n",
		       st->nr_events, spmu_hw.num_counters);
		return -EINVAL;
	}
	for (i = 0; i < st->nr_events; i++) {
		ev = st->events[i];
		if (ev > max) {
			pr_err("events: %#x is wider than this PMU's event field (at most %#x before PMUv3p1)\n",
			       ev, max);
			return -EINVAL;
		}
		if (!spmu_event_implemented(ev)) {
			pr_err("events: %#x is not implemented by this PMU (PMCEID0/1_EL0)\n",
			       ev);
			return -EINVAL;
		}
	}
	return 0;
}

/* Width of our event counters, as user space must take their deltas. */
unsigned int spmu_event_width(void)
{
	return spmu_hw.long_events ? 64 : 32;
}

static void spmu_attr_init(struct perf_event_attr *attr, unsigned int ring,
			   u64 event, bool long_counter)
{
	memset(attr, 0, sizeof(*attr));
	attr->type = PERF_TYPE_RAW;
	attr->size = sizeof(*attr);
	attr->config = event;
	attr->pinned = 1;
	attr->exclude_kernel = !(ring & SPMU_RING_KERNEL);
	attr->exclude_user = !(ring & SPMU_RING_USER);
	/* A non-VHE hypervisor is not the kernel; a VHE kernel ignores it. */
	attr->exclude_hv = 1;
	/* Guests count for themselves (KVM switches the filters at entry). */
	attr->exclude_guest = 1;
	if (long_counter) {
		/* arm_pmuv3's "long" format bit: a 64-bit counter. */
		attr->config1 = 1;
	} else {
		/*
		 * perf reloads it at half its range: let us know (overflow).
		 * arm_pmu programs at most max_period >> 1 = 2^31 - 1 counts
		 * ahead (armpmu_event_set_period()); with a longer period the
		 * reload after 2^31 - 1 counts would not call us.
		 */
		attr->sample_period = (1ULL << 31) - 1;
	}
}

/*
 * Slot 0 counts CPU_CYCLES, which perf places on PMCCNTR_EL0 (64-bit on
 * every PMUv3) when it is free; events are 64-bit only where one event
 * counter can be (PMUv3p5), never a chained pair user space cannot read
 * in one instruction.
 */
void spmu_counter_set_build(const struct spmu_settings *st,
			    struct spmu_counter_set *set)
{
	unsigned int i;

	set->nr = 1 + st->nr_events;
	spmu_attr_init(&set->attr[SPMU_SLOT_CYCLES], st->ring,
		       SPMU_EVENT_CPU_CYCLES, true);
	for (i = 0; i < st->nr_events; i++)
		spmu_attr_init(&set->attr[1 + i], st->ring, st->events[i],
			       spmu_hw.long_events);
}

/**
 * spmu_settings_set() - count what @st says on every CPU
 * @st: settings checked with spmu_check_events()
 *
 * Caller holds spmu_lock. The events are exchanged through CPU hotplug
 * callbacks, so CPUs coming online later get the new ones too. The same
 * settings again change nothing (the held counters are not given up),
 * unless none are held: then they are taken again.
 *
 * Return: 0, or the errno perf gave (the old settings stay then).
 */
int spmu_settings_set(const struct spmu_settings *st)
{
	static struct spmu_counter_set set;
	int ret;

	lockdep_assert_held(&spmu_lock);
	if (spmu_counters_held() && st->ring == spmu_settings.ring &&
	    st->nr_events == spmu_settings.nr_events &&
	    !memcmp(st->events, spmu_settings.events,
		    st->nr_events * sizeof(st->events[0])))
		return 0;
	spmu_counter_set_build(st, &set);
	/* Nothing held: no previous events to fall back to. */
	ret = spmu_counters_held() ? spmu_counters_replace(&set) :
				     spmu_counters_start(&set);
	if (ret)
		pr_err("perf refused the new events (%d); previous settings kept\n",
		       ret);
	else
		spmu_settings = *st;
	return ret;
}

static void spmu_sync_access_ipi(void *unused)
{
	spmu_counters_check_this_cpu(SPMU_CHECK_SETTINGS);
}

/* Open or close user access on every CPU; caller holds spmu_lock. */
void spmu_user_access_set(bool on)
{
	lockdep_assert_held(&spmu_lock);
	cpus_read_lock();
	WRITE_ONCE(spmu_user_access, on);
	on_each_cpu(spmu_sync_access_ipi, NULL, 1);
	cpus_read_unlock();
}
