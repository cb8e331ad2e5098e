// exact.glsl: float arithmetic that reproduces llama.cpp's CPU rounding on any implementation.
// Implementations may evaluate fma() as a multiply and an add (lavapipe does) and may contract
// a*b+c into one fma; `precise` forbids both, and fmaExact gives the fused result from plain
// operations.

// roundHalf rounds v to the nearest f16 value (ties to even) in float arithmetic, independent
// of the implementation's packHalf2x16 rounding.
float roundHalf(float v) {
    if (v == 0.0) return v;
    int e;
    frexp(v, e);                       // |v| = m·2^e, m in [0.5, 1)
    int u = max(e - 11, -24);          // the f16 ulp of v is 2^u
    return ldexp(roundEven(ldexp(v, -u)), u);
}

// twoSum returns a + b as hi (the rounded sum) plus lo (its exact error).
void twoSum(float a, float b, out float hi, out float lo) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    hi = s;
    lo = e;
}

// twoProd returns a·b as hi (the rounded product) plus lo (its exact error), by Dekker's
// splitting (no overflow for |a|, |b| < 2^100).
void twoProd(float a, float b, out float hi, out float lo) {
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float p = a * b;
    precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    hi = p;
    lo = e;
}

// fmaExact returns a·b + c rounded once (up to a ~2^-24-ulp window around rounding midpoints),
// whether or not the implementation fuses fma().
float fmaExact(float a, float b, float c) {
    float p, pe, s, se;
    twoProd(a, b, p, pe);
    twoSum(p, c, s, se);
    precise float t = se + pe;
    precise float r = s + t;
    return r;
}

// divExact returns a/b correctly rounded (ties cannot occur), as the CPU's IEEE division gives
// it, on implementations whose division is approximate (Vulkan allows 2.5 ulp). The operands
// are scaled to [0.5, 1) by their exponents (exact), the candidates within 3 ulp of the
// implementation's quotient of the scaled values are compared by their exact remainders
// ma - c·mb (whose size is |mb|·|ma/mb - c|), and the winner is scaled back (exact unless the
// quotient is subnormal).
float divExact(float a, float b) {
    // (the quotient itself is never tested: an implementation may compute a/b as a·(1/b),
    // which flushes to 0 for |b| > 2^126 even when a/b is a normal float)
    if (a == 0.0 || b == 0.0 || isnan(a) || isnan(b) || isinf(a) || isinf(b)) return a / b;
    int ea, eb;
    float ma = frexp(a, ea), mb = frexp(b, eb);
    precise float qm = ma / mb;
    int bits = floatBitsToInt(qm);
    float best = qm, bestR = 1.0 / 0.0;
    for (int k = -3; k <= 3; k++) {
        float c = intBitsToFloat(bits + k);
        float p, pe;
        twoProd(c, mb, p, pe);
        precise float r = (ma - p) - pe; // ma - p is exact (Sterbenz): p is within a few ulp of ma
        if (abs(r) < bestR) { bestR = abs(r); best = c; }
    }
    return ldexp(best, ea - eb);
}

// sqrtExact returns sqrt(x) correctly rounded (up to a 2^-24-ulp window around midpoints) on
// implementations whose square root is approximate: x is scaled by an even power of two to
// [0.5, 2), and of the candidates within 3 ulp of the implementation's root, the one whose
// square is nearest the scaled x is scaled back.
float sqrtExact(float x) {
    if (!(x > 0.0) || isinf(x)) return sqrt(x);
    int e;
    float m = frexp(x, e);
    if ((e & 1) != 0) { m *= 2.0; e -= 1; }
    precise float s = sqrt(m);
    int bits = floatBitsToInt(s);
    float best = s, bestR = 1.0 / 0.0;
    for (int k = -3; k <= 3; k++) {
        float c = intBitsToFloat(bits + k);
        float p, pe;
        twoProd(c, c, p, pe);
        precise float r = (m - p) - pe;
        if (abs(r) < bestR) { bestR = abs(r); best = c; }
    }
    return ldexp(best, e / 2);
}

// The 2^(j/64) of expExact as float pairs (hi + lo to ~2^-48).
const float EXP_T_HI[64] = float[64](
    1.000000000e+00,
    1.010889292e+00,
    1.021897197e+00,
    1.033024907e+00,
    1.044273734e+00,
    1.055645227e+00,
    1.067140460e+00,
    1.078760743e+00,
    1.090507746e+00,
    1.102382541e+00,
    1.114386797e+00,
    1.126521587e+00,
    1.138788581e+00,
    1.151189208e+00,
    1.163724899e+00,
    1.176396966e+00,
    1.189207077e+00,
    1.202156782e+00,
    1.215247393e+00,
    1.228480577e+00,
    1.241857767e+00,
    1.255380750e+00,
    1.269050956e+00,
    1.282870054e+00,
    1.296839595e+00,
    1.310961246e+00,
    1.325236678e+00,
    1.339667559e+00,
    1.354255557e+00,
    1.369002461e+00,
    1.383909941e+00,
    1.398979664e+00,
    1.414213538e+00,
    1.429613352e+00,
    1.445180774e+00,
    1.460917830e+00,
    1.476826191e+00,
    1.492907763e+00,
    1.509164453e+00,
    1.525598168e+00,
    1.542210817e+00,
    1.559004426e+00,
    1.575980902e+00,
    1.593142152e+00,
    1.610490322e+00,
    1.628027439e+00,
    1.645755529e+00,
    1.663676620e+00,
    1.681792855e+00,
    1.700106382e+00,
    1.718619347e+00,
    1.737333894e+00,
    1.756252170e+00,
    1.775376439e+00,
    1.794709086e+00,
    1.814252138e+00,
    1.834008098e+00,
    1.853979111e+00,
    1.874167681e+00,
    1.894575953e+00,
    1.915206552e+00,
    1.936061740e+00,
    1.957144141e+00,
    1.978456020e+00);
const float EXP_T_LO[64] = float[64](
    0.000000000e+00,
    -5.711605411e-09,
    -4.811559862e-08,
    -2.809089317e-08,
    4.833470157e-08,
    -4.907169426e-08,
    -5.933751979e-08,
    5.461594554e-08,
    -1.307753994e-08,
    4.260501996e-08,
    -5.435540018e-08,
    3.123641434e-08,
    5.386222313e-08,
    2.192228266e-08,
    -4.051441493e-08,
    2.566975077e-08,
    3.797635273e-08,
    -5.069756526e-08,
    -3.267394888e-08,
    -4.136200360e-08,
    4.496838102e-08,
    7.322237483e-09,
    1.419333318e-09,
    -3.816621685e-08,
    -4.018999533e-08,
    -3.496571566e-08,
    -3.496373324e-08,
    -3.461673970e-08,
    -1.012334927e-08,
    -3.845881835e-08,
    -5.875577358e-08,
    8.689434061e-09,
    2.420323497e-08,
    -1.342992917e-08,
    3.324199938e-08,
    -3.628657552e-08,
    -4.500898854e-08,
    -3.423620143e-08,
    -2.495937323e-08,
    -1.762856883e-08,
    8.070904833e-09,
    -2.576466507e-08,
    -5.661025426e-08,
    -4.903136785e-10,
    9.836217174e-09,
    -1.726008314e-08,
    -5.124972091e-08,
    -3.920298752e-08,
    -2.475532668e-08,
    -2.865147231e-08,
    -4.849617596e-08,
    -5.850223417e-08,
    -9.235770371e-09,
    5.343197884e-08,
    -1.141504491e-08,
    3.736258236e-08,
    -1.123927795e-08,
    1.436561181e-08,
    -4.663005626e-08,
    2.810338451e-08,
    9.845328108e-09,
    5.357072297e-08,
    -1.702180441e-08,
    6.032726318e-09);

// fastTwoSum: a + b as hi + lo for |a| >= |b|.
void fastTwoSum(float a, float b, out float hi, out float lo) {
    precise float s = a + b;
    precise float e = b - (s - a);
    hi = s;
    lo = e;
}

// expExact returns e^x rounded to the nearest float, as llama.cpp's CPU path gets it from a
// double-precision exp (mis-rounded only within ~2^-20 ulp of a rounding midpoint; results in
// the subnormal range may round twice). x = (64k + j)·ln2/64 + r with |r| <= ln2/128 (ln2/64
// in four 10-bit pieces, so k·piece is exact), e^r by a degree-5 polynomial in float-float
// arithmetic, times the float-float 2^(j/64) and 2^k.
float expExact(float x) {
    if (isnan(x)) return x;
    if (x > 89.0) return 1.0 / 0.0;
    if (!(x > -104.0)) return 0.0;
    float kf = roundEven(x * 92.33248261689366);
    precise float rh0 = x - kf * 0.010833740234375;          // exact (Sterbenz)
    float rh, rl;
    twoSum(rh0, kf * 3.3155083656311035e-06, rh, rl);       // - k·C2 (C2 < 0)
    precise float rl2 = rl + kf * 2.97859514830634e-11 - kf * 2.572804640231345e-14;
    fastTwoSum(rh, rl2, rh, rl);
    // e^r - 1 = r + r²/2 + r³/6 + r⁴/24 + r⁵/120
    float p2h, p2l;
    twoProd(rh, rh, p2h, p2l);
    precise float p2lt = p2l + 2.0 * rh * rl;
    precise float tail = p2h * rh * (1.0 / 6.0 + rh * (1.0 / 24.0 + rh * (1.0 / 120.0)));
    float sh, sl;
    twoSum(rh, 0.5 * p2h, sh, sl);
    precise float sl2 = sl + (rl + (0.5 * p2lt + tail));
    fastTwoSum(sh, sl2, sh, sl);
    float eh, el;
    twoSum(1.0, sh, eh, el);
    precise float el2 = el + sl;
    int k = int(kf);
    int j = k & 63;
    float th = EXP_T_HI[j], tl = EXP_T_LO[j];
    float ph, pl;
    twoProd(th, eh, ph, pl);
    precise float pl2 = pl + (th * el2 + tl * eh);
    precise float r = ph + pl2;
    return ldexp(r, k >> 6);
}
