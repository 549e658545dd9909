/* fakecuda.c: a fake CUDA driver (libcuda.so.1) and cuBLAS (libcublas.so.13) for the tests
   of package cuda, built by the Go test with gcc:

     gcc -O2 -shared -fPIC -ffp-contract=off -I<repo>/kernels/cuda -o libcuda.so.1 fakecuda.c -lm

   and the cuBLAS part, linked against it so that both share the allocation table:

     gcc ... -DFAKE_CUBLAS -o libcublas.so.13 fakecuda.c -L<dir> -l:libcuda.so.1 -Wl,-rpath,'$ORIGIN'

   Device memory is host memory. cuLaunchKernel dispatches on the kernel's name to the SAME
   kernels/cuda/dpsgd.cu, compiled here as C (DPSGD_HOST_EMULATION): the threads of a block
   run as cooperative fibers (started with ucontext, switched with setjmp), one block at a
   time, so __syncthreads and __shared__ behave as on a GPU. Calls are checked as a strict driver would: known handles, pointers
   inside live allocations, copies within bounds, launch shapes, the kernel present in the
   loaded PTX text.

   Fault injection (environment variables, read at each call):
     FAKECUDA_NO_DEVICE=1     cuInit fails with CUDA_ERROR_NO_DEVICE
     FAKECUDA_OOM_AT=N        the N-th and later cuMemAlloc fail with CUDA_ERROR_OUT_OF_MEMORY
     FAKECUDA_MODULE_FAIL=1   cuModuleLoadData fails with CUDA_ERROR_INVALID_PTX
     FAKECUDA_LAUNCH_FAIL=N   the N-th and later cuLaunchKernel fail with CUDA_ERROR_LAUNCH_FAILED
     FAKECUDA_HANG_SYNC=N     the N-th and later cuStreamSynchronize never return (tests the request deadline)
     FAKECUDA_HANG_INIT=1     cuInit never returns (a driver that hangs while the device opens)
*/
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* _longjmp between fiber stacks: no __longjmp_chk */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <time.h>
#include <math.h>

int fakecuda_valid_range(uint64_t p, uint64_t n);
int fakecuda_valid_stream(void* s);

#ifndef FAKE_CUBLAS
/* ---------------- the emulated GPU threads ---------------- */

static int fake_tid, fake_bid, fake_bdim, fake_gdim;
static void fake_syncthreads(void);

#define DPSGD_HOST_EMULATION 1
#include "dpsgd.cu"

#define MAXTHREADS 1024
#define STACK (64 * 1024)
/* A fiber starts on its own stack by swapcontext (once per block) and then switches with
   _setjmp/_longjmp, which save no signal mask: glibc's swapcontext makes a sigprocmask system
   call at every switch, and the row kernels switch 128 threads at every __syncthreads, which
   made those system calls most of a fake GPU step. */
static ucontext_t boot_ctx, fiber_tmpl, fibers[MAXTHREADS];
static jmp_buf sched_jb, fiber_jb[MAXTHREADS];
static char* stacks[MAXTHREADS];
static int fdone[MAXTHREADS];
static int cur_fiber;
static void (*cur_call)(void**);
static void** cur_params;

static __attribute__((noinline)) void fake_syncthreads(void) {
	if (!_setjmp(fiber_jb[cur_fiber])) _longjmp(sched_jb, 1);
}
static void fiber_entry(void) {
	cur_call(cur_params);
	fdone[cur_fiber] = 1;
	_longjmp(sched_jb, 1);
}

static void run_block_fibers(int bdim) {
	static int have_tmpl;
	if (!have_tmpl) {
		getcontext(&fiber_tmpl);
		have_tmpl = 1;
	}
	for (int t = 0; t < bdim; t++) {
		if (!stacks[t]) stacks[t] = malloc(STACK);
		fibers[t] = fiber_tmpl;
		fibers[t].uc_stack.ss_sp = stacks[t];
		fibers[t].uc_stack.ss_size = STACK;
		fibers[t].uc_link = NULL;
		makecontext(&fibers[t], fiber_entry, 0);
		fdone[t] = 0;
	}
	volatile int alive = 1, round = 0;
	while (alive) {
		alive = 0;
		for (volatile int t = 0; t < bdim; t++) {
			if (fdone[t]) continue;
			cur_fiber = t;
			fake_tid = t;
			if (!_setjmp(sched_jb)) {
				if (round == 0) {
					swapcontext(&boot_ctx, &fibers[t]);
				} else {
					_longjmp(fiber_jb[t], 1);
				}
			}
			if (!fdone[t]) alive = 1;
		}
		round++;
	}
}

/* ---------------- allocations ---------------- */

typedef struct { uint64_t ptr, size; } alloc_t;
static alloc_t* allocs;
static int nallocs, capallocs;
static long alloc_calls, launch_calls;
static uint64_t allocated;
static const uint64_t TOTAL_MEM = 141ULL << 30;

static int find_alloc(uint64_t p) {
	for (int i = 0; i < nallocs; i++)
		if (p >= allocs[i].ptr && p < allocs[i].ptr + allocs[i].size) return i;
	return -1;
}
/* a device range [p, p+n) inside one live allocation */
static int valid_range(uint64_t p, uint64_t n) {
	int i = find_alloc(p);
	return i >= 0 && p + n <= allocs[i].ptr + allocs[i].size;
}
static int valid_ptr(const void* p) { return p == NULL || find_alloc((uint64_t)(uintptr_t)p) >= 0; }

static long env_long(const char* k) {
	const char* v = getenv(k);
	return v ? atol(v) : 0;
}

/* ---------------- kernel dispatch ---------------- */

#define P(i, T) (*(T*)params[i])
#define CHK(i) if (!valid_ptr(P(i, void*))) { bad_pointer = 1; return; }
static int bad_pointer;

static void k_gaussian_f32(void** params) { CHK(0) CHK(3) gaussian_f32(P(0, float*), P(1, i64), P(2, double), P(3, const double*), P(4, u64), P(5, u64), P(6, u32), P(7, u64), P(8, int)); }
static void k_gaussian_f64(void** params) { CHK(0) CHK(3) gaussian_f64(P(0, double*), P(1, i64), P(2, double), P(3, const double*), P(4, u64), P(5, u64), P(6, u32), P(7, u64), P(8, int)); }
static void k_laplace_f64(void** params) { CHK(0) laplace_f64(P(0, double*), P(1, i64), P(2, double), P(3, u64), P(4, u64), P(5, u32), P(6, u64)); }
static void k_laplace_f32(void** params) { CHK(0) laplace_f32(P(0, float*), P(1, i64), P(2, double), P(3, u64), P(4, u64), P(5, u32), P(6, u64)); }
static void k_ball_lanes(void** params) { CHK(0) ball_lanes(P(0, double*), P(1, i64), P(2, u64), P(3, u64), P(4, u32)); }
static void k_ball_scale(void** params) { CHK(0) CHK(1) ball_scale(P(0, double*), P(1, const double*), P(2, i64), P(3, double), P(4, double), P(5, u64), P(6, u64), P(7, u32)); }
static void k_row_sqnorm_f32(void** params) { CHK(0) CHK(1) row_sqnorm_f32(P(0, double*), P(1, const float*), P(2, int), P(3, int)); }
static void k_ghost_accum(void** params) { CHK(0) CHK(1) CHK(2) ghost_accum(P(0, double*), P(1, const double*), P(2, const double*), P(3, int), P(4, double)); }
static void k_clip_coef(void** params) { CHK(0) CHK(1) CHK(2) clip_coef(P(0, double*), P(1, const double*), P(2, const double*), P(3, double), P(4, int)); }
static void k_scale_rows_f32(void** params) { CHK(0) CHK(1) CHK(4) scale_rows_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, const double*)); }
static void k_pad_mask(void** params) { CHK(0) pad_mask(P(0, double*), P(1, int), P(2, int)); }
static void k_gather_batch_f32(void** params) { CHK(0) CHK(1) CHK(2) CHK(3) CHK(4) CHK(5) gather_batch_f32(P(0, float*), P(1, float*), P(2, const float*), P(3, const int*), P(4, const int*), P(5, const double*), P(6, int), P(7, int), P(8, int)); }
static void k_bias_add_f32(void** params) { CHK(0) CHK(1) bias_add_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int)); }
static void k_activate_f32(void** params) { CHK(0) CHK(1) activate_f32(P(0, float*), P(1, const float*), P(2, i64), P(3, int)); }
static void k_activate_bwd_f32(void** params) { CHK(0) CHK(1) CHK(2) activate_bwd_f32(P(0, float*), P(1, const float*), P(2, const float*), P(3, i64), P(4, int)); }
static void k_softmax_xent_f32(void** params) { CHK(0) CHK(1) CHK(2) CHK(3) CHK(4) softmax_xent_f32(P(0, float*), P(1, double*), P(2, int*), P(3, const float*), P(4, const float*), P(5, int), P(6, int)); }
static void k_scale_f32(void** params) { CHK(0) scale_f32(P(0, float*), P(1, i64), P(2, float)); }
static void k_nonfinite_f32(void** params) { CHK(0) CHK(1) nonfinite_f32(P(0, int*), P(1, const float*), P(2, i64)); }
static void k_sgd_f32(void** params) { CHK(0) CHK(1) CHK(2) sgd_f32(P(0, float*), P(1, float*), P(2, const float*), P(3, i64), P(4, float), P(5, float), P(6, float), P(7, int)); }
static void k_im2col_f32(void** params) { CHK(0) CHK(1) im2col_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int), P(10, int), P(11, int)); }
static void k_col2im_f32(void** params) { CHK(0) CHK(1) col2im_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int), P(10, int)); }
static void k_maxpool_f32(void** params) { CHK(0) CHK(1) CHK(2) maxpool_f32(P(0, float*), P(1, int*), P(2, const float*), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int), P(10, int)); }
static void k_maxpool_bwd_f32(void** params) { CHK(0) CHK(1) CHK(2) maxpool_bwd_f32(P(0, float*), P(1, const float*), P(2, const int*), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int), P(10, int)); }
static void k_example_col_sum_f32(void** params) { CHK(0) CHK(1) example_col_sum_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, int), P(5, i64)); }
static void k_add_f64(void** params) { CHK(0) CHK(1) add_f64(P(0, double*), P(1, const double*), P(2, int)); }
static void k_coef_sum_f32(void** params) { CHK(0) CHK(1) CHK(2) CHK(3) CHK(4) coef_sum_f32(P(0, double*), P(1, float*), P(2, float*), P(3, const float*), P(4, const double*), P(5, int), P(6, int), P(7, int), P(8, int)); }
static void k_widen_rows_f32(void** params) { CHK(0) CHK(1) CHK(4) widen_rows_f32(P(0, double*), P(1, const float*), P(2, int), P(3, int), P(4, const double*), P(5, int)); }
static void k_round_scale_f64(void** params) { CHK(0) CHK(1) CHK(2) round_scale_f64(P(0, float*), P(1, float*), P(2, const double*), P(3, int), P(4, int), P(5, double)); }
static void k_to_bf16(void** params) { CHK(0) CHK(1) to_bf16(P(0, unsigned short*), P(1, const float*), P(2, i64)); }
static void k_point_f32(void** params) { CHK(0) CHK(1) point_f32(P(0, float*), P(1, const float*), P(2, i64), P(3, int), P(4, double), P(5, double), P(6, double)); }
static void k_point_bwd_f32(void** params) { CHK(0) CHK(1) point_bwd_f32(P(0, float*), P(1, const float*), P(2, i64), P(3, int), P(4, double), P(5, double), P(6, double)); }
static void k_avgpool_f32(void** params) { CHK(0) CHK(1) avgpool_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int)); }
static void k_avgpool_bwd_f32(void** params) { CHK(0) CHK(1) avgpool_bwd_f32(P(0, float*), P(1, const float*), P(2, int), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int), P(9, int)); }
static void k_add_f32(void** params) { CHK(0) CHK(1) CHK(2) add_f32(P(0, float*), P(1, const float*), P(2, const float*), P(3, i64)); }
static void k_norm_f32(void** params) { CHK(0) CHK(1) norm_f32(P(0, float*), P(1, const float*), P(2, const float*), P(3, int), P(4, int), P(5, int), P(6, int), P(7, int)); }
static void k_affine_f32(void** params) { CHK(0) CHK(1) CHK(2) affine_f32(P(0, float*), P(1, const float*), P(2, const float*), P(3, const float*), P(4, i64), P(5, int), P(6, int)); }
static void k_norm_grads_f64(void** params) { CHK(0) CHK(1) CHK(2) norm_grads_f64(P(0, double*), P(1, const float*), P(2, const float*), P(3, int), P(4, int), P(5, int)); }
static void k_row_sqnorm_add_f64(void** params) { CHK(0) CHK(1) row_sqnorm_add_f64(P(0, double*), P(1, const double*), P(2, int), P(3, int)); }
static void k_coef_sum_f64(void** params) { CHK(0) CHK(1) CHK(2) coef_sum_f64(P(0, double*), P(1, const double*), P(2, const double*), P(3, int), P(4, int), P(5, int)); }
static void k_embed_f32(void** params) { CHK(0) CHK(1) CHK(2) embed_f32(P(0, float*), P(1, const float*), P(2, const float*), P(3, int), P(4, int), P(5, int), P(6, int)); }
static void k_embed_norm_f64(void** params) { CHK(0) CHK(1) CHK(2) embed_norm_f64(P(0, double*), P(1, const float*), P(2, const float*), P(3, int), P(4, int), P(5, int), P(6, int)); }
static void k_embed_coef_sum_f64(void** params) { CHK(0) CHK(1) CHK(2) CHK(3) embed_coef_sum_f64(P(0, double*), P(1, const float*), P(2, const float*), P(3, const double*), P(4, int), P(5, int), P(6, int), P(7, int), P(8, int)); }
static void k_adam_f32(void** params) { CHK(0) CHK(1) CHK(2) CHK(3) adam_f32(P(0, float*), P(1, float*), P(2, float*), P(3, const float*), P(4, i64), P(5, float), P(6, float), P(7, float), P(8, float), P(9, float), P(10, float), P(11, float)); }

typedef struct { const char* name; void (*call)(void**); int sync; int rowthreads; } kdesc;
static const kdesc KERNELS[] = {
	{"gaussian_f32", k_gaussian_f32, 0, 0}, {"laplace_f32", k_laplace_f32, 0, 0},
	{"gaussian_f64", k_gaussian_f64, 0, 0}, {"laplace_f64", k_laplace_f64, 0, 0},
	{"ball_lanes", k_ball_lanes, 0, 0}, {"ball_scale", k_ball_scale, 0, 0},
	{"row_sqnorm_f32", k_row_sqnorm_f32, 1, 1}, {"ghost_accum", k_ghost_accum, 0, 0},
	{"clip_coef", k_clip_coef, 0, 0}, {"scale_rows_f32", k_scale_rows_f32, 0, 0},
	{"pad_mask", k_pad_mask, 0, 0}, {"gather_batch_f32", k_gather_batch_f32, 0, 0},
	{"bias_add_f32", k_bias_add_f32, 0, 0}, {"activate_f32", k_activate_f32, 0, 0},
	{"activate_bwd_f32", k_activate_bwd_f32, 0, 0}, {"softmax_xent_f32", k_softmax_xent_f32, 1, 1},
	{"scale_f32", k_scale_f32, 0, 0}, {"nonfinite_f32", k_nonfinite_f32, 0, 0},
	{"sgd_f32", k_sgd_f32, 0, 0}, {"adam_f32", k_adam_f32, 0, 0},
	{"im2col_f32", k_im2col_f32, 0, 0}, {"col2im_f32", k_col2im_f32, 0, 0},
	{"maxpool_f32", k_maxpool_f32, 0, 0}, {"maxpool_bwd_f32", k_maxpool_bwd_f32, 0, 0},
	{"example_col_sum_f32", k_example_col_sum_f32, 0, 0}, {"add_f64", k_add_f64, 0, 0},
	{"coef_sum_f32", k_coef_sum_f32, 0, 0}, {"widen_rows_f32", k_widen_rows_f32, 0, 0},
	{"round_scale_f64", k_round_scale_f64, 0, 0}, {"to_bf16", k_to_bf16, 0, 0},
	{"point_f32", k_point_f32, 0, 0}, {"point_bwd_f32", k_point_bwd_f32, 0, 0},
	{"avgpool_f32", k_avgpool_f32, 0, 0}, {"avgpool_bwd_f32", k_avgpool_bwd_f32, 0, 0},
	{"add_f32", k_add_f32, 0, 0},
	{"norm_f32", k_norm_f32, 0, 0}, {"affine_f32", k_affine_f32, 0, 0}, {"norm_grads_f64", k_norm_grads_f64, 0, 0},
	{"row_sqnorm_add_f64", k_row_sqnorm_add_f64, 0, 0}, {"coef_sum_f64", k_coef_sum_f64, 0, 0},
	{"embed_f32", k_embed_f32, 0, 0}, {"embed_norm_f64", k_embed_norm_f64, 0, 0}, {"embed_coef_sum_f64", k_embed_coef_sum_f64, 0, 0},
};
#define NKERNELS ((int)(sizeof(KERNELS) / sizeof(KERNELS[0])))

/* ---------------- driver API ---------------- */

typedef int CUresult;
static int initialized;
static char* module_text;
static int module_loaded;
static int ctx_retained;
static int stream_magic = 0x5743;
static int event_magic[64];
static double event_time[64];

CUresult cuInit(unsigned flags) {
	if (flags != 0) return 1;
	if (env_long("FAKECUDA_HANG_INIT")) for (;;) sleep(3600);
	if (env_long("FAKECUDA_NO_DEVICE")) return 100;
	initialized = 1;
	return 0;
}
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int* n) { if (!initialized) return 3; *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int ord) { if (!initialized) return 3; if (ord != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char* name, int len, int d) { if (d != 0) return 101; snprintf(name, len, "FakeGPU-0"); return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
	if (d != 0) return 101;
	*v = attr == 75 ? 9 : attr == 76 ? 0 : 1;
	return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* b, int d) { if (d != 0) return 101; *b = TOTAL_MEM; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { if (d != 0) return 101; *c = (void*)&ctx_retained; ctx_retained++; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { if (d != 0 || ctx_retained == 0) return 201; ctx_retained--; return 0; }
CUresult cuCtxSetCurrent(void* c) { return c == (void*)&ctx_retained ? 0 : 201; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = TOTAL_MEM - allocated; *t = TOTAL_MEM; return 0; }

CUresult cuMemAlloc_v2(uint64_t* p, size_t bytes) {
	alloc_calls++;
	long oom = env_long("FAKECUDA_OOM_AT");
	if ((oom > 0 && alloc_calls >= oom) || bytes == 0 || allocated + bytes > TOTAL_MEM) return 2;
	void* m = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
	if (!m) return 2;
	memset(m, 0xFF, bytes); /* garbage (NaN floats): kernels must not read before writing */
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 64;
		allocs = realloc(allocs, capallocs * sizeof(alloc_t));
	}
	allocs[nallocs].ptr = (uint64_t)(uintptr_t)m;
	allocs[nallocs].size = bytes;
	nallocs++;
	allocated += bytes;
	*p = (uint64_t)(uintptr_t)m;
	return 0;
}
CUresult cuMemFree_v2(uint64_t p) {
	for (int i = 0; i < nallocs; i++) {
		if (allocs[i].ptr == p) {
			allocated -= allocs[i].size;
			free((void*)(uintptr_t)p);
			allocs[i] = allocs[--nallocs];
			return 0;
		}
	}
	return 1; /* CUDA_ERROR_INVALID_VALUE */
}
static int valid_stream(void* s) { return s == NULL || s == (void*)&stream_magic; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* s) {
	if (!valid_stream(s) || !valid_range(dst, n) || !src) return 1;
	memcpy((void*)(uintptr_t)dst, src, n);
	return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* s) {
	if (!valid_stream(s) || !valid_range(src, n) || !dst) return 1;
	memcpy(dst, (void*)(uintptr_t)src, n);
	return 0;
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* s) {
	if (!valid_stream(s) || !valid_range(dst, n) || !valid_range(src, n)) return 1;
	memmove((void*)(uintptr_t)dst, (void*)(uintptr_t)src, n);
	return 0;
}
CUresult cuMemsetD8Async(uint64_t dst, unsigned char v, size_t n, void* s) {
	if (!valid_stream(s) || !valid_range(dst, n)) return 1;
	memset((void*)(uintptr_t)dst, v, n);
	return 0;
}
CUresult cuModuleLoadData(void** m, const void* image) {
	if (env_long("FAKECUDA_MODULE_FAIL")) return 218;
	const char* t = image;
	if (!t || !strstr(t, ".version") || !strstr(t, ".target") || !strstr(t, ".entry")) return 200;
	free(module_text);
	module_text = strdup(t);
	module_loaded = 1;
	*m = (void*)&module_loaded;
	return 0;
}
CUresult cuModuleUnload(void* m) { if (m != (void*)&module_loaded || !module_loaded) return 400; module_loaded = 0; return 0; }
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
	if (m != (void*)&module_loaded || !module_loaded) return 400;
	char pat[256];
	snprintf(pat, sizeof pat, ".entry %s(", name);
	if (!strstr(module_text, pat)) return 500;
	for (int i = 0; i < NKERNELS; i++) {
		if (strcmp(KERNELS[i].name, name) == 0) { *f = (void*)&KERNELS[i]; return 0; }
	}
	return 500;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void* s, void** params, void** extra) {
	launch_calls++;
	long lf = env_long("FAKECUDA_LAUNCH_FAIL");
	if (lf > 0 && launch_calls >= lf) return 719;
	const kdesc* k = f;
	if (k < KERNELS || k >= KERNELS + NKERNELS) return 400;
	if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > MAXTHREADS || by != 1 || bz != 1 || shmem != 0 || !valid_stream(s) || extra != NULL || params == NULL) return 1;
	if (k->rowthreads && bx != ROWTHREADS) return 1;
	fake_gdim = gx;
	fake_bdim = bx;
	bad_pointer = 0;
	for (unsigned b = 0; b < gx; b++) {
		fake_bid = b;
		if (k->sync) {
			cur_call = k->call;
			cur_params = params;
			run_block_fibers(bx);
		} else {
			for (unsigned t = 0; t < bx; t++) {
				fake_tid = t;
				k->call(params);
			}
		}
		if (bad_pointer) return 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
	}
	return 0;
}
CUresult cuStreamCreate(void** s, unsigned flags) { (void)flags; *s = (void*)&stream_magic; return 0; }
CUresult cuStreamDestroy_v2(void* s) { return s == (void*)&stream_magic ? 0 : 400; }
static long sync_calls;
CUresult cuStreamSynchronize(void* s) {
	sync_calls++;
	long hang = env_long("FAKECUDA_HANG_SYNC");
	if (hang > 0 && sync_calls >= hang) for (;;) sleep(3600);
	return valid_stream(s) ? 0 : 400;
}
static double now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
CUresult cuEventCreate(void** e, unsigned flags) {
	(void)flags;
	for (int i = 0; i < 64; i++) {
		if (!event_magic[i]) { event_magic[i] = 1; event_time[i] = -1; *e = &event_magic[i]; return 0; }
	}
	return 2;
}
static int event_index(void* e) {
	int* p = e;
	if (p < event_magic || p >= event_magic + 64 || !*p) return -1;
	return (int)(p - event_magic);
}
CUresult cuEventDestroy_v2(void* e) { int i = event_index(e); if (i < 0) return 400; event_magic[i] = 0; return 0; }
CUresult cuEventRecord(void* e, void* s) { int i = event_index(e); if (i < 0 || !valid_stream(s)) return 400; event_time[i] = now_ms(); return 0; }
CUresult cuEventSynchronize(void* e) { return event_index(e) < 0 ? 400 : 0; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
	int i = event_index(a), j = event_index(b);
	if (i < 0 || j < 0) return 400;
	if (event_time[i] < 0 || event_time[j] < 0) return 600; /* CUDA_ERROR_NOT_READY */
	*ms = (float)(event_time[j] - event_time[i]);
	return 0;
}
static const char* err_name(int r) {
	switch (r) {
	case 0: return "CUDA_SUCCESS";
	case 1: return "CUDA_ERROR_INVALID_VALUE";
	case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
	case 3: return "CUDA_ERROR_NOT_INITIALIZED";
	case 100: return "CUDA_ERROR_NO_DEVICE";
	case 101: return "CUDA_ERROR_INVALID_DEVICE";
	case 200: return "CUDA_ERROR_INVALID_IMAGE";
	case 201: return "CUDA_ERROR_INVALID_CONTEXT";
	case 218: return "CUDA_ERROR_INVALID_PTX";
	case 400: return "CUDA_ERROR_INVALID_HANDLE";
	case 500: return "CUDA_ERROR_NOT_FOUND";
	case 600: return "CUDA_ERROR_NOT_READY";
	case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case 719: return "CUDA_ERROR_LAUNCH_FAILED";
	}
	return NULL;
}
CUresult cuGetErrorName(int r, const char** s) { *s = err_name(r); return *s ? 0 : 1; }
CUresult cuGetErrorString(int r, const char** s) { *s = err_name(r) ? "fake driver error" : NULL; return *s ? 0 : 1; }

int fakecuda_valid_range(uint64_t p, uint64_t n) { return valid_range(p, n); }
int fakecuda_valid_stream(void* s) { return valid_stream(s); }
#else
/* ---------------- cuBLAS ---------------- */

static int blas_magic = 0xB1A5;
int cublasCreate_v2(void** h) { *h = &blas_magic; return 0; }
int cublasDestroy_v2(void* h) { return h == &blas_magic ? 0 : 1; }
int cublasSetStream_v2(void* h, void* s) { return h == &blas_magic && fakecuda_valid_stream(s) ? 0 : 7; }
int cublasGetVersion_v2(void* h, int* v) { if (h != &blas_magic) return 1; *v = 130100; return 0; }
/* Column-major C = alpha·op(A)·op(B) + beta·C (C not read when beta = 0), float accumulation. */
static void sgemm(int ta, int tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++) {
			float acc = 0;
			for (int l = 0; l < k; l++) {
				float a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
				float b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
				acc += a * b;
			}
			float* c = &C[i + (size_t)j * ldc];
			*c = beta == 0 ? alpha * acc : alpha * acc + beta * *c;
		}
	}
}
/* The checks of a cuBLAS GEMM call: 0, or the cuBLAS status (7: invalid value, 14: internal
   error, as an illegal address would end). */
static int sgemm_check(int ta, int tb, int m, int n, int k, const float* A, int lda, const float* B, int ldb, const float* C, int ldc) {
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
	if (ldc < (m > 1 ? m : 1) || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1)) return 7;
	if (m == 0 || n == 0) return 0;
	if (!fakecuda_valid_range((uint64_t)(uintptr_t)C, ((uint64_t)(n - 1) * ldc + m) * 4)) return 14;
	if (k > 0 && (!fakecuda_valid_range((uint64_t)(uintptr_t)A, ((uint64_t)((ta ? m : k) - 1) * lda + (ta ? k : m)) * 4) ||
	              !fakecuda_valid_range((uint64_t)(uintptr_t)B, ((uint64_t)((tb ? k : n) - 1) * ldb + (tb ? n : k)) * 4))) return 14;
	return 0;
}
int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                   const float* B, int ldb, const float* beta, float* C, int ldc) {
	if (h != &blas_magic) return 1;
	int st = sgemm_check(ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
	if (st != 0 || m == 0 || n == 0) return st;
	sgemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
	return 0;
}
/* Column-major C = alpha·op(A)·op(B) + beta·C in double (C not read when beta = 0). */
int cublasDgemm_v2(void* h, int ta, int tb, int m, int n, int k, const double* alpha, const double* A, int lda,
                   const double* B, int ldb, const double* beta, double* C, int ldc) {
	if (h != &blas_magic) return 1;
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
	if (ldc < (m > 1 ? m : 1) || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1)) return 7;
	if (m == 0 || n == 0) return 0;
	if (!fakecuda_valid_range((uint64_t)(uintptr_t)C, ((uint64_t)(n - 1) * ldc + m) * 8)) return 14;
	if (k > 0 && (!fakecuda_valid_range((uint64_t)(uintptr_t)A, ((uint64_t)((ta ? m : k) - 1) * lda + (ta ? k : m)) * 8) ||
	              !fakecuda_valid_range((uint64_t)(uintptr_t)B, ((uint64_t)((tb ? k : n) - 1) * ldb + (tb ? n : k)) * 8))) return 14;
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++) {
			double acc = 0;
			for (int l = 0; l < k; l++) {
				double a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
				double b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
				acc += a * b;
			}
			double* c = &C[i + (size_t)j * ldc];
			*c = *beta == 0 ? *alpha * acc : *alpha * acc + *beta * *c;
		}
	}
	return 0;
}
/* cublasGemmEx for the one case dpsgd uses: A and B bfloat16 (CUDA_R_16BF = 14), C float
   (CUDA_R_32F = 0), compute CUBLAS_COMPUTE_32F (68): each bf16 value widened exactly to
   float, the products (exact in float: 8-bit significands) accumulated in float, as tensor
   cores do with fp32 accumulation. Any other type combination is CUBLAS_STATUS_NOT_SUPPORTED
   (15). */
static float bf16f(uint16_t h) { union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f; }
int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int Atype, int lda,
                 const void* B, int Btype, int ldb, const void* beta, void* C, int Ctype, int ldc, int computeType, int algo) {
	if (h != &blas_magic) return 1;
	if (Atype != 14 || Btype != 14 || Ctype != 0 || computeType != 68 || algo != -1) return 15;
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
	if (ldc < (m > 1 ? m : 1) || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1)) return 7;
	if (m == 0 || n == 0) return 0;
	if (!fakecuda_valid_range((uint64_t)(uintptr_t)C, ((uint64_t)(n - 1) * ldc + m) * 4)) return 14;
	if (k > 0 && (!fakecuda_valid_range((uint64_t)(uintptr_t)A, ((uint64_t)((ta ? m : k) - 1) * lda + (ta ? k : m)) * 2) ||
	              !fakecuda_valid_range((uint64_t)(uintptr_t)B, ((uint64_t)((tb ? k : n) - 1) * ldb + (tb ? n : k)) * 2))) return 14;
	const uint16_t *a16 = A, *b16 = B;
	float al = *(const float*)alpha, be = *(const float*)beta, *c32 = C;
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++) {
			float acc = 0;
			for (int l = 0; l < k; l++) {
				float a = bf16f(ta ? a16[l + (size_t)i * lda] : a16[i + (size_t)l * lda]);
				float b = bf16f(tb ? b16[j + (size_t)l * ldb] : b16[l + (size_t)j * ldb]);
				acc += a * b;
			}
			float* c = &c32[i + (size_t)j * ldc];
			*c = be == 0 ? al * acc : al * acc + be * *c;
		}
	}
	return 0;
}
/* batch GEMMs, the q-th on A + q·strideA, B + q·strideB, C + q·strideC (elements), each
   checked as one cublasSgemm_v2 call before any runs. */
int cublasSgemmStridedBatched(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda, long long strideA,
                              const float* B, int ldb, long long strideB, const float* beta, float* C, int ldc, long long strideC, int batch) {
	if (h != &blas_magic) return 1;
	if (batch < 0) return 7;
	for (int q = 0; q < batch; q++) {
		int st = sgemm_check(ta, tb, m, n, k, A + q * strideA, lda, B + q * strideB, ldb, C + q * strideC, ldc);
		if (st != 0) return st;
	}
	if (m == 0 || n == 0) return 0;
	for (int q = 0; q < batch; q++) sgemm(ta, tb, m, n, k, *alpha, A + q * strideA, lda, B + q * strideB, ldb, *beta, C + q * strideC, ldc);
	return 0;
}
#endif
