// 2-D max pooling over the last two dimensions of `[planes, height, width]` data, one thread per
// output element. Output position (y, x) with kernel tap (i, j) reads input row
// `y * stride + i * dilation - padding` and the column likewise; taps falling outside the input
// are in the padding, and skipped. Launched by runtime/src/wgpu/window.rs.
//
// `values[p, y, x]` is the largest element of window (y, x) of plane p (NaN wins over every
// number, a later NaN over an earlier one); `indices[p, y, x]` its position
// `row * width + column` in the plane (the first of equal maxima). A window with no tap inside
// the input gives -inf (the smallest integer) at position 0.
//
// Parameters: [outputs, height, width, out height, out width, kernel height, kernel width,
// stride (2), padding (2), dilation (2), input strides (3) and offset].
//
// Placeholders, in double braces below (filled by kernels/src/wgpu/window.rs):
//   ELEMENT   the element type, f32 or i32
//   LOWEST    the start of the search: -infinity() for floats, the smallest i32 for integers
//   NAN_WINS  `|| is_nan(v)` for floats, nothing for integers

@group(0) @binding(1) var<storage, read> input: array<{{ELEMENT}}>;
@group(0) @binding(2) var<storage, read_write> values: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;

// One thread per output element, in row-major order.
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
    let height = params[1];
    let width = params[2];
    let out_h = params[3];
    let out_w = params[4];
    let x = i % out_w;
    let y = (i / out_w) % out_h;
    let p = i / (out_w * out_h);
    let from_input = params[16] + p * params[13];

    var best: {{ELEMENT}} = {{LOWEST}};
    var at = 0u;
    var found = false;
    for (var ki = 0u; ki < params[5]; ki = ki + 1u) {
        let row = y * params[7] + ki * params[11];
        if (row < params[9] || row - params[9] >= height) {
            continue;
        }
        for (var kj = 0u; kj < params[6]; kj = kj + 1u) {
            let column = x * params[8] + kj * params[12];
            if (column < params[10] || column - params[10] >= width) {
                continue;
            }
            let r = row - params[9];
            let s = column - params[10];
            let v = input[from_input + r * params[14] + s * params[15]];
            if (!found || v > best {{NAN_WINS}}) {
                best = v;
                at = r * width + s;
                found = true;
            }
        }
    }
    values[i] = best;
    indices[i] = i32(at);
}
