/* trace.c: --trace OUT.json. Before the launch, GICE_TRACE is set for every rank to a file in a
 * private directory (DIR/trace.json; the library writes DIR/trace.R.json per rank when the job
 * has several). After the last rank has ended, the ranks' files are merged into OUT.json: one
 * Trace Event JSON whose traceEvents are every rank's (each rank is its own process, pid = rank,
 * and flow ids name the source device, so the arrows from one rank's issue to another's landing
 * are kept), whose otherData holds each rank's own otherData under "per_rank". The directory is
 * removed. The ranks' files are gice's own format: the merge takes their event lists as text,
 * it does not parse the events. */
#include "tools/gicerun/gicerun.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACE_HEAD "{\"displayTimeUnit\":\"ns\",\"otherData\":"
#define TRACE_EVENTS ",\"traceEvents\":["

static char trace_dir[4096];

void trace_remove(void)
{
	char path[sizeof(trace_dir) + 32];

	if (!trace_dir[0])
		return;
	for (long r = 0; r < opt.nranks; r++) { /* the directory holds only what the ranks wrote */
		snprintf(path, sizeof(path), "%s/trace.%ld.json", trace_dir, r);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/trace.json", trace_dir);
	unlink(path);
	if (rmdir(trace_dir))
		fprintf(stderr, "%s: --trace: cannot remove %s: %s\n", prog_name, trace_dir, strerror(errno));
	trace_dir[0] = '\0';
}

int trace_prepare(void)
{
	const char *tmp = getenv("TMPDIR");
	char path[sizeof(trace_dir) + 16];

	if (!opt.trace)
		return 0;
	snprintf(trace_dir, sizeof(trace_dir), "%s/gicerun-trace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(trace_dir)) {
		fprintf(stderr, "%s: --trace: cannot make a directory %s: %s\n", prog_name, trace_dir, strerror(errno));
		trace_dir[0] = '\0';
		return -1;
	}
	snprintf(path, sizeof(path), "%s/trace.json", trace_dir);
	if (setenv("GICE_TRACE", path, 1)) {
		fprintf(stderr, "%s: --trace: setenv: %s\n", prog_name, strerror(errno));
		trace_remove();
		return -1;
	}
	return 0;
}

/* The whole of a file, NUL-terminated, or NULL (errno set). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 65536 + 1 > cap) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 1u << 17);
			if (!nb) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* A rank's file: its otherData object [*od, *od + *odlen) and its events [*ev, *ev + *evlen)
 * (without the brackets); 0, or -1 when it is not a GICE_TRACE file. */
static int split_trace(const char *buf, size_t len, const char **od, size_t *odlen, const char **ev, size_t *evlen)
{
	const char *p, *end = buf + len;
	int depth = 0;

	if (strncmp(buf, TRACE_HEAD, strlen(TRACE_HEAD)))
		return -1;
	p = *od = buf + strlen(TRACE_HEAD);
	do { /* the object (its strings hold no braces: gice writes them) */
		if (p >= end)
			return -1;
		depth += *p == '{';
		depth -= *p == '}';
		p++;
	} while (depth > 0);
	*odlen = (size_t)(p - *od);
	if (strncmp(p, TRACE_EVENTS, strlen(TRACE_EVENTS)))
		return -1;
	*ev = p + strlen(TRACE_EVENTS);
	while (end > *ev && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	if (end - *ev < 2 || end[-1] != '}' || end[-2] != ']')
		return -1;
	*evlen = (size_t)(end - 2 - *ev);
	while (*evlen && ((*ev)[*evlen - 1] == '\n'))
		(*evlen)--;
	return 0;
}

/* Merge what the ranks wrote into opt.trace and remove the directory; 0, or -1 when OUT.json
 * could not be written or no rank left a trace (a rank missing is only reported). */
int trace_merge(void)
{
	char path[sizeof(trace_dir) + 32];
	FILE *out = NULL;
	int rc = -1, nmerged = 0, first_ev = 1;

	if (!opt.trace || !trace_dir[0])
		return opt.trace ? -1 : 0;
	if (!(out = fopen(opt.trace, "w"))) {
		fprintf(stderr, "%s: --trace: cannot write %s: %s\n", prog_name, opt.trace, strerror(errno));
		goto cleanup;
	}
	fprintf(out, TRACE_HEAD "{\"clock\":\"CLOCK_MONOTONIC\",\"merged_by\":\"gicerun\",\"ranks\":%ld,\"per_rank\":[",
		opt.nranks);
	for (int pass = 0; pass < 2; pass++) { /* the ranks' otherData, then their events */
		for (long r = 0; r < opt.nranks; r++) {
			const char *od, *ev;
			size_t len, odlen, evlen;
			char *buf;
			if (opt.nranks > 1)
				snprintf(path, sizeof(path), "%s/trace.%ld.json", trace_dir, r);
			else
				snprintf(path, sizeof(path), "%s/trace.json", trace_dir);
			if (!(buf = slurp(path, &len))) {
				if (pass == 0)
					fprintf(stderr, "%s: --trace: rank %ld left no trace (%s: %s)\n", prog_name, r, path,
						strerror(errno));
				continue;
			}
			if (split_trace(buf, len, &od, &odlen, &ev, &evlen)) {
				if (pass == 0)
					fprintf(stderr, "%s: --trace: rank %ld: %s is not a GICE_TRACE file; left out\n",
						prog_name, r, path);
			} else if (pass == 0) {
				fprintf(out, "%s%.*s", nmerged ? "," : "", (int)odlen, od);
				nmerged++;
			} else if (evlen) {
				fprintf(out, "%s%.*s", first_ev ? "" : ",", (int)evlen, ev);
				first_ev = 0;
			}
			free(buf);
		}
		if (pass == 0)
			fprintf(out, "]}" TRACE_EVENTS);
	}
	fprintf(out, "\n]}\n");
	if (fclose(out)) {
		out = NULL;
		fprintf(stderr, "%s: --trace: writing %s failed: %s\n", prog_name, opt.trace, strerror(errno));
		goto cleanup;
	}
	out = NULL;
	if (!nmerged) {
		fprintf(stderr, "%s: --trace: no rank left a trace; %s holds none\n", prog_name, opt.trace);
		goto cleanup;
	}
	rc = 0;
cleanup:
	if (out)
		fclose(out);
	trace_remove();
	return rc;
}
