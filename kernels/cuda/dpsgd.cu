// dpsgd.cu: the device kernels of dpsgd's CUDA backend (package cuda), one
// translation unit, device code only. It is written in the common subset of
// CUDA C++ and C99 so that three compilers build it:
//
//   clang -x cuda --cuda-device-only -nocudainc -nocudalib  (make ptx, no CUDA install)
//   nvcc -ptx -arch=compute_90 --fmad=false                (on a GPU machine)
//   gcc -x c -DDPSGD_HOST_EMULATION                         (the fake driver of the tests,
//                                                           cuda/testdata/fake/fakecuda.c)
//
// The noise kernels port the CPU kernels of package kernels operation by
// operation (Philox4x32-10, logUnit, sinCos2Pi, expNeg: explicit FMAs, no
// contraction: build with -ffp-contract=off / --fmad=false), so the Gaussian,
// Laplace and ball noise are the same numbers as the CPU's bit for bit before
// the final rounding to float. Reductions sum in a fixed order (no atomics),
// so every kernel is deterministic.
//
// Launch shapes (the host code in package cuda follows them):
//   row kernels (row_sqnorm, softmax_xent): one block per row, ROWTHREADS threads;
//   everything else: 1-D grids, any block size, bounds-checked.
#define ROWTHREADS 128

#if defined(DPSGD_HOST_EMULATION)
/* Host emulation: the fake driver defines fake_tid, fake_bid, fake_bdim,
   fake_gdim and fake_syncthreads() and runs the threads of a block as
   cooperative fibers, one block at a time, so static "shared" arrays are
   per block. */
#include <math.h>
#define KERNEL
#define DEVFN static inline
#define SHARED static
#define TID ((long long)fake_tid)
#define BID ((long long)fake_bid)
#define BDIM ((long long)fake_bdim)
#define GDIM ((long long)fake_gdim)
#define SYNC() fake_syncthreads()
#define FMA(a, b, c) fma(a, b, c)
#define SQRT(x) sqrt(x)
#else
#ifndef __NVCC__
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#include <__clang_cuda_builtin_vars.h>
#define FMA(a, b, c) __nvvm_fma_rn_d(a, b, c)
#define SQRT(x) __nvvm_sqrt_rn_d(x)
#define SYNC() __syncthreads()
#else
#define FMA(a, b, c) __fma_rn(a, b, c)
#define SQRT(x) __dsqrt_rn(x)
#define SYNC() __syncthreads()
#endif
#define KERNEL extern "C" __global__
#define DEVFN static __device__ inline
#define SHARED __shared__
#define TID ((long long)threadIdx.x)
#define BID ((long long)blockIdx.x)
#define BDIM ((long long)blockDim.x)
#define GDIM ((long long)gridDim.x)
#endif

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define GSTRIDE_LOOP(k, n) for (i64 k = BID * BDIM + TID; k < (i64)(n); k += BDIM * GDIM)

DEVFN u64 d2u(double x) { union { double d; u64 u; } v; v.d = x; return v.u; }
DEVFN double u2d(u64 x) { union { double d; u64 u; } v; v.u = x; return v.d; }
DEVFN int finite_d(double v) { return v - v == 0; }

/* ---------------- Philox4x32-10 (kernels/philox.go) ---------------- */

DEVFN void philox(u32 c[4], u32 k0, u32 k1) {
	for (int r = 0; r < 10; r++) {
		if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
		u64 p0 = (u64)0xD2511F53u * (u64)c[0];
		u64 p1 = (u64)0xCD9E8D57u * (u64)c[2];
		u32 x0 = (u32)(p1 >> 32) ^ c[1] ^ k0, x1 = (u32)p1;
		u32 x2 = (u32)(p0 >> 32) ^ c[3] ^ k1, x3 = (u32)p0;
		c[0] = x0; c[1] = x1; c[2] = x2; c[3] = x3;
	}
}

/* Block j of the stream NoiseKey{seed, step, tensor} (kernels/gauss.go):
   its two 53-bit integers m1, m2. */
DEVFN void stream_block(u64 seed, u64 step, u32 tensor, u32 j, u64* m1, u64* m2) {
	u32 c[4];
	c[0] = j; c[1] = tensor; c[2] = (u32)step; c[3] = (u32)(step >> 32);
	philox(c, (u32)seed, (u32)(seed >> 32));
	*m1 = (((u64)c[0] << 32) | c[1]) >> 11;
	*m2 = (((u64)c[2] << 32) | c[3]) >> 11;
}

/* ---------------- logUnit, sinCos2Pi, expNeg (kernels/gauss.go, ball.go) ---------------- */

#define LN2HI 6.93147180369123816490e-01
#define LN2LO 1.90821492927058770002e-10

DEVFN double log_unit(double x) {
	u64 bits = d2u(x);
	u64 frac = bits & ((1ULL << 52) - 1);
	u64 i = (frac + 0x95f619980c433ULL) & (1ULL << 52);
	double y = u2d(frac | (0x3ff0000000000000ULL ^ i));
	double k = (double)((i64)(bits >> 52) - 1023 + (i64)(i >> 52));
	double f = y - 1;
	double s = f / (2 + f);
	double s2 = s * s;
	double s4 = s2 * s2;
	double p1 = FMA(FMA(FMA(1.479819860511658591e-01, s4, 1.818357216161805012e-01), s4, 2.857142874366239149e-01), s4, 6.666666666666735130e-01);
	double p2 = FMA(FMA(1.531383769920937332e-01, s4, 2.222219843214978396e-01), s4, 3.999999999940941908e-01);
	double s4p2 = s4 * p2;
	double R = FMA(s2, p1, s4p2);
	double hf = 0.5 * f;
	double hfsq = hf * f;
	double kl = k * LN2LO;
	double lo = FMA(s, hfsq + R, kl);
	double kh = k * LN2HI;
	return kh - ((hfsq - lo) - f);
}

DEVFN void sincos_2pi(u64 m, double* sn, double* cs) {
	u64 o = m >> 50;
	u64 r = m & ((1ULL << 50) - 1);
	u64 odd = (u64)0 - (o & 1);
	r = (r ^ odd) - odd + ((1ULL << 50) & odd);
	/* (π/4)·2⁻⁵⁰ = 0x1.921fb54442d18p-51, kernels.pi4Ulp50: the double π/4 scaled by 2⁻⁵⁰
	   (shortest round-trip decimal; TestPTXConstants checks the bits in the PTX). */
	double x = (double)r * 6.975736996017264e-16;
	double zz = x * x;
	double ps = FMA(FMA(FMA(FMA(FMA(1.58962301576546568060e-10, zz, -2.50507477628578072866e-8), zz, 2.75573136213857245213e-6), zz, -1.98412698295895385996e-4), zz, 8.33333333332211858878e-3), zz, -1.66666666666666307295e-1);
	double xzz = x * zz;
	double s = FMA(xzz, ps, x);
	double pc = FMA(FMA(FMA(FMA(FMA(-1.13585365213876817300e-11, zz, 2.08757008419747316778e-9), zz, -2.75573141792967388112e-7), zz, 2.48015872888517045348e-5), zz, -1.38888888888730564116e-3), zz, 4.16666666666665929218e-2);
	double z4 = zz * zz;
	double c = FMA(z4, pc, FMA(-0.5, zz, 1));
	u64 sb = d2u(s), cb = d2u(c);
	u64 swap = (u64)0 - (((o >> 1) ^ o) & 1);
	u64 t = (sb ^ cb) & swap;
	sb ^= t;
	cb ^= t;
	sb ^= (o >> 2) << 63;
	cb ^= (((o + 2) >> 2) & 1) << 63;
	*sn = u2d(sb);
	*cs = u2d(cb);
}

/* e^x for x ≤ 0 (kernels/ball.go expNeg); 0 below −708. */
DEVFN double exp_neg(double x) {
	if (!(x >= -708.0)) return 0.0;
	double xl = x * 1.4426950408889634074;
	double k = (double)(i64)(xl - 0.5);
	double kh = k * LN2HI;
	double hi = x - kh;
	double lo = k * LN2LO;
	double r = hi - lo;
	double t = r * r;
	double p = FMA(FMA(FMA(FMA(4.13813679705723846039e-08, t, -1.65339022054652515390e-06), t, 6.61375632143793436117e-05), t, -2.77777777770155933842e-03), t, 1.66666666666666657415e-01);
	double tp = t * p;
	double c = r - tp;
	double rc = r * c;
	double y = 1 - ((lo - rc / (2 - c)) - hi);
	return y * u2d((u64)(1023 + (i64)k) << 52);
}

/* The two normals of a block (kernels/gauss.go boxMuller). */
DEVFN void box_muller(u64 m1, u64 m2, double* z0, double* z1) {
	double u1 = (double)(m1 + 1) * 1.1102230246251565e-16; /* 2⁻⁵³ */
	double r = SQRT(-2 * log_unit(u1));
	double sn, cs;
	sincos_2pi(m2, &sn, &cs);
	*z0 = r * cs;
	*z1 = r * sn;
}

DEVFN double laplace_unit(u64 m) {
	double u = (double)((m & ((1ULL << 52) - 1)) + 1) * 2.220446049250313e-16; /* 2⁻⁵² */
	u64 flip = ((m >> 52) ^ 1) << 63;
	return u2d(d2u(log_unit(u)) ^ flip);
}

/* ---------------- noise ---------------- */

/* The normals z_{2j}, z_{2j+1} of block j of the stream (kernels.NoiseKey.Normal). */
DEVFN void gauss_block(u64 seed, u64 step, u32 tensor, u64 j, double z[2]) {
	u64 m1, m2;
	stream_block(seed, step, tensor, (u32)j, &m1, &m2);
	box_muller(m1, m2, &z[0], &z[1]);
}

/* The unit Laplace values x_{2j}, x_{2j+1} of block j of the stream (kernels/laplace.go). */
DEVFN void laplace_block(u64 seed, u64 step, u32 tensor, u64 j, double x[2]) {
	u64 m[2];
	stream_block(seed, step, tensor, (u32)j, &m[0], &m[1]);
	x[0] = laplace_unit(m[0]);
	x[1] = laplace_unit(m[1]);
}

/* The number of Philox blocks that cover the window [off, off+n) of a stream. */
DEVFN i64 window_blocks(i64 n, u64 off) { return (i64)(((off + (u64)n + 1) >> 1) - (off >> 1)); }

/* g[k] ← float(FMA(std, z_{off+k}, g[k])) for k < n, or g[k] ← float(z) when fill;
   std is *stdp when stdp is not null (ball noise: the scale computed on the device).
   One thread per Philox block of the window. */
KERNEL void gaussian_f32(float* g, i64 n, double std, const double* stdp, u64 seed, u64 step, u32 tensor, u64 off, int fill) {
	if (stdp) std = *stdp;
	GSTRIDE_LOOP(b, window_blocks(n, off)) {
		u64 j = (off >> 1) + (u64)b;
		double z[2];
		gauss_block(seed, step, tensor, j, z);
		for (int h = 0; h < 2; h++) {
			u64 idx = 2 * j + (u64)h;
			if (idx < off || idx >= off + (u64)n) continue;
			i64 k = (i64)(idx - off);
			g[k] = fill ? (float)z[h] : (float)FMA(std, z[h], (double)g[k]);
		}
	}
}

/* gaussian_f32 on a double tensor (kernels.AddGaussianAt / FillGaussianAt[float64]): the
   stream itself, unrounded, so that its every bit can be checked against the CPU, and the
   noise of the CUDA backend's step, added to its float64 clipped sums as the CPU adds it to
   its own; std is *stdp when stdp is not null (ball noise). */
KERNEL void gaussian_f64(double* g, i64 n, double std, const double* stdp, u64 seed, u64 step, u32 tensor, u64 off, int fill) {
	if (stdp) std = *stdp;
	GSTRIDE_LOOP(b, window_blocks(n, off)) {
		u64 j = (off >> 1) + (u64)b;
		double z[2];
		gauss_block(seed, step, tensor, j, z);
		for (int h = 0; h < 2; h++) {
			u64 idx = 2 * j + (u64)h;
			if (idx < off || idx >= off + (u64)n) continue;
			i64 k = (i64)(idx - off);
			g[k] = fill ? z[h] : FMA(std, z[h], g[k]);
		}
	}
}

/* g[k] ← float(FMA(scale, x_{off+k}, g[k])), x the unit Laplace stream (kernels/laplace.go). */
KERNEL void laplace_f32(float* g, i64 n, double scale, u64 seed, u64 step, u32 tensor, u64 off) {
	GSTRIDE_LOOP(b, window_blocks(n, off)) {
		u64 j = (off >> 1) + (u64)b;
		double x[2];
		laplace_block(seed, step, tensor, j, x);
		for (int h = 0; h < 2; h++) {
			u64 idx = 2 * j + (u64)h;
			if (idx < off || idx >= off + (u64)n) continue;
			i64 k = (i64)(idx - off);
			g[k] = (float)FMA(scale, x[h], (double)g[k]);
		}
	}
}

/* laplace_f32 on a double tensor (kernels.AddLaplaceAt[float64]), for bitwise checks. */
KERNEL void laplace_f64(double* g, i64 n, double scale, u64 seed, u64 step, u32 tensor, u64 off) {
	GSTRIDE_LOOP(b, window_blocks(n, off)) {
		u64 j = (off >> 1) + (u64)b;
		double x[2];
		laplace_block(seed, step, tensor, j, x);
		for (int h = 0; h < 2; h++) {
			u64 idx = 2 * j + (u64)h;
			if (idx < off || idx >= off + (u64)n) continue;
			i64 k = (i64)(idx - off);
			g[k] = FMA(scale, x[h], g[k]);
		}
	}
}

/* Ball noise, pass 1 (kernels/ball.go AddBall): for a tensor of n values cut into chunks of
   4096, lanes[4·c + l] = Σ r² (rounded) over the blocks of chunk c whose index in the chunk
   is ≡ l mod 4, in increasing order (z² of the last value of an odd tensor). One thread per
   (chunk, lane). */
KERNEL void ball_lanes(double* lanes, i64 n, u64 seed, u64 step, u32 tensor) {
	i64 chunks = (n + 4095) / 4096;
	GSTRIDE_LOOP(t, 4 * chunks) {
		i64 c = t / 4, l = t % 4;
		i64 cn = n - c * 4096;
		if (cn > 4096) cn = 4096;
		i64 whole = cn / 2;
		u32 j0 = (u32)(c * 2048);
		double acc = 0;
		for (i64 b = l; b < whole; b += 4) {
			u64 m1, m2;
			stream_block(seed, step, tensor, j0 + (u32)b, &m1, &m2);
			double u1 = (double)(m1 + 1) * 1.1102230246251565e-16;
			double r = SQRT(-2 * log_unit(u1));
			double rr = r * r;
			acc += rr;
		}
		if ((cn & 1) && whole % 4 == l) {
			u64 m1, m2;
			stream_block(seed, step, tensor, j0 + (u32)whole, &m1, &m2);
			double z0, z1;
			box_muller(m1, m2, &z0, &z1);
			double zz = z0 * z0;
			acc += zz;
		}
		lanes[t] = acc;
	}
}

/* Ball noise, pass 2: one thread. lanes holds nchunks groups of 4 lane sums, in order of
   tensor then chunk; out[0] ← c = (radius·ρ)/‖g‖ with ρ = exp(ln(U)/d), U = u₁ of block
   `first` of the stream (seed, step, 0xFFFFFFFF); 0 when ‖g‖ = 0. */
KERNEL void ball_scale(double* out, const double* lanes, i64 nchunks, double d, double radius, u64 seed, u64 step, u32 first) {
	if (BID * BDIM + TID != 0) return;
	double sq = 0;
	for (i64 c = 0; c < nchunks; c++) {
		const double* a = lanes + 4 * c;
		sq += (a[0] + a[1]) + (a[2] + a[3]);
	}
	if (sq == 0 || radius == 0) { out[0] = 0; return; }
	u64 m1, m2;
	stream_block(seed, step, 0xFFFFFFFFu, first, &m1, &m2);
	double u = (double)(m1 + 1) * 1.1102230246251565e-16;
	double rho = exp_neg(log_unit(u) / d);
	double rr = radius * rho;
	out[0] = rr / SQRT(sq);
}

/* ---------------- per-example norms and clipping (kernels/norms.go) ---------------- */

/* out[i] = Σ_j a[i·cols+j]², in double; one block of ROWTHREADS threads per row. */
KERNEL void row_sqnorm_f32(double* out, const float* a, int rows, int cols) {
	SHARED double s[ROWTHREADS];
	i64 i = BID;
	double acc = 0;
	if (i < rows) {
		for (i64 j = TID; j < cols; j += BDIM) {
			double v = (double)a[i * cols + j];
			acc += v * v;
		}
	}
	s[TID] = acc;
	SYNC();
	for (int k = ROWTHREADS / 2; k > 0; k >>= 1) {
		if (TID < k) s[TID] += s[TID + k];
		SYNC();
	}
	if (TID == 0 && i < rows) out[i] = s[0];
}

/* norm2[i] += (asq[i] + beta)·esq[i]. */
KERNEL void ghost_accum(double* norm2, const double* asq, const double* esq, int n, double beta) {
	GSTRIDE_LOOP(i, n) { norm2[i] += (asq[i] + beta) * esq[i]; }
}

/* coef[i] = mask[i]·min(1, clip/√norm2[i]); 0 where norm2 is NaN, ±Inf or negative. */
KERNEL void clip_coef(double* coef, const double* norm2, const double* mask, double clip, int n) {
	GSTRIDE_LOOP(i, n) {
		double v = norm2[i];
		double m = mask ? mask[i] : 1.0;
		if (!(v >= 0 && v <= 1.7976931348623157e308)) {
			coef[i] = 0;
		} else {
			double q = clip / SQRT(v);
			coef[i] = m * (q < 1 ? q : 1);
		}
	}
}

DEVFN u32 f2u(float x) { union { float f; u32 u; } v; v.f = x; return v.u; }
DEVFN float u2f(u32 x) { union { float f; u32 u; } v; v.u = x; return v.f; }

/* The exact product c·v rounded toward zero to float (kernels mulTowardZero32): c·v rounded
   to nearest in double, rounded to float, and moved one step toward zero when that is above
   the exact product (decided by the FMA residual where the roundings tie). */
DEVFN float mul_toward_zero_f32(double c, float v) {
	double x = (double)v;
	double q = c * x;
	float f = (float)q;
	if (f == 0) return f;
	double af = (double)f < 0 ? -(double)f : (double)f, aq = q < 0 ? -q : q;
	int above = af > aq;
	if (!above && af == aq) {
		double r = FMA(c, x, -q);
		above = r != 0 && ((r < 0) != (q < 0));
	}
	return above ? u2f(f2u(f) - 1u) : f;
}

/* dst[i·cols+j] = c[i]·src[i·cols+j] as float (kernels.ClipScaleRow, bit for bit): row i
   exactly 0 where c[i] = 0, copied where c[i] = 1; otherwise float(c)·src rounded to nearest
   where float(c) is normal and that product normal or zero, else the exact product rounded
   toward zero, so that |dst| ≤ c·|src| where float(c) or the product has no relative accuracy
   (a record of huge activations gets a subnormal c: float(c) alone can be twice c). dst may
   be src. */
KERNEL void scale_rows_f32(float* dst, const float* src, int rows, int cols, const double* c) {
	GSTRIDE_LOOP(k, (i64)rows * cols) {
		double ci = c[k / cols];
		float v = src[k], p;
		if (ci == 0) {
			p = 0.0f;
		} else if (ci == 1) {
			p = v;
		} else if (ci < 0x1p-126) {
			p = mul_toward_zero_f32(ci, v);
		} else {
			p = (float)ci * v;
			if ((f2u(p) & 0x7fffffffu) - 1u < (1u << 23) - 1u) p = mul_toward_zero_f32(ci, v);
		}
		dst[k] = p;
	}
}

/* ---------------- batches: gather and mask construction ---------------- */

/* mask[i] = 1 for i < n, 0 for n ≤ i < total: the padding mask of a fixed-shape batch
   holding the n examples a Poisson or allocation sampler drew. */
KERNEL void pad_mask(double* mask, int n, int total) {
	GSTRIDE_LOOP(i, total) { mask[i] = i < n ? 1.0 : 0.0; }
}

/* x row i ← X row idx[i] (0 where mask[i] = 0); y row i ← one-hot of labels[idx[i]]
   (all 0 where mask[i] = 0). */
KERNEL void gather_batch_f32(float* x, float* y, const float* X, const int* labels, const int* idx, const double* mask, int b, int d, int k) {
	GSTRIDE_LOOP(t, (i64)b * d) {
		i64 i = t / d, j = t % d;
		x[t] = mask[i] != 0 ? X[(i64)idx[i] * d + j] : 0.0f;
	}
	GSTRIDE_LOOP(t, (i64)b * k) {
		i64 i = t / k, j = t % k;
		y[t] = (mask[i] != 0 && labels[idx[i]] == j) ? 1.0f : 0.0f;
	}
}

/* ---------------- layers: elementwise ops ---------------- */

/* z[i·cols+j] += b[j]. */
KERNEL void bias_add_f32(float* z, const float* b, int rows, int cols) {
	GSTRIDE_LOOP(k, (i64)rows * cols) { z[k] += b[k % cols]; }
}

/* act = 0: ReLU, 1: tanh; out[k] = act(z[k]). */
KERNEL void activate_f32(float* out, const float* z, i64 n, int act) {
	GSTRIDE_LOOP(k, n) {
		float v = z[k];
		if (act == 0) {
			out[k] = v > 0 ? v : 0.0f;
		} else {
			double a = v < 0 ? -(double)v : (double)v;
			double e = exp_neg(-2 * a);
			double t = (1 - e) / (1 + e);
			out[k] = (float)(v < 0 ? -t : t);
		}
	}
}

/* e[k] *= act'(z): ReLU: z > 0; tanh: 1 − h², h = act(z) the layer's output. */
KERNEL void activate_bwd_f32(float* e, const float* z, const float* h, i64 n, int act) {
	GSTRIDE_LOOP(k, n) {
		if (act == 0) {
			if (!(z[k] > 0)) e[k] = 0.0f;
		} else {
			float hk = h[k];
			e[k] = e[k] * (1.0f - hk * hk);
		}
	}
}

/* Softmax cross-entropy of the summed loss, one block of ROWTHREADS threads per row:
   p = softmax(z_i), e_i = p·Σy_i − y_i (the error at the logits; 0 on padding rows),
   loss[i] = −Σ_k y_ik·log p_k, correct[i] = 1 when the first argmax of z_i is the first
   argmax of y_i. */
KERNEL void softmax_xent_f32(float* e, double* loss, int* correct, const float* z, const float* y, int rows, int k) {
	SHARED double s[ROWTHREADS];
	i64 i = BID;
	if (i >= rows) return;
	const float* zi = z + i * k;
	const float* yi = y + i * k;
	if (TID == 0) {
		int az = 0, ay = 0;
		double mx = zi[0], ys = 0;
		for (int j = 1; j < k; j++) {
			if (zi[j] > zi[az]) az = j;
			if (yi[j] > yi[ay]) ay = j;
			if ((double)zi[j] > mx) mx = zi[j];
		}
		correct[i] = az == ay;
		s[0] = mx;
		for (int j = 0; j < k; j++) ys += yi[j];
		s[1] = ys;
	}
	SYNC();
	double mx = s[0], ys = s[1];
	SYNC();
	double acc = 0;
	for (i64 j = TID; j < k; j += BDIM) acc += exp_neg((double)zi[j] - mx);
	s[TID] = acc;
	SYNC();
	for (int h = ROWTHREADS / 2; h > 0; h >>= 1) {
		if (TID < h) s[TID] += s[TID + h];
		SYNC();
	}
	double sum = s[0];
	double lse = mx + log_unit(sum);
	SYNC();
	double l = 0;
	for (i64 j = TID; j < k; j += BDIM) {
		double zj = zi[j];
		double p = exp_neg(zj - mx) / sum;
		e[i * k + j] = (float)(p * ys - (double)yi[j]);
		l -= (double)yi[j] * (zj - lse);
	}
	s[TID] = l;
	SYNC();
	for (int h = ROWTHREADS / 2; h > 0; h >>= 1) {
		if (TID < h) s[TID] += s[TID + h];
		SYNC();
	}
	if (TID == 0) loss[i] = s[0];
}

/* ---------------- convolutions in the row layout (engine/nn rowsop.go, im2col.go) ----------------
   An activation of b examples with h×w positions and c channels is the (b·h·w)×c matrix, rows
   example-major then image row then column (engine/nn's row layout). A convolution is a GEMM
   over its patch matrix; these kernels are the data movements around it, each a gather (one
   thread per output value, no atomics), and each backward kernel adds its terms in the order
   of engine/nn's scatter loops, so that the float sums are the CPU's bit for bit. A window
   op's output has oh = (h + 2·pad − k)/s + 1 by ow positions, computed by the host. */

/* Patch matrix of b inputs: out is (b·oh·ow) × (k·k·c), rows example-major then output row then
   column; zero padding outside the input. chw = 1: each input is a c×h×w image (a dataset row,
   the first convolution, engine/nn im2col) and the columns are ordered (channel, kernel row,
   kernel column); chw = 0: the input is in the row layout and the columns are ordered (kernel
   row, kernel column, channel) (engine/nn rowsOp's patches). */
KERNEL void im2col_f32(float* out, const float* x, int b, int c, int h, int w, int k, int s, int pad, int oh, int ow, int chw) {
	i64 cols = (i64)k * k * c;
	GSTRIDE_LOOP(t, (i64)b * oh * ow * cols) {
		i64 r = t / cols, j = t % cols;
		i64 i = r / ((i64)oh * ow), pos = r % ((i64)oh * ow);
		i64 oy = pos / ow, ox = pos % ow;
		i64 ch, ky, kx;
		if (chw) {
			ch = j / ((i64)k * k);
			ky = (j / k) % k;
			kx = j % k;
		} else {
			ky = j / ((i64)k * c);
			kx = (j / c) % k;
			ch = j % c;
		}
		i64 y = oy * s - pad + ky, xx = ox * s - pad + kx;
		float v = 0.0f;
		if (y >= 0 && y < h && xx >= 0 && xx < w) {
			v = chw ? x[((i * c + ch) * h + y) * w + xx] : x[((i * h + y) * w + xx) * c + ch];
		}
		out[t] = v;
	}
}

/* The gradient of im2col_f32 with chw = 0 (engine/nn patchesBackward): dx ((b·h·w)×c) at a
   pixel is the sum of the patch entries dp ((b·oh·ow)×(k·k·c)) copied from it, added from 0
   in the order of the output positions (oy, ox) that read it. */
KERNEL void col2im_f32(float* dx, const float* dp, int b, int c, int h, int w, int k, int s, int pad, int oh, int ow) {
	i64 cols = (i64)k * k * c;
	GSTRIDE_LOOP(t, (i64)b * h * w * c) {
		i64 ch = t % c, r = t / c;
		i64 i = r / ((i64)h * w), pos = r % ((i64)h * w);
		i64 y = pos / w, xx = pos % w;
		float acc = 0.0f;
		for (i64 oy = 0; oy < oh; oy++) {
			i64 ky = y + pad - oy * s;
			if (ky < 0 || ky >= k) continue;
			for (i64 ox = 0; ox < ow; ox++) {
				i64 kx = xx + pad - ox * s;
				if (kx < 0 || kx >= k) continue;
				acc += dp[((i * oh + oy) * ow + ox) * cols + (ky * k + kx) * c + ch];
			}
		}
		dx[t] = acc;
	}
}

/* Max pooling in the row layout, k×k windows at stride s, no padding (engine/nn poolForward):
   out ((b·oh·ow)×c) is each window's maximum, the first one in scan order (kernel row, then
   column) on ties; idx holds its position y·w + x in the example (NaN: a NaN first entry is
   kept, a later NaN never wins, as the CPU's comparisons). */
KERNEL void maxpool_f32(float* out, int* idx, const float* x, int b, int c, int h, int w, int k, int s, int oh, int ow) {
	GSTRIDE_LOOP(t, (i64)b * oh * ow * c) {
		i64 ch = t % c, r = t / c;
		i64 i = r / ((i64)oh * ow), pos = r % ((i64)oh * ow);
		i64 oy = pos / ow, ox = pos % ow;
		const float* xi = x + i * h * w * c;
		i64 at = (oy * s) * w + ox * s;
		float best = xi[at * c + ch];
		for (i64 ky = 0; ky < k; ky++) {
			for (i64 kx = 0; kx < k; kx++) {
				i64 q = (oy * s + ky) * w + ox * s + kx;
				float v = xi[q * c + ch];
				if (v > best) { best = v; at = q; }
			}
		}
		out[t] = best;
		idx[t] = (int)at;
	}
}

/* The gradient of maxpool_f32 (engine/nn poolBackward): dx ((b·h·w)×c) at a position is the
   sum of dy ((b·oh·ow)×c) over the windows whose maximum it is (idx), added from 0 in scan
   order of the windows. */
KERNEL void maxpool_bwd_f32(float* dx, const float* dy, const int* idx, int b, int c, int h, int w, int k, int s, int oh, int ow) {
	GSTRIDE_LOOP(t, (i64)b * h * w * c) {
		i64 ch = t % c, r = t / c;
		i64 i = r / ((i64)h * w), pos = r % ((i64)h * w);
		i64 y = pos / w, xx = pos % w;
		float acc = 0.0f;
		for (i64 oy = 0; oy < oh; oy++) {
			if (y < oy * s || y >= oy * s + k) continue;
			for (i64 ox = 0; ox < ow; ox++) {
				if (xx < ox * s || xx >= ox * s + k) continue;
				i64 o = ((i * oh + oy) * ow + ox) * c + ch;
				if (idx[o] == pos) acc += dy[o];
			}
		}
		dx[t] = acc;
	}
}

/* Per-example bias gradients of a GEMM layer with `rows` rows per example: g[i·stride + j] =
   Σ_r e[(i·rows + r)·cols + j] in float, rows in increasing order from 0 (engine/step.go
   convGrads). */
KERNEL void example_col_sum_f32(float* g, const float* e, int b, int rows, int cols, i64 stride) {
	GSTRIDE_LOOP(t, (i64)b * cols) {
		i64 i = t / cols, j = t % cols;
		float acc = 0.0f;
		for (i64 r = 0; r < rows; r++) acc += e[(i * rows + r) * cols + j];
		g[i * stride + j] = acc;
	}
}

/* dst[k] += src[k] (double). */
KERNEL void add_f64(double* dst, const double* src, int n) {
	GSTRIDE_LOOP(k, n) { dst[k] += src[k]; }
}

/* The clipped sum of materialized per-example gradients (engine/step.go convClippedSum): for
   j < n, s = Σ c[i]·(double)g[i·n + j] over the examples i < b with c[i] ≠ 0, in example order
   (an example with c = 0 is skipped, never multiplied: its gradient may hold NaN); acc[j] ← 0 + s
   when first, else acc[j] + s (the CPU's float64 sums across physical batches); then the float rounding of acc[j] goes to w[j] (j < nw) or to
   bias[j − nw]. */
KERNEL void coef_sum_f32(double* acc, float* w, float* bias, const float* g, const double* c, int b, int n, int nw, int first) {
	GSTRIDE_LOOP(j, n) {
		double s = 0;
		for (i64 i = 0; i < b; i++) {
			double ci = c[i];
			if (ci == 0) continue;
			double p = ci * (double)g[i * n + j];
			s += p;
		}
		double a = (first ? 0.0 : acc[j]) + s;
		acc[j] = a;
		if (j < nw) {
			w[j] = (float)a;
		} else {
			bias[j - nw] = (float)a;
		}
	}
}

/* ---------------- mixed precision ---------------- */

/* out[k] ← x[k] rounded to bfloat16 (the upper 16 bits of the float32 after rounding to
   nearest, ties to even; overflow to ±Inf; a NaN stays a quiet NaN), the operands of the
   bf16 GEMMs (cublasGemmEx, fp32 accumulation) of --precision bf16. */
KERNEL void to_bf16(unsigned short* out, const float* x, i64 n) {
	GSTRIDE_LOOP(k, n) {
		union { float f; u32 u; } v;
		v.f = x[k];
		u32 u = v.u;
		if ((u & 0x7fffffffu) > 0x7f800000u) {
			out[k] = (unsigned short)((u >> 16) | 0x40u);
		} else {
			u += 0x7fffu + ((u >> 16) & 1u);
			out[k] = (unsigned short)(u >> 16);
		}
	}
}

/* The float64 operands of a dense layer's clipped sum (kernels.ClippedSumWide): out row i
   (cols + ones values) ← the float32 row i of a widened exactly, 0 where c is given and
   c[i] = 0 (a dropped row, which may hold NaN, must not reach the GEMM), then, with ones, a
   last column of 1 (the bias: 1ᵀ·diag(c)·E comes out of the same GEMM as Aᵀ·diag(c)·E). */
KERNEL void widen_rows_f32(double* out, const float* a, int rows, int cols, const double* c, int ones) {
	i64 w = (i64)cols + (ones ? 1 : 0);
	GSTRIDE_LOOP(t, (i64)rows * w) {
		i64 i = t / w, j = t % w;
		if (j == cols) {
			out[t] = 1.0;
		} else {
			out[t] = (c && c[i] == 0) ? 0.0 : (double)a[i * cols + j];
		}
	}
}

/* The step's gradient from its noisy float64 sums (engine cpuBackend.apply): w[j] ←
   float(acc[j]·inv) for j < nw, bias[j − nw] for nw ≤ j < n. */
KERNEL void round_scale_f64(float* w, float* bias, const double* acc, int n, int nw, double inv) {
	GSTRIDE_LOOP(j, n) {
		float v = (float)(acc[j] * inv);
		if (j < nw) {
			w[j] = v;
		} else {
			bias[j - nw] = v;
		}
	}
}

/* ---------------- update (engine/optim.go, engine/train.go) ---------------- */

/* g[k] *= s (float). */
KERNEL void scale_f32(float* g, i64 n, float s) {
	GSTRIDE_LOOP(k, n) { g[k] *= s; }
}

/* flag[0] = 1 when some g[k] is NaN or ±Inf (flag is cleared by the host). */
KERNEL void nonfinite_f32(int* flag, const float* g, i64 n) {
	GSTRIDE_LOOP(k, n) {
		float v = g[k];
		if (v - v != 0) flag[0] = 1;
	}
}

/* opt = 0: SGD, w ← w − lr·(g + wd·w); opt = 1: heavy ball, m ← μm + g + wd·w, w ← w − lr·m. */
KERNEL void sgd_f32(float* w, float* m, const float* g, i64 n, float lr, float wd, float mu, int opt) {
	GSTRIDE_LOOP(k, n) {
		if (opt == 0) {
			float t = g[k] + wd * w[k];
			w[k] -= lr * t;
		} else {
			float a = mu * m[k];
			float t = a + g[k];
			m[k] = t + wd * w[k];
			w[k] -= lr * m[k];
		}
	}
}

/* Adam (engine/optim.go): gj = g + wd·w, m ← β₁m + (1−β₁)gj, v ← β₂v + (1−β₂)gj², w ← w − step·m/(√v + ε);
   omb1 = 1−β₁ and omb2 = 1−β₂ are rounded to float by the host, as the CPU does. */
KERNEL void adam_f32(float* w, float* m, float* v, const float* g, i64 n, float b1, float omb1, float b2, float omb2, float step, float eps, float wd) {
	GSTRIDE_LOOP(k, n) {
		float gj = g[k] + wd * w[k];
		float m1 = b1 * m[k], m2 = omb1 * gj;
		m[k] = m1 + m2;
		float v1 = b2 * v[k], v2 = omb2 * gj;
		v2 = v2 * gj;
		v[k] = v1 + v2;
		float sv = (float)SQRT((double)v[k]);
		float num = step * m[k];
		w[k] -= num / (sv + eps);
	}
}

/* ---------------- layers of the stacks (engine/nn's layer library) ---------------- */

/* e^x for any x: exp_neg, or its reciprocal for x > 0 (+Inf above ~708); NaN stays NaN. */
DEVFN double exp_any(double x) {
	if (x != x) return x;
	if (x <= 0) return exp_neg(x);
	return 1 / exp_neg(-x);
}

/* erfc(x) in double: the algorithm of Go's math.Erfc (FreeBSD's s_erf.c) operation by
   operation, with exp_any for its exponentials (which differ from math.Exp by an ulp or so). */
DEVFN double erfc_d(double x) {
	if (x != x) return x;
	if (x - x != 0) return x > 0 ? 0.0 : 2.0;
	int sign = 0;
	if (x < 0) { x = -x; sign = 1; }
	if (x < 0.84375) {
		double temp;
		if (x < 1.0 / 72057594037927936.0) { /* 2⁻⁵⁶ */
			temp = x;
		} else {
			double z = x * x;
			double r = 1.28379167095512558561e-01 + z * (-3.25042107247001499370e-01 + z * (-2.84817495755985104766e-02 + z * (-5.77027029648944159157e-03 + z * -2.37630166566501626084e-05)));
			double s = 1 + z * (3.97917223959155352819e-01 + z * (6.50222499887672944485e-02 + z * (5.08130628187576562776e-03 + z * (1.32494738004321644526e-04 + z * -3.96022827877536812320e-06))));
			double y = r / s;
			if (x < 0.25) temp = x + x * y;
			else temp = 0.5 + (x * y + (x - 0.5));
		}
		return sign ? 1 + temp : 1 - temp;
	}
	if (x < 1.25) {
		double s = x - 1;
		double P = -2.36211856075265944077e-03 + s * (4.14856118683748331666e-01 + s * (-3.72207876035701323847e-01 + s * (3.18346619901161753674e-01 + s * (-1.10894694282396677476e-01 + s * (3.54783043256182359371e-02 + s * -2.16637559486879084300e-03)))));
		double Q = 1 + s * (1.06420880400844228286e-01 + s * (5.40397917702171048937e-01 + s * (7.18286544141962662868e-02 + s * (1.26171219808761642112e-01 + s * (1.36370839120290507362e-02 + s * 1.19844998467991074170e-02)))));
		return sign ? 1 + 8.45062911510467529297e-01 + P / Q : 1 - 8.45062911510467529297e-01 - P / Q;
	}
	if (x < 28) {
		double s = 1 / (x * x), R, S;
		if (x < 1 / 0.35) {
			R = -9.86494403484714822705e-03 + s * (-6.93858572707181764372e-01 + s * (-1.05586262253232909814e+01 + s * (-6.23753324503260060396e+01 + s * (-1.62396669462573470355e+02 + s * (-1.84605092906711035994e+02 + s * (-8.12874355063065934246e+01 + s * -9.81432934416914548592e+00))))));
			S = 1 + s * (1.96512716674392571292e+01 + s * (1.37657754143519042600e+02 + s * (4.34565877475229228821e+02 + s * (6.45387271733267880336e+02 + s * (4.29008140027567833386e+02 + s * (1.08635005541779435134e+02 + s * (6.57024977031928170135e+00 + s * -6.04244152148580987438e-02)))))));
		} else {
			if (sign && x > 6) return 2;
			R = -9.86494292470009928597e-03 + s * (-7.99283237680523006574e-01 + s * (-1.77579549177547519889e+01 + s * (-1.60636384855821916062e+02 + s * (-6.37566443368389627722e+02 + s * (-1.02509513161107724954e+03 + s * -4.83519191608651397019e+02)))));
			S = 1 + s * (3.03380607434824582924e+01 + s * (3.25792512996573918826e+02 + s * (1.53672958608443695994e+03 + s * (3.19985821950859553908e+03 + s * (2.55305040643316442583e+03 + s * (4.74528541206955367215e+02 + s * -2.24409524465858183362e+01))))));
		}
		double z = u2d(d2u(x) & 0xffffffff00000000ULL);
		double r = exp_any(-z * z - 0.5625) * exp_any((z - x) * (z + x) + R / S);
		return sign ? 2 - r / x : r / x;
	}
	return sign ? 2.0 : 0.0;
}

/* A pointwise function of engine/nn's pointOp, in double, and its derivative:
   fn = 0: GELU, x·Φ(x) = x·0.5·erfc(−x/√2); fn = 1: the tempered sigmoid
   scale·σ(temp·x) − offset. */
DEVFN double point_f(int fn, double x, double scale, double temp, double offset) {
	if (fn == 0) return x * 0.5 * erfc_d(-x / 1.41421356237309504880);
	return scale / (1 + exp_any(-temp * x)) - offset;
}

DEVFN double point_df(int fn, double x, double scale, double temp, double offset) {
	if (fn == 0) return 0.5 * erfc_d(-x / 1.41421356237309504880) + x * exp_any(-x * x / 2) / 2.50662827463100050242;
	double s = 1 / (1 + exp_any(-temp * x));
	return scale * temp * s * (1 - s);
}

/* out[k] = float(f(double(x[k]))) (engine/nn pointApply). */
KERNEL void point_f32(float* out, const float* x, i64 n, int fn, double scale, double temp, double offset) {
	GSTRIDE_LOOP(k, n) { out[k] = (float)point_f(fn, (double)x[k], scale, temp, offset); }
}

/* e[k] = e[k]·float(f′(double(x[k]))), in place: the error at the function's output becomes
   the error at its input (engine/nn pointApply's gradient). */
KERNEL void point_bwd_f32(float* e, const float* x, i64 n, int fn, double scale, double temp, double offset) {
	GSTRIDE_LOOP(k, n) { e[k] = e[k] * (float)point_df(fn, (double)x[k], scale, temp, offset); }
}

/* Average pooling in the row layout, k×k windows at stride s, no padding (engine/nn
   avgPoolForward): the window's values summed in float from 0 in scan order, times the float
   1/(k·k). */
KERNEL void avgpool_f32(float* out, const float* x, int b, int c, int h, int w, int k, int s, int oh, int ow) {
	GSTRIDE_LOOP(t, (i64)b * oh * ow * c) {
		i64 ch = t % c, r = t / c;
		i64 i = r / ((i64)oh * ow), pos = r % ((i64)oh * ow);
		i64 oy = pos / ow, ox = pos % ow;
		const float* xi = x + i * h * w * c;
		float acc = 0.0f;
		for (i64 ky = 0; ky < k; ky++) {
			for (i64 kx = 0; kx < k; kx++) acc += xi[((oy * s + ky) * w + ox * s + kx) * c + ch];
		}
		out[t] = acc * (1.0f / (float)(k * k));
	}
}

/* The gradient of avgpool_f32 (engine/nn avgPoolBackward): dx at a position is the sum from 0,
   in scan order of the windows that hold it, of dy·(1/(k·k)) each rounded to float. */
KERNEL void avgpool_bwd_f32(float* dx, const float* dy, int b, int c, int h, int w, int k, int s, int oh, int ow) {
	float inv = 1.0f / (float)(k * k);
	GSTRIDE_LOOP(t, (i64)b * h * w * c) {
		i64 ch = t % c, r = t / c;
		i64 i = r / ((i64)h * w), pos = r % ((i64)h * w);
		i64 y = pos / w, xx = pos % w;
		float acc = 0.0f;
		for (i64 oy = 0; oy < oh; oy++) {
			if (y < oy * s || y >= oy * s + k) continue;
			for (i64 ox = 0; ox < ow; ox++) {
				if (xx < ox * s || xx >= ox * s + k) continue;
				float v = dy[((i * oh + oy) * ow + ox) * c + ch] * inv;
				acc += v;
			}
		}
		dx[t] = acc;
	}
}

/* out[k] = a[k] + b[k] (float): a residual block's output, and the error at its input (the
   body's plus the skip's). out may be a or b. */
KERNEL void add_f32(float* out, const float* a, const float* b, i64 n) {
	GSTRIDE_LOOP(k, n) { out[k] = a[k] + b[k]; }
}

/* ---------------- normalization layers (engine/nn Norm: LayerNorm, GroupNorm) ---------------- */

/* engine/nn normApply, one thread per example and group (b·groups), on (b·p)×c rows: μ and σ²
   in double, summed position by position then channel by channel, inv = 1/√(σ²/m + 1e-5),
   m = p·c/groups. Forward (diff = 0): out = float((x − μ)·inv), x̂. Backward (diff = 1): gx is
   ∂L/∂x̂ and out = float((gx − mean(gx) − x̂·mean(gx·(x − μ)·inv))·inv), ∂L/∂x. */
KERNEL void norm_f32(float* out, const float* x, const float* gx, int b, int p, int c, int groups, int diff) {
	GSTRIDE_LOOP(t, (i64)b * groups) {
		i64 i = t / groups, grp = t % groups;
		i64 cg = c / groups, lo = grp * cg, hi = lo + cg;
		const float* xi = x + i * p * c;
		float* oi = out + i * p * c;
		double m = (double)(p * cg);
		double mu = 0;
		for (i64 r = 0; r < p; r++)
			for (i64 j = lo; j < hi; j++) mu += (double)xi[r * c + j];
		mu /= m;
		double v2 = 0;
		for (i64 r = 0; r < p; r++)
			for (i64 j = lo; j < hi; j++) {
				double d = (double)xi[r * c + j] - mu;
				v2 += d * d;
			}
		double inv = 1 / SQRT(v2 / m + 1e-5);
		if (!diff) {
			for (i64 r = 0; r < p; r++)
				for (i64 j = lo; j < hi; j++) oi[r * c + j] = (float)(((double)xi[r * c + j] - mu) * inv);
			continue;
		}
		const float* gi = gx + i * p * c;
		double sg = 0, sgx = 0;
		for (i64 r = 0; r < p; r++)
			for (i64 j = lo; j < hi; j++) {
				double gv = (double)gi[r * c + j];
				sg += gv;
				double q = gv * ((double)xi[r * c + j] - mu);
				sgx += q * inv;
			}
		sg /= m;
		sgx /= m;
		for (i64 r = 0; r < p; r++)
			for (i64 j = lo; j < hi; j++) {
				double xh = ((double)xi[r * c + j] - mu) * inv;
				double u = (double)gi[r * c + j] - sg;
				double w = xh * sgx;
				oi[r * c + j] = (float)((u - w) * inv);
			}
	}
}

/* The affine part of a normalization on rows×c: mode 0: out = float(xh·γ) + β (two float
   roundings, the CPU's product then bias); mode 1: out = xh·γ, xh the error at the output:
   the error at x̂. */
KERNEL void affine_f32(float* out, const float* xh, const float* gamma, const float* beta, i64 rows, int c, int mode) {
	GSTRIDE_LOOP(k, rows * c) {
		float s = xh[k] * gamma[k % c];
		out[k] = mode == 0 ? s + beta[k % c] : s;
	}
}

/* The materialized rule of a normalization (engine/nn normRule): example i's gradient, 2c
   doubles at g + i·2c, is Σ_r e·x̂ (γ) then Σ_r e (β) over its p rows, in row order from 0, the
   float products exact in double. */
KERNEL void norm_grads_f64(double* g, const float* e, const float* xh, int b, int p, int c) {
	GSTRIDE_LOOP(t, (i64)b * c) {
		i64 i = t / c, j = t % c;
		double sg = 0, sb = 0;
		for (i64 r = i * p; r < (i + 1) * p; r++) {
			double v = (double)e[r * c + j];
			double q = v * (double)xh[r * c + j];
			sg += q;
			sb += v;
		}
		g[i * 2 * c + j] = sg;
		g[i * 2 * c + c + j] = sb;
	}
}

/* out[i] += Σ_j a[i·cols + j]² in double, j in order (the squared norms of materialized
   per-example gradients, added into the per-example norms). */
KERNEL void row_sqnorm_add_f64(double* out, const double* a, int rows, int cols) {
	GSTRIDE_LOOP(i, rows) {
		double s = 0;
		for (i64 j = 0; j < cols; j++) {
			double v = a[i * cols + j];
			s += v * v;
		}
		out[i] += s;
	}
}

/* coef_sum_f32 on double per-example gradients, without the float copy: acc[j] ← (0 or acc[j])
   + Σ c[i]·g[i·n + j] over the examples with c[i] ≠ 0, in example order (engine/step.go
   matClippedSum). */
KERNEL void coef_sum_f64(double* acc, const double* g, const double* c, int b, int n, int first) {
	GSTRIDE_LOOP(j, n) {
		double s = 0;
		for (i64 i = 0; i < b; i++) {
			double ci = c[i];
			if (ci == 0) continue;
			double q = ci * g[i * n + j];
			s += q;
		}
		acc[j] = (first ? 0.0 : acc[j]) + s;
	}
}

/* ---------------- embeddings (engine/nn Embedding, the sparse rule) ---------------- */

/* v as a token id of a vocabulary of n (engine/nn tokenID): an integer in [0, n), else −1
   (NaN, ±Inf, a fraction, out of range). */
DEVFN i64 token_id(float v, int n) {
	double d = (double)v;
	if (!(d >= 0 && d < (double)n)) return -1;
	i64 k = (i64)d;
	if ((double)k != d) return -1;
	return k;
}

/* out ((b·l)×dim) = the table's row of each of the b·l ids x, a zero row for an invalid one. */
KERNEL void embed_f32(float* out, const float* x, const float* table, int b, int l, int vocab, int dim) {
	GSTRIDE_LOOP(t, (i64)b * l * dim) {
		i64 p = t / dim, k = t % dim;
		i64 id = token_id(x[p], vocab);
		out[t] = id >= 0 ? table[id * dim + k] : 0.0f;
	}
}

/* norm2[i] += ‖example i's table gradient‖²: for each distinct valid id of its l positions, the
   row Σ_{positions with that id} e (double, in position order), squared and summed. */
KERNEL void embed_norm_f64(double* norm2, const float* x, const float* e, int b, int l, int vocab, int dim) {
	GSTRIDE_LOOP(i, b) {
		double s = 0;
		for (i64 p = i * l; p < (i + 1) * l; p++) {
			i64 id = token_id(x[p], vocab);
			if (id < 0) continue;
			int seen = 0;
			for (i64 q = i * l; q < p && !seen; q++) seen = token_id(x[q], vocab) == id;
			if (seen) continue;
			for (i64 k = 0; k < dim; k++) {
				double r = 0;
				for (i64 q = p; q < (i + 1) * l; q++)
					if (token_id(x[q], vocab) == id) r += (double)e[q * dim + k];
				s += r * r;
			}
		}
		norm2[i] += s;
	}
}

/* The clipped sum of the table's gradients (engine/nn SparseTap.AddClipped), one thread per
   table value (id, k): t = Σ over the examples i with c[i] ≠ 0 holding id, in example order, of
   c[i]·(Σ_{its positions with that id} e, double, in position order); acc ← (0 or acc) + t. */
KERNEL void embed_coef_sum_f64(double* acc, const float* x, const float* e, const double* c, int b, int l, int vocab, int dim, int first) {
	GSTRIDE_LOOP(t, (i64)vocab * dim) {
		i64 id = t / dim, k = t % dim;
		double s = 0;
		for (i64 i = 0; i < b; i++) {
			double ci = c[i];
			if (ci == 0) continue;
			double r = 0;
			int any = 0;
			for (i64 q = i * l; q < (i + 1) * l; q++)
				if (token_id(x[q], vocab) == id) {
					r += (double)e[q * dim + k];
					any = 1;
				}
			if (any) {
				double u = ci * r;
				s += u;
			}
		}
		acc[t] = (first ? 0.0 : acc[t]) + s;
	}
}
