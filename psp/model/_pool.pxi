# The pooling loop, included by psp/model/_loops.pyx (built for any CPU of the platform) and by
# psp/model/_loops_avx2.pyx (built for AVX2): one source, two builds, the same bits (additions
# only, in the order written).


def pool(
    const float[:, ::1] table, const int32_t[::1] ids, const int64_t[::1] offsets,
    const int64_t[::1] textless, float[:, ::1] out, int64_t start, int64_t stop,
):
    """Sentences ``start:stop`` into ``out[start:stop]``: the mean of their rows, or zeros for a
    sentence whose pieces are all ``textless`` (two ids). Each sum is kept in its output row,
    four rows added per pass over it, in the order ``((s + a) + b) + c``: the bits of adding one
    row at a time."""
    cdef int64_t dim = table.shape[1], i, j, t, first, last, known
    cdef int64_t none0 = textless[0], none1 = textless[1]
    cdef float* total
    cdef const float* r0
    cdef const float* r1
    cdef const float* r2
    cdef const float* r3
    cdef float count
    with nogil:
        for i in range(start, stop):
            first, last = offsets[i], offsets[i + 1]
            total = &out[i, 0]
            known = 0
            for t in range(first, last):
                known += ids[t] != none0 and ids[t] != none1
            if known == 0:
                memset(total, 0, dim * sizeof(float))
                continue
            r0 = &table[ids[first], 0]
            for j in range(dim):
                total[j] = <float>0 + r0[j]
            t = first + 1
            while t + 4 <= last:
                r0 = &table[ids[t], 0]
                r1 = &table[ids[t + 1], 0]
                r2 = &table[ids[t + 2], 0]
                r3 = &table[ids[t + 3], 0]
                for j in range(dim):
                    total[j] = (((total[j] + r0[j]) + r1[j]) + r2[j]) + r3[j]
                t += 4
            while t < last:
                r0 = &table[ids[t], 0]
                for j in range(dim):
                    total[j] += r0[j]
                t += 1
            count = <float>(last - first)
            for j in range(dim):
                total[j] = total[j] / count
