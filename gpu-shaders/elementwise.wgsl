// Elementwise kernels: `out[i] = op(a[i], b[i], c[i])` over a broadcast shape. Each workgroup
// takes a block of 4 * 256 elements, each thread four of them a workgroup's width apart (so
// every read and write stays coalesced), all four read before any is written: four loads in
// flight per thread rather than one keep a GPU's memory busy. Each operand is a strided tensor
// (any layout: permuted, expanded, offset) or a scalar held in the parameters, converted on
// load to the type the operation computes in. The same kernel copies, casts, fills, and writes
// into strided destinations (in-place operations, `copy_`, concatenation).
//
// Parameters: [n, ndim, sizes[ndim], then for each tensor operand and last for the output:
// strides[ndim] and offset, then the scalars].
//
// Placeholders, in double braces below (filled by runtime/src/wgpu/elementwise.rs):
//   BINDINGS  the input bindings (`in_a`, `in_b`, `in_c`: arrays of f32, i32, or u32 for bools)
//   OUT       the element type of the output binding; OUT_BINDING its binding
//   LOADS     statements defining the operands (`a`, `b`, `c`) and scalars (`s0`, ...)
//   EXPR      the result, from those
//   STORE     the stored word, from the result `r`
//   TARGET    the output position of element `i`

{{BINDINGS}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> out: array<{{OUT}}>;

// The parameter word where operand `k`'s strides start (its offset follows them).
fn operand(k: u32, ndim: u32) -> u32 {
    return 2u + ndim + k * (ndim + 1u);
}

// The element-function library: what WGSL lacks, or gets wrong at the edges.

fn log1p_(x: f32) -> f32 {
    // Kahan: log(u) * x / (u - 1) is exact to a few ulps where 1 + x rounds.
    let u = 1.0 + x;
    if (u == 1.0) {
        return x;
    }
    if (is_inf(u)) {
        return u;
    }
    return log(u) * x / (u - 1.0);
}

fn expm1_(x: f32) -> f32 {
    let u = exp(x);
    if (u == 1.0) {
        return x;
    }
    let m = u - 1.0;
    if (m == -1.0) {
        return -1.0;
    }
    if (is_inf(u)) {
        return u;
    }
    return m * x / log(u);
}

// Sine and cosine of `x`, as (sin, cos), accurate to a few ulp for |x| up to about 6000. GPUs'
// built-in `sin` and `cos` are accurate only near zero (NVIDIA's are off by 1.5e-5 at 255, and
// its cosine near pi/2 has only absolute accuracy, which `tan` turned into relative errors of
// 1e-4). The argument is reduced by n multiples of pi/2 in three parts (Cody-Waite: each
// product exact for |n| < 4096), then Cephes' sinf and cosf polynomials on [-pi/4, pi/4] give
// both, placed and signed by the quadrant n mod 4. NaN and infinities give NaN.
fn sin_cos(x: f32) -> vec2<f32> {
    let n = round(x * 0.63661975);
    // Where n is 0, x itself: the reduction would turn -0 into +0.
    let reduced = ((x - n * 1.5703125) - n * 4.838705062866211e-4) - n * -4.371138828673793e-8;
    let r = select(reduced, x, n == 0.0);
    let z = r * r;
    // Below 2^-12 the cubic term is under half an ulp: r itself (-0 and tiny values exact).
    let s = select(r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4)), r, abs(r) < 2.44e-4);
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    // n mod 4 for negative n too (two's complement).
    switch (i32(n) & 3) {
        case 1: {
            return vec2<f32>(c, -s);
        }
        case 2: {
            return vec2<f32>(-s, -c);
        }
        case 3: {
            return vec2<f32>(-c, s);
        }
        default: {
            return vec2<f32>(s, c);
        }
    }
}

fn tan_(x: f32) -> f32 {
    let v = sin_cos(x);
    return v.x / v.y;
}

fn tanh_(x: f32) -> f32 {
    if (abs(x) > 10.0) {
        return sign(x);
    }
    let e = expm1_(2.0 * x);
    return e / (e + 2.0);
}

fn erf_(x: f32) -> f32 {
    let a = abs(x);
    var y: f32;
    if (a < 0.5) {
        // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320)
        let z = a * a;
        y = a * (1.1283791671 + z * (-0.3761263890 + z * (0.1128379167 + z * (-0.0268661706
            + z * (0.0052239776 - z * 0.0008548327)))));
    } else if (a < 6.0) {
        // Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
        let t = 1.0 / (1.0 + 0.3275911 * a);
        let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        y = 1.0 - p * exp(-a * a);
    } else {
        y = 1.0;
    }
    if (is_nan(x)) {
        return x;
    }
    return select(y, -y, x < 0.0);
}

fn sign_f32(x: f32) -> f32 {
    return select(select(0.0, -1.0, (x < 0.0)), 1.0, (x > 0.0));
}

fn pow_f32(x: f32, y: f32) -> f32 {
    if (y == 0.0 || x == 1.0) {
        return 1.0;
    }
    if (is_nan(x) || is_nan(y)) {
        return nan();
    }
    let whole = trunc(y) == y;
    let odd = whole && abs(y) < 16777216.0 && trunc(y * 0.5) * 2.0 != y;
    if (x == 0.0) {
        let zero = select(0.0, x, odd);
        return select(zero, select(infinity(), bitcast<f32>(bitcast<u32>(x) | 0x7f800000u), odd), y < 0.0);
    }
    if (x < 0.0) {
        if (!whole) {
            return nan();
        }
        let m = pow(-x, y);
        return select(m, -m, odd);
    }
    return pow(x, y);
}

fn pow_i32(base: i32, exponent: i32) -> i32 {
    if (exponent < 0) {
        if (base == 1) {
            return 1;
        }
        if (base == -1) {
            return select(-1, 1, exponent % 2 == 0);
        }
        return 0;
    }
    var result = 1;
    var b = base;
    var e = exponent;
    loop {
        if (e <= 0) {
            break;
        }
        if ((e & 1) == 1) {
            result = result * b;
        }
        b = b * b;
        e = e >> 1u;
    }
    return result;
}

fn div_floor_i32(a: i32, b: i32) -> i32 {
    let q = a / b;
    return select(q, q - 1, (a % b != 0) && ((a < 0) != (b < 0)));
}

fn remainder_i32(a: i32, b: i32) -> i32 {
    let r = a % b;
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

// C's fmod, exact as on the CPU (WGSL's `%` is `a - b * trunc(a / b)`, which is not for large
// quotients): |a| is reduced by |b| times powers of two, each subtraction exact (Sterbenz), and
// takes the sign of `a`.
fn fmod_f32(a: f32, b: f32) -> f32 {
    let y = abs(b);
    if (is_nan(a) || is_nan(b) || is_inf(a) || y == 0.0) {
        return nan();
    }
    var r = abs(a);
    if (!is_inf(y)) {
        // At most one step per binade between them (277); the bound guards devices that flush
        // subnormal numbers to zero.
        for (var step = 0u; step < 280u && r >= y; step++) {
            var t = ldexp(y, frexp(r).exp - frexp(y).exp);
            if (t > r) {
                t = t * 0.5;
            }
            r = r - t;
        }
    }
    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(a) & 0x80000000u));
}

fn remainder_f32(a: f32, b: f32) -> f32 {
    let r = fmod_f32(a, b);
    return select(r, r + b, r != 0.0 && ((r < 0.0) != (b < 0.0)));
}

fn extreme_f32(a: f32, b: f32, larger: bool) -> f32 {
    if (is_nan(a) || is_nan(b)) {
        return nan();
    }
    return select(select(b, a, (a < b)), select(b, a, (a > b)), larger);
}

fn clamp_f32(v: f32, bound: f32, upper: bool) -> f32 {
    if (is_nan(v)) {
        return v;
    }
    let beyond = select((v < bound), (v > bound), upper);
    return select(v, bound, is_nan(bound) || beyond);
}

// The output position of element `i`.
fn output_at(i: u32, ndim: u32) -> u32 {
    return {{TARGET}};
}

// The stored result for element `i`.
fn value(i: u32, ndim: u32) -> {{OUT}} {
    {{LOADS}}
    let r = {{EXPR}};
    return {{STORE}};
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let first = group_index(wid, groups) * 1024u + lid;
    let n = params[0];
    let ndim = params[1];
    if (first + 768u < n) {
        let v0 = value(first, ndim);
        let v1 = value(first + 256u, ndim);
        let v2 = value(first + 512u, ndim);
        let v3 = value(first + 768u, ndim);
        out[output_at(first, ndim)] = v0;
        out[output_at(first + 256u, ndim)] = v1;
        out[output_at(first + 512u, ndim)] = v2;
        out[output_at(first + 768u, ndim)] = v3;
        return;
    }
    for (var i = first; i < n && i < first + 1024u; i = i + 256u) {
        out[output_at(i, ndim)] = value(i, ndim);
    }
}
