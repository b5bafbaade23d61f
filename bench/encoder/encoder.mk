# bench/encoder/encoder.mk — the packed C encoder baseline and ravel's side
# of the encoder benchmark (included by bench/Makefile.inc; `make -f
# bench/Makefile.inc bench-encoder`). Needs the OpenBLAS of bench/setup.sh;
# links timing.o and baselines.o (bl_init, bl_set_threads) of the other
# drivers and ravel's library (BENCH_RAVEL_LIB). -O3: the baseline's
# element-wise loops are written for the vectorizer.
.PHONY: bench-encoder

bench-encoder: $(BENCH_BUILD)/packed_encoder

$(BENCH_BUILD)/ravel_encoder.o: bench/encoder/ravel_encoder.c bench/encoder/ravel_encoder.h \
                                $(wildcard include/*.h)
	@mkdir -p $(BENCH_BUILD)
	$(BENCH_CC) $(BENCH_CFLAGS) -c $< -o $@

$(BENCH_BUILD)/packed_encoder: bench/encoder/packed_encoder.c bench/encoder/ravel_encoder.h \
                               $(BENCH_BUILD)/ravel_encoder.o $(BENCH_BUILD)/timing.o \
                               $(BENCH_BUILD)/baselines.o $(BENCH_HDRS) $(BENCH_RAVEL_LIB)
	@mkdir -p $(BENCH_BUILD)
	$(BENCH_CC) $(BENCH_CFLAGS) -O3 -rdynamic -o $@ $< $(BENCH_BUILD)/ravel_encoder.o \
	  $(BENCH_BUILD)/timing.o $(BENCH_BUILD)/baselines.o $(BENCH_LDLIBS)
