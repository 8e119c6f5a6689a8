"""Steps (@task), domain types, registries, settings, storage, ledger, sandboxes and agents."""
