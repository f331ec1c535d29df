"""What a tool is: the toolbox protocol a turn offers the model (``toolbox``), MCP servers'
links (``mcp_links``) and their last known lists (``known``), a /v1 client's own tools
(``client``), the built-in recall tool (``recall``), a tool's result as the model and the feed
see it (``results``) and the approvals a call may wait for (``approvals``)."""
