// 2-D convolution (cross-correlation) over the last two dimensions, one thread per output
// element: `out[b, o, y, x] = bias[o] + sum over the group's channels c and taps (i, j) of
// input[b, c, row, column] * weight[o, c, i, j]`, zero padding. Output position (y, x) with
// kernel tap (i, j) reads input row `y * stride + i * dilation - padding` and the column
// likewise; taps falling outside the input are in the padding. Launched by
// runtime/src/wgpu/window.rs.
//
// Parameters: [outputs, channels, out channels, channels per group, out channels per group,
// height, width, out height, out width, kernel height, kernel width, stride (2), padding (2),
// dilation (2), input strides (4) and offset, weight strides (4) and offset, bias stride and
// offset, whether there is a bias (without one, binding 3 holds a stand-in)].
//
// Placeholder, in double braces below (filled by kernels/src/wgpu/window.rs):
//   ELEMENT  the element type, f32 or i32 (integer sums wrap, as PyTorch's CPU kernels' do)

@group(0) @binding(1) var<storage, read> input: array<{{ELEMENT}}>;
@group(0) @binding(2) var<storage, read> weight: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read> bias: array<{{ELEMENT}}>;
@group(0) @binding(4) var<storage, read_write> out: array<{{ELEMENT}}>;

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
    let out_channels = params[2];
    let per_group = params[3];
    let height = params[5];
    let width = params[6];
    let out_h = params[7];
    let out_w = params[8];
    let kernel_h = params[9];
    let kernel_w = params[10];
    let x = i % out_w;
    let y = (i / out_w) % out_h;
    let o = (i / (out_w * out_h)) % out_channels;
    let b = i / (out_w * out_h * out_channels);
    let first_channel = (o / params[4]) * per_group;

    var sum: {{ELEMENT}} = 0;
    for (var c = 0u; c < per_group; c = c + 1u) {
        let from_input = params[21] + b * params[17] + (first_channel + c) * params[18];
        let from_weight = params[26] + o * params[22] + c * params[23];
        for (var ki = 0u; ki < kernel_h; ki = ki + 1u) {
            // The padded row: the input row plus the padding, when at least the padding.
            let row = y * params[11] + ki * params[15];
            if (row < params[13] || row - params[13] >= height) {
                continue;
            }
            let at_row = from_input + (row - params[13]) * params[19];
            for (var kj = 0u; kj < kernel_w; kj = kj + 1u) {
                let column = x * params[12] + kj * params[16];
                if (column < params[14] || column - params[14] >= width) {
                    continue;
                }
                let v = input[at_row + (column - params[14]) * params[20]];
                sum += v * weight[from_weight + ki * params[24] + kj * params[25]];
            }
        }
    }
    if (params[29] != 0u) {
        sum += bias[params[28] + o * params[27]];
    }
    out[i] = sum;
}
