// Softmax and log-softmax along one dimension, in f32, stable: each lane's maximum is
// subtracted first. A lane (the elements along the dimension at one position of the others) is
// read through strides, any layout, by `threads` neighbouring threads of a workgroup (a power of
// two up to 256; 256 / threads lanes a workgroup): 256 along a long contiguous lane, 1 (a lane a
// thread, neighbouring threads on neighbouring lanes) when the dimension is not the innermost.
// Three sweeps: the maximum, the sum of exponentials, the result. The result is contiguous in
// the input's shape.
//
// A lane holding NaN or +inf is NaN, as `inf - inf` makes it; so is a lane of -inf only.
//
// Parameters: [lanes, n (lane length), threads, kn, in offset, in step (the input stride along
// the dimension), out step, 0, kept sizes[kn], kept input strides[kn], kept output strides[kn]].
//
// Placeholders (filled by runtime/src/wgpu/along.rs):
//   IN    the element type of the input (f32, i32, or u32 for bools)
//   LOAD  the input element at position `p`, as f32
//   LOG   true for log-softmax

@group(0) @binding(1) var<storage, read> src: array<{{IN}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

const LOG: bool = {{LOG}};

var<workgroup> shared_f: array<f32, 256>;

fn load(p: u32) -> f32 {
    return {{LOAD}};
}

fn is_minus_inf(x: f32) -> bool {
    return bitcast<u32>(x) == 0xff800000u;
}

// e^(x - m), exactly 0 for x = -inf.
fn shifted_exp(x: f32, m: f32) -> f32 {
    return select(exp(x - m), 0.0, is_minus_inf(x));
}

// The maximum (`largest`) or the sum of `v` over the threads of each lane, given to each of
// them. Every thread of the workgroup calls it (it holds barriers).
fn over_lane(v: f32, lid: u32, sub: u32, threads: u32, largest: bool) -> f32 {
    var acc = v;
    shared_f[lid] = acc;
    for (var s = 128u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (s < threads && sub < s) {
            let other = shared_f[lid + s];
            acc = select(acc + other, max(acc, other), largest);
            shared_f[lid] = acc;
        }
    }
    workgroupBarrier();
    let total = shared_f[lid - sub];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lanes = params[0];
    let n = params[1];
    let threads = params[2];
    let kn = params[3];
    let in_step = params[5];
    let out_step = params[6];
    let lane = group_index(wid, groups) * (256u / threads) + lid / threads;
    let sub = lid % threads;
    let live = lane < lanes;
    var src_at = 0u;
    var dst_at = 0u;
    if (live) {
        src_at = position(lane, kn, 8u, 8u + kn, params[4]);
        dst_at = position(lane, kn, 8u, 8u + 2u * kn, 0u);
    }
    // The maximum, NaN counted as +inf: a lane whose maximum is infinite is NaN.
    var m = -infinity();
    if (live) {
        for (var j = sub; j < n; j = j + threads) {
            let x = load(src_at + j * in_step);
            m = max(m, select(x, infinity(), is_nan(x)));
        }
    }
    m = over_lane(m, lid, sub, threads, true);
    let broken = is_inf(m);
    var sum = 0.0;
    if (live && !broken) {
        for (var j = sub; j < n; j = j + threads) {
            sum = sum + shifted_exp(load(src_at + j * in_step), m);
        }
    }
    sum = over_lane(sum, lid, sub, threads, false);
    if (live) {
        let log_sum = log(sum);
        for (var j = sub; j < n; j = j + threads) {
            let x = load(src_at + j * in_step);
            var r: f32;
            if (broken) {
                r = nan();
            } else if (LOG) {
                r = select(x - m - log_sum, -infinity(), is_minus_inf(x));
            } else {
                r = shifted_exp(x, m) / sum;
            }
            dst[dst_at + j * out_step] = r;
        }
    }
}
