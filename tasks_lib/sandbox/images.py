"""An external agent's own container image in the Docker engine
(:class:`~tasks_lib.sandbox.base.ContainerImage`): a tag already there, or a rootfs tarball
imported once under its digest (nothing can be pulled)."""

from __future__ import annotations

import hashlib
from typing import Any

from tasks_lib.sandbox.base import ContainerImage
from tasks_lib.sandbox.local import SandboxUnavailableError

AGENT_REPOSITORY = "medflows-agent"
"""Repository of agents' own images imported from a rootfs tarball (tag: its digest)."""


def agent_image(engine: Any, image: ContainerImage) -> str:
    """The tag of an agent's own image: ``image.tag`` (it must be in the engine: nothing is
    pulled), or ``medflows-agent:<digest>`` imported once from ``image.tarball``.

    Raises:
        SandboxUnavailableError: the tag is not in the engine, or the tarball is unreadable.
    """
    import docker

    if image.tag is not None:
        try:
            engine.images.get(image.tag)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailableError(f"image {image.tag} is not in the Docker engine (build "
                                          "or load it there first; nothing is pulled)") from None
        return image.tag
    assert image.tarball is not None
    name = image_name(image)
    try:
        engine.images.get(name)
    except docker.errors.ImageNotFound:
        engine.api.import_image_from_file(str(image.tarball), repository=AGENT_REPOSITORY,
                                          tag=name.rpartition(":")[2])
    return name


def image_name(image: ContainerImage) -> str:
    """The name an agent's image runs under: its tag, or ``medflows-agent:<digest>`` of its
    tarball (the first 16 hex digits of its SHA-256, so an edited tarball imports afresh).

    Raises:
        SandboxUnavailableError: the tarball cannot be read.
    """
    if image.tag is not None:
        return image.tag
    assert image.tarball is not None
    digest = hashlib.sha256()
    try:
        with image.tarball.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise SandboxUnavailableError(f"cannot read image tarball {image.tarball}: "
                                      f"{exc.strerror}") from None
    return f"{AGENT_REPOSITORY}:{digest.hexdigest()[:16]}"
