"""The module rpcd gen python wrote for rpcd serve's routes (builtin_api.py, gen's golden file)
against a real `rpcd serve` ($RPCD_BIN): every route through the typed facade (gen_use.py,
which mypy --strict checks in CI)."""

import unittest

from support import NO_BIN, RPCD_BIN, AsyncTest, Server, rpcd

import gen_use

server = None


def setUpModule():
    global server
    if RPCD_BIN:
        server = Server()


def tearDownModule():
    if server is not None and server.stop() != 0:
        raise AssertionError("rpcd serve exited badly after SIGTERM:\n" + "".join(server.log))


@unittest.skipUnless(RPCD_BIN, NO_BIN)
class Generated(AsyncTest):
    async def test_every_route_through_the_facade(self):
        c = await rpcd.connect(server.addr)
        try:
            self.assertEqual(await gen_use.exercise(c), 15)
        finally:
            await c.close()

    async def test_classes_round_trip_their_json(self):
        from builtin_api import Description, RouteInfo, StatsReply, SumArgs
        self.assertEqual(SumArgs(a=1).to_json(), {"a": 1, "b": 0})
        self.assertEqual(SumArgs.from_json({"a": 5, "c": 9}), SumArgs(a=5))
        r = RouteInfo.from_json({"name": "Sys/Ping", "overruns": 3})
        self.assertEqual((r.name, r.overruns, r.stream), ("Sys/Ping", 3, False))
        d = Description.from_json({"name": "Math/Sum", "kind": "typed", "argument": {"type": "object"}})
        self.assertEqual((d.argument, d.reply), ({"type": "object"}, None))
        self.assertEqual(StatsReply.from_json(None), StatsReply())


if __name__ == "__main__":
    unittest.main()
