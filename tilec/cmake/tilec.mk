# tilec.mk -- a Make pattern rule for tilec, with automatic dependencies.
#
#   TILEC_SRC_DIR   := kernels          # where the .tile files are (default .)
#   TILEC_BUILD_DIR := build            # where the headers go (default build)
#   TILEC_TARGETS   := sm80,sm90        # GPU targets (default sm90)
#   include $(shell tilec --cmake-dir)/tilec.mk
#
#   app: main.cpp $(TILEC_BUILD_DIR)/gemm.h
#   $(TILEC_BUILD_DIR)/gemm.h: TILEC_FLAGS += -D block_M=64     # per-kernel options
#   app2: main2.o $(TILEC_BUILD_DIR)/gemm.o | $(TILEC_CUDA_STUB)  # or link the launcher as an object
#   	$(CXX) $(TILEC_CUDA_CPPFLAGS) $^ -o $@ $(TILEC_CUDA_LDLIBS) -lpthread
#
# `$(TILEC_BUILD_DIR)/x.h` is made from `$(TILEC_SRC_DIR)/x.tile` (also .o, .cubin, .fatbin, .ptx, .cu); x.o
# is a relocatable object holding the C launcher and its cubins (tilec -c), whose C prototypes are in x.o.json.
# Each compile writes OUT.d (-MD) listing the .tile file and everything it imports, with an empty
# rule for each import (-MP, so deleting one does not break the build); the `-include` below reads
# them, so touching an imported file rebuilds exactly the outputs that import it. Set the
# variables before the include: Make expands rule targets when it reads them.
#
# The CUDA driver to compile and link the program against: TILEC_CUDA_CPPFLAGS (-I for cuda.h) and
# TILEC_CUDA_LDLIBS (-lcuda) name CUDA_HOME's cuda.h and the libcuda.so the linker finds (or CUDA_LIBDIR's);
# on a machine without a GPU driver or a CUDA toolkit they name the folder `tilec --cuda-stub` writes,
# $(TILEC_CUDA_STUB_DIR), whose stub libcuda.so loads the real driver at run time. Make the program depend
# (order-only) on $(TILEC_CUDA_STUB), empty when no stub is needed.

TILEC           ?= tilec
TILEC_SRC_DIR   ?= .
TILEC_BUILD_DIR ?= build
TILEC_TARGETS   ?= sm90
TILEC_FLAGS     ?=
TILEC_DEPFLAGS  ?= -MD -MP
CUDA_HOME       ?= /usr/local/cuda
TILEC_CUDA_STUB_DIR ?= $(TILEC_BUILD_DIR)/cuda-stub

TILEC_CUDA_STUB :=
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
TILEC_CUDA_CPPFLAGS := -I$(CUDA_HOME)/include
else
TILEC_CUDA_CPPFLAGS := -I$(TILEC_CUDA_STUB_DIR)
TILEC_CUDA_STUB := $(TILEC_CUDA_STUB_DIR)/libcuda.so
endif
ifneq ($(and $(CUDA_LIBDIR),$(wildcard $(CUDA_LIBDIR)/libcuda.so)),)
TILEC_CUDA_LDLIBS := -L$(CUDA_LIBDIR) -lcuda
else ifneq ($(findstring /,$(shell $(CC) -print-file-name=libcuda.so)),)
TILEC_CUDA_LDLIBS := -lcuda
else
TILEC_CUDA_LDLIBS := -L$(TILEC_CUDA_STUB_DIR) -lcuda
TILEC_CUDA_STUB := $(TILEC_CUDA_STUB_DIR)/libcuda.so
endif

# (not the includer's default goal: .DEFAULT_GOAL is put back, empty when the includer has named no target yet)
_tilec_goal := $(.DEFAULT_GOAL)
$(TILEC_CUDA_STUB_DIR)/libcuda.so:
	$(TILEC) --cuda-stub $(@D) >/dev/null
.DEFAULT_GOAL := $(_tilec_goal)

$(TILEC_BUILD_DIR)/%.h: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

$(TILEC_BUILD_DIR)/%.o: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

$(TILEC_BUILD_DIR)/%.cubin: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

$(TILEC_BUILD_DIR)/%.fatbin: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

$(TILEC_BUILD_DIR)/%.ptx: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

$(TILEC_BUILD_DIR)/%.cu: $(TILEC_SRC_DIR)/%.tile
	@mkdir -p $(@D)
	$(TILEC) $< -o $@ --target $(TILEC_TARGETS) $(TILEC_FLAGS) $(TILEC_DEPFLAGS)

-include $(wildcard $(TILEC_BUILD_DIR)/*.d)
