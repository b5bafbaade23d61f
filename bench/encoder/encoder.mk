# bench/encoder/encoder.mk — the packed C encoder baseline (included by
# bench/Makefile.inc; `make -f bench/Makefile.inc bench-encoder`). Needs the
# OpenBLAS of bench/setup.sh; links timing.o and baselines.o (bl_init,
# bl_set_threads) of the other drivers. -O3: its element-wise loops are
# written for the vectorizer.
.PHONY: bench-encoder

bench-encoder: $(BENCH_BUILD)/packed_encoder

$(BENCH_BUILD)/packed_encoder: bench/encoder/packed_encoder.c $(BENCH_BUILD)/timing.o \
                               $(BENCH_BUILD)/baselines.o $(BENCH_HDRS)
	@mkdir -p $(BENCH_BUILD)
	$(BENCH_CC) $(BENCH_CFLAGS) -O3 -o $@ $< $(BENCH_BUILD)/timing.o $(BENCH_BUILD)/baselines.o \
	  -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -ldnnl -lm -lpthread
