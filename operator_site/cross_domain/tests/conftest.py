"""The top layer's tests share the runs app's fixtures (a relief agent, a fixed instant, row reads)."""

from runs.tests.conftest import relief, row_of, t0  # noqa: F401
