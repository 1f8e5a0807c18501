# memra build. `make` builds build/memra (with the CUDA backend when nvcc is
# found), `make test` runs every test (plain build, then ASan+UBSan) and ends
# with "N passed, N failed". `make help` lists the rest.

CC      ?= gcc
CLANG   ?= clang
CUDA    ?= /usr/local/cuda
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA)/bin/nvcc && echo $(CUDA)/bin/nvcc; })
# sm_90a enables the Hopper fast paths; any sm_80+ arch builds the generic code.
CUDA_ARCH ?= sm_90a
BUILD   ?= build
SAN     ?= 0
NOCUDA  ?= 0
# TIMELINE=1: the kernel timeline diagnostic (`memra bench --timeline`; common.cuh)
TIMELINE ?= 0

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter -Wno-format-truncation
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -Isrc -MMD -MP
LDLIBS  := -lpcre2-8 -lutf8proc -ljansson -lpthread -lm
# DEPS=DIR: headers in DIR/include and static libraries in DIR/lib, for a
# machine without the -dev packages (the GPU machine: see bench/run_gpu.sh).
DEPS    ?=
ifneq ($(DEPS),)
  CFLAGS += -I$(DEPS)/include
  LDLIBS := $(DEPS)/lib/libpcre2-8.a $(DEPS)/lib/libutf8proc.a $(DEPS)/lib/libjansson.a -lpthread -lm
endif

ifeq ($(SAN),1)
  override BUILD := $(BUILD)-san
  CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
  NOCUDA  := 1
endif

LIB_SRC  := $(shell find src -name '*.c' ! -name 'cuda_none.c' | sort)
CLI_SRC  := $(sort $(wildcard cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
CU_SRC   := $(sort $(wildcard src/backend/cuda/*.cu))

# no nvcc, or no CUDA sources yet: build the stub instead
ifeq ($(NVCC),)
  NOCUDA := 1
endif
ifeq ($(CU_SRC),)
  NOCUDA := 1
endif
ifeq ($(NOCUDA),1)
  LIB_SRC += src/backend/cuda_none.c
  CU_OBJ  :=
else
  # -gencode, not -arch=sm_90a: the shorthand can also run a plain sm_90 pass
  # that rejects sm_90a-only instructions (HOPPER.md). sm_90a -> compute_90a/sm_90a.
  CUDA_SM := $(patsubst sm_%,%,$(CUDA_ARCH))
  NVFLAGS := -O3 -g -std=c++17 -gencode=arch=compute_$(CUDA_SM),code=sm_$(CUDA_SM) -Xcompiler -fPIC,-Wall,-Wextra,-Werror,-Wno-unused-parameter \
             -Werror all-warnings -Iinclude -Isrc -MMD -MP --expt-relaxed-constexpr
  ifeq ($(TIMELINE),1)
    NVFLAGS += -DMEMRA_TIMELINE=1
  endif
  CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
  LDLIBS  += -L$(CUDA)/lib64 -lcudart_static -ldl -lrt -lstdc++
  CFLAGS  += -DMEMRA_CUDA=1
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-plain test-san fuzz bench clean help
all: $(BUILD)/memra

$(BUILD)/libmemra.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/memra: $(CLI_OBJ) $(BUILD)/libmemra.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libmemra.a $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c tests/test.h $(BUILD)/libmemra.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(BUILD)/libmemra.a $(LDLIBS)

# Bridge program for the Python quant cross-check (tests/py/test_quant_gguf.py).
$(BUILD)/tests/dequant_tool: tests/tools/dequant_tool.c $(BUILD)/libmemra.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmemra.a $(LDLIBS)

tests-bin: $(TEST_BIN) $(BUILD)/memra $(BUILD)/tests/dequant_tool

# The README's test command. Runs the plain build, then the ASan+UBSan build,
# then the Python cross-checks against the reference packages.
test:
	$(MAKE) tests-bin
	$(MAKE) SAN=1 tests-bin
	@bash tests/run.sh build build-san

# libFuzzer target over the GGUF reader, bounded in time (FUZZ_SECONDS).
FUZZ_SECONDS ?= 60
fuzz:
	@mkdir -p build-fuzz
	$(CLANG) -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
	    -o build-fuzz/fuzz_gguf tests/fuzz/fuzz_gguf.c src/gguf/gguf.c src/gguf/quant.c src/base/status.c -lm
	bash tests/fuzz/run.sh build-fuzz/fuzz_gguf $(FUZZ_SECONDS)

clean:
	rm -rf build build-san build-fuzz

help:
	@echo "make            build build/memra (CUDA backend when nvcc is found; NOCUDA=1 to skip)"
	@echo "make test       all tests, plain and ASan+UBSan; ends with 'N passed, N failed'"
	@echo "make fuzz       libFuzzer over the GGUF reader for FUZZ_SECONDS"
	@echo "CUDA_ARCH=sm_80 generic CUDA build for Ampere and newer (default sm_90a)"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
