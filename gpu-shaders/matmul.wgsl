// Matrix products: `out[batch, i, j] = sum over l of a[batch, i, l] * b[batch, l, j]` for a batch
// of matrices, each operand read through its strides (a transposed view needs no copy) with
// the batch broadcast (stride 0 where an operand's batch size is one). The result is
// contiguous, `[batch, n, m]`.
//
// Each workgroup computes one TILE x TILE block of one output matrix with SIDE x SIDE threads,
// each holding a 4 * HALVES square sub-block in registers: rows 4 * ty .. 4 * ty + 3 and, with
// two halves, the four rows TILE / 2 further, and likewise for the columns, so the vec4 reads
// from workgroup memory of neighbouring threads are neighbours. The k dimension is walked DEPTH
// at a time: the block's DEPTH columns of `a` and rows of `b` are staged k-major in workgroup
// memory (one padding vec4 per row against bank conflicts), each thread fetching 4 * HALVES
// elements of each per step (HALVES parts of four) into registers while the previous step is
// being multiplied. Consecutive threads fetch consecutive positions along the dimension the
// operand is stored along (A_ALONG_K, B_ALONG_K: along k, else along rows of `a` or columns of
// `b`), so global reads coalesce for row- and column-major operands alike. Reads past the
// matrix edges give zeros, and stores past them are skipped.
//
// Parameters: [n, k, m, column blocks, blocks per matrix, blocks in all, batch dims, a offset,
// b offset, a row stride, a k stride, b k stride, b column stride, then the batch sizes, the
// batch strides of a and the batch strides of b].
//
// Placeholders, in double braces below (filled by runtime/src/wgpu/matmul.rs):
//   ELEMENT    the element type, f32 or i32
//   SIDE       the threads along each side of the workgroup (16)
//   HALVES     2: each thread computes an 8 x 8 block (TILE = 8 * SIDE); 1: a 4 x 4 block
//   A_ALONG_K  whether a's elements are fetched along k (true) or along its rows (false)
//   B_ALONG_K  whether b's elements are fetched along k (true) or along its columns (false)

alias T = {{ELEMENT}};

const SIDE: u32 = {{SIDE}}u;
const HALVES: u32 = {{HALVES}}u;
const THREADS: u32 = SIDE * SIDE;
const TILE: u32 = 4u * HALVES * SIDE;
// The k-step: every thread fetches TILE * DEPTH / THREADS = 4 * HALVES elements of each
// operand. (With two halves, a k-step of SIDE / 2, four elements, ran 12-15% slower on an H100
// at 2048 and 4096.)
const DEPTH: u32 = SIDE;
// The vec4s of one k-row of a staged block: TILE / 4, plus one of padding.
const ROW: u32 = HALVES * SIDE + 1u;
const A_ALONG_K: bool = {{A_ALONG_K}};
const B_ALONG_K: bool = {{B_ALONG_K}};

@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> out: array<T>;

// The staged blocks: element (l, r) of a's block (row r, k-offset l) is component r % 4 of
// `tile_a[l * ROW + r / 4]`; b's block likewise with columns for rows.
var<workgroup> tile_a: array<vec4<T>, DEPTH * ROW>;
var<workgroup> tile_b: array<vec4<T>, DEPTH * ROW>;

// This thread's results: `acc[2 * r + h]` holds row r's four columns of half h (the odd ones
// and the last eight unused with one half).
var<private> acc: array<vec4<T>, 16>;

// One operand's block as a thread fetches it: where its matrix starts, the first row (of `a`)
// or column (of `b`) of the block, how many rows or columns the matrix has, and the strides
// along them and along k.
struct Block {
    base: u32,
    first: u32,
    count: u32,
    stride: u32,
    k_stride: u32,
}

// Where the `e`-th element a thread fetches sits in a block: (row or column, k-offset).
fn spot(e: u32, along_k: bool) -> vec2<u32> {
    if (along_k) {
        return vec2<u32>(e / DEPTH, e % DEPTH);
    }
    return vec2<u32>(e % TILE, e / TILE);
}

// Element `i` (0 to 3) of this thread's share of a's block at k-offset `k0` of `depth`: zero
// past the edges.
fn load_a(lid: u32, i: u32, block: Block, k0: u32, depth: u32) -> T {
    let at = spot(lid + i * THREADS, A_ALONG_K);
    let row = block.first + at.x;
    let k = k0 + at.y;
    if (row < block.count && k < depth) {
        return a[block.base + row * block.stride + k * block.k_stride];
    }
    return T();
}

// Element `i` of this thread's share of b's block, as `load_a`.
fn load_b(lid: u32, i: u32, block: Block, k0: u32, depth: u32) -> T {
    let at = spot(lid + i * THREADS, B_ALONG_K);
    let col = block.first + at.x;
    let k = k0 + at.y;
    if (col < block.count && k < depth) {
        return b[block.base + col * block.stride + k * block.k_stride];
    }
    return T();
}

// Part `p` (four elements) of this thread's share of a's block at k-offset `k0`. (Calls rather
// than loops here and below: every index into `acc` and into registers stays a constant,
// whether or not the driver unrolls loops.)
fn fetch_a(lid: u32, p: u32, block: Block, k0: u32, depth: u32) -> vec4<T> {
    return vec4<T>(
        load_a(lid, 4u * p, block, k0, depth),
        load_a(lid, 4u * p + 1u, block, k0, depth),
        load_a(lid, 4u * p + 2u, block, k0, depth),
        load_a(lid, 4u * p + 3u, block, k0, depth),
    );
}

// Part `p` of this thread's share of b's block at k-offset `k0`.
fn fetch_b(lid: u32, p: u32, block: Block, k0: u32, depth: u32) -> vec4<T> {
    return vec4<T>(
        load_b(lid, 4u * p, block, k0, depth),
        load_b(lid, 4u * p + 1u, block, k0, depth),
        load_b(lid, 4u * p + 2u, block, k0, depth),
        load_b(lid, 4u * p + 3u, block, k0, depth),
    );
}

// Writes element `i` of this thread's share of each operand into the staged blocks.
fn put(lid: u32, i: u32, va: T, vb: T) {
    let at_a = spot(lid + i * THREADS, A_ALONG_K);
    tile_a[at_a.y * ROW + at_a.x / 4u][at_a.x % 4u] = va;
    let at_b = spot(lid + i * THREADS, B_ALONG_K);
    tile_b[at_b.y * ROW + at_b.x / 4u][at_b.x % 4u] = vb;
}

// Writes part `p` of this thread's share of each operand into the staged blocks.
fn stage(lid: u32, p: u32, va: vec4<T>, vb: vec4<T>) {
    put(lid, 4u * p, va.x, vb.x);
    put(lid, 4u * p + 1u, va.y, vb.y);
    put(lid, 4u * p + 2u, va.z, vb.z);
    put(lid, 4u * p + 3u, va.w, vb.w);
}

// Adds k-row `l` of the staged blocks' outer product to this thread's results.
fn product(l: u32, tx: u32, ty: u32) {
    let a0 = tile_a[l * ROW + ty];
    let b0 = tile_b[l * ROW + tx];
    acc[0] += a0.x * b0;
    acc[2] += a0.y * b0;
    acc[4] += a0.z * b0;
    acc[6] += a0.w * b0;
    if (HALVES == 1u) {
        return;
    }
    let a1 = tile_a[l * ROW + SIDE + ty];
    let b1 = tile_b[l * ROW + SIDE + tx];
    acc[1] += a0.x * b1;
    acc[3] += a0.y * b1;
    acc[5] += a0.z * b1;
    acc[7] += a0.w * b1;
    acc[8] += a1.x * b0;
    acc[9] += a1.x * b1;
    acc[10] += a1.y * b0;
    acc[11] += a1.y * b1;
    acc[12] += a1.z * b0;
    acc[13] += a1.z * b1;
    acc[14] += a1.w * b0;
    acc[15] += a1.w * b1;
}

// Where a thread's results go: the first element of its output matrix, its first row and
// column, and the matrix's rows and columns.
struct Place {
    first: u32,
    row: u32,
    col: u32,
    n: u32,
    m: u32,
}

// Stores the results of row `offset` past the thread's first: `left` its four columns of the
// first half, `right` those of the second, each element inside the matrix.
fn store_row(place: Place, offset: u32, left: vec4<T>, right: vec4<T>) {
    let row = place.row + offset;
    if (row >= place.n) {
        return;
    }
    for (var c = 0u; c < 4u; c = c + 1u) {
        let col = place.col + c;
        if (col < place.m) {
            out[place.first + row * place.m + col] = left[c];
        }
        if (HALVES == 2u && col + TILE / 2u < place.m) {
            out[place.first + row * place.m + col + TILE / 2u] = right[c];
        }
    }
}

// One workgroup per output block, numbered by matrix, then row of blocks, then column.
@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = group_index(wid, groups);
    if (group >= params[5]) {
        return;
    }
    let n = params[0];
    let depth = params[1];
    let m = params[2];
    let batch = group / params[4];
    let within = group % params[4];
    let row0 = (within / params[3]) * TILE;
    let col0 = (within % params[3]) * TILE;
    let dims = params[6];
    let block_a = Block(position(batch, dims, 13u, 13u + dims, params[7]), row0, n, params[9], params[10]);
    let block_b = Block(position(batch, dims, 13u, 13u + 2u * dims, params[8]), col0, m, params[12], params[11]);
    let tx = lid % SIDE;
    let ty = lid / SIDE;

    let steps = (depth + DEPTH - 1u) / DEPTH;
    var next_a = fetch_a(lid, 0u, block_a, 0u, depth);
    var next_b = fetch_b(lid, 0u, block_b, 0u, depth);
    var more_a = vec4<T>();
    var more_b = vec4<T>();
    if (HALVES == 2u) {
        more_a = fetch_a(lid, 1u, block_a, 0u, depth);
        more_b = fetch_b(lid, 1u, block_b, 0u, depth);
    }
    for (var s = 0u; s < steps; s = s + 1u) {
        // Every thread is done with the previous blocks before they are overwritten.
        workgroupBarrier();
        stage(lid, 0u, next_a, next_b);
        if (HALVES == 2u) {
            stage(lid, 1u, more_a, more_b);
        }
        workgroupBarrier();
        if (s + 1u < steps) {
            let k0 = (s + 1u) * DEPTH;
            next_a = fetch_a(lid, 0u, block_a, k0, depth);
            next_b = fetch_b(lid, 0u, block_b, k0, depth);
            if (HALVES == 2u) {
                more_a = fetch_a(lid, 1u, block_a, k0, depth);
                more_b = fetch_b(lid, 1u, block_b, k0, depth);
            }
        }
        for (var l = 0u; l < DEPTH; l = l + 4u) {
            product(l, tx, ty);
            product(l + 1u, tx, ty);
            product(l + 2u, tx, ty);
            product(l + 3u, tx, ty);
        }
    }

    let place = Place(batch * n * m, row0 + 4u * ty, col0 + 4u * tx, n, m);
    store_row(place, 0u, acc[0], acc[1]);
    store_row(place, 1u, acc[2], acc[3]);
    store_row(place, 2u, acc[4], acc[5]);
    store_row(place, 3u, acc[6], acc[7]);
    if (HALVES == 1u) {
        return;
    }
    store_row(place, TILE / 2u, acc[8], acc[9]);
    store_row(place, TILE / 2u + 1u, acc[10], acc[11]);
    store_row(place, TILE / 2u + 2u, acc[12], acc[13]);
    store_row(place, TILE / 2u + 3u, acc[14], acc[15]);
}
