# Gold call lists as the store holds them, read as json_transform reads them (part of
# _compiled.pyx).
#
# A sample's gold calls are JSON text from any writer (Python's json.dumps puts a space after
# each "," and ":"). Scoring reads them as
#   json_transform(gold, '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON",
#                           "optional": "JSON", "group": "JSON", "compare": "JSON",
#                           "side": "VARCHAR"}]')
# would, at a fraction of its cost: read_gold splits each list into its calls and each call
# into the first occurrence of each of those members (GOLD_KEYS), as split_calls does
# (calls.pxi), and writes each member's value:
#
# - a JSON member (args and the rules) as DuckDB's JSON writer writes it (minified, every
#   string escaped one way: see jsontext.pxi): the text without the whitespace between its
#   tokens, each string's escapes written as that writer writes them (string_copy: \/ as /,
#   \u00e9 as the character, \u000a as \n);
# - a name or side (read as text): a string's characters when it has no escapes, else the
#   value's text, of kind NAME_ESCAPED or NAME_VALUE (calls.pxi), for the caller to read
#   with DuckDB.
#
# A text is read only when it is JSON (checked here, token by token) that DuckDB writes as
# above; any other is flagged slow, for DuckDB to write (json(), which fails on text that is
# no JSON) and read_gold to read again as written (canonical): a number DuckDB may write
# otherwise (see plain_number_end), a word other than true, false and null (NaN), a comma
# before a closing bracket (DuckDB drops it), a lone surrogate escape, a control character
# in a string, a call's member name with an escape, lists and objects nested deeper than 64,
# or anything else that is not JSON.

# the members of a gold call, as read_gold numbers them
GOLD_KEYS = ("name", "args", "accept", "optional", "group", "compare", "side")
cdef enum:
    GOLD_SIDE = 6
    MAX_DEPTH = 64
# what scan_value expects next
cdef enum:
    W_VALUE, W_VALUE_OR_CLOSE, W_KEY, W_KEY_OR_CLOSE, W_COLON, W_NEXT


cdef inline int key_index(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Which member of GOLD_KEYS the key data[lo:hi] (without quotes) names, -1 for none."""
    cdef uint32_t word
    cdef Py_ssize_t n = hi - lo
    if n == 4:
        memcpy(&word, data + lo, 4)  # (one load: the first byte the lowest)
        if word == 0x656D616E:  # name
            return 0
        if word == 0x73677261:  # args
            return 1
        if word == 0x65646973:  # side
            return GOLD_SIDE
        return -1
    if n == 6 and memcmp(data + lo, b"accept", 6) == 0:
        return 2
    if n == 8 and memcmp(data + lo, b"optional", 8) == 0:
        return 3
    if n == 5 and memcmp(data + lo, b"group", 5) == 0:
        return 4
    if n == 7 and memcmp(data + lo, b"compare", 7) == 0:
        return 5
    return -1


cdef inline Py_ssize_t value_end_at(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """Past the value that starts at p, as skip_value (jsontext.pxi), strings skipped eight
    bytes at a time (a text DuckDB wrote)."""
    cdef uint8_t c = data[p]
    cdef Py_ssize_t depth = 0
    cdef bint escaped
    if c == QUOTE:
        return string_end(data, p, end, &escaped)
    if c != OPEN_OBJECT and c != OPEN_LIST:
        return skip_value(data, p, end)
    while p < end:
        c = data[p]
        if c == QUOTE:
            p = string_end(data, p, end, &escaped)
            continue
        if c == OPEN_OBJECT or c == OPEN_LIST:
            depth += 1
        elif c == CLOSE_OBJECT or c == CLOSE_LIST:
            depth -= 1
            if depth == 0:
                return p + 1
        p += 1
    return end


cdef inline void copy_bytes(
    uint8_t *out, const uint8_t *source, Py_ssize_t n, const uint8_t *source_end
) noexcept nogil:
    """Copy n bytes; up to 16 as two words when 16 can be read (out has 16 bytes to spare:
    read_gold), without a call."""
    if n <= 16 and source + 16 <= source_end:
        store_u64(out, load_u64(source))
        store_u64(out + 8, load_u64(source + 8))
    else:
        memcpy(out, source, n)


cdef inline bint is_digit(uint8_t c) noexcept nogil:
    return ZERO <= c <= NINE


cdef inline bint ends_token(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    return p >= end or is_space(data[p]) or data[p] == COMMA or data[p] == CLOSE_LIST \
        or data[p] == CLOSE_OBJECT


cdef inline Py_ssize_t plain_number_end(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """Past the number at p when DuckDB writes it as it is written, else -1. That holds for an
    integer of up to 18 digits other than -0, and for a number with a fraction and no
    exponent, of 1e-4 <= |x| < 1e15, whose digits are at most 15 (any such text is the
    shortest that reads back as its double, which DuckDB writes) and whose fraction ends in
    a digit other than 0 or is ".0" (DuckDB writes 2.50 as 2.5, 2.0 as 2.0)."""
    cdef Py_ssize_t start, whole, frac_lo, frac_hi, zeros
    cdef bint negative = data[p] == MINUS
    if negative:
        p += 1
    start = p
    while p < end and is_digit(data[p]):
        p += 1
    whole = p - start
    if whole == 0 or (whole > 1 and data[start] == ZERO):
        return -1
    if p < end and data[p] == 46:  # "."
        p += 1
        frac_lo = p
        while p < end and is_digit(data[p]):
            p += 1
        frac_hi = p
        if frac_hi == frac_lo or not ends_token(data, p, end):  # an exponent, or no JSON
            return -1
        if frac_hi - frac_lo == 1 and data[frac_lo] == ZERO:  # x.0
            return p if whole <= 15 else -1
        if data[frac_hi - 1] == ZERO:
            return -1
        if data[start] != ZERO:
            return p if whole + (frac_hi - frac_lo) <= 15 else -1
        zeros = 0
        while data[frac_lo + zeros] == ZERO:
            zeros += 1
        return p if zeros <= 3 and frac_hi - frac_lo - zeros <= 15 else -1
    if not ends_token(data, p, end) or whole > 18 or (negative and data[start] == ZERO):
        return -1
    return p


cdef inline bint is_word(const uint8_t *data, Py_ssize_t p, Py_ssize_t end, const char *word, Py_ssize_t n) noexcept nogil:
    return p + n <= end and memcmp(data + p, word, n) == 0 and ends_token(data, p + n, end)


cdef inline Py_ssize_t string_token(
    const uint8_t *data, Py_ssize_t p, Py_ssize_t end
) noexcept nogil:
    """Past the string that opens at p when it has no escape or control character, else -1."""
    cdef uint64_t word, hits
    p += 1
    while True:  # to the closing quote, eight bytes at a time while eight remain
        if p + 8 <= end:
            word = load_u64(data + p)
            hits = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES) \
                | control_bytes(word)
            if hits == 0:
                p += 8
                continue
            p += lowest_flagged_byte(hits)
        elif p >= end:
            return -1
        elif data[p] != QUOTE and data[p] != BACKSLASH and data[p] >= 32:
            p += 1
            continue
        return p + 1 if data[p] == QUOTE else -1


cdef inline int hex_digit(uint8_t c) noexcept nogil:
    if ZERO <= c <= NINE:
        return c - ZERO
    if 97 <= c <= 102:  # a-f
        return c - 87
    if 65 <= c <= 70:  # A-F
        return c - 55
    return -1


cdef inline int code_unit(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """The UTF-16 code unit of the four hex digits at p, -1 when there are none."""
    cdef int k, value = 0, digit
    if p + 4 > end:
        return -1
    for k in range(4):
        digit = hex_digit(data[p + k])
        if digit < 0:
            return -1
        value = (value << 4) | digit
    return value


cdef const char *HEX_DIGITS = b"0123456789ABCDEF"


cdef inline Py_ssize_t put_code_point(uint8_t *out, int cp) noexcept nogil:
    r"""Write the character cp as DuckDB's writer writes it in a string (unless out is NULL):
    a quote, a backslash and the control characters escaped (short escapes where JSON has
    them, else \u00XX), the others in UTF-8; return how many bytes."""
    cdef int short = 0
    if cp == QUOTE or cp == BACKSLASH:
        short = cp
    elif cp < 32:
        short = 98 if cp == 8 else 116 if cp == 9 else 110 if cp == 10 else 102 if cp == 12 \
            else 114 if cp == 13 else 0  # b t n f r
        if short == 0:
            if out != NULL:
                memcpy(out, b"\\u00", 4)
                out[4] = HEX_DIGITS[cp >> 4]
                out[5] = HEX_DIGITS[cp & 15]
            return 6
    if short:
        if out != NULL:
            out[0] = BACKSLASH
            out[1] = short
        return 2
    if cp < 0x80:
        if out != NULL:
            out[0] = cp
        return 1
    if cp < 0x800:
        if out != NULL:
            out[0] = 0xC0 | (cp >> 6)
            out[1] = 0x80 | (cp & 0x3F)
        return 2
    if cp < 0x10000:
        if out != NULL:
            out[0] = 0xE0 | (cp >> 12)
            out[1] = 0x80 | ((cp >> 6) & 0x3F)
            out[2] = 0x80 | (cp & 0x3F)
        return 3
    if out != NULL:
        out[0] = 0xF0 | (cp >> 18)
        out[1] = 0x80 | ((cp >> 12) & 0x3F)
        out[2] = 0x80 | ((cp >> 6) & 0x3F)
        out[3] = 0x80 | (cp & 0x3F)
    return 4


cdef Py_ssize_t string_copy(
    const uint8_t *data, Py_ssize_t p, Py_ssize_t end, uint8_t *out, Py_ssize_t *size,
    const uint8_t *data_end,
) noexcept nogil:
    r"""Past the string that opens at p, written to out (unless NULL) as DuckDB's writer
    writes it (its escapes: \/ as /, \u00e9 as the character, \u0008 as \b), and how many
    bytes to size[0] (never more than it takes in data); -1 when it is no JSON string or
    holds a lone surrogate (DuckDB refuses it)."""
    cdef Py_ssize_t o = 1, start
    cdef int cp, low
    cdef uint8_t e
    cdef uint64_t word, hits
    if out != NULL:
        out[0] = QUOTE
    p += 1
    while True:
        start = p
        while True:  # to the next quote, backslash or control character
            if p + 8 <= end:
                word = load_u64(data + p)
                hits = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES) \
                    | control_bytes(word)
                if hits == 0:
                    p += 8
                    continue
                p += lowest_flagged_byte(hits)
            elif p >= end:
                return -1
            elif data[p] != QUOTE and data[p] != BACKSLASH and data[p] >= 32:
                p += 1
                continue
            break
        if out != NULL and p > start:
            copy_bytes(out + o, data + start, p - start, data_end)
        o += p - start
        if data[p] == QUOTE:
            if out != NULL:
                out[o] = QUOTE
            size[0] = o + 1
            return p + 1
        if data[p] != BACKSLASH or p + 1 >= end:
            return -1  # a control character, or a text cut short
        e = data[p + 1]
        p += 2
        if e == 117:  # \uXXXX, and \uXXXX\uXXXX for a surrogate pair
            cp = code_unit(data, p, end)
            if cp < 0 or 0xDC00 <= cp < 0xE000:
                return -1
            p += 4
            if 0xD800 <= cp < 0xDC00:
                if p + 2 > end or data[p] != BACKSLASH or data[p + 1] != 117:
                    return -1
                low = code_unit(data, p + 2, end)
                if low < 0xDC00 or low >= 0xE000:
                    return -1
                p += 6
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            o += put_code_point(out + o if out != NULL else NULL, cp)
        elif e == QUOTE or e == BACKSLASH or e == 98 or e == 102 or e == 110 or e == 114 \
                or e == 116:  # \" \\ \b \f \n \r \t: as they are
            if out != NULL:
                out[o] = BACKSLASH
                out[o + 1] = e
            o += 2
        elif e == 47:  # \/
            if out != NULL:
                out[o] = 47
            o += 1
        else:
            return -1


cdef Py_ssize_t scan_value(
    const uint8_t *data, Py_ssize_t p, Py_ssize_t end, uint8_t *out, Py_ssize_t *size,
    const uint8_t *data_end,
) noexcept nogil:
    """Check the JSON value at p (in a text that ends at end) and, unless out is NULL, write
    it without whitespace between its tokens to out, and how many bytes to size[0]; return
    where the value ends, or -1 when it is no JSON or DuckDB may write it otherwise (see the
    top of this file)."""
    cdef Py_ssize_t o = 0, q, n, depth = 0
    cdef uint64_t objects = 0  # bit d: the container at depth d + 1 is an object
    cdef int want = W_VALUE
    cdef bint whole  # the token ends a value
    cdef uint8_t c
    while p < end:
        c = data[p]
        if is_space(c):
            p += 1
            continue
        q = p + 1  # past the token: one byte, but for strings, numbers and words
        whole = False
        if want == W_COLON:
            if c != COLON:
                return -1
            want = W_VALUE
        elif want == W_NEXT:  # a comma, or the end of the container
            if c == COMMA:
                want = W_KEY if (objects >> (depth - 1)) & 1 else W_VALUE
            elif c == (CLOSE_OBJECT if (objects >> (depth - 1)) & 1 else CLOSE_LIST):
                depth -= 1
                whole = True
            else:
                return -1
        elif want == W_KEY or want == W_KEY_OR_CLOSE:
            if c == CLOSE_OBJECT and want == W_KEY_OR_CLOSE:
                depth -= 1
                whole = True
            elif c == QUOTE:
                q = string_copy(data, p, end, out + o if out != NULL else NULL, &n, data_end)
                if q < 0:
                    return -1
                o += n
                p = q
                want = W_COLON
                continue
            else:
                return -1
        elif c == CLOSE_LIST and want == W_VALUE_OR_CLOSE:
            depth -= 1
            whole = True
        elif c == OPEN_LIST or c == OPEN_OBJECT:
            if depth == MAX_DEPTH:
                return -1
            if c == OPEN_OBJECT:
                objects |= (<uint64_t>1) << depth
                want = W_KEY_OR_CLOSE
            else:
                objects &= ~((<uint64_t>1) << depth)
                want = W_VALUE_OR_CLOSE
            depth += 1
        elif c == QUOTE:
            q = string_copy(data, p, end, out + o if out != NULL else NULL, &n, data_end)
            if q < 0:
                return -1
            o += n
            p = q
            if depth == 0:
                size[0] = o
                return p
            want = W_NEXT
            continue
        else:
            if c == MINUS or is_digit(c):
                q = plain_number_end(data, p, end)
            elif c == 116 and is_word(data, p, end, b"true", 4):  # t
                q = p + 4
            elif c == 102 and is_word(data, p, end, b"false", 5):  # f
                q = p + 5
            elif c == 110 and is_word(data, p, end, b"null", 4):  # n
                q = p + 4
            else:
                q = -1
            if q < 0:
                return -1
            whole = True
        if out != NULL:
            copy_bytes(out + o, data + p, q - p, data_end)
            o += q - p
        p = q
        if whole:
            if depth == 0:
                size[0] = o
                return p
            want = W_NEXT
    return -1


# read_gold's table of extra members: a column per member of a call other than its name and
# args that is given (not left out or null)
cpdef enum:
    EXTRA_CALL, EXTRA_MEMBER, EXTRA_LO, EXTRA_HI


cdef struct Gold:
    const uint8_t *data
    const uint8_t *data_end
    bint exact  # the text is DuckDB's: read as it is
    Py_ssize_t room  # calls that fit in the tables
    Py_ssize_t n  # calls read
    int64_t *row
    int8_t *name_kind
    int64_t *name_offsets
    uint8_t *names
    int64_t *args_offsets
    uint8_t *args
    Py_ssize_t args_room  # bytes that fit in args
    int64_t *extra
    int8_t *extra_kind
    Py_ssize_t extra_room
    Py_ssize_t x  # extra members read
    uint8_t *out  # their texts
    Py_ssize_t o  # bytes of out written


def read_gold(
    const int64_t[::1] offsets, const uint8_t[::1] data, const cbool[::1] canonical,
    int64_t[::1] row, int8_t[::1] name_kind, int64_t[::1] name_offsets, uint8_t[::1] names,
    int64_t[::1] args_offsets, uint8_t[::1] args, int64_t[:, ::1] extra,
    int8_t[::1] extra_kind, uint8_t[::1] out, cbool[::1] slow, int64_t[::1] at,
):
    """Read the gold lists data[offsets[k]:offsets[k + 1]] from text at[0], with at[1]
    calls, at[2] extra members and at[3] bytes of out written. For each call c: its text's
    row k (row[c]); its name's kind (name_kind[c], NAME_NONE when left out or null) and text
    (names[name_offsets[c]:name_offsets[c + 1]]); its args' text likewise ({} when left out
    or null); and for each other member given, a column of extra: the call, the member
    (index in GOLD_KEYS) and its text's span in out, its kind in extra_kind. A text is read
    as it is where canonical[k] (DuckDB wrote it), else flagged in slow when DuckDB may
    write it otherwise (or it is no JSON), its calls left out. Returns when every text is
    read, or the tables or args are full, with at[:4] where it stopped and at[4] what is
    full (1: the calls' tables or args, 2: extra). names and out need
    16 bytes more than data, args 2 more per call on top; name_offsets[at[1]] and
    args_offsets[at[1]] must hold where the next call's texts go."""
    cdef Py_ssize_t texts = offsets.shape[0] - 1, room = row.shape[0]
    if min(name_kind.shape[0], name_offsets.shape[0] - 1, args_offsets.shape[0] - 1) < room:
        raise ValueError("read_gold: name_kind, name_offsets and args_offsets are too short")
    if extra.shape[0] < 4 or extra_kind.shape[0] < extra.shape[1]:
        raise ValueError("read_gold: extra needs 4 rows, and extra_kind an entry per column")
    if canonical.shape[0] < texts or slow.shape[0] < texts or at.shape[0] < 5:
        raise ValueError("read_gold: canonical and slow need a flag per text, at 5 entries")
    if min(names.shape[0], out.shape[0]) < data.shape[0] + 16 or args.shape[0] < 16:
        raise ValueError("read_gold: names and out need 16 bytes more than data")
    if texts <= 0:
        return
    cdef Gold g
    g.data, g.data_end = &data[0], &data[0] + data.shape[0]
    g.room, g.row, g.name_kind = room, &row[0], &name_kind[0]
    g.name_offsets, g.names = &name_offsets[0], &names[0]
    g.args_offsets, g.args, g.args_room = &args_offsets[0], &args[0], args.shape[0] - 16
    g.extra, g.extra_kind, g.extra_room = &extra[0, 0], &extra_kind[0], extra.shape[1]
    g.out = &out[0]
    with nogil:
        read_gold_at(&g, &offsets[0], texts, &canonical[0], &slow[0], &at[0])


cdef void read_gold_at(
    Gold *g, const int64_t *offsets, Py_ssize_t texts, const cbool *canonical, cbool *slow,
    int64_t *at,
) noexcept nogil:
    cdef Py_ssize_t k = at[0], first_n, first_x, first_o
    cdef int read
    g.n, g.x, g.o = at[1], at[2], at[3]
    at[4] = 0
    while k < texts:
        first_n, first_x, first_o = g.n, g.x, g.o
        g.exact = canonical[k]
        read = read_list(g, offsets[k], offsets[k + 1], k)
        if read < 0:  # its calls left out
            g.n, g.x, g.o = first_n, first_x, first_o
            if read <= -2:  # full: this text again on the next call
                at[4] = -read - 1  # 1: the calls' tables or args, 2: extra
                break
        slow[k] = read == -1
        k += 1
    at[0], at[1], at[2], at[3] = k, g.n, g.x, g.o


cdef int read_list(Gold *g, Py_ssize_t p, Py_ssize_t end, Py_ssize_t k) noexcept nogil:
    """Read the calls of text k, data[p:end]; return 0, -1 when the text is slow, -2 when
    the calls' tables or args are full, -3 when extra is."""
    cdef const uint8_t *data = g.data
    cdef Py_ssize_t size
    p = skip_space(data, p, end)
    if p >= end:
        return -1  # no JSON: DuckDB says why
    if data[p] != OPEN_LIST:  # no list: no calls
        if not g.exact:
            p = scan_value(data, p, end, NULL, &size, g.data_end)
            if p < 0 or skip_space(data, p, end) != end:
                return -1
        return 0
    p = skip_space(data, p + 1, end)
    if p < end and data[p] == CLOSE_LIST:
        p += 1
    else:
        while True:
            if g.n == g.room:
                return -2
            if p < end and data[p] == OPEN_OBJECT:
                p = read_call(g, p, end, k)
            else:
                p = read_other(g, p, end, k)
            if p < 0:
                return <int>p
            p = skip_space(data, p, end)
            if p >= end:
                return -1
            if data[p] == CLOSE_LIST:
                p += 1
                break
            if data[p] != COMMA:
                return -1
            p = skip_space(data, p + 1, end)
            if p >= end or data[p] == CLOSE_LIST:
                return -1  # DuckDB drops a comma before the end
    return 0 if g.exact or skip_space(data, p, end) == end else -1


cdef inline int start_call(Gold *g, Py_ssize_t k) noexcept nogil:
    """A call of text k begins: no name, no args; -2 when args is full."""
    cdef Py_ssize_t n = g.n, a = g.args_offsets[n]
    if a + 2 > g.args_room:
        return -2
    g.row[n] = k
    g.name_kind[n] = NAME_NONE
    g.name_offsets[n + 1] = g.name_offsets[n]
    g.args[a] = OPEN_OBJECT  # args left out read as {}
    g.args[a + 1] = CLOSE_OBJECT
    g.args_offsets[n + 1] = a + 2
    return 0


cdef Py_ssize_t read_other(Gold *g, Py_ssize_t p, Py_ssize_t end, Py_ssize_t k) noexcept nogil:
    """A list element that is no object at p: a call without name or args. Returns where it
    ends, -1 or -2 as read_list."""
    cdef Py_ssize_t size
    if start_call(g, k) < 0:
        return -2
    if g.exact:
        p = value_end_at(g.data, p, end)
    else:
        p = scan_value(g.data, p, end, NULL, &size, g.data_end)
    g.n += 1
    return p


cdef Py_ssize_t read_call(Gold *g, Py_ssize_t p, Py_ssize_t end, Py_ssize_t k) noexcept nogil:
    """The call object at p. Returns where it ends, -1 or -2 as read_list."""
    cdef const uint8_t *data = g.data
    cdef Py_ssize_t key_lo, key_hi, q
    cdef int j, seen = 0
    cdef bint escaped
    if start_call(g, k) < 0:
        return -2
    p = skip_space(data, p + 1, end)
    if p < end and data[p] == CLOSE_OBJECT:
        g.n += 1
        return p + 1
    while True:
        if p >= end or data[p] != QUOTE:
            return -1
        key_lo = p + 1
        if g.exact:
            key_hi = string_end(data, p, end, &escaped) - 1
        else:  # DuckDB reads "n\u0061me" as name
            key_hi = string_token(data, p, end) - 1
            if key_hi < 0:
                return -1
        p = skip_space(data, key_hi + 1, end)
        if p >= end or data[p] != COLON:
            return -1
        p = skip_space(data, p + 1, end)
        if p >= end:
            return -1
        j = key_index(data, key_lo, key_hi)
        if j >= 0 and (seen >> j) & 1:
            j = -1  # only the first is read
        if j >= 0:
            seen |= 1 << j
        q = read_member(g, p, end, j)
        if q < 0:
            return q
        p = skip_space(data, q, end)
        if p >= end:
            return -1
        if data[p] == CLOSE_OBJECT:
            g.n += 1
            return p + 1
        if data[p] != COMMA:
            return -1
        p = skip_space(data, p + 1, end)


cdef Py_ssize_t read_member(Gold *g, Py_ssize_t p, Py_ssize_t end, int j) noexcept nogil:
    """Member j of the call being read (-1: a member not read), whose value is at p. Returns
    where the value ends, -1 or -2 as read_list."""
    cdef const uint8_t *data = g.data
    cdef Py_ssize_t n = g.n, q, size = 0, at = 0
    cdef bint escaped = False
    cdef bint text = j == 0 or j == GOLD_SIDE
    cdef int8_t kind
    cdef uint8_t *target
    if j < 0:
        if g.exact:
            return value_end_at(data, p, end)
        return scan_value(data, p, end, NULL, &size, g.data_end)
    if j == 0:
        target = g.names + g.name_offsets[n]
    elif j == 1:
        at = g.args_offsets[n]  # in place of the {} written for args left out
        if at + (end - p) > g.args_room:
            return -2
        target = g.args + at
    else:
        target = g.out + g.o
    # the value's text: a string's characters (name, side), else the value (minified)
    if text and data[p] == QUOTE:
        if g.exact:
            q = string_end(data, p, end, &escaped)
        else:
            q = string_token(data, p, end)
            escaped = q < 0
        if not escaped:
            kind = NAME_TEXT
            size = q - 2 - p
            copy_bytes(target, data + p + 1, size, g.data_end)
        else:  # for DuckDB to read as text, as its writer writes it
            kind = NAME_ESCAPED
            q = string_copy(data, p, end, target, &size, g.data_end)
            if q < 0:
                return -1
    else:
        if g.exact:
            q = value_end_at(data, p, end)
            size = q - p
            copy_bytes(target, data + p, size, g.data_end)
        else:
            q = scan_value(data, p, end, target, &size, g.data_end)
            if q < 0:
                return -1
        if is_null(target, 0, size):
            if j == 1:
                target[0], target[1] = OPEN_OBJECT, CLOSE_OBJECT  # read as {}
            return q  # none
        kind = NAME_VALUE
    if j == 0:
        g.name_kind[n] = kind
        g.name_offsets[n + 1] = g.name_offsets[n] + size
    elif j == 1:
        g.args_offsets[n + 1] = at + size
    else:
        if g.x == g.extra_room:
            return -3
        g.extra[EXTRA_CALL * g.extra_room + g.x] = n
        g.extra[EXTRA_MEMBER * g.extra_room + g.x] = j
        g.extra[EXTRA_LO * g.extra_room + g.x] = g.o
        g.extra[EXTRA_HI * g.extra_room + g.x] = g.o + size
        g.extra_kind[g.x] = kind
        g.x += 1
        g.o += size
    return q
