// tilec 0.1.0 for webgpu from /work/wt/irtests/samples/gemm_bias_relu.tile
// Generated code; edit the .tile source instead.

enable f16;

@group(0) @binding(0) var<storage, read> A: array<f16>;
@group(0) @binding(1) var<storage, read> B: array<f16>;
@group(0) @binding(2) var<storage, read> bias: array<f16>;
@group(0) @binding(3) var<storage, read_write> C: array<f16>;
struct tl_params {
  M: i32,
  K: i32,
  N: i32,
}
@group(0) @binding(4) var<uniform> tl_u: tl_params;
var<workgroup> A_s: array<f16, 1024>;
var<workgroup> B_s: array<f16, 1024>;
var<workgroup> bias_s: array<f16, 64>;

@compute @workgroup_size(128)
fn gemm_bias_relu(@builtin(local_invocation_index) tl_lid: u32, @builtin(workgroup_id) tl_wid: vec3<u32>) {
  let tl_tid: i32 = i32(tl_lid);
  let tl_bx: i32 = i32(tl_wid.x);
  let tl_by: i32 = i32(tl_wid.y);
  let tl_bz: i32 = i32(tl_wid.z);
  let M: i32 = tl_u.M;
  let K: i32 = tl_u.K;
  let N: i32 = tl_u.N;
  var C_local: array<f32, 32>;
  for (var r: i32 = 0; r < 32; r++) {
    C_local[r] = 0.0f;
  }
  for (var k: i32 = 0; k < ((K + 16 - 1) / 16); k++) {
    if (tl_by * 64 + 63 < M && k * 16 + 15 < K) {
      // interior: the bounds guards this branch tests are proven true
      for (var e: i32 = 0; e < 8; e++) {
        let idx: i32 = e * 128 + tl_tid;
        A_s[idx / 16 * 16 + idx % 16] = A[(tl_by * 64 + idx / 16) * K + (k * 16 + idx % 16)];
      }
    } else {
      for (var e: i32 = 0; e < 8; e++) {
        let idx: i32 = e * 128 + tl_tid;
        A_s[idx / 16 * 16 + idx % 16] = select(0.0h, A[(tl_by * 64 + idx / 16) * K + (k * 16 + idx % 16)], tl_by * 64 + idx / 16 < M && k * 16 + idx % 16 < K);
      }
    }
    workgroupBarrier();
    if (k * 16 + 15 < K && tl_bx * 64 + 63 < N) {
      // interior: the bounds guards this branch tests are proven true
      for (var e_2: i32 = 0; e_2 < 8; e_2++) {
        let idx_2: i32 = e_2 * 128 + tl_tid;
        B_s[idx_2 / 64 * 64 + idx_2 % 64] = B[(k * 16 + idx_2 / 64) * N + (tl_bx * 64 + idx_2 % 64)];
      }
    } else {
      for (var e_2: i32 = 0; e_2 < 8; e_2++) {
        let idx_2: i32 = e_2 * 128 + tl_tid;
        B_s[idx_2 / 64 * 64 + idx_2 % 64] = select(0.0h, B[(k * 16 + idx_2 / 64) * N + (tl_bx * 64 + idx_2 % 64)], k * 16 + idx_2 / 64 < K && tl_bx * 64 + idx_2 % 64 < N);
      }
    }
    workgroupBarrier();
    for (var r_2: i32 = 0; r_2 < 32; r_2++) {
      let i: i32 = tl_tid / 16 + r_2 / 4 * 8;
      let j: i32 = tl_tid % 16 * 4 + r_2 % 4 / 4 * 64 + r_2 % 4;
      var acc: f32 = 0.0f;
      for (var k_2: i32 = 0; k_2 < 16; k_2++) {
        acc = acc + f32(A_s[i * 16 + k_2]) * f32(B_s[k_2 * 64 + j]);
      }
      C_local[r_2] = C_local[r_2] + acc;
    }
    workgroupBarrier();
  }
  if (tl_bx * 64 + 127 < N) {
    // interior: the bounds guards this branch tests are proven true
    for (var e_3: i32 = 0; e_3 < 1; e_3++) {
      let idx_3: i32 = e_3 * 128 + tl_tid;
      if (idx_3 < 64) {
        bias_s[idx_3] = bias[(tl_bx * 64 + idx_3)];
      }
    }
  } else {
    for (var e_3: i32 = 0; e_3 < 1; e_3++) {
      let idx_3: i32 = e_3 * 128 + tl_tid;
      if (idx_3 < 64) {
        bias_s[idx_3] = select(0.0h, bias[(tl_bx * 64 + idx_3)], tl_bx * 64 + idx_3 < N);
      }
    }
  }
  workgroupBarrier();
  for (var r_3: i32 = 0; r_3 < 32; r_3++) {
    let j_2: i32 = tl_tid % 16 * 4 + r_3 % 4 / 4 * 64 + r_3 % 4;
    C_local[r_3] = max(C_local[r_3] + f32(bias_s[j_2]), 0.0f);
  }
  if (tl_by * 64 + 63 < M && tl_bx * 64 + 63 < N) {
    // interior: the bounds guards this branch tests are proven true
    for (var r_4: i32 = 0; r_4 < 32; r_4++) {
      C[(tl_by * 64 + (tl_tid / 16 + r_4 / 4 * 8)) * N + (tl_bx * 64 + (tl_tid % 16 * 4 + r_4 % 4 / 4 * 64 + r_4 % 4))] = f16(C_local[r_4]);
    }
  } else {
    for (var r_4: i32 = 0; r_4 < 32; r_4++) {
      if (tl_by * 64 + (tl_tid / 16 + r_4 / 4 * 8) < M && tl_bx * 64 + (tl_tid % 16 * 4 + r_4 % 4 / 4 * 64 + r_4 % 4) < N) {
        C[(tl_by * 64 + (tl_tid / 16 + r_4 / 4 * 8)) * N + (tl_bx * 64 + (tl_tid % 16 * 4 + r_4 % 4 / 4 * 64 + r_4 % 4))] = f16(C_local[r_4]);
      }
    }
  }
}
