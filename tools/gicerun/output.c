/* output.c: the ranks' stdout and stderr, read from their pipes and printed line by line, each
 * line whole with a "[r] " prefix, a rank's lines in order; a closed stdout (EPIPE) closes the
 * ranks' pipes to it. */
#include "tools/gicerun/gicerun.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int out_broken[3]; /* our stdout/stderr gave EPIPE: drop what would go there */
static char *obuf;        /* assembled prefixed lines */
static size_t olen, ocap;

static void obuf_add(const void *p, size_t n)
{
	if (!n) /* p may be NULL then (an empty stream buffer) */
		return;
	if (olen + n > ocap) {
		size_t cap = ocap ? ocap : 4096;
		while (cap < olen + n)
			cap *= 2;
		char *nb = realloc(obuf, cap);
		if (!nb) {
			fprintf(stderr, "%s: out of memory buffering output (%zu bytes)\n", prog_name, cap);
			exit(1);
		}
		obuf = nb;
		ocap = cap;
	}
	memcpy(obuf + olen, p, n);
	olen += n;
}

void write_all(int fd, const char *p, size_t n)
{
	while (n && !out_broken[fd]) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) { /* an inherited non-blocking descriptor */
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			poll(&pf, 1, 100);
		} else {
			out_broken[fd] = 1; /* EPIPE and the like: keep draining the ranks, print nothing */
		}
	}
}

static void obuf_flush(int fd)
{
	write_all(fd, obuf, olen);
	olen = 0;
}

static void add_line(const stream_t *s, const char *a, size_t alen, const char *b, size_t blen)
{
	char prefix[24];
	int plen = snprintf(prefix, sizeof(prefix), "[%d] ", s->rank);

	obuf_add(prefix, (size_t)plen);
	obuf_add(a, alen);
	obuf_add(b, blen);
	obuf_add("\n", 1);
}

static void stream_keep(stream_t *s, const char *p, size_t n)
{
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->len + n)
			cap *= 2;
		char *nb = realloc(s->buf, cap);
		if (!nb) {
			fprintf(stderr, "%s: out of memory buffering a line of rank %d (%zu bytes)\n", prog_name,
				s->rank, cap);
			exit(1);
		}
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* Print every complete line of data (with the partial line kept from before), keep the rest. */
static void stream_feed(stream_t *s, const char *data, size_t n)
{
	const char *p = data, *end = data + n, *nl;

	while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
		add_line(s, s->buf, s->len, p, (size_t)(nl - p));
		s->len = 0;
		p = nl + 1;
	}
	while (p < end) {
		size_t take = (size_t)(end - p);
		if (take > LINE_CAP - s->len)
			take = LINE_CAP - s->len;
		stream_keep(s, p, take);
		p += take;
		if (s->len == LINE_CAP) { /* an endless line: print it in pieces */
			add_line(s, s->buf, s->len, "", 0);
			s->len = 0;
		}
	}
	obuf_flush(s->out_fd);
}

void stream_close(stream_t *s)
{
	if (s->len) { /* the partial last line, completed with a newline */
		add_line(s, s->buf, s->len, "", 0);
		s->len = 0;
		obuf_flush(s->out_fd);
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

/* Read what one stream has: 1 when data came, 0 when none is there now, -1 once closed. */
int stream_read(stream_t *s)
{
	static char chunk[READ_CHUNK];
	ssize_t n;

	if (s->fd < 0)
		return -1;
	n = read(s->fd, chunk, sizeof(chunk));
	if (n > 0) {
		stream_feed(s, chunk, (size_t)n);
		return 1;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	stream_close(s); /* EOF (or an error, which ends the stream the same way) */
	return -1;
}

/* Our stdout (or stderr) is gone (EPIPE): close the ranks' pipes to it, so that, as in a shell
 * pipeline, their next write there fails (SIGPIPE) instead of going on forever. */
void stream_drop_if_broken(stream_t *s)
{
	if (s->fd >= 0 && out_broken[s->out_fd]) {
		s->len = 0;
		stream_close(s);
	}
}

/* What a rank that just exited left in its pipes, so its last words come before our line about
 * its exit. Bounded: a process it left behind may still be writing. */
void stream_drain(stream_t *s)
{
	for (int i = 0; i < 16 && stream_read(s) == 1; i++)
		;
}

/* ---------------------------------------------------------------- signals */
void output_free(void)
{
	free(obuf);
	obuf = NULL;
	olen = ocap = 0;
}
