"""The OpenAI-compatible endpoint: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Any OpenAI client (the official SDK, LangChain's ``ChatOpenAI``, IDE plugins) can use a
chatmem conversation as its model, with chatmem's memory: ``schemas`` (the request),
``errors`` (OpenAI's error shape, for ``/v1/*`` only), ``answers`` (a run's events as
``chat.completion`` or ``chat.completion.chunk`` objects) and ``routes``.  Which of the
client's messages are new, and the turn itself, belong to the turns room
(:mod:`chatmem.turns.history_match`, :mod:`chatmem.turns.history_turns`).
"""
