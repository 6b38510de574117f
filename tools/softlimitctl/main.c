/* SPDX-License-Identifier: MIT */
/*
 * softlimitctl: the budgets of libsoftlimit-lease from the command line
 * (softlimitctl(1)).
 *
 *   softlimitctl [--store URL] [--json] [--timeout SECONDS] budget set NAME max=SIZE [soft=SIZE] [min=SIZE]
 *   softlimitctl [--store URL] [--json] [--timeout SECONDS] budget show [NAME]
 *   softlimitctl [--store URL] [--timeout SECONDS] budget delete NAME
 *   softlimitctl [--store URL] [--json] [--timeout SECONDS] budget list
 *   softlimitctl [--store URL] [--timeout SECONDS] store remove
 *
 * The store is --store, else $SOFTLIMIT_STORE.  Exit status: 0 done, 1 the
 * store refused or could not be reached (a message says which), 2 a bad
 * command line (nothing was done: every argument is checked before the
 * store is opened, as an open creates a shm: store).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/version.h>

#include "ctl.h"
#include "size.h"

#define PROG "softlimitctl"
#define TIMEOUT_MAX 3600

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--store URL] [--json] [--timeout SECONDS] COMMAND\n"
		"commands:\n"
		"  budget set NAME max=SIZE [soft=SIZE] [min=SIZE]\n"
		"                      create budget NAME or replace its limits (soft and\n"
		"                      min not given are 0)\n"
		"  budget show [NAME]  NAME's limits and participants (share, floor, usage,\n"
		"                      demand, expiry, state); without NAME every budget\n"
		"  budget delete NAME  remove NAME (live leases keep their last share)\n"
		"  budget list         the budgets' names\n"
		"  store remove        remove the store and every budget in it (shm: the\n"
		"                      object; etcd: PREFIX/incarnation, PREFIX/budgets/*)\n"
		"options:\n"
		"  --store URL         shm:NAME or etcd://HOST:PORT[,HOST:PORT...]/PREFIX\n"
		"                      (default: $SOFTLIMIT_STORE)\n"
		"  --json              show and list print JSON, sizes in bytes\n"
		"  --timeout SECONDS   etcd://: retry while the cluster has no leader or cannot\n"
		"                      be reached, up to SECONDS (default 10)\n"
		"  -h, --help          this text;  --version  the library's version\n"
		"SIZE: digits with an optional K, M or G suffix (powers of 1024); bytes without.\n"
		"Exit status: 0 done, 1 the store refused or failed, 2 a bad command line.\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n(" PROG " --help for usage)\n", stderr);
	va_end(ap);
	exit(EXIT_USAGE);
}

/* ---- budget set ---- */

struct set_args {
	const char *name;
	struct sl_limits lim;
};

static void parse_limits(struct set_args *a, char **argv, int argc)
{
	static const char *const keys[] = { "max", "soft", "min" };
	bool seen[3] = { false, false, false };
	int i;

	sl_limits_init(&a->lim);
	for (i = 0; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		uint64_t v = 0, *dst[3] = { &a->lim.max, &a->lim.soft, &a->lim.min };
		size_t klen = eq ? (size_t)(eq - argv[i]) : 0;
		unsigned k;
		int rc;

		for (k = 0; k < 3; k++)
			if (eq && strlen(keys[k]) == klen && strncmp(argv[i], keys[k], klen) == 0)
				break;
		if (k == 3)
			die_usage("budget set %s: '%s' is not max=SIZE, soft=SIZE or min=SIZE", a->name,
				  argv[i]);
		if (seen[k])
			die_usage("budget set %s: %s given twice", a->name, keys[k]);
		seen[k] = true;
		rc = parse_size(eq + 1, &v);
		if (rc == -ERANGE)
			die_usage("budget set %s: %s=%s is too large", a->name, keys[k], eq + 1);
		if (rc != 0)
			die_usage("budget set %s: %s=%s is not a size (e.g. 512K, 40M, 1G)", a->name,
				  keys[k], eq + 1);
		*dst[k] = v;
	}
	if (!seen[0])
		die_usage("budget set %s: max=SIZE is required", a->name);
	if (a->lim.max == 0 || a->lim.max == SL_UNLIMITED)
		die_usage("budget set %s: max must be above 0 and below 2^64 - 1", a->name);
	if (a->lim.soft > a->lim.max || a->lim.min > a->lim.max)
		die_usage("budget set %s: soft and min must not be above max", a->name);
}

static int do_set(struct ctl *c, void *arg)
{
	struct set_args *a = arg;

	return sl_lease_budget_set(c->store, a->name, &a->lim);
}

static int do_delete(struct ctl *c, void *arg)
{
	return sl_lease_budget_delete(c->store, arg);
}

/* A budget name as the library takes it, checked before any store call so
 * that a typo is a usage error, not a store error. */
static void check_name(const char *name)
{
	size_t i, len = strlen(name);

	if (len == 0 || len >= SL_LEASE_NAME_MAX)
		die_usage("a budget name is 1 to %d bytes, not '%s'", SL_LEASE_NAME_MAX - 1, name);
	for (i = 0; i < len; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '.' || ch == ':' || ch == '-'))
			die_usage("a budget name is made of A-Z a-z 0-9 _ . : -, not '%s'", name);
	}
}

/* ---- the command line ---- */

struct cmdline {
	const char *url;
	bool json;
	unsigned timeout_s;
	char **args; /* after the options: "budget" VERB ... */
	int nargs;
};

static unsigned parse_timeout(const char *v)
{
	char *end;
	unsigned long t;

	errno = 0;
	t = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || t < 1 || t > TIMEOUT_MAX)
		die_usage("--timeout takes whole seconds from 1 to %d, not '%s'", TIMEOUT_MAX, v);
	return (unsigned)t;
}

static void parse_cmdline(int argc, char **argv, struct cmdline *cl)
{
	int i;

	cl->url = getenv("SOFTLIMIT_STORE");
	cl->timeout_s = 10;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--version") == 0) {
			printf(PROG " %s\n", SL_VERSION_STRING);
			exit(0);
		} else if (strcmp(a, "--json") == 0) {
			cl->json = true;
		} else if (strcmp(a, "--store") == 0 || strcmp(a, "--timeout") == 0) {
			if (i + 1 >= argc)
				die_usage("option '%s' needs a value", a);
			if (a[2] == 's')
				cl->url = argv[++i];
			else
				cl->timeout_s = parse_timeout(argv[++i]);
		} else if (strncmp(a, "--store=", 8) == 0) {
			cl->url = a + 8;
		} else if (strncmp(a, "--timeout=", 10) == 0) {
			cl->timeout_s = parse_timeout(a + 10);
		} else if (a[0] == '-') {
			die_usage("unknown option '%s'", a);
		} else {
			break;
		}
	}
	cl->args = argv + i;
	cl->nargs = argc - i;
}

static int fail(const char *what, const char *name, int rc)
{
	if (name)
		fprintf(stderr, PROG ": %s %s: %s\n", what, name, ctl_strerror(rc));
	else
		fprintf(stderr, PROG ": %s: %s\n", what, ctl_strerror(rc));
	return EXIT_FAIL;
}

/* store remove: no store is opened (an open would create it). */
static int store_remove(const struct cmdline *cl)
{
	struct ctl c = { .url = cl->url, .timeout_s = cl->timeout_s };
	int rc;

	if (cl->nargs != 2 || strcmp(cl->args[1], "remove") != 0)
		die_usage("usage: store remove");
	if (!c.url || !*c.url)
		die_usage("no store: give --store URL or set SOFTLIMIT_STORE");
	rc = ctl_remove(&c);
	if (rc == -EINVAL)
		die_usage("'%s' is not a store URL (shm:NAME or etcd://HOST:PORT[,...]/PREFIX)", c.url);
	if (rc == -ENOENT) {
		fprintf(stderr, PROG ": store remove %s: no such store\n", c.url);
		return EXIT_FAIL;
	}
	return rc ? fail("store remove", c.url, rc) : 0;
}

int main(int argc, char **argv)
{
	struct cmdline cl = { 0 };
	struct ctl c = { 0 };
	struct set_args set = { 0 };
	const char *verb, *name;
	int rc, nargs;

	parse_cmdline(argc, argv, &cl);
	if (cl.nargs == 0)
		die_usage("no command (budget set|show|delete|list, store remove)");
	if (strcmp(cl.args[0], "store") == 0)
		return store_remove(&cl);
	if (strcmp(cl.args[0], "budget") != 0)
		die_usage("unknown command '%s' (budget set|show|delete|list, store remove)", cl.args[0]);
	if (cl.nargs < 2)
		die_usage("budget: which? set, show, delete or list");
	verb = cl.args[1];
	name = cl.nargs > 2 ? cl.args[2] : NULL;
	set.name = name;
	nargs = cl.nargs - 2; /* after the verb */
	if (strcmp(verb, "set") == 0) {
		if (nargs < 2)
			die_usage("usage: budget set NAME max=SIZE [soft=SIZE] [min=SIZE]");
	} else if (strcmp(verb, "delete") == 0) {
		if (nargs != 1)
			die_usage("usage: budget delete NAME");
	} else if (strcmp(verb, "show") == 0) {
		if (nargs > 1)
			die_usage("usage: budget show [NAME]");
	} else if (strcmp(verb, "list") == 0) {
		if (nargs != 0)
			die_usage("usage: budget list");
	} else {
		die_usage("unknown budget command '%s' (set, show, delete, list)", verb);
	}
	/* Every argument is checked before the store is opened: an open
	 * creates a store that does not exist, and a refused command must
	 * leave nothing behind. */
	if (name)
		check_name(name);
	if (strcmp(verb, "set") == 0)
		parse_limits(&set, cl.args + 3, nargs - 1);
	if (!cl.url || !*cl.url)
		die_usage("no store: give --store URL or set SOFTLIMIT_STORE");

	c.url = cl.url;
	c.json = cl.json;
	c.timeout_s = cl.timeout_s;
	rc = ctl_open(&c);
	if (rc == -EINVAL)
		die_usage("'%s' is not a store URL (shm:NAME or etcd://HOST:PORT[,...]/PREFIX)", c.url);
	if (rc != 0)
		return fail("cannot open the store", c.url, rc);

	if (strcmp(verb, "set") == 0) {
		rc = ctl_call(&c, do_set, &set);
		if (rc == -EINVAL)
			rc = -EDOM; /* after our checks: limits the store refused */
		if (rc != 0)
			rc = fail("budget set", name, rc);
	} else if (strcmp(verb, "delete") == 0) {
		rc = ctl_call(&c, do_delete, (void *)name);
		if (rc != 0)
			rc = fail("budget delete", name, rc);
	} else if (strcmp(verb, "show") == 0) {
		rc = name ? show_budget(&c, name) : show_all(&c);
		if (rc != 0)
			rc = fail("budget show", name, rc);
	} else {
		rc = list_budgets(&c);
		if (rc != 0)
			rc = fail("budget list", NULL, rc);
	}
	sl_lease_store_close(c.store);
	if (fflush(stdout) != 0 && rc == 0) {
		perror(PROG ": stdout");
		rc = EXIT_FAIL;
	}
	return rc;
}
