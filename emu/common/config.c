/* config.c: GICE_* parameters read from the environment, validated against their table entry. */
#include "emu/common/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu/common/common.h"

const char *gice_param_raw(const gice_param_t *p, int *is_set)
{
	const char *v = getenv(p->name);

	if (is_set)
		*is_set = v && *v;
	return (v && *v) ? v : p->defval;
}

const char *gice_param_str(const gice_param_t *p)
{
	return gice_param_raw(p, NULL);
}

static int parse_u64(const gice_param_t *p, const char *s, uint64_t *out)
{
	char *end;
	uint64_t v;

	if (p->type == GICE_PARAM_BOOL) {
		if (!strcasecmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") || !strcasecmp(s, "true"))
			return *out = 1, 0;
		if (!strcasecmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "off") || !strcasecmp(s, "false"))
			return *out = 0, 0;
		return -1;
	}
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -1;
	if (p->type == GICE_PARAM_SIZE && *end) {
		unsigned shift = 0;
		switch (tolower((unsigned char)*end)) {
		case 'k': shift = 10; break;
		case 'm': shift = 20; break;
		case 'g': shift = 30; break;
		default: return -1;
		}
		end++;
		if (tolower((unsigned char)*end) == 'i')
			end++;
		if (tolower((unsigned char)*end) == 'b')
			end++;
		if (v > (UINT64_MAX >> shift))
			return -1;
		v <<= shift;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

int gice_param_u64(const gice_param_t *p, uint64_t *out)
{
	int is_set;
	const char *s = gice_param_raw(p, &is_set);
	uint64_t v;

	if (parse_u64(p, s, &v)) {
		gice_error("config", "%s=\"%s\" does not parse as %s", p->name, s,
			   p->type == GICE_PARAM_BOOL ? "a boolean (0/1)" : "a number");
		return GICE_ERR_CONFIG;
	}
	if (p->type != GICE_PARAM_BOOL && (v < p->min || v > p->max)) {
		gice_error("config", "%s=%llu is outside [%llu, %llu]", p->name, (unsigned long long)v,
			   (unsigned long long)p->min, (unsigned long long)p->max);
		return GICE_ERR_CONFIG;
	}
	*out = v;
	return GICE_OK;
}

const gice_param_t *gice_param_find(const gice_param_t *table, const char *name)
{
	for (; table->name; table++)
		if (!strcmp(table->name, name))
			return table;
	return NULL;
}
