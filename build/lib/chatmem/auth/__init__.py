"""Authentication: password hashing, opaque secrets, browser sessions with CSRF, first start.

Three ways in, one principal (a user): an API token (``Authorization: Bearer …``), a browser
session cookie (``chatmem_session``, HttpOnly) whose writes must echo the JS-readable
``chatmem_csrf`` cookie in ``X-CSRF-Token`` (double submit), and a one-time sign-in link that
opens a browser session.  Secrets are random; only their SHA-256 digests are stored.
"""
