/* copy.c — how fast one CPU copies a message of SIZE bytes the way a loopback TCP sender
 * hands it to the kernel, for bench/loopback-cliff.py.
 *
 * A sender re-sends one SIZE-byte buffer; the kernel copies it into socket memory that moves
 * on (a ring far larger than any cache level here). So: the source is the same SIZE bytes
 * every call, the destination walks a 64 MiB ring. Only the source's size changes between
 * runs, so a step in the rate marks where the source stops fitting a cache level.
 *
 *   copy SIZE SECS     prints: size=SIZE gbytes_per_s=MEDIAN min=… max=… chunks=N
 *
 * The rate is the median over 50 ms chunks (each at least one copy of SIZE). Pin it with
 * taskset. Build: gcc -O2 -o copy copy.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING (64u << 20)
#define CHUNK_NS 50000000ull
#define MAX_CHUNKS 4096

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: copy SIZE SECS\n");
    return 2;
  }
  size_t size = strtoull(argv[1], NULL, 10);
  double secs = atof(argv[2]);
  if (size == 0 || size > RING / 2 || secs <= 0 || secs > 60) {
    fprintf(stderr, "copy: SIZE must be 1..%u and SECS 0..60\n", RING / 2);
    return 2;
  }
  char *src = malloc(size), *ring = malloc(RING);
  static double rates[MAX_CHUNKS];
  if (!src || !ring) {
    fprintf(stderr, "copy: out of memory\n");
    return 1;
  }
  memset(src, 0x5a, size);
  memset(ring, 0, RING);
  size_t off = 0;
  int chunks = 0;
  uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
  while (chunks < MAX_CHUNKS && now_ns() < end) {
    uint64_t t0 = now_ns(), bytes = 0, t;
    do {
      if (off + size > RING) off = 0;
      memcpy(ring + off, src, size);
      /* Keep the compiler from dropping the copy. */
      __asm__ volatile("" : : "r"(ring + off) : "memory");
      off += size;
      bytes += size;
      t = now_ns();
    } while (t - t0 < CHUNK_NS);
    rates[chunks++] = (double)bytes / (double)(t - t0);
  }
  qsort(rates, chunks, sizeof rates[0], cmp);
  printf("size=%zu gbytes_per_s=%.3f min=%.3f max=%.3f chunks=%d\n", size, rates[chunks / 2],
         rates[0], rates[chunks - 1], chunks);
  free(src);
  free(ring);
  return 0;
}
