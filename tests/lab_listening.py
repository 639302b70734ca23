"""A Jupyter server extension for the tests alone: it prints LISTENING once the server takes
connections. Its start hook runs in jupyter_server's `_post_start`, a callback of the event loop
queued after the one that binds the port, so the line means the port is bound: the tests wait
for that line instead of trying the port until it answers."""

LISTENING = "slm-test: the server listens"


def _jupyter_server_extension_points():
    return [{"module": "lab_listening"}]


def _load_jupyter_server_extension(serverapp) -> None:  # noqa: ARG001 - (nothing to load)
    return None


async def _start_jupyter_server_extension(serverapp) -> None:  # noqa: ARG001
    print(LISTENING, flush=True)
