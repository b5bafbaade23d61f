# make.py — writes the .npy inputs of tests/regress/*.rv (run-error cases);
# plain Python, no NumPy. Run from this folder.
import struct, sys
def save(path, vals, code='<i8'):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (code, len(vals))
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + ' ' * pad + '\n'
    fmt = {'<i8': 'q', '<i4': 'i', '<f4': 'f'}[code]
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(vals), fmt), *vals))
save('idx_past_end.npy', [0, 1, 50, 3])          # N = 4, X : f32[N]
save('idx_outside_range.npy', [0, 1, 99, 3])     # declared 0..N - 1
save('off_past_data.npy', [0, 2, 3, 9])          # S = 3, E = 4: segment 2 reads V[3..8]
save('len_too_long.npy', [2, 9, 1])              # len in 1..8
save('len2_longer.npy', [2, 3, 1])               # rows of 2, 2, 2 read as 2, 3, 1
save('len_rows.npy', [2, 2, 2])
save('divisor_zero.npy', [3, 0, 1, 2], '<i4')
save('divisor_zero_last_tile.npy', [1, 2, 3, 4, 0], '<i4')  # N = 5 split by 4
save('int64_min.npy', [5, -9223372036854775808, 7, 1])
save('minus_one.npy', [1, -1, 1, 1])
