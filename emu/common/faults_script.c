/* faults_script.c: a fault scenario file (GICE_FAULT_SCRIPT, gicerun --faults): a timeline of
 * fault groups, one a line, read once at start. See faults.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/common.h"
#include "emu/common/faults.h"

#define FS_MAX_BYTES (64u << 10)

/* Append the group of one line (its text [s, s + n)) to out at *pos: "@T[+D] items" becomes
 * "at=T[+D],items". 0, or -1 when out is full. */
static int add_line(char *out, size_t cap, size_t *pos, const char *s, size_t n)
{
	size_t w = 0;
	int k;

	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (!n)
		return 0;
	if (*s == '@') {
		while (w < n && !isspace((unsigned char)s[w]))
			w++;
		k = snprintf(out + *pos, cap - *pos, "%sat=%.*s,", *pos ? ";" : "", (int)(w - 1), s + 1);
		if (k < 0 || (size_t)k >= cap - *pos)
			return -1;
		*pos += (size_t)k;
		s += w;
		n -= w;
		while (n && isspace((unsigned char)*s))
			s++, n--;
		k = snprintf(out + *pos, cap - *pos, "%.*s", (int)n, s);
	} else {
		k = snprintf(out + *pos, cap - *pos, "%s%.*s", *pos ? ";" : "", (int)n, s);
	}
	if (k < 0 || (size_t)k >= cap - *pos)
		return -1;
	*pos += (size_t)k;
	return 0;
}

int gice_faults_load(const char *spec, const char *script, gice_faults_t *out)
{
	char *text = NULL, *all = NULL;
	size_t len = 0, pos = 0, cap;
	FILE *fp;
	int rc = GICE_ERR_CONFIG;

	if (!script || !*script)
		return gice_faults_parse(spec, out);
	fp = fopen(script, "r");
	if (!fp) {
		gice_error("config", "GICE_FAULT_SCRIPT=\"%s\": cannot read it: %m", script);
		return GICE_ERR_CONFIG;
	}
	text = malloc(FS_MAX_BYTES + 1);
	cap = 2 * FS_MAX_BYTES + (spec ? strlen(spec) : 0) + 16;
	all = malloc(cap);
	if (!text || !all) {
		rc = GICE_ERR_NO_MEMORY;
		goto out;
	}
	len = fread(text, 1, FS_MAX_BYTES + 1, fp);
	if (len > FS_MAX_BYTES) {
		gice_error("config", "GICE_FAULT_SCRIPT=\"%s\": larger than %u bytes", script, FS_MAX_BYTES);
		goto out;
	}
	text[len] = 0;
	if (spec && *spec)
		pos = (size_t)snprintf(all, cap, "%s", spec);
	all[pos] = 0;
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		size_t n = next ? (size_t)(next - line) : strlen(line);
		char *hash = memchr(line, '#', n);
		if (next)
			next++;
		if (hash)
			n = (size_t)(hash - line); /* a comment */
		if (add_line(all, cap, &pos, line, n))
			goto out;
	}
	rc = gice_faults_parse(all, out);
	if (rc)
		gice_error("config", "(the spec above is GICE_FAULTS followed by the lines of GICE_FAULT_SCRIPT=\"%s\")",
			   script);
out:
	free(all);
	free(text);
	fclose(fp);
	return rc;
}
