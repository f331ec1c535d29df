"""The export formats, pure: chatmem's own ``chatmem.export/1`` and the ChatGPT, Claude and
Open WebUI exports — detection (``detect``), the streaming source (``source``), the readers
(``native``, ``foreign``, ``reader``) and the records they yield (``records``). No SQL: the
writing side is ``store.exchange``."""
