# Tool-call lists in canonical JSON text, split into each call's name and arguments (part of
# _compiled.pyx).
#
# Scoring has DuckDB write each AI message's data.tool_calls as JSON text (its writer writes a
# value one way only: minified, every string escaped the same way) and splits the lists here,
# reading each call as json_transform(..., '[{"name": "VARCHAR", "args": "JSON"}]') would,
# without DuckDB building a value per call:
#
# - a list's elements are its calls; text that is no list holds none;
# - a call's name is its first "name" member: a string's characters, any other value's text
#   (5, true), nothing when it is null or left out; an element that is no object is a call
#   without name or arguments;
# - its arguments are the text of its first "args" member, none when null or left out.
#
# A name string with escapes ("a\"b") is marked for its caller to read with DuckDB.

# how a call's name is written (tcbreplay._score.kernels.NAME_*)
cpdef enum:
    NAME_NONE, NAME_TEXT, NAME_ESCAPED, NAME_VALUE


cdef inline Py_ssize_t string_end(
    const uint8_t *data, Py_ssize_t p, Py_ssize_t end, bint *escaped
) noexcept nogil:
    """Past the string that opens at p (its closing quote included), eight bytes at a time
    while eight remain (a word's first quote or backslash is the lowest byte flagged: the bit
    trick's false flags only follow a true one); escaped[0] tells whether it has an escape."""
    cdef uint64_t word, hits
    escaped[0] = False
    p += 1
    while p + 8 <= end:
        word = load_u64(data + p)
        hits = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES)
        if hits == 0:
            p += 8
            continue
        p += lowest_flagged_byte(hits)
        if data[p] == QUOTE:
            return p + 1
        escaped[0] = True
        p += 2  # an escape: the backslash and the character it escapes
    while p < end:
        if data[p] == QUOTE:
            return p + 1
        if data[p] == BACKSLASH:
            escaped[0] = True
            p += 1
        p += 1
    return end


cdef inline Py_ssize_t skip_string_fast(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """Past the string that opens at p (its closing quote included): string_end."""
    cdef bint escaped
    return string_end(data, p, end, &escaped)


cdef inline bint is_null(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    return hi - lo == 4 and memcmp(data + lo, b"null", 4) == 0


cdef inline bint has_escape(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    return hi > lo and memchr(data + lo, BACKSLASH, hi - lo) != NULL


def split_calls(
    const int64_t[::1] offsets, const uint8_t[::1] data, int64_t[::1] row, int8_t[::1] name_kind,
    int64_t[::1] name_lo, int64_t[::1] name_hi, int64_t[::1] args_lo, int64_t[::1] args_hi,
):
    """Split the list texts data[offsets[k]:offsets[k + 1]]; for each call in order, write its
    text's row k, its name (name_kind, span name_lo:name_hi: the characters of a string
    without escapes, else the value's text) and its arguments' span args_lo:args_hi (-1:
    none). Returns how many calls there are, or -1 when the output arrays are too short."""
    cdef Py_ssize_t room = row.shape[0], n
    if min(name_kind.shape[0], name_lo.shape[0], name_hi.shape[0], args_lo.shape[0],
           args_hi.shape[0]) < room:
        raise ValueError("split_calls: the output arrays differ in length")
    with nogil:
        n = split_calls_at(
            &offsets[0], offsets.shape[0] - 1, &data[0], room, &row[0], &name_kind[0],
            &name_lo[0], &name_hi[0], &args_lo[0], &args_hi[0],
        )
    return n


cdef Py_ssize_t split_calls_at(
    const int64_t *offsets, Py_ssize_t texts, const uint8_t *data, Py_ssize_t room,
    int64_t *row, int8_t *name_kind, int64_t *name_lo, int64_t *name_hi,
    int64_t *args_lo, int64_t *args_hi,
) noexcept nogil:
    cdef Py_ssize_t n = 0, k, end, p, key_end, key_lo, key_hi, value_end
    cdef bint seen_name, seen_args
    for k in range(texts):
        end = offsets[k + 1]
        p = skip_space(data, offsets[k], end)
        if p >= end or data[p] != OPEN_LIST:
            continue
        p = skip_space(data, p + 1, end)
        if p < end and data[p] == CLOSE_LIST:
            continue
        while p < end:
            if n == room:
                return -1
            row[n] = k
            name_kind[n] = NAME_NONE
            name_lo[n] = 0
            name_hi[n] = 0
            args_lo[n] = -1
            args_hi[n] = -1
            if data[p] == OPEN_OBJECT:
                seen_name = False
                seen_args = False
                p = skip_space(data, p + 1, end)
                while p < end and data[p] == QUOTE:
                    key_end = skip_string_fast(data, p, end)
                    key_lo = p + 1
                    key_hi = key_end - 1
                    p = skip_space(data, key_end, end)
                    p = skip_space(data, p + 1, end)  # past the colon
                    if p >= end:  # a text cut short (DuckDB writes none): nothing past it
                        break
                    if data[p] == QUOTE:
                        value_end = skip_string_fast(data, p, end)
                    else:
                        value_end = skip_value(data, p, end)
                    if not seen_name and key_hi - key_lo == 4 and memcmp(data + key_lo, b"name", 4) == 0:
                        seen_name = True
                        if data[p] == QUOTE:
                            if has_escape(data, p + 1, value_end - 1):
                                name_kind[n] = NAME_ESCAPED
                                name_lo[n] = p
                                name_hi[n] = value_end
                            else:
                                name_kind[n] = NAME_TEXT
                                name_lo[n] = p + 1
                                # (a string cut short may have no closing quote)
                                name_hi[n] = max(value_end - 1, p + 1)
                        elif not is_null(data, p, value_end):
                            name_kind[n] = NAME_VALUE
                            name_lo[n] = p
                            name_hi[n] = value_end
                    elif not seen_args and key_hi - key_lo == 4 and memcmp(data + key_lo, b"args", 4) == 0:
                        seen_args = True
                        if not is_null(data, p, value_end):
                            args_lo[n] = p
                            args_hi[n] = value_end
                    p = skip_space(data, value_end, end)
                    if p < end and data[p] == COMMA:
                        p = skip_space(data, p + 1, end)
                p += 1  # past the object's closing brace
            else:
                p = skip_value(data, p, end)
            n += 1
            p = skip_space(data, p, end)
            if p < end and data[p] == COMMA:
                p = skip_space(data, p + 1, end)
            else:
                break
    return n


def kept_texts(
    const int64_t[::1] offsets, const uint8_t[::1] data, const uint8_t[::1] keep,
    int64_t[::1] out_offsets,
):
    """The texts data[offsets[k]:offsets[k+1]] whose keep[k] is nonzero, end to end, their
    starts written into out_offsets (one entry more than the texts kept). Each run of texts
    kept one after another is copied at once."""
    cdef Py_ssize_t k, first, j = 0, kept = 0, n = offsets.shape[0] - 1, at = 0, width
    cdef int64_t dropped
    if n < 0 or keep.shape[0] != n:
        raise ValueError("kept_texts: keep is not a flag per text")
    with nogil:
        for k in range(n):
            kept += keep[k] != 0
    if out_offsets.shape[0] < kept + 1:
        raise ValueError("kept_texts: out_offsets has no room for the texts kept")
    with nogil:
        dropped = offsets[0] if n >= 0 else 0  # the bytes before the text at hand not kept
        for k in range(n):
            if keep[k]:
                out_offsets[j] = offsets[k] - dropped
                j += 1
            else:
                dropped += offsets[k + 1] - offsets[k]
        out_offsets[j] = offsets[n] - dropped
    out = np.empty(max(out_offsets[j], 1), dtype=np.uint8)
    cdef uint8_t[::1] target = out
    with nogil:
        k = 0
        while k < n:
            if not keep[k]:
                k += 1
                continue
            first = k
            while k < n and keep[k]:
                k += 1
            width = offsets[k] - offsets[first]
            memcpy(&target[at], &data[offsets[first]], width)
            at += width
    return out


def same_as_previous(
    const int64_t[::1] offsets, const uint8_t[::1] data, const uint8_t[::1] valid,
    uint8_t[::1] out,
):
    """out[k] = text k+1 (data[offsets[k+1]:offsets[k+2]]) equals text k, both valid (a byte
    each, nonzero when valid): Arrow's equal(texts[1:], texts[:-1]), nulls as False."""
    cdef Py_ssize_t k, n = offsets.shape[0] - 1, a, b, width
    if n < 1 or valid.shape[0] < n or out.shape[0] < n - 1:
        if n >= 1:
            raise ValueError("same_as_previous: valid and out are too short")
        return
    with nogil:
        for k in range(n - 1):
            a, b = offsets[k], offsets[k + 1]
            width = b - a
            out[k] = (
                valid[k] != 0 and valid[k + 1] != 0 and offsets[k + 2] - b == width
                and (width == 0 or memcmp(&data[a], &data[b], width) == 0)
            )


def span_texts(
    const uint8_t[::1] data, const int64_t[::1] lo, const int64_t[::1] hi,
    const uint8_t[::1] fill, int64_t[::1] offsets,
):
    """The texts data[lo[k]:hi[k]] end to end (fill where lo[k] is -1), their starts written
    into offsets (one entry more than texts)."""
    cdef Py_ssize_t k, size = 0, n = lo.shape[0], width = fill.shape[0]
    if hi.shape[0] < n or offsets.shape[0] < n + 1:
        raise ValueError("span_texts: lo, hi and offsets differ in length")
    with nogil:
        for k in range(n):
            offsets[k] = size
            size += width if lo[k] < 0 else hi[k] - lo[k]
        offsets[n] = size
    out = np.empty(max(size, 1), dtype=np.uint8)
    cdef uint8_t[::1] target = out
    with nogil:
        for k in range(n):
            if lo[k] < 0:
                memcpy(&target[offsets[k]], &fill[0], width)
            else:
                memcpy(&target[offsets[k]], &data[lo[k]], hi[k] - lo[k])
    return out
