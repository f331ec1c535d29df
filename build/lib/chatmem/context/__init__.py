"""The pure context engine (SPEC §2).  See ``chatmem.context.plan`` for the theory of operation.

Values in (messages, a summary, files, tool schemas, a profile, a tokenizer), a value out
(a :class:`Plan`).  No I/O, no environment, nothing else of chatmem is imported here.
"""

from chatmem.context.compaction import (
    SUMMARY_SECTIONS,
    CompactionRequest,
    summary_message,
)
from chatmem.context.errors import DoesNotFit, EngineError, PlanInputError, ToolResultTooLarge
from chatmem.context.modes import effective_mode
from chatmem.context.plan import compaction_request, plan
from chatmem.context.plan_result import Breakdown, CompactionDecision, OversizedResult, Plan
from chatmem.context.policy import full_threshold
from chatmem.context.prices import PriceEstimate, price_for
from chatmem.context.tokens import (
    TOKENIZER_NAMES,
    Tokenizer,
    calibrated,
    calibration_factor,
    count_message,
    count_text,
    count_tools,
    get_tokenizer,
)
from chatmem.context.values import (
    MODES,
    AppContext,
    Conversation,
    File,
    Message,
    Mode,
    PinnedFacts,
    Prices,
    Profile,
    Summary,
    ToolCall,
)
from chatmem.context.window import TRUNCATION_MARKER

__all__ = [
    "MODES",
    "SUMMARY_SECTIONS",
    "TOKENIZER_NAMES",
    "TRUNCATION_MARKER",
    "AppContext",
    "Breakdown",
    "CompactionDecision",
    "CompactionRequest",
    "Conversation",
    "DoesNotFit",
    "EngineError",
    "File",
    "Message",
    "Mode",
    "OversizedResult",
    "PinnedFacts",
    "Plan",
    "PlanInputError",
    "PriceEstimate",
    "Prices",
    "Profile",
    "Summary",
    "Tokenizer",
    "ToolCall",
    "ToolResultTooLarge",
    "calibrated",
    "calibration_factor",
    "compaction_request",
    "count_message",
    "count_text",
    "count_tools",
    "effective_mode",
    "full_threshold",
    "get_tokenizer",
    "plan",
    "price_for",
    "summary_message",
]
