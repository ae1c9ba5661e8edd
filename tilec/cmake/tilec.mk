# tilec.mk -- a Make pattern rule for tilec, with automatic dependencies.
#
#   TILEC_SRC_DIR   := kernels          # where the .tile files are (default .)
#   TILEC_BUILD_DIR := build            # where the headers go (default build)
#   TILEC_TARGETS   := sm80,sm90        # GPU targets (default sm90)
#   include $(shell tilec --cmake-dir)/tilec.mk
#
#   app: main.cpp $(TILEC_BUILD_DIR)/gemm.h
#   $(TILEC_BUILD_DIR)/gemm.h: TILEC_FLAGS += -D block_M=64     # per-kernel options
#   app2: main2.o $(TILEC_BUILD_DIR)/gemm.o                      # or link the launcher as an object
#   	$(CXX) $^ -o $@ -lcuda -lpthread
#
# `$(TILEC_BUILD_DIR)/x.h` is made from `$(TILEC_SRC_DIR)/x.tile` (also .o, .cubin, .fatbin, .ptx, .cu); x.o
# is a relocatable object holding the C launcher and its cubins (tilec -c), whose C prototypes are in x.o.json.
# Each compile writes OUT.d (-MD) listing the .tile file and everything it imports, with an empty
# rule for each import (-MP, so deleting one does not break the build); the `-include` below reads
# them, so touching an imported file rebuilds exactly the outputs that import it. Set the
# variables before the include: Make expands rule targets when it reads them.

TILEC           ?= tilec
TILEC_SRC_DIR   ?= .
TILEC_BUILD_DIR ?= build
TILEC_TARGETS   ?= sm90
TILEC_FLAGS     ?=
TILEC_DEPFLAGS  ?= -MD -MP

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
