"""A small multi-host web served on loopback addresses, for the demo and the tests.

Every host is a loopback address (127.0.0.x) on one port; each serves one
:class:`~demo.web.server.Site`. The server records every request it
receives as a site owner's access log would, so politeness is asserted from the
server's side.
"""
