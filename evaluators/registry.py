"""One generic registry for every extension seam (metrics, methods, agents, tracks...).

It lives in ``evaluators`` because that is the bottom layer: ``tasks_lib`` and ``flows`` import it
from here, and nothing here imports upward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A registry lookup named something that is not registered."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; known {kind}s: {', '.join(known) or '(none)'}")

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A named, ordered collection of extension objects.

    Entries are added explicitly (decorator or :meth:`add`), never by scanning folders or import
    strings. Looking up an unknown name raises :class:`UnknownNameError` listing the known names.
    A registry whose entries live in many modules may name the one function that imports them
    all (:meth:`load_with`): it runs once, at the first lookup, so importing the registry stays
    cheap for code that never looks anything up (the command line's ``--help``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._loader: Callable[[], object] | None = None

    def load_with(self, loader: Callable[[], object]) -> None:
        """Run ``loader`` (which imports the modules that register the entries) before the
        first lookup; :meth:`add` never runs it."""
        self._loader = loader

    def _loaded(self) -> dict[str, T]:
        loader, self._loader = self._loader, None
        if loader is not None:
            try:
                loader()
            except BaseException:
                self._loader = loader
                raise
        return self._entries

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; registering a name twice is a bug."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def deco(entry: T) -> T:
            return self.add(name, entry)

        return deco

    def get(self, name: str) -> T:
        """Return the entry called ``name`` or fail with the list of known names."""
        try:
            return self._loaded()[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.names()) from None

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._loaded())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded()

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())
