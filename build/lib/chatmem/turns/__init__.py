"""Turns (SPEC §4): server-owned runs, their events, coordination across replicas.

- ``service`` — the turn service on ``app.state.turns``, its public seam: submit, redo,
  submit_history, switch_version, compact, edit_summary, each under
  ``service.conversation(…)`` (the conversation's lock); stop, watch, recover; owns the
  tasks that run turns.
- ``admission`` — the one unit that lets a turn in (every refusal, then the message and the
  ``running`` run); ``history_turns`` — a chat history's own part of it (``/v1``).
- ``manual_compaction`` — what "Compress now" folds and its price (CTX-11).
- ``runner`` — one turn: plan → (compaction) → model stream → tools → checkpoint → repeat.
- ``inputs`` — where the runner meets the engine, the store and the profiles.
- ``compaction`` — running a compaction the engine asked for, atomically (CTX-12).
- ``events`` / ``journal`` — numbered run events, published live and stored in batches.
- ``coordinator`` / ``redis_coordinator`` — live fan-out, stop signals, locks, liveness.
- ``recovery`` — runs of dead processes become ``interrupted`` (TURN-3).
- ``context_view`` — the context endpoint's cached plans.
- ``usage`` — spending and included usage (USE-1 … USE-3).

What a tool is lives in :mod:`chatmem.tools`; the database units in :mod:`chatmem.store.units`.
"""
