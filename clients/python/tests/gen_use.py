"""Code that uses the module rpcd gen python wrote for rpcd serve's routes (builtin_api.py, beside
this file): exercise runs against rpcd serve (test_gen.py), and mypy --strict checks this file,
whose mistakes() must each be an error (an unused "type: ignore" fails the check):

    MYPYPATH=clients/python/src python3 -m mypy --strict clients/python/tests/gen_use.py
"""

from __future__ import annotations

import struct
from typing import List, Optional

import rpcd
from builtin_api import Api, Description, MultiArgsIn, RouteInfo, StatsReply, SumArgs


async def exercise(client: rpcd.Client) -> int:
    """Call every route of rpcd serve through the typed facade; AssertionError at the first
    answer that is wrong. Returns the number of checks."""
    api = Api(client)
    checks = 0

    def ok(cond: bool, what: str) -> None:
        nonlocal checks
        if not cond:
            raise AssertionError("check failed: " + what)
        checks += 1

    total: int = await api.Math.Sum(SumArgs(a=1, b=2))
    ok(total == 3, "Math.Sum 1+2 is %d" % total)
    ok(await api.Math.Sum() == 0, "no argument is the zero value")
    ok(await api.Math.Sum(SumArgs(b=5), timeout=5) == 5, "a field left out is 0")
    ok(await api.Bench.EchoString("héllo") == "héllo", "Bench.EchoString")
    ok(await api.Bench.MultiArgs(MultiArgsIn(i32=1, i64=2, b=True, f64=0.5, s="abc")) == 7.5, "Bench.MultiArgs")

    routes: Optional[List[RouteInfo]] = await api.Sys.Routes()
    ok(routes is not None and any(r.name == "Bench/StreamSink" and r.stream for r in routes),
       "Sys.Routes names the stream routes")
    one: Optional[List[Description]] = await api.Sys.Describe("Math/Sum")
    ok(one is not None and len(one) == 1 and one[0].kind == "typed"
       and (one[0].argument or {}).get("title") == "builtin.SumArgs", "Sys.Describe of one route")
    every = await api.Sys.Describe()
    ok(len(every or []) == len(routes or []), "Sys.Describe of every route")
    stats: StatsReply = await api.Sys.Stats()
    ok(stats.conns >= 1 and stats.goroutines > 0, "Sys.Stats")

    ok(await api.Sys.Ping() == b'"pong"', "Sys.Ping, raw")
    ok(await api.Bench.EchoPacket(b"\x00\x01\xff") == b"\x00\x01\xff", "Bench.EchoPacket, raw")
    ok(await api.Bench.NoArg() == b"42", "Bench.NoArg")

    sink = api.Bench.StreamSink()
    await sink.write(bytes(300_000))
    await sink.close_send()
    ok(struct.unpack(">Q", await sink.read())[0] == 300_000, "Bench.StreamSink counted the upload")
    await sink.wait()
    source = api.Bench.StreamSource(window=65536)
    await source.write(struct.pack(">Q", 100_000))
    ok(len(await source.read()) == 100_000, "Bench.StreamSource sent what was asked")

    try:
        await client.call("Math/Sum", b'{"a":9223372036854775807,"b":1}', codec=rpcd.Codec.JSON)
        ok(False, "an overflow fails")
    except rpcd.RpcError as e:
        ok(e.code == rpcd.Code.OUT_OF_RANGE and not e.unprocessed, "the server's error comes as it is: %s" % e)
    return checks


async def mistakes(api: Api) -> None:
    """Never run: each line is an error mypy must find."""
    await api.Math.Sum(SumArgs(a="x"))  # type: ignore[arg-type]
    await api.Math.Sum(SumArgs(c=1))  # type: ignore[call-arg]
    s: str = await api.Math.Sum(SumArgs(a=1))  # type: ignore[assignment]
    await api.Math.Product(SumArgs(a=1))  # type: ignore[attr-defined]
    await api.Sys.Ping({"a": 1})  # type: ignore[arg-type]
    n: int = api.Bench.StreamSink()  # type: ignore[assignment]
    first: RouteInfo = (await api.Sys.Routes())[0]  # type: ignore[index]
    print(s, n, first)
