/* Description: the storage path (files into and out of device memory) and the device memory pools.
 * - checkpoint: a 256 MiB device buffer filled by a kernel whose blocks' trigger writes fire an
 *   armed file write; a stream write on another device fires an armed file read of that file,
 *   the read's completion releases the next kernel, which finds every byte (bit-exact); over
 *   O_DIRECT, over the page cache (GICE_IO_DIRECT=0), and with the psync backend; the
 *   io_* counters say which path moved the bytes; and checkpointed by one rank, reloaded by
 *   another (two processes of a job);
 * - errors: a read past the end of a short file, an I/O error (EIO: /proc/self/mem where nothing
 *   is mapped), a missing file, a write to a file opened read-only, an operation on a file that is not open, and a full file system (a 1 MiB tmpfs
 *   the test mounts: root only) give the exact status in the completion counter and the message
 *   (file, offset, length, errno) in gice_file_error;
 * - order: a checkpoint armed on the signal counter of strong-signalled puts into the buffer (the
 *   rule of docs/storage.md) writes what the puts brought;
 * - pools: GICE_COMM_POOL_BYTES splits device memory; allocation past a pool's quota fails with
 *   GICE_ERR_NO_MEMORY and a message naming the pool, the request, the free and largest free
 *   bytes; usage in gice_pool_usage and the pool_* counters; a quota leaving no compute pool is
 *   GICE_ERR_CONFIG.
 * Every case runs in its own forked process (Check's default) and sets its environment before
 * gice_init. Files go to a directory made under $TMPDIR (default /tmp). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"
#include "tests/test_util.h"

#define MIB (1024u * 1024u)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define CKPT (256u * MIB)
#define BLOCKS 8u

static char dir[256];

static void make_dir(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/gice-test-storage-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void path_of(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static void remove_dir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static uint64_t word_at(uint64_t i) { return i * 0x9e3779b97f4a7c15ull ^ 0x5a5a5a5a12345678ull; }

struct fill_args {
	uint64_t *buf;
	uint64_t words;
	gice_trigger_t trig; /* each block adds 1 when its part is written */
	uint64_t *bad;       /* verify: mismatches per block */
};

static void fill_kernel(gice_kctx_t *k, void *p)
{
	struct fill_args *a = p;
	uint64_t per = a->words / gice_grid_dim(k), from = per * gice_block_idx(k);

	for (uint64_t i = from; i < from + per; i++)
		a->buf[i] = word_at(i);
	gice_trigger_add(k, a->trig, 1); /* the checkpoint fires when every block has added */
}

static void verify_kernel(gice_kctx_t *k, void *p)
{
	struct fill_args *a = p;
	uint64_t per = a->words / gice_grid_dim(k), from = per * gice_block_idx(k), bad = 0;

	for (uint64_t i = from; i < from + per; i++)
		bad += a->buf[i] != word_at(i);
	a->bad[gice_block_idx(k)] = bad;
}

static void open_dev(uint64_t hbm, gice_device_t **d)
{
	gice_device_attr_t at = {.n_sms = 2, .n_cts = 2, .hbm_bytes = hbm};

	ck_assert_int_eq(gice_device_open(&at, d), GICE_OK);
}

/* ---------------------------------------------------------------- checkpoint and reload */

static const char *const ckpt_env[][2] = {
	{"GICE_IO_DIRECT", "1"},  /* O_DIRECT: the buffer, offset and length are 4 KiB aligned */
	{"GICE_IO_DIRECT", "0"},  /* the page cache */
	{"GICE_IO_BACKEND", "psync"},
};

START_TEST(checkpoint_by_trigger_reloads_bit_exact_on_another_device)
{
	gice_device_t *A, *B;
	gice_stream_t *sa, *sb;
	gice_counter_t ta, wa, tb, rb;
	gice_file_t fa, fb;
	gice_desc_t da, db;
	void *pa, *pb, *pbad;
	char path[300];
	gice_stats_t st;

	setenv(ckpt_env[_i][0], ckpt_env[_i][1], 1);
	make_dir();
	path_of(path, sizeof(path), "ckpt.bin");
	ck_assert_int_eq(gice_init(), GICE_OK);
	open_dev(CKPT + 4 * MIB, &A);
	open_dev(CKPT + 4 * MIB, &B);
	ck_assert_int_eq(gice_mem_alloc(A, CKPT, &pa), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(B, CKPT, &pb), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(B, 4096, &pbad), GICE_OK);
	memset(pb, 0, CKPT);
	ck_assert_int_eq(gice_stream_create(A, &sa), GICE_OK);
	ck_assert_int_eq(gice_stream_create(B, &sb), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &ta), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &wa), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &tb), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &rb), GICE_OK);
	ck_assert_int_eq(gice_file_open(A, path, GICE_FILE_WRITE | GICE_FILE_CREATE | GICE_FILE_TRUNC, &fa), GICE_OK);

	/* A: the blocks' trigger writes start the checkpoint */
	gice_op_t w = {.type = GICE_OP_FILE_WRITE, .local = pa, .bytes = CKPT, .rkey = fa, .roff = 0,
		       .signal = GICE_NO_COUNTER, .completion = wa};
	ck_assert_int_eq(gice_arm(A, ta, BLOCKS, 0, &w, &da), GICE_OK);
	struct fill_args fa_args = {.buf = pa, .words = CKPT / 8, .trig = ta};
	ck_assert_int_eq(gice_launch(sa, fill_kernel, BLOCKS, &fa_args, sizeof(fa_args)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(sa, test_scaled(60000)), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, wa, GICE_CMP_GE, 1, test_scaled(120000), NULL), GICE_OK);

	/* B: a stream's counter write fires the load; its completion releases the verifying kernel */
	ck_assert_int_eq(gice_file_open(B, path, GICE_FILE_READ, &fb), GICE_OK);
	gice_op_t r = {.type = GICE_OP_FILE_READ, .local = pb, .bytes = CKPT, .rkey = fb, .roff = 0,
		       .signal = GICE_NO_COUNTER, .completion = rb};
	ck_assert_int_eq(gice_arm(B, tb, 1, 0, &r, &db), GICE_OK);
	ck_assert_int_eq(gice_stream_write_value(sb, tb, 1, 1), GICE_OK);
	ck_assert_int_eq(gice_stream_wait_value(sb, rb, GICE_CMP_GE, 1, test_scaled(120000)), GICE_OK);
	struct fill_args vb = {.buf = pb, .words = CKPT / 8, .trig = tb, .bad = pbad};
	memset(pbad, 0xff, BLOCKS * 8);
	ck_assert_int_eq(gice_launch(sb, verify_kernel, BLOCKS, &vb, sizeof(vb)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(sb, test_scaled(120000)), GICE_OK);
	for (uint32_t b = 0; b < BLOCKS; b++)
		ck_assert_msg(((uint64_t *)pbad)[b] == 0, "block %u: %llu words differ", b,
			      (unsigned long long)((uint64_t *)pbad)[b]);

	/* which path moved the bytes */
	ck_assert_int_eq(gice_device_stats(A, &st), GICE_OK);
	ck_assert_uint_eq(st.io_writes, 1);
	ck_assert_uint_eq(st.io_write_bytes, CKPT);
	ck_assert_uint_eq(st.io_failed, 0);
	ck_assert_uint_eq(st.io_direct_bytes, strcmp(ckpt_env[_i][1], "0") ? CKPT : 0);
	ck_assert_int_eq(gice_device_stats(B, &st), GICE_OK);
	ck_assert_uint_eq(st.io_reads, 1);
	ck_assert_uint_eq(st.io_read_bytes, CKPT);
	ck_assert_uint_eq(st.io_direct_bytes, strcmp(ckpt_env[_i][1], "0") ? CKPT : 0);
	struct stat sbuf;
	ck_assert_int_eq(stat(path, &sbuf), 0);
	ck_assert_uint_eq((uint64_t)sbuf.st_size, CKPT);

	ck_assert_int_eq(gice_file_close(A, fa), GICE_OK);
	ck_assert_int_eq(gice_file_close(B, fb), GICE_OK);
	ck_assert_int_eq(gice_stream_destroy(sa), GICE_OK);
	ck_assert_int_eq(gice_stream_destroy(sb), GICE_OK);
	ck_assert_int_eq(gice_device_close(A), GICE_OK);
	ck_assert_int_eq(gice_device_close(B), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	remove_dir();
}
END_TEST

/* Rank 0 checkpoints by trigger, rank 1 (another process) reloads by trigger and checks. */
static int ckpt_rank(int rank, int size)
{
	gice_device_t *d;
	gice_stream_t *s;
	gice_counter_t trig, done;
	gice_file_t f;
	gice_desc_t desc;
	void *buf, *bad;
	char path[300];

	path_of(path, sizeof(path), "ranks.bin");
	FAILIF(gice_init(), "gice_init");
	gice_device_attr_t at = {.n_sms = 2, .n_cts = 2, .hbm_bytes = CKPT + 4 * MIB};
	FAILIF(gice_device_open(&at, &d), "device open");
	FAILIF(gice_stream_create(d, &s) || gice_mem_alloc(d, CKPT, &buf) || gice_mem_alloc(d, 4096, &bad) ||
		       gice_counter_alloc(d, &trig) || gice_counter_alloc(d, &done), "set-up");
	if (rank == 0) {
		FAILIF(gice_file_open(d, path, GICE_FILE_WRITE | GICE_FILE_CREATE | GICE_FILE_TRUNC, &f), "open");
		gice_op_t w = {.type = GICE_OP_FILE_WRITE, .local = buf, .bytes = CKPT, .rkey = f,
			       .signal = GICE_NO_COUNTER, .completion = done};
		FAILIF(gice_arm(d, trig, BLOCKS, 0, &w, &desc), "arm write");
		struct fill_args a = {.buf = buf, .words = CKPT / 8, .trig = trig};
		FAILIF(gice_launch(s, fill_kernel, BLOCKS, &a, sizeof(a)), "launch fill");
		FAILIF(gice_stream_wait_value(s, done, GICE_CMP_GE, 1, test_scaled(120000)), "stream wait");
		FAILIF(gice_stream_sync(s, test_scaled(120000)), "checkpoint");
	}
	FAILIF(gice_barrier(), "barrier after the checkpoint");
	if (rank == 1) {
		memset(buf, 0, CKPT);
		memset(bad, 0xff, BLOCKS * 8);
		FAILIF(gice_file_open(d, path, GICE_FILE_READ, &f), "open");
		gice_op_t r = {.type = GICE_OP_FILE_READ, .local = buf, .bytes = CKPT, .rkey = f,
			       .signal = GICE_NO_COUNTER, .completion = done};
		FAILIF(gice_arm(d, trig, 1, 0, &r, &desc), "arm read");
		struct fill_args v = {.buf = buf, .words = CKPT / 8, .trig = trig, .bad = bad};
		FAILIF(gice_stream_write_value(s, trig, 1, 1) ||
			       gice_stream_wait_value(s, done, GICE_CMP_GE, 1, test_scaled(120000)) ||
			       gice_launch(s, verify_kernel, BLOCKS, &v, sizeof(v)), "enqueue");
		FAILIF(gice_stream_sync(s, test_scaled(120000)), "reload");
		for (uint32_t b = 0; b < BLOCKS; b++)
			FAILIF(((uint64_t *)bad)[b], "block %u: %llu words differ", b,
			       (unsigned long long)((uint64_t *)bad)[b]);
	}
	FAILIF(gice_file_close(d, f), "close");
	FAILIF(gice_barrier(), "barrier before closing");
	FAILIF(gice_stream_destroy(s) || gice_device_close(d) || gice_finalize(), "teardown");
	(void)size;
	return 0;
}

START_TEST(checkpoint_by_one_rank_reloads_bit_exact_in_another)
{
	int st[2];

	make_dir();
	run_job(2, 2, ckpt_rank, NULL, NULL, st, NULL);
	ck_assert_msg(st[0] == 0 && st[1] == 0, "rank exit status %d, %d", st[0], st[1]);
	remove_dir();
}
END_TEST

/* ---------------------------------------------------------------- errors */

static gice_device_t *D;
static void *dbuf;
static gice_counter_t dc;

static void err_open(void)
{
	make_dir();
	ck_assert_int_eq(gice_init(), GICE_OK);
	open_dev(16 * MIB, &D);
	ck_assert_int_eq(gice_mem_alloc(D, 4 * MIB, &dbuf), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &dc), GICE_OK);
}

static void err_close(void)
{
	ck_assert_int_eq(gice_device_close(D), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	remove_dir();
}

/* Post a file operation; wait for its completion; return the status it recorded. */
static int post_wait(gice_op_type_t type, gice_file_t f, uint64_t off, size_t bytes)
{
	gice_op_t op = {.type = type, .local = dbuf, .bytes = bytes, .rkey = f, .roff = off,
			.signal = GICE_NO_COUNTER, .completion = dc};
	gice_counter_state_t cs;

	ck_assert_int_eq(gice_counter_reset(D, dc), GICE_OK);
	ck_assert_int_eq(gice_post(D, &op), GICE_OK);
	int rc = gice_counter_wait(D, dc, GICE_CMP_GE, 1, test_scaled(20000), NULL);
	ck_assert_int_eq(gice_counter_get(D, dc, &cs), GICE_OK);
	ck_assert_msg(rc == cs.status, "wait %s, counter status %s", gice_status_name(rc),
		      gice_status_name(cs.status));
	return cs.status;
}

static void write_file(const char *path, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char b[4096];

	ck_assert_int_ge(fd, 0);
	memset(b, 7, sizeof(b));
	for (size_t done = 0; done < len; done += MIN(len - done, sizeof(b)))
		ck_assert_int_eq(write(fd, b, MIN(len - done, sizeof(b))), (ssize_t)MIN(len - done, sizeof(b)));
	close(fd);
}

START_TEST(read_past_end_of_short_file_fails_out_of_bounds)
{
	char path[300], msg[512], want[600];
	gice_file_t f;

	err_open();
	path_of(path, sizeof(path), "short.bin");
	write_file(path, 10000);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_OK);
	/* 64 KiB from 0: 10000 bytes come (O_DIRECT, short), the rest finds the end */
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 65536), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(gice_file_error(D, f, msg, sizeof(msg)), GICE_ERR_OUT_OF_BOUNDS);
	snprintf(want, sizeof(want), "read of 65536 bytes at offset 0 of %s (device offset ", path);
	ck_assert_msg(strstr(msg, want), "message: %s", msg);
	ck_assert_msg(strstr(msg, "failed: end of file at offset 10000 (55536 bytes short, errno 0)"), "message: %s",
		      msg);
	/* wholly past the end */
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 20000, 100), GICE_ERR_OUT_OF_BOUNDS);
	gice_file_error(D, f, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "read of 100 bytes at offset 20000 of ") &&
			      strstr(msg, "end of file at offset 20000 (100 bytes short, errno 0)"), "message: %s", msg);
	/* the first 10000 are fine */
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 10000), GICE_OK);
	ck_assert_int_eq(((uint8_t *)dbuf)[9999], 7);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	err_close();
}
END_TEST

/* /proc/self/mem at an address nothing is mapped at reads EIO */
START_TEST(io_error_fails_io_naming_errno)
{
	char msg[512];
	gice_file_t f;

	err_open();
	ck_assert_int_eq(gice_file_open(D, "/proc/self/mem", GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 4096, 4096), GICE_ERR_IO);
	ck_assert_int_eq(gice_file_error(D, f, msg, sizeof(msg)), GICE_ERR_IO);
	ck_assert_msg(strstr(msg, "read of 4096 bytes at offset 4096 of /proc/self/mem (device offset ") &&
			      strstr(msg, "at offset 4096, length 4096: Input/output error (errno 5)"), "message: %s", msg);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	err_close();
}
END_TEST

START_TEST(missing_file_fails_open_not_found)
{
	char path[300];
	gice_file_t f = 12345;

	err_open();
	path_of(path, sizeof(path), "missing.bin");
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_ERR_NOT_FOUND);
	ck_assert_uint_eq(f, 12345); /* untouched */
	err_close();
}
END_TEST

START_TEST(write_to_read_only_file_fails_access)
{
	char path[300], msg[512];
	gice_file_t f;

	err_open();
	path_of(path, sizeof(path), "ro.bin");
	write_file(path, 8192);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_WRITE, f, 0, 4096), GICE_ERR_ACCESS);
	ck_assert_int_eq(gice_file_error(D, f, msg, sizeof(msg)), GICE_ERR_ACCESS);
	ck_assert_msg(strstr(msg, "write of 4096 bytes at offset 0 of ") && strstr(msg, path) &&
			      strstr(msg, "at offset 0, length 4096: Bad file descriptor (errno 9)"), "message: %s", msg);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	/* a file the process may not write: refused at open (root may write anything) */
	if (geteuid() != 0) {
		ck_assert_int_eq(chmod(path, 0444), 0);
		ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_WRITE, &f), GICE_ERR_ACCESS);
	}
	err_close();
}
END_TEST

START_TEST(operation_on_a_file_not_open_fails_invalid)
{
	char path[300];
	gice_file_t f;

	err_open();
	path_of(path, sizeof(path), "x.bin");
	write_file(path, 4096);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f + 7, 0, 4096), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 4096), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_file_close(D, f), GICE_ERR_INVALID);
	err_close();
}
END_TEST

/* root only (main leaves it out otherwise): a 1 MiB tmpfs fills up */
START_TEST(write_to_a_full_file_system_fails_no_space)
{
	char mnt[300], path[400], msg[512];
	gice_file_t f;

	err_open();
	path_of(mnt, sizeof(mnt), "small");
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_msg(mount("tmpfs", mnt, "tmpfs", 0, "size=1m") == 0, "mount tmpfs on %s: %s", mnt, strerror(errno));
	snprintf(path, sizeof(path), "%s/full.bin", mnt);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_WRITE | GICE_FILE_CREATE, &f), GICE_OK);
	int rc = post_wait(GICE_OP_FILE_WRITE, f, 0, 2 * MIB);
	gice_file_error(D, f, msg, sizeof(msg));
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	umount2(mnt, MNT_DETACH);
	ck_assert_int_eq(rc, GICE_ERR_NO_SPACE);
	ck_assert_msg(strstr(msg, "write of 2097152 bytes at offset 0 of ") && strstr(msg, path) &&
			      strstr(msg, ": No space left on device (errno 28)"), "message: %s", msg);
	err_close();
}
END_TEST

/* ---------------------------------------------------------------- order with puts */

/* The rule of docs/storage.md: a checkpoint of a buffer that puts fill is armed on the signal
 * counter of those puts, signalled strong, at the count of puts: it fires after all have landed. */
START_TEST(checkpoint_armed_on_strong_signal_sees_every_put)
{
	enum { N = 16, PIECE = 256 * 1024 };
	gice_device_t *A, *B;
	void *src, *tgt, *back;
	uint64_t ka, kb;
	gice_conn_t ab;
	gice_counter_t sig, wc, pc;
	gice_file_t f;
	gice_desc_t desc;
	char path[300];

	make_dir();
	path_of(path, sizeof(path), "puts.bin");
	ck_assert_int_eq(gice_init(), GICE_OK);
	open_dev(16 * MIB, &A);
	open_dev(16 * MIB, &B);
	ck_assert_int_eq(gice_mem_alloc(A, N * PIECE, &src), GICE_OK);
	ck_assert_int_eq(gice_mem_register(A, src, N * PIECE, &ka), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(B, N * PIECE, &tgt), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(B, N * PIECE, &back), GICE_OK);
	ck_assert_int_eq(gice_mem_register(B, tgt, N * PIECE, &kb), GICE_OK);
	memset(tgt, 0, N * PIECE);
	for (uint32_t i = 0; i < N * PIECE / 8; i++)
		((uint64_t *)src)[i] = word_at(i);
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &ab), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &sig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &wc), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &pc), GICE_OK);
	ck_assert_int_eq(gice_file_open(B, path, GICE_FILE_READ | GICE_FILE_WRITE | GICE_FILE_CREATE, &f), GICE_OK);
	gice_op_t w = {.type = GICE_OP_FILE_WRITE, .local = tgt, .bytes = N * PIECE, .rkey = f,
		       .signal = GICE_NO_COUNTER, .completion = wc};
	ck_assert_int_eq(gice_arm(B, sig, N, 0, &w, &desc), GICE_OK);
	for (uint32_t i = 0; i < N; i++) {
		gice_op_t p = {.type = GICE_OP_PUT, .conn = ab, .local = (uint8_t *)src + i * PIECE, .bytes = PIECE,
			       .rkey = kb, .roff = i * PIECE, .value = 1, .signal = sig,
			       .signal_flags = GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, .completion = pc};
		ck_assert_int_eq(gice_post(A, &p), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(B, wc, GICE_CMP_GE, 1, test_scaled(30000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, pc, GICE_CMP_GE, N, test_scaled(30000), NULL), GICE_OK);
	/* read the file back into another buffer: every put is in it */
	gice_op_t r = {.type = GICE_OP_FILE_READ, .local = back, .bytes = N * PIECE, .rkey = f,
		       .signal = GICE_NO_COUNTER, .completion = wc};
	ck_assert_int_eq(gice_post(B, &r), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, wc, GICE_CMP_GE, 2, test_scaled(30000), NULL), GICE_OK);
	ck_assert_int_eq(memcmp(back, src, N * PIECE), 0);
	ck_assert_int_eq(gice_file_close(B, f), GICE_OK);
	ck_assert_int_eq(gice_device_close(A), GICE_OK);
	ck_assert_int_eq(gice_device_close(B), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	remove_dir();
}
END_TEST

/* ---------------------------------------------------------------- pools */

static void comm_2m(void)
{
	void *p;

	ck_assert_int_eq(gice_pool_alloc(D, GICE_POOL_COMM, 2 * MIB, &p), GICE_ERR_NO_MEMORY);
}

START_TEST(allocation_past_the_comm_quota_fails_naming_the_pool)
{
	void *c1, *m1, *m2;
	gice_pool_usage_t u;
	gice_stats_t st;
	char log[2048];

	setenv("GICE_COMM_POOL_BYTES", "4m", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	open_dev(16 * MIB, &D);
	ck_assert_int_eq(gice_pool_alloc(D, GICE_POOL_COMM, 3 * MIB, &c1), GICE_OK);
	test_logged(comm_2m, log, sizeof(log));
	ck_assert_msg(strstr(log, "communication pool exhausted: alloc of 2097152 bytes aligned to 256, 1048576 bytes "
				  "free in the pool, largest free block 1048576 (pool of 4194304 bytes)"), "log: %s", log);
	/* the compute pool is the other 12 MiB, whole */
	ck_assert_int_eq(gice_mem_alloc(D, 12 * MIB, &m1), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(D, 256, &m2), GICE_ERR_NO_MEMORY);
	ck_assert_int_eq(gice_pool_usage(D, GICE_POOL_COMM, &u), GICE_OK);
	ck_assert_uint_eq(u.bytes, 4 * MIB);
	ck_assert_uint_eq(u.used, 3 * MIB);
	ck_assert_uint_eq(u.free, 1 * MIB);
	ck_assert_uint_eq(u.largest_free, 1 * MIB);
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.pool_comm_used, 3 * MIB);
	ck_assert_uint_eq(st.pool_comp_used, 12 * MIB);
	ck_assert_uint_eq(st.pool_comp_free, 0);
	/* freed: whole again; fragmentation shows in largest_free */
	ck_assert_int_eq(gice_mem_free(D, c1), GICE_OK);
	ck_assert_int_eq(gice_pool_usage(D, GICE_POOL_COMM, &u), GICE_OK);
	ck_assert_uint_eq(u.free, 4 * MIB);
	ck_assert_uint_eq(u.largest_free, 4 * MIB);
	ck_assert_int_eq(gice_pool_usage(D, 7, &u), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_device_close(D), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}
END_TEST

START_TEST(comm_quota_leaving_no_compute_pool_is_a_config_error)
{
	gice_device_t *d;
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 1, .hbm_bytes = 8 * MIB};

	setenv("GICE_COMM_POOL_BYTES", "8m", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&at, &d), GICE_ERR_CONFIG);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage");
	TCase *tc = tcase_create("checkpoint");

	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, checkpoint_by_trigger_reloads_bit_exact_on_another_device, 0,
			    (int)(sizeof(ckpt_env) / sizeof(ckpt_env[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("checkpoint_ranks");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, checkpoint_by_one_rank_reloads_bit_exact_in_another);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, read_past_end_of_short_file_fails_out_of_bounds);
	tcase_add_test(tc, missing_file_fails_open_not_found);
	tcase_add_test(tc, io_error_fails_io_naming_errno);
	tcase_add_test(tc, write_to_read_only_file_fails_access);
	tcase_add_test(tc, operation_on_a_file_not_open_fails_invalid);
	suite_add_tcase(s, tc);
	if (geteuid() == 0) {
		tc = tcase_create("full_disk");
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, write_to_a_full_file_system_fails_no_space);
		suite_add_tcase(s, tc);
	} else {
		test_skip_cases(1, "full_disk: mounting a small tmpfs needs root");
	}
	tc = tcase_create("order");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, checkpoint_armed_on_strong_signal_sees_every_put);
	suite_add_tcase(s, tc);
	tc = tcase_create("pools");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, allocation_past_the_comm_quota_fails_naming_the_pool);
	tcase_add_test(tc, comm_quota_leaving_no_compute_pool_is_a_config_error);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
