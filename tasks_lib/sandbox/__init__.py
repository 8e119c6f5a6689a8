"""Sandboxes: one protocol (:mod:`.base`), two backends (bubblewrap :mod:`.local`, Docker
:mod:`.docker_backend`) and the isolation policy (:mod:`.isolation`)."""
