/*
 * c_vmath.c — math functions on vector types, for explicit vector loops.
 *
 * A vector loop (c_vector.c) that calls exp, log, tanh, sigmoid, erf,
 * gelu, sqrt, rsqrt or pow calls one of the helpers below on whole vectors.
 * They are templates, instantiated per vector type by c_vector.c: $V is
 * the vector type (rv_f32x16), $I the signed integer vector of the same
 * lane width (the comparison-mask type), $S the type's suffix (f32x16),
 * $N the number of lanes, $Q the function qualifiers. Every helper may
 * use rv_select_$S and rv_splat_$S, the blend and broadcast of the type.
 *
 * f32: range reduction plus polynomials of our own, written on the vector
 * type so that GCC and Clang turn each line into one AVX-512 / AVX2 / SSE
 * instruction. Each comment states the error measured against libm in
 * double precision over a dense sweep of inputs (tests/unit/test_vector.c
 * measures it again and checks the bound): in ulps of the correctly
 * rounded f32 result (subnormal results counted in ulps of the smallest
 * normal), and as relative error over normal results. NaN, ±0, ±inf and
 * overflow behave as the scalar helpers of c_expr.c (expf, logf, ...);
 * results below FLT_MIN may be flushed to zero, so that no lane does
 * subnormal arithmetic (a microcode assist of ~100 cycles per instruction
 * on x86, which the exp of a masked softmax or gelu's negative tail
 * would otherwise hit on every vector).
 * sqrt is the hardware's correctly rounded square root, lane by lane
 * (GCC and Clang make one vsqrtps of the loop), so sqrt and rsqrt (1 /
 * sqrt, as the scalar code) equal the scalar results bit for bit; a
 * polynomial could only be less exact and no faster.
 *
 * tanh and sigmoid reach e^x through rv_exp_in_range (their arguments
 * are clamped where the result has saturated, so no overflow, underflow
 * or NaN checks), and sigmoid divides by rv_recip (AVX-512's reciprocal
 * estimate and a Newton step): on tanh-bound recursive models (TreeRNN:
 * one tanh per hidden unit per node) the divide and rv_exp's checks were
 * most of the kernel's non-FMA time. erf and gelu test masks to skip
 * the parts of their formula no lane of a vector needs (the erfc branch
 * when every |x| is small, its fit for large arguments when none is),
 * reach e^-t^2 through one exponential of the exactly split t^2 and
 * 1 / t through rv_recip: 20.9 -> 14.3 ns a gelu of 16 lanes on N(0, 1)
 * inputs, erf 17.7 -> 12.7 (bench/bench_vmath.c, one thread).
 *
 * The polynomial coefficients of erf were fitted for this file (Chebyshev
 * interpolation in long double, then rounded to f32); those of exp, log
 * and tanh are Cephes' single-precision ones (S. Moshier).
 *
 * f64 vector loops call libm lane by lane (and the scalar helpers'
 * formulas for sigmoid, gelu and rsqrt): f64 math is rare in the models
 * ravel targets, and that keeps f64 results identical to scalar code.
 */
#include "codegen/codegen.h"

/* clang-format off */
static const char exp_f32[] =
    "/* e^r for |r| <= ln2/2, by Cephes' polynomial. */\n"
    "$Q $V rv_exp_poly_$S($V r) {\n"
    "    $V p = r * 1.9875691500e-4f + 1.3981999507e-3f;\n"
    "    p = p * r + 8.3334519073e-3f;\n"
    "    p = p * r + 4.1665795894e-2f;\n"
    "    p = p * r + 1.6666665459e-1f;\n"
    "    p = p * r + 5.0000001201e-1f;\n"
    "    return p * (r * r) + r + 1.0f;\n"
    "}\n"
    "\n"
    "/* e^(x - n ln2) for n = round(x / ln2), |x - n ln2| <= ln2/2\n"
    " * (Cody-Waite). */\n"
    "$Q $V rv_exp_reduced_$S($V x, $V n) {\n"
    "    $V r = x - n * 0.693359375f;\n"
    "    r = r - n * -2.12194440e-4f;\n"
    "    return rv_exp_poly_$S(r);\n"
    "}\n"
    "\n"
    "/* e^-(hi + lo) for 0 <= hi + lo <= 87, where hi + lo is t^2 split\n"
    " * exactly (lo < 1/16): the rounded sum would be off by up to 2^-18,\n"
    " * 32 ulp of the result. lo joins the Cody-Waite reduction instead,\n"
    " * whose steps each round a value below 1/2 (errors below 2^-26); 2^n\n"
    " * is normal (n >= -126). One exponential, where e^-hi e^-lo took two. */\n"
    "$Q $V rv_exp_neg_sum_$S($V hi, $V lo) {\n"
    "    $V n = ((hi + lo) * -1.44269504f + 12582912.0f) - 12582912.0f;\n"
    "    $V r = (-hi - n * 0.693359375f) - lo;\n"
    "    r = r - n * -2.12194440e-4f;\n"
    "    return rv_exp_poly_$S(r) * ($V)((__builtin_convertvector(n, $I) + 127) << 23);\n"
    "}\n"
    "\n"
    "/* e^x for -80 <= x <= ln FLT_MAX, or NaN (passed through): rv_exp\n"
    " * without its clamps, underflow and NaN selects, with 2^n in one\n"
    " * factor (n is within [-116, 126]). For tanh and sigmoid, which clamp\n"
    " * their argument into that range anyway: 16 instructions instead of\n"
    " * rv_exp's ~29. */\n"
    "$Q $V rv_exp_in_range_$S($V x) {\n"
    "    $V n = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(x / ln2) */\n"
    "    $V p = rv_exp_reduced_$S(x, n);\n"
    "    return p * ($V)((__builtin_convertvector(n, $I) + 127) << 23);\n"
    "}\n"
    "\n"
    "/* 1 / d for 2^-126 <= |d| < 2^126 or NaN, within 1 ulp: AVX-512's\n"
    " * 14-bit estimate and one Newton step (which squares its error) where\n"
    " * the unit is compiled for it, else the division. A vdivps zmm issues\n"
    " * once per ~10 cycles, which bounds sigmoid's ~20 FMAs: 0.35 -> 0.29\n"
    " * ns an element over an L1-resident array (16 lanes, this Xeon). */\n"
    "#if defined(__AVX512F__) && $B == 64\n"
    "#include <immintrin.h>\n"
    "#define RV_RCP14_$S(d) _mm512_rcp14_ps((__m512)(d))\n"
    "#elif defined(__AVX512VL__) && $B == 32\n"
    "#include <immintrin.h>\n"
    "#define RV_RCP14_$S(d) _mm256_rcp14_ps((__m256)(d))\n"
    "#elif defined(__AVX512VL__) && $B == 16\n"
    "#include <immintrin.h>\n"
    "#define RV_RCP14_$S(d) _mm_rcp14_ps((__m128)(d))\n"
    "#endif\n"
    "$Q $V rv_recip_$S($V d) {\n"
    "#ifdef RV_RCP14_$S\n"
    "    $V r = ($V)RV_RCP14_$S(d);\n"
    "    return r + r * (1.0f - d * r);\n"
    "#else\n"
    "    return 1.0f / d;\n"
    "#endif\n"
    "}\n"
    "\n"
    "/* e^x: x = n ln2 + r, e^r by rv_exp_reduced, 2^n made in the\n"
    " * exponent bits in two halves so that results near overflow round once. Results below FLT_MIN (x <\n"
    " * ln FLT_MIN) are 0. Measured max error 0.99 ulp (relative 8.3e-8);\n"
    " * NaN, +-inf, overflow as expf. */\n"
    "$Q $V rv_exp_$S($V x) {\n"
    "    $V xc = rv_select_$S(x < 89.0f, x, rv_splat_$S(89.0f)); /* NaN -> 89: fixed below */\n"
    "    xc = rv_select_$S(xc > -87.336544f, xc, rv_splat_$S(-87.336544f)); /* e^xc >= FLT_MIN */\n"
    "    $V n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(x / ln2) */\n"
    "    $V p = rv_exp_reduced_$S(xc, n);\n"
    "    $I k = __builtin_convertvector(n, $I);\n"
    "    $I k1 = k >> 1;\n"
    "    $V s1 = ($V)((k1 + 127) << 23);\n"
    "    $V s2 = ($V)((k - k1 + 127) << 23);\n"
    "    $V e = rv_select_$S(x < -87.336544f, rv_splat_$S(0.0f), p * s1 * s2);\n"
    "    return rv_select_$S(x == x, e, x);\n"
    "}\n";

static const char log_f32[] =
    "/* ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m by Cephes'\n"
    " * polynomial in m - 1; subnormal x scaled by 2^23 first. Measured max\n"
    " * error 0.77 ulp (relative 7.9e-8); 0 -> -inf, x < 0 -> NaN, as logf. */\n"
    "$Q $V rv_log_$S($V x) {\n"
    "    $I tiny = x < 1.17549435e-38f;\n"
    "    $I bits = ($I)rv_select_$S(tiny, x * 8388608.0f, x);\n"
    "    $I ei = ((bits >> 23) & 0xff) - 126 + (tiny & -23);\n"
    "    $V m = ($V)((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */\n"
    "    $I low = m < 0.707106781f;\n"
    "    $V e = __builtin_convertvector(ei + low, $V);\n"
    "    m = m - 1.0f + ($V)(low & ($I)m); /* 2m - 1 or m - 1 */\n"
    "    $V z = m * m;\n"
    "    $V p = m * 7.0376836292e-2f - 1.1514610310e-1f;\n"
    "    p = p * m + 1.1676998740e-1f;\n"
    "    p = p * m - 1.2420140846e-1f;\n"
    "    p = p * m + 1.4249322787e-1f;\n"
    "    p = p * m - 1.6668057665e-1f;\n"
    "    p = p * m + 2.0000714765e-1f;\n"
    "    p = p * m - 2.4999993993e-1f;\n"
    "    p = p * m + 3.3333331174e-1f;\n"
    "    $V y = p * m * z + e * -2.12194440e-4f - 0.5f * z;\n"
    "    $V r = m + y + e * 0.693359375f;\n"
    "    r = rv_select_$S(x == 0.0f, rv_splat_$S(-INFINITY), r);\n"
    "    r = rv_select_$S(x < 0.0f, rv_splat_$S(NAN), r);\n"
    "    r = rv_select_$S(x == INFINITY, x, r);\n"
    "    return rv_select_$S(x == x, r, x);\n"
    "}\n";

static const char tanh_f32[] =
    "/* tanh: Cephes' odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)\n"
    " * above, with 2|x| clamped to 20 (from |x| = 9.02 on tanh rounds to\n"
    " * +-1; from 10 on the formula gives exactly +-1), so that e^2|x| needs\n"
    " * no range checks. The division stays: AVX-512's reciprocal and a\n"
    " * Newton step measured no faster here. Measured max error 1.31 ulp\n"
    " * (relative 1.3e-7). */\n"
    "$Q $V rv_tanh_$S($V x) {\n"
    "    $V t = ($V)(($I)x & 0x7fffffff);\n"
    "    $V z = x * x;\n"
    "    $V p = z * -5.70498872745e-3f + 2.06390887954e-2f;\n"
    "    p = p * z - 5.37397155531e-2f;\n"
    "    p = p * z + 1.33314422036e-1f;\n"
    "    p = p * z - 3.33332819422e-1f;\n"
    "    $V small = p * z * x + x;\n"
    "    $V u = rv_select_$S(t > 10.0f, rv_splat_$S(20.0f), t + t); /* NaN stays */\n"
    "    $V big = 1.0f - 2.0f / (rv_exp_in_range_$S(u) + 1.0f);\n"
    "    big = ($V)(($I)big | (($I)x & ~0x7fffffff));\n"
    "    return rv_select_$S(t < 0.625f, small, big);\n"
    "}\n";

static const char sigmoid_f32[] =
    "/* 1 / (1 + e^-x), -x clamped to [-80, ln FLT_MIN] (below -80 the sum\n"
    " * rounds to 1; above, the result is below FLT_MIN: 0, as where the\n"
    " * scalar helper's e^-x overflows), NaN passed through. Measured max\n"
    " * error 2.40 ulp (relative 1.2e-7). */\n"
    "$Q $V rv_sigmoid_$S($V x) {\n"
    "    $V u = rv_select_$S(x < -87.336544f, rv_splat_$S(87.336544f), -x);\n"
    "    u = rv_select_$S(u < -80.0f, rv_splat_$S(-80.0f), u);\n"
    "    $V y = rv_recip_$S(1.0f + rv_exp_in_range_$S(u));\n"
    "    return rv_select_$S(x < -87.336544f, rv_splat_$S(0.0f), y);\n"
    "}\n";

static const char erf_f32[] =
    "/* The lanes where a < b, as bits (lane l: bit l; NaN: 0), one compare\n"
    " * into a mask register with AVX-512: erf and gelu test them to skip the\n"
    " * parts of their formula that no lane of a vector needs. */\n"
    "#if defined(__AVX512F__) && $B == 64\n"
    "#include <immintrin.h>\n"
    "#define RV_LT_BITS_$S(a, b) _mm512_cmp_ps_mask((__m512)(a), (__m512)(b), _CMP_LT_OQ)\n"
    "#elif defined(__AVX__) && $B == 32\n"
    "#include <immintrin.h>\n"
    "#define RV_LT_BITS_$S(a, b) _mm256_movemask_ps(_mm256_cmp_ps((__m256)(a), (__m256)(b), _CMP_LT_OQ))\n"
    "#elif defined(__SSE__) && $B == 16\n"
    "#include <immintrin.h>\n"
    "#define RV_LT_BITS_$S(a, b) _mm_movemask_ps(_mm_cmplt_ps((__m128)(a), (__m128)(b)))\n"
    "#endif\n"
    "#define RV_ALL_$S (~0ull >> (64 - $N))\n"
    "$Q uint64_t rv_lt_bits_$S($V a, $V b) {\n"
    "#ifdef RV_LT_BITS_$S\n"
    "    return RV_LT_BITS_$S(a, b);\n"
    "#else\n"
    "    uint64_t bits = 0;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        bits |= (uint64_t)(a[lane] < b[lane]) << lane;\n"
    "    return bits;\n"
    "#endif\n"
    "}\n"
    "\n"
    "/* erf(x) for |x| < 0.5: x P(x^2), P fitted on [0, 0.25]. */\n"
    "$Q $V rv_erf_small_$S($V x) {\n"
    "    $V y = (x * x - 0.125f) * 8.0f;\n"
    "    $V p = y * 1.152119808e-06f - 4.765271660e-05f;\n"
    "    p = p * y + 1.613071538e-03f;\n"
    "    p = p * y - 4.364205152e-02f;\n"
    "    p = p * y + 1.083075285e+00f;\n"
    "    return x * p;\n"
    "}\n"
    "\n"
    "/* R(u) = t e^t^2 erfc(t) for u = 1 / t in [0.5, 2] (0.5 <= t <= 2). */\n"
    "$Q $V rv_erfc_near_$S($V u) {\n"
    "    $V y = (u - 1.25f) * 1.33333333f;\n"
    "    $V r = y * 1.305731348e-05f + 3.927146281e-06f;\n"
    "    r = r * y - 1.196221201e-04f;\n"
    "    r = r * y + 3.227992274e-04f;\n"
    "    r = r * y - 7.022448117e-04f;\n"
    "    r = r * y + 1.382562099e-03f;\n"
    "    r = r * y - 1.819464727e-03f;\n"
    "    r = r * y - 1.208153903e-03f;\n"
    "    r = r * y + 2.066605724e-02f;\n"
    "    r = r * y - 1.019742116e-01f;\n"
    "    return r * y + 3.912804723e-01f;\n"
    "}\n"
    "\n"
    "/* The same R for u in [0.09, 0.5] (2 <= t <= 11). */\n"
    "$Q $V rv_erfc_far_$S($V u) {\n"
    "    $V y = (u - 0.295f) * 4.87804878f;\n"
    "    $V r = y * -2.738827561e-06f + 2.422597936e-05f;\n"
    "    r = r * y - 6.186674000e-05f;\n"
    "    r = r * y - 1.356005814e-04f;\n"
    "    r = r * y + 1.806419925e-03f;\n"
    "    r = r * y - 5.829825066e-03f;\n"
    "    r = r * y - 2.731205896e-02f;\n"
    "    return r * y + 5.423027873e-01f;\n"
    "}\n"
    "\n"
    "/* s erfc(t) for 0.5 <= t <= 11 (past 11 it underflows), given t^2\n"
    " * split exactly as sq_hi + sq_lo: e^-t^2 R(1/t) / t. The split keeps\n"
    " * e^-t^2 precise where t^2 is large (the callers split a value below\n"
    " * 16 into its top 12 bits and the rest, so sq_lo < 1/16); the scale s\n"
    " * is applied before the smallest factor, so that a normal result has\n"
    " * no subnormal intermediate. 1 / t by rv_recip (no divide), and each\n"
    " * fit of R only where a lane needs it (typical vectors have no t >= 2);\n"
    " * t is not NaN (the callers clamp it); lanes below 0.5 (results the\n"
    " * caller discards) count as near. */\n"
    "$Q $V rv_erfc_big_$S($V t, $V sq_hi, $V sq_lo, $V s) {\n"
    "    $V u = rv_recip_$S(t), r;\n"
    "    uint64_t near = rv_lt_bits_$S(t, rv_splat_$S(2.0f));\n"
    "    if (near == RV_ALL_$S)\n"
    "        r = rv_erfc_near_$S(u);\n"
    "    else if (near == 0)\n"
    "        r = rv_erfc_far_$S(u);\n"
    "    else\n"
    "        r = rv_select_$S(t < 2.0f, rv_erfc_near_$S(u), rv_erfc_far_$S(u));\n"
    "    return rv_exp_neg_sum_$S(sq_hi, sq_lo) * (r * (u * s));\n"
    "}\n"
    "\n"
    "/* erf: the polynomial below |x| = 0.5, 1 - erfc(|x|) with x's sign\n"
    " * above (1 from 3.92 on: |x| is clamped to 4, where erfc is still\n"
    " * normal); a vector whose lanes are all below 0.5 is the polynomial\n"
    " * alone. Measured max error 2.2 ulp (relative 1.7e-7). */\n"
    "$Q $V rv_erf_$S($V x) {\n"
    "    $V t = ($V)(($I)x & 0x7fffffff);\n"
    "    uint64_t small = rv_lt_bits_$S(t, rv_splat_$S(0.5f));\n"
    "    if (small == RV_ALL_$S)\n"
    "        return rv_erf_small_$S(x);\n"
    "    t = rv_select_$S(t < 4.0f, t, rv_splat_$S(4.0f)); /* NaN: fixed below */\n"
    "    $V hi = ($V)(($I)t & ~0xfff); /* 12 bits: hi * hi is exact */\n"
    "    $V lo = t - hi;\n"
    "    $V r = 1.0f - rv_erfc_big_$S(t, hi * hi, (hi + hi) * lo + lo * lo, rv_splat_$S(1.0f));\n"
    "    r = ($V)(($I)r | (($I)x & ~0x7fffffff));\n"
    "    if (small)\n"
    "        r = rv_select_$S(t < 0.5f, rv_erf_small_$S(x), r);\n"
    "    return rv_select_$S(x == x, r, x);\n"
    "}\n";

static const char gelu_f32[] =
    "/* Exact gelu, x/2 (1 + erf(x / sqrt 2)); for x / sqrt 2 <= -0.5 as\n"
    " * x/2 erfc(|x| / sqrt 2) with (x / sqrt 2)^2 = x^2 / 2 split exactly,\n"
    " * which keeps full relative precision in the negative tail (the scalar\n"
    " * helper's erfcf rounds x / sqrt 2 first, losing some of it).\n"
    " * |x| is clamped where the result stops changing: 8 above 0 (2 - erfc\n"
    " * is 2), 13.146247 below, where the result falls under FLT_MIN and is\n"
    " * 0 (no subnormal arithmetic: it costs ~100 cycles an instruction on\n"
    " * x86, and dense layers feed gelu such tails). A vector whose lanes\n"
    " * all have |x / sqrt 2| < 0.5 is the erf polynomial alone, and the\n"
    " * tail's select runs only where a lane is below -13.146247. Measured\n"
    " * max error 4.4 ulp (relative 2.9e-7); -inf -> NaN as the scalar\n"
    " * helper. */\n"
    "$Q $V rv_gelu_$S($V x) {\n"
    "    $V u = x * 0.70710678118654752f;\n"
    "    $V t = ($V)(($I)u & 0x7fffffff);\n"
    "    uint64_t small = rv_lt_bits_$S(t, rv_splat_$S(0.5f));\n"
    "    if (small == RV_ALL_$S)\n"
    "        return 0.5f * x * (1.0f + rv_erf_small_$S(u));\n"
    "    $V a = ($V)(($I)x & 0x7fffffff);\n"
    "    $V lim = rv_select_$S(x > 0.0f, rv_splat_$S(8.0f), rv_splat_$S(13.146247f));\n"
    "    a = rv_select_$S(a < lim, a, lim); /* NaN: lim, s stays NaN */\n"
    "    $V hi = ($V)(($I)a & ~0xfff);\n"
    "    $V lo = a - hi;\n"
    "    $V s = rv_select_$S(u > 0.0f, rv_splat_$S(1.0f), 0.5f * x);\n"
    "    $V c = rv_erfc_big_$S(a * 0.70710678118654752f, 0.5f * (hi * hi),\n"
    "                          0.5f * ((hi + hi) * lo + lo * lo), s);\n"
    "    $V r = rv_select_$S(u > 0.0f, 0.5f * x * (2.0f - c), c);\n"
    "    if (small)\n"
    "        r = rv_select_$S(t < 0.5f, 0.5f * x * (1.0f + rv_erf_small_$S(u)), r);\n"
    "    $V tail = rv_splat_$S(-13.146247f);\n"
    "    if (rv_lt_bits_$S(x, tail))\n"
    "        r = rv_select_$S(x < tail, 0.0f * x, r);\n"
    "    return r;\n"
    "}\n";

static const char sqrt_lanes[] =
    "/* Correctly rounded square root, lane by lane (one vsqrt instruction\n"
    " * once compiled). */\n"
    "$Q $V rv_sqrt_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = __builtin_sqrt$F(x[lane]);\n"
    "    return r;\n"
    "}\n";

static const char rsqrt_any[] =
    "/* 1 / sqrt(x) as the scalar code (f32: measured max error 1.5 ulp). */\n"
    "$Q $V rv_rsqrt_$S($V x) {\n"
    "    return 1.0$F / rv_sqrt_$S(x);\n"
    "}\n";

static const char pow_lanes[] =
    "/* pow has no vector form here: libm lane by lane. */\n"
    "$Q $V rv_pow_$S($V x, $V y) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = pow$F(x[lane], y[lane]);\n"
    "    return r;\n"
    "}\n";

/* f64: libm (or the scalar helper's formula) lane by lane. */
static const char exp_f64[] =
    "/* f64 math runs lane by lane on libm, as scalar code. */\n"
    "$Q $V rv_exp_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = exp(x[lane]);\n"
    "    return r;\n"
    "}\n";
static const char log_f64[] =
    "$Q $V rv_log_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = log(x[lane]);\n"
    "    return r;\n"
    "}\n";
static const char tanh_f64[] =
    "$Q $V rv_tanh_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = tanh(x[lane]);\n"
    "    return r;\n"
    "}\n";
static const char sigmoid_f64[] =
    "$Q $V rv_sigmoid_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = 1 / (1 + exp(-x[lane]));\n"
    "    return r;\n"
    "}\n";
static const char erf_f64[] =
    "$Q $V rv_erf_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = erf(x[lane]);\n"
    "    return r;\n"
    "}\n";
static const char gelu_f64[] =
    "$Q $V rv_gelu_$S($V x) {\n"
    "    $V r;\n"
    "    for (int lane = 0; lane < $N; lane++)\n"
    "        r[lane] = 0.5 * x[lane] * erfc(x[lane] * -0.70710678118654752440);\n"
    "    return r;\n"
    "}\n";
/* clang-format on */

/* The helper of each math function of ops.def, per float dtype. */
static const struct {
    const char *f32, *f64;
} templates[EX_COUNT] = {
    [EX_EXP] = {exp_f32, exp_f64},        [EX_LOG] = {log_f32, log_f64},
    [EX_TANH] = {tanh_f32, tanh_f64},     [EX_SIGMOID] = {sigmoid_f32, sigmoid_f64},
    [EX_ERF] = {erf_f32, erf_f64},        [EX_GELU] = {gelu_f32, gelu_f64},
    [EX_SQRT] = {sqrt_lanes, sqrt_lanes}, [EX_RSQRT] = {rsqrt_any, rsqrt_any},
    [EX_POW] = {pow_lanes, pow_lanes},
};

const char *cg_vmath_template(ExprKind k, rv_dtype t) {
    RV_ASSERT(t == RV_F32 || t == RV_F64);
    return t == RV_F32 ? templates[k].f32 : templates[k].f64;
}

int cg_vmath_deps(ExprKind k, rv_dtype t, ExprKind deps[2]) {
    if (k == EX_RSQRT) {
        deps[0] = EX_SQRT;
        return 1;
    }
    if (t != RV_F32)
        return 0;
    switch (k) {
    case EX_TANH:
    case EX_SIGMOID:
    case EX_ERF:
        deps[0] = EX_EXP;
        return 1;
    case EX_GELU:
        deps[0] = EX_ERF; /* its erfc and polynomial */
        deps[1] = EX_EXP;
        return 2;
    default:
        return 0;
    }
}
