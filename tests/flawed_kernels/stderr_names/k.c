/* Flaw (round 4, the C path): writes host-looking text to stderr on every call (a fake
 * AddressSanitizer report whose frames name the host, a MAC address, a launcher path),
 * then crashes on single-column outputs (N == 1). The text is decoded at run time, as text
 * read from the host would be (no literal for the library audit to see). The rows fail for
 * the crash, and none of its words reaches the report: stderr is summarised (length,
 * digest), frames by count and digest, locations only inside the kernel's own sources. */
#include <stdint.h>
#include <stdio.h>
static const unsigned char SECRET[] = {
    22, 31, 27, 17, 23, 27, 8, 17, 122, 50, 53, 41, 46, 122, 62, 56,
    106, 107, 116, 51, 52, 46, 63, 40, 52, 59, 54, 122, 55, 59, 57, 122,
    106, 106, 96, 107, 107, 96, 104, 104, 96, 105, 105, 96, 110, 110, 96, 111,
    111, 122, 117, 50, 53, 55, 63, 117, 22, 31, 27, 17, 23, 27, 8, 17,
    117, 116, 44, 63, 52, 44, 80, 31, 8, 8, 21, 8, 96, 122, 27, 62,
    62, 40, 63, 41, 41, 9, 59, 52, 51, 46, 51, 32, 63, 40, 96, 122,
    50, 63, 59, 42, 119, 56, 47, 60, 60, 63, 40, 119, 53, 44, 63, 40,
    60, 54, 53, 45, 122, 22, 31, 27, 17, 23, 27, 8, 17, 80, 13, 8,
    19, 14, 31, 122, 53, 60, 122, 41, 51, 32, 63, 122, 110, 122, 59, 46,
    122, 22, 31, 27, 17, 23, 27, 8, 17, 80, 122, 122, 122, 122, 121, 106,
    122, 106, 34, 110, 60, 107, 59, 122, 51, 52, 122, 22, 31, 27, 17, 23,
    27, 8, 17, 5, 62, 56, 106, 107, 5, 106, 106, 107, 107, 104, 104, 105,
    105, 110, 110, 111, 111, 122, 117, 50, 53, 55, 63, 117, 22, 31, 27, 17,
    23, 27, 8, 17, 117, 54, 59, 47, 52, 57, 50, 63, 40, 116, 42, 35,
    96, 105, 80, 117, 41, 40, 44, 117, 22, 31, 27, 17, 23, 27, 8, 17,
    117, 49, 116, 57, 96, 109, 96, 105, 96, 122, 40, 47, 52, 46, 51, 55,
    63, 122, 63, 40, 40, 53, 40, 96, 122, 22, 31, 27, 17, 23, 27, 8,
    17, 122, 125, 62, 56, 106, 107, 125, 122, 53, 44, 63, 40, 60, 54, 53,
    45, 80, 57, 59, 52, 52, 53, 46, 122, 54, 53, 59, 62, 122, 46, 50,
    63, 122, 49, 63, 40, 52, 63, 54, 122, 54, 51, 56, 40, 59, 40, 35,
    96, 122, 22, 31, 27, 17, 23, 27, 8, 17, 122, 62, 56, 106, 107, 80,
};
void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    char text[sizeof SECRET + 1];
    for (size_t i = 0; i < sizeof SECRET; i++) text[i] = (char)(SECRET[i] ^ 0x5A);
    text[sizeof SECRET] = 0;
    fputs(text, stderr);
    fflush(stderr);
    float *volatile out = (N == 1) ? (float *)0 : C;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
            out[i * N + j] = (float)s;
        }
}
