"""The pure context engine (SPEC §2).  See ``chatmem.context.plan`` for the theory of operation.

Values in (messages, a summary, files, tool schemas, a profile, a tokenizer), a value out
(a :class:`Plan`).  No I/O, no environment, nothing else of chatmem is imported here.
"""
