"""The front doors (``sample``, ``transform``, ``evidence``) and the conductor that owns a
run's order."""
