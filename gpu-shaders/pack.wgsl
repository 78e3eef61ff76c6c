// Words written into packed elements: word `first element + i` of a contiguous float32 or int32
// tensor, narrowed into element `i` (in row-major order) of a packed tensor's view, through its
// layout.
// Two or four elements share a word, and neighbouring threads may write the same word: each
// thread clears and sets its own bits with atomic operations, which leave the others' alone
// (also those of elements outside the view).
//
// Parameters: [n, ndim, offset, sizes[ndim], strides[ndim]], in elements of the view, then the
// first element of the words.
// The kernel follows gpu-shaders/packing.wgsl (kernels/src/wgpu/packed.rs joins the two).

@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<atomic<u32>>;

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
    let shift = (at % PER_WORD) * BITS;
    let word = at / PER_WORD;
    atomicAnd(&packed[word], ~(MASK << shift));
    atomicOr(&packed[word], narrowed(words[params[3u + 2u * ndim] + i]) << shift);
}
