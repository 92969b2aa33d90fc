# The dashboard file's samples as JSON text (part of _compiled.pyx).
#
# Each listed sample becomes one object, {"input": ..., "output": {"tool_call_names": [...],
# "tool_call_args": [...]}, "target": {...}}, minified, the samples joined by a comma, a
# newline and a tab. Inputs and names are written as JSON strings the way Python's
# json.dumps(..., ensure_ascii=False) writes them (a quote, a backslash and the control
# characters escaped, every other character as its UTF-8 bytes); argument texts are canonical
# JSON already and are copied as they are.

cdef enum:
    SPACE = 32

# the pieces between the values of a sample, and between samples
cdef const char *HEX = b"0123456789abcdef"
cdef const char *INPUT = b'{"input":'
cdef const char *OUTPUT = b',"output":{"tool_call_names":['
cdef const char *ARGS = b'],"tool_call_args":['
cdef const char *TARGET = b']},"target":{"tool_call_names":['
cdef const char *END = b"]}}"
cdef const char *NULL_TEXT = b"null"
cdef const char *BETWEEN = b",\n\t"


cdef inline uint8_t short_escape(uint8_t b) noexcept nogil:
    """The letter of a control character's two-byte escape (\\n), or 0 if it has none."""
    if b == 8:
        return 98  # b
    if b == 9:
        return 116  # t
    if b == 10:
        return 110  # n
    if b == 12:
        return 102  # f
    if b == 13:
        return 114  # r
    return 0


cdef inline bint plain(uint64_t word) noexcept nogil:
    """Whether none of the 8 bytes of word is escaped in a JSON string (a quote, a
    backslash, a control character)."""
    return (zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES) | control_bytes(word)) == 0


cdef inline Py_ssize_t extra(uint8_t b) noexcept nogil:
    """The bytes the escape of b adds."""
    if b == QUOTE or b == BACKSLASH:
        return 1
    if b < SPACE:
        return 1 if short_escape(b) else 5
    return 0


cdef inline Py_ssize_t string_width(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """The bytes of data[lo:hi] written as a JSON string, quotes included; eight bytes at a
    time while eight remain."""
    cdef Py_ssize_t width = hi - lo + 2, p = lo, q
    while p < hi:
        if p + 8 <= hi and plain(load_u64(data + p)):
            p += 8
            continue
        for q in range(p, min(p + 8, hi)):
            width += extra(data[q])
        p += 8
    return width


cdef inline Py_ssize_t put_escaped(uint8_t *out, Py_ssize_t o, uint8_t b) noexcept nogil:
    """Write byte b of a string's text at out[o], escaped if it needs to be."""
    if b >= SPACE and b != QUOTE and b != BACKSLASH:
        out[o] = b
        return o + 1
    out[o] = BACKSLASH
    if b >= SPACE:
        out[o + 1] = b
        return o + 2
    if short_escape(b):
        out[o + 1] = short_escape(b)
        return o + 2
    memcpy(out + o + 1, b"u00", 3)
    out[o + 4] = HEX[b >> 4]
    out[o + 5] = HEX[b & 15]
    return o + 6


cdef inline Py_ssize_t put_string(
    uint8_t *out, Py_ssize_t o, const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi
) noexcept nogil:
    """Write data[lo:hi] at out[o] as a JSON string; returns the end. Words without a byte to
    escape are copied whole (inside the string's own bytes of out)."""
    cdef Py_ssize_t p = lo, q
    cdef uint64_t word
    out[o] = QUOTE
    o += 1
    while p < hi:
        if p + 8 <= hi:
            word = load_u64(data + p)
            if plain(word):
                store_u64(out + o, word)
                o += 8
                p += 8
                continue
        for q in range(p, min(p + 8, hi)):
            o = put_escaped(out, o, data[q])
        p += 8
    out[o] = QUOTE
    return o + 1


cdef inline Py_ssize_t put(uint8_t *out, Py_ssize_t o, const char *piece) noexcept nogil:
    cdef size_t size = strlen(piece)
    memcpy(out + o, piece, size)
    return o + size


cdef inline Py_ssize_t calls_width(
    Py_ssize_t s, const int64_t *first, const int64_t *name_offsets, const uint8_t *names,
    const int64_t *args_offsets,
) noexcept nogil:
    """The bytes of sample s's names and arguments lists, without their brackets."""
    cdef Py_ssize_t width = 0, c, lo = first[s], hi = first[s + 1]
    for c in range(lo, hi):
        width += string_width(names, name_offsets[c], name_offsets[c + 1])
        width += args_offsets[c + 1] - args_offsets[c]
    if hi > lo:
        width += 2 * (hi - lo - 1)  # the commas
    return width


cdef inline Py_ssize_t put_calls(
    uint8_t *out, Py_ssize_t o, Py_ssize_t s, const int64_t *first, const int64_t *name_offsets,
    const uint8_t *names, const int64_t *args_offsets, const uint8_t *args,
) noexcept nogil:
    """Write sample s's names list, the piece between, and its arguments list."""
    cdef Py_ssize_t c, lo = first[s], hi = first[s + 1], size
    for c in range(lo, hi):
        if c > lo:
            out[o] = COMMA
            o += 1
        o = put_string(out, o, names, name_offsets[c], name_offsets[c + 1])
    o = put(out, o, ARGS)
    for c in range(lo, hi):
        if c > lo:
            out[o] = COMMA
            o += 1
        size = args_offsets[c + 1] - args_offsets[c]
        memcpy(out + o, args + args_offsets[c], size)
        o += size
    return o


def dashboard_samples(
    const int64_t[::1] listed, const int64_t[::1] input_rows, const int64_t[::1] input_offsets,
    const uint8_t[::1] inputs, const cbool[::1] has_input,
    const int64_t[::1] a_first, const int64_t[::1] a_name_offsets, const uint8_t[::1] a_names,
    const int64_t[::1] a_args_offsets, const uint8_t[::1] a_args,
    const int64_t[::1] g_first, const int64_t[::1] g_name_offsets, const uint8_t[::1] g_names,
    const int64_t[::1] g_args_offsets, const uint8_t[::1] g_args, uint8_t[::1] out,
):
    """The samples listed (positions in a range of samples, ascending) as dashboard JSON
    text, joined by ",\\n\\t", written into out: returns the size, or minus the size needed
    when out is too small (then nothing is written). The input of listed[k] is text
    input_rows[k] of input_offsets and inputs (null where has_input is false); each side's
    calls are flat in sample and call order, sample s's calls first[s]:first[s + 1], with
    name and argument texts."""
    cdef Py_ssize_t k, s, row, o = 0, size = 0
    cdef Py_ssize_t fixed = (
        strlen(INPUT) + strlen(OUTPUT) + 2 * strlen(ARGS) + strlen(TARGET) + strlen(END)
        + strlen(BETWEEN)
    )
    if input_rows.shape[0] < listed.shape[0]:
        raise ValueError("dashboard_samples: fewer input rows than listed samples")
    with nogil:
        for k in range(listed.shape[0]):
            s = listed[k]
            size += fixed
            row = input_rows[k]
            if has_input[row]:
                size += string_width(&inputs[0], input_offsets[row], input_offsets[row + 1])
            else:
                size += strlen(NULL_TEXT)
            size += calls_width(s, &a_first[0], &a_name_offsets[0], &a_names[0], &a_args_offsets[0])
            size += calls_width(s, &g_first[0], &g_name_offsets[0], &g_names[0], &g_args_offsets[0])
        if size:
            size -= strlen(BETWEEN)  # none after the last sample
        if size <= out.shape[0]:
            for k in range(listed.shape[0]):
                s = listed[k]
                if k:
                    o = put(&out[0], o, BETWEEN)
                o = put(&out[0], o, INPUT)
                row = input_rows[k]
                if has_input[row]:
                    o = put_string(&out[0], o, &inputs[0], input_offsets[row], input_offsets[row + 1])
                else:
                    o = put(&out[0], o, NULL_TEXT)
                o = put(&out[0], o, OUTPUT)
                o = put_calls(&out[0], o, s, &a_first[0], &a_name_offsets[0], &a_names[0],
                              &a_args_offsets[0], &a_args[0])
                o = put(&out[0], o, TARGET)
                o = put_calls(&out[0], o, s, &g_first[0], &g_name_offsets[0], &g_names[0],
                              &g_args_offsets[0], &g_args[0])
                o = put(&out[0], o, END)
    return size if size <= out.shape[0] else -size
