/* Description: a device whose link is stuck in a call that does not return still closes.
 * A kernel's SM thread that steps the link runs the provider's code; libfabric 1.17's shm spins
 * there forever on a lock in the shared memory of a process that died holding it. Here a kernel
 * takes the link and never returns, as that thread does. Then:
 * - the watchdog says the link is stuck (the device's error: GICE_ERR_CT_STALLED, "does not
 *   return") within 2x GICE_TIMEOUT_MS;
 * - gice_device_close returns GICE_ERR_CT_STALLED within GICE_TIMEOUT_MS, and logs why (the
 *   device, how long its link has been held, what is left to the process's exit), where it
 *   used to wait forever for the stuck thread; of the device's threads only two still run (the
 *   stuck kernel's SM and its stream, which waits for it): the others were stopped; its counters
 *   join the rank's totals (GICE_STATS at gice_finalize) as a closed device's do;
 * - another device of the process still opens, works and closes, gice_finalize returns, and the
 *   process exits with the stuck thread still spinning;
 * - no shm region named after the process is left in /dev/shm: the endpoints that are never
 *   closed (the abandoned device's, and those kept for what its link may touch, a grave's
 *   included) have their names unlinked, their regions still mapped.
 * And what such a device's link may touch should its call return after all stays valid (a
 * ThreadSanitizer report: a link that came back kicked a peer's trigger memory that
 * gice_finalize had freed): the trigger memory of a peer device that closes after it is still
 * mapped after that close and after gice_finalize, and a kick of it goes through; so is another
 * rank's, which this process attached, after gice_finalize.
 * Time bounds scale with CK_TIMEOUT_MULTIPLIER (sanitizers). */
#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "api/gice.h"
#include "emu/common/common.h" /* gice_clock_ns */
#include "emu/ct_engine/ct_internal.h"
#include "tests/test_job.h"
#include "tests/test_util.h"

#define TIMEOUT_MS 500
#define STR_(x) #x
#define STR(x) STR_(x)

static _Atomic int held;

/* Takes the link (a pass of it, as the kernel's own step does) and never comes back. */
static void hold_link(gice_kctx_t *k, void *arg)
{
	ct_engine_t *e = *(ct_engine_t **)arg;

	(void)k;
	while (!ct_link_trylock(e))
		sched_yield();
	atomic_store(&held, 1);
	for (;;)
		usleep(1000);
}

/* A put to itself and its completion: the device works. */
static void loopback_works(gice_device_t *d)
{
	gice_conn_t c;
	gice_counter_t done;
	uint64_t key;
	void *p;

	ck_assert_int_eq(gice_mem_alloc(d, 8192, &p), GICE_OK);
	ck_assert_int_eq(gice_mem_register(d, p, 8192, &key), GICE_OK);
	ck_assert_int_eq(gice_conn_open(d, gice_device_id(d), NULL, &c), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(d, &done), GICE_OK);
	memset(p, 7, 4096);
	memset((uint8_t *)p + 4096, 0, 4096);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 4096, .rkey = key, .roff = 4096,
			.signal = GICE_NO_COUNTER, .completion = done};
	ck_assert_int_eq(gice_post(d, &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(d, done, GICE_CMP_GE, 1, (int)test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(memcmp(p, (uint8_t *)p + 4096, 4096), 0);
}

static int shm_named(void);
static int shm_mapped_unlinked(void);

START_TEST(test_close_returns_with_a_stuck_link)
{
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 2, .hbm_bytes = 16u << 20, .provider = "shm"};
	gice_device_t *d, *d2;
	gice_stream_t *s;
	gice_error_info_t info;
	struct test_log close_log;
	char buf[16], log[4096];

	snprintf(buf, sizeof(buf), "%d", TIMEOUT_MS);
	setenv("GICE_TIMEOUT_MS", buf, 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&a, &d), GICE_OK);
	ck_assert_int_eq(gice_stream_create(d, &s), GICE_OK);
	loopback_works(d); /* counters to find in the totals */
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(d, &st), GICE_OK);
	ck_assert_uint_eq(st.ops_done, 1);
	ct_engine_t *e = d->ct;
	ck_assert_int_eq(gice_launch(s, hold_link, 1, &e, sizeof(e)), GICE_OK);
	while (!atomic_load(&held))
		usleep(1000);
	uint64_t t_held = gice_clock_ns() / 1000000;

	/* the watchdog's verdict */
	int told = 0;
	while (!told && gice_clock_ns() / 1000000 < t_held + test_scaled(2 * TIMEOUT_MS) + 200) {
		usleep(5000);
		told = gice_device_error(d, &info) == GICE_OK && info.status == GICE_ERR_CT_STALLED && info.message &&
		       strstr(info.message, "does not return");
	}
	ck_assert_msg(told, "no stuck-link verdict within %llu ms (device error: %s)",
		      (unsigned long long)(gice_clock_ns() / 1000000 - t_held), gice_status_name(info.status));

	/* the close returns, and says why it left the device as it is */
	test_log_begin(&close_log);
	uint64_t t0 = gice_clock_ns() / 1000000;
	int rc = gice_device_close(d);
	uint64_t took = gice_clock_ns() / 1000000 - t0;
	test_log_end(&close_log, log, sizeof(log));
	fprintf(stderr, "close: %s after %llu ms\n", gice_status_name(rc), (unsigned long long)took);
	ck_assert_msg(rc == GICE_ERR_CT_STALLED, "close: %s", gice_status_name(rc));
	ck_assert_msg(took <= test_scaled(TIMEOUT_MS), "close took %llu ms", (unsigned long long)took);
	ck_assert_msg(strstr(log, "device 0: closed with its link held for") &&
			      strstr(log, "by a call that does not return") &&
			      strstr(log, "2 of its threads still run") && /* the kernel's SM, its stream */
			      strstr(log, "its threads, endpoint and memory are left to the process's exit"),
		      "close's log:\n%s", log);
	pthread_mutex_lock(&api_g.lock);
	gice_stats_t kept = api_g.closed_stats;
	pthread_mutex_unlock(&api_g.lock);
	ck_assert_uint_eq(kept.ops_done, st.ops_done);
	ck_assert_uint_ge(kept.tx_pkts, st.tx_pkts);
	ck_assert_uint_ge(kept.rx_pkts, st.rx_pkts);

	/* the process goes on: another device works and closes, and the job ends */
	ck_assert_int_eq(gice_device_open(&a, &d2), GICE_OK);
	loopback_works(d2);
	ck_assert_int_eq(gice_device_close(d2), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	/* neither endpoint was closed (d2's is kept, as the stuck link may touch it), and the exit
	 * closes none: their regions' names are gone already, the regions still mapped */
	ck_assert_msg(shm_named() == 0, "%d shm region(s) named after pid %d left in /dev/shm", shm_named(),
		      (int)getpid());
	ck_assert_int_eq(shm_mapped_unlinked(), 2);
}
END_TEST

/* What descriptor fd is (its /proc/self/fd link: a memfd's name), into target; 0, or -1. */
static int fd_target(int fd, char *target, size_t size)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, size - 1);
	if (n <= 0)
		return -1;
	target[n] = 0;
	return 0;
}

/* Lines of /proc/self/maps that contain has (NULL: any) and end with tail. */
static int maps_lines(const char *has, const char *tail)
{
	char line[512];
	int n = 0;
	size_t tl = strlen(tail);
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		size_t len = strlen(line);
		n += (!has || strstr(line, has)) && len >= tl && !strcmp(line + len - tl, tail);
	}
	if (f)
		fclose(f);
	return n;
}

/* Whether target is mapped in this process (a line of /proc/self/maps ends with it). */
static int mapped(const char *target) { return maps_lines(NULL, target) > 0; }

/* The shm regions named after this process left in /dev/shm (libfabric's shm: PID:DOMAIN:EP),
 * and how many of them are still mapped here though unlinked ("(deleted)" in /proc/self/maps). */
static int shm_named(void)
{
	char prefix[24];
	int n = 0;
	DIR *dir = opendir("/dev/shm");
	struct dirent *de;

	snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
	while (dir && (de = readdir(dir)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	if (dir)
		closedir(dir);
	return n;
}

static int shm_mapped_unlinked(void)
{
	char prefix[40];

	snprintf(prefix, sizeof(prefix), "/dev/shm/%d:", (int)getpid());
	return maps_lines(prefix, "(deleted)");
}

/* Hold d's link with a kernel until the device is judged stuck; 0, or -1 if it never is. */
static int stick(gice_device_t *d, ct_engine_t **e)
{
	gice_stream_t *s;
	uint64_t held_ns;

	if (gice_stream_create(d, &s) || gice_launch(s, hold_link, 1, e, sizeof(*e)))
		return -1;
	uint64_t t0 = gice_clock_ns() / 1000000;
	while (!ct_engine_link_stuck(*e, &held_ns))
		if (gice_clock_ns() / 1000000 > t0 + test_scaled(4 * TIMEOUT_MS) + 200)
			return -1;
		else
			usleep(5000);
	return 0;
}

START_TEST(test_what_a_stuck_link_may_touch_stays)
{
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 2, .hbm_bytes = 16u << 20, .provider = "shm"};
	gice_device_t *d, *peer, *early;
	char buf[16], target[256];

	snprintf(buf, sizeof(buf), "%d", TIMEOUT_MS);
	setenv("GICE_TIMEOUT_MS", buf, 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&a, &d), GICE_OK);
	ck_assert_int_eq(gice_device_open(&a, &peer), GICE_OK); /* wired to d: d's link kicks it */
	/* closed while the others are open: its endpoint waits for the last of them (a grave),
	 * and then, d abandoned, for the process's exit */
	ck_assert_int_eq(gice_device_open(&a, &early), GICE_OK);
	ck_assert_int_eq(gice_device_close(early), GICE_OK);
	ck_assert_int_eq(shm_named(), 3);
	ct_engine_t *e = d->ct;
	tm_region_t *ptm = e->peers[gice_device_id(peer)].tm;
	ck_assert_ptr_eq(ptm, peer->tm);
	int fd = tm_region_fd(ptm);
	ck_assert_int_eq(fd_target(fd, target, sizeof(target)), 0);
	ck_assert_msg(mapped(target), "%s is not mapped", target);
	ck_assert_int_eq(stick(d, &e), 0);
	ck_assert_int_eq(gice_device_close(d), GICE_ERR_CT_STALLED);

	/* the peer closes, then the job ends: d's link still holds ptm, and may use it */
	ck_assert_int_eq(gice_device_close(peer), GICE_OK);
	ck_assert_msg(mapped(target), "the closed peer's trigger memory (%s) was unmapped under the stuck link", target);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	ck_assert_msg(mapped(target), "gice_finalize unmapped %s", target);
	tm_doorbell_ring(ptm, 0); /* what the link does when its call returns */
	ck_assert_int_eq(tm_region_fd(ptm), fd);
	ck_assert_msg(shm_named() == 0, "%d shm region(s) named after pid %d left in /dev/shm", shm_named(),
		      (int)getpid());
}
END_TEST

/* The same for another rank's trigger memory, which this process attached and gice_finalize
 * releases: rank 0's link is stuck, rank 1 leaves the job. */
static int other_rank_rank(int rank, int size)
{
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 2, .hbm_bytes = 16u << 20, .provider = "shm"};
	gice_device_t *d;
	char target[256];
	int one = 1, all[2];

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(&a, &d), "open");
	ct_engine_t *e = d->ct;
	tm_region_t *ptm = e->peers[gice_device_id_of(1 - rank, 0)].tm;
	FAILIF(!ptm, "no trigger memory of rank %d attached", 1 - rank);
	int fd = tm_region_fd(ptm);
	FAILIF(fd_target(fd, target, sizeof(target)) || !mapped(target), "the peer's trigger memory is not mapped");
	FAILIF(gice_allgather(&one, sizeof(one), all), "allgather"); /* both have looked */
	if (rank == 1) {
		FAILIF(gice_device_close(d), "close");
		FAILIF(gice_finalize(), "finalize");
		return 0;
	}
	FAILIF(stick(d, &e), "the link was never judged stuck");
	FAILIF(gice_device_close(d) != GICE_ERR_CT_STALLED, "close did not abandon the device");
	FAILIF(gice_finalize(), "finalize");
	FAILIF(!mapped(target), "gice_finalize unmapped %s under the stuck link", target);
	tm_doorbell_ring(ptm, 0); /* what the link does when its call returns */
	FAILIF(tm_region_fd(ptm) != fd, "the region handle changed");
	FAILIF(shm_named() != 0, "%d shm region(s) named after pid %d left in /dev/shm", shm_named(), (int)getpid());
	return 0;
}

START_TEST(test_what_a_stuck_link_may_touch_of_another_rank_stays)
{
	static const char *const env[] = {"GICE_TIMEOUT_MS=" STR(TIMEOUT_MS), NULL};
	int st[2];

	run_job(2, 2, other_rank_rank, "shm", env, st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stuck_close");
	TCase *tc = tcase_create("close");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_close_returns_with_a_stuck_link);
	tcase_add_test(tc, test_what_a_stuck_link_may_touch_stays);
	tcase_add_test(tc, test_what_a_stuck_link_may_touch_of_another_rank_stays);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
