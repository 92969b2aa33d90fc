/* The plain C under the kernels (_compiled.pyx): eight bytes at once, and numbers read in the
   C locale. Python.h comes first in the generated module, and with it _GNU_SOURCE, which
   glibc's newlocale and strtod_l need. */
#ifndef TCBREPLAY_WORDS_H
#define TCBREPLAY_WORDS_H

#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __APPLE__
#include <xlocale.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the word tricks of the kernels read the first byte of a word as its lowest"
#endif

/* The 8 bytes at p (any alignment) as one little-endian word, and back: memcpy is how C
   reads unaligned memory without undefined behaviour; compilers make it one move. */
static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

static inline void store_u64(uint8_t *p, uint64_t word) { memcpy(p, &word, 8); }

/* Bytes of a word, each flagged by its high bit (0x80). A word's bytes equal to b are the zero
   bytes of word ^ (ONES * b); (x - ONES) & ~x flags each zero byte of x, and may flag a
   byte above a flagged one too (a borrow), never one below: the lowest flag is exact, and
   so is whether there is one. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define QUOTES 0x2222222222222222ULL      /* " in each byte */
#define BACKSLASHES 0x5C5C5C5C5C5C5C5CULL /* \ in each byte */
#define SPACES 0x2020202020202020ULL      /* the space in each byte */

static inline uint64_t zero_bytes(uint64_t x) { return (x - ONES) & ~x & HIGHS; }

/* The bytes of word below 0x20 (the control characters), flagged as zero_bytes flags. */
static inline uint64_t control_bytes(uint64_t word) { return (word - SPACES) & ~word & HIGHS; }

/* The index of the lowest flagged byte of a non-zero word of flags. */
static inline int lowest_flagged_byte(uint64_t flags) { return __builtin_ctzll(flags) >> 3; }

/* The C locale's number format, made once when the module loads: strtod follows the
   process's locale, where a program that embeds tcbreplay may have set one that writes 1.5
   as "1,5". */
static locale_t c_numeric = (locale_t)0;

static int make_c_numeric(void) {
    if (!c_numeric) c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return c_numeric != (locale_t)0;
}

/* The number text at text (ended by a zero byte), rounded correctly as Python's float()
   rounds. */
static inline double read_number(const char *text) { return strtod_l(text, NULL, c_numeric); }

#endif
