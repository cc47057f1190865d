"""The test suite: a package, so its shared helpers import one way (``from tests.prom_server import …``)."""
