/* Flaw: traps on every call, so no call ever completes: the rows that judge the calls
   made (inputs, poison, guards, escape) have nothing to judge. */
#include <stdint.h>
void sr(const float *X, float *Y, int64_t R, int64_t C) {
    (void)X; (void)Y; (void)R; (void)C;
    __builtin_trap();
}
