/* common.c: status names, logging, CPUs, futex, random (the clocks: clock.c). */
#include "emu/common/common.h"
#include "emu/common/tsan.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emu/common/config.h"

const char *gice_status_name(int status)
{
	switch (status) {
#define GICE_STATUS_NAME_(name, val, str) \
	case val:                         \
		return #name;
		GICE_STATUS_LIST(GICE_STATUS_NAME_)
#undef GICE_STATUS_NAME_
	}
	return "GICE_ERR_UNKNOWN";
}

const char *gice_status_str(int status)
{
	switch (status) {
#define GICE_STATUS_STR_(name, val, str) \
	case val:                        \
		return str;
		GICE_STATUS_LIST(GICE_STATUS_STR_)
#undef GICE_STATUS_STR_
	}
	return "unknown status";
}

const gice_param_t gice_common_params[] = {
	{"GICE_LOG_LEVEL", "warn", "log level: off (no messages at all), error, warn, info, debug, trace",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_LOG_SUBSYS", "all", "comma-separated subsystems to log (tm,ct,smt,fab,hbm,api) or all",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CLOCK", "auto",
	 "auto: the library's clock (CLOCK_MONOTONIC) is read through the TSC where the CPU says the TSC is "
	 "invariant, ~12 ns a reading instead of ~27 on the KVM VMs measured (test_clock prints both); os: "
	 "clock_gettime at every reading (a machine whose CPUs' TSCs disagree)",
	 GICE_PARAM_STR, 0, 0},
	{NULL, NULL, NULL, 0, 0, 0},
};

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};
#define LOG_OFF (-1)   /* GICE_LOG_LEVEL=off: every level is above it, nothing prints */
#define LOG_UNSET (-2) /* not read yet */
static int log_level = LOG_UNSET;
static const char *log_subsys;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void)
{
	const char *lv = gice_param_str(&gice_common_params[0]);
	int level = LOG_UNSET;

	if (!strcasecmp(lv, "off"))
		level = LOG_OFF;
	for (int i = 0; i < (int)GICE_ARRAY_SIZE(level_names); i++)
		if (!strcasecmp(lv, level_names[i]))
			level = i;
	if (level == LOG_UNSET) {
		fprintf(stderr, "gice[%d] error config: GICE_LOG_LEVEL=\"%s\" is not one of off, error, warn, info, "
				"debug, trace; using warn\n", (int)getpid(), lv);
		level = GICE_LOG_WARN;
	}
	log_subsys = gice_param_str(&gice_common_params[1]);
	if (!strcmp(log_subsys, "all"))
		log_subsys = NULL;
	__atomic_store_n(&log_level, level, __ATOMIC_RELEASE);
}

int gice_log_enabled(int level, const char *subsys)
{
	int cur = __atomic_load_n(&log_level, __ATOMIC_ACQUIRE);

	if (gice_unlikely(cur == LOG_UNSET)) {
		pthread_once(&log_once, log_init);
		cur = __atomic_load_n(&log_level, __ATOMIC_ACQUIRE);
	}
	if (level > cur)
		return 0;
	if (level <= GICE_LOG_WARN || !log_subsys)
		return 1;
	size_t n = strlen(subsys);
	for (const char *p = log_subsys; (p = strstr(p, subsys)); p += n)
		if ((p == log_subsys || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

static int log_rank = -1;

void gice_log_set_rank(int rank) { __atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED); }

void gice_log_write(int level, const char *subsys, const char *file, int line, const char *fmt, ...)
{
	int rank = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
	char who[48];
	char msg[1024];
	va_list ap;
	const char *base = strrchr(file, '/');

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (rank >= 0)
		snprintf(who, sizeof(who), "rank %d pid %d", rank, (int)getpid());
	else
		snprintf(who, sizeof(who), "%d", (int)getpid());
	/* One write per line so lines of different threads do not interleave. */
	fprintf(stderr, "gice[%s] %s %s: %s (%s:%d)\n", who, level_names[level], subsys, msg, base ? base + 1 : file,
		line);
}

uint32_t gice_cpus_usable(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 ? (uint32_t)CPU_COUNT(&set) : 1;
}

int gice_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns != UINT64_MAX) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tsp = &ts;
	}
	/* FUTEX_WAIT without FUTEX_PRIVATE_FLAG: the word may be in a memfd mapped by other processes. */
	long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tsp, NULL, 0);
	if (rc < 0 && errno == ETIMEDOUT)
		return GICE_ERR_TIMED_OUT;
	return 0;
}

void gice_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

int gice_join_by(pthread_t t, uint64_t deadline_ns)
{
	/* tries, not pthread_clockjoin_np: ThreadSanitizer knows no join it does not intercept */
	for (;;) {
		if (pthread_tryjoin_np(t, NULL) == 0)
			return 1;
		if (gice_now_ns() >= deadline_ns)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	pthread_detach(t);
	return 0;
}

uint64_t gice_random_u64(void)
{
	uint64_t v = 0;

	while (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		;
	return v;
}

#ifdef __SANITIZE_THREAD__
char gice_tsan_job; /* the token of tsan.h */
#endif
