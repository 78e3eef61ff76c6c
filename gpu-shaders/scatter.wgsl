// Scatter-add: `out` (contiguous) is zero except that, for every position `i` of `index` (and of
// `src`, of the same shape), `src[i]` is added at `i`'s coordinates with the dim-th replaced by
// `index[i]`. WGSL has no float atomics, so there is one thread per OUTPUT element, which gathers
// its own contributions: it walks `k` over `index`'s positions along `dim` in increasing order
// (the order the CPU adds in, so both give the same bits) and adds `src` wherever `index` holds
// the element's coordinate along `dim`. An element outside `index`'s shape (along the other
// dimensions) gets nothing. An index out of range matches no element: whatever `index` holds,
// every read stays inside `index` and `src`.
//
// Parameters: [n (out's elements), ndim, count (index's size along dim, 0 for an empty index),
// index's stride along dim, src's stride along dim, index's offset, src's offset, inner (out's
// elements per step along dim), out's size along dim, sizes[ndim] (out's), limits[ndim] (index's
// sizes, out's along dim), index's strides[ndim] and src's strides[ndim] (both zero along
// dim)]. `ndim` is at least 1 and every size at least 1 (`n` is not zero).
//
// Placeholders, in double braces below (filled by runtime/src/wgpu/index.rs):
//   ELEMENT  the element type of `src` and `out` (f32, i32, or u32 for bools)
//   ADD      the operator adding two elements (`+`, or `|` for bools)

@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read> src: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{ELEMENT}}>;

// The parameter word where the output's sizes start.
const SIZES: u32 = 9u;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = group_index(wid, groups) * 256u + lid;
    if (i >= params[0]) {
        return;
    }
    let ndim = params[1];
    let limits = SIZES + ndim;
    let index_strides = limits + ndim;
    let src_strides = index_strides + ndim;
    // The positions in `index` and `src` of the first contribution (k = 0), in one walk over
    // the output's coordinates; a coordinate past `index`'s size leaves the element zero.
    var sum = {{ELEMENT}}(0);
    var rest = i;
    var at_index = params[5];
    var at_src = params[6];
    var inside = true;
    for (var d = ndim; d > 0u; d = d - 1u) {
        let size = params[SIZES + d - 1u];
        let next = rest / size;
        let coordinate = rest - next * size;
        inside = inside && coordinate < params[limits + d - 1u];
        at_index = at_index + coordinate * params[index_strides + d - 1u];
        at_src = at_src + coordinate * params[src_strides + d - 1u];
        rest = next;
    }
    if (inside) {
        let wanted = i32((i / params[7]) % params[8]);
        for (var k = 0u; k < params[2]; k = k + 1u) {
            if (index[at_index + k * params[3]] == wanted) {
                sum = sum {{ADD}} src[at_src + k * params[4]];
            }
        }
    }
    out[i] = sum;
}
