/* Description: configuration is documented. Every parameter listed by gice_config_list() has a
 * help text and a default (an empty default must say in its help what empty means) and appears in
 * README.md; and every GICE_* name that the library sources (api/, emu/, fabric/) use inside a
 * string literal — where getenv() calls and parameter tables name their variables — is such a
 * listed parameter. Comments are skipped, and names that are macros (#define), prefixes ending in
 * '_', status codes and the other non-parameter names below are ignored.
 * Runs from the repository root (make test does); fails with a message when it cannot find
 * README.md or the sources. Every counter of GICE_STATS_LIST is in README.md's Statistics
 * table with its help. */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"

/* ---------------------------------------------------------------- small name sets */

typedef struct {
	char **v;
	char **where; /* "file:line" of the first occurrence, or NULL */
	size_t n, cap;
} names_t;

static int names_has(const names_t *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], name))
			return 1;
	return 0;
}

static void names_add(names_t *s, const char *name, const char *where)
{
	if (names_has(s, name))
		return;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		s->where = realloc(s->where, s->cap * sizeof(*s->where));
		ck_assert_ptr_nonnull(s->v);
		ck_assert_ptr_nonnull(s->where);
	}
	s->v[s->n] = strdup(name);
	s->where[s->n] = where ? strdup(where) : NULL;
	s->n++;
}

static void names_free(names_t *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i]);
		free(s->where[i]);
	}
	free(s->v);
	free(s->where);
	memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------- the parameters */

typedef struct {
	names_t names;
	char msg[4096]; /* problems found by the callback */
	size_t msg_len;
} params_t;

static void note(params_t *p, const char *fmt, const char *name)
{
	if (p->msg_len < sizeof(p->msg) - 200)
		p->msg_len += (size_t)snprintf(p->msg + p->msg_len, sizeof(p->msg) - p->msg_len, fmt, name);
}

static void param_cb(const char *name, const char *value, const char *defval, int is_set, const char *help,
		     void *arg)
{
	params_t *p = arg;

	(void)value;
	(void)is_set;
	names_add(&p->names, name, NULL);
	if (!help || !*help)
		note(p, "%s has no help text; ", name);
	if (!defval)
		note(p, "%s has no default; ", name);
	else if (!*defval && (!help || !strstr(help, "empty")))
		note(p, "%s has an empty default and its help does not say what empty means; ", name);
}

static void load_params(params_t *p)
{
	memset(p, 0, sizeof(*p));
	gice_config_list(param_cb, p);
	ck_assert_msg(p->names.n > 0, "gice_config_list() listed no parameter");
}

/* ---------------------------------------------------------------- a minimal C scanner */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = 0;
			*len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

static int ident_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static int upper_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* Names of the form GICE_[A-Z0-9_]+ in s[0..n) (not preceded by an identifier character). */
static void names_in(const char *s, size_t n, const char *file, int line, names_t *out)
{
	char name[128], where[512];

	for (size_t i = 0; i + 5 < n; i++) {
		if (strncmp(s + i, "GICE_", 5) || (i > 0 && ident_char(s[i - 1])))
			continue;
		size_t j = i + 5;
		while (j < n && upper_char(s[j]))
			j++;
		if (j < n && ident_char(s[j])) { /* GICE_Foo...: not one of ours */
			i = j;
			continue;
		}
		if (j - i < sizeof(name)) {
			memcpy(name, s + i, j - i);
			name[j - i] = 0;
			snprintf(where, sizeof(where), "%s:%d", file, line);
			names_add(out, name, where);
		}
		i = j - 1;
	}
}

/* Scan C source text: names inside string literals go to `strings`; identifiers that follow
 * `#define` go to `macros`. Comments and character literals are skipped. */
static void scan_c(const char *file, const char *src, size_t len, names_t *strings, names_t *macros)
{
	enum { CODE, LINE_COMMENT, BLOCK_COMMENT, STRING, CHAR } st = CODE;
	int line = 1, str_line = 1, bol = 1; /* bol: only blanks so far on this line */
	size_t str_start = 0;

	for (size_t i = 0; i < len; i++) {
		char c = src[i], d = i + 1 < len ? src[i + 1] : 0;

		switch (st) {
		case CODE:
			if (c == '/' && d == '/') {
				st = LINE_COMMENT;
				i++;
			} else if (c == '/' && d == '*') {
				st = BLOCK_COMMENT;
				i++;
			} else if (c == '"') {
				st = STRING;
				str_start = i + 1;
				str_line = line;
			} else if (c == '\'') {
				st = CHAR;
			} else if (c == '#' && bol) {
				size_t j = i + 1;
				while (j < len && (src[j] == ' ' || src[j] == '\t'))
					j++;
				if (len - j > 6 && !strncmp(src + j, "define", 6) && (src[j + 6] == ' ' || src[j + 6] == '\t')) {
					j += 6;
					while (j < len && (src[j] == ' ' || src[j] == '\t'))
						j++;
					size_t k = j;
					while (k < len && ident_char(src[k]))
						k++;
					if (k > j && k - j < 128) {
						char m[128];
						memcpy(m, src + j, k - j);
						m[k - j] = 0;
						names_add(macros, m, NULL);
					}
				}
			}
			break;
		case LINE_COMMENT:
			if (c == '\n')
				st = CODE;
			break;
		case BLOCK_COMMENT:
			if (c == '*' && d == '/') {
				st = CODE;
				i++;
			}
			break;
		case STRING:
			if (c == '\\' && d) {
				if (d == '\n')
					line++;
				i++;
			} else if (c == '"' || c == '\n') { /* a newline ends a broken literal */
				names_in(src + str_start, i - str_start, file, str_line, strings);
				st = CODE;
			}
			break;
		case CHAR:
			if (c == '\\' && d)
				i++;
			else if (c == '\'' || c == '\n')
				st = CODE;
			break;
		}
		if (c == '\n') {
			line++;
			bol = 1;
		} else if (c != ' ' && c != '\t') {
			bol = 0;
		}
	}
}

static names_t *walk_strings, *walk_macros;
static int walk_files;

static int walk_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t n = strlen(path), len;
	char *src;

	(void)sb;
	(void)ftw;
	if (type != FTW_F || n < 3 || (strcmp(path + n - 2, ".c") && strcmp(path + n - 2, ".h")))
		return 0;
	src = slurp(path, &len);
	if (!src)
		return 0;
	scan_c(path, src, len, walk_strings, walk_macros);
	walk_files++;
	free(src);
	return 0;
}

static void scan_tree(names_t *strings, names_t *macros)
{
	static const char *const dirs[] = {"api", "emu", "fabric"};

	walk_strings = strings;
	walk_macros = macros;
	walk_files = 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		nftw(dirs[i], walk_one, 16, FTW_PHYS);
}

/* Names that are not parameters (status codes, enums, macros of api/ and emu/common/). */
static int not_a_parameter(const char *name, const names_t *macros)
{
	static const char *const exact[] = {"GICE_OK", "GICE_INPROGRESS", "GICE_H", "GICE_NO_COUNTER",
					    "GICE_CACHELINE", "GICE_MIN", "GICE_MAX", "GICE_ARRAY_SIZE",
					    "GICE_LOG_ERROR", "GICE_LOG_WARN", "GICE_LOG_INFO", "GICE_LOG_DEBUG",
					    "GICE_LOG_TRACE"};
	static const char *const prefix[] = {"GICE_ERR_", "GICE_CMP_", "GICE_OP_", "GICE_SIGNAL_",
					     "GICE_PARAM_", "GICE_ALIGN_", "GICE_STATUS_"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (!strcmp(name, exact[i]))
			return 1;
	for (size_t i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (!strncmp(name, prefix[i], strlen(prefix[i])))
			return 1;
	if (name[n - 1] == '_' || (n > 2 && !strcmp(name + n - 2, "_H"))) /* a prefix; a header guard */
		return 1;
	return names_has(macros, name);
}

/* The names in `strings` that are neither listed parameters nor ignorable, as "name (file:line)". */
static void undeclared(const names_t *strings, const names_t *macros, const names_t *params, char *out, size_t size)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t i = 0; i < strings->n; i++) {
		if (not_a_parameter(strings->v[i], macros) || names_has(params, strings->v[i]))
			continue;
		if (len < size)
			len += (size_t)snprintf(out + len, size - len, "%s%s (%s)", len ? ", " : "", strings->v[i],
						strings->where[i] ? strings->where[i] : "?");
	}
}

/* ---------------------------------------------------------------- tests */

START_TEST(every_parameter_has_help_and_default)
{
	params_t p;

	load_params(&p);
	ck_assert_msg(p.msg_len == 0, "%s", p.msg);
	names_free(&p.names);
}
END_TEST

/* name occurs in text as a whole name (GICE_CTS does not match inside GICE_CTS_FOO) */
static int mentions(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *s = strstr(text, name); s; s = strstr(s + 1, name))
		if ((s == text || !ident_char(s[-1])) && !ident_char(s[n]))
			return 1;
	return 0;
}

START_TEST(every_parameter_is_in_the_readme)
{
	char cwd[1024], missing[4096] = "";
	size_t len, mlen = 0;
	char *readme = slurp("README.md", &len);
	params_t p;

	if (!readme)
		ck_abort_msg("README.md not found in %s: run the test from the repository root",
			     getcwd(cwd, sizeof(cwd)) ? cwd : "the working directory");
	load_params(&p);
	for (size_t i = 0; i < p.names.n; i++)
		if (!mentions(readme, p.names.v[i]) && mlen < sizeof(missing))
			mlen += (size_t)snprintf(missing + mlen, sizeof(missing) - mlen, "%s%s", mlen ? ", " : "",
						 p.names.v[i]);
	ck_assert_msg(mlen == 0, "README.md does not document: %s (regenerate the table from gice-info -c)",
		      missing);
	free(readme);
	names_free(&p.names);
}
END_TEST

START_TEST(every_gice_name_in_the_sources_is_a_listed_parameter)
{
	names_t strings = {0}, macros = {0};
	char bad[8192], cwd[1024];
	params_t p;

	load_params(&p);
	scan_tree(&strings, &macros);
	ck_assert_msg(walk_files > 0, "no C sources under api/ emu/ fabric/ of %s: run from the repository root",
		      getcwd(cwd, sizeof(cwd)) ? cwd : "the working directory");
	/* the scanner must at least see the parameter tables themselves */
	for (size_t i = 0; i < p.names.n; i++)
		ck_assert_msg(names_has(&strings, p.names.v[i]),
			      "%s is listed by gice_config_list() but the scanner did not find it in a string "
			      "literal of api/ emu/ fabric/",
			      p.names.v[i]);
	undeclared(&strings, &macros, &p.names, bad, sizeof(bad));
	ck_assert_msg(!bad[0], "GICE_* names used in the sources but not listed by gice_config_list(): %s", bad);
	names_free(&strings);
	names_free(&macros);
	names_free(&p.names);
}
END_TEST

/* Every counter of GICE_STATS_LIST, and every per-peer gauge of GICE_PEER_GAUGE_LIST, has a help
 * line, and README.md's Statistics table has a row with its name and that help (regenerate the
 * table from gice-info -s). */
START_TEST(every_counter_is_in_the_readme_with_its_help)
{
	static const struct {
		const char *name, *help;
	} c[] = {
#define ROW(name, from, field, help) {#name, help},
		GICE_STATS_LIST(ROW)
#undef ROW
#define GAUGE_ROW(name, help) {#name, help},
		GICE_PEER_GAUGE_LIST(GAUGE_ROW)
#undef GAUGE_ROW
	};
	char cwd[1024], missing[4096] = "", row[512];
	size_t len, mlen = 0;
	char *readme = slurp("README.md", &len);

	if (!readme)
		ck_abort_msg("README.md not found in %s: run the test from the repository root",
			     getcwd(cwd, sizeof(cwd)) ? cwd : "the working directory");
#define ONE(name, help) +1
	ck_assert_uint_eq(sizeof(c) / sizeof(c[0]), sizeof(gice_stats_t) / sizeof(uint64_t) + (0 GICE_PEER_GAUGE_LIST(ONE)));
#undef ONE
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_msg(c[i].help[0], "counter %s has no help in GICE_STATS_LIST", c[i].name);
		snprintf(row, sizeof(row), "| `%s` |", c[i].name);
		const char *r = strstr(readme, row), *eol = r ? strchr(r, '\n') : NULL;
		const char *h = r ? strstr(r, c[i].help) : NULL;
		if ((!h || (eol && h > eol)) && mlen < sizeof(missing))
			mlen += (size_t)snprintf(missing + mlen, sizeof(missing) - mlen, "%s%s", mlen ? ", " : "",
						 c[i].name);
	}
	ck_assert_msg(mlen == 0, "README.md's Statistics table lacks or has stale rows for: %s (regenerate it "
		      "from gice-info -s)", missing);
	free(readme);
}
END_TEST

/* The scanner itself: comments, macros, prefixes and character literals do not count. */
START_TEST(scanner_reports_only_undeclared_names_in_strings)
{
	static const char src[] = "/* GICE_IN_COMMENT */\n"
				  "// GICE_IN_LINE_COMMENT \"GICE_QUOTED_IN_COMMENT\"\n"
				  "#define GICE_SOME_MACRO \"GICE_SOME_MACRO\"\n"
				  "  #  define GICE_INDENTED 1\n"
				  "static const char *a = \"GICE_INDENTED GICE_FOO_ \\\"GICE_ERR_X\\\" GICE_OK\";\n"
				  "static char q = '\"'; static const char *b = \"GICE_TIMEOUT_MS=%d\";\n"
				  "static const char *c = \"x\"\n"
				  "\t\"GICE_NOT_LISTED, GICE_Lower GICE_H\";\n";
	names_t strings = {0}, macros = {0}, params = {0};
	char bad[512];

	names_add(&params, "GICE_TIMEOUT_MS", NULL);
	scan_c("sample.c", src, sizeof(src) - 1, &strings, &macros);
	ck_assert_msg(names_has(&macros, "GICE_SOME_MACRO") && names_has(&macros, "GICE_INDENTED"), "macros missed");
	ck_assert(!names_has(&strings, "GICE_IN_COMMENT"));
	ck_assert(!names_has(&strings, "GICE_QUOTED_IN_COMMENT"));
	ck_assert(names_has(&strings, "GICE_TIMEOUT_MS"));
	ck_assert(!names_has(&strings, "GICE_Lower"));
	undeclared(&strings, &macros, &params, bad, sizeof(bad));
	ck_assert_str_eq(bad, "GICE_NOT_LISTED (sample.c:8)");
	names_free(&strings);
	names_free(&macros);
	names_free(&params);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("docs");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, every_parameter_has_help_and_default);
	tcase_add_test(tc, every_parameter_is_in_the_readme);
	tcase_add_test(tc, every_gice_name_in_the_sources_is_a_listed_parameter);
	tcase_add_test(tc, scanner_reports_only_undeclared_names_in_strings);
	suite_add_tcase(s, tc);
	tc = tcase_create("stats");
	tcase_add_test(tc, every_counter_is_in_the_readme_with_its_help);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
