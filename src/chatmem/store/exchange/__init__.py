"""Export and import (STORE-5).

``chatmem.export/1`` is written as a stream (:mod:`.native`) and every supported input —
chatmem's own export, ChatGPT, Claude and Open WebUI — is read as a stream (:mod:`.reader`)
into neutral :class:`~.records.ImportedConversation` values, which :mod:`.importer` writes in
one transaction.  :mod:`.exporter` turns stored rows into the export document.
"""
