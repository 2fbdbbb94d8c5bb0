"""The ``memorybot`` command line: ``main`` builds the app, ``common`` holds what every command
shares, and each other module adds one command or command group with ``register(app)``."""
