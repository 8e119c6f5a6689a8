"""Steps (@task), domain types, registries, settings, storage, ledger, sandboxes and agents.

Every process that runs medflows code imports this package first; it sets what must hold for
all of them before Prefect is imported (:func:`tasks_lib.orchestration.share_api_tls_contexts`:
Prefect's API clients share one TLS context instead of parsing the CA bundle for each)."""

from tasks_lib.orchestration import share_api_tls_contexts

share_api_tls_contexts()
