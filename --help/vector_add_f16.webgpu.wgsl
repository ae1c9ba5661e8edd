// tilec 0.1.0 for webgpu from /work/wt/irtests/samples/vector_add.tile
// Generated code; edit the .tile source instead.

enable f16;

@group(0) @binding(0) var<storage, read> A: array<f16>;
@group(0) @binding(1) var<storage, read> B: array<f16>;
@group(0) @binding(2) var<storage, read_write> C: array<f16>;
struct tl_params {
  N: i32,
}
@group(0) @binding(3) var<uniform> tl_u: tl_params;

@compute @workgroup_size(256)
fn vector_add(@builtin(local_invocation_index) tl_lid: u32, @builtin(workgroup_id) tl_wid: vec3<u32>) {
  let tl_tid: i32 = i32(tl_lid);
  let tl_bx: i32 = i32(tl_wid.x);
  let tl_by: i32 = i32(tl_wid.y);
  let tl_bz: i32 = i32(tl_wid.z);
  let N: i32 = tl_u.N;
  if (tl_bx * 1024 + 1023 < N) {
    // interior: the bounds guards this branch tests are proven true
    for (var it: i32 = 0; it < 4; it++) {
      let idx: i32 = it * 256 + tl_tid;
      let i: i32 = idx;
      let idx_2: i32 = tl_bx * 1024 + i;
      C[idx_2] = A[idx_2] + B[idx_2];
    }
  } else {
    for (var it: i32 = 0; it < 4; it++) {
      let idx: i32 = it * 256 + tl_tid;
      let i: i32 = idx;
      let idx_2: i32 = tl_bx * 1024 + i;
      if (idx_2 < N) {
        C[idx_2] = A[idx_2] + B[idx_2];
      }
    }
  }
}
