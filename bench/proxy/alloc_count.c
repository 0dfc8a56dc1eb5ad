// alloc_count.c - an LD_PRELOAD shim that counts a process's heap allocations, for
// bench/proxy/percall.py (allocations per request or per tunnel).
//
// Every malloc-family call that allocates (malloc, calloc, realloc, aligned_alloc,
// posix_memalign, memalign) adds one to a counter shared by all threads; free does not count.
// When the process exits normally, the total is written to the file named by
// $ALLOC_COUNT_FILE, then one line "aligned SIZE COUNT" per size of aligned allocation below
// 64 KiB: those are Asio's recycling allocator missing its cache (coroutine frames over about
// 1 KiB, or more frames or handlers alive at once than it caches). The real functions come from
// glibc's __libc_* entry points, so the shim needs no dlsym (which itself allocates) and works from
// the first allocation on.
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_ulong allocations;
enum { kSizes = 65536 };
static atomic_ulong aligned_sizes[kSizes];

static void counted(void) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

void* malloc(size_t n) {
  counted();
  return __libc_malloc(n);
}

void* calloc(size_t n, size_t size) {
  counted();
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t n) {
  counted();
  return __libc_realloc(p, n);
}

static void aligned(size_t n) {
  counted();
  if (n < kSizes) atomic_fetch_add_explicit(&aligned_sizes[n], 1, memory_order_relaxed);
}

void* memalign(size_t align, size_t n) {
  aligned(n);
  return __libc_memalign(align, n);
}

void* aligned_alloc(size_t align, size_t n) {
  aligned(n);
  return __libc_memalign(align, n);
}

int posix_memalign(void** out, size_t align, size_t n) {
  aligned(n);
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(align, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("ALLOC_COUNT_FILE");
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "%lu\n", atomic_load(&allocations));
  for (size_t n = 0; n < kSizes; ++n) {
    const unsigned long c = atomic_load(&aligned_sizes[n]);
    if (c != 0) fprintf(f, "aligned %zu %lu\n", n, c);
  }
  fclose(f);
}
