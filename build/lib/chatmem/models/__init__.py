"""Model profiles and everything needed to call a model safely (SPEC §3, PROF-*).

``secrets`` (AES-GCM for stored API keys), ``ssrf`` (the endpoint policy and the pinned
httpx transport), ``client`` (streaming Chat Completions), ``profiles`` (the repository and
the engine's view of a profile), ``prices`` (genai-prices lookup).
"""
