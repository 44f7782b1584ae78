// Package python holds rpcd's Python client, the package rpcd in src/rpcd
// (asyncio, standard library only; README.md). It has no Go code: its Go
// test, TestServerCalls, starts an in-process rpcd server with test routes
// through which the server calls the client back, and runs the Python
// tests that need them (tests/test_server_calls.py). The Python package's
// other tests run against `rpcd serve` on their own:
//
//	RPCD_BIN=/tmp/rpcd python3 -m unittest discover -s clients/python/tests
package python
