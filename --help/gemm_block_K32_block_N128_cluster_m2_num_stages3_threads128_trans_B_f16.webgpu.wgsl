// tilec 0.1.0 for webgpu from /work/wt/irtests/samples/gemm.tile
// Generated code; edit the .tile source instead.

enable f16;

@group(0) @binding(0) var<storage, read> A: array<f16>;
@group(0) @binding(1) var<storage, read> B: array<f16>;
@group(0) @binding(2) var<storage, read_write> C: array<f16>;
struct tl_params {
  M: i32,
  K: i32,
  N: i32,
}
@group(0) @binding(3) var<uniform> tl_u: tl_params;
var<workgroup> A_s: array<f16, 4096>;
var<workgroup> B_s: array<f16, 4096>;

fn tl_floordiv(a: i32, b: i32) -> i32 {
  let q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) { return q - 1; }
  return q;
}

fn tl_floormod(a: i32, b: i32) -> i32 {
  let r = a % b;
  if ((r != 0) && ((r < 0) != (b < 0))) { return r + b; }
  return r;
}

@compute @workgroup_size(128)
fn gemm(@builtin(local_invocation_index) tl_lid: u32, @builtin(workgroup_id) tl_wid: vec3<u32>) {
  let tl_tid: i32 = i32(tl_lid);
  let tl_bx: i32 = i32(tl_wid.x);
  let tl_by: i32 = i32(tl_wid.y);
  let tl_bz: i32 = i32(tl_wid.z);
  let M: i32 = tl_u.M;
  let K: i32 = tl_u.K;
  let N: i32 = tl_u.N;
  let by_swizzled: i32 = (tl_by * ((N + 128 - 1) / 128) + tl_bx) / (((N + 128 - 1) / 128) * 8) * 8 + tl_floormod((tl_by * ((N + 128 - 1) / 128) + tl_bx) % (((N + 128 - 1) / 128) * 8), min(((M + 128 - 1) / 128) - (tl_by * ((N + 128 - 1) / 128) + tl_bx) / (((N + 128 - 1) / 128) * 8) * 8, 8));
  let bx_swizzled: i32 = tl_floordiv((tl_by * ((N + 128 - 1) / 128) + tl_bx) % (((N + 128 - 1) / 128) * 8), min(((M + 128 - 1) / 128) - (tl_by * ((N + 128 - 1) / 128) + tl_bx) / (((N + 128 - 1) / 128) * 8) * 8, 8));
  var C_local: array<f32, 128>;
  for (var r: i32 = 0; r < 128; r++) {
    C_local[r] = 0.0f;
  }
  for (var k: i32 = 0; k < ((K + 32 - 1) / 32); k++) {
    if (by_swizzled * 128 + 127 < M && k * 32 + 31 < K) {
      // interior: the bounds guards this branch tests are proven true
      for (var e: i32 = 0; e < 32; e++) {
        let idx: i32 = e * 128 + tl_tid;
        A_s[idx / 32 * 32 + idx % 32] = A[(by_swizzled * 128 + idx / 32) * K + (k * 32 + idx % 32)];
      }
    } else {
      for (var e: i32 = 0; e < 32; e++) {
        let idx: i32 = e * 128 + tl_tid;
        A_s[idx / 32 * 32 + idx % 32] = select(0.0h, A[(by_swizzled * 128 + idx / 32) * K + (k * 32 + idx % 32)], by_swizzled * 128 + idx / 32 < M && k * 32 + idx % 32 < K);
      }
    }
    workgroupBarrier();
    if (bx_swizzled * 128 + 127 < N && k * 32 + 31 < K) {
      // interior: the bounds guards this branch tests are proven true
      for (var e_2: i32 = 0; e_2 < 32; e_2++) {
        let idx_2: i32 = e_2 * 128 + tl_tid;
        B_s[idx_2 / 32 * 32 + idx_2 % 32] = B[(bx_swizzled * 128 + idx_2 / 32) * K + (k * 32 + idx_2 % 32)];
      }
    } else {
      for (var e_2: i32 = 0; e_2 < 32; e_2++) {
        let idx_2: i32 = e_2 * 128 + tl_tid;
        B_s[idx_2 / 32 * 32 + idx_2 % 32] = select(0.0h, B[(bx_swizzled * 128 + idx_2 / 32) * K + (k * 32 + idx_2 % 32)], bx_swizzled * 128 + idx_2 / 32 < N && k * 32 + idx_2 % 32 < K);
      }
    }
    workgroupBarrier();
    for (var r_2: i32 = 0; r_2 < 128; r_2++) {
      let i: i32 = tl_tid / 32 + r_2 / 4 * 4;
      let j: i32 = tl_tid % 32 * 4 + r_2 % 4 / 4 * 128 + r_2 % 4;
      var acc: f32 = 0.0f;
      for (var k_2: i32 = 0; k_2 < 32; k_2++) {
        acc = acc + f32(A_s[i * 32 + k_2]) * f32(B_s[j * 32 + k_2]);
      }
      C_local[r_2] = C_local[r_2] + acc;
    }
    workgroupBarrier();
  }
  if (by_swizzled * 128 + 127 < M && bx_swizzled * 128 + 127 < N) {
    // interior: the bounds guards this branch tests are proven true
    for (var r_3: i32 = 0; r_3 < 128; r_3++) {
      C[(by_swizzled * 128 + (tl_tid / 32 + r_3 / 4 * 4)) * N + (bx_swizzled * 128 + (tl_tid % 32 * 4 + r_3 % 4 / 4 * 128 + r_3 % 4))] = f16(C_local[r_3]);
    }
  } else {
    for (var r_3: i32 = 0; r_3 < 128; r_3++) {
      if (by_swizzled * 128 + (tl_tid / 32 + r_3 / 4 * 4) < M && bx_swizzled * 128 + (tl_tid % 32 * 4 + r_3 % 4 / 4 * 128 + r_3 % 4) < N) {
        C[(by_swizzled * 128 + (tl_tid / 32 + r_3 / 4 * 4)) * N + (bx_swizzled * 128 + (tl_tid % 32 * 4 + r_3 % 4 / 4 * 128 + r_3 % 4))] = f16(C_local[r_3]);
      }
    }
  }
}
