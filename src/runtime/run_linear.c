/*
 * run_linear.c — rv_program_run_linear: one call of a recursive model as a
 * server makes it (reset the pooled bindings to the weights, bind the
 * request's linearized batch, run, describe the outputs) in one call of
 * the library.
 *
 * It is rv_bindings_reset, rv_bindings_set_linear, rv_program_run and
 * rv_bindings_get_info per output, nothing more: a caller in C gains
 * nothing from it. A binding
 * through a foreign-function interface (the Python package's ctypes) pays
 * per call of the library about what a small model's whole call costs in
 * C (issue 13: TreeRNN at batch 1), so the steps of a call are one call.
 */
#include "runtime/program.h"

rv_status rv_program_run_linear(rv_program *p, rv_bindings *b, const rv_bindings *base,
                                const char *structure, const rv_linear *lin,
                                rv_array_info *outputs, int noutputs) {
    if (!p || (!outputs && noutputs))
        return base_error(RV_ERR_ARG, "rv_program_run_linear: no program or output infos");
    const Module *m = p->m;
    int n = 0;
    for (int i = 0; i < m->tensors.len; i++)
        n += ir_tensor_is_output(m, m->tensors.data[i]);
    if (n != noutputs)
        return base_error(RV_ERR_ARG, "rv_program_run_linear: %d output infos for %d outputs",
                          noutputs, n);
    rv_status st = base ? rv_bindings_reset(b, base) : RV_OK;
    if (st == RV_OK)
        st = rv_bindings_set_linear(b, structure, lin);
    if (st == RV_OK)
        st = rv_program_run(p, b);
    if (st != RV_OK)
        return st;
    int k = 0;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (!ir_tensor_is_output(m, t))
            continue;
        rv_array_info *o = &outputs[k++];
        if (!rv_bindings_get_info(b, rv_tensor_name(t), o))
            *o = (rv_array_info){.data = NULL, .ndim = -1};
    }
    return RV_OK;
}
