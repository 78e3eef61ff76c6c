// Words written into packed elements, a word at a time: elements `first element + i` of a
// contiguous float32 or int32 tensor narrowed into element `i` of a contiguous packed view that
// starts on a word boundary. Each thread fills one whole word of the view with one plain store
// (no other thread writes it, so no atomic operation is needed, unlike `pack.wgsl`); in the
// last word, where the view may end before the word does, the bits past its end are kept.
//
// Parameters: [n, the view's first word, first element].
// The kernel follows gpu-shaders/packing.wgsl (kernels/src/wgpu/packed.rs joins the two).

@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = group_index(wid, groups) * 256u + lid;
    let n = params[0];
    let first = w * PER_WORD;
    if (first >= n) {
        return;
    }
    let count = min(PER_WORD, n - first);
    var word = 0u;
    if (count < PER_WORD) {
        word = packed[params[1] + w] & ~((1u << (count * BITS)) - 1u);
    }
    for (var k = 0u; k < count; k = k + 1u) {
        word = word | (narrowed(words[params[2] + first + k]) << (k * BITS));
    }
    packed[params[1] + w] = word;
}
