#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tests/slcache_meta_corpus.txt: meta command lines, random and
crafted, for tests/slcache_meta.py to replay against slcache and memcached.

    python3 tests/slcache_meta_gen.py > tests/slcache_meta_corpus.txt

Fixed seed: the corpus is generated once and committed; edit this and run
it again to change it.  One exchange a line, C-escaped (\\r \\n \\\\ \\xHH);
each is sent on a fresh connection, followed by "mn".  Every case ends its
own requests (a value has its bytes), so no exchange waits for silence:
huge ms lengths, which memcached would wait for, are not generated.

What is covered: mg, ms, md, ma, mn, me and some non-commands; every flag
letter memcached knows (and those it does not, digits, punctuation, bytes
0x7f-0xff); tokens that are numbers, signed, past 32 and 64 bits, or
garbage; base64 keys good and bad; keys at and past 250 bytes, with binary
bytes; too many tokens; opaque tokens around their 32-byte limit; and the
stale-while-revalidate sequences (md I, ms I, mg N / R, then the readers,
classic get among them, that must see W once then Z).
"""

import random

SEED = 20261206
rng = random.Random(SEED)
cases = []

LETTERS = "bNTRlOPLkstcfvhuqFCMJDIE"  # memcached 1.6.18's flags (and E, unknown)
OTHERS = "aegijmnoprwxyzABGHKQSUVWXYZ019+-=!~_"
KEYS = ["a", "b", "t:x", "k1", "foo", "bar:1", "stale", "viv"]
B64_KEYS = ["YQ==", "Zm9v", "dDp4", "YmFyOjE=", "!!!!", "YQ=", "Y", "=", "YWJj====", "Zm9v\x01"]
# Exptime tokens: never a short positive TTL (it would expire while the
# corpus plays, at a different instant in each server).
TIMES = ["0", "-1", "-2147483648", "100", "3600", "2591999", "2592000", "2592001",
         "86400000", "2147483647", "2147483648", "4294967295", "4294967296", "4294967396",
         "9223372036854775807", "9223372036854775808", "99999999999999999999", "4000000000",
         "", "x", "1x", "+100", "-0", "0x10", "100\x01", "3600 "]
NUMS = ["0", "1", "2", "5", "100", "4294967295", "4294967296", "18446744073709551615",
        "18446744073709551616", "-1", "-0", "+1", "", "abc", "1a", "99999999999999999999999",
        "00001", " 1"]
MODES = ["S", "E", "A", "P", "R", "I", "D", "+", "-", "", "SS", "x", "s", "\x7f"]


def esc(data):
    out = []
    for ch in data:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif o < 0x20 or o >= 0x7f:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


def case(*parts):
    cases.append(esc("".join(parts)))


def flag_token(cmd):
    """A flag: mostly one memcached knows, with a token that may be bad."""
    r = rng.random()
    if r < 0.05:
        return rng.choice(OTHERS) + rng.choice(["", "1", "x"])
    if r < 0.08:
        return chr(rng.randrange(0x7f, 0x100)) + rng.choice(["", "1"])
    f = rng.choice(LETTERS)
    if f in "TNR":
        return f + rng.choice(TIMES).strip()
    if f in "CFDJ":
        return f + rng.choice(NUMS).strip()
    if f == "M":
        return "M" + rng.choice(MODES)
    if f == "O":
        return "O" + "o" * rng.choice([0, 1, 5, 30, 31, 32, 33, 40])
    if f in "PL" and rng.random() < 0.5:
        return f + "x"
    if rng.random() < 0.05:
        return f + rng.choice(["1", "x", "-"])
    return f


def key():
    r = rng.random()
    if r < 0.8:
        return rng.choice(KEYS), False
    if r < 0.9:
        return rng.choice(B64_KEYS), True
    return rng.choice(["k" * 250, "k" * 251, "\x01k", "k\xff", "t:" + "y" * 248]), False


def flags(cmd, n):
    return [flag_token(cmd) for _ in range(n)]


def random_line():
    cmd = rng.choice(["mg", "mg", "mg", "ms", "ms", "md", "ma", "ma", "mn", "me"])
    k, b64 = key()
    fl = flags(cmd, rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 8]))
    if b64 and rng.random() < 0.7:
        fl.append("b")
        rng.shuffle(fl)
    if cmd == "mn":
        return "mn" + rng.choice(["", " x", " " + k]) + "\r\n"
    if cmd == "me":
        return "me " + k + rng.choice(["", " b", " x", " b b"]) + "\r\n"
    if cmd != "ms":
        return " ".join([cmd, k] + fl) + "\r\n"
    r = rng.random()
    if r < 0.8:
        n = rng.choice([0, 1, 2, 5, 16])
        value = "".join(rng.choice("0123456789abc") for _ in range(n))
        end = "\r\n" if rng.random() < 0.95 else rng.choice(["\n", "\r\r", "xx"])
        return " ".join([cmd, k, str(n)] + fl) + "\r\n" + value + end
    bad = rng.choice(["", "-1", "x", "1x", "2147483648", "4294967297", "-2147483648"])
    return " ".join([cmd, k, bad] + fl).rstrip() + "\r\n"


# ---- crafted ----

# The stale-while-revalidate sequences: who is handed W, who Z.
case("ms swr 1 T0\r\nA\r\n")
case("md swr I\r\n")
case("get swr\r\n")
case("mg swr v c\r\n")
case("mg swr v\r\n")
case("mg swr s t\r\n")
case("ms swr 1 C1 I\r\nB\r\n")
case("mg swr v\r\n")
case("ms swr 1\r\nC\r\n")
case("mg swr v\r\n")
case("ms swr2 1\r\nA\r\nmd swr2 I T30\r\nmg swr2 v t\r\nmg swr2 v t\r\n")
case("ms swr3 1\r\nA\r\nmd swr3 I q\r\ngets swr3\r\nmg swr3 v c\r\n")
case("md nothere I\r\nmg nothere v\r\n")
case("mg viv1 N30 v\r\nmg viv1 N30 v\r\nget viv1\r\nmg viv1 v t\r\n")
case("mg viv2 N4294967295 t v\r\n")
case("mg viv3 N2147483648 t v\r\n")
case("mg viv4 N-1 t v\r\n")
case("mg viv5 N2592000 t\r\n")
case("mg viv6 N2592001 t\r\n")
case("ms rc 1 T100\r\nA\r\nmg rc R200 v\r\nmg rc R200 v\r\nmg rc R50 v\r\n")
case("ms rc2 1 T0\r\nA\r\nmg rc2 R200 v\r\n")
case("ms tt 1 T2592000\r\nA\r\nmg tt t\r\n")
case("ms tt2 1 T2591999\r\nA\r\nmg tt2 t\r\n")
case("mg tt2 T2592000 t\r\n")
case("mg tt2 t T2592000\r\n")
case("mg tt2 T-1 t v\r\n")
case("ma ctr N0 J5 v t\r\nma ctr v\r\nma ctr MD D10 v\r\n")
case("ma ctr2 N4294967295 J1 t\r\n")
# Flag bytes: 0x7f and above are "duplicate" in memcached, below are "invalid".
for b in [0x01, 0x1f, 0x21, 0x2f, 0x30, 0x3d, 0x40, 0x5b, 0x60, 0x7b, 0x7e, 0x7f, 0x80, 0xc3,
          0xfe, 0xff]:
    for cmd in ["mg", "md", "ma"]:
        case("%s a %s\r\n" % (cmd, chr(b)))
    case("ms a 1 %s\r\nx\r\n" % chr(b))
# Repeats, and the first-bad-wins order.
for fl in ["v v", "T1x T2", "Tx v v", "O1 O2", "q q", "k k", "b b", "Cx Fx", "Fx Cx", "Fx",
           "Jx Dx", "Dx Jx", "MX Mx", "Mxx v", "O" + "o" * 32, "O" + "o" * 31, "Fx O" + "o" * 40]:
    for cmd in ["mg", "md", "ma"]:
        case("%s a %s\r\n" % (cmd, fl))
    case("ms a 1 %s\r\nx\r\n" % fl)
# Token counts around memcached's limit.
for n in [16, 17, 18, 19, 20, 24]:
    for cmd in ["mg", "md", "ma"]:
        case("%s a %s\r\n" % (cmd, " ".join("O%d" % i for i in range(n))))
    case("ms a 1 %s\r\nx\r\n" % " ".join("O%d" % i for i in range(n)))
# Commands without their key or length.
for line in ["mg", "mg ", "ms", "ms a", "md", "ma", "me", "mn", "mz a", "m", "mgg a", "MG a",
             "mg\ta", "mg  a  v"]:
    case(line + "\r\n")

# ---- random ----

for _ in range(1400):
    case(*[random_line() for _ in range(rng.choice([1, 1, 1, 2, 3]))])

print("# Meta command exchanges for tests/slcache_meta.py, written by")
print("# tests/slcache_meta_gen.py (seed %d; edit that, not this)." % SEED)
for c in cases:
    print(c)
