// Scans: the running sum or product along one dimension. Each lane (the elements along the
// dimension at one position of the others) is read through strides, any layout; the result is
// contiguous in the input's shape.
//
// Three modes (MODE names the function `main` calls):
//   lane_scan   one thread per lane, running along it (neighbouring threads take neighbouring
//               lanes: for scans along a dimension that is not the innermost).
//   block_scan  one workgroup per block of 1024 elements of a lane: loaded by neighbouring
//               threads, scanned in workgroup memory, written; with more than one block a
//               lane, each block's total goes to `aux[lane * blocks + block]`.
//   add_prefix  after the totals are scanned (the host scans them with this same kernel):
//               every block but the first combines the running total of the blocks before it
//               (`aux[lane * blocks + block - 1]`) into its elements.
//
// Parameters: [lanes, n (lane length), blocks, kn, in offset, in step (the input stride along
// the dimension), out step, 0, kept sizes[kn], kept input strides[kn], kept output strides[kn]].
//
// Placeholders (filled by runtime/src/wgpu/along.rs):
//   IN      the element type of the input (f32, i32, or u32 for bools)
//   ACC     the type the scan runs in (f32 or i32)
//   OP      `+` or `*`
//   ONE     the identity (0 or 1)
//   LOAD    the input element at position `p`, converted to ACC
//   MODE    lane_scan, block_scan or add_prefix

@group(0) @binding(1) var<storage, read> src: array<{{IN}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{ACC}}>;
@group(0) @binding(3) var<storage, read_write> aux: array<{{ACC}}>;

alias Acc = {{ACC}};

const BLOCK: u32 = 1024u;

var<workgroup> block: array<Acc, 1024>;
var<workgroup> sums: array<Acc, 256>;

fn identity() -> Acc {
    return Acc({{ONE}});
}

fn combine(a: Acc, b: Acc) -> Acc {
    return a {{OP}} b;
}

fn load(p: u32) -> Acc {
    return {{LOAD}};
}

// The input and output positions where lane `lane` starts.
fn starts(lane: u32) -> vec2<u32> {
    let kn = params[3];
    return vec2<u32>(position(lane, kn, 8u, 8u + kn, params[4]), position(lane, kn, 8u, 8u + 2u * kn, 0u));
}

fn lane_scan(group: u32, lid: u32) {
    let lane = group * 256u + lid;
    if (lane >= params[0]) {
        return;
    }
    let n = params[1];
    let at = starts(lane);
    var acc = identity();
    for (var j = 0u; j < n; j = j + 1u) {
        acc = combine(acc, load(at.x + j * params[5]));
        dst[at.y + j * params[6]] = acc;
    }
}

fn block_scan(group: u32, lid: u32) {
    let n = params[1];
    let blocks = params[2];
    // Every thread of a workgroup has the same `group`: `live` is the same for all of them.
    let live = group < params[0] * blocks;
    let lane = group / blocks;
    let start = (group % blocks) * BLOCK;
    var at = vec2<u32>(0u, 0u);
    if (live) {
        at = starts(lane);
    }
    for (var k = 0u; k < 4u; k = k + 1u) {
        let j = start + lid + k * 256u;
        var v = identity();
        if (live && j < n) {
            v = load(at.x + j * params[5]);
        }
        block[lid + k * 256u] = v;
    }
    workgroupBarrier();
    // Each thread scans four neighbours, then the 256 totals are scanned (Hillis and Steele).
    var run = identity();
    for (var k = 0u; k < 4u; k = k + 1u) {
        run = combine(run, block[lid * 4u + k]);
        block[lid * 4u + k] = run;
    }
    sums[lid] = run;
    for (var s = 1u; s < 256u; s = s << 1u) {
        workgroupBarrier();
        var v = sums[lid];
        if (lid >= s) {
            v = combine(sums[lid - s], v);
        }
        workgroupBarrier();
        sums[lid] = v;
    }
    workgroupBarrier();
    let before = select(identity(), sums[max(lid, 1u) - 1u], lid > 0u);
    for (var k = 0u; k < 4u; k = k + 1u) {
        block[lid * 4u + k] = combine(before, block[lid * 4u + k]);
    }
    workgroupBarrier();
    for (var k = 0u; k < 4u; k = k + 1u) {
        let j = start + lid + k * 256u;
        if (live && j < n) {
            dst[at.y + j * params[6]] = block[lid + k * 256u];
        }
    }
    if (live && lid == 255u && blocks > 1u) {
        aux[group] = sums[255];
    }
}

fn add_prefix(group: u32, lid: u32) {
    let n = params[1];
    let blocks = params[2];
    // Blocks 1.. of each lane: `blocks - 1` workgroups a lane.
    if (group >= params[0] * (blocks - 1u)) {
        return;
    }
    let lane = group / (blocks - 1u);
    let b = group % (blocks - 1u) + 1u;
    let prefix = aux[lane * blocks + b - 1u];
    let at = starts(lane);
    for (var k = 0u; k < 4u; k = k + 1u) {
        let j = b * BLOCK + lid + k * 256u;
        if (j < n) {
            let q = at.y + j * params[6];
            dst[q] = combine(prefix, dst[q]);
        }
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    {{MODE}}(group_index(wid, groups), lid);
}
