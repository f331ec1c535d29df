"""Security below the store: password and token hashing (``passwords``), the secret box that
encrypts API keys and MCP headers (``secret_box``), the endpoint policy that refuses private
addresses (``endpoints``), the scrubber that keeps a key out of provider text (``redact``)
and the private state directory (``private_dir``). Imports nothing of chatmem's but
``errors`` and ``settings``."""
