#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tests/slcache_conform.txt: the conformance cases (format:
tests/proto_client.c) that tests/slcache_proto.sh plays against slcache and
compares with memcached 1.6.18's recorded answers (slcache_conform.expected).

Each case is one exchange on a fresh connection; "### session" starts a
fresh server.  To regenerate the cases and record memcached's answers once:

    python3 tests/slcache_conform_gen.py > tests/slcache_conform.txt
    SL_PROTO_RECORD=1 bash tests/slcache_proto.sh SLCACHE PROTO_CLIENT \\
        tests/slcache_conform.txt
"""

cases = []


def session(name):
    cases.append("### session " + name)


# Exchanges whose answers differ on purpose, each listed in README.md with
# its reason ("Where slcache answers differently"): played, not compared.
DIFFERS = {"binary magic close", "binary magic after command close",
           "bad get drops the batch"}


def case(name, *reqs):
    cases.append("=== " + name + (" [differs]" if name in DIFFERS else ""))
    cases.append("".join(reqs))


def setv(key, val, flags=0, exp=0):
    return "set %s %d %d %d\\r\\n%s\\r\\n" % (key, flags, exp, len(val), val)


session("numbers")
# How numbers are read (memcached's safe_strto*): sign, white space, range.
for tok in ["0", "1", "+1", "-0", "-1", "01", "1a", "a1", "\\t1", "1\\t", "1\\r", "\\r",
            "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
            "-9223372036854775808", "9223372036854775807", "99999999999", "-99999999999",
            "2147483645", "2147483646", "-2147483649",
            "0x10", "1e3", " "]:
    case("flags " + tok, "set nf %s 0 1\\r\\nx\\r\\nget nf\\r\\n" % tok)
    # A key of its own: where the set is refused, the get must not find
    # an earlier case's item, there or gone by its 1 s exptime depending
    # on how fast the machine got here (seen on a loaded one).
    key = "ne%d" % len(cases)
    case("exptime " + tok, "set %s 0 %s 1\\r\\nx\\r\\nget %s\\r\\n" % (key, tok, key))
    case("length " + tok, "set nl 0 0 %s\\r\\n\\r\\nget nl\\r\\n" % tok)
    case("incr delta " + tok, setv("nd", "5"), "incr nd %s\\r\\n" % tok)
    case("touch exptime " + tok, setv("nt", "t"), "touch nt %s\\r\\n" % tok)
    case("gat exptime " + tok, setv("ng", "g"), "gat %s ng\\r\\n" % tok)
    case("cas unique " + tok, setv("nc", "c"), "cas nc 0 0 1 %s\\r\\nd\\r\\n" % tok)
    case("verbosity " + tok, "verbosity %s\\r\\n" % tok)
    case("mg T " + tok, setv("mt", "m"), "mg mt T%s v\\r\\nmg mt v\\r\\n" % tok)
    case("ms F " + tok, "ms mf 1 F%s\\r\\nx\\r\\nmg mf f v\\r\\n" % tok)
    case("ma D " + tok, setv("md", "10"), "ma md D%s v\\r\\n" % tok)
    case("ma J " + tok, "ma mj%d N0 J%s v\\r\\n" % (len(cases), tok))

session("values")
# What incr reads as a number in a stored value.
for val in ["0", "1", " 12", "+1", "-1", "-0", "12a", "1 2", "007", "\\t3", "",
            "18446744073709551615", "18446744073709551616", "abc", "1\\r", " "]:
    case("incr value '%s'" % val, "set iv 0 0 %d\\r\\n%s\\r\\n" % (len(val.replace("\\t", "\\x09").replace("\\r", "\\x0d").encode().decode("unicode_escape")), val),
         "incr iv 1\\r\\nget iv\\r\\ndecr iv 3\\r\\nget iv\\r\\n")

session("lines")
for line in ["get \\r\\n", "gets \\r\\n", "gat \\r\\n", "gat 10 \\r\\n", "gat 10\\r\\n",
             "get  a\\r\\n", " get a\\r\\n", "get a  \\r\\n", "g\\r\\n", "x\\r\\n", "\\r\\n",
             "\\n", "get a\\n", "set a 0 0 1\\r\\r\\nx\\r\\n", "set a 0 0 1\\nx\\r\\n",
             "set a\\x00b 0 0 1\\r\\nx\\r\\n", "get a\\x00b c\\r\\n", "\\x00get a\\r\\n",
             "delete HTTP/abc\\r\\n", "mg HTTP/1\\r\\n", "touch a HTTP/1\\r\\n",
             "get HTTP/1.1\\r\\n", "incr HTTP/1 1\\r\\n", "flush_all 0 0\\r\\n",
             "flush_all 0 0 0\\r\\n", "flush_all noreply\\r\\n", "flush_all -1\\r\\n",
             "flush_all 0 noreply\\r\\n", "flush_all x noreply\\r\\n", "version x y\\r\\n",
             "VERSION\\r\\n", "Get a\\r\\n", "gett a\\r\\n", "sets a 0 0 1\\r\\n",
             "adds a\\r\\n", "deletes a\\r\\n", "incrx a 1\\r\\n", "touchy a 1\\r\\n",
             "cas\\r\\n", "stats\\tx\\r\\n", "mx a\\r\\n", "mgg a\\r\\n", "m\\r\\n",
             "slabs automove invalid\\r\\n", "slabs automove 1\\r\\n", "slabs automove 3\\r\\n",
             "slabs automove\\r\\n", "slabs\\r\\n", "slabs reassign 1 2\\r\\n",
             "slabs automove ratio\\r\\n", "slabs automove ratio 0.5\\r\\n",
             "verbosity invalid\\r\\n", "verbosity 1 noreply\\r\\n", "verbosity noreply\\r\\n",
             "verbosity\\r\\n", "cache_memlimit 7\\r\\n", "cache_memlimit 1000000001\\r\\n",
             "cache_memlimit x noreply\\r\\n", "cache_memlimit x\\r\\n", "cache_memlimit 64 x\\r\\n",
             "stats detail dump\\r\\n", "stats detail on\\r\\n", "stats detail off\\r\\n",
             "stats detail\\r\\n", "stats detail x\\r\\n", "stats cachedump 1\\r\\n",
             "stats cachedump x 1\\r\\n", "stats cachedump 64 1\\r\\n", "stats cachedump 1 0\\r\\n",
             "delete a 0\\r\\n", "delete a 0 noreply\\r\\n", "delete a 1 noreply\\r\\n",
             "delete a noreply x\\r\\n", "delete a b c d\\r\\n", "incr a\\r\\n", "incr a 1 2 3\\r\\n",
             "touch a\\r\\n", "touch a 1 2 3\\r\\n", "set a 0 0 1 noreply x\\r\\n",
             "cas a 0 0 1\\r\\n", "get " + "k" * 250 + "\\r\\n", "get a " + "k" * 251 + "\\r\\n",
             "get " + "k" * 251 + " a\\r\\n", "delete " + "k" * 251 + "\\r\\n",
             "incr " + "k" * 251 + " 1\\r\\n", "touch " + "k" * 251 + " 1\\r\\n",
             "mg " + "k" * 251 + " v\\r\\n", "ms " + "k" * 251 + " 1\\r\\nx\\r\\n",
             "md " + "k" * 251 + "\\r\\n", "ma " + "k" * 251 + "\\r\\n", "me " + "k" * 251 + "\\r\\n",
             "quitx\\r\\n", "shutdown\\r\\n", "lru_crawler\\r\\n", "watch\\r\\n", "lru\\r\\n"]:
    case("line " + line.replace("\\r\\n", "").replace("k" * 250, "k*250")[:60], line)

session("expiry")
case("negative exptime", setv("x1", "x", exp=-1), "get x1\\r\\n")
case("huge exptime wraps", setv("x2", "x", exp=99999999999), "get x2\\r\\n")
case("absolute exptime past", setv("x3", "x", exp=1000000000), "get x3\\r\\n")
case("touch negative", setv("x4", "x"), "touch x4 -1\\r\\nget x4\\r\\n")
case("gat negative", setv("x5", "x"), "gat -1 x5\\r\\nget x5\\r\\n")
case("mg T negative", setv("x6", "x"), "mg x6 T-1 v\\r\\nmg x6 v\\r\\n")
case("ms T negative", "ms x7 1 T-1\\r\\nx\\r\\nmg x7 v\\r\\n")
case("stale npm touch changes lifetime",
     setv("tl", "v", exp=1), "touch tl 10\\r\\nmg tl t\\r\\n")
case("flush_all past absolute time before start", setv("fp", "f"),
     "flush_all 1000000000\\r\\nget fp\\r\\n")
case("flush_all negative", setv("fn", "f"), "flush_all -1\\r\\nget fn\\r\\n")
case("flush_all then set", setv("fs", "f"), "flush_all\\r\\n", setv("fs", "g"), "get fs\\r\\n")

session("flags")
# memcached's t/flags.t: client flags come back as stored.
for fl in ["0", "123", "65535", "2147483648", "4294967295", "4294967296", "-1"]:
    case("flags.t set " + fl, "set foo %s 0 6\\r\\nfooval\\r\\nget foo\\r\\ngets foo\\r\\n" % fl)
    case("flags.t ms " + fl, "ms foo 6 F%s\\r\\nfooval\\r\\nmg foo f v\\r\\n" % fl)

session("meta")
case("mg q no v hit", setv("a", "x"), "mg a s f q\\r\\n")
case("mg q miss", "mg b s q\\r\\n")
case("mg miss O k", "mg b O124 k\\r\\nmg b O1 q k\\r\\nmg b k\\r\\n")
case("mg miss base64 k", "mg Zm9v b k O9\\r\\n")
case("mg opaque 31", setv("a", "x"), "mg a O" + "1" * 31 + "\\r\\n")
case("mg opaque 32", "mg a O" + "1" * 32 + "\\r\\n")
case("mg opaque 33", "mg a O" + "1" * 33 + "\\r\\n")
case("mg miss opaque 32", "mg nope O" + "1" * 32 + "\\r\\n")
case("mg empty", "mg\\r\\n")
case("mg key only", setv("a", "x"), "mg a\\r\\n")
for fl in ["!", "&", "z", "Z", "W", "X", "1", "vv", "v v", "s s", "T", "Tx", "T1x", "O",
           "k k", "q q", "u", "P", "L", "l", "h", "E", "x"]:
    case("mg flag " + fl, setv("a", "x"), "mg a %s\\r\\n" % fl)
    case("md flag " + fl, setv("a", "x"), "md a %s\\r\\n" % fl)
    case("ma flag " + fl, "ma na %s\\r\\n" % fl)
    case("ms flag " + fl, "ms a 1 %s\\r\\nx\\r\\n" % fl)
case("mg many flags", setv("a", "x"), "mg a " + " ".join("O%d" % i for i in range(17)) + "\\r\\n")
case("mg too many flags", setv("a", "x"), "mg a " + " ".join("v s f t c k h l q O1 u P L Tx Fx Cx Mx Jx".split()[:18]) + "\\r\\n")
case("ms too many flags", "ms a 1 " + " ".join("k O1 c q T0 F0 P L u s t f v h l b x y".split()) + "\\r\\nx\\r\\n")
case("ms C0 missing", "ms cz 1 C0\\r\\nx\\r\\n")
case("ms C0 present", setv("cp", "x"), "ms cp 1 C0\\r\\ny\\r\\n")
case("ms ME C", "ms ce 1 ME C5\\r\\nx\\r\\n")
case("ms MR C0", setv("cr", "x"), "ms cr 1 MR C0\\r\\ny\\r\\n")
case("ms modes lower", "ms ml 1 Ms\\r\\nx\\r\\nms ml 1 Ma\\r\\ny\\r\\nms ml 1 MX\\r\\nz\\r\\nms ml 1 MSS\\r\\nz\\r\\n")
case("ms bad length", "ms a x\\r\\nms a -1\\r\\nms a\\r\\nms\\r\\n")
case("ms F bad", "ms a 1 Fx\\r\\nx\\r\\n")
case("ms C bad", "ms a 1 Cx\\r\\nx\\r\\n")
case("ms T bad", "ms a 1 Tx\\r\\nx\\r\\n")
case("ms k c O", "ms kc 1 k c O5\\r\\nx\\r\\n")
case("ms q ok", "ms qq 1 q\\r\\nx\\r\\nms qq 1 q ME\\r\\ny\\r\\n")
case("ms too large", "ms big 2000000\\r\\n\\{2000000*z}\\r\\nmg big v\\r\\n")
case("ms invalid mode swallow", "ms a 2 MZ\\r\\nxy\\r\\nmn\\r\\n")
case("md q", setv("dq", "x"), "md dq q\\r\\nmd dq q\\r\\nmd dq\\r\\n")
case("md C mismatch", setv("dc", "x"), "md dc C1\\r\\nmd dc Cx\\r\\n")
case("md k O", "md nope k O7\\r\\n")
case("ma q", setv("aq", "1"), "ma aq q\\r\\nma aq\\r\\nma nope q\\r\\n")
case("ma N q vivify", "ma vq N0 q\\r\\nma vq q\\r\\nma vq v\\r\\n")
case("ma N J v", "ma vj N0 J13 v\\r\\nma vj v\\r\\n")
case("ma modes", setv("am", "10"), "ma am MD v\\r\\nma am M- v\\r\\nma am M+ v\\r\\nma am Md v\\r\\nma am MI v\\r\\nma am Mx\\r\\n")
case("ma decr floor", setv("af", "3"), "ma af MD D10 v\\r\\n")
case("ma wrap", setv("aw", "18446744073709551615"), "ma aw v\\r\\n")
case("ma non numeric", setv("an", "abc"), "ma an\\r\\n")
case("ma C", setv("ac", "1"), "ma ac C1 v\\r\\nma ac C0 v\\r\\n")
case("ma k O", "ma nope k O8\\r\\n")
case("me missing key", "me\\r\\n")
case("me miss", "me nope\\r\\n")
case("me bad base64", "me !!!! b\\r\\n")
case("mn extra", "mn a b c\\r\\n")
case("mg base64 bad", "mg !!!! b v\\r\\nmg Zm9 b v\\r\\n")

session("classic")
case("set get", setv("a", "hello", 3), "get a\\r\\n")
case("set zero length", "set z 0 0 0\\r\\n\\r\\nget z\\r\\n")
case("set noreply", "set nr 0 0 1 noreply\\r\\nx\\r\\nget nr\\r\\n")
case("set bad chunk noreply", "set nr 0 0 1 noreply\\r\\nxy\\r\\nget nr\\r\\n")
case("add existing", setv("ae", "x"), "add ae 0 0 1\\r\\ny\\r\\nget ae\\r\\n")
case("replace missing", "replace rm 0 0 1\\r\\ny\\r\\nget rm\\r\\n")
case("append missing", "append am 0 0 1\\r\\ny\\r\\n")
case("prepend", setv("pp", "b"), "prepend pp 0 0 1\\r\\na\\r\\nget pp\\r\\n")
case("append keeps flags", setv("af", "a", 7), "append af 9 0 1\\r\\nb\\r\\nget af\\r\\n")
case("cas noreply", setv("cn", "x"), "cas cn 0 0 1 1 noreply\\r\\ny\\r\\nget cn\\r\\n")
case("cas bad", "cas cn 0 0 1 x\\r\\ny\\r\\n")
case("incr missing", "incr im 1\\r\\ndecr im 1\\r\\n")
case("incr noreply", setv("in", "1"), "incr in 5 noreply\\r\\nget in\\r\\n")
case("decr below zero", setv("db", "5"), "decr db 10\\r\\nget db\\r\\n")
case("incr grows", setv("ig", "99"), "incr ig 1\\r\\nget ig\\r\\n")
case("decr shrinks pads", setv("ds", "100"), "decr ds 1\\r\\nget ds\\r\\ndecr ds 99\\r\\nget ds\\r\\n")
case("incr empty value", "set ie 0 0 0\\r\\n\\r\\nincr ie 1\\r\\n")
case("touch hit", setv("th", "x"), "touch th 0\\r\\ntouch th 10 noreply\\r\\n")
case("gat many", setv("g1", "1"), setv("g2", "2"), "gat 0 g1 g2 g3\\r\\ngats 0 g2\\r\\n")
case("get many keys", setv("m1", "1"), "get " + " ".join("m%d" % (i % 3) for i in range(40)) + "\\r\\n")
case("delete noreply", setv("dn", "x"), "delete dn noreply\\r\\nget dn\\r\\n")
case("quit mid pipeline close", setv("qp", "x"), "get qp\\r\\nquit\\r\\nget qp\\r\\n")
case("verbosity levels", "verbosity 0\\r\\nverbosity 5\\r\\nverbosity 1 noreply\\r\\n")
case("binary magic close", "\\x80\\x00\\x00\\x00")
case("binary magic after command close", "version\\r\\n\\x80\\x01")

session("stale")
# Stale-while-revalidate: md I, ms I, mg N and R, the W, X and Z flags.
case("mg N vivify", "mg v1 N30 v\\r\\nmg v1 v\\r\\nmg v1 v t\\r\\n")
case("mg N hit", setv("v2", "x"), "mg v2 N30 v\\r\\n")
case("mg N q k O miss", "mg v3 N0 s v q k O1\\r\\nmg v3 s\\r\\n")
case("mg N no v", "mg v4 N10 s t f c\\r\\nmg v4 s\\r\\n")
case("md I then mg", setv("s1", "x"), "md s1 I\\r\\nmg s1 v\\r\\nmg s1 v\\r\\n",
     "ms s1 1\\r\\ny\\r\\nmg s1 v\\r\\n")
case("md I T", setv("s2", "x"), "md s2 I T30\\r\\nmg s2 t v\\r\\nmd s2 I q\\r\\nmg s2 v\\r\\n")
case("md I missing", "md nope I\\r\\nmd nope I q\\r\\n")
case("md I cas", setv("s3", "x"), "md s3 I C1\\r\\nmg s3 c\\r\\n")
case("mg R", setv("r1", "x", exp=100), "mg r1 R30 v\\r\\nmg r1 R200 v\\r\\nmg r1 R200 v\\r\\n")
case("mg R no ttl", setv("r2", "x"), "mg r2 R30 v\\r\\n")
case("ms I old cas", setv("i1", "x"), "ms i1 1 C1 c\\r\\ny\\r\\nms i1 1 I C1\\r\\nz\\r\\nmg i1 v t\\r\\nmg i1 v\\r\\n")
case("ms I matching cas", "ms i2 1 c\\r\\nx\\r\\nmg i2 c\\r\\n")
case("ms I missing", "ms i3 1 I C5\\r\\nx\\r\\nms i3 1 I\\r\\nx\\r\\nmg i3 v\\r\\n")
case("ms I without C", setv("i4", "x"), "md i4 I\\r\\nms i4 1 I\\r\\ny\\r\\nmg i4 v\\r\\n")

session("binary keys")
# A key stored with ms b keeps its "binary" bit: mg k and me show base64.
case("ms b then mg k", "ms Zm9v 2 b\\r\\nhi\\r\\nmg foo k v\\r\\nmg Zm9v b k v\\r\\n")
case("ms b then me", "me foo\\r\\nme Zm9v b\\r\\n")
case("md plain key of a b item", "md foo k\\r\\nmg foo k\\r\\n")
case("set then mg b k", setv("bar", "x"), "mg YmFy b k\\r\\nme bar\\r\\nme YmFy b\\r\\n")
case("mg b k miss", "mg bm9wZQ== b k\\r\\nmg nope k b\\r\\n")
case("ms b k c O", "ms Zm9vYg== 1 b k O1\\r\\nx\\r\\nmg foob k s\\r\\n")
case("me flags and size", "ms me1 5 F3\\r\\nhello\\r\\nme me1\\r\\nme me1 x y\\r\\n")
case("me big item class", "set me2 0 0 5000\\r\\n\\{5000*v}\\r\\nme me2\\r\\n")

session("admin")
# Commands for machinery slcache does not have: checked, and answered, as
# memcached does.  One crawl only: memcached answers BUSY while it runs (and
# stops and starts its crawler thread in the background: no disable here).
case("lru_crawler crawl all", "lru_crawler crawl all\\r\\n")
case("lru_crawler bad classes", "lru_crawler crawl 0\\r\\nlru_crawler crawl 64\\r\\n"
     "lru_crawler crawl x\\r\\nlru_crawler crawl 1,x\\r\\nlru_crawler crawl -1\\r\\n")
case("lru_crawler settings", "lru_crawler tocrawl 5\\r\\nlru_crawler tocrawl x\\r\\n"
     "lru_crawler sleep 1000001\\r\\nlru_crawler sleep 10\\r\\nlru_crawler x\\r\\n"
     "lru_crawler\\r\\nlru_crawler crawl\\r\\nlru_crawler enable\\r\\n")
case("lru", "lru mode flat\\r\\nlru mode segmented\\r\\nlru mode x\\r\\nlru mode\\r\\n"
     "lru tune 10 25 0.1 2\\r\\nlru tune 60 25 0.1 2\\r\\nlru tune 10 25 0 2\\r\\n"
     "lru tune 10 25 x 2\\r\\nlru tune 1 2 3\\r\\nlru temp_ttl 5\\r\\nlru temp_ttl x\\r\\n"
     "lru x\\r\\nlru mode flat noreply\\r\\nlru\\r\\n")
case("refresh_certs stats extstore bget", setv("bg", "x"),
     "refresh_certs\\r\\nstats extstore\\r\\nbget bg nope\\r\\nbget\\r\\n")
case("slabs reassign", "slabs reassign 1 1\\r\\nslabs reassign 0 2\\r\\nslabs reassign -1 2\\r\\n"
     "slabs reassign 1 64\\r\\nslabs reassign x 2\\r\\nslabs reassign 1 2 3\\r\\n")

session("flag errors")
# The text of the last bad flag wins, in the client's order; a bad F keeps
# the text before it; base64 keys decode as memcached's lenient decoder.
for line in ["mg k RE FS P", "mg k FS DI", "mg k DI FS", "mg k FS", "mg k Tx Jx", "mg k Jx Tx",
             "mg k Dx b", "mg !!!! b Dx", "mg k Mxx Cx", "mg t3:k3 k RI L I b", "ma k Dx", "md k Cx",
             "mg ab=c b v", "mg a=== b", "mg ==== b", "mg Zg== b k", "mg Zg==Zm9v b k",
             "mg Z!g=!= b k", "md Z!m9v b k", "ma Zm9v!! b k O2"]:
    case("flag errors " + line, line + "\\r\\n")
case("md ma opaque too long", "md k f I c O" + "x" * 36 + " J1\\t k\\r\\nma nope O" + "1" * 33 + "\\r\\nmd k Ox Cx\\r\\n")
case("ms lenient base64", "ms Z:m:9:v 1 b k\\r\\nx\\r\\nmg Z:m:9:v b k v\\r\\nmg foo k\\r\\n")
case("ms flag errors swallow", "ms k 1 Rxxx b DS CE\\r\\nx\\r\\nms k 1 FS Tx\\r\\nx\\r\\nms k 1 Tx FS\\r\\nx\\r\\n")

session("item size")
# -I (1 MiB) limits memcached's whole item: header, cas, key, flags, value.
for n, fl, key in [(1048516, 0, "k"), (1048517, 0, "k"), (1048512, 5, "k"), (1048513, 5, "k"),
                   (1048507, 0, "k" * 10), (1048508, 0, "k" * 10), (1048576, 0, "k")]:
    case("item size %d flags %d key %d" % (n, fl, len(key)),
         "set %s %d 0 %d\\r\\n\\{%d*v}\\r\\nmg %s s\\r\\n" % (key, fl, n, n, key))
    case("ms item size %d flags %d key %d" % (n, fl, len(key)),
         "ms %s %d F%d\\r\\n\\{%d*v}\\r\\nmg %s s f\\r\\n" % (key, n, fl, n, key))
case("append to the item size", "set ap 0 0 1048500\\r\\n\\{1048500*v}\\r\\n",
     "append ap 0 0 16\\r\\n\\{16*w}\\r\\nappend ap 0 0 1\\r\\nw\\r\\nmg ap s\\r\\n")

session("split")
# Requests cut across packets, and pipelined ones.
case("split get line", setv("sp", "x"), "get \\{pause 50}sp\\r\\n")
case("split before lf", "set s1 0 0 1\\r\\nx\\r\\{pause 50}\\nget s1\\r\\n")
case("split command crlf", "set s2 0 0 1\\r\\{pause 50}\\nx\\r\\nget s2\\r\\n")
case("split data", "set s3 0 0 5\\r\\nab\\{pause 50}cde\\r\\nget s3\\r\\n")
case("split meta", "ms s4 2 T0\\r\\n\\{pause 50}ok\\r\\nmg \\{pause 50}s4 v s\\r\\n")
case("split every byte", "".join(ch + "\\{pause 5}" for ch in "get sp s3") + "\\r\\n")
case("pipelined mix", setv("p1", "1"), "incr p1 1\\r\\nget p1\\r\\nmg p1 v\\r\\nmn\\r\\n",
     "delete p1\\r\\nmg p1 v\\r\\nms p1 1 q\\r\\n2\\r\\nmg p1 v\\r\\n")
case("too large then more", "get sp\\r\\nset big 0 0 2000000\\r\\n\\{2000000*z}\\r\\nget sp\\r\\n")
case("too large noreply", "set big 0 0 2000000 noreply\\r\\n\\{2000000*z}\\r\\nget big\\r\\n")
case("ms too large keeps nothing", setv("tl", "x"), "ms tl 2000000 MA\\r\\n\\{2000000*z}\\r\\nmg tl v\\r\\n")
case("ms error waits for the data", "ms e 5 MZ\\r\\n\\{pause 50}abc\\{pause 50}de\\r\\nmn\\r\\n")
case("bad get drops the batch", "version\\r\\nmg k x\\r\\nget " + "k" * 251 + "\\r\\nversion\\r\\n")
case("pipelined bad then good", "bogus\\r\\nset p2 0 0 x\\r\\nset p2 0 0 1\\r\\ny\\r\\nget p2\\r\\n")

session("suites")
# memcached's t/ internals tests and the node memcached client's TOUCH test,
# as byte cases (their stats assertions are not comparable: see README).
case("npm memcached TOUCH changes lifetime", setv("test:1", "a" * 256, exp=1),
     "touch test:1 1\\r\\n\\{pause 1100}get test:1\\r\\n")
case("issue_29 zero-length values", "set issue29 0 0 0\\r\\n\\r\\nset issue29_b 0 0 0\\r\\n\\r\\n",
     "get issue29 issue29_b\\r\\n")
case("issue_42 ten small items", *[setv("key%d" % i, "B" * 10) for i in range(10)])
case("issue_14 expired items replaced",
     *["set key%d 0 2 66560\\r\\n\\{66560*B}\\r\\n" % i for i in range(10)],
     "\\{pause 3100}",
     *["set key%d 0 2 66560\\r\\n\\{66560*B}\\r\\n" % i for i in range(10, 20)],
     "get key0 key9\\r\\n")
case("issue_163 reclaimed then reset", "set key 0 1 66560\\r\\n\\{66560*A}\\r\\n",
     "\\{pause 2100}set key 0 0 66570\\r\\n\\{66570*B}\\r\\n",
     "delete key\\r\\nset key 0 0 66560\\r\\n\\{66560*A}\\r\\nmg key s\\r\\n")
case("strtol-testing", "verbosity invalid\\r\\nslabs automove invalid\\r\\n")

print("# Conformance cases for tests/slcache_proto.sh, written by")
print("# tests/slcache_conform_gen.py (edit that, not this).")
for line in cases:
    print(line)
