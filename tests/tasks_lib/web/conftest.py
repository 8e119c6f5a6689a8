"""The page tests share one small ledger (built once for the package, in a storage root and
ledger of its own: :mod:`.site_ledger`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.isolated import own_storage_and_ledger

from tests.tasks_lib.web.site_ledger import SiteLedger, build_site_ledger


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteLedger]:
    """The ledger of :func:`build_site_ledger`, current while the package's tests run."""
    root = tmp_path_factory.mktemp("web-site")
    with own_storage_and_ledger(root):
        yield build_site_ledger(root)
