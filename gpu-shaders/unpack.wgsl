// Packed elements read into words: element `i` (in row-major order) of a packed tensor's view,
// through its layout, widened into word `i` of a contiguous float32 or int32 tensor.
//
// Parameters: [n, ndim, offset, sizes[ndim], strides[ndim]], in elements of the view.
// The kernel follows gpu-shaders/packing.wgsl (kernels/src/wgpu/packed.rs joins the two).

@group(0) @binding(1) var<storage, read> packed: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

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
    let at = position(i, ndim, 3u, 3u + ndim, params[2]);
    let bits = (packed[at / PER_WORD] >> ((at % PER_WORD) * BITS)) & MASK;
    out[i] = widened(bits);
}
