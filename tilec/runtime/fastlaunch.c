/* tilec's compiled launcher: the per-call work of a tilec.runtime kernel launch in C.
 *
 * Built by tilec/runtime/fastlaunch.py with the host C compiler against Python's limited API (abi3), cached, and
 * imported in place of the generated Python fast path when it builds. A Launcher serves one kernel. A call:
 *
 *   - reads each tensor argument through its type's DLPack C exchange table (`__dlpack_c_exchange_api__`, which
 *     torch.Tensor provides): pointer, device, dtype, shape, strides, without a Python call or an allocation; or,
 *     for the types the Python path taught it (`accept`), a cupy array's fields or a `__cuda_array_interface__`
 *     dict, read as tilec/runtime/arrays.py reads them;
 *   - checks device (one CUDA device for all), dtype and contiguity, and builds the plan key tilec.runtime files
 *     its plans under (every tensor's shape, the pointers for a TMA kernel, the device, the grid's scalars);
 *   - finds the plan among those the Python path registered (`remember`), converts the scalars, and calls
 *     cuLaunchKernel on the framework's current work stream (torch: torch.cuda.current_stream, also while a CUDA
 *     graph is being captured) with an argument block on the C stack: asynchronous, and thread-safe with no lock;
 *   - with the outputs left out, allocates them through the same table (torch's caching allocator, on the
 *     current stream; cupy: cupy.empty) and returns them.
 *
 * KernelBase, below, is the base a module's kernel classes get when this extension is available
 * (fastlaunch.native_class): its tp_call runs the attached Launcher at once, so `kernel(a, b, c)` costs no frame.
 *
 * A plan may also be a list of launches ("steps", `remember_steps`): a padded TMA launch (its row copies into a
 * workspace, the kernel, the copies out) or a multi-launch kernel's stages, each parameter taken from the call or
 * fixed when the plan was made (a workspace address, the sizes, the tensor maps). A plan that uses a workspace kept
 * for one stream is bound to it: it launches only on that stream, only while no graph is being captured on it
 * (cuStreamIsCapturing), and only while no Python-path call is between the launches of such a sequence (`hold`).
 *
 * Whatever it does not handle -- a new shape, another array type, a subclass, an explicit stream, a launch that
 * fails (no current context on this thread, say), every error -- returns the MISS object untouched, and the
 * Python path (which reports errors, builds plans and registers them here) takes the call. So this file never
 * raises for a user's argument.
 *
 * No CUDA header is needed: the driver's entry points come as addresses from the ctypes driver already loaded,
 * and the few DLPack structures used are declared below as the DLPack specification lays them out. */

#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ DLPack (the spec's C ABI, version 1.x) */

typedef struct { int32_t device_type; int32_t device_id; } tl_device;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } tl_dtype;
typedef struct {
    void* data;
    tl_device device;
    int32_t ndim;
    tl_dtype dtype;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
} tl_dltensor;
typedef struct { uint32_t major; uint32_t minor; } tl_version;
typedef struct tl_managed {
    tl_version version;
    void* manager_ctx;
    void (*deleter)(struct tl_managed*);
    uint64_t flags;
    tl_dltensor dl_tensor;
} tl_managed;
typedef struct tl_api_header { tl_version version; struct tl_api_header* prev_api; } tl_api_header;
typedef struct {
    tl_api_header header;
    int (*managed_tensor_allocator)(tl_dltensor*, tl_managed**, void*, void (*)(void*, const char*, const char*));
    int (*managed_tensor_from_py_object_no_sync)(void*, tl_managed**);
    int (*managed_tensor_to_py_object_no_sync)(tl_managed*, void**);
    int (*dltensor_from_py_object_no_sync)(void*, tl_dltensor*);
    int (*current_work_stream)(int32_t, int32_t, void**);
} tl_api;

#define TL_CUDA 2 /* kDLCUDA */

/* ------------------------------------------------------------------ the driver's entry point */

typedef int (*tl_launch_fn)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, void* stream, void** params, void** extra);

/* cuLaunchKernelEx, for kernels launched in thread-block clusters: cuda.h's CUlaunchAttribute (an id, padding to 8
   bytes, a 64-byte value union whose cluster dimension is three unsigned ints) and CUlaunchConfig, as
   tilec/runtime/cuda_driver.py's ctypes structures spell them for the Python path */
typedef struct {
    int id;
    char pad[4];
    unsigned value[16];
} tl_launch_attr;
typedef struct {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
    void* stream;
    tl_launch_attr* attrs;
    unsigned nattrs;
} tl_launch_config;
typedef int (*tl_launch_ex_fn)(const tl_launch_config* config, void* f, void** params, void** extra);
/* cuStreamIsCapturing(stream, &status): status 0 is CU_STREAM_CAPTURE_STATUS_NONE */
typedef int (*tl_capturing_fn)(void* stream, int* status);
#define TL_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4

/* ------------------------------------------------------------------ limits (a kernel beyond them stays on Python) */

#define TL_MAX_PARAMS 64
#define TL_MAX_DIMS 8
#define TL_MAX_KEY 160
#define TL_MAX_SIZES 32
#define TL_MAX_MAPS 16
#define TL_PLANS 32
#define TL_TYPES 8
#define TL_MAX_STEPS 16
#define TL_STEP_PARAMS (TL_MAX_PARAMS + TL_MAX_SIZES + TL_MAX_MAPS)

enum { S_I8, S_U8, S_I16, S_U16, S_I32, S_U32, S_I64, S_U64, S_F32, S_F64, S_F16, S_BF16, S_BOOL };

typedef struct {
    int tensor;     /* 1: a tensor, 0: a scalar */
    int output;     /* a tensor the kernel writes (may be left out and allocated) */
    int scalar;     /* S_... for a scalar */
    tl_dtype dtype; /* a tensor's DLPack dtype */
    int ndim;
    /* allocation of a left-out output: per dim, >= 0 a fixed extent, else -(1 + position of the input dim
       (tensor number * TL_MAX_DIMS + axis)) whose extent it takes */
    int64_t alloc_dim[TL_MAX_DIMS];
    /* arrays read without an exchange table: the __cuda_array_interface__ typestr expected ("<f2"; empty: none),
       the width taken as raw bits when the interface has no name for the dtype (bf16, fp8: 2, 1; else 0), and
       the numpy dtype object a cupy array of this dtype has (a reference, or NULL) */
    char typestr[8];
    int bits_only;
    PyObject* np_dtype;
} tl_param;

/* How the arrays of one Python type are read. */
enum { RD_NONE, RD_DLPACK, RD_CAI, RD_CUPY };
typedef struct {
    PyTypeObject* tp;
    int reader;          /* RD_DLPACK: its exchange table; RD_CAI: __cuda_array_interface__; RD_CUPY: cupy's fields */
    const tl_api* api;   /* RD_DLPACK */
    PyObject* stream_fn; /* RD_CAI / RD_CUPY: stream_fn(device) -> the current stream's handle; NULL: stream 0 */
    PyObject* alloc_fn;  /* RD_CUPY: alloc_fn(parameter, shape, device) -> a new array for a left-out output */
} tl_type;

/* one launch of a plan of several: each kernel parameter the call's (its slot) or a fixed address */
typedef struct {
    void* fn;
    unsigned grid[3], threads, shared, cluster[3];
    int nparams;
    int when; /* 0: always; 1: unless the launcher allocated the outputs; 2: only then (a padded launch's copies in) */
    int source[TL_STEP_PARAMS]; /* >= 0: the call's parameter of that index; -1: fixed[j] */
    void* fixed[TL_STEP_PARAMS];
} tl_step;

typedef struct {
    int used;
    int64_t key[TL_MAX_KEY];
    int nsteps;      /* > 0: the launches below instead of fn with the call's parameters */
    tl_step* steps;  /* PyMem_Malloc'd */
    int bound;       /* launches only on `stream` (a workspace kept for it), never while it is capturing */
    void* stream;
    void* fn;
    unsigned grid[3], threads, shared;
    int nsizes, nmaps;
    unsigned cluster[3]; /* blocks of a thread-block cluster (all 0: none) */
    int32_t sizes[TL_MAX_SIZES];
    void* maps[TL_MAX_MAPS];
    PyObject* owner; /* the Python plan: keeps the encoded tensor maps alive */
} tl_plan;

typedef struct {
    PyObject_HEAD
    int nparams, ntensors, ninputs, noutputs, can_allocate, key_pointers;
    tl_param params[TL_MAX_PARAMS];
    int tensor_param[TL_MAX_PARAMS]; /* tensor number -> parameter index */
    int input_param[TL_MAX_PARAMS];  /* input number -> parameter index */
    int output_param[TL_MAX_PARAMS];
    int ngrid_scalars;
    int grid_scalar[TL_MAX_PARAMS];
    int keylen;
    int device_type; /* kDLCUDA; the tests' fake driver takes host tensors (kDLCPU) */
    tl_launch_fn launch;
    tl_launch_ex_fn launch_ex; /* NULL: clustered plans stay on the Python path */
    tl_capturing_fn capturing; /* NULL: plans bound to a stream are not filed */
    PyObject* miss;
    tl_type types[TL_TYPES]; /* array types seen, and how they are read */
    int ntypes;
    tl_plan plans[TL_PLANS];
    int next_plan;
    unsigned long long hits, misses;
    long bench_repeat;      /* time_launch(): issue the found launch this many times, timed */
    long long bench_ns;
    int bench_null;         /* overhead(): everything but the driver call (which "succeeds" without launching) */
} Launcher;

/* The exchange table a type defines itself (a subclass -- a Parameter, a FakeTensor under tracing -- has none of its
   own: the Python path takes it). The attribute is `__dlpack_c_exchange_api__` (DLPack 1.3), or its earlier name
   `__c_dlpack_exchange_api__`; its value a capsule named "dlpack_exchange_api", or the table's address as an int. */
static const tl_api* table_of(PyTypeObject* tp) {
    static const char* names[2] = {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"};
    const tl_api* api = NULL;
    PyObject* own = PyObject_GetAttrString((PyObject*)tp, "__dict__");
    for (int i = 0; i < 2 && api == NULL && own != NULL; i++) {
        PyObject* name = PyUnicode_FromString(names[i]);
        if (name == NULL) break;
        if (PySequence_Contains(own, name) == 1) {
            PyObject* v = PyObject_GetAttr((PyObject*)tp, name);
            if (v != NULL && PyCapsule_IsValid(v, "dlpack_exchange_api"))
                api = (const tl_api*)PyCapsule_GetPointer(v, "dlpack_exchange_api");
            else if (v != NULL && PyLong_Check(v))
                api = (const tl_api*)PyLong_AsVoidPtr(v);
            Py_XDECREF(v);
        }
        Py_DECREF(name);
    }
    Py_XDECREF(own);
    PyErr_Clear();
    if (api != NULL && (api->header.version.major != 1 || api->dltensor_from_py_object_no_sync == NULL
                        || api->current_work_stream == NULL))
        api = NULL; /* a table of another major version: not read */
    return api;
}

/* How arrays of a type are read: looked up once per type (its exchange table, or what accept() said), then
   cached; NULL when the cache is full and the type is not in it. */
static tl_type* type_of(Launcher* self, PyTypeObject* tp) {
    for (int i = 0; i < self->ntypes; i++)
        if (self->types[i].tp == tp) return &self->types[i];
    if (self->ntypes == TL_TYPES) return NULL;
    tl_type* t = &self->types[self->ntypes++];
    Py_INCREF((PyObject*)tp); /* a type stays alive while what was learned of it is cached: hold it */
    t->tp = tp;
    t->api = table_of(tp);
    t->reader = t->api != NULL ? RD_DLPACK : RD_NONE;
    t->stream_fn = NULL;
    t->alloc_fn = NULL;
    return t;
}

static PyObject *S_cai, *S_typestr, *S_shape, *S_strides, *S_data, *S_dtype, *S_c_contiguous, *S_ptr, *S_device_id;

/* An int attribute (or item) as int64; 0 when it is not an int (then the Python path decides). */
static int as_i64(PyObject* v, int64_t* out) {
    if (v == NULL || !PyLong_Check(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        if (!overflow) return 0;
        unsigned long long u = PyLong_AsUnsignedLongLong(v); /* a pointer above 2**63 */
        if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        x = (long long)u;
    }
    *out = x;
    return 1;
}

/* A tuple of `ndim` ints into out[]; 0 when it is anything else. */
static int read_dims(PyObject* v, int ndim, int64_t* out) {
    if (v == NULL || !PyTuple_Check(v) || PyTuple_Size(v) != ndim) return 0;
    for (int d = 0; d < ndim; d++)
        if (!as_i64(PyTuple_GetItem(v, d), &out[d])) return 0;
    return 1;
}

/* An array through __cuda_array_interface__, as tilec/runtime/arrays.py's _cai_view reads it (device 0), or 0 when
   it does not fit this parameter as that reads it -- or is spelled otherwise (then the Python path decides). */
static int read_cai(PyObject* a, const tl_param* p, tl_dltensor* t, int64_t* shape) {
    int ok = 0;
    PyObject* d = PyObject_GetAttr(a, S_cai);
    if (d == NULL || !PyDict_Check(d)) goto done;
    PyObject* ts = PyDict_GetItem(d, S_typestr); /* borrowed */
    if (ts == NULL || !PyUnicode_Check(ts)) goto done;
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(ts, &len);
    if (s == NULL || len < 3 || len > 6 || !strchr("<>|=", s[0])) goto done;
    int64_t itemsize = 0;
    for (Py_ssize_t i = 2; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') goto done;
        itemsize = itemsize * 10 + (s[i] - '0');
    }
    if (!(p->typestr[0] && strcmp(s, p->typestr) == 0) && !(p->bits_only && itemsize == p->bits_only)) goto done;
    if (!read_dims(PyDict_GetItem(d, S_shape), p->ndim, shape)) goto done;
    PyObject* strides = PyDict_GetItem(d, S_strides);
    if (strides != NULL && strides != Py_None) { /* exactly the C-contiguous strides, as the Python path wants */
        int64_t st[TL_MAX_DIMS];
        if (!read_dims(strides, p->ndim, st)) goto done;
        int64_t step = itemsize;
        for (int k = p->ndim - 1; k >= 0; k--) {
            if (st[k] != step) goto done;
            step *= shape[k];
        }
    }
    PyObject* data = PyDict_GetItem(d, S_data);
    int64_t ptr;
    if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) < 1 || !as_i64(PyTuple_GetItem(data, 0), &ptr))
        goto done;
    t->data = (void*)(intptr_t)ptr;
    t->device.device_id = 0;
    ok = 1;
done:
    Py_XDECREF(d);
    if (!ok) PyErr_Clear();
    return ok;
}

/* A cupy array, as arrays.py's _cupy_view reads it: dtype, C-contiguity, data.ptr, data.device_id, shape. */
static int read_cupy(PyObject* a, const tl_param* p, tl_dltensor* t, int64_t* shape) {
    int ok = 0;
    PyObject *v = NULL, *data = NULL, *ptr = NULL, *dev = NULL;
    int64_t x, device;
    if (p->np_dtype == NULL) goto done;
    v = PyObject_GetAttr(a, S_dtype);
    if (v != p->np_dtype) goto done;
    Py_CLEAR(v);
    v = PyObject_GetAttr(a, S_c_contiguous);
    if (v != Py_True) goto done;
    Py_CLEAR(v);
    v = PyObject_GetAttr(a, S_shape);
    if (!read_dims(v, p->ndim, shape)) goto done;
    data = PyObject_GetAttr(a, S_data);
    if (data == NULL) goto done;
    ptr = PyObject_GetAttr(data, S_ptr);
    dev = PyObject_GetAttr(data, S_device_id);
    if (!as_i64(ptr, &x) || !as_i64(dev, &device) || device < 0 || device > INT32_MAX) goto done;
    t->data = (void*)(intptr_t)x;
    t->device.device_id = (int32_t)device;
    ok = 1;
done:
    Py_XDECREF(v);
    Py_XDECREF(data);
    Py_XDECREF(ptr);
    Py_XDECREF(dev);
    if (!ok) PyErr_Clear();
    return ok;
}

/* C-contiguous, as torch's is_contiguous() sees it: dims of extent 1 may have any stride, an empty tensor is. */
static int contiguous(const tl_dltensor* t) {
    if (t->strides == NULL) return 1;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        if (n == 0) return 1;
        if (n != 1 && t->strides[d] != expect) return 0;
        expect *= n;
    }
    return 1;
}

static int same_dtype(tl_dtype a, tl_dtype b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

/* IEEE binary16 bits of x, rounded to nearest even (what struct.pack("<e", x) gives); 0 when that overflows. */
static int f16_bits(double x, uint16_t* out) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isinf(a)) { *out = sign | 0x7c00; return 1; }
    if (a < 0x1p-14) { /* zero or subnormal: units of 2**-24 (1024 of them round up to the smallest normal) */
        *out = sign | (uint16_t)rint(a * 0x1p24);
        return 1;
    }
    int e;
    frexp(a, &e);
    int exponent = e - 1;                          /* 2**exponent <= a < 2**(exponent + 1) */
    double q = rint(ldexp(a, 10 - exponent));      /* 1024 <= q <= 2048: the significand, rounded */
    if (q == 2048.0) { q = 1024.0; exponent++; }
    if (exponent > 15) return 0;                   /* struct.pack raises OverflowError */
    *out = sign | (uint16_t)((exponent + 15) << 10) | (uint16_t)((int)q - 1024);
    return 1;
}

/* bfloat16 bits of x: x rounded to float32 (0 when that overflows, as struct.pack("<f") raises), then to the upper
   16 bits, nearest even (launch.py's _bf16_bits). */
static int bf16_bits(double x, uint16_t* out) {
    float f = (float)x;
    if (isinf(f) && !isinf(x)) return 0;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    *out = (uint16_t)(((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16) & 0xFFFFu);
    return 1;
}

/* A scalar argument into its 8-byte slot; 0 when it is not a plain Python value in range (then Python decides). */
static int store_scalar(int kind, PyObject* v, uint64_t* slot) {
    *slot = 0;
    if (kind == S_BOOL) {
        if (v == Py_True) { *(uint8_t*)slot = 1; return 1; }
        if (v == Py_False) return 1;
        return 0;
    }
    if (kind == S_F32 || kind == S_F64 || kind == S_F16 || kind == S_BF16) {
        double x;
        if (PyFloat_Check(v)) x = PyFloat_AsDouble(v);
        else if (PyLong_CheckExact(v)) {
            x = PyLong_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        } else return 0;
        if (kind == S_F64) { memcpy(slot, &x, 8); return 1; }
        float f = (float)x;
        if (kind == S_F32) { memcpy(slot, &f, 4); return 1; }
        /* 16-bit floats travel as their bits, rounded to nearest even as launch.py's _f16_bits / _bf16_bits do;
           NaNs and values those refuse (too large) are left to them */
        uint16_t h;
        if (isnan(x) || !(kind == S_F16 ? f16_bits(x, &h) : bf16_bits(x, &h))) return 0;
        memcpy(slot, &h, 2);
        return 1;
    }
    if (!PyLong_CheckExact(v)) return 0; /* bool, numpy integers, ...: the Python path */
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    switch (kind) {
    case S_I8: if (x < -128 || x > 127) return 0; *(int8_t*)slot = (int8_t)x; return 1;
    case S_U8: if (x < 0 || x > 255) return 0; *(uint8_t*)slot = (uint8_t)x; return 1;
    case S_I16: if (x < -32768 || x > 32767) return 0; *(int16_t*)slot = (int16_t)x; return 1;
    case S_U16: if (x < 0 || x > 65535) return 0; *(uint16_t*)slot = (uint16_t)x; return 1;
    case S_I32: if (x < INT32_MIN || x > INT32_MAX) return 0; *(int32_t*)slot = (int32_t)x; return 1;
    case S_U32: if (x < 0 || x > (long long)UINT32_MAX) return 0; *(uint32_t*)slot = (uint32_t)x; return 1;
    case S_I64: *(int64_t*)slot = (int64_t)x; return 1;
    case S_U64: if (x < 0) return 0; *(uint64_t*)slot = (uint64_t)x; return 1; /* >= 2**63: Python */
    }
    return 0;
}

static PyObject* miss(Launcher* self) {
    self->misses++;
    Py_INCREF(self->miss);
    return self->miss;
}

static void free_outputs(PyObject** made, int n) {
    for (int i = 0; i < n; i++) Py_XDECREF(made[i]);
}

/* one launch: cuLaunchKernel, or cuLaunchKernelEx with the cluster dimension for a clustered kernel */
static int launch_kernel(Launcher* self, void* fn, const unsigned* grid, unsigned threads, unsigned shared,
                         const unsigned* cluster, void* stream, void** params) {
    if (cluster[0] == 0)
        return self->launch(fn, grid[0], grid[1], grid[2], threads, 1, 1, shared, stream, params, NULL);
    tl_launch_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = TL_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    for (int d = 0; d < 3; d++) attr.value[d] = cluster[d];
    tl_launch_config config = {grid[0], grid[1], grid[2], threads, 1, 1, shared, stream, &attr, 1};
    return self->launch_ex(&config, fn, params, NULL);
}

static int launch_plan(Launcher* self, const tl_plan* plan, void* stream, void** params) {
    return launch_kernel(self, plan->fn, plan->grid, plan->threads, plan->shared, plan->cluster, stream, params);
}

/* Python-path calls now between the launches of a sequence on a kept workspace (fastlaunch.hold): bound plans wait */
static long tl_held;

/* Whether a bound plan may launch on `stream` now: its own stream, nothing held, no graph being captured on it. */
static int bound_plan_may_launch(Launcher* self, const tl_plan* plan, void* stream) {
    if (plan->stream != stream || tl_held > 0 || self->capturing == NULL) return 0;
    int status = 1;
    return self->capturing(stream, &status) == 0 && status == 0;
}

/* a plan's steps, in order. 0: all launched; -1: the first failed, nothing enqueued (the Python path retries);
   -2: a later one failed after others were enqueued (an exception is set). */
static int launch_steps(Launcher* self, const tl_plan* plan, void* stream, uint64_t* slot, int allocated) {
    void* params[TL_STEP_PARAMS];
    int launched = 0;
    for (int s = 0; s < plan->nsteps; s++) {
        const tl_step* st = &plan->steps[s];
        if ((st->when == 1 && allocated) || (st->when == 2 && !allocated)) continue;
        for (int j = 0; j < st->nparams; j++) params[j] = st->source[j] >= 0 ? (void*)&slot[st->source[j]] : st->fixed[j];
        int rc = self->bench_null ? 0
                                  : launch_kernel(self, st->fn, st->grid, st->threads, st->shared, st->cluster, stream,
                                                  params);
        if (rc != 0) {
            if (launched == 0) return -1;
            PyErr_Format(PyExc_RuntimeError, "tilec: launch %d of %d of a padded or multi-launch call failed "
                         "(CUresult %d) after the earlier ones were enqueued", s + 1, plan->nsteps, rc);
            return -2;
        }
        launched++;
    }
    return 0;
}

static PyObject* finish(Launcher* self, PyObject** arg, PyObject** made, int nmade);

/* launcher.fast(args): launch, or MISS */
static PyObject* Launcher_fast(Launcher* self, PyObject* args) {
    if (!PyTuple_Check(args)) return miss(self);
    Py_ssize_t nargs = PyTuple_Size(args);
    int allocating;
    if (nargs == self->nparams) allocating = 0;
    else if (self->can_allocate && nargs == self->ninputs) allocating = 1;
    else return miss(self);

    PyObject* arg[TL_MAX_PARAMS];
    if (!allocating) {
        for (int i = 0; i < self->nparams; i++) arg[i] = PyTuple_GetItem(args, i);
    } else {
        for (int i = 0; i < self->nparams; i++) arg[i] = NULL;
        for (int j = 0; j < self->ninputs; j++) arg[self->input_param[j]] = PyTuple_GetItem(args, j);
    }

    /* the tensors: read and check the ones given (all of one kind of array: the first one's framework gives the
       stream, as on the Python path) */
    tl_dltensor dl[TL_MAX_PARAMS];
    int64_t read_shape[TL_MAX_PARAMS][TL_MAX_DIMS]; /* the dims of arrays read without an exchange table */
    const tl_type* kind = NULL;
    const tl_api* api = NULL;
    int device = -1;
    for (int k = 0; k < self->ntensors; k++) {
        int i = self->tensor_param[k];
        PyObject* a = arg[i];
        if (a == NULL) continue; /* an output to allocate */
        const tl_type* t_kind = type_of(self, Py_TYPE(a));
        if (t_kind == NULL || t_kind->reader == RD_NONE) return miss(self);
        const tl_param* p = &self->params[i];
        if (kind == NULL) kind = t_kind;
        else if (t_kind->reader != kind->reader || t_kind->api != kind->api || t_kind->stream_fn != kind->stream_fn)
            return miss(self);
        if (t_kind->reader == RD_DLPACK) {
            if (t_kind->api->dltensor_from_py_object_no_sync(a, &dl[k]) != 0) { PyErr_Clear(); return miss(self); }
            if (dl[k].device.device_type != self->device_type || dl[k].ndim != p->ndim
                || !same_dtype(dl[k].dtype, p->dtype) || !contiguous(&dl[k]))
                return miss(self);
        } else {
            memset(&dl[k], 0, sizeof dl[k]);
            if (!(t_kind->reader == RD_CAI ? read_cai(a, p, &dl[k], read_shape[k]) : read_cupy(a, p, &dl[k], read_shape[k])))
                return miss(self);
            dl[k].device.device_type = self->device_type;
            dl[k].ndim = p->ndim;
            dl[k].dtype = p->dtype;
            dl[k].shape = read_shape[k];
        }
        if (device >= 0 && dl[k].device.device_id != device) return miss(self);
        device = dl[k].device.device_id;
    }
    if (kind == NULL) return miss(self);
    api = kind->api;
    if (allocating && kind->reader != RD_DLPACK && kind->alloc_fn == NULL) return miss(self);

    /* the key: every tensor's shape (an allocated output's from its inputs), pointers for TMA, device, scalars */
    int64_t key[TL_MAX_KEY];
    int64_t out_shape[TL_MAX_PARAMS][TL_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < self->ntensors; k++) {
        int i = self->tensor_param[k];
        const tl_param* p = &self->params[i];
        if (arg[i] != NULL) {
            for (int d = 0; d < p->ndim; d++) key[n++] = dl[k].shape[d];
        } else {
            for (int d = 0; d < p->ndim; d++) {
                int64_t v = p->alloc_dim[d];
                if (v < 0) {
                    int64_t pos = -(v + 1);
                    int src = (int)(pos / TL_MAX_DIMS), axis = (int)(pos % TL_MAX_DIMS);
                    v = dl[src].shape[axis];
                }
                out_shape[k][d] = v;
                key[n++] = v;
            }
        }
    }
    int ptr_at = n;
    if (self->key_pointers) n += self->ntensors; /* filled below (outputs: after allocating) */
    key[n++] = device;
    for (int g = 0; g < self->ngrid_scalars; g++) {
        PyObject* v = arg[self->grid_scalar[g]];
        if (!PyLong_CheckExact(v)) return miss(self);
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return miss(self); }
        key[n++] = x;
    }

    /* the scalars (before anything is allocated or launched) */
    uint64_t slot[TL_MAX_PARAMS];
    for (int i = 0; i < self->nparams; i++) {
        const tl_param* p = &self->params[i];
        if (!p->tensor && !store_scalar(p->scalar, arg[i], &slot[i])) return miss(self);
    }

    /* the stream: the framework's current one on this device (no framework: the legacy default stream, 0) */
    void* stream = NULL;
    if (api != NULL) {
        if (api->current_work_stream(self->device_type, device, &stream) != 0) { PyErr_Clear(); return miss(self); }
    } else if (kind->stream_fn != NULL) {
        PyObject* dev = PyLong_FromLong(device);
        PyObject* h = dev ? PyObject_CallFunctionObjArgs(kind->stream_fn, dev, NULL) : NULL;
        Py_XDECREF(dev);
        int64_t handle;
        int ok = as_i64(h, &handle);
        Py_XDECREF(h);
        if (!ok) { PyErr_Clear(); return miss(self); }
        stream = (void*)(intptr_t)handle;
    }

    /* a TMA kernel's plan depends on the outputs' addresses: look the plan up after allocating them, else before */
    tl_plan* plan = NULL;
    PyObject* made[TL_MAX_PARAMS];
    int nmade = 0;
    if (!self->key_pointers) {
        for (int j = 0; j < TL_PLANS && !plan; j++)
            if (self->plans[j].used && memcmp(self->plans[j].key, key, n * sizeof(int64_t)) == 0) plan = &self->plans[j];
        if (plan == NULL) return miss(self);
    }
    if (allocating) {
        for (int k = 0; k < self->ntensors; k++) {
            int i = self->tensor_param[k];
            if (arg[i] != NULL) continue;
            tl_dltensor proto;
            memset(&proto, 0, sizeof proto);
            proto.device.device_type = self->device_type;
            proto.device.device_id = device;
            proto.ndim = self->params[i].ndim;
            proto.dtype = self->params[i].dtype;
            proto.shape = out_shape[k];
            if (api == NULL) { /* cupy: its allocator (cupy.empty on the device), the array read back */
                PyObject* shape = PyTuple_New(proto.ndim);
                for (int d = 0; shape != NULL && d < proto.ndim; d++)
                    PyTuple_SetItem(shape, d, PyLong_FromLongLong(out_shape[k][d]));
                PyObject* obj = shape ? PyObject_CallFunction(kind->alloc_fn, "iOi", i, shape, device) : NULL;
                Py_XDECREF(shape);
                if (obj != NULL) made[nmade++] = arg[i] = obj;
                memset(&dl[k], 0, sizeof dl[k]);
                if (obj == NULL || !read_cupy(obj, &self->params[i], &dl[k], read_shape[k])
                    || dl[k].device.device_id != device) {
                    PyErr_Clear();
                    free_outputs(made, nmade);
                    return miss(self);
                }
                dl[k].device.device_type = self->device_type;
                dl[k].ndim = proto.ndim;
                dl[k].dtype = proto.dtype;
                dl[k].shape = read_shape[k];
                continue;
            }
            tl_managed* m = NULL;
            void* obj = NULL;
            if (api->managed_tensor_allocator(&proto, &m, NULL, NULL) != 0 || m == NULL) {
                PyErr_Clear();
                free_outputs(made, nmade);
                return miss(self);
            }
            dl[k] = m->dl_tensor; /* the pointer fields stay valid: the tensor made from m owns them */
            if (api->managed_tensor_to_py_object_no_sync(m, &obj) != 0 || obj == NULL) {
                PyErr_Clear();
                free_outputs(made, nmade);
                return miss(self);
            }
            made[nmade++] = arg[i] = (PyObject*)obj;
        }
    }
    if (self->key_pointers || nmade > 0) {
        /* (after an allocation, found again: making a Python object may run other threads, whose remember() may
           have refilled the slot; from here to the launch nothing lets the GIL go) */
        plan = NULL;
        if (self->key_pointers)
            for (int k = 0; k < self->ntensors; k++)
                key[ptr_at + k] = (int64_t)(intptr_t)((char*)dl[k].data + dl[k].byte_offset);
        for (int j = 0; j < TL_PLANS && !plan; j++)
            if (self->plans[j].used && memcmp(self->plans[j].key, key, n * sizeof(int64_t)) == 0) plan = &self->plans[j];
        if (plan == NULL) { free_outputs(made, nmade); return miss(self); }
    }

    for (int k = 0; k < self->ntensors; k++)
        slot[self->tensor_param[k]] = (uint64_t)(uintptr_t)((char*)dl[k].data + dl[k].byte_offset);
    int rc;
    if (plan->nsteps > 0) { /* a sequence of launches */
        if (plan->bound && !bound_plan_may_launch(self, plan, stream)) { free_outputs(made, nmade); return miss(self); }
        rc = launch_steps(self, plan, stream, slot, nmade > 0);
        if (rc == -2) { free_outputs(made, nmade); return NULL; }
        if (rc != 0) { free_outputs(made, nmade); return miss(self); }
        return finish(self, arg, made, nmade);
    }
    /* the argument block: parameters in order, then the sizes, then the tensor maps */
    void* params[TL_MAX_PARAMS + TL_MAX_SIZES + TL_MAX_MAPS];
    int q = 0;
    for (int i = 0; i < self->nparams; i++) params[q++] = &slot[i];
    for (int s = 0; s < plan->nsizes; s++) params[q++] = &plan->sizes[s];
    for (int m = 0; m < plan->nmaps; m++) params[q++] = plan->maps[m];
    if (self->bench_repeat > 0) { /* time_launch(): the driver's own cost, with no launcher around it */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long r = 0; r < self->bench_repeat; r++) launch_plan(self, plan, stream, params);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        self->bench_ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    }
    rc = self->bench_null ? 0 : launch_plan(self, plan, stream, params);
    if (rc != 0) { /* nothing was enqueued: the Python path retries (a context to make current) or reports */
        free_outputs(made, nmade);
        return miss(self);
    }
    return finish(self, arg, made, nmade);
}

/* a launched call's result: its output, a tuple of them, or None */
static PyObject* finish(Launcher* self, PyObject** arg, PyObject** made, int nmade) {
    self->hits++;
    if (self->noutputs == 1) {
        PyObject* out = arg[self->output_param[0]];
        Py_INCREF(out);
        free_outputs(made, nmade);
        return out;
    }
    if (self->noutputs == 0) { free_outputs(made, nmade); Py_RETURN_NONE; }
    PyObject* tup = PyTuple_New(self->noutputs);
    if (tup == NULL) { free_outputs(made, nmade); return NULL; }
    for (int o = 0; o < self->noutputs; o++) {
        PyObject* out = arg[self->output_param[o]];
        Py_INCREF(out);
        PyTuple_SetItem(tup, o, out);
    }
    free_outputs(made, nmade);
    return tup;
}

static int int_list(PyObject* seq, int64_t* out, int limit, const char* what) {
    PyObject* fast = PySequence_Tuple(seq);
    if (fast == NULL) return -1;
    Py_ssize_t len = PyTuple_Size(fast);
    if (len > limit) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: %zd values, at most %d", what, len, limit);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GetItem(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) { Py_DECREF(fast); return -1; }
    }
    Py_DECREF(fast);
    return (int)len;
}

static void clear_plan(tl_plan* p) {
    Py_CLEAR(p->owner);
    PyMem_Free(p->steps);
    p->steps = NULL;
    p->nsteps = 0;
    p->bound = 0;
    p->stream = NULL;
    p->used = 0;
}

/* the slot a plan of this key goes to: the one already holding the key, else the next in turn; emptied */
static tl_plan* plan_slot(Launcher* self, const int64_t* key, int nk) {
    tl_plan* p = NULL;
    for (int j = 0; j < TL_PLANS && !p; j++)
        if (self->plans[j].used && memcmp(self->plans[j].key, key, nk * sizeof(int64_t)) == 0) p = &self->plans[j];
    if (p == NULL) { /* round robin over the slots */
        p = &self->plans[self->next_plan];
        self->next_plan = (self->next_plan + 1) % TL_PLANS;
    }
    clear_plan(p);
    return p;
}

/* launcher.remember(key, fn, grid, threads, shared, sizes, map_addresses, owner[, cluster]): file a plan the Python
   path made; False (nothing filed) for a clustered plan without cuLaunchKernelEx */
static PyObject* Launcher_remember(Launcher* self, PyObject* args) {
    PyObject *key, *grid, *sizes, *maps, *owner, *cluster = Py_None;
    unsigned long long fn;
    unsigned threads, shared;
    if (!PyArg_ParseTuple(args, "OKOIIOOO|O", &key, &fn, &grid, &threads, &shared, &sizes, &maps, &owner, &cluster))
        return NULL;
    int64_t k[TL_MAX_KEY], g[3], s[TL_MAX_SIZES], m[TL_MAX_MAPS], c[3] = {0, 0, 0};
    if (cluster != Py_None) {
        if (self->launch_ex == NULL) Py_RETURN_FALSE;
        if (int_list(cluster, c, 3, "cluster") != 3)
            return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "cluster");
    }
    int nk = int_list(key, k, TL_MAX_KEY, "key");
    if (nk < 0) return NULL;
    if (nk != self->keylen) return PyErr_Format(PyExc_ValueError, "key of %d values, expected %d", nk, self->keylen);
    if (int_list(grid, g, 3, "grid") != 3) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "grid");
    int ns = int_list(sizes, s, TL_MAX_SIZES, "sizes");
    if (ns < 0) return NULL;
    int nm = int_list(maps, m, TL_MAX_MAPS, "tensor maps");
    if (nm < 0) return NULL;
    tl_plan* p = plan_slot(self, k, nk);
    memcpy(p->key, k, nk * sizeof(int64_t));
    p->fn = (void*)(uintptr_t)fn;
    for (int d = 0; d < 3; d++) p->grid[d] = (unsigned)g[d];
    p->threads = threads;
    p->shared = shared;
    for (int d = 0; d < 3; d++) p->cluster[d] = (unsigned)c[d];
    p->nsizes = ns;
    for (int j = 0; j < ns; j++) p->sizes[j] = (int32_t)s[j];
    p->nmaps = nm;
    for (int j = 0; j < nm; j++) p->maps[j] = (void*)(uintptr_t)m[j];
    Py_INCREF(owner);
    p->owner = owner;
    p->used = 1;
    Py_RETURN_NONE;
}

/* one step of remember_steps: (fn, grid, threads, shared, cluster or None, sources, fixed, when) */
static int parse_step(Launcher* self, PyObject* item, tl_step* st) {
    PyObject *grid, *cluster, *sources, *fixed;
    unsigned long long fn;
    int when;
    if (!PyArg_ParseTuple(item, "KOIIOOOi", &fn, &grid, &st->threads, &st->shared, &cluster, &sources, &fixed, &when))
        return -1;
    if (when < 0 || when > 2) {
        PyErr_Format(PyExc_ValueError, "when %d: 0, 1 or 2", when);
        return -1;
    }
    int64_t g[3], c[3] = {0, 0, 0}, src[TL_STEP_PARAMS], fix[TL_STEP_PARAMS];
    if (int_list(grid, g, 3, "grid") != 3) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "grid");
        return -1;
    }
    if (cluster != Py_None) {
        if (self->launch_ex == NULL) return 0;
        if (int_list(cluster, c, 3, "cluster") != 3) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "cluster");
            return -1;
        }
    }
    int ns = int_list(sources, src, TL_STEP_PARAMS, "sources");
    if (ns < 0) return -1;
    if (int_list(fixed, fix, TL_STEP_PARAMS, "fixed") != ns) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a fixed address per source");
        return -1;
    }
    st->fn = (void*)(uintptr_t)fn;
    for (int d = 0; d < 3; d++) {
        st->grid[d] = (unsigned)g[d];
        st->cluster[d] = (unsigned)c[d];
    }
    st->nparams = ns;
    st->when = when;
    for (int j = 0; j < ns; j++) {
        if (src[j] >= self->nparams || src[j] < -1 || (src[j] == -1 && fix[j] == 0)) {
            PyErr_Format(PyExc_ValueError, "step parameter %d: source %lld", j, (long long)src[j]);
            return -1;
        }
        st->source[j] = (int)src[j];
        st->fixed[j] = (void*)(uintptr_t)fix[j];
    }
    return 1;
}

/* launcher.remember_steps(key, steps, owner, stream): file a plan of several launches (parse_step), bound to
   `stream` (an int) when it uses a workspace kept for that stream, else (None) launched on any. False (nothing
   filed) where a step needs cuLaunchKernelEx or the binding cuStreamIsCapturing, and this launcher has neither. */
static PyObject* Launcher_remember_steps(Launcher* self, PyObject* args) {
    PyObject *key, *steps, *owner, *stream;
    if (!PyArg_ParseTuple(args, "OOOO", &key, &steps, &owner, &stream)) return NULL;
    if (stream != Py_None && self->capturing == NULL) Py_RETURN_FALSE;
    int64_t k[TL_MAX_KEY];
    int nk = int_list(key, k, TL_MAX_KEY, "key");
    if (nk < 0) return NULL;
    if (nk != self->keylen) return PyErr_Format(PyExc_ValueError, "key of %d values, expected %d", nk, self->keylen);
    Py_ssize_t n = PySequence_Size(steps);
    if (n < 0) return NULL;
    if (n < 1 || n > TL_MAX_STEPS) return PyErr_Format(PyExc_ValueError, "%zd steps: 1 to %d", n, TL_MAX_STEPS);
    tl_step* parsed = PyMem_Malloc((size_t)n * sizeof(tl_step));
    if (parsed == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject* item = PySequence_GetItem(steps, i);
        int ok = item == NULL ? -1 : parse_step(self, item, &parsed[i]);
        Py_XDECREF(item);
        if (ok <= 0) {
            PyMem_Free(parsed);
            if (ok < 0) return NULL;
            Py_RETURN_FALSE;
        }
    }
    int64_t handle = 0;
    if (stream != Py_None && !as_i64(stream, &handle)) { PyMem_Free(parsed); return NULL; }
    tl_plan* p = plan_slot(self, k, nk);
    memcpy(p->key, k, nk * sizeof(int64_t));
    p->steps = parsed;
    p->nsteps = (int)n;
    p->bound = stream != Py_None;
    p->stream = (void*)(intptr_t)handle;
    Py_INCREF(owner);
    p->owner = owner;
    p->used = 1;
    Py_RETURN_TRUE;
}

static PyObject* Launcher_forget(Launcher* self, PyObject* unused) {
    (void)unused;
    for (int j = 0; j < TL_PLANS; j++) clear_plan(&self->plans[j]);
    Py_RETURN_NONE;
}

static PyObject* Launcher_stats(Launcher* self, PyObject* unused) {
    (void)unused;
    int used = 0;
    for (int j = 0; j < TL_PLANS; j++) used += self->plans[j].used;
    return Py_BuildValue("{sKsKsi}", "hits", self->hits, "misses", self->misses, "plans", used);
}

/* time_launch(args, n): run the call once, issuing its cuLaunchKernel n more times in a C loop first; the
   nanoseconds per driver call (the floor under any launcher), or -1 when the call did not launch here */
static PyObject* Launcher_time_launch(Launcher* self, PyObject* args) {
    PyObject* call_args;
    long n;
    if (!PyArg_ParseTuple(args, "Ol", &call_args, &n)) return NULL;
    self->bench_repeat = n;
    self->bench_ns = -1;
    PyObject* r = Launcher_fast(self, call_args);
    self->bench_repeat = 0;
    if (r == NULL) return NULL;
    Py_DECREF(r);
    return PyFloat_FromDouble(self->bench_ns < 0 || n <= 0 ? -1.0 : (double)self->bench_ns / n);
}

static double ns_since(const struct timespec* t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e9 + (double)(t1.tv_nsec - t0->tv_nsec);
}

/* overhead(args, n): ns per call of fast(args) with everything but the driver call (bench/deploy/breakdown.py) */
static PyObject* Launcher_overhead(Launcher* self, PyObject* args) {
    PyObject* call_args;
    long n;
    if (!PyArg_ParseTuple(args, "Ol", &call_args, &n)) return NULL;
    if (n <= 0) return PyFloat_FromDouble(-1.0);
    unsigned long long hits = self->hits;
    struct timespec t0;
    self->bench_null = 1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        PyObject* r = Launcher_fast(self, call_args);
        if (r == NULL) { self->bench_null = 0; return NULL; }
        Py_DECREF(r);
    }
    double ns = ns_since(&t0);
    self->bench_null = 0;
    int all_hit = self->hits - hits == (unsigned long long)n;
    self->hits = hits;
    return PyFloat_FromDouble(all_hit ? ns / n : -1.0);
}

/* parts(args, n): ns per call of the pieces of a call, each in its own C loop -- reading every tensor argument
   through its exchange table, asking for the current stream, and (for a kernel with a left-out output) the
   output's allocation through the table alone, and with its Python tensor made and dropped. */
static PyObject* Launcher_parts(Launcher* self, PyObject* args) {
    (void)self;
    PyObject* call_args;
    long n;
    if (!PyArg_ParseTuple(args, "Ol", &call_args, &n)) return NULL;
    if (!PyTuple_Check(call_args) || n <= 0) return PyErr_Format(PyExc_ValueError, "parts(tuple, n > 0)");
    Py_ssize_t nargs = PyTuple_Size(call_args);
    const tl_api* api = NULL;
    tl_dltensor t;
    PyObject* first = NULL;
    int ntensors = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject* a = PyTuple_GetItem(call_args, i);
        const tl_api* t_api = table_of(Py_TYPE(a));
        if (t_api != NULL) { api = t_api; ntensors++; if (!first) first = a; }
    }
    if (api == NULL) Py_RETURN_NONE;
    if (api->dltensor_from_py_object_no_sync(first, &t) != 0) return NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long r = 0; r < n; r++)
        for (Py_ssize_t i = 0; i < nargs; i++) {
            PyObject* a = PyTuple_GetItem(call_args, i);
            if (Py_TYPE(a) == Py_TYPE(first)) api->dltensor_from_py_object_no_sync(a, &t);
        }
    double read_ns = ns_since(&t0) / n;
    void* stream = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long r = 0; r < n; r++) api->current_work_stream(t.device.device_type, t.device.device_id, &stream);
    double stream_ns = ns_since(&t0) / n;
    double alloc_ns = -1, wrap_ns = -1;
    tl_dltensor proto = t;
    proto.strides = NULL;
    proto.byte_offset = 0;
    proto.data = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long r;
    for (r = 0; r < n; r++) {
        tl_managed* m = NULL;
        if (api->managed_tensor_allocator(&proto, &m, NULL, NULL) != 0 || m == NULL) break;
        if (m->deleter) m->deleter(m);
    }
    if (r == n) alloc_ns = ns_since(&t0) / n;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (r = 0; r < n; r++) {
        tl_managed* m = NULL;
        void* obj = NULL;
        if (api->managed_tensor_allocator(&proto, &m, NULL, NULL) != 0 || m == NULL) break;
        if (api->managed_tensor_to_py_object_no_sync(m, &obj) != 0 || obj == NULL) break;
        Py_DECREF((PyObject*)obj);
    }
    if (r == n) wrap_ns = ns_since(&t0) / n;
    PyErr_Clear();
    return Py_BuildValue("{sisdsdsdsd}", "tensors", ntensors, "read_tensors_ns", read_ns, "current_stream_ns",
                         stream_ns, "allocate_and_free_ns", alloc_ns, "allocate_wrap_and_drop_ns", wrap_ns);
}

/* accept(type, reader, stream_fn, np_dtypes[, alloc_fn]): read arrays of `type` without an exchange table -- reader
   2 through __cuda_array_interface__, 3 through cupy's fields -- launching on stream_fn(device) (None: the legacy
   default stream); np_dtypes: per parameter, the numpy dtype a cupy array of it has (or None); alloc_fn(parameter,
   shape, device): a new array for a left-out output (cupy). What tilec.runtime's adapter for the type does
   (fastlaunch.remember says which). False when the type cache is full or has a table. */
static PyObject* Launcher_accept(Launcher* self, PyObject* args) {
    PyObject *tp, *stream_fn, *np_dtypes, *alloc_fn = Py_None;
    int reader;
    if (!PyArg_ParseTuple(args, "OiOO|O", &tp, &reader, &stream_fn, &np_dtypes, &alloc_fn)) return NULL;
    if (!PyType_Check(tp) || (reader != RD_CAI && reader != RD_CUPY) || !PyTuple_Check(np_dtypes)
        || PyTuple_Size(np_dtypes) != self->nparams)
        return PyErr_Format(PyExc_ValueError, "accept(type, 2 or 3, stream_fn or None, per-parameter dtypes)");
    tl_type* t = type_of(self, (PyTypeObject*)tp);
    if (t == NULL || t->reader == RD_DLPACK) Py_RETURN_FALSE;
    t->reader = reader;
    Py_XDECREF(t->stream_fn);
    t->stream_fn = stream_fn == Py_None ? NULL : (Py_INCREF(stream_fn), stream_fn);
    Py_XDECREF(t->alloc_fn);
    t->alloc_fn = alloc_fn == Py_None || reader != RD_CUPY ? NULL : (Py_INCREF(alloc_fn), alloc_fn);
    for (int i = 0; i < self->nparams; i++) {
        PyObject* d = PyTuple_GetItem(np_dtypes, i);
        if (d != Py_None && self->params[i].np_dtype == NULL) {
            Py_INCREF(d);
            self->params[i].np_dtype = d;
        }
    }
    Py_RETURN_TRUE;
}

/* reader(type): how arrays of `type` are read here (0 not, 1 exchange table, 2 __cuda_array_interface__, 3 cupy) */
static PyObject* Launcher_reader(Launcher* self, PyObject* tp) {
    if (!PyType_Check(tp)) return PyErr_Format(PyExc_TypeError, "reader(type)");
    for (int i = 0; i < self->ntypes; i++)
        if ((PyObject*)self->types[i].tp == tp) return PyLong_FromLong(self->types[i].reader);
    return PyLong_FromLong(0);
}

static PyMethodDef Launcher_methods[] = {
    {"accept", (PyCFunction)Launcher_accept, METH_VARARGS, "read arrays of a type without an exchange table"},
    {"reader", (PyCFunction)Launcher_reader, METH_O, "how arrays of a type are read (0: not yet / not at all)"},
    {"overhead", (PyCFunction)Launcher_overhead, METH_VARARGS, "ns per call of fast(args) without the driver call"},
    {"parts", (PyCFunction)Launcher_parts, METH_VARARGS, "ns per call of the pieces of a call"},
    {"time_launch", (PyCFunction)Launcher_time_launch, METH_VARARGS, "ns per bare driver launch of this call"},
    {"fast", (PyCFunction)Launcher_fast, METH_O, "launch(args): the outputs, or MISS for the Python path"},
    {"remember", (PyCFunction)Launcher_remember, METH_VARARGS, "file a launch plan the Python path made"},
    {"remember_steps", (PyCFunction)Launcher_remember_steps, METH_VARARGS, "file a plan of several launches"},
    {"forget", (PyCFunction)Launcher_forget, METH_NOARGS, "drop every plan"},
    {"stats", (PyCFunction)Launcher_stats, METH_NOARGS, "hits, misses and plans held"},
    {NULL, NULL, 0, NULL},
};

static void Launcher_dealloc(Launcher* self) {
    for (int j = 0; j < TL_PLANS; j++) clear_plan(&self->plans[j]);
    for (int t = 0; t < self->ntypes; t++) {
        Py_CLEAR(self->types[t].tp);
        Py_CLEAR(self->types[t].stream_fn);
        Py_CLEAR(self->types[t].alloc_fn);
    }
    for (int i = 0; i < self->nparams; i++) Py_CLEAR(self->params[i].np_dtype);
    Py_CLEAR(self->miss);
    PyTypeObject* tp = Py_TYPE((PyObject*)self);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

/* Launcher(spec, launch_address, miss[, device_type[, launch_ex_address[, capturing_address]]]). spec: a tuple
 *   (params, inputs, outputs, grid_scalars, key_pointers, can_allocate)
 * params: per parameter (is_tensor, is_output, scalar_kind, (code, bits, lanes), ndim, alloc_dims) */
static int Launcher_init(Launcher* self, PyObject* args, PyObject* kwds) {
    (void)kwds;
    PyObject *spec, *miss_obj, *params, *inputs, *outputs, *grid_scalars;
    unsigned long long launch, launch_ex = 0, capturing = 0;
    int key_pointers, can_allocate, device_type = TL_CUDA;
    if (!PyArg_ParseTuple(args, "OKO|iKK", &spec, &launch, &miss_obj, &device_type, &launch_ex, &capturing))
        return -1;
    self->device_type = device_type;
    self->launch_ex = (tl_launch_ex_fn)(uintptr_t)launch_ex;
    self->capturing = (tl_capturing_fn)(uintptr_t)capturing;
    if (!PyArg_ParseTuple(spec, "OOOOpp", &params, &inputs, &outputs, &grid_scalars, &key_pointers, &can_allocate))
        return -1;
    Py_ssize_t np = PySequence_Size(params);
    if (np < 0) return -1;
    if (np > TL_MAX_PARAMS) { PyErr_SetString(PyExc_ValueError, "too many parameters"); return -1; }
    self->nparams = (int)np;
    self->ntensors = 0;
    int keylen = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject* item = PySequence_GetItem(params, i);
        if (item == NULL) return -1;
        int is_tensor, is_output, kind, ndim;
        int code, bits, lanes, bits_only = 0;
        PyObject* alloc;
        const char* typestr = "";
        int ok = PyArg_ParseTuple(item, "ppi(iii)iO|si", &is_tensor, &is_output, &kind, &code, &bits, &lanes, &ndim,
                                  &alloc, &typestr, &bits_only);
        if (!ok) { Py_DECREF(item); return -1; }
        tl_param* p = &self->params[i];
        memset(p, 0, sizeof *p);
        p->tensor = is_tensor;
        p->output = is_output;
        p->scalar = kind;
        p->dtype.code = (uint8_t)code;
        p->dtype.bits = (uint8_t)bits;
        p->dtype.lanes = (uint16_t)lanes;
        p->ndim = ndim;
        if (strlen(typestr) < sizeof p->typestr) strcpy(p->typestr, typestr);
        p->bits_only = bits_only;
        if (ndim > TL_MAX_DIMS) { Py_DECREF(item); PyErr_SetString(PyExc_ValueError, "too many dims"); return -1; }
        if (is_tensor) {
            if (alloc != Py_None && int_list(alloc, p->alloc_dim, TL_MAX_DIMS, "alloc dims") < 0) {
                Py_DECREF(item);
                return -1;
            }
            self->tensor_param[self->ntensors++] = (int)i;
            keylen += ndim;
        }
        Py_DECREF(item);
    }
    int64_t tmp[TL_MAX_PARAMS];
    int n = int_list(inputs, tmp, TL_MAX_PARAMS, "inputs");
    if (n < 0) return -1;
    self->ninputs = n;
    for (int j = 0; j < n; j++) self->input_param[j] = (int)tmp[j];
    n = int_list(outputs, tmp, TL_MAX_PARAMS, "outputs");
    if (n < 0) return -1;
    self->noutputs = n;
    for (int j = 0; j < n; j++) self->output_param[j] = (int)tmp[j];
    n = int_list(grid_scalars, tmp, TL_MAX_PARAMS, "grid scalars");
    if (n < 0) return -1;
    self->ngrid_scalars = n;
    for (int j = 0; j < n; j++) self->grid_scalar[j] = (int)tmp[j];
    self->key_pointers = key_pointers;
    self->can_allocate = can_allocate && self->noutputs > 0;
    keylen += (key_pointers ? self->ntensors : 0) + 1 + self->ngrid_scalars;
    if (keylen > TL_MAX_KEY) { PyErr_SetString(PyExc_ValueError, "plan key too long"); return -1; }
    self->keylen = keylen;
    self->launch = (tl_launch_fn)(uintptr_t)launch;
    Py_INCREF(miss_obj);
    Py_XDECREF(self->miss);
    self->miss = miss_obj;
    return 0;
}

static PyType_Slot Launcher_slots[] = {
    {Py_tp_doc, "One kernel's compiled launcher (tilec/runtime/fastlaunch.c)."},
    {Py_tp_init, Launcher_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_methods, Launcher_methods},
    {0, NULL},
};

static PyType_Spec Launcher_spec = {
    "tilec_fastlaunch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT, Launcher_slots,
};

/* ------------------------------------------------------------------ KernelBase: a call that enters C at once */

/* The base class fastlaunch.native_class() puts under tilec.runtime's Kernel: calling a kernel runs this type's
   tp_call directly -- the compiled launcher when one is attached and no keyword is passed, else (a miss, a first
   call, stream=, sync=) the Python class's own __call__, `_python_call` -- so a launch that hits costs no Python
   frame at all. */
typedef struct {
    PyObject_HEAD
    Launcher* launcher; /* NULL until the first call attaches one */
} KernelBase;

static PyObject* S_python_call;
static PyTypeObject* Launcher_type; /* the module's Launcher type (one module per process) */

static PyObject* KernelBase_call(KernelBase* self, PyObject* args, PyObject* kwargs) {
    if (self->launcher != NULL && (kwargs == NULL || PyDict_Size(kwargs) == 0)) {
        PyObject* r = Launcher_fast(self->launcher, args);
        if (r == NULL || r != self->launcher->miss) return r;
        Py_DECREF(r);
    }
    PyObject* call = PyObject_GetAttr((PyObject*)self, S_python_call);
    if (call == NULL) return NULL;
    PyObject* r = PyObject_Call(call, args, kwargs);
    Py_DECREF(call);
    return r;
}

/* _attach(launcher or None): the compiled launcher later calls go to */
static PyObject* KernelBase_attach(KernelBase* self, PyObject* launcher) {
    if (launcher != Py_None && (Launcher_type == NULL || !PyObject_TypeCheck(launcher, Launcher_type))) return PyErr_Format(PyExc_TypeError, "_attach(a Launcher or None)");
    Py_XINCREF(launcher == Py_None ? NULL : launcher);
    Launcher* old = self->launcher;
    self->launcher = launcher == Py_None ? NULL : (Launcher*)launcher;
    Py_XDECREF((PyObject*)old);
    Py_RETURN_NONE;
}

static void KernelBase_dealloc(KernelBase* self) {
    Py_CLEAR(self->launcher);
    PyTypeObject* tp = Py_TYPE((PyObject*)self);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static PyMethodDef KernelBase_methods[] = {
    {"_attach", (PyCFunction)KernelBase_attach, METH_O, "attach the compiled launcher calls go to (None: none)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot KernelBase_slots[] = {
    {Py_tp_doc, "A kernel whose calls enter C directly (tilec/runtime/fastlaunch.c)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, KernelBase_dealloc},
    {Py_tp_call, KernelBase_call},
    {Py_tp_methods, KernelBase_methods},
    {0, NULL},
};

static PyType_Spec KernelBase_spec = {
    "tilec_fastlaunch.KernelBase", sizeof(KernelBase), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, KernelBase_slots,
};

/* describe(obj): what the exchange table says of an array -- (device_type, device_id, (code, bits, lanes), shape,
   strides or None, pointer); None when its type has no table. For tests and for the expected dtypes. */
static PyObject* describe(PyObject* module, PyObject* obj) {
    (void)module;
    const tl_api* api = table_of(Py_TYPE(obj));
    if (api == NULL) Py_RETURN_NONE;
    tl_dltensor t;
    if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
    PyObject* shape = PyTuple_New(t.ndim);
    PyObject* strides = t.strides ? PyTuple_New(t.ndim) : (Py_INCREF(Py_None), Py_None);
    for (int d = 0; d < t.ndim; d++) {
        PyTuple_SetItem(shape, d, PyLong_FromLongLong(t.shape[d]));
        if (t.strides) PyTuple_SetItem(strides, d, PyLong_FromLongLong(t.strides[d]));
    }
    return Py_BuildValue("ii(iii)NNK", t.device.device_type, t.device.device_id, t.dtype.code, t.dtype.bits,
                         t.dtype.lanes, shape, strides,
                         (unsigned long long)(uintptr_t)((char*)t.data + t.byte_offset));
}

static PyObject* noop(PyObject* module, PyObject* obj) {
    (void)module;
    (void)obj;
    Py_RETURN_NONE;
}

/* hold(n): add n (1 or -1) to the Python-path calls now between the launches of a sequence on a kept workspace;
   while any is, plans bound to a stream miss. Returns the count. */
static PyObject* hold(PyObject* module, PyObject* delta) {
    (void)module;
    long d = PyLong_AsLong(delta);
    if (d == -1 && PyErr_Occurred()) return NULL;
    tl_held += d;
    return PyLong_FromLong(tl_held);
}

static PyMethodDef module_methods[] = {
    {"hold", hold, METH_O, "count a Python-path sequence on a kept workspace in (1) or out (-1)"},
    {"noop", noop, METH_O, "does nothing: the cost of calling a C function of one argument"},
    {"describe", describe, METH_O, "an array as its DLPack exchange table describes it"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject* m) {
    struct { PyObject** p; const char* s; } names[] = {
        {&S_cai, "__cuda_array_interface__"}, {&S_typestr, "typestr"}, {&S_shape, "shape"}, {&S_strides, "strides"},
        {&S_data, "data"}, {&S_dtype, "dtype"}, {&S_c_contiguous, "_c_contiguous"}, {&S_ptr, "ptr"},
        {&S_device_id, "device_id"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (*names[i].p == NULL && (*names[i].p = PyUnicode_InternFromString(names[i].s)) == NULL) return -1;
    if (S_python_call == NULL && (S_python_call = PyUnicode_InternFromString("_python_call")) == NULL) return -1;
    PyObject* kb = PyType_FromSpec(&KernelBase_spec);
    if (kb == NULL) return -1;
    if (PyModule_AddObject(m, "KernelBase", kb) < 0) { Py_DECREF(kb); return -1; }
    PyObject* tp = PyType_FromSpec(&Launcher_spec);
    if (tp == NULL) return -1;
    Launcher_type = (PyTypeObject*)tp;
    if (PyModule_AddObject(m, "Launcher", tp) < 0) { Py_DECREF(tp); return -1; }
    return PyModule_AddIntConstant(m, "ABI", 3);
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, module_exec}, {0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tilec_fastlaunch", "tilec's compiled kernel launcher", 0, module_methods, module_slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_tilec_fastlaunch(void) { return PyModuleDef_Init(&module_def); }
