"""One module per Processing algorithm, all built on :mod:`.base` (conversions in :mod:`.layers`)."""
