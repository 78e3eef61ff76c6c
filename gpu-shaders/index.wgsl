// Index kernels: `index_select` and `gather`, one thread per output element (the output is
// contiguous, so neighbouring threads write, and mostly read, neighbouring elements).
//
// Both are one operation: `out[i] = x[i with its dim-th coordinate replaced by index[i]]`, the
// coordinates of `i` taken in the output's shape. `gather` reads `index` through its own
// strides; `index_select` reads its index vector through strides that are zero except along
// `dim` (the vector expanded to the output's shape), so one kernel serves both. The index is
// clamped into `0 .. size - 1`: whatever it holds, no read falls outside `x`.
//
// Parameters: [n, ndim, size (x's size along dim), step (x's stride along dim), x's offset,
// index's offset, sizes[ndim] (the output's), x's strides[ndim] (zero along dim), index's
// strides[ndim]]. `ndim` is at least 1 and every size at least 1 (`n` is not zero).
//
// Placeholder, in double braces below (filled by runtime/src/wgpu/index.rs):
//   ELEMENT  the element type of `x` and `out` (f32, i32, or u32 for bools)

@group(0) @binding(1) var<storage, read> x: array<{{ELEMENT}}>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<{{ELEMENT}}>;

// The parameter word where the output's sizes start.
const SIZES: u32 = 6u;

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
    let x_strides = SIZES + ndim;
    let index_strides = x_strides + ndim;
    // The positions of element `i` in `x` (without its dim-th coordinate) and in `index`, in one
    // walk over the coordinates (one division per dimension for both); the outermost
    // coordinate is what remains, as `i < n`.
    var rest = i;
    var at_x = params[4];
    var at_index = params[5];
    for (var d = ndim - 1u; d > 0u; d = d - 1u) {
        let size = params[SIZES + d];
        let next = rest / size;
        let coordinate = rest - next * size;
        at_x = at_x + coordinate * params[x_strides + d];
        at_index = at_index + coordinate * params[index_strides + d];
        rest = next;
    }
    at_x = at_x + rest * params[x_strides];
    at_index = at_index + rest * params[index_strides];
    let k = u32(clamp(index[at_index], 0, i32(params[2]) - 1));
    out[i] = x[at_x + k * params[3]];
}
