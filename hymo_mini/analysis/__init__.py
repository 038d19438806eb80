"""Counting the model without training it: arithmetic on a config, or a look at its modules.

    params.py  parameters per component, active and stored, counted two ways (section 12)
    flops.py    forward FLOPs and activation bytes per component, training memory (section 11)
    costs.py    compute and decode cache of one layer or a whole stack against T (section 1.1)
    trace.py    the shape tracer: every module call of a real forward pass, with its shapes
    memory.py  what one GPU holds when FSDP2 trains on N GPUs (``memory_per_gpu``)
    tables.py  the one table renderer (aligned text and HTML) the package's tables share
"""

from hymo_mini.analysis.costs import (
    LayerCost,
    attention_pairs,
    gdn_cost,
    hybrid_layer_counts,
    kv_cache_bytes_per_token,
    mha_cost,
    mla_cost,
    moe_cost,
    stack_cost,
)
from hymo_mini.analysis.flops import (
    DOCUMENT_ACTIVATIONS,
    DOCUMENT_FLOPS,
    ComparisonRow,
    ComparisonTable,
    activation_shapes,
    activation_table,
    flops_table,
    forward_flops,
    tokens_per_second,
    training_memory,
)
from hymo_mini.analysis.memory import (
    MemoryEstimate,
    activation_bytes_per_token,
    memory_per_gpu,
    saved_bytes,
)
from hymo_mini.analysis.params import (
    COMPONENTS,
    DOCUMENT_FIGURES,
    ParamRow,
    ParamTable,
    count_params,
    document_comparison,
    formula_params,
)
from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.analysis.trace import ShapeRow, ShapeTable, describe, trace_shapes

__all__ = [
    # params
    "COMPONENTS", "DOCUMENT_FIGURES", "ParamRow", "ParamTable", "count_params",
    "formula_params", "document_comparison",
    # flops
    "DOCUMENT_FLOPS", "DOCUMENT_ACTIVATIONS", "ComparisonRow", "ComparisonTable",
    "forward_flops", "flops_table", "activation_shapes", "activation_table",
    "training_memory", "tokens_per_second",
    # costs
    "LayerCost", "attention_pairs", "mha_cost", "mla_cost", "gdn_cost", "moe_cost",
    "kv_cache_bytes_per_token", "stack_cost", "hybrid_layer_counts",
    # trace
    "ShapeRow", "ShapeTable", "trace_shapes", "describe",
    # memory
    "MemoryEstimate", "memory_per_gpu", "activation_bytes_per_token", "saved_bytes",
    # tables
    "TextTable", "RenderedTable",
]
