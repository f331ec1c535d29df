"""Export and import (STORE-5), the writing side.

Every supported input is read as a stream by the pure :mod:`chatmem.formats` into neutral
:class:`~chatmem.formats.records.ImportedConversation` values, which :mod:`.importer` writes
in one transaction (the CLI) and :mod:`.staged` in short ones (the server).
:mod:`.exporter` turns stored rows into the export document.
"""
