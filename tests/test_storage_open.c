/* Description: files opened, closed and synced at run time by operations (GICE_OP_FILE_OPEN,
 * _CLOSE, _SYNC on an id from gice_file_reserve), and the storage watchdog.
 * - open by a kernel: a kernel writes a path into device memory, opens it (gice_file_open_nbi),
 *   waits for the open, reads the file (gice_file_read) and the bytes are the file's; the same
 *   chained by armed descriptors (a trigger fires the open, the open's completion the read);
 * - a missing file and a directory the process may not write (mode 0555; as root, also the
 *   immutable attribute, since root ignores modes) give error completions: GICE_ERR_NOT_FOUND /
 *   GICE_ERR_ACCESS, and gice_file_error names the path and errno; the same id opens the file
 *   once it exists;
 * - ids: an open of an open id is GICE_ERR_BUSY; GICE_OP_FILE_CLOSE keeps the id for the next
 *   open; gice_file_close releases a reserved id;
 * - O_DIRECT or the page cache: on a file opened with O_DIRECT allowed, a read of a range in the
 *   page cache copies it from there (io_direct_bytes 0), a read of a cold range uses O_DIRECT;
 * - sync: an fsync armed on a checkpoint write's completion completes; an fsync the file system
 *   refuses (/proc/self/mem: EINVAL) is an error completion naming the file and errno;
 * - watchdog: a read of a FIFO that nobody writes, and a write of 1 MiB into a FIFO nobody
 *   reads, fail GICE_ERR_TIMED_OUT after GICE_TIMEOUT_MS, the message naming file, offset and
 *   length (io_timeouts counts them); io_uring backend only (psync cannot cancel).
 * Each case runs in its own forked process (Check's default). Files go under $TMPDIR (/tmp). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_util.h"

#define MIB (1024u * 1024u)
#define FILE_BYTES (3 * MIB + 1000) /* O_DIRECT chunks and a page-cache tail */

static char dir[256];
static gice_device_t *D;
static uint8_t *dbuf;  /* 4 MiB of device memory: data */
static char *dpath;    /* 4 KiB of device memory: paths */
static gice_counter_t dc;

static void path_of(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static void setup(void)
{
	const char *t = getenv("TMPDIR");
	void *p;

	snprintf(dir, sizeof(dir), "%s/gice-test-sto-open-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(gice_init(), GICE_OK);
	gice_device_attr_t at = {.n_sms = 2, .n_cts = 2, .hbm_bytes = 16 * MIB};
	ck_assert_int_eq(gice_device_open(&at, &D), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(D, 4 * MIB, &p), GICE_OK);
	dbuf = p;
	ck_assert_int_eq(gice_mem_alloc(D, 4096, &p), GICE_OK);
	dpath = p;
	ck_assert_int_eq(gice_counter_alloc(D, &dc), GICE_OK);
}

static void teardown(void)
{
	char cmd[300];

	ck_assert_int_eq(gice_device_close(D), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static uint8_t byte_at(uint64_t i) { return (uint8_t)(i * 131 + (i >> 12) + 7); }

static void write_file(const char *path, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < len; i++)
		ck_assert_int_ne(fputc(byte_at(i), f), EOF);
	ck_assert_int_eq(fclose(f), 0);
}

/* Post op (its device memory: dbuf, or dpath for an open); wait; the status it recorded. */
static int post_wait(gice_op_type_t type, gice_file_t f, uint64_t value, size_t bytes)
{
	gice_op_t op = {.type = type, .local = type == GICE_OP_FILE_OPEN ? (void *)dpath : dbuf, .bytes = bytes,
			.rkey = f, .value = value, .signal = GICE_NO_COUNTER, .completion = dc};
	gice_counter_state_t cs;

	ck_assert_int_eq(gice_counter_reset(D, dc), GICE_OK);
	ck_assert_int_eq(gice_post(D, &op), GICE_OK);
	int rc = gice_counter_wait(D, dc, GICE_CMP_GE, 1, test_scaled(30000), NULL);
	ck_assert_int_eq(gice_counter_get(D, dc, &cs), GICE_OK);
	ck_assert_msg(rc == cs.status, "wait %s, counter status %s", gice_status_name(rc),
		      gice_status_name(cs.status));
	return cs.status;
}

static int open_by_op(gice_file_t f, const char *path, unsigned flags)
{
	snprintf(dpath, 4096, "%s", path);
	return post_wait(GICE_OP_FILE_OPEN, f, flags, 4096);
}

static void expect_msg(gice_file_t f, int status, const char *part1, const char *part2)
{
	char msg[512];

	ck_assert_int_eq(gice_file_error(D, f, msg, sizeof(msg)), status);
	ck_assert_msg(strstr(msg, part1) && (!part2 || strstr(msg, part2)), "message: %s", msg);
}

static void expect_file_bytes(size_t len)
{
	size_t bad = 0;

	for (size_t i = 0; i < len; i++)
		bad += dbuf[i] != byte_at(i);
	ck_assert_msg(bad == 0, "%zu of %zu bytes differ", bad, len);
}

/* ---------------------------------------------------------------- opens by kernels and triggers */

struct open_read_args {
	char *path;        /* device memory: the kernel writes the path here */
	char name[300];
	gice_file_t file;
	gice_counter_t opened, read;
	uint8_t *dst;
	size_t bytes;
	int st_open, st_read;
};

static void open_read_kernel(gice_kctx_t *k, void *p)
{
	struct open_read_args *a = *(struct open_read_args **)p; /* in device memory */

	snprintf(a->path, 4096, "%s", a->name);
	a->st_open = gice_file_open_nbi(k, a->file, a->path, 4096, GICE_FILE_READ, a->opened);
	if (!a->st_open)
		a->st_open = gice_wait_until(k, a->opened, GICE_CMP_GE, 1, 0, NULL);
	if (a->st_open)
		return;
	a->st_read = gice_file_read(k, a->file, a->dst, 0, a->bytes, a->read);
	if (!a->st_read)
		a->st_read = gice_wait_until(k, a->read, GICE_CMP_GE, 1, 0, NULL);
}

START_TEST(kernel_opens_a_reserved_file_by_path_and_reads_it_bit_exact)
{
	struct open_read_args a = {.path = dpath, .dst = dbuf, .bytes = FILE_BYTES, .st_open = 99, .st_read = 99};
	gice_stream_t *s;
	gice_stats_t st;

	path_of(a.name, sizeof(a.name), "data.bin");
	write_file(a.name, FILE_BYTES);
	ck_assert_int_eq(gice_file_reserve(D, &a.file), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &a.opened), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &a.read), GICE_OK);
	ck_assert_int_eq(gice_stream_create(D, &s), GICE_OK);
	/* the kernel's args are a copy: its results come back through device memory */
	struct open_read_args *da = (struct open_read_args *)(dbuf + 3900 * 1024);
	*da = a;
	ck_assert_int_eq(gice_launch(s, open_read_kernel, 1, &da, sizeof(da)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(s, test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(da->st_open, GICE_OK);
	ck_assert_int_eq(da->st_read, GICE_OK);
	expect_file_bytes(FILE_BYTES);
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.io_opens, 1);
	ck_assert_uint_eq(st.io_read_bytes, FILE_BYTES);
	ck_assert_uint_eq(st.io_failed, 0);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_int_eq(gice_file_close(D, a.file), GICE_OK);
}
END_TEST

START_TEST(armed_open_fires_the_read_armed_on_its_completion)
{
	gice_counter_t trig, opened, read;
	gice_desc_t d1, d2;
	gice_file_t f;
	char path[300];

	path_of(path, sizeof(path), "armed.bin");
	write_file(path, FILE_BYTES);
	ck_assert_int_eq(gice_file_reserve(D, &f), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &trig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &opened), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &read), GICE_OK);
	snprintf(dpath, 4096, "%s", path);
	gice_op_t o = {.type = GICE_OP_FILE_OPEN, .local = dpath, .bytes = 4096, .rkey = f, .value = GICE_FILE_READ,
		       .signal = GICE_NO_COUNTER, .completion = opened};
	gice_op_t r = {.type = GICE_OP_FILE_READ, .local = dbuf, .bytes = FILE_BYTES, .rkey = f, .roff = 0,
		       .signal = GICE_NO_COUNTER, .completion = read};
	ck_assert_int_eq(gice_arm(D, trig, 1, 0, &o, &d1), GICE_OK);
	ck_assert_int_eq(gice_arm(D, opened, 1, 0, &r, &d2), GICE_OK);
	ck_assert_int_eq(gice_counter_add(D, trig, 1), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(D, read, GICE_CMP_GE, 1, test_scaled(30000), NULL), GICE_OK);
	expect_file_bytes(FILE_BYTES);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

/* ---------------------------------------------------------------- errors as completions */

START_TEST(open_of_a_missing_file_fails_not_found_then_opens_once_it_exists)
{
	gice_file_t f;
	char path[300], want[400];

	path_of(path, sizeof(path), "later.bin");
	ck_assert_int_eq(gice_file_reserve(D, &f), GICE_OK);
	ck_assert_int_eq(open_by_op(f, path, GICE_FILE_READ), GICE_ERR_NOT_FOUND);
	snprintf(want, sizeof(want), "open of %s for reading failed: No such file or directory (errno 2)", path);
	expect_msg(f, GICE_ERR_NOT_FOUND, want, NULL);
	/* still not open: a read names it so */
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 4096), GICE_ERR_INVALID);
	/* the file appears: the same id opens it */
	write_file(path, FILE_BYTES);
	ck_assert_int_eq(open_by_op(f, path, GICE_FILE_READ), GICE_OK);
	ck_assert_int_eq(gice_file_error(D, f, NULL, 0), GICE_OK);
	memset(dbuf, 0, FILE_BYTES);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, FILE_BYTES), GICE_OK);
	expect_file_bytes(FILE_BYTES);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

/* Root ignores a directory's mode: the immutable attribute stops it (EPERM) instead. 1 if set. */
static int make_immutable(const char *path, int on)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), flags = 0, rc = -1;

	if (fd < 0)
		return 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
		rc = ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
	return rc == 0;
}

START_TEST(open_in_a_read_only_directory_fails_access)
{
	gice_file_t f;
	char ro[300], path[400], want[500];
	int root = geteuid() == 0, err;

	path_of(ro, sizeof(ro), "ro");
	ck_assert_int_eq(mkdir(ro, 0555), 0);
	if (root)
		ck_assert_msg(make_immutable(ro, 1), "chattr +i %s: %s", ro, strerror(errno));
	err = root ? EPERM : EACCES;
	snprintf(path, sizeof(path), "%s/new.bin", ro);
	ck_assert_int_eq(gice_file_reserve(D, &f), GICE_OK);
	int rc = open_by_op(f, path, GICE_FILE_WRITE | GICE_FILE_CREATE);
	if (root)
		make_immutable(ro, 0);
	ck_assert_int_eq(rc, GICE_ERR_ACCESS);
	snprintf(want, sizeof(want), "open of %s for writing failed: %s (errno %d)", path, strerror(err), err);
	expect_msg(f, GICE_ERR_ACCESS, want, NULL);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

START_TEST(open_of_an_open_id_is_busy_and_close_by_op_keeps_the_id)
{
	gice_file_t f, g;
	char path[300];

	path_of(path, sizeof(path), "x.bin");
	write_file(path, 8192);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(open_by_op(f, path, GICE_FILE_READ), GICE_ERR_BUSY);
	expect_msg(f, GICE_ERR_BUSY, "open of file ", "it is open (");
	/* closed by an operation: the id is kept, reads fail, the next open works */
	ck_assert_int_eq(post_wait(GICE_OP_FILE_CLOSE, f, 0, 0), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 4096), GICE_ERR_INVALID);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_CLOSE, f, 0, 0), GICE_ERR_INVALID);
	expect_msg(f, GICE_ERR_INVALID, "close of file ", "it is not open");
	ck_assert_int_eq(gice_file_reserve(D, &g), GICE_OK);
	ck_assert_uint_ne(f, g);
	ck_assert_int_eq(open_by_op(f, path, GICE_FILE_READ), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 8192), GICE_OK);
	expect_file_bytes(8192);
	/* no NUL in the path's buffer */
	memset(dpath, 'a', 4096);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_OPEN, g, GICE_FILE_READ, 4096), GICE_ERR_INVALID);
	expect_msg(g, GICE_ERR_INVALID, "need a NUL-terminated path", NULL);
	/* the host releases both ids, open and reserved; then they are not taken */
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	ck_assert_int_eq(gice_file_close(D, g), GICE_OK);
	ck_assert_int_eq(gice_file_close(D, g), GICE_ERR_INVALID);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_OPEN, g, GICE_FILE_READ, 16), GICE_ERR_INVALID);
}
END_TEST

/* ---------------------------------------------------------------- sync */

START_TEST(fsync_armed_on_a_checkpoint_write_completes)
{
	gice_counter_t written, synced;
	gice_desc_t d;
	gice_file_t f;
	gice_stats_t st;
	char path[300];

	path_of(path, sizeof(path), "ckpt.bin");
	for (size_t i = 0; i < FILE_BYTES; i++)
		dbuf[i] = byte_at(i);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_WRITE | GICE_FILE_CREATE | GICE_FILE_TRUNC, &f), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &written), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(D, &synced), GICE_OK);
	gice_op_t s = {.type = GICE_OP_FILE_SYNC, .rkey = f, .value = GICE_FILE_SYNC_DATA,
		       .signal = GICE_NO_COUNTER, .completion = synced};
	ck_assert_int_eq(gice_arm(D, written, 1, 0, &s, &d), GICE_OK);
	gice_op_t w = {.type = GICE_OP_FILE_WRITE, .local = dbuf, .bytes = FILE_BYTES, .rkey = f, .roff = 0,
		       .signal = GICE_NO_COUNTER, .completion = written};
	ck_assert_int_eq(gice_post(D, &w), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(D, synced, GICE_CMP_GE, 1, test_scaled(30000), NULL), GICE_OK);
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.io_syncs, 1);
	ck_assert_uint_eq(st.io_write_bytes, FILE_BYTES);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
	struct stat sb;
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, FILE_BYTES);
}
END_TEST

START_TEST(fsync_refused_fails_naming_file_and_errno)
{
	gice_file_t f;

	ck_assert_int_eq(gice_file_open(D, "/proc/self/mem", GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_SYNC, f, 0, 0), GICE_ERR_INVALID);
	expect_msg(f, GICE_ERR_INVALID, "fsync of /proc/self/mem failed: Invalid argument (errno 22)", NULL);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

/* ---------------------------------------------------------------- O_DIRECT or the page cache */

/* A file opened with O_DIRECT allowed: a range in the page cache is copied from it, a range
 * that is not is read with O_DIRECT (io_direct_bytes says which). */
START_TEST(read_of_a_cached_range_skips_o_direct)
{
	gice_file_t f;
	gice_stats_t st;
	char path[300];
	uint8_t b[4096];

	path_of(path, sizeof(path), "warm.bin");
	write_file(path, 2 * MIB);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0); /* clean pages: DONTNEED drops them */
	ck_assert_int_eq(posix_fadvise(fd, MIB, MIB, POSIX_FADV_DONTNEED), 0);
	for (off_t o = 0; o < MIB; o += (off_t)sizeof(b)) /* the first MiB warm */
		ck_assert_int_eq(pread(fd, b, sizeof(b), o), (ssize_t)sizeof(b));
	close(fd);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, MIB), GICE_OK);
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.io_read_bytes, MIB);
	ck_assert_uint_eq(st.io_direct_bytes, 0);
	/* the cold second MiB, into the device buffer's second MiB (4 KiB aligned) */
	gice_op_t op = {.type = GICE_OP_FILE_READ, .local = dbuf + MIB, .bytes = MIB, .rkey = f, .roff = MIB,
			.signal = GICE_NO_COUNTER, .completion = dc};
	ck_assert_int_eq(gice_counter_reset(D, dc), GICE_OK);
	ck_assert_int_eq(gice_post(D, &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(D, dc, GICE_CMP_GE, 1, test_scaled(30000), NULL), GICE_OK);
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.io_direct_bytes, MIB);
	expect_file_bytes(2 * MIB);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

/* ---------------------------------------------------------------- watchdog */

static void watch_setup(void)
{
	setenv("GICE_TIMEOUT_MS", "500", 1);
	setenv("GICE_IO_BACKEND", "uring", 1);
	setup();
}

/* Nobody writes the FIFO (this process holds its only write end, through O_RDWR): the read
 * never ends. */
START_TEST(stuck_read_fails_timed_out_naming_file_offset_and_length)
{
	gice_file_t f;
	gice_stats_t st;
	char path[300], want[500];

	path_of(path, sizeof(path), "fifo");
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ | GICE_FILE_WRITE | GICE_FILE_NO_DIRECT, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_READ, f, 0, 4096), GICE_ERR_TIMED_OUT);
	snprintf(want, sizeof(want), "read of 4096 bytes at offset 0 of %s (device offset ", path);
	expect_msg(f, GICE_ERR_TIMED_OUT, want, "stuck: its chunk at offset 0, length 4096 made no progress for ");
	ck_assert_int_eq(gice_device_stats(D, &st), GICE_OK);
	ck_assert_uint_eq(st.io_timeouts, 1);
	ck_assert_uint_eq(st.io_failed, 1);
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK); /* nothing outstanding any more */
}
END_TEST

/* A write of 1 MiB into a FIFO nobody reads: the pipe takes its capacity, then the rest waits
 * for good. */
START_TEST(stuck_write_fails_timed_out_naming_file_offset_and_length)
{
	gice_file_t f;
	char path[300], want[500];

	path_of(path, sizeof(path), "fifo");
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(gice_file_open(D, path, GICE_FILE_READ | GICE_FILE_WRITE | GICE_FILE_NO_DIRECT, &f), GICE_OK);
	ck_assert_int_eq(post_wait(GICE_OP_FILE_WRITE, f, 0, MIB), GICE_ERR_TIMED_OUT);
	snprintf(want, sizeof(want), "write of 1048576 bytes at offset 0 of %s (device offset ", path);
	expect_msg(f, GICE_ERR_TIMED_OUT, want, "stuck: its chunk at offset ");
	ck_assert_int_eq(gice_file_close(D, f), GICE_OK);
}
END_TEST

static int uring_here(void)
{
	struct {
		uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
		uint8_t offs[80];
	} p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd >= 0)
		close((int)fd);
	return fd >= 0;
}

static Suite *suite(void)
{
	Suite *s = suite_create("storage_open");
	TCase *tc = tcase_create("open_at_run_time");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, kernel_opens_a_reserved_file_by_path_and_reads_it_bit_exact);
	tcase_add_test(tc, armed_open_fires_the_read_armed_on_its_completion);
	suite_add_tcase(s, tc);
	tc = tcase_create("open_errors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, open_of_a_missing_file_fails_not_found_then_opens_once_it_exists);
	tcase_add_test(tc, open_in_a_read_only_directory_fails_access);
	tcase_add_test(tc, open_of_an_open_id_is_busy_and_close_by_op_keeps_the_id);
	suite_add_tcase(s, tc);
	tc = tcase_create("cache_choice");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, read_of_a_cached_range_skips_o_direct);
	suite_add_tcase(s, tc);
	tc = tcase_create("sync");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fsync_armed_on_a_checkpoint_write_completes);
	tcase_add_test(tc, fsync_refused_fails_naming_file_and_errno);
	suite_add_tcase(s, tc);
	if (uring_here()) {
		tc = tcase_create("watchdog");
		tcase_add_checked_fixture(tc, watch_setup, teardown);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, stuck_read_fails_timed_out_naming_file_offset_and_length);
		tcase_add_test(tc, stuck_write_fails_timed_out_naming_file_offset_and_length);
		suite_add_tcase(s, tc);
	} else {
		test_skip_cases(2, "watchdog: io_uring is not available here (the psync backend cannot cancel)");
	}
	return s;
}

int main(void) { return test_run_suite(suite()); }
