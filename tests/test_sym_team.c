/* Description: teams and barriers (issue 10), on 4 devices of one process. Team split strided
 * and by color and key, with rank translation between teams, device ids and the local devices
 * of a team; the dissemination team barrier (and gice_team_sync) holding every member back, on
 * the world, a team of 3 and a team of 1, over the NVLink plane and through the fabric
 * (GICE_PLANE=net), and failing from a device not in the team; the grid barrier of one
 * cooperative launch holding every block back, and timing out when a block returned. Team
 * barriers across processes: test_sym_procs.c. */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/gice.h"
#include "tests/test_sym.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- teams */

START_TEST(split_strided_and_by_color_with_rank_translation)
{
	gice_team_t *w = gice_team_world(), *s, *c[NDEV];
	const int colors[NDEV] = {0, 1, 0, GICE_TEAM_NO_COLOR}, keys[NDEV] = {0, 5, -2, 0};

	ck_assert_int_eq(gice_team_split_strided(w, 1, 2, 2, &s), GICE_OK);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(gice_team_size(s), 2);
	ck_assert_int_eq(gice_team_rank(s, dev[1]), 0);
	ck_assert_int_eq(gice_team_rank(s, dev[3]), 1);
	ck_assert_int_eq(gice_team_rank(s, dev[0]), -1);
	ck_assert_int_eq(gice_team_translate_rank(s, 1, w), 3);
	ck_assert_int_eq(gice_team_translate_rank(w, 2, s), -1);
	ck_assert_int_eq(gice_team_translate_rank(w, 9, s), -1);
	ck_assert_uint_eq(gice_team_device_id(s, 1), gice_device_id(dev[3]));
	ck_assert_uint_eq(gice_team_device_id(s, 2), UINT32_MAX);
	ck_assert_uint_eq(gice_team_n_local(s), 2);
	ck_assert_ptr_eq(gice_team_local(s, 1), dev[3]);

	ck_assert_uint_eq(gice_team_n_local(w), NDEV);
	ck_assert_int_eq(gice_team_split(w, colors, keys, c), GICE_OK);
	ck_assert_ptr_nonnull(c[0]);
	ck_assert_ptr_eq(c[0], c[2]);
	ck_assert_ptr_nonnull(c[1]);
	ck_assert_ptr_ne(c[0], c[1]);
	ck_assert_ptr_null(c[3]);
	ck_assert_uint_eq(gice_team_size(c[0]), 2);
	ck_assert_int_eq(gice_team_rank(c[0], dev[2]), 0); /* key -2 before key 0 */
	ck_assert_int_eq(gice_team_rank(c[0], dev[0]), 1);
	ck_assert_uint_eq(gice_team_size(c[1]), 1);
	ck_assert_int_eq(gice_team_translate_rank(c[0], 0, s), -1);
	ck_assert_int_eq(gice_team_translate_rank(c[1], 0, s), 0);
	ck_assert_int_eq(gice_team_destroy(s), GICE_OK);
	ck_assert_int_eq(gice_team_destroy(c[0]), GICE_OK);
	ck_assert_int_eq(gice_team_destroy(c[1]), GICE_OK);
}
END_TEST

static _Atomic uint32_t bar_slot[NDEV];

struct bar_args {
	gice_team_t *team;
	int sync_only;
};

/* Each iteration: publish it, barrier, every member must have published it. */
static void barrier_kernel(gice_kctx_t *k, void *p)
{
	struct bar_args *a = p;
	uint32_t n = gice_team_size(a->team);

	for (uint32_t it = 1; it <= BAR_ITERS; it++) {
		atomic_store(&bar_slot[gice_team_rank(a->team, k->dev)], it);
		if ((a->sync_only ? gice_team_sync(k, a->team) : gice_team_barrier(k, a->team)))
			return;
		for (uint32_t r = 0; r < n; r++)
			if (atomic_load(&bar_slot[r]) < it) {
				gice_kernel_fail(k, GICE_ERR_INVALID, "a member was behind after the barrier");
				return;
			}
	}
}

START_TEST(team_barrier_holds_every_member_back)
{
	gice_team_t *teams[3] = {gice_team_world()}, *c[NDEV];
	const int colors[NDEV] = {0, 1, 1, 1}, keys[NDEV] = {0};

	/* the world (4: 2 rounds), a team of 3 (2 rounds, not a power of two), a team of 1 */
	ck_assert_int_eq(gice_team_split(teams[0], colors, keys, c), GICE_OK);
	teams[1] = c[1];
	teams[2] = c[0];
	for (int t = 0; t < 3; t++)
		for (int sync_only = 0; sync_only < 2; sync_only++) {
			struct bar_args a = {.team = teams[t], .sync_only = sync_only};
			for (int i = 0; i < NDEV; i++)
				atomic_store(&bar_slot[i], 0);
			for (int i = 0; i < NDEV; i++)
				if (gice_team_rank(teams[t], dev[i]) >= 0)
					ck_assert_int_eq(gice_launch(str[i], barrier_kernel, 1, &a, sizeof(a)), GICE_OK);
			sync_all(GICE_OK);
		}
}
END_TEST

struct nonmember_args {
	gice_team_t *team;
	int *rc;
};

static void nonmember_kernel(gice_kctx_t *k, void *p)
{
	struct nonmember_args *a = p;

	a->rc[0] = gice_team_barrier(k, a->team);
}

START_TEST(team_barrier_from_a_device_not_in_the_team_fails)
{
	static int rc[1];
	gice_team_t *s;

	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 1, 1, 2, &s), GICE_OK);
	struct nonmember_args a = {.team = s, .rc = rc};
	ck_assert_int_eq(gice_launch(str[0], nonmember_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_INVALID);
	ck_assert_int_eq(rc[0], GICE_ERR_INVALID);
}
END_TEST

/* ---------------------------------------------------------------- grid barrier */

static _Atomic uint32_t grid_count;

static void grid_kernel(gice_kctx_t *k, void *p)
{
	(void)p;
	for (uint32_t it = 1; it <= 100; it++) {
		atomic_fetch_add(&grid_count, 1);
		if (gice_grid_sync(k))
			return;
		if (atomic_load(&grid_count) < it * k->nblocks) {
			gice_kernel_fail(k, GICE_ERR_INVALID, "a block was behind after gice_grid_sync");
			return;
		}
	}
}

START_TEST(grid_sync_holds_every_block_of_a_cooperative_launch)
{
	uint32_t sms;

	ck_assert_int_eq(gice_device_sms(dev[0], &sms), GICE_OK);
	atomic_store(&grid_count, 0);
	ck_assert_int_eq(gice_launch_cooperative(str[0], grid_kernel, sms, NULL, 0), GICE_OK);
	ck_assert_int_eq(gice_launch_cooperative(str[0], grid_kernel, sms, NULL, 0), GICE_OK); /* record reused */
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_uint_eq(atomic_load(&grid_count), 200 * sms);
}
END_TEST

static void early_return_kernel(gice_kctx_t *k, void *p)
{
	(void)p;
	if (k->block == 0)
		gice_grid_sync(k);
}

/* No NVLink plane: team barriers signal through the fabric. */
static void setup_net(void)
{
	setenv("GICE_PLANE", "net", 1);
	setup();
}

/* One device and a short stall timeout (a loaded machine's watchdog still sees its CTs move). */
static void setup_short_timeout(void)
{
	setenv("GICE_TIMEOUT_MS", "1000", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
	ck_assert_int_eq(gice_device_open(&a, &dev[0]), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[0], &str[0]), GICE_OK);
}

static void teardown_one(void)
{
	ck_assert_int_eq(gice_stream_destroy(str[0]), GICE_OK);
	ck_assert_int_eq(gice_device_close(dev[0]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

START_TEST(grid_sync_with_a_block_that_returned_times_out)
{
	ck_assert_int_eq(gice_launch_cooperative(str[0], early_return_kernel, 2, NULL, 0), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_TIMED_OUT);
}
END_TEST

int main(void)
{
	struct sym_case cases[] = {
		{"team_split", split_strided_and_by_color_with_rank_translation, 1, setup, NULL},
		{"team_barrier", team_barrier_holds_every_member_back, 1, setup, NULL},
		{"team_barrier_net", team_barrier_holds_every_member_back, 1, setup_net, NULL},
		{"team_nonmember", team_barrier_from_a_device_not_in_the_team_fails, 1, setup, NULL},
		{"grid_sync", grid_sync_holds_every_block_of_a_cooperative_launch, 1, setup, NULL},
		{"grid_sync_timeout", grid_sync_with_a_block_that_returned_times_out, 1, setup_short_timeout, teardown_one},
	};

	return test_run_suite(sym_suite("sym_team", cases, sizeof(cases) / sizeof(cases[0])));
}
