/* SPDX-License-Identifier: MIT */
/*
 * Standalone driver for fuzz_model.c, for compilers without libFuzzer and
 * for CI: replays the files named on the command line, then runs random
 * inputs until the time limit, printing progress once a second.
 *
 *   fuzz_model_run [-t SECONDS] [-s SEED] [FILE|DIR]...
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run_file(const char *path)
{
	uint8_t buf[1 << 16];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		fprintf(stderr, "fuzz_model_run: %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

static int run_path(const char *path, unsigned long *files)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	char sub[4096];

	if (stat(path, &st) != 0) {
		fprintf(stderr, "fuzz_model_run: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		++*files;
		return run_file(path);
	}
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (run_path(sub, files) != 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

/* The random input being run, written out if the model aborts so that it
 * replays alone: fuzz_model_run fuzz-crash.bin (SL_FUZZ_TRACE=1 tells its
 * story). */
static const uint8_t *cur_input;
static size_t cur_size;

static void save_input(int sig)
{
	static const char msg[] = "fuzz_model_run: the failing input is in fuzz-crash.bin\n";
	int fd;

	if (cur_input) {
		fd = open("fuzz-crash.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			ssize_t w = write(fd, cur_input, cur_size);

			if (w == (ssize_t)cur_size)
				w = write(2, msg, sizeof(msg) - 1);
			(void)w; /* a failed write leaves nothing better to do */
			close(fd);
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* xorshift64*: inputs are reproducible from the seed printed at start. */
static uint64_t rng(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

int main(int argc, char **argv)
{
	double seconds = 10, start, last;
	uint64_t seed = (uint64_t)time(NULL), s;
	unsigned long runs = 0, files = 0;
	uint8_t buf[2048];
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: %s [-t SECONDS] [-s SEED] [FILE|DIR]...\n", argv[0]);
			return 0;
		} else if (run_path(argv[i], &files) != 0) {
			return 2;
		}
	}
	fprintf(stderr, "fuzz_model_run: replayed %lu corpus files; random inputs for %.0f s, seed %llu\n",
		files, seconds, (unsigned long long)seed);
	s = seed ? seed : 1;
	signal(SIGABRT, save_input);
	start = last = now();
	while (now() - start < seconds) {
		size_t n = 16 + rng(&s) % (sizeof(buf) - 16), k;

		for (k = 0; k < n; k++)
			buf[k] = (uint8_t)rng(&s);
		cur_input = buf;
		cur_size = n;
		LLVMFuzzerTestOneInput(buf, n);
		runs++;
		if (now() - last >= 1) {
			last = now();
			fprintf(stderr, "fuzz_model_run: %lu inputs, %.0f s\n", runs, last - start);
		}
	}
	fprintf(stderr, "fuzz_model_run: %lu random inputs clean (seed %llu)\n", runs, (unsigned long long)seed);
	return 0;
}
