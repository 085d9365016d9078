/* commit_trace.so: timestamps of MLX's CUDA graph launches and GPU completions, with MLX's active memory.
 *
 * Why: the CUDA prefill model (omlx_profiles/peak/transient.py, graph_window_max) replays where MLX
 * commits a CUDA graph and assumes at most 11 graphs' inputs are alive. This shim lets a device run see
 * the real commits: every cuGraphLaunch (one per committed graph) and every host function that MLX's
 * completion worker enqueues behind a graph (it runs when the GPU has finished that graph), each with
 * mlx::core::get_active_memory() at that moment.
 *
 * How: libmlx.so links the CUDA runtime statically; that runtime finds the driver's entry points with
 * dlsym(libcuda, "cuGetProcAddress[_v2]") and then cuGetProcAddress("cuGraphLaunch", ...). This library,
 * LD_PRELOADed, interposes dlsym, hands back its own cuGetProcAddress, and wraps cuGraphLaunch and
 * cuLaunchHostFunc. Everything else passes through untouched.
 *
 * Python reads the events with ctypes (benchmarks/cuda/probe_commits.py):
 *   trace_mark(int) / trace_n() / trace_get(i, &t, &mem, &kind, &mark) / trace_reset()
 * kind: 0 = graph launched (a commit), 1 = GPU reached the completion signal of a commit, 2 = mark,
 *       3 = a graph instantiated or updated before its launch: ``mem`` holds its node count instead.
 *
 * Build: gcc -shared -fPIC -O2 -o commit_trace.so commit_trace.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long cuuint64_t;
typedef void (*CUhostFn)(void *);

static void *(*real_dlsym)(void *, const char *);
static CUresult (*real_gpa1)(const char *, void **, int, cuuint64_t);
static CUresult (*real_gpa2)(const char *, void **, int, cuuint64_t, void *);
static CUresult (*real_launch)(void *, void *);
static CUresult (*real_launch_ptsz)(void *, void *);
static CUresult (*real_hostfn)(void *, CUhostFn, void *);
static CUresult (*real_hostfn_ptsz)(void *, CUhostFn, void *);
static size_t (*active_memory)(void);
static CUresult (*real_inst)(void *, void *, void *);
static CUresult (*real_inst_flags)(void *, void *, void *);
static CUresult (*real_exec_update)(void *, void *, void *);
static CUresult (*get_nodes)(void *, void *, size_t *);
static int looked_up;

#define MAX_EVENTS (1 << 21)
struct event {
  double t;
  long long mem;
  int kind;
  int mark;
};
static struct event events[MAX_EVENTS];
static volatile long n_events;
static int current_mark = -1;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void init_dlsym(void) {
  if (!real_dlsym) real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!real_dlsym) real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

static void record(int kind) {
  if (!looked_up) {
    looked_up = 1;
    init_dlsym();
    active_memory = (size_t(*)(void))real_dlsym(RTLD_DEFAULT, "_ZN3mlx4core17get_active_memoryEv");
  }
  long i = __sync_fetch_and_add(&n_events, 1);
  if (i >= MAX_EVENTS) return;
  events[i].t = now();
  events[i].mem = active_memory ? (long long)active_memory() : -1;
  events[i].kind = kind;
  events[i].mark = current_mark;
}

static void record_nodes(void *graph) {
  size_t n = 0;
  if (!get_nodes) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    init_dlsym();
    if (h) get_nodes = (CUresult(*)(void *, void *, size_t *))real_dlsym(h, "cuGraphGetNodes");
  }
  if (get_nodes && get_nodes(graph, 0, &n) != 0) n = 0;
  long i = __sync_fetch_and_add(&n_events, 1);
  if (i >= MAX_EVENTS) return;
  events[i].t = now();
  events[i].mem = (long long)n;
  events[i].kind = 3;
  events[i].mark = current_mark;
}

/* cuGraphInstantiateWithFlags(exec*, graph, flags), cuGraphInstantiateWithParams(exec*, graph, params*) and
   cuGraphExecUpdate[_v2](exec, graph, info*): the graph is the second argument of all of them; the third is
   passed through as a register-sized value (the 5-argument cuGraphInstantiate[_v2] is left alone) */
static CUresult my_inst(void *a, void *g, void *c) {
  record_nodes(g);
  return real_inst(a, g, c);
}
static CUresult my_inst_flags(void *a, void *g, void *c) {
  record_nodes(g);
  return real_inst_flags(a, g, c);
}
static CUresult my_exec_update(void *a, void *g, void *c) {
  record_nodes(g);
  return real_exec_update(a, g, c);
}

static CUresult my_launch(void *exec, void *stream) {
  record(0);
  return real_launch(exec, stream);
}

static CUresult my_launch_ptsz(void *exec, void *stream) {
  record(0);
  return real_launch_ptsz(exec, stream);
}

struct tramp {
  CUhostFn fn;
  void *data;
};

static void tramp_fn(void *p) {
  struct tramp *t = (struct tramp *)p;
  record(1);
  t->fn(t->data);
  free(t);
}

static CUresult my_hostfn(void *stream, CUhostFn fn, void *data) {
  struct tramp *t = malloc(sizeof *t);
  t->fn = fn;
  t->data = data;
  return real_hostfn(stream, tramp_fn, t);
}

static CUresult my_hostfn_ptsz(void *stream, CUhostFn fn, void *data) {
  struct tramp *t = malloc(sizeof *t);
  t->fn = fn;
  t->data = data;
  return real_hostfn_ptsz(stream, tramp_fn, t);
}

static CUresult my_gpa2(const char *sym, void **pfn, int ver, cuuint64_t flags, void *status);
static CUresult my_gpa1(const char *sym, void **pfn, int ver, cuuint64_t flags);

static void swap(const char *sym, void **pfn) {
  if (!sym || !pfn || !*pfn) return;
  if (!strcmp(sym, "cuGraphLaunch")) {
    if (*pfn != (void *)my_launch) real_launch = *pfn;
    *pfn = (void *)my_launch;
  } else if (!strcmp(sym, "cuGraphLaunch_ptsz")) {
    if (*pfn != (void *)my_launch_ptsz) real_launch_ptsz = *pfn;
    *pfn = (void *)my_launch_ptsz;
  } else if (!strcmp(sym, "cuLaunchHostFunc")) {
    if (*pfn != (void *)my_hostfn) real_hostfn = *pfn;
    *pfn = (void *)my_hostfn;
  } else if (!strcmp(sym, "cuLaunchHostFunc_ptsz")) {
    if (*pfn != (void *)my_hostfn_ptsz) real_hostfn_ptsz = *pfn;
    *pfn = (void *)my_hostfn_ptsz;
  } else if (!strcmp(sym, "cuGraphInstantiateWithParams")) {
    if (*pfn != (void *)my_inst) real_inst = *pfn;
    *pfn = (void *)my_inst;
  } else if (!strcmp(sym, "cuGraphInstantiateWithFlags")) {
    if (*pfn != (void *)my_inst_flags) real_inst_flags = *pfn;
    *pfn = (void *)my_inst_flags;
  } else if (!strcmp(sym, "cuGraphExecUpdate") || !strcmp(sym, "cuGraphExecUpdate_v2")) {
    if (*pfn != (void *)my_exec_update) real_exec_update = *pfn;
    *pfn = (void *)my_exec_update;
  } else if (!strcmp(sym, "cuGetProcAddress_v2") || !strcmp(sym, "cuGetProcAddress")) {
    if (*pfn != (void *)my_gpa2 && *pfn != (void *)my_gpa1) {
      if (!strcmp(sym, "cuGetProcAddress_v2")) {
        real_gpa2 = *pfn;
        *pfn = (void *)my_gpa2;
      } else {
        real_gpa1 = *pfn;
        *pfn = (void *)my_gpa1;
      }
    }
  }
}

static CUresult my_gpa2(const char *sym, void **pfn, int ver, cuuint64_t flags, void *status) {
  CUresult r = real_gpa2(sym, pfn, ver, flags, status);
  if (r == 0) swap(sym, pfn);
  return r;
}

static CUresult my_gpa1(const char *sym, void **pfn, int ver, cuuint64_t flags) {
  CUresult r = real_gpa1(sym, pfn, ver, flags);
  if (r == 0) swap(sym, pfn);
  return r;
}

void *dlsym(void *handle, const char *name) {
  init_dlsym();
  void *p = real_dlsym(handle, name);
  if (p) {
    if (!strcmp(name, "cuGetProcAddress_v2")) {
      real_gpa2 = p;
      return (void *)my_gpa2;
    }
    if (!strcmp(name, "cuGetProcAddress")) {
      real_gpa1 = p;
      return (void *)my_gpa1;
    }
  }
  return p;
}

/* ---- read side (ctypes) ---- */
void trace_mark(int m) {
  current_mark = m;
  record(2);
}
long trace_n(void) { return n_events < MAX_EVENTS ? n_events : MAX_EVENTS; }
void trace_get(long i, double *t, long long *mem, int *kind, int *mark) {
  *t = events[i].t;
  *mem = events[i].mem;
  *kind = events[i].kind;
  *mark = events[i].mark;
}
void trace_reset(void) { n_events = 0; }
/* libmlx.so is loaded RTLD_LOCAL by Python, so RTLD_DEFAULT may not find get_active_memory: Python passes
   the function's address (ctypes.CDLL(libmlx.so)) */
void trace_set_mem_fn(void *f) {
  looked_up = 1;
  init_dlsym();
  active_memory = (size_t(*)(void))f;
}
int trace_hooked(void) {
  return (real_launch != 0 || real_launch_ptsz != 0) * 1 + (real_hostfn != 0 || real_hostfn_ptsz != 0) * 2 +
         (real_inst != 0 || real_inst_flags != 0) * 4 + (real_exec_update != 0) * 8;
}
