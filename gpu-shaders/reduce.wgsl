// Reductions: each output element folds one "lane" of the input, the elements of the reduced
// dimensions at one position of the kept ones. The host permutes the layout so that the reduced
// dimensions come last (no copy): a lane starts at the storage position of its kept coordinates
// and its elements are addressed through the reduced sizes and strides.
//
// Each lane is split into `chunks` pieces, each piece folded by `threads` neighbouring threads
// of a workgroup (a power of two up to 256; 256 / threads pieces a workgroup). Worker `w` of a
// lane (w = chunk * threads + thread) folds the elements w, w + workers, w + 2 * workers, ... so
// that neighbouring threads read neighbouring elements, whichever way the lane lies: along the
// lane when threads > 1, across neighbouring lanes when threads = 1. The threads of a piece then
// combine their values as a tree in workgroup memory. With one piece a lane the result is
// written; with several, each piece writes a partial (at `chunk * lanes + lane`) and a second
// launch reduces the partials, read with this same kernel (`LOAD` taking the pairs as they are).
//
// Arg reductions carry a value and its position in the lane (the reduced dimensions in row-major
// order), and combine pairs by value, then by position: the result does not depend on the order
// elements are visited in.
//
// Parameters: [lanes, n (lane length), chunks, threads, count (the lane length of the first
// launch, for the mean), kn, rn, offset, kept sizes[kn], kept strides[kn], reduced sizes[rn],
// reduced strides[rn], reduced lane strides[rn]].
//
// Placeholders, in double braces below (filled by runtime/src/wgpu/reduce.rs):
//   BINDINGS  the source (`src`, and `src_index` for the partials of an arg reduction) and the
//             outputs (`dst`, and `dst_index` for partials of an arg reduction)
//   ACC       the type a value folds in: f32, i32, or u32 holding a bool (0 or 1)
//   IDENTITY  the fold's start value (what an empty lane gives)
//   COMBINE   the body of `combine(a, b)`
//   LOAD      the body of `load(p, i)`: the pair for storage position `p`, lane position `i`
//   STORE     the body of `store(slot, a)`
//   LOCATE    the body of `locate(base, j, rn, r)`: the storage and lane positions of element
//             `j` of the lane starting at `base` (r: the parameter word of the reduced sizes)

{{BINDINGS}}

alias Acc = {{ACC}};

// A value and its position in the lane (NONE: no element yet).
struct Pair {
    v: Acc,
    i: u32,
}

const NONE: u32 = 0xffffffffu;

var<workgroup> shared_v: array<Acc, 256>;
var<workgroup> shared_i: array<u32, 256>;

fn max_f32(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) {
        return nan();
    }
    return max(a, b);
}

fn min_f32(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) {
        return nan();
    }
    return min(a, b);
}

// Whether (a, ia) wins over (b, ib) for argmax (`largest`) or argmin: the more extreme value, a
// NaN over anything, the earlier position between equals.
fn first_f32(a: f32, ia: u32, b: f32, ib: u32, largest: bool) -> bool {
    let na = is_nan(a);
    let nb = is_nan(b);
    if (na || nb) {
        return select(na, (ia < ib), na && nb);
    }
    if (a == b) {
        return ia < ib;
    }
    return select((a < b), (a > b), largest);
}

fn first_i32(a: i32, ia: u32, b: i32, ib: u32, largest: bool) -> bool {
    if (a == b) {
        return ia < ib;
    }
    return select((a < b), (a > b), largest);
}

fn first_u32(a: u32, ia: u32, b: u32, ib: u32, largest: bool) -> bool {
    if (a == b) {
        return ia < ib;
    }
    return select((a < b), (a > b), largest);
}

fn combine(a: Pair, b: Pair) -> Pair {
    {{COMBINE}}
}

fn load(p: u32, i: u32) -> Pair {
    {{LOAD}}
}

fn store(slot: u32, a: Pair) {
    {{STORE}}
}

fn locate(base: u32, j: u32, rn: u32, r: u32) -> vec2<u32> {
    {{LOCATE}}
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lanes = params[0];
    let n = params[1];
    let chunks = params[2];
    let threads = params[3];
    let kn = params[5];
    let rn = params[6];
    let task = group_index(wid, groups) * (256u / threads) + lid / threads;
    let sub = lid % threads;
    let live = task < lanes * chunks;
    let lane = task % lanes;
    let chunk = task / lanes;
    var acc = Pair({{IDENTITY}}, NONE);
    if (live) {
        let base = position(lane, kn, 8u, 8u + kn, params[7]);
        let r = 8u + 2u * kn;
        let workers = chunks * threads;
        for (var j = chunk * threads + sub; j < n; j = j + workers) {
            let at = locate(base, j, rn, r);
            acc = combine(acc, load(at.x, at.y));
        }
    }
    // The tree over the threads of each piece (every thread takes part in the barriers).
    shared_v[lid] = acc.v;
    shared_i[lid] = acc.i;
    for (var s = 128u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (s < threads && sub < s) {
            acc = combine(acc, Pair(shared_v[lid + s], shared_i[lid + s]));
            shared_v[lid] = acc.v;
            shared_i[lid] = acc.i;
        }
    }
    if (live && sub == 0u) {
        store(chunk * lanes + lane, acc);
    }
}
