// tilec CPU model: the ACL runtime entries that tilec's launcher header (`tilec k.tile --target ascend910b -o k.h`)
// calls, so that the header's NAME_launch functions run on the model as a user links them (model_run.py). Written
// for tilec from the calls the header makes; the values of the enumerators are the model's own. The definitions,
// and the NAME_do launch functions, live in the runner's kernel translation unit: every launch runs at once, in
// order, so a stream is only a name here.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int aclError;
typedef void* aclrtStream;
#define ACL_SUCCESS 0

typedef enum {
    ACL_DEV_ATTR_AICORE_CORE_NUM = 1,
    ACL_DEV_ATTR_CUBE_CORE_NUM = 2,
    ACL_DEV_ATTR_VECTOR_CORE_NUM = 3
} aclrtDevAttr;

aclError aclrtGetDevice(int32_t* deviceId);
aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t* value);

// The model's own entries for the runner's main(): the core count aclrtGetDeviceInfo answers, and a buffer of
// host memory registered as a global-memory tensor (bounds and race checks).
void tilec_model_set_cores(int64_t cores);
void tilec_model_gm_register(void* data, size_t bytes, const char* name);

#ifdef __cplusplus
}
#endif
