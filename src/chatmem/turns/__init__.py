"""Turns (SPEC §4): server-owned runs, their events, coordination across replicas, MCP tools.

- ``events`` — the numbered run events (TURN-6).
- ``coordinator`` / ``redis_coordinator`` — live fan-out, stop signals, locks, liveness.
- ``runner`` — executes one turn: plan → (compaction) → model stream → tools → checkpoint.
- ``runs`` — the durable side: creating, finishing and reading runs and their events.
"""
