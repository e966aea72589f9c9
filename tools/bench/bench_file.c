/* bench_file.c: the storage path — file-read (a file into device memory) and file-write (device
 * memory into a file, then fsync) through gice's storage engine, beside plain reads and writes
 * of the same file by this process in 1 MiB blocks (what `dd bs=1M` does) in the same run.
 *   file-read  --file PATH [--sizes ...]: per size (default: the whole file), rows
 *              gice-direct-cold (O_DIRECT), gice-cache-cold, gice-cache-warm (page cache),
 *              gice-direct-warm (the O_DIRECT handle on the warm file: the storage engine
 *              sees the range cached and copies it from the page cache),
 *              pread-cold, pread-warm (1 MiB preads into a host buffer),
 *              pread-warm-devmem (the same preads by this thread straight into the device
 *              buffer gice reads into: the copy gice's warm read cannot avoid). "cold": the
 *              file's pages are dropped first (posix_fadvise DONTNEED, no root needed).
 *   file-write --file PATH [--sizes ...] (default 256 MiB): gice-direct+fsync,
 *              gice-cache+fsync (a file write, then a GICE_OP_FILE_SYNC), pwrite+fsync (1 MiB
 *              pwrites then fsync: dd conv=fsync).
 * One row per run; p50_us = p99_us = the run's time, MBps = bytes / time. --iters runs each
 * (default 1). The file of file-write is overwritten. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench/bench.h"

#define MIB (1024u * 1024u)

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

static void out(const char *bench, const char *how, size_t bytes, uint64_t ns)
{
	double us = (double)ns / 1000.0;

	row(bench, how, 1, bytes, 1, us, us, (double)bytes / us, 0.0);
}

/* One storage operation of bytes at offset 0 through gice, waited for; its time in ns. */
static uint64_t gice_op(gice_device_t *d, gice_op_type_t type, gice_file_t f, void *buf, size_t bytes,
			gice_counter_t c, uint64_t *expect)
{
	gice_op_t op = {.type = type, .local = buf, .bytes = bytes, .rkey = f, .roff = 0, .signal = GICE_NO_COUNTER,
			.completion = c};
	uint64_t t0 = now_ns();

	CHECK(gice_post(d, &op));
	CHECK(gice_counter_wait(d, c, GICE_CMP_GE, ++*expect, opt.timeout_ms, NULL));
	return now_ns() - t0;
}

/* 1 MiB preads of the file into host[0, 1 MiB) (what dd does: the buffer stays in the CPU
 * cache), or, with stride, into host + offset (a destination as large as the file, as device
 * memory is) */
static uint64_t plain_read(const char *path, size_t bytes, uint8_t *host, int stride)
{
	int fd = open(path, O_RDONLY);
	uint64_t t0 = now_ns();

	if (fd < 0) {
		fprintf(stderr, "gice-bench: open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (size_t done = 0; done < bytes;) {
		ssize_t n = pread(fd, host + (stride ? done : 0), GICE_BENCH_MIN(bytes - done, (size_t)MIB), (off_t)done);
		if (n <= 0) {
			fprintf(stderr, "gice-bench: read %s at %zu: %s\n", path, done, n ? strerror(errno) : "end of file");
			exit(1);
		}
		done += (size_t)n;
	}
	uint64_t ns = now_ns() - t0;
	close(fd);
	return ns;
}

static uint64_t plain_write(const char *path, size_t bytes, const uint8_t *host)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t t0 = now_ns();

	if (fd < 0) {
		fprintf(stderr, "gice-bench: open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (size_t done = 0; done < bytes;) {
		ssize_t n = pwrite(fd, host + done % (16 * MIB), GICE_BENCH_MIN(bytes - done, (size_t)MIB), (off_t)done);
		if (n <= 0) {
			fprintf(stderr, "gice-bench: write %s at %zu: %s\n", path, done, strerror(errno));
			exit(1);
		}
		done += (size_t)n;
	}
	fsync(fd);
	uint64_t ns = now_ns() - t0;
	close(fd);
	return ns;
}

static int file_bench(int write)
{
	struct stat sb;
	size_t sizes[32];
	int n = opt.nsizes_set ? opt.nsizes : 1;
	long iters = opt.iters ? opt.iters : 1;

	if (!opt.file) {
		fprintf(stderr, "gice-bench: file-%s needs --file PATH\n", write ? "write" : "read");
		return 2;
	}
	if (!write && stat(opt.file, &sb)) {
		fprintf(stderr, "gice-bench: %s: %s\n", opt.file, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++)
		sizes[i] = opt.nsizes_set ? opt.sizes[i] : write ? 256u * MIB : (size_t)sb.st_size;
	size_t max = 0;
	for (int i = 0; i < n; i++) {
		if (!write && sizes[i] > (size_t)sb.st_size)
			sizes[i] = (size_t)sb.st_size;
		max = sizes[i] > max ? sizes[i] : max;
	}
	gice_device_attr_t attr = {.n_sms = 1, .n_cts = 1, .hbm_bytes = (max + 2 * MIB + MIB - 1) / MIB * MIB,
				   .provider = opt.provider};
	gice_device_t *d;
	void *buf;
	gice_counter_t c;
	gice_file_t fd_direct, fd_cache;
	uint64_t expect = 0;
	uint8_t *host = malloc(write ? 16 * MIB : MIB);

	CHECK(gice_device_open(&attr, &d));
	CHECK(gice_mem_alloc(d, max ? max : 4096, &buf));
	CHECK(gice_counter_alloc(d, &c));
	bench_pattern(buf, max, 7);
	bench_pattern(host, write ? 16 * MIB : MIB, 7);
	unsigned wf = write ? GICE_FILE_WRITE | GICE_FILE_CREATE : GICE_FILE_READ;
	CHECK(gice_file_open(d, opt.file, wf, &fd_direct));
	CHECK(gice_file_open(d, opt.file, wf | GICE_FILE_NO_DIRECT, &fd_cache));
	const char *bench = write ? "file-write" : "file-read";

	for (int i = 0; i < n; i++) {
		size_t s = sizes[i];
		for (long it = 0; it < iters; it++) {
			if (write) {
				/* the fsync is gice's own operation (GICE_OP_FILE_SYNC), as a checkpoint's */
				uint64_t t0 = now_ns();
				gice_op(d, GICE_OP_FILE_WRITE, fd_direct, buf, s, c, &expect);
				gice_op(d, GICE_OP_FILE_SYNC, fd_direct, NULL, 0, c, &expect);
				out(bench, "gice-direct+fsync", s, now_ns() - t0);
				t0 = now_ns();
				gice_op(d, GICE_OP_FILE_WRITE, fd_cache, buf, s, c, &expect);
				gice_op(d, GICE_OP_FILE_SYNC, fd_cache, NULL, 0, c, &expect);
				out(bench, "gice-cache+fsync", s, now_ns() - t0);
				out(bench, "pwrite+fsync", s, plain_write(opt.file, s, host));
				continue;
			}
			drop_cache(opt.file);
			out(bench, "gice-direct-cold", s, gice_op(d, GICE_OP_FILE_READ, fd_direct, buf, s, c, &expect));
			drop_cache(opt.file);
			out(bench, "gice-cache-cold", s, gice_op(d, GICE_OP_FILE_READ, fd_cache, buf, s, c, &expect));
			out(bench, "gice-cache-warm", s, gice_op(d, GICE_OP_FILE_READ, fd_cache, buf, s, c, &expect));
			out(bench, "gice-direct-warm", s, gice_op(d, GICE_OP_FILE_READ, fd_direct, buf, s, c, &expect));
			drop_cache(opt.file);
			out(bench, "pread-cold", s, plain_read(opt.file, s, host, 0));
			out(bench, "pread-warm", s, plain_read(opt.file, s, host, 0));
			out(bench, "pread-warm-devmem", s, plain_read(opt.file, s, buf, 1));
		}
	}
	CHECK(gice_file_close(d, fd_direct));
	CHECK(gice_file_close(d, fd_cache));
	CHECK(gice_device_close(d));
	free(host);
	return 0;
}

int bench_file_read(void) { return file_bench(0); }
int bench_file_write(void) { return file_bench(1); }
