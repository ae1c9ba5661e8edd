// tilec_hip_printf.h -- device printf for tilec's `print`, without ROCm's device libraries.
//
// Appended to the generated source only when a kernel prints. clang (>= 17) compiles printf with
// -mprintf-kind=buffered: the format strings go into the code object's metadata and each call writes its
// arguments into a buffer the HIP runtime passes as the hidden kernel argument `hidden_printf_buffer`
// (code object v5: 72 bytes into the implicit arguments). The device library normally supplies the
// allocator below: the buffer starts with a 4-byte cursor and its 4-byte size; the data follows.

extern "C" __device__ int printf(const char*, ...);

extern "C" __device__ __attribute__((noinline)) char* __printf_alloc(unsigned bytes) {
  char* buf = *reinterpret_cast<char* const*>(static_cast<const char*>(__builtin_amdgcn_implicitarg_ptr()) + 72);
  if (buf == nullptr) return nullptr;
  unsigned* cursor = reinterpret_cast<unsigned*>(buf);
  const unsigned size = cursor[1];
  unsigned at = __hip_atomic_load(cursor, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  do {
    if (8 + at + bytes > size) return nullptr;  // full: this line is dropped, as CUDA drops past its FIFO
  } while (!__hip_atomic_compare_exchange_strong(cursor, &at, at + bytes, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                                  __HIP_MEMORY_SCOPE_AGENT));
  return buf + 8 + at;
}
