"""Track kits: one module per track (see :mod:`tasks_lib.tracks.base`)."""
