// The start of every torchfn kernel: the parameter words of a launch (binding 0) and helpers.
//
// A launch with more workgroups than the device allows along one dimension is split over two
// (x, then y): kernels number their workgroups with `group_index`.

@group(0) @binding(0) var<storage, read> params: array<u32>;

fn group_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

// NaN and infinity tests on the bits, which no compiler optimisation can fold away.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_inf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

fn infinity() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

// The storage position of element `index` (in row-major order) of a tensor of `ndim`
// dimensions whose sizes are the parameter words from `sizes` on, its strides those from
// `strides` on, and its first element at `offset`. Every size is at least 1 (`index` exists).
fn position(index: u32, ndim: u32, sizes: u32, strides: u32, offset: u32) -> u32 {
    var rest = index;
    var at = offset;
    for (var d = ndim; d > 0u; d = d - 1u) {
        let size = params[sizes + d - 1u];
        at = at + (rest % size) * params[strides + d - 1u];
        rest = rest / size;
    }
    return at;
}
