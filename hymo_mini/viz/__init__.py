"""Plot and widget helpers, one module per topic (usually per book chapter).

Every plot is a plain function that takes the values a widget would set and returns a
``matplotlib.figure.Figure`` built with the object-oriented API (no pyplot state), so
the same function serves the static figure, the live ``interact`` and the unit test.

A module that owns files in ``figures/`` lists them in a module-level dict
``FIGURES = {"file_name.png": zero_argument_function_returning_a_figure}``;
``hymo-mini figures`` (``hymo_mini.figures``) finds every such dict and regenerates them.
"""
